"""Atomic file writes shared by every part of corrpriors that saves results.

One implementation (the runner's seed files, ``metrics.json``, figures' data and the outputs of
``corrpriors fit`` all go through it): write to a temporary file in the destination directory,
``fsync``, then :func:`os.replace`, so a reader only ever sees the old file or the complete new
one; the directory is then ``fsync``-ed too (where the file system allows it), so the rename
itself survives a power cut. A rewritten file keeps the permission bits of the regular file it
replaces, as ``open(path, "w")`` would; a new one gets ``0o666`` minus the process umask, not
the ``0o600`` of :func:`tempfile.mkstemp`.

:func:`atomic_write_many` writes a set of files all or nothing, and :func:`check_output_dir`
checks, before any long work, that results can be written where they are meant to go.
:func:`open_regular` and :func:`read_regular` read a file a user named only if it is a regular
file of bounded size: a named pipe would block the open until something writes to it, and a
device such as ``/dev/zero`` never ends.
"""

from __future__ import annotations

import errno
import os
import pathlib
import secrets
import stat
import tempfile
import threading
from collections.abc import Iterable, Mapping
from typing import BinaryIO

_UMASK_LOCK = threading.Lock()


def _current_umask() -> int:
    """The process umask: read from ``/proc/self/status`` (Linux), which changes nothing;
    elsewhere by setting and restoring it, under a lock (another thread creating a file in
    that instant would get the wider mode).
    """
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def _unlink_quietly(path: str | os.PathLike) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _fsync_dir(directory: str | os.PathLike) -> None:
    """``fsync`` a directory, so the renames in it are on disk; best effort (some systems and
    file systems cannot open or sync a directory).
    """
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _new_mode(path: pathlib.Path) -> int:
    """Permission bits for a file written to ``path``: those of the regular file there now (not
    through a symbolic link, which is replaced, not followed), else ``0o666`` minus the umask.
    """
    try:
        info = os.lstat(path)
    except OSError:
        info = None
    if info is not None and stat.S_ISREG(info.st_mode):
        return stat.S_IMODE(info.st_mode) & 0o777
    return 0o666 & ~_current_umask()


def _write_temporary(path: pathlib.Path, data: bytes) -> str:
    """Write ``data`` completely (``fsync``) to a new temporary file next to ``path``; its name."""
    mode = _new_mode(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), mode)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        _unlink_quietly(tmp)
        raise
    return tmp


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temporary file in the same directory + rename).

    Parameters
    ----------
    path : path-like
        Destination; its parent directory is created if missing.
    data : bytes
    """
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _write_temporary(path, data)
    try:
        os.replace(tmp, path)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    _fsync_dir(path.parent)


def _link_backup(path: pathlib.Path) -> str | None:
    """Hard-link the current ``path`` to a fresh hidden name (``None`` if it does not exist or
    the file system cannot link).
    """
    if not os.path.lexists(path):
        return None
    while True:
        backup = path.parent / f".{path.name}.{secrets.token_hex(4)}.bak"
        try:
            os.link(path, backup, follow_symlinks=False)
            return str(backup)
        except FileExistsError:
            continue
        except OSError:
            return None


def atomic_write_many(files: Mapping[str | os.PathLike, bytes],
                      remove: Iterable[str | os.PathLike] = ()) -> None:
    """Write several files all or nothing (and remove others, as part of the same change).

    Every file is first written completely (``fsync``) to a temporary name next to its
    destination; only when all of them are written are they renamed into place. If writing any
    of them fails (a full disk, an I/O error, an interrupt), the temporaries are removed and no
    destination is touched. If a rename fails, the destinations already replaced get their
    previous contents back (from hard-linked backups taken just before the renames; a file
    system without hard links gets no backup, and its already replaced files stay new) and
    destinations that did not exist are removed again.

    Parameters
    ----------
    files : mapping of path-like to bytes
        Destination paths (distinct) and their contents; parent directories are created if
        missing.
    remove : iterable of path-like
        Paths (not among ``files``) to remove once every file is in place: each is first
        renamed aside to a hidden name in its directory (a symbolic link is removed, never its
        target), so a failure puts it back; the hidden names are deleted at the end.

    Raises
    ------
    OSError
        The first error met; nothing has been written then (up to the caveat above).
    """
    items = [(pathlib.Path(p), data) for p, data in files.items()]
    if len({os.path.abspath(p) for p, _ in items}) != len(items):
        raise ValueError("files: destination paths must be distinct")
    stale = [pathlib.Path(p) for p in remove]
    if {os.path.abspath(p) for p in stale} & {os.path.abspath(p) for p, _ in items}:
        raise ValueError("remove: a path is both written and removed")
    temps: list[tuple[str, pathlib.Path]] = []
    try:
        for path, data in items:
            path.parent.mkdir(parents=True, exist_ok=True)
            temps.append((_write_temporary(path, data), path))
    except BaseException:
        for tmp, _ in temps:
            _unlink_quietly(tmp)
        raise
    _replace_all(temps, stale)


def _aside_name(path: pathlib.Path) -> pathlib.Path:
    while True:
        aside = path.parent / f".{path.name}.{secrets.token_hex(4)}.old"
        if not os.path.lexists(aside):
            return aside


def _replace_all(temps: list[tuple[str, pathlib.Path]],
                 stale: list[pathlib.Path] | None = None) -> None:
    """Rename every temporary onto its destination and move every ``stale`` path aside; on
    failure restore the previous state.
    """
    backups: list[tuple[pathlib.Path, str | None, bool]] = []  # (dest, backup, existed)
    moved: list[tuple[pathlib.Path, pathlib.Path]] = []  # (stale path, where it was moved)
    try:
        for _, dest in temps:
            backups.append((dest, _link_backup(dest), os.path.lexists(dest)))
        done = 0
        try:
            for tmp, dest in temps:
                os.replace(tmp, dest)
                done += 1
            for path in stale or ():
                if os.path.lexists(path):
                    aside = _aside_name(path)
                    os.replace(path, aside)
                    moved.append((path, aside))
            for directory in dict.fromkeys([dest.parent for _, dest in temps]
                                           + [path.parent for path, _ in moved]):
                _fsync_dir(directory)
        except BaseException:
            for path, aside in reversed(moved):
                os.replace(aside, path)
            moved.clear()
            for dest, backup, existed in backups[:done]:
                if backup is not None:
                    os.replace(backup, dest)
                elif not existed:
                    _unlink_quietly(dest)
            raise
        for _, aside in moved:
            try:
                os.unlink(aside)
            except OSError:  # already gone, or a directory: leave it hidden
                pass
    finally:
        for tmp, _ in temps:
            _unlink_quietly(tmp)
        for _, backup, _ in backups:
            if backup is not None:
                _unlink_quietly(backup)


def check_output_dir(path: str | os.PathLike) -> None:
    """Check that ``path`` is, or can be created as, a directory this process can write to.

    Meant to run before long work whose results go there. Nothing is left behind: the check
    creates and removes a temporary file in ``path`` (or, when ``path`` does not exist yet, a
    temporary directory in its nearest existing ancestor), which also catches read-only file
    systems and access rules that permission bits do not show.

    Parameters
    ----------
    path : path-like

    Raises
    ------
    NotADirectoryError
        ``path`` or one of its ancestors exists and is not a directory.
    PermissionError
        The location is not writable.
    OSError
        Any other reason it cannot be written (read-only file system, ...); the message is
        one line naming the path.
    """
    path = pathlib.Path(path)
    probe = path
    while not os.path.lexists(probe):
        if probe.parent == probe:
            break
        probe = probe.parent
    if os.path.islink(probe) and not probe.exists():
        raise NotADirectoryError(f"{probe} is a broken symbolic link")
    if not probe.is_dir():
        what = "exists and is not a directory" if probe == path else "is not a directory"
        raise NotADirectoryError(f"{probe} {what}")
    try:
        if probe == path:
            fd, tmp = tempfile.mkstemp(prefix=".corrpriors-write-check.", dir=probe)
            os.close(fd)
            os.unlink(tmp)
        else:
            os.rmdir(tempfile.mkdtemp(prefix=".corrpriors-write-check.", dir=probe))
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise PermissionError(f"{probe} is not writable ({reason})") from None
        raise OSError(f"cannot write in {probe} ({reason})") from None


class NotReadable(OSError):
    """A file refused before it is read: not a regular file, or larger than the limit
    (:class:`TooLarge`). ``str(exc)`` says why ("is a named pipe (FIFO), not a regular file").
    """


class TooLarge(NotReadable):
    """A file refused because it holds more bytes than the limit."""


_KINDS = ((stat.S_ISDIR, "is a directory, not a file"),
          (stat.S_ISFIFO, "is a named pipe (FIFO), not a regular file"),
          (stat.S_ISCHR, "is a character device, not a regular file"),
          (stat.S_ISBLK, "is a block device, not a regular file"),
          (stat.S_ISSOCK, "is a socket, not a regular file"),
          (stat.S_ISLNK, "is a symbolic link, which is not followed here"))


def _check_regular(info: os.stat_result, limit: int) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise NotReadable(next((why for test, why in _KINDS if test(info.st_mode)),
                               "is not a regular file"))
    if info.st_size > limit:
        raise TooLarge(f"is {info.st_size:,} bytes, more than the {limit:,} read")


def check_regular(path: str | os.PathLike, limit: int, *, follow_symlinks: bool = True) -> None:
    """Refuse, without opening it, a ``path`` that is not a regular file or holds more than
    ``limit`` bytes; with ``follow_symlinks=False`` a final symbolic link is refused too (not
    followed).

    Raises
    ------
    NotReadable
        Not a regular file (a directory, named pipe, device, socket, a link not followed), or
        too large.
    OSError
        It cannot be looked up (``FileNotFoundError``, ``PermissionError``, ...).
    """
    _check_regular(os.stat(path, follow_symlinks=follow_symlinks), limit)


def open_regular(path: str | os.PathLike, limit: int, *, follow_symlinks: bool = True) -> BinaryIO:
    """Open a regular file of at most ``limit`` bytes for binary reading.

    :func:`check_regular` first, so a named pipe is refused before an open could block; the open
    itself does not block (``O_NONBLOCK``) and the opened file is checked again, in case the
    path was replaced in between. With ``follow_symlinks=False`` the open does not follow a
    final link either (``O_NOFOLLOW`` where the system has it), so a path swapped for a link
    between the check and the open is not read.

    Raises
    ------
    NotReadable, OSError
        As :func:`check_regular`, or the open fails.
    """
    check_regular(path, limit, follow_symlinks=follow_symlinks)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fh = os.fdopen(os.open(path, flags), "rb")
    try:
        _check_regular(os.fstat(fh.fileno()), limit)
    except BaseException:
        fh.close()
        raise
    return fh


def read_regular(path: str | os.PathLike, limit: int, *, follow_symlinks: bool = True) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (:func:`open_regular`); never more
    than ``limit + 1`` bytes are read, even from a file that grows meanwhile.

    Raises
    ------
    NotReadable, OSError
        As :func:`open_regular`, or it grew beyond ``limit`` while read.
    """
    with open_regular(path, limit, follow_symlinks=follow_symlinks) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(f"is more than the {limit:,} bytes read (it grew while read)")
    return data


__all__ = ["NotReadable", "TooLarge", "atomic_write_bytes", "atomic_write_many", "check_output_dir", "check_regular",
           "open_regular", "read_regular"]
