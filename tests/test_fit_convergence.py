"""Issue 22 finding 6 through the command line: ``corrpriors fit --learn-scale
--learn-lengthscale`` on a 30 x 3 table of counts on a 5 x 6 grid stopped at ``--max-iter``
1000 (and 5000), and the warning did not say what to do.

On 3d402a9/cd14b96 (EM M-steps) the tables below took: sparse 1,000 (not converged), walk
825 and 529, unstructured 28-55, and the shipped example 431 iterations; the joint M-step takes
6-88 on the 30 tables of ``benchmarks/bench_kernel_learning.py --cli`` and 37 on the example.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from corrpriors.cli import main


def _grid():
    return np.array([(i, j) for i in range(5) for j in range(6)], dtype=float)


def _walk(rng, n_steps):
    """Counts of a random walk on the 5 x 6 grid: stay (bumped into the wall), moved along x,
    moved along y; in the last column the wind pushes along y half of the time."""
    counts = np.zeros((30, 3), dtype=int)
    x, y = 2, 3
    for _ in range(n_steps):
        a = int(rng.integers(0, 4))
        if x == 4 and rng.random() < 0.5:
            a = 2
        dx, dy = [(1, 0), (-1, 0), (0, 1), (0, -1)][a]
        if 0 <= x + dx < 5 and 0 <= y + dy < 6:
            counts[x * 6 + y, 1 if dx else 2] += 1
            x, y = x + dx, y + dy
        else:
            counts[x * 6 + y, 0] += 1
    return counts


def _table(kind, seed):
    rng = np.random.default_rng(seed)
    if kind == "sparse":
        return rng.poisson(0.6, size=(30, 3))
    if kind == "iid":
        return rng.integers(0, 10, size=(30, 3))
    return _walk(rng, int(rng.integers(100, 800)))


def _fit(tmp_path, counts, *extra, capsys):
    np.savetxt(tmp_path / "counts.csv", counts, fmt="%d", delimiter=",")
    np.savetxt(tmp_path / "coords.csv", _grid(), fmt="%g", delimiter=",")
    out = tmp_path / "out"
    code = main(["fit", "--counts", str(tmp_path / "counts.csv"), "--coords",
                 str(tmp_path / "coords.csv"), "--learn-scale", "--learn-lengthscale",
                 "--out", str(out), "--overwrite", *map(str, extra)])  # refits into one folder
    err = capsys.readouterr().err
    assert code == 0
    return json.loads((out / "summary.json").read_text()), err


@pytest.mark.parametrize("kind, seed", [("sparse", 1000), ("sparse", 1001), ("walk", 1000),
                                        ("walk", 1001), ("iid", 1002)])
def test_30_by_3_tables_on_a_5_by_6_grid_converge(tmp_path, capsys, kind, seed):
    summary, err = _fit(tmp_path, _table(kind, seed), capsys=capsys)
    assert summary["converged"] and err == ""
    assert summary["n_iter"] <= 100  # --max-iter 1000


def test_shipped_example_converges_with_learned_scale_and_lengthscale(tmp_path, capsys):
    assert main(["fit", "--learn-scale", "--learn-lengthscale", "--quiet",
                 "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["converged"] and summary["n_iter"] <= 100  # 431 with EM


def test_warning_of_a_stopped_fit_says_what_to_try(tmp_path, capsys):
    """How far it was, the iterations the recent rate needs and the options to try, on one
    line; the results are written with converged false."""
    summary, err = _fit(tmp_path, _table("walk", 1000), "--max-iter", 5, capsys=capsys)
    assert not summary["converged"] and summary["n_iter"] == 5
    [line] = err.splitlines()
    assert line.startswith("corrpriors fit: warning: not converged in --max-iter 5 iterations "
                           "(--tol 1e-08): the objective still changed by ")
    assert "try --max-iter " in line and "a fixed --lengthscale" in line
    assert "summary.json: converged false" in line
    assert summary["warnings"][0]["message"] in line


def test_warning_when_the_scale_collapses_names_the_scale_options(tmp_path, capsys):
    """Rows with the prior mean's frequencies: the scale goes to 0 (geometrically: converged
    in tens of iterations); stopped early, the warning names a fixed scale or a prior."""
    flat = np.repeat(np.array([[2, 2, 2], [1, 1, 1], [3, 3, 3]]), 10, axis=0)
    summary, err = _fit(tmp_path, flat, "--max-iter", 6, capsys=capsys)
    assert not summary["converged"] and summary["scale"] < 0.02
    assert "a fixed --scale or --scale-prior 2 1 (the scale fell to" in err
    summary, err = _fit(tmp_path, flat, capsys=capsys)
    assert summary["converged"] and summary["n_iter"] <= 100 and summary["scale"] < 1e-6


def test_warning_after_a_single_iteration_has_no_nan(tmp_path, capsys):
    summary, err = _fit(tmp_path, _table("iid", 0), "--max-iter", 1, capsys=capsys)
    assert not summary["converged"]
    assert "nan" not in err and "try --max-iter 10" in err


def test_a_long_fit_says_its_time_bound_at_once(tmp_path, capsys, monkeypatch):
    """Issue 22 item 7: a run of more than about a minute says so before it goes on; here
    the threshold is lowered so that the example's first iteration crosses it."""
    from corrpriors.runner import fit as runner

    monkeypatch.setattr(runner, "ESTIMATE_FROM", 0.0)
    assert main(["fit", "--out", str(tmp_path / "a"), "--max-iter", "500"]) == 0
    [line] = capsys.readouterr().err.splitlines()
    assert re.fullmatch(r"corrpriors fit: the first iteration took \d+\.\d s: up to \S+ (s|min|h) "
                        r"for --max-iter 500 \(less if it converges sooner\)", line)
    assert main(["fit", "--out", str(tmp_path / "b"), "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    assert [runner._duration(s) for s in (45, 720, 11520)] == ["45 s", "12 min", "3.2 h"]
