"""``corrpriors._fileio``: all-or-nothing writes and the output-location check (issue 11)."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap

import pytest

from corrpriors import _fileio
from corrpriors._fileio import atomic_write_bytes, atomic_write_many, check_output_dir

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def _listing(d):
    return sorted(p.name for p in d.iterdir())


def _old_state(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"old a")
    (tmp_path / "b.txt").write_bytes(b"old b")
    return {"a.txt": b"old a", "b.txt": b"old b"}


def test_many_writes_all_with_umask_permissions(tmp_path):
    old = os.umask(0o027)
    try:
        atomic_write_many({tmp_path / "a.txt": b"1", tmp_path / "sub" / "b.txt": b"22"})
    finally:
        os.umask(old)
    assert (tmp_path / "a.txt").read_bytes() == b"1"
    assert (tmp_path / "sub" / "b.txt").read_bytes() == b"22"
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o640
    assert _listing(tmp_path) == ["a.txt", "sub"]


def test_failure_while_writing_touches_nothing(tmp_path, monkeypatch):
    """An I/O error on the second file (injected at its fsync, after its bytes went out) leaves
    both previous files as they were and no temporary behind."""
    before = _old_state(tmp_path)
    calls = []
    real_fsync = os.fsync

    def failing_fsync(fd):
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(_fileio.os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="No space left"):
        atomic_write_many({tmp_path / "a.txt": b"new a", tmp_path / "b.txt": b"new b",
                           tmp_path / "c.txt": b"new c"})
    assert {n: (tmp_path / n).read_bytes() for n in _listing(tmp_path)} == before


def test_failure_while_renaming_restores_previous_files(tmp_path):
    """The third destination is a directory, so its rename fails after the first two were
    replaced: they get their old contents back, a new file is removed again."""
    before = _old_state(tmp_path)
    (tmp_path / "d.txt").mkdir()
    (tmp_path / "d.txt" / "keep").write_bytes(b"x")
    with pytest.raises(OSError):
        atomic_write_many({tmp_path / "a.txt": b"new a", tmp_path / "new.txt": b"n",
                           tmp_path / "d.txt": b"new d", tmp_path / "b.txt": b"new b"})
    assert _listing(tmp_path) == ["a.txt", "b.txt", "d.txt"]
    assert {n: (tmp_path / n).read_bytes() for n in ("a.txt", "b.txt")} == before
    assert (tmp_path / "d.txt" / "keep").read_bytes() == b"x"


def test_interrupt_while_renaming_restores(tmp_path, monkeypatch):
    before = _old_state(tmp_path)
    real = os.replace
    calls = []

    def interrupted(src, dst):
        calls.append(dst)
        if len(calls) == 2 and str(src).endswith(".tmp"):
            raise KeyboardInterrupt
        real(src, dst)

    monkeypatch.setattr(_fileio.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_many({tmp_path / "a.txt": b"new a", tmp_path / "b.txt": b"new b"})
    assert {n: (tmp_path / n).read_bytes() for n in _listing(tmp_path)} == before


def test_file_size_limit_truncates_nothing(tmp_path):
    """A real short write: under RLIMIT_FSIZE the second file can only be written in part
    (EFBIG, as on a full disk). Neither destination changes and no partial file remains."""
    resource = pytest.importorskip("resource")
    del resource
    _old_state(tmp_path)
    script = textwrap.dedent(f"""
        import resource, signal, sys
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
        from corrpriors._fileio import atomic_write_many
        d = {str(tmp_path)!r}
        try:
            atomic_write_many({{d + "/a.txt": b"a" * 100, d + "/b.txt": b"b" * 10000}})
        except OSError as exc:
            print(exc.errno)
            sys.exit(3)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == 3, proc.stderr
    assert int(proc.stdout) == errno.EFBIG
    assert _listing(tmp_path) == ["a.txt", "b.txt"]
    assert (tmp_path / "a.txt").read_bytes() == b"old a"
    assert (tmp_path / "b.txt").read_bytes() == b"old b"


def test_single_atomic_write_still_works(tmp_path):
    atomic_write_bytes(tmp_path / "x" / "y.bin", b"abc")
    assert (tmp_path / "x" / "y.bin").read_bytes() == b"abc"
    assert _listing(tmp_path / "x") == ["y.bin"]


def test_distinct_destinations_required(tmp_path):
    with pytest.raises(ValueError, match="distinct"):
        atomic_write_many({tmp_path / "a": b"1", str(tmp_path / "a"): b"2"})


def test_check_output_dir(tmp_path):
    check_output_dir(tmp_path)  # existing, writable
    check_output_dir(tmp_path / "new" / "deeper")  # creatable
    assert _listing(tmp_path) == []  # and nothing created
    (tmp_path / "f").write_text("x")
    with pytest.raises(NotADirectoryError, match=rf"^{tmp_path / 'f'} exists and is not a dir"):
        check_output_dir(tmp_path / "f")
    with pytest.raises(NotADirectoryError, match=rf"^{tmp_path / 'f'} is not a directory"):
        check_output_dir(tmp_path / "f" / "sub")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(NotADirectoryError, match="broken symbolic link"):
        check_output_dir(tmp_path / "dangling")


@pytest.mark.skipif(ROOT, reason="root writes into read-only directories")
def test_check_output_dir_read_only(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        with pytest.raises(PermissionError, match=rf"^{ro} is not writable"):
            check_output_dir(ro)
        with pytest.raises(PermissionError, match=rf"^{ro} is not writable"):
            check_output_dir(ro / "sub")
    finally:
        ro.chmod(0o755)


def test_check_output_dir_read_only_file_system(tmp_path, monkeypatch):
    """What a read-only mount answers (EROFS), injected so that it runs as root too."""
    def erofs(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(_fileio.tempfile, "mkstemp", erofs)
    with pytest.raises(OSError, match=rf"^cannot write in {tmp_path} \(Read-only file system\)$"):
        check_output_dir(tmp_path)


def test_reads_that_do_not_follow_links_refuse_them(tmp_path):
    target = tmp_path / "data.json"
    target.write_bytes(b"{}")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert _fileio.read_regular(link, 10) == b"{}"          # the default follows, as open() does
    with pytest.raises(_fileio.NotReadable, match="is a symbolic link, which is not followed"):
        _fileio.read_regular(link, 10, follow_symlinks=False)
    assert _fileio.read_regular(target, 10, follow_symlinks=False) == b"{}"


def test_a_link_swapped_in_after_the_check_is_not_opened(tmp_path, monkeypatch):
    # the check passes on the regular file; the path then becomes a link before the open, which
    # O_NOFOLLOW refuses (ELOOP) instead of reading the link's target
    if not hasattr(os, "O_NOFOLLOW"):
        pytest.skip("no O_NOFOLLOW on this system")
    secret = tmp_path / "secret"
    secret.write_bytes(b"outside")
    path = tmp_path / "fig.png"
    path.write_bytes(b"inside")
    real_check = _fileio.check_regular

    def check_then_swap(p, limit, **kw):
        real_check(p, limit, **kw)
        path.unlink()
        path.symlink_to(secret)

    monkeypatch.setattr(_fileio, "check_regular", check_then_swap)
    with pytest.raises(OSError) as info:
        _fileio.read_regular(path, 100, follow_symlinks=False)
    assert info.value.errno == errno.ELOOP
