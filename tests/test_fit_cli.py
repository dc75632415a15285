"""``corrpriors fit`` end to end through ``corrpriors.cli.main``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from corrpriors.cli import main
from corrpriors.core import CorrelatedMultinomial
from corrpriors.data import load_example


def test_fit_on_shipped_example(tmp_path):
    out = tmp_path / "fit"
    assert main(["fit", "--out", str(out), "--learn-scale"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    for key in ("elbo", "n_iter", "scale", "lengthscale", "converged", "jitter"):
        assert key in summary
    probs = np.loadtxt(out / "probs.csv", delimiter=",", skiprows=1)
    counts, coords, names = load_example()
    assert probs.shape == counts.shape
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-8)
    assert (out / "probs.csv").read_text().splitlines()[0] == ",".join(names)
    psi = np.load(out / "psi.npz")
    assert psi["psi_mean"].shape == psi["psi_var"].shape == (25, 4)
    # same numbers as the library call
    from corrpriors.kernels import SquaredExponential
    m = CorrelatedMultinomial(covariance=SquaredExponential(1.0).bind(coords=coords),
                              learn_scale=True).fit(counts)
    assert summary["elbo"] == pytest.approx(m.elbo_, rel=1e-10)
    np.testing.assert_allclose(psi["psi_mean"], m.psi_mean_, atol=1e-8)


def test_fit_with_distances_and_learned_lengthscale(tmp_path):
    counts, coords, _ = load_example()
    d = np.sqrt(((coords[:, None] - coords[None]) ** 2).sum(-1))
    np.savetxt(tmp_path / "c.csv", counts, delimiter=",", fmt="%d")
    np.savetxt(tmp_path / "d.csv", d, delimiter=",")
    out = tmp_path / "o"
    rc = main(["fit", "--counts", str(tmp_path / "c.csv"), "--distances", str(tmp_path / "d.csv"),
               "--kernel", "matern32", "--lengthscale", "0.7", "--learn-lengthscale",
               "--out", str(out)])
    assert rc == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["lengthscale"] != pytest.approx(0.7)
    assert s["kernel"] == "matern32"


@pytest.mark.parametrize("make_args,match", [
    (lambda p: ["--counts", str(p / "missing.csv"), "--coords", str(p / "x.csv")],
     "--counts: file not found"),
    (lambda p: ["--counts", str(p / "c.csv")], "--coords or --distances is required"),
    (lambda p: ["--counts", str(p / "c.csv"), "--coords", str(p / "short.csv")],
     "--coords: expected 25 rows"),
    (lambda p: ["--counts", str(p / "bad.csv"), "--coords", str(p / "x.csv")],
     "counts: counts must be non-negative"),
    (lambda p: ["--counts", str(p / "c.csv"), "--distances", str(p / "x.csv")],
     r"--distances: expected shape \(25, 25\)"),
])
def test_bad_input_gives_clear_error(tmp_path, capsys, make_args, match):
    counts, coords, _ = load_example()
    np.savetxt(tmp_path / "c.csv", counts, delimiter=",", fmt="%d")
    np.savetxt(tmp_path / "x.csv", coords, delimiter=",")
    np.savetxt(tmp_path / "short.csv", coords[:5], delimiter=",")
    bad = counts.copy()
    bad[0, 0] = -1
    np.savetxt(tmp_path / "bad.csv", bad, delimiter=",", fmt="%d")
    rc = main(["fit", *make_args(tmp_path), "--out", str(tmp_path / "o")])
    assert rc == 2
    err = capsys.readouterr().err
    assert "corrpriors fit: error:" in err
    import re
    assert re.search(match, err), err
