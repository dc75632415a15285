"""Bad input to CorrelatedMultinomial raises ValueError naming the argument."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from corrpriors.core import CorrelatedMultinomial
from corrpriors.exceptions import JitterWarning

COV = np.exp(-np.subtract.outer(np.arange(3.0), np.arange(3.0)) ** 2 / 4.0)
GOOD = np.array([[1, 2, 0], [0, 0, 3], [2, 2, 2]])


def _fit(counts=GOOD, cov=COV, **kw):
    return CorrelatedMultinomial(covariance=cov, **kw).fit(counts)


@pytest.mark.parametrize("counts,match", [
    (np.array([[1, -2, 0], [0, 0, 3], [2, 2, 2]]), "counts: counts must be non-negative"),
    (np.array([[1, 2.5, 0], [0, 0, 3], [2, 2, 2]]), "counts: counts must be integers"),
    (np.array([[1, np.nan, 0], [0, 0, 3], [2, 2, 2]]), "counts: contains NaN"),
    (np.array([1, 2, 3]), "counts: expected a 2-D array"),
    (np.ones((3, 2, 2)), "counts: expected a 2-D array"),
    (np.array([[1], [2], [3]]), "counts: expected at least K=2"),
    ([["a", "b"], ["c", "d"], ["e", "f"]], "counts: expected a numeric array"),
])
def test_bad_counts(counts, match):
    with pytest.raises(ValueError, match=match):
        _fit(counts=counts)


def test_integer_valued_floats_are_accepted():
    a = _fit(counts=GOOD.astype(float))
    b = _fit(counts=GOOD)
    np.testing.assert_allclose(a.psi_mean_, b.psi_mean_)


@pytest.mark.parametrize("cov,match", [
    (np.eye(4), r"covariance: expected shape \(3, 3\)"),
    (np.ones((3, 2)), "covariance: expected a square 2-D array"),
    (np.array([[1.0, 0.5, 0.0], [0.1, 1.0, 0.0], [0.0, 0.0, 1.0]]),
     "covariance: must be symmetric"),
    (np.array([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]]),
     "covariance: must be positive semi-definite"),
    (np.where(np.eye(3) > 0, np.nan, 0.1), "covariance: contains NaN"),
    (None, "covariance"),
])
def test_bad_covariance(cov, match):
    with pytest.raises(ValueError, match=match):
        _fit(cov=cov)


def test_rank_deficient_covariance_is_accepted_with_round_off_jitter_silently():
    # the core's one jitter rule: levels up to 1e-8 x mean diagonal are round-off protection
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitterWarning)
        m = _fit(cov=np.ones((3, 3)))
    assert 0 < m.jitter_ <= 1e-8
    np.testing.assert_allclose(m.covariance_, np.ones((3, 3)) + m.jitter_ * np.eye(3))
    assert np.all(np.isfinite(m.psi_mean_))
    # all-ones prior: the covariates share psi, so posterior means nearly coincide
    assert np.ptp(m.psi_mean_, axis=0).max() < 1e-3


def test_jitter_that_changes_the_prior_warns():
    # a PSD matrix (within the validation tolerance) with an eigenvalue of -2.7e-8 x largest:
    # 1e-10 .. 1e-8 fail, 1e-7 x mean diagonal is needed and reported
    q, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(3, 3)))
    cov = q @ np.diag([3.0, 1e-3, -2.7e-8]) @ q.T
    cov = 0.5 * (cov + cov.T)
    with pytest.warns(JitterWarning, match="rank deficient"):
        m = _fit(cov=cov)
    assert m.jitter_ == pytest.approx(1e-7 * np.mean(np.diag(cov)), rel=1e-9)


def test_well_conditioned_covariance_does_not_warn(recwarn):
    _fit()
    assert not [w for w in recwarn if issubclass(w.category, JitterWarning)]


@pytest.mark.parametrize("kw,match", [
    ({"mean": np.zeros(5)}, "mean: expected shape"),
    ({"mean": np.full((3, 2), np.nan)}, "mean: contains NaN"),
    ({"learn_mean": "global"}, "learn_mean: expected one of"),
    ({"max_iter": 0}, "max_iter: expected a positive integer"),
    ({"tol": -1.0}, "tol: expected a finite non-negative number"),
    ({"scale_prior": (2.0,)}, r"scale_prior: expected \(shape, rate\)"),
    ({"scale_prior": (2.0, -1.0)}, "scale_prior rate"),
    ({"mean_prior_std": 0.0}, "mean_prior_std"),
    ({"learn_kernel": True}, "learn_kernel: needs covariance to be a bound kernel"),
    ({"scale": 0.0}, "scale: expected a finite positive number"),
])
def test_bad_parameters(kw, match):
    with pytest.raises(ValueError, match=match):
        _fit(**kw)


def test_predictions_before_fit_raise():
    m = CorrelatedMultinomial(covariance=COV)
    with pytest.raises(ValueError, match="not fitted"):
        m.probs()
    m.fit(GOOD)
    with pytest.raises(ValueError, match="method: expected"):
        m.probs(method="median")
