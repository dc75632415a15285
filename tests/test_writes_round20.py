"""Round 20 write-safety fixes: the run lock never follows a symbolic link, rewritten files
keep their permissions, the umask is read without changing it, renames are made durable.
"""

from __future__ import annotations

import os
import stat

import pytest

from corrpriors.runner import OutputError, _io


def test_run_lock_refuses_a_symlinked_lock_file_and_leaves_its_target_alone(tmp_path):
    precious = tmp_path / "precious.txt"
    precious.write_text("my notes\n")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / ".lock").symlink_to(precious)
    with pytest.raises(OutputError, match=r"\.lock: it is a symbolic link"):
        _io.RunLock(run_dir).acquire()
    assert precious.read_text() == "my notes\n"
    assert (run_dir / ".lock").is_symlink()


def test_run_lock_refuses_a_dangling_symlink_without_creating_its_target(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / ".lock").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OutputError, match="symbolic link"):
        _io.RunLock(run_dir).acquire()
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes")
def test_run_lock_refuses_a_lock_that_is_not_a_regular_file(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    os.mkfifo(run_dir / ".lock")
    with pytest.raises(OutputError, match=r"\.lock: it exists and is not a regular file"):
        _io.RunLock(run_dir).acquire()
    assert stat.S_ISFIFO(os.lstat(run_dir / ".lock").st_mode)


def test_run_lock_still_locks_a_regular_file(tmp_path):
    with _io.RunLock(tmp_path) as lock:
        assert (tmp_path / ".lock").read_text() == str(os.getpid())
        assert lock._fd is not None


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_a_rewritten_file_keeps_its_permission_bits(tmp_path):
    from corrpriors._fileio import atomic_write_bytes, atomic_write_many

    private = tmp_path / "metrics.json"
    private.write_bytes(b"old")
    os.chmod(private, 0o600)
    atomic_write_bytes(private, b"new")
    assert private.read_bytes() == b"new" and stat.S_IMODE(os.lstat(private).st_mode) == 0o600
    os.chmod(private, 0o640)
    atomic_write_many({private: b"newer", tmp_path / "fresh.json": b"x"})
    assert stat.S_IMODE(os.lstat(private).st_mode) == 0o640
    assert stat.S_IMODE(os.lstat(tmp_path / "fresh.json").st_mode) == 0o666 & ~_umask()


def test_a_symlinked_destination_does_not_lend_its_target_s_mode(tmp_path):
    from corrpriors._fileio import atomic_write_bytes

    target = tmp_path / "target"
    target.write_bytes(b"keep")
    os.chmod(target, 0o600)
    link = tmp_path / "link"
    link.symlink_to(target)
    atomic_write_bytes(link, b"new")
    assert not link.is_symlink() and link.read_bytes() == b"new"
    assert stat.S_IMODE(os.lstat(link).st_mode) == 0o666 & ~_umask()
    assert target.read_bytes() == b"keep"


def _proc_has_umask() -> bool:
    try:
        with open("/proc/self/status") as fh:
            return any(line.startswith("Umask:") for line in fh)
    except OSError:
        return False


@pytest.mark.skipif(not _proc_has_umask(), reason="no Umask in /proc/self/status")
def test_the_umask_is_read_without_changing_it(monkeypatch):
    from corrpriors import _fileio

    old = os.umask(0o027)
    try:
        def no_umask(mask):
            raise AssertionError("os.umask called")
        monkeypatch.setattr(os, "umask", no_umask)
        assert _fileio._current_umask() == 0o027
    finally:
        monkeypatch.undo()
        os.umask(old)


def test_the_directory_is_fsynced_after_the_renames(tmp_path, monkeypatch):
    from corrpriors._fileio import atomic_write_bytes, atomic_write_many

    real_fsync = os.fsync
    synced: list[tuple[str, bool]] = []   # (kind of fd, whether the destinations exist then)

    def spy(fd):
        is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
        synced.append(("dir" if is_dir else "file",
                       (tmp_path / "a").exists() and (tmp_path / "sub" / "b").exists()))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b").write_bytes(b"")
    atomic_write_bytes(tmp_path / "a", b"1")
    assert synced[-1] == ("dir", True)
    synced.clear()
    atomic_write_many({tmp_path / "a": b"2", tmp_path / "sub" / "b": b"3"})
    assert [kind for kind, _ in synced] == ["file", "file", "dir", "dir"]
    assert all(after for kind, after in synced if kind == "dir")
