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
