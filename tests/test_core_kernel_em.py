"""Kernel hyper-parameter M-step: gradient vs finite differences, monotone EM, recovery."""

from __future__ import annotations

import numpy as np
import pytest

from corrpriors import kernels
from corrpriors.core import CorrelatedMultinomial
from corrpriors.core.hyper_em import kernel_objective
from corrpriors.core.stick_breaking import log_probs, uniform_psi


def _coords(n_side):
    g = np.stack(np.meshgrid(np.arange(n_side), np.arange(n_side), indexing="ij"), -1)
    return g.reshape(-1, 2).astype(float)


@pytest.mark.parametrize("make", [
    lambda: kernels.SquaredExponential(lengthscale=1.3),
    lambda: kernels.Matern32(lengthscale=0.8),
    lambda: (kernels.SquaredExponential(lengthscale=2.0)
             + 0.5 * kernels.Exponential(lengthscale=1.0)),
])
def test_kernel_objective_gradient_matches_finite_differences(make):
    rng = np.random.default_rng(0)
    bound = make().bind(coords=_coords(4))
    c = bound.n_covariates
    a = rng.standard_normal((c, 3 * c))
    m_stat = a @ a.T / c
    eta = np.asarray(bound.theta, dtype=float)
    val, grad = kernel_objective(eta, bound, 1.7, 1e-6, m_stat, 4)
    h = 1e-5
    fd = np.zeros_like(eta)
    for j in range(len(eta)):
        e = np.zeros_like(eta)
        e[j] = h
        fd[j] = (kernel_objective(eta + e, bound, 1.7, 1e-6, m_stat, 4)[0]
                 - kernel_objective(eta - e, bound, 1.7, 1e-6, m_stat, 4)[0]) / (2 * h)
    assert np.isfinite(val)
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-6 * max(1.0, abs(val)))


def test_lengthscale_learning_is_monotone_and_moves_towards_truth():
    rng = np.random.default_rng(1)
    coords = _coords(6)
    c, k = len(coords), 4
    true = kernels.Exponential(lengthscale=3.0).bind(coords=coords).gram()
    chol = np.linalg.cholesky(true + 1e-9 * np.eye(c))
    psi = uniform_psi(k) + 1.5 * chol @ rng.standard_normal((c, k - 1))
    counts = np.stack([rng.multinomial(60, p) for p in np.exp(log_probs(psi))])
    start = kernels.Exponential(lengthscale=0.5).bind(coords=coords)
    m = CorrelatedMultinomial(covariance=start, learn_kernel=True, learn_scale=True,
                              max_iter=300, tol=1e-9).fit(counts)
    obj = m.objective_trace_
    assert np.all(np.diff(obj) >= -1e-9 * np.abs(obj[1:]))
    learned = float(np.exp(m.kernel_.theta[0]))
    assert 1.2 < learned < 8.0, learned
    fixed = CorrelatedMultinomial(covariance=start, learn_scale=True, max_iter=300,
                                  tol=1e-9).fit(counts)
    assert m.elbo_ > fixed.elbo_
    # the bound kernel's gram, jittered, is the covariance the fit reports
    np.testing.assert_allclose(m.covariance_, m.kernel_.gram() + m.jitter_ * np.eye(c))


def test_kernel_learning_with_map_scale_and_constant_mean_is_monotone():
    rng = np.random.default_rng(2)
    coords = _coords(4)
    counts = rng.poisson(2.0, size=(len(coords), 4))
    start = kernels.Matern52(lengthscale=1.0).bind(coords=coords)
    m = CorrelatedMultinomial(covariance=start, learn_kernel=True, learn_scale=True,
                              scale_prior=(2.0, 1.0), learn_mean="constant",
                              mean_prior_std=2.0, max_iter=200, tol=1e-10)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.fit(counts)
    obj = m.objective_trace_
    assert np.all(np.diff(obj) >= -1e-9 * np.abs(obj[1:]))
    from scipy.stats import gamma, norm
    hyper = (gamma.logpdf(m.scale_, a=2.0, scale=1.0)
             + norm.logpdf(m.mean_[0], loc=uniform_psi(4), scale=2.0).sum())
    assert m.objective_ - m.elbo_ == pytest.approx(hyper, rel=1e-10)
    assert np.ptp(m.mean_, axis=0).max() == 0.0  # constant means
