"""Data safety of ``corrpriors reproduce`` (issue 11): a result's identity includes its configuration,
nothing of another configuration is reused or overwritten, concurrent runs never crash halfway,
unusable output locations and bad seed lists give one clear line, loky workers die with the runner.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import stat
import subprocess
import sys
import time

import pytest

import toy_experiment as toy
from corrpriors.cli import main
from corrpriors.runner import ConfigMismatch, OutputError, RunLocked, _io
from corrpriors.runner._run import MAX_SEED, MAX_SEEDS, parse_seeds, plan_run, run_experiment
from fifo_guard import FifoGuard

TESTS = pathlib.Path(__file__).resolve().parent
SRC = TESTS.parent / "src"
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), str(TESTS)]), MPLBACKEND="Agg")
TOY_CLI = [sys.executable, str(TESTS / "toy_experiment.py"), "reproduce", toy.NAME, "--no-progress", "--no-plot"]


pytestmark = pytest.mark.usefixtures("toy_registered")   # (conftest)


def quiet(**kw):
    return run_experiment(toy.NAME, jobs=1, progress=False, echo=None, plot=False, **kw)


def cli(capsys, *args):
    code = main(["reproduce", toy.NAME, "--no-progress", "--no-plot", "--jobs", "1", *args])
    out, err = capsys.readouterr()
    return code, out, err


# ----------------------------------------------------------------------------- configuration identity


def test_quick_and_full_runs_keep_their_own_results(tmp_path):
    quick = quiet(quick=True, out=tmp_path)
    quick_metrics = quick.metrics_path.read_bytes()
    quick_seeds = {p.name: p.read_bytes() for p in (quick.out_dir / "seeds").iterdir()}
    full = quiet(out=tmp_path)
    assert full.computed_seeds == (0, 1, 2, 3)          # the quick seeds 0, 1 are not "consumed"
    assert full.out_dir != quick.out_dir
    assert quick.out_dir.name.startswith("quick-") and full.out_dir.name.startswith("paper-")
    again = quiet(quick=True, out=tmp_path)
    assert again.computed_seeds == () and again.skipped_seeds == (0, 1)
    assert {p.name: p.read_bytes() for p in (quick.out_dir / "seeds").iterdir()} == quick_seeds
    assert json.loads(quick.metrics_path.read_bytes())["metrics"] == json.loads(quick_metrics)["metrics"]
    assert json.loads(full.metrics_path.read_text())["seeds"] == [0, 1, 2, 3]


def test_a_seed_of_another_configuration_is_reported_never_recomputed(tmp_path, capsys):
    first = quiet(quick=True, out=tmp_path)
    _, js = _io.seed_paths(first.out_dir / "seeds", 0)
    meta = json.loads(js.read_text())
    meta["config"]["noise"] = 0.5                       # as if another configuration wrote it
    js.write_text(json.dumps(meta))
    before = js.read_bytes()
    for resume in (True, False):
        with pytest.raises(ConfigMismatch, match=r"seed-0\.json.*noise: 0\.5 there vs 0\.1 now"):
            quiet(quick=True, out=tmp_path, resume=resume)
        assert js.read_bytes() == before
    code, out, err = cli(capsys, "--quick", "--out", str(tmp_path))
    assert code == 2 and js.read_bytes() == before
    assert len(err.strip().splitlines()) == 1 and "another configuration" in err and "Traceback" not in err


def test_a_folder_recording_another_configuration_is_refused(tmp_path):
    first = quiet(quick=True, out=tmp_path)
    record = first.out_dir / "config.json"
    data = json.loads(record.read_text())
    data["config"]["n_points"] = 7
    record.write_text(json.dumps(data))
    with pytest.raises(ConfigMismatch, match="config.json records another configuration"):
        quiet(quick=True, out=tmp_path)


def test_a_second_run_of_the_same_configuration_is_refused_up_front(tmp_path, capsys):
    log = tmp_path / "log"
    log.mkdir()
    plan = plan_run(toy.NAME, config=toy.Config(log_dir=str(log)), n_seeds=2, out=tmp_path)
    _io.prepare_run_dir(plan.run_dir)
    with _io.RunLock(plan.run_dir):
        with pytest.raises(RunLocked, match=rf"another corrpriors run \(pid {os.getpid()}\) is writing"):
            quiet(config=toy.Config(log_dir=str(log)), n_seeds=2, out=tmp_path)
        code, _, err = cli(capsys, "--set", f"log_dir={log}", "--n-seeds", "2", "--out", str(tmp_path))
        assert code == 2 and "another corrpriors run" in err and len(err.strip().splitlines()) == 1
    assert not list(log.iterdir())                       # nothing ran
    assert quiet(config=toy.Config(log_dir=str(log)), n_seeds=2, out=tmp_path).computed_seeds == (0, 1)


def _concurrent_pair(out: pathlib.Path, first: list[str], second: list[str]) -> list[tuple[int, str]]:
    procs = [subprocess.Popen(TOY_CLI + extra + ["--jobs", "1", "--out", str(out)], env=ENV,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for extra in (first, second)]
    return [(p.wait(timeout=120), p.communicate()[1]) for p in procs]


def _check_concurrent(out: pathlib.Path, runs: list[tuple[int, str]], configs: set[str]) -> None:
    for code, err in runs:
        assert "Traceback" not in err, err
        assert code == 0 or (code == 2 and "another corrpriors run" in err), err
    assert any(code == 0 for code, _ in runs)
    found = {}
    for path in out.glob(f"{toy.NAME}/*/metrics.json"):
        summary = json.loads(path.read_text())
        found[summary["run"]["settings"]] = summary["seeds"]
    assert set(found) == configs                         # no configuration's results lost
    assert all(found[c] == ([0, 1] if c == "quick" else [0, 1, 2, 3]) for c in found)


def test_concurrent_runs_into_one_out_never_crash(tmp_path):
    _check_concurrent(tmp_path / "a", _concurrent_pair(tmp_path / "a", ["--quick"], []), {"quick", "paper"})
    _check_concurrent(tmp_path / "b", _concurrent_pair(tmp_path / "b", ["--quick"], ["--quick"]), {"quick"})


@pytest.mark.slow
def test_concurrent_runs_into_one_out_never_crash_ten_times(tmp_path):
    for i in range(10):
        _check_concurrent(tmp_path / f"a{i}", _concurrent_pair(tmp_path / f"a{i}", ["--quick"], []), {"quick", "paper"})
        _check_concurrent(tmp_path / f"b{i}", _concurrent_pair(tmp_path / f"b{i}", ["--quick"], ["--quick"]), {"quick"})


# ----------------------------------------------------------------------------- unusable locations


def _read_only_dir(tmp_path: pathlib.Path) -> pathlib.Path:
    if os.geteuid() != 0:
        d = tmp_path / "ro"
        d.mkdir()
        d.chmod(0o555)
        return d / "results"
    probe = pathlib.Path("/sys/corrpriors-test-results")
    try:  # root ignores permission bits; /sys refuses everyone
        probe.mkdir()
    except OSError:
        return probe
    probe.rmdir()
    pytest.skip("no read-only location available to this user")


@pytest.mark.parametrize("case", ["out_is_a_file", "seeds_is_a_file", "read_only"])
def test_unusable_output_location_is_one_line_and_exit_2(tmp_path, capsys, case):
    if case == "out_is_a_file":
        out = tmp_path / "results"
        out.write_text("not a folder")
        culprit = out
    elif case == "seeds_is_a_file":
        out = tmp_path / "results"
        run_dir = plan_run(toy.NAME, quick=True, out=out).run_dir
        run_dir.mkdir(parents=True)
        culprit = run_dir / "seeds"
        culprit.write_text("not a folder")
    else:
        out = culprit = _read_only_dir(tmp_path)
    code, stdout, err = cli(capsys, "--quick", "--out", str(out))
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert str(culprit) in lines[0] and ("not a directory" in lines[0] or "not writable" in lines[0])
    assert "kept" not in err and "Traceback" not in err and "Summary" not in stdout


# ----------------------------------------------------------------------------- seed lists


@pytest.mark.parametrize("text,message", [
    ("10-5", "reversed"), ("0,10-5", "reversed"), ("1,2,1", "more than once"), ("0,,2", "expected"),
    ("-3", "expected"), ("3-", "expected"), ("x", "expected"),
    ("0-200000000", "more than 100,000"), ("0-99999,100000-100001", "more than 100,000"),
])
def test_seed_lists_are_parsed_strictly(text, message):
    t = time.perf_counter()
    with pytest.raises(ValueError, match=message):
        parse_seeds(text)
    assert time.perf_counter() - t < 0.5                 # nothing huge is built before the check
    assert len(parse_seeds(f"0-{MAX_SEEDS - 1}")) == MAX_SEEDS


@pytest.mark.parametrize("args", [["--seeds", "0,10-5"], ["--seeds", "0-200000000"], ["--n-seeds", "200000000"]])
def test_bad_seed_lists_exit_2_before_any_work(tmp_path, capsys, args):
    code, _, err = cli(capsys, *args, "--out", str(tmp_path / "out"))
    assert code == 2 and "seeds" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_seeds_are_at_most_2_to_the_63_minus_1(tmp_path, capsys):
    """A 300-digit seed made the seed file's name too long: OSError and a traceback after the
    folder was created. Now refused up front, on one line naming seeds (the CLI exits 2)."""
    assert MAX_SEED == 2**63 - 1 and parse_seeds(f"{MAX_SEED - 1}-{MAX_SEED}") == [MAX_SEED - 1, MAX_SEED]
    for text in ("9" * 300, str(2**63), f"0-{2**63}"):
        with pytest.raises(ValueError, match=r"^seeds: expected integers at most 2\*\*63 - 1 \(a seed names its result "
                                             r"files\), got '") as info:
            parse_seeds(text)
        assert len(str(info.value)) < 260
    code, _, err = cli(capsys, "--seeds", "9" * 300, "--out", str(tmp_path / "out"))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "seeds: expected integers at most 2**63 - 1" in err
    assert "Traceback" not in err and not (tmp_path / "out").exists()
    for bad in ([2**63], [1.5], [-1], [True]):      # the API's list too (1.5 ran as seed 1)
        with pytest.raises(ValueError, match=r"^seeds: expected an integer in \[0, 9223372036854775807\], got "):
            quiet(seeds=bad, out=tmp_path / "api")


def test_a_scheduler_without_a_cluster_backend_is_refused(tmp_path, capsys):
    """--scheduler with the default loky backend was silently ignored (the seeds ran here)."""
    code, _, err = cli(capsys, "--scheduler", "tcp://cluster:8786", "--out", str(tmp_path / "out"))
    assert code == 2 and err.strip().splitlines() == [
        "corrpriors reproduce: error: scheduler: a cluster address ('tcp://cluster:8786') needs --backend dask or "
        "ray; the loky backend runs the seeds on this machine and would ignore it"]
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="^scheduler: a cluster address .* needs --backend dask or ray"):
        quiet(scheduler="auto", out=tmp_path / "api")
    assert not (tmp_path / "api").exists()


# ----------------------------------------------------------------------------- workers


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc to watch the worker processes")
def test_loky_workers_exit_promptly_when_the_runner_is_killed(tmp_path):
    log = tmp_path / "log"
    log.mkdir()
    runner = subprocess.Popen(TOY_CLI + ["--set", "sleep=60", "--set", f"log_dir={log}", "--n-seeds", "2",
                                         "--jobs", "2", "--out", str(tmp_path / "out")],
                              env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(list(log.glob("call-*"))) < 2:
            time.sleep(0.05)
        workers = sorted({int(p.name.split("-")[2]) for p in log.glob("call-*")})
        assert len(workers) == 2 and runner.pid not in workers
        runner.kill()
        runner.wait()
        t0 = time.monotonic()
        while any(_alive(w) for w in workers) and time.monotonic() - t0 < 10:
            time.sleep(0.05)
        gone_after = time.monotonic() - t0
        assert not any(_alive(w) for w in workers), "loky workers outlived the runner by 10 s"
        assert gone_after < 3.0
    finally:
        runner.kill()
        for w in workers:
            if _alive(w):
                os.kill(w, signal.SIGKILL)


# ----------------------------------------------------------------------------- the folder's own files


needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes")


@needs_fifo
@pytest.mark.parametrize("name", ["seeds/seed-0.json", "seeds/seed-0.npz", "config.json", "metrics.json"])
def test_a_named_pipe_in_the_run_folder_is_refused_never_read_nor_replaced(tmp_path, capsys, name):
    """A FIFO under one of the runner's own names in an existing --out blocked the run for ever
    (read_text waits for a writer); it is refused up front, naming it, and left as it is."""
    log = tmp_path / "log"
    log.mkdir()
    config = toy.Config(log_dir=str(log))
    plan = plan_run(toy.NAME, config=config, n_seeds=2, out=tmp_path / "o")
    _io.prepare_run_dir(plan.run_dir)
    fifo = plan.run_dir / name
    os.mkfifo(fifo)
    with FifoGuard(fifo) as guard:
        with pytest.raises(OutputError, match=rf"{re.escape(str(fifo))}: is a named pipe \(FIFO\), not a "
                                              r"regular file; it is (neither read nor|not) replaced"):
            quiet(config=config, n_seeds=2, out=tmp_path / "o")
        code, out, err = cli(capsys, "--set", f"log_dir={log}", "--n-seeds", "2", "--out", str(tmp_path / "o"))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "named pipe" in err and "Traceback" not in err
    assert not guard.opened and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert list(log.iterdir()) == []                    # refused before any seed ran


@pytest.mark.parametrize("suffix", [".npz", ".json"])
def test_an_oversized_seed_file_is_corrupt_and_recomputed_unread(tmp_path, monkeypatch, suffix):
    first = quiet(quick=True, out=tmp_path)
    config_json = json.loads((first.out_dir / "config.json").read_text())["config"]
    monkeypatch.setattr(_io, "MAX_SEED_NPZ_BYTES" if suffix == ".npz" else "MAX_JSON_BYTES", 100)
    read = []
    real = _io.read_regular
    monkeypatch.setattr(_io, "read_regular", lambda path, limit: read.append(path.name) or real(path, limit))
    notes: list[str] = []
    found = _io.load_seed(first.out_dir / "seeds", 0, experiment=toy.NAME, config_json=config_json, notes=notes)
    assert found is None and len(notes) == 1
    assert f"seed-0{suffix} is " in notes[0] and "more than the 100 read" in notes[0] and "recomputed" in notes[0]
    assert read == (["seed-0.json", "seed-0.npz"] if suffix == ".npz" else ["seed-0.json"])


def test_a_seed_npz_grown_past_the_limit_is_recomputed(tmp_path, monkeypatch, capsys):
    first = quiet(quick=True, out=tmp_path)
    npz, _ = _io.seed_paths(first.out_dir / "seeds", 0)
    monkeypatch.setattr(_io, "MAX_SEED_NPZ_BYTES", max(p.stat().st_size for p in npz.parent.glob("*.npz")))
    with open(npz, "ab") as fh:
        fh.write(b"\0")                                 # one byte past the limit: never read
    again = run_experiment(toy.NAME, jobs=1, progress=False, plot=False, quick=True, out=tmp_path)
    assert again.computed_seeds == (0,) and again.skipped_seeds == (1,)
    assert "seed 0: the stored result is unusable (seed-0.npz is" in " ".join(capsys.readouterr().out.split())


def test_read_metrics_refuses_a_file_larger_than_its_limit(tmp_path, monkeypatch):
    from corrpriors._fileio import TooLarge

    path = tmp_path / "metrics.json"
    path.write_text(json.dumps({"seeds": list(range(100))}))
    assert _io.read_metrics(path)["seeds"][-1] == 99
    monkeypatch.setattr(_io, "MAX_JSON_BYTES", 100)
    with pytest.raises(TooLarge, match="more than the 100 read"):
        _io.read_metrics(path)
