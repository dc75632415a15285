"""Atomic file writes shared by every part of corrpriors that saves results.

One implementation (the runner's seed files, ``metrics.json``, figures' data and the outputs of
``corrpriors fit`` all go through it): write to a temporary file in the destination directory,
``fsync``, then :func:`os.replace`, so a reader only ever sees the old file or the complete new
one. Files get the permissions an ordinary ``open(path, "w")`` would give (``0o666`` minus the
process umask), not the ``0o600`` of :func:`tempfile.mkstemp`.
"""

from __future__ import annotations

import os
import pathlib
import tempfile
import threading

_UMASK_LOCK = threading.Lock()


def _current_umask() -> int:
    """The process umask (read by setting and restoring it, under a lock)."""
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


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
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_current_umask())
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


__all__ = ["atomic_write_bytes"]
