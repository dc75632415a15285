"""Every benchmark script still imports and parses its arguments against the current library.

The benchmarks are not run by the suite (they take minutes to hours), so a renamed or moved
library name breaks them silently: ``psrl_bimodality/study.py`` (and the three scripts that
import it) had failed at import since the architecture change moved ``_TransitionBelief``.
``--help`` imports a script's module-level dependencies and builds its parser, nothing more.
Bad lists of integers end in the parser's one-line error naming the option, not a traceback.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
SCRIPTS = sorted(p.relative_to(BENCH).as_posix() for p in BENCH.rglob("*.py")
                 if "out" not in p.parts and not p.name.startswith("_"))   # _proc.py: a module the scripts import


def _run(script: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
           "MPLBACKEND": "Agg"}
    return subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True, text=True,
                          cwd=BENCH, env=env, timeout=120)


def test_the_benchmarks_are_found():
    assert len(SCRIPTS) >= 20 and "psrl_bimodality/study.py" in SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS)
def test_benchmark_script_imports_and_parses(script):
    proc = _run(script, "--help")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "usage:" in proc.stdout


@pytest.mark.parametrize("script,args,option", [
    ("deepsea_study.py", ["--sizes", "10,10"], "--sizes"),
    ("deepsea_study.py", ["--seeds", "3-1"], "--seeds"),
    ("deepsea_study.py", ["--streams", "x"], "--streams"),
    ("deepsea_study.py", ["--cap", "5,6"], "--cap"),           # two caps for three sizes
    ("psrl_bimodality/study.py", ["--ablation", "base", "--seeds", "5-1"], "seeds"),
])
def test_bad_integer_lists_end_in_a_parser_error(tmp_path, script, args, option):
    out = ["--out", str(tmp_path / "study.jsonl")] if script == "deepsea_study.py" else []
    proc = _run(script, *args, *out)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert f"error: {option}:" in proc.stderr.strip().splitlines()[-1]


def test_psrl_grid_check_runs_and_saves_its_seeds(tmp_path):
    """A real (quick) run of ``psrl_bimodality/grid_check.py``, not just ``--help``: it had crashed on
    every run since ``run_seed`` returns a ``SeedResult`` instead of a dict of arrays."""
    proc = _run("psrl_bimodality/grid_check.py", "--quick", "--seeds", "1000", "--boundaries", "exclude",
                "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    saved = tmp_path / "grid_exclude_quick" / "seed-1000.npz"
    assert saved.is_file()
    with np.load(saved, allow_pickle=False) as data:
        assert {"normalized_return__pg_sampling", "normalized_return__pg_mean"} <= set(data.files)
    assert "| exclude | pg_mean | 1 |" in proc.stdout


def test_deepsea_study_refuses_to_append_to_an_existing_out_without_resume(tmp_path):
    """Records of another run (another cap, other code) are not silently reused."""
    out = tmp_path / "study.jsonl"
    out.write_text('{"size": 4}\n')
    proc = _run("deepsea_study.py", "--sizes", "4", "--seeds", "0", "--out", str(out))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "--resume" in proc.stderr.strip().splitlines()[-1]


def test_calibration_report_skips_the_cost_output(tmp_path):
    """``--report benchmarks/out/calibration-*.json`` (the documented command) also matches the
    ``--cost`` output, which has no coverage table: it is skipped, not a ``KeyError``."""
    cost = tmp_path / "calibration-cost.json"
    cost.write_text('{"C=64, fixed scale": {"fit": 0.01}}')
    proc = _run("calibration.py", "--report", str(cost))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "skipped" in proc.stderr


def _load(script: str, monkeypatch):
    """Import ``benchmarks/<script>`` as a module (its folder first on the path, as when run)."""
    import importlib.util

    monkeypatch.syspath_prepend(str(BENCH))
    spec = importlib.util.spec_from_file_location(f"_bench_{pathlib.Path(script).stem}", BENCH / script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_output_name_lists_every_setting_that_differs_from_its_default(monkeypatch):
    import argparse

    proc = _load("_proc.py", monkeypatch)
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sizes", type=int, nargs="*", default=None)
    parser.add_argument("--transitions", type=int, default="2000")   # a str default argparse converts
    parser.add_argument("--ls", type=float, default=0.5)
    parser.add_argument("--envs", default="grid,lake")
    parser.add_argument("--out", default="x")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    name = lambda *argv: proc.output_name("bench", parser.parse_args(argv), parser)  # noqa: E731
    assert name() == "bench.json"
    assert name("--out", "y", "--child", "z", "--transitions", "2000") == "bench.json"
    assert name("--sizes", "3") != name("--sizes", "4")
    assert name("--quick", "--sizes", "3", "4", "--transitions", "500", "--ls", "0.25", "--envs", "grid") == \
        "bench-quick-sizes3+4-transitions500-ls0.25-envsgrid.json"
    long = name("--sizes", *map(str, range(100)))
    assert len(long) <= 125 and long != name("--sizes", *map(str, range(101)))
    assert all(c not in long for c in "/, ")


def test_bench_core_runs_with_other_sizes_do_not_overwrite_each_other(tmp_path, monkeypatch):
    bench_core = _load("bench_core.py", monkeypatch)
    monkeypatch.setattr(bench_core, "ROOT", tmp_path)
    for sizes in ("3", "4"):
        assert bench_core.main(["--sizes", sizes]) == 0
    out = tmp_path / "benchmarks" / "out"
    assert sorted(p.name for p in out.iterdir()) == ["bench_core-sizes3.json", "bench_core-sizes4.json"]
    import json

    assert [r["grid"] for r in json.loads((out / "bench_core-sizes3.json").read_text())["rows"]] == ["3x3"]
    assert [r["grid"] for r in json.loads((out / "bench_core-sizes4.json").read_text())["rows"]] == ["4x4"]


def test_psrl_study_runs_with_other_episodes_or_full_do_not_reuse_each_others_files(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH / "psrl_bimodality"))
    study = _load("psrl_bimodality/study.py", monkeypatch)
    monkeypatch.setattr(study, "OUT", tmp_path)
    calls = []

    def run_one(seed, method, ablation, config, full):
        calls.append((seed, method, config.n_episodes, full))
        return {"expected_return": np.zeros(config.n_episodes), "cpu_seconds": np.zeros(1)}

    monkeypatch.setattr(study, "run_one", run_one)
    base = ["--ablation", "base", "--seeds", "0", "--methods", "pg_mean"]
    study.main(base)
    study.main(base)                                   # resumes: nothing to do
    study.main([*base, "--episodes", "7"])             # another configuration: computed
    study.main([*base, "--full"])
    assert calls == [(0, "pg_mean", 100, False), (0, "pg_mean", 7, False), (0, "pg_mean", 100, True)]
    with np.load(tmp_path / "base" / "seed-0-pg_mean.npz") as f:
        assert f["expected_return"].size == 100
    with np.load(tmp_path / "base-episodes7" / "seed-0-pg_mean.npz") as f:
        assert f["expected_return"].size == 7
    assert (tmp_path / "base-full" / "seed-0-pg_mean.npz").is_file()
