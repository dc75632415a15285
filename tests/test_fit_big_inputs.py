"""Big inputs are refused up front with the memory estimate and the alternative (issue 23,
case 8, the ``fit`` part), and ``--prior gmrf`` is that alternative."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from corrpriors.cli import main
from corrpriors.core import CorrelatedMultinomial
from corrpriors.kernels import graph_precision, knn_adjacency, lattice_adjacency
from corrpriors.runner import _fit_prior


def _grid_files(tmp_path, nx, ny, k=3, seed=0, spacing=1.0):
    rng = np.random.default_rng(seed)
    xy = spacing * np.array([(i, j) for i in range(nx) for j in range(ny)], dtype=float)
    counts = rng.poisson(0.7, size=(nx * ny, k))
    np.savetxt(tmp_path / "counts.csv", counts, fmt="%d", delimiter=",")
    np.savetxt(tmp_path / "coords.csv", xy, fmt="%.10g", delimiter=",")
    return tmp_path / "counts.csv", tmp_path / "coords.csv", counts, xy


def run(args, capsys):
    code = main(["fit", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_200000_rows_are_refused_at_once(tmp_path, capsys):
    """Issue 23: a 200,000-row CSV ended in a MemoryError after minutes (a 298 GiB distance
    matrix). Now: one line, exit 2, the estimate and the alternatives, in seconds, before
    --coords is even read (here a one-row file)."""
    counts = tmp_path / "counts.csv"
    np.savetxt(counts, np.random.default_rng(0).poisson(0.7, size=(200_000, 3)), fmt="%d",
               delimiter=",")
    coords = tmp_path / "coords.csv"
    coords.write_text("0,0\n")
    start = time.process_time()
    code, out, err = run(["--counts", counts, "--coords", coords, "--out", tmp_path / "o"],
                         capsys)
    assert time.process_time() - start < 20
    assert code == 2 and out == ""
    assert err.count("\n") == 1
    assert "C = 200,000 rows need about 2.91 TiB of memory" in err
    assert "--prior gmrf" in err and "fewer rows" in err and "precision=" in err
    assert not (tmp_path / "o").exists()


def test_20000_rows_under_a_6_gb_limit_are_refused(tmp_path, capsys, monkeypatch):
    counts, coords, _, _ = _grid_files(tmp_path, 200, 100)
    monkeypatch.setattr(_fit_prior, "available_memory", lambda: 6 * 2 ** 30)
    code, _, err = run(["--counts", counts, "--coords", coords, "--out", tmp_path / "o"], capsys)
    assert code == 2
    assert "C = 20,000 rows need about 29.9 GiB of memory" in err
    assert "about 6 GiB is available here" in err


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc")
def test_ulimit_is_seen(tmp_path):
    """Under ``ulimit -v`` (6 GB) the 20,000-row table is refused by the check, not by a
    MemoryError (run in a child process with the limit set)."""
    counts, coords, _, _ = _grid_files(tmp_path, 200, 100)
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (6 * 10**9, 6 * 10**9));"
            "from corrpriors.cli import main; sys.exit(main(sys.argv[1:]))")
    proc = subprocess.run([sys.executable, "-c", code, "fit", "--counts", str(counts),
                           "--coords", str(coords), "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    assert proc.returncode == 2, proc.stderr
    assert "C = 20,000 rows need about" in proc.stderr
    assert "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr


def test_the_estimate_grows_with_the_options():
    est = _fit_prior.fit_memory_estimate
    base = est(1000, 3, prior="kernel", learn_lengthscale=False)
    assert est(1000, 3, prior="kernel", learn_lengthscale=True) > 3 * (base - 150e6)
    assert est(2000, 3, prior="kernel", learn_lengthscale=False) - 150e6 == pytest.approx(
        4 * (base - 150e6))
    assert est(1000, 3, prior="kernel", learn_lengthscale=False, mc_samples=4000) > base
    assert est(10 ** 5, 3, prior="gmrf", learn_lengthscale=False) < 2e9
    _fit_prior.check_fit_memory(25, 5, prior="kernel", learn_lengthscale=True,
                                available=1e9)  # the example passes


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/status")
def test_estimate_bounds_the_measured_peak(tmp_path):
    """The estimate is not below the measured peak resident memory of a real run (C = 900,
    learned length scale), measured in a child process."""
    counts, coords, _, _ = _grid_files(tmp_path, 30, 30)
    # VmHWM, not ru_maxrss: Linux keeps ru_maxrss across the fork and exec that start the child,
    # so after a few hundred tests it reported the pytest process's own peak (445 MB against the
    # child's 305 MB), and the test failed or passed by what ran before it
    code = ("import sys; from corrpriors.cli import main; rc = main(sys.argv[1:]);"
            "print(next(int(line.split()[1]) * 1024 for line in open('/proc/self/status') "
            "if line.startswith('VmHWM:')))")
    proc = subprocess.run([sys.executable, "-c", code, "fit", "--counts", str(counts),
                           "--coords", str(coords), "--learn-scale", "--learn-lengthscale",
                           "--max-iter", "20", "-q", "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=300)
    peak = int(proc.stdout.split()[-1])
    assert peak <= _fit_prior.fit_memory_estimate(900, 3, prior="kernel",
                                                  learn_lengthscale=True)


# ------------------------------------------------------------------------- --prior gmrf
def test_gmrf_prior_is_the_library_fit_on_the_grid_graph(tmp_path, capsys):
    counts_path, coords_path, counts, xy = _grid_files(tmp_path, 6, 5)
    code, out, err = run(["--counts", counts_path, "--coords", coords_path, "--prior", "gmrf",
                          "--lengthscale", "3", "--learn-scale", "-q", "--out", tmp_path / "o"],
                         capsys)
    assert code == 0, err
    q = graph_precision(lattice_adjacency(xy), length_scale=3.0, alpha=2, dim=2)
    ref = CorrelatedMultinomial(precision=q, learn_scale=True).fit(counts)
    got = np.loadtxt(tmp_path / "o" / "probs.csv", delimiter=",", skiprows=1)[:, 1:]
    np.testing.assert_allclose(got, ref.probs(), rtol=1e-9, atol=1e-12)
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["prior"] == "gmrf" and summary["kernel"] is None
    assert summary["scale"] == pytest.approx(ref.scale_)


def test_gmrf_off_lattice_uses_nearest_neighbours(tmp_path, capsys):
    counts_path, coords_path, counts, xy = _grid_files(tmp_path, 5, 5, spacing=0.5)
    code, _, err = run(["--counts", counts_path, "--coords", coords_path, "--prior", "gmrf",
                        "-q", "--out", tmp_path / "o"], capsys)
    assert code == 0, err
    q = graph_precision(knn_adjacency(xy, 4), length_scale=1.0, alpha=2, dim=2)
    ref = CorrelatedMultinomial(precision=q).fit(counts)
    got = np.loadtxt(tmp_path / "o" / "probs.csv", delimiter=",", skiprows=1)[:, 1:]
    np.testing.assert_allclose(got, ref.probs(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("extra, needle", [
    (["--learn-lengthscale"], "--learn-lengthscale is for --prior kernel"),
    (["--predict-at", "{coords}"], "--predict-at is for --prior kernel"),
])
def test_gmrf_refuses_what_it_cannot_do(tmp_path, capsys, extra, needle):
    counts, coords, _, _ = _grid_files(tmp_path, 3, 3)
    extra = [e.format(coords=coords) for e in extra]
    code, _, err = run(["--counts", counts, "--coords", coords, "--prior", "gmrf", *extra,
                        "--out", tmp_path / "o"], capsys)
    assert code == 2 and needle in err and err.count("\n") == 1


@pytest.mark.parametrize("spacing", [1.0, 0.37])
def test_gmrf_range_outside_what_the_factorisation_resolves_is_refused(tmp_path, capsys,
                                                                        spacing):
    """--lengthscale 10^4 on a 6 x 5 grid: the arithmetic broke down in the fit ('the objective
    decreased'), 10^6 gave 'A: expected a positive-definite matrix' blamed on --coords, 1e-150
    'A: contains NaN'. Now one line naming --lengthscale and the range; the largest allowed
    range fits cleanly (lattice and nearest-neighbour graphs)."""
    counts, coords, _, _ = _grid_files(tmp_path, 6, 5, spacing=spacing)
    for length, needle in (("1e4", "longer ranges"), ("1e6", "longer ranges"),
                           ("1e-150", "shorter ranges")):
        code, _, err = run(["--counts", counts, "--coords", coords, "--prior", "gmrf",
                            "--lengthscale", length, "--out", tmp_path / "o"], capsys)
        assert code == 2 and err.count("\n") == 1
        assert err.startswith(f"corrpriors fit: error: --lengthscale {float(length):g}: with "
                              "--prior gmrf on these coordinates the range must lie in [")
        assert needle in err
    longest = float(err.split("[")[1].split(",")[1].split("]")[0])
    code, out, err = run(["--counts", counts, "--coords", coords, "--prior", "gmrf",
                          "--lengthscale", longest * 0.999, "--learn-scale", "--out",
                          tmp_path / "o"], capsys)
    assert code == 0 and err == "" and "(converged)" in out


def test_gmrf_needs_coordinates(tmp_path, capsys):
    counts, _, _, xy = _grid_files(tmp_path, 3, 3)
    d = np.sqrt(((xy[:, None] - xy[None]) ** 2).sum(-1))
    np.savetxt(tmp_path / "d.csv", d, delimiter=",")
    code, _, err = run(["--counts", counts, "--distances", tmp_path / "d.csv", "--prior", "gmrf",
                        "--out", tmp_path / "o"], capsys)
    assert code == 2 and "--prior gmrf: needs --coords" in err


@pytest.mark.slow
def test_gmrf_fits_200000_rows(tmp_path, capsys):
    """The alternative the refusal names does the job: 200,000 rows on a 500 x 400 grid."""
    counts, coords, _, _ = _grid_files(tmp_path, 500, 400)
    code, out, err = run(["--counts", counts, "--coords", coords, "--prior", "gmrf",
                          "--lengthscale", "5", "--out", tmp_path / "o"], capsys)
    assert code == 0, err
    assert "C=200000 covariates" in out


def test_too_many_samples_are_blamed_on_samples(tmp_path, capsys):
    """A small table with --samples 10^9 draws: the draws, not the rows, do not fit."""
    code, _, err = run(["--uncertainty", "--samples", 10 ** 9, "--out", tmp_path / "o"], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "--samples: 1,000,000,000 draws of C = 25 rows x K = 5 probabilities need about" in err
    assert "use fewer --samples" in err and "--prior gmrf" not in err
    with pytest.raises(ValueError, match="^--counts: C = 3,000 rows need .* or fewer --samples"):
        _fit_prior.check_fit_memory(3000, 3, prior="kernel", learn_lengthscale=False,
                                    mc_samples=100, available=1e8)
