"""What ``corrpriors reproduce`` tells its user (issue 15): indicative claims at quick settings, a
closing summary, warnings in a log file instead of on the terminal, one line on Ctrl-C,
``--set key=value`` and no sentinels in ``metrics.json``."""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import pytest

import toy_experiment as toy
from corrpriors.cli import main

TESTS = pathlib.Path(__file__).resolve().parent
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS.parent / "src"), str(TESTS)]), MPLBACKEND="Agg")


pytestmark = pytest.mark.usefixtures("toy_registered")   # (conftest)


def cli(capsys, *args):
    code = main(["reproduce", toy.NAME, "--no-progress", "--jobs", "1", *args])
    out, err = capsys.readouterr()
    return code, out, err


def metrics(out: pathlib.Path) -> dict:
    [path] = out.glob(f"{toy.NAME}/*/metrics.json")
    return json.loads(path.read_text())


def test_closing_summary_and_warnings_only_in_the_log(tmp_path, capsys):
    code, out, err = cli(capsys, "--quick", "--set", "n_warnings=3", "--out", str(tmp_path))
    assert code == 0
    assert "toy warning" not in out + err and "UserWarning:" not in err   # nothing on the terminal
    summary = out[out.index("Summary:"):]
    [folder] = (tmp_path / toy.NAME).iterdir()
    assert f"results under {tmp_path}" in summary and f"{folder}/" in summary
    assert "2 seeds, custom settings" in summary and "metrics.json" in summary
    assert all(len(line) <= 100 or line.strip() in (f"{folder}/", f"corrpriors report {tmp_path}",
                                                     f"results under {tmp_path}") for line in summary.splitlines())
    for metric in ("error", "score"):   # every figure named; what it shows is in metrics.json and the report
        assert f"{toy.NAME}-{metric}.png/.pdf" in summary
        assert (folder / f"{toy.NAME}-{metric}.png").is_file()
    captions = [f["caption"] for f in metrics(tmp_path)["run"]["figures"]]
    assert [c.split(" against")[0] for c in captions] == [toy.METRIC_LABELS[m] for m in ("error", "score")]
    assert "warnings: 6 warnings collected, not shown: 6 UserWarning" in summary
    assert f"corrpriors report {tmp_path}" in summary
    log = (folder / "warnings.log").read_text()
    assert re.search(r"4 x UserWarning at .*toy_experiment\.py:\d+:\n +toy warning number 0", log)
    assert re.search(r"2 x UserWarning at .*toy_experiment\.py:\d+:\n +toy warning number 1", log)
    assert metrics(tmp_path)["run"]["warnings"] == {"count": 6, "by_category": {"UserWarning": 6},
                                                   "log": "warnings.log"}


def test_claims_are_indicative_unless_at_paper_scale(tmp_path, capsys):
    code, out, _ = cli(capsys, "--quick", "--out", str(tmp_path / "q"))
    status = "indicative (2 seeds, quick settings; see README for the paper-scale verdict)"
    assert code == 0 and metrics(tmp_path / "q")["run"]["claims"] == status
    assert f"claim checks: {status}" in out and "[met] a beats b" in out and "[holds]" not in out
    cli(capsys, "--n-seeds", "2", "--out", str(tmp_path / "p2"))
    assert metrics(tmp_path / "p2")["run"]["claims"].startswith("indicative (2 seeds, the paper's settings, 4 seeds")
    code, out, _ = cli(capsys, "--out", str(tmp_path / "p"))
    assert metrics(tmp_path / "p")["run"]["claims"] == "paper-scale"
    assert "[holds] a beats b" in out and "claim checks: indicative" not in out


def test_set_overrides_are_typed_and_recorded(tmp_path, capsys):
    code, _, err = cli(capsys, "--quick", "--set", "noise=0.5", "--set", "grid=3,4", "--set", "flag=yes",
                       "--set", "label=abc", "--set", "n_points=4", "--out", str(tmp_path))
    assert code == 0, err
    m = metrics(tmp_path)
    assert m["config"]["noise"] == 0.5 and m["config"]["grid"] == [3, 4] and m["config"]["flag"] is True
    assert m["config"]["label"] == "abc" and m["x"]["values"] == [0.0, 10.0, 20.0, 30.0]
    assert m["run"]["overrides"] == {"noise": 0.5, "grid": [3, 4], "flag": True, "label": "abc", "n_points": 4}
    assert m["run"]["settings"] == "custom"


@pytest.mark.parametrize("args,message", [
    (["--set", "noise=abc"], r"noise=abc \(toy-runner: Config.noise\): expected a number"),
    (["--set", "noise=inf"], "expected a finite number"),
    (["--set", "n_points=1.5"], "expected an integer"),
    (["--set", "flag=maybe"], "expected a boolean"),
    (["--set", "grid=1,x"], r"grid=1,x .*element 1.*expected an integer"),
    (["--set", "nope=1"], "nope: not a Config field of experiment toy-runner; fields: flag, grid"),
    (["--set", "noise"], "expected KEY=VALUE"),
    (["--set", "noise=1", "--set", "noise=2"], "given twice"),
    (["--set", "n_points=0"], "n_points: expected a positive integer"),
])
def test_set_rejects_bad_values_before_any_work(tmp_path, capsys, args, message):
    code, _, err = cli(capsys, "--quick", *args, "--out", str(tmp_path / "out"))
    assert code == 2 and re.search(message, err), err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_set_needs_one_experiment(tmp_path, capsys):
    assert main(["reproduce", "all", "--set", "scale=10", "--out", str(tmp_path)]) == 2
    assert "--set needs one experiment NAME" in capsys.readouterr().err


def test_sentinels_are_replaced_by_the_values_used(tmp_path, capsys):
    cli(capsys, "--quick", "--out", str(tmp_path))
    m = metrics(tmp_path)
    assert m["config"]["lengthscale"] == 3.0                  # 0 meant "the number of points"
    assert m["run"]["resolved"] == {"lengthscale": {"given": 0.0, "used": 3.0}}
    seed_config = json.loads(next((tmp_path / toy.NAME).glob("*/seeds/seed-0.json")).read_text())["config"]
    assert seed_config["lengthscale"] == 0.0                  # the identity is the configuration as given


def test_ctrl_c_prints_one_line_and_the_run_resumes(tmp_path):
    log = tmp_path / "log"
    log.mkdir()
    out = tmp_path / "out"
    args = [sys.executable, str(TESTS / "toy_experiment.py"), "reproduce", toy.NAME, "--no-plot", "--no-progress",
            "--set", "sleep=1.5", "--set", f"log_dir={log}", "--n-seeds", "4", "--jobs", "1", "--out", str(out)]
    # SIGINT back to its default in the child: a shell that started this suite in the background
    # ignores SIGINT, and Python then never raises KeyboardInterrupt
    proc = subprocess.Popen(args, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(list(log.glob("call-*"))) < 2:
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)                    # what Ctrl-C in a terminal sends
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    # what stays visible on a terminal: the text after the last carriage return of each line
    lines = [line.split("\r")[-1] for line in err.split("\n")]
    lines = [line for line in lines if line.strip()]
    assert proc.returncode == 130
    assert len(lines) == 1 and "Traceback" not in err, err
    match = re.fullmatch(r"stopped; (\d) of 4 seeds saved under (.+); the same command resumes from them", lines[0])
    assert match and int(match.group(1)) == 1                 # seed 0 finished, seed 1 was running
    saved = pathlib.Path(match.group(2))
    assert sorted(p.name for p in (saved / "seeds").glob("*.json")) == ["seed-0.json"]
