"""A terminal a person reads (issue 22): 100 columns, short tables with every cited x, one number
format, "optimal" at the precision shown, run-time estimates and CPU time, no small untruths."""

from __future__ import annotations

import math
import os
import pathlib

import numpy as np
import pytest

import toy_experiment as toy
from corrpriors._format import mean_std, num, num_below
from corrpriors.runner import _run
from corrpriors.runner._run import RunEstimate, RunInterrupted, duration, format_table, run_experiment
from corrpriors.runner._session import closing_summary

WIDTH = 100


pytestmark = pytest.mark.usefixtures("toy_registered")   # (conftest)


def psrl_like_summary(n_x=41, step=50.0):
    """Eight PSRL methods over 0..2000 transitions, claims citing T = 50, 200, 350."""
    from corrpriors.experiments._psrl import METHODS

    xs = [step * i for i in range(n_x)]
    rng = np.random.default_rng(0)
    methods = {m: {"mean": rng.uniform(0.05, 1.0, n_x).tolist(), "std": rng.uniform(0, 0.2, n_x).tolist()}
               for m in METHODS}
    methods["pg_mean"]["mean"][4], methods["pg_mean"]["std"][4] = 0.752, 5.66e-06   # at T = 200
    return {"experiment": "psrl-grid", "x": {"name": "transitions", "values": xs}, "seeds": [0, 1],
            "metrics": {"normalized_return": {"better": "higher", "methods": methods}},
            "extra": {"table_x": [50.0, 200.0, 350.0],
                      "notes": ["a long note " * 20],
                      "claims": [{"claim": "tunnel world: pg: 90% of the way to the optimum in at most half "
                                           "Dirichlet's transitions, at 50 transitions",
                                  "holds": True, "detail": "x" * 400}]},
            "run": {"claims": "indicative (2 seeds, quick settings; see README for the paper-scale verdict)"}}


def test_tables_fit_100_columns_and_show_every_cited_x():
    text = format_table(psrl_like_summary())
    lines = text.splitlines()
    assert max(map(len, lines)) <= WIDTH, max(lines, key=len)
    headers = [line.split() for line in lines if line.strip().startswith("transitions")]
    shown = {h for header in headers for h in header[1:]}
    assert {"0", "50", "200", "350", "2,000"} <= shown          # the ends and every x a claim cites
    assert "x" * 50 not in text                                 # the details stay in metrics.json
    assert "0.752±0.000" in text and "5.66e-06" not in text     # one format: std at the mean's decimals
    assert "[met] tunnel world: pg: 90% of the way" in text


@pytest.mark.parametrize("goal", ["of the optimal return", "of the random-to-optimal gap"])
@pytest.mark.parametrize("x_name", ["transitions", "episodes"])
def test_psrl_claim_statements_fit_one_line(x_name, goal):
    """Each PSRL claim, as the terminal prints it (``    [not met] <claim>``), fits 100 columns."""
    from corrpriors.experiments._psrl import GOAL_OF_GAP, GOAL_OF_OPTIMUM, METHODS, claims_check

    assert goal in (GOAL_OF_GAP, GOAL_OF_OPTIMUM)

    key = f"{x_name}_to_level_mean_curve"
    eff = {"level_fraction": 0.9, "level": 0.9,
           "methods": {m: {key: 100.0 if m.startswith("pg") else None, "area_under_curve": 0.5}
                       for m in METHODS}}
    claims = claims_check(eff, METHODS, x_name, "queueing network", 2000.0, goal=goal)
    assert [c.holds for c in claims] == [True, True]
    for claim in claims:
        line = f"    [not met] {claim.claim}"
        assert len(line) <= WIDTH, line
        assert "at most half" in claim.claim          # "markedly fewer" stated as what is checked


def test_table_columns_refuse_an_x_off_the_grid():
    summary = psrl_like_summary()
    summary["extra"]["table_x"] = [55.0]
    with pytest.raises(ValueError, match="not on the x grid"):
        format_table(summary)


def test_one_number_format():
    assert [num(v) for v in (0.0812, 0.752, -75.8, 1.0, 12345.6, 3e-6, 7)] == [
        "0.0812", "0.752", "-75.8", "1.00", "12,346", "3.00e-06", "7"]
    assert num(0.9996) == "1.00" and num_below(0.9996, 1.0) == "0.9996" and num_below(0.95, 1.0) == "0.950"
    assert mean_std(0.0812, 0.00312) == "0.0812±0.0031" and mean_std(-75.8, 2.13) == "-75.8±2.1"
    assert mean_std(None, None) == "nan"
    assert duration(12.3) == "12 s" and duration(196) == "3 min 16 s" and duration(3725) == "1 h 02 min"


def test_optimal_is_said_with_its_tolerance_and_the_digits_that_show_it():
    """FrozenLake: 0.9996 prints as 1.000 in a table; a note must not say "never optimal" without why."""
    from corrpriors.experiments.gym_psrl import OPTIMAL_TOL, PSRLExperiment
    from corrpriors.runner import SeedResult

    exp = PSRLExperiment("FrozenLake-v1", '{"desc": ["SFF", "FFF", "FHG"], "is_slippery": true}')
    config = exp.Config(steps=100, eval_every=50, methods=("pg_sampling",))
    xs = exp.x_values(config)
    curve = np.full(len(xs), 0.9996)
    result = SeedResult(
        curves={m: {"pg_sampling": curve} for m in exp.METRICS},
        extras={"optimal_return": np.array([0.5]), "uniform_return": np.array([0.1]),
                "optimal_success": np.array([0.8]), "optimal_horizon_return": np.array([0.8])},
        method_extras={"cpu_seconds": {"pg_sampling": np.array([1.0])}})
    metrics = {m: {"better": "higher", "methods": {"pg_sampling": {"mean": curve.tolist(), "std": [0.0] * len(xs)}}}
               for m in exp.METRICS}
    extra = exp.summarise_extra(config, {0: result, 1: result}, metrics)
    text = " ".join(extra["notes"])
    assert f"within {OPTIMAL_TOL:g} of 1" in text and "highest 0.9996" in text
    assert all(len(n) <= 200 for n in extra["notes"])


def test_a_run_prints_within_100_columns(tmp_path, capsys, monkeypatch):
    """The toy run as a user types it (relative --out): every line of the header, table and summary."""
    from corrpriors.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["reproduce", toy.NAME, "--quick", "--no-progress", "--set", "n_warnings=2"]) == 0
    out = capsys.readouterr().out
    assert max(map(len, out.splitlines())) <= WIDTH, max(out.splitlines(), key=len)
    assert "wall" in out and "CPU" in out


def test_closing_summary_states_cpu_and_claims_only_where_there_are_some():
    import dataclasses

    from corrpriors.runner._run import RunReport

    def report(claims, cpu, in_process):
        summary = {"seeds": [0, 1], "run": {"settings": "quick", "claims": "paper-scale"},
                   "extra": {"claims": [{"claim": "c", "holds": True}]} if claims else {}}
        return RunReport(name="sysid-X", out_dir=pathlib.Path("results/sysid-X/quick-1"), metrics_path=pathlib.Path(),
                         figures=(), computed_seeds=(0, 1), skipped_seeds=(), elapsed=1.0, summary=summary,
                         cpu_seconds=cpu, in_process=in_process)

    text = closing_summary([report(False, 100.0, False)], "results", 60.0, cpu=2.0)
    assert "claim" not in text                              # sysid/psrl have no claim checks
    assert "1 min 00 s wall, 1 min 42 s CPU" in text        # the workers' 100 s + this process's 2 s
    text = closing_summary([report(True, 100.0, True)], "results", 60.0, cpu=101.0)
    assert "1 min 41 s CPU" in text and "details behind each claim check" in text   # in-process: not twice
    assert dataclasses.fields(RunReport)


def test_ctrl_c_says_the_same_command_resumes():
    message = str(RunInterrupted("x", 1, 4, pathlib.Path("results/x")))
    assert "--resume" not in message and "the same command resumes" in message


def test_estimate_arithmetic():
    est = RunEstimate(5, 2, [(200.0, 190.0), (210.0, 200.0)], "seed 0")
    assert est.wall == pytest.approx(math.ceil(5 / 2) * 205.0)
    assert est.text() == ("estimate: measured on seed 0, 3 min 25 s wall, 3 min 15 s CPU per seed; 5 seeds on "
                          "2 workers: about 10 min 15 s wall (3 seeds in turn x 3 min 25 s), 16 min 15 s CPU "
                          "(5 x 3 min 15 s)")
    assert " ".join(line.strip() for line in est.lines()) == est.text()
    long = RunEstimate(100, 2, [(754.0, 754.0)], "seeds on disk")
    assert all(len(line) <= WIDTH for line in long.lines())
    assert "about 10 h 28 min wall (50 seeds in turn x 12 min 34 s), 20 h 57 min CPU" in " ".join(
        line.strip() for line in long.lines())


def test_a_long_run_says_its_estimate_first(tmp_path, monkeypatch):
    """From the first seed when nothing is measured yet, before the rest from the seeds on disk."""
    monkeypatch.setattr(_run, "ESTIMATE_ABOVE", 0.0)
    said: list[str] = []
    config = toy.Config(sleep=0.2)
    run_experiment(toy.NAME, config=config, n_seeds=3, jobs=1, out=tmp_path, progress=False, plot=False,
                   echo=said.append)
    [line] = [s for s in said if "estimate:" in s]
    assert line.startswith("  estimate: measured on seed 0, ") and "per seed; 3 seeds on 1 worker" in line
    assert said.index(line) < next(i for i, s in enumerate(said) if "toy-runner: 3 seeds, mean" in s)
    said.clear()
    run_experiment(toy.NAME, config=config, n_seeds=5, jobs=1, out=tmp_path, progress=False, plot=False,
                   echo=said.append)
    [line] = [s for s in said if "estimate:" in s]
    assert "per seed; 2 seeds on" in line and "measured on the seeds on disk" in line
    assert said.index(line) == 2                                # before any seed runs
    said.clear()                                                # a short run says nothing
    monkeypatch.setattr(_run, "ESTIMATE_ABOVE", 60.0)
    run_experiment(toy.NAME, config=config, n_seeds=6, jobs=1, out=tmp_path, progress=False, plot=False,
                   echo=said.append)
    assert not [s for s in said if "estimate:" in s]


def test_progress_bar_fits_100_columns(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    run_experiment(toy.NAME, config=toy.Config(sleep=0.05), n_seeds=2, jobs=1, out=tmp_path, progress=True,
                   plot=False, echo=None)
    err = capsys.readouterr().err
    pieces = [p for line in err.split("\n") for p in line.split("\r") if p.strip()]
    assert pieces and max(map(len, pieces)) <= WIDTH
    assert os.environ["COLUMNS"] == "250"
