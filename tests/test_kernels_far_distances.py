"""Stationary kernels at distances far beyond the length scale (``d / l`` up to 1e300): exact
zeros, no overflow warning, no NaN (``corrpriors fit --lengthscale 1e-300`` printed 'overflow
encountered in multiply' (se) or failed with 'covariance: contains NaN or infinite values'
(matern52), 'theta: contains NaN' with --learn-lengthscale)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from corrpriors import kernels

KINDS = [kernels.SquaredExponential, kernels.Exponential, kernels.Matern32, kernels.Matern52]


@pytest.mark.parametrize("cls", KINDS)
@pytest.mark.parametrize("length", [1e-300, 1e-150, 1e-3])
def test_far_distances_give_exact_zeros(cls, length):
    xy = np.array([[0.0, 0.0], [0.0, 1.0], [3.0, 0.0]])
    k = cls(lengthscale=length, lengthscale_bounds=(1e-300, 1.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mat = k(xy)
        grad = k.gradient(xy)
    np.testing.assert_array_equal(mat, np.eye(3))
    np.testing.assert_array_equal(grad, np.zeros((3, 3, 1)))


#: The profiles f(r) and r f'(r) written out (negated: d f / d log l = -r f'(r)).
FORMULAS = {
    kernels.SquaredExponential: (lambda r: np.exp(-r * r), lambda r: 2 * r * r * np.exp(-r * r)),
    kernels.Exponential: (lambda r: np.exp(-r), lambda r: r * np.exp(-r)),
    kernels.Matern32: (lambda r: (1 + np.sqrt(3) * r) * np.exp(-np.sqrt(3) * r),
                       lambda r: 3 * r * r * np.exp(-np.sqrt(3) * r)),
    kernels.Matern52: (lambda r: (1 + np.sqrt(5) * r + 5 * r * r / 3) * np.exp(-np.sqrt(5) * r),
                       lambda r: 5 / 3 * r * r * (1 + np.sqrt(5) * r) * np.exp(-np.sqrt(5) * r)),
}


@pytest.mark.parametrize("cls", KINDS)
def test_the_cap_changes_no_value(cls):
    """Every value and log-length-scale derivative is the formula's (to round-off) where the
    formula is finite, and exactly 0 where the formula underflows or overflows."""
    d = np.array([[0.0, 0.5, 3.0, 30.0, 700.0, 745.0, 999.0, 1e3, 1e5, 1e300]])
    k = cls(lengthscale=1.0)
    f, dlog = FORMULAS[cls]
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        want = np.nan_to_num(f(d), nan=0.0)
        want_dlog = np.nan_to_num(dlog(d), nan=0.0)
    np.testing.assert_allclose(k.from_distances(d), want, rtol=1e-13, atol=0)
    np.testing.assert_allclose(k.gradient(distances=d)[..., 0], want_dlog, rtol=1e-13, atol=0)
    assert np.all(k.from_distances(d)[0, 7:] == 0.0)


@pytest.mark.parametrize("kernel", ["se", "matern52"])
def test_fit_with_a_vanishing_lengthscale_is_the_independent_fit(tmp_path, capsys, kernel):
    """Through ``corrpriors fit``: --lengthscale 1e-300 is the identity kernel, exactly as
    1e-3 on the example's unit grid; nothing on stderr."""
    from corrpriors.cli import main

    probs = []
    for length in ("1e-300", "1e-3"):
        out = tmp_path / length
        assert main(["fit", "--kernel", kernel, "--lengthscale", length, "--quiet",
                     "--out", str(out)]) == 0
        assert capsys.readouterr().err == ""
        probs.append(np.loadtxt(out / "probs.csv", delimiter=",", skiprows=1))
    np.testing.assert_array_equal(probs[0], probs[1])
