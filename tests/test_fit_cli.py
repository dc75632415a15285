"""``corrpriors fit`` end to end through ``corrpriors.cli.main``: results equal the library's,
input formats, ``probs.csv`` columns and uncertainty, ``--help``, progress and warnings."""

from __future__ import annotations

import csv
import io
import json
import re
import sys

import numpy as np
import pytest

from corrpriors.cli import build_parser, main
from corrpriors.core import CorrelatedMultinomial
from corrpriors.data import load_example
from corrpriors.kernels import Matern32, SquaredExponential


def fit(args, capsys):
    """Run ``corrpriors fit ARGS``; the exit status (argparse's too) and the captured output."""
    try:
        rc = main(["fit", *map(str, args)])
    except SystemExit as exc:
        rc = exc.code
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def read_probs(path):
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    return rows[0], np.array(rows[1:], dtype=float)


def test_fit_on_shipped_example(tmp_path, capsys):
    out = tmp_path / "fit"
    rc, stdout, err = fit(["--out", out, "--learn-scale"], capsys)
    assert rc == 0 and err == ""
    assert re.fullmatch(r"fitted C=25 covariates, K=5 categories in \d+ iterations \(converged\)"
                        r"\nELBO -?[\d.]+; wrote probs.csv, psi.npz, summary.json, manifest.json "
                        r"to .*\n", stdout)
    first, second = stdout.splitlines()  # issue 22: <= 100 columns (but for a long --out)
    assert len(first) <= 100 and len(second) <= 100 + len(str(out)) - len("fit")
    summary = json.loads((out / "summary.json").read_text())
    counts, coords, names = load_example()
    header, table = read_probs(out / "probs.csv")
    assert header == ["row", *names]
    np.testing.assert_array_equal(table[:, 0], np.arange(25))
    m = CorrelatedMultinomial(covariance=SquaredExponential(1.0).bind(coords=coords),
                              learn_scale=True).fit(counts)
    np.testing.assert_allclose(table[:, 1:], m.probs(), rtol=1e-11)
    psi = np.load(out / "psi.npz")
    np.testing.assert_allclose(psi["psi_mean"], m.psi_mean_, atol=1e-12)
    np.testing.assert_allclose(psi["psi_var"], m.psi_var_, atol=1e-12)
    assert summary["elbo"] == pytest.approx(m.elbo_, rel=1e-12)
    assert summary["scale"] == pytest.approx(m.scale_, rel=1e-12)
    assert summary["n_iter"] == m.n_iter_ and summary["converged"] is True
    assert summary["jitter"] == m.jitter_ and summary["options"]["max_iter"] == 1000
    assert summary["outputs"] == ["probs.csv", "psi.npz", "summary.json", "manifest.json"]
    assert sorted(p.name for p in out.iterdir()) == sorted(summary["outputs"])


def test_fit_with_distances_and_learned_lengthscale(tmp_path, capsys):
    counts, coords, _ = load_example()
    d = np.sqrt(((coords[:, None] - coords[None]) ** 2).sum(-1))
    np.savetxt(tmp_path / "c.csv", counts, delimiter=",", fmt="%d")
    np.savetxt(tmp_path / "d.csv", d, delimiter=",")
    out = tmp_path / "o"
    rc, _, _ = fit(["--counts", tmp_path / "c.csv", "--distances", tmp_path / "d.csv",
                    "--kernel", "matern32", "--lengthscale", "0.7", "--learn-lengthscale",
                    "--out", out], capsys)
    assert rc == 0
    s = json.loads((out / "summary.json").read_text())
    m = CorrelatedMultinomial(Matern32(0.7).bind(distances=d), learn_kernel=True).fit(counts)
    assert s["lengthscale"] == pytest.approx(m.kernel_.kernel.lengthscale, rel=1e-10)
    assert s["lengthscale"] != pytest.approx(0.7) and s["kernel"] == "matern32"


def test_csv_tsv_npy_give_the_same_fit(tmp_path, capsys):
    """Input formats by extension: comma CSV, TSV with a header, .npy (1-D coordinates too)."""
    counts, coords, names = load_example()
    x = coords[:, 0] + 0.1 * coords[:, 1]  # one-dimensional covariates
    np.savetxt(tmp_path / "c.csv", counts, delimiter=",", fmt="%d")
    np.savetxt(tmp_path / "x.csv", x[:, None], delimiter=",")
    np.savetxt(tmp_path / "c.tsv", counts, delimiter="\t", fmt="%d",
               header="\t".join(names), comments="")
    np.savetxt(tmp_path / "x.tsv", x[:, None], delimiter="\t", header="# x")
    np.save(tmp_path / "c.npy", counts)
    np.save(tmp_path / "x.npy", x)
    results = {}
    for ext in ("csv", "tsv", "npy"):
        out = tmp_path / f"o_{ext}"
        rc, _, err = fit(["--counts", tmp_path / f"c.{ext}", "--coords", tmp_path / f"x.{ext}",
                          "--out", out], capsys)
        assert rc == 0, err
        results[ext] = read_probs(out / "probs.csv")
    assert results["tsv"][0] == ["row", *names]
    assert results["csv"][0] == results["npy"][0] == ["row", "p1", "p2", "p3", "p4", "p5"]
    m = CorrelatedMultinomial(SquaredExponential(1.0).bind(coords=x[:, None])).fit(counts)
    for _, table in results.values():
        np.testing.assert_allclose(table[:, 1:], m.probs(), rtol=1e-11)


def test_uncertainty_columns_are_reproducible_calibrated_intervals(tmp_path, capsys):
    counts, coords, names = load_example()
    common = ["--learn-scale", "--uncertainty", "--samples", "3000"]
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        assert fit([*common, "--seed", seed, "--out", tmp_path / name], capsys)[0] == 0
    header, table = read_probs(tmp_path / "a" / "probs.csv")
    assert header == ["row", *names, *(f"{n}_{what}" for what in ("sd", "lower", "upper")
                                       for n in names)]
    a, b = (tmp_path / name / "probs.csv" for name in "ab")
    assert a.read_bytes() == b.read_bytes()
    other = read_probs(tmp_path / "c" / "probs.csv")[1]
    assert not np.array_equal(other[:, 6:], table[:, 6:])
    np.testing.assert_array_equal(other[:, 1:6], table[:, 1:6])  # plug-in means need no draws
    m = CorrelatedMultinomial(SquaredExponential(1.0).bind(coords=coords), learn_scale=True)
    m.fit(counts)
    lower, upper, sd = m.credible_interval(0.9, n_samples=3000, rng=3, return_std=True)
    np.testing.assert_allclose(table[:, 1:6], m.probs(), rtol=1e-11)
    np.testing.assert_allclose(table[:, 6:11], sd, rtol=1e-11)
    np.testing.assert_allclose(table[:, 11:16], lower, rtol=1e-11)
    np.testing.assert_allclose(table[:, 16:21], upper, rtol=1e-11)
    s = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert s["options"]["seed"] == 3 and s["options"]["samples"] == 3000
    assert s["uncertainty"]["method"] == "calibrated" and s["uncertainty"]["level"] == 0.9
    assert s["uncertainty"]["integrated_hyperparameters"] == ["log_scale"]
    # --method mc writes the Monte Carlo means of q; the uncertainty columns are unchanged
    assert fit([*common, "--seed", 3, "--method", "mc", "--out", tmp_path / "d"], capsys)[0] == 0
    mc = read_probs(tmp_path / "d" / "probs.csv")[1]
    np.testing.assert_allclose(mc[:, 1:6], m.probs(method="mc", n_samples=3000, rng=3),
                               rtol=1e-11)
    np.testing.assert_array_equal(mc[:, 6:], table[:, 6:])


@pytest.mark.parametrize("method", ["vi", "gibbs"])
def test_interval_method_and_level_are_honoured(tmp_path, capsys, method):
    counts, coords, names = load_example()
    args = ["--uncertainty", "--interval-method", method, "--level", "0.5", "--samples", "400",
            "--seed", "5", "--out", tmp_path / method]
    assert fit(args, capsys)[0] == 0
    table = read_probs(tmp_path / method / "probs.csv")[1]
    m = CorrelatedMultinomial(SquaredExponential(1.0).bind(coords=coords)).fit(counts)
    lower, upper, sd = m.credible_interval(0.5, method=method, n_samples=400, rng=5,
                                           return_std=True)
    np.testing.assert_allclose(table[:, 6:], np.hstack([sd, lower, upper]), rtol=1e-10)
    s = json.loads((tmp_path / method / "summary.json").read_text())
    assert s["uncertainty"]["method"] == method and s["options"]["level"] == 0.5
    rc, _, err = fit(["--uncertainty", "--level", "1.5", "--out", tmp_path / "x"], capsys)
    assert rc == 2 and "--level" in err


def test_help_states_every_default_and_output_file():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices["fit"]
    text = sub.format_help()
    for action in sub._actions:
        if action.dest in ("help", "out"):
            continue
        expanded = " ".join((action.help % dict(vars(action), prog="")).split())
        assert "Default:" in expanded, action.dest
        if isinstance(action.default, (int, float, str)) and not isinstance(action.default, bool):
            values = {str(action.default)}
            if not isinstance(action.default, str):
                values.add(f"{action.default:g}")
            assert any(f"Default: {v}" in expanded for v in values), (action.dest, expanded)
    assert "Default: 1000" in " ".join(text.split())  # --max-iter
    for name in ("probs.csv", "psi.npz", "summary.json"):
        assert re.search(rf"^  {re.escape(name)} ", text, re.M), name
    for word in (".csv", ".tsv", ".npy", "--seed", "Exit status"):
        assert word in text


def test_lengthscale_outside_default_bounds_is_fine_when_not_learned(tmp_path, capsys):
    """Issue 11: ``--lengthscale 5000`` asked for ``lengthscale_bounds`` the CLI cannot pass."""
    counts, coords, _ = load_example()
    rc, _, err = fit(["--lengthscale", "5000", "--out", tmp_path / "o"], capsys)
    assert rc == 0, err
    m = CorrelatedMultinomial(SquaredExponential(5000.0).bind(coords=coords)).fit(counts)
    np.testing.assert_allclose(read_probs(tmp_path / "o" / "probs.csv")[1][:, 1:], m.probs(),
                               rtol=1e-11)
    # learning it: the bounds apply, and the CLI has an option for them
    rc, _, err = fit(["--lengthscale", "5000", "--learn-lengthscale", "--out", tmp_path / "p"],
                     capsys)
    assert rc == 2 and "outside --lengthscale-bounds 0.01 1000" in err
    rc, _, err = fit(["--lengthscale", "5000", "--learn-lengthscale", "--lengthscale-bounds",
                      "1", "1e4", "--max-iter", "5", "--out", tmp_path / "p"], capsys)
    assert rc == 0, err


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_on_a_terminal(tmp_path, capsys, monkeypatch):
    from corrpriors.runner import fit as _fit_cli

    monkeypatch.setattr(_fit_cli, "PROGRESS_INTERVAL", 0.0)
    term = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", term)
    assert main(["fit", "--out", str(tmp_path / "o"), "--learn-scale"]) == 0
    shown = term.getvalue()
    updates = re.findall(r"\riteration (\d+)/1000  objective (\S+)  elapsed (\d+\.\d) s\x1b\[K",
                         shown)
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert [int(u[0]) for u in updates] == list(range(1, s["n_iter"] + 1))
    assert float(updates[-1][1]) == pytest.approx(s["objective"], rel=1e-9)
    assert shown.endswith("\r\x1b[K")  # the line is cleared before the closing message
    assert "fitted C=25" in capsys.readouterr().out


def test_verbose_quiet_and_no_terminal(tmp_path, capsys):
    rc, out, err = fit(["--out", tmp_path / "a"], capsys)  # stderr is not a terminal here
    assert rc == 0 and err == "" and out.startswith("fitted C=25")
    rc, out, err = fit(["--out", tmp_path / "b", "--quiet"], capsys)
    assert rc == 0 and out == "" and err == ""
    rc, out, err = fit(["--out", tmp_path / "c", "--verbose"], capsys)
    n_iter = json.loads((tmp_path / "c" / "summary.json").read_text())["n_iter"]
    lines = [ln for ln in err.splitlines() if ln.startswith("iteration")]
    assert len(lines) == n_iter and lines[-1].startswith(f"iteration {n_iter}/1000  objective")
    rc, out, err = fit(["--out", tmp_path / "d", "--max-iter", "3"], capsys)
    assert rc == 0 and "NOT converged: --max-iter 3 reached" in out
    assert json.loads((tmp_path / "d" / "summary.json").read_text())["n_iter"] == 3
    [line] = err.splitlines()
    assert line.startswith("corrpriors fit: warning: not converged in --max-iter 3 iterations "
                           "(--tol 1e-08): the objective still changed by ")
    assert "try --max-iter " in line and "summary.json: converged false" in line
    assert fit(["--out", tmp_path / "e", "--verbose", "--quiet"], capsys)[0] == 2


def test_early_stop_is_not_reported_as_max_iter(tmp_path, capsys, monkeypatch):
    # a fit that stops before --max-iter without converging (the objective decreased) must not
    # claim that --max-iter was reached
    from corrpriors.runner import fit as fit_module

    real = fit_module._fit

    def stopped_early(args, data):
        model, messages = real(args, data)
        model.converged_ = False
        return model, messages

    monkeypatch.setattr(fit_module, "_fit", stopped_early)
    rc, out, _ = fit(["--out", tmp_path / "o"], capsys)
    assert rc == 0 and "NOT converged: stopped, see the warning" in out and "--max-iter" not in out


def test_scale_prior_outside_the_usable_range_is_refused(tmp_path, capsys):
    rc, out, err = fit(["--out", tmp_path / "o", "--learn-scale", "--scale-prior", "1e-300",
                        "1e300"], capsys)
    assert rc == 2 and "scale_prior: the Gamma" in err and not (tmp_path / "o").exists()


def test_routine_jitter_is_recorded_not_printed(tmp_path, capsys):
    """A 1-D squared-exponential fit needs the starting jitter 1e-10 (the core's round-off
    level, silent up to 1e-8 of the mean diagonal): recorded in summary.json, nothing on the
    terminal, also with --verbose."""
    x = np.linspace(0.0, 1.0, 50)
    counts = np.random.default_rng(1).integers(0, 4, (50, 3))
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "c.npy", counts)
    args = ["--counts", tmp_path / "c.npy", "--coords", tmp_path / "x.npy"]
    rc, _, err = fit([*args, "--out", tmp_path / "a"], capsys)
    assert rc == 0 and err == ""
    s = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert s["jitter"] == pytest.approx(1e-10) and s["warnings"] == []
    assert s["jitter_relative_to_mean_diagonal"] == pytest.approx(1e-10, rel=1e-6)
    rc, _, err = fit([*args, "--out", tmp_path / "b", "--verbose"], capsys)
    assert rc == 0 and "jitter" not in err and "rank deficient" not in err

def test_predict_at_writes_the_library_predictions(tmp_path, capsys):
    counts, coords, names = load_example()
    new = np.array([[0.5, 0.5], [2.2, 3.7], [10.0, 10.0]])
    np.savetxt(tmp_path / "new.csv", new, delimiter=",")
    out = tmp_path / "fit"
    rc, _, err = fit(["--out", out, "--predict-at", tmp_path / "new.csv", "--uncertainty",
                      "--seed", "3"], capsys)
    assert rc == 0 and err == ""
    header, table = read_probs(out / "predictions.csv")
    k = len(names)
    assert header == ["row", *names, *(f"{n}_{what}" for what in ("sd", "lower", "upper")
                                       for n in names)]
    m = CorrelatedMultinomial(covariance=SquaredExponential(1.0).bind(coords=coords)).fit(counts)
    lower, upper, sd = m.predict_credible_interval(new, 0.9, n_samples=4000, rng=3,
                                                   return_std=True)
    np.testing.assert_allclose(table[:, 1:1 + k], m.predict_probs(new), rtol=1e-10)
    np.testing.assert_allclose(table[:, 1 + k:], np.hstack([sd, lower, upper]), rtol=1e-10)
    summary = json.loads((out / "summary.json").read_text())
    assert "predictions.csv" in summary["outputs"]


def test_predict_at_errors(tmp_path, capsys):
    counts, coords, _ = load_example()
    np.save(tmp_path / "c.npy", counts)
    np.save(tmp_path / "d.npy", np.sqrt(((coords[:, None] - coords[None]) ** 2).sum(-1)))
    np.save(tmp_path / "new3.npy", np.ones((2, 3)))
    rc, _, err = fit(["--counts", tmp_path / "c.npy", "--distances", tmp_path / "d.npy",
                      "--predict-at", tmp_path / "new3.npy", "--out", tmp_path / "o"], capsys)
    assert rc == 2 and "--predict-at: needs --coords" in err
    rc, _, err = fit(["--out", tmp_path / "o", "--predict-at", tmp_path / "new3.npy"], capsys)
    assert rc == 2 and re.search(r"--predict-at: .*new3.npy: expected 2 columns", err)
    (tmp_path / "o2").mkdir()
    np.savetxt(tmp_path / "o2" / "predictions.csv", np.ones((2, 2)), delimiter=",")
    rc, _, err = fit(["--out", tmp_path / "o2", "--predict-at", tmp_path / "o2" / "predictions.csv"],
                     capsys)
    assert rc == 2 and "would overwrite its own input" in err


def test_one_sample_is_refused_before_the_fit(tmp_path, capsys):
    """The intervals need at least two draws: --samples 1 was taken by the parser and refused
    after the fit, naming the library's n_samples."""
    rc, stdout, err = fit(["--out", tmp_path / "fit", "--uncertainty", "--samples", "1"], capsys)
    assert rc == 2 and stdout == "" and "--samples" in err and "n_samples" not in err
    assert not (tmp_path / "fit").exists()
