"""The packed psi step against dense, independent computations of the same update.

The oracle is the textbook form (Sigma^-1 + D)^-1 written with ``numpy.linalg.solve`` on
the well-conditioned matrix B = I + D^1/2 Sigma D^1/2 (never the library's
Sigma_OO + D^-1 form), per stick and over all C covariates.
"""

import numpy as np
import pytest

from corrpriors.core.priors.base import build_layout
from corrpriors.core.priors.dense import FactorWorkspace, _chol_inv_blocked, _marginal_variances, psi_step
from corrpriors.linalg.dense import jittered_cholesky


def jittered_covariance(cov):
    _, jittered, eps = jittered_cholesky(cov)
    return jittered, eps


def _se_cov(c, lengthscale, rng):
    x = np.sort(rng.uniform(0.0, c, size=c))
    return np.exp(-((x[:, None] - x[None, :]) / lengthscale) ** 2)


def _dense_step(sigma, mu, kappa, omega):
    """lambda, diag V, tr(D V), log|B|, quad per stick and sum_k (Sigma - V_k), dense solves
    on B."""
    c, km1 = mu.shape
    lam, var = np.empty((c, km1)), np.empty((c, km1))
    reduction = np.zeros((c, c))
    trace_dv, logdet, quad = np.zeros(km1), np.zeros(km1), np.zeros(km1)
    for k in range(km1):
        d = np.sqrt(omega[:, k])
        bmat = np.eye(c) + d[:, None] * sigma * d[None, :]
        # V = Sigma - Sigma D^1/2 B^-1 D^1/2 Sigma, lambda = V (kappa + Sigma^-1 mu)
        #   = mu + Sigma D^1/2 B^-1 D^1/2 (kappa / omega - mu) on the observed rows
        sd = sigma * d[None, :]
        v = sigma - sd @ np.linalg.solve(bmat, sd.T)
        obs = omega[:, k] > 0
        y = np.where(obs, kappa[:, k] / np.where(obs, omega[:, k], 1.0) - mu[:, k], 0.0)
        alpha = d * np.linalg.solve(bmat, d * y)
        lam[:, k] = mu[:, k] + sigma @ alpha
        var[:, k] = np.diag(v)
        trace_dv[k] = np.sum(omega[:, k] * np.diag(v))
        logdet[k] = np.linalg.slogdet(bmat)[1]
        quad[k] = alpha @ sigma @ alpha
        reduction += sigma - v
    return lam, var, trace_dv, logdet, quad, reduction


@pytest.mark.parametrize("lengthscale, log_omega_range", [
    (1.0, (-6.0, 6.0)),    # E[omega] spread over 12 decades
    (30.0, (-3.0, 5.0)),   # nearly singular prior (jittered), large E[omega]
    (0.3, (-8.0, -4.0)),   # almost no information: B close to I
])
def test_psi_step_matches_dense_solves(lengthscale, log_omega_range):
    rng = np.random.default_rng(7)
    c, km1 = 14, 6
    sigma, _ = jittered_covariance(_se_cov(c, lengthscale, rng))
    sigma = 1.7 * sigma
    observed = rng.random((c, km1)) < 0.6
    observed[:, 2] = False        # an empty stick: exactly the prior
    observed[:, 4] = True         # a stick observed everywhere
    omega = np.where(observed, 10.0 ** rng.uniform(*log_omega_range, size=(c, km1)), 0.0)
    kappa = np.where(observed, rng.normal(size=(c, km1)) * 3.0, 0.0)
    mu = rng.normal(size=(c, km1))

    layout = build_layout(observed)
    ws = FactorWorkspace(layout, sigma / 1.7)
    st = psi_step(layout, sigma, mu, kappa, layout.gather(omega), workspace=ws, scale=1.7)
    lam, var, trace_dv, logdet, quad, reduction = _dense_step(sigma, mu, kappa, omega)

    np.testing.assert_allclose(st.psi_mean, lam, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(st.psi_var[observed], var[observed], rtol=1e-7, atol=1e-12)
    np.testing.assert_allclose(st.trace_dv, trace_dv, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(st.logdet_b, logdet, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(st.quad, quad, rtol=1e-8, atol=1e-9)
    assert np.all(st.psi_var[:, 2] == np.diag(sigma)) and np.all(st.psi_mean[:, 2] == mu[:, 2])

    # the unobserved variances from the factors left in the workspace, and the full step
    filled = _marginal_variances(layout, sigma, ws, st.psi_var)
    np.testing.assert_allclose(filled, var, rtol=1e-7, atol=1e-12)
    full = psi_step(layout, sigma, mu, kappa, layout.gather(omega), full=True, need_reduction=True,
                    workspace=FactorWorkspace(layout))
    np.testing.assert_allclose(full.psi_var, var, rtol=1e-7, atol=1e-12)
    np.testing.assert_allclose(full.reduction, reduction, rtol=1e-8, atol=1e-10)


def test_workspace_without_pregathered_blocks_gives_the_same_step():
    rng = np.random.default_rng(3)
    c, km1 = 9, 4
    sigma, _ = jittered_covariance(_se_cov(c, 2.0, rng))
    observed = rng.random((c, km1)) < 0.7
    omega = np.where(observed, rng.uniform(0.1, 3.0, size=(c, km1)), 0.0)
    kappa = np.where(observed, rng.normal(size=(c, km1)), 0.0)
    mu = rng.normal(size=(c, km1))
    layout = build_layout(observed)
    ws_a, ws_b = FactorWorkspace(layout, sigma), FactorWorkspace(layout, sigma, max_bytes=0)
    a = psi_step(layout, 2.0 * sigma, mu, kappa, layout.gather(omega), workspace=ws_a, scale=2.0)
    b = psi_step(layout, 2.0 * sigma, mu, kappa, layout.gather(omega), workspace=ws_b)
    assert ws_b.base_blocks is None
    np.testing.assert_allclose(a.psi_mean, b.psi_mean, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(a.psi_var, b.psi_var, rtol=1e-12, atol=1e-14)
    # column sums taken stick by stick (one run per block) give the same numbers
    one_by_one = FactorWorkspace(layout, sigma, chunk=1)
    assert len(one_by_one._runs) == layout.sticks.size > 1 == len(ws_a._runs)
    c = psi_step(layout, 2.0 * sigma, mu, kappa, layout.gather(omega), workspace=one_by_one, scale=2.0)
    np.testing.assert_array_equal(a.psi_var, c.psi_var)
    np.testing.assert_array_equal(a.trace_dv, c.trace_dv)


def test_layout_packs_observed_sets_stick_after_stick():
    observed = np.array([[1, 0, 1],
                         [1, 0, 0],
                         [0, 0, 1],
                         [1, 0, 1]], dtype=bool)
    lay = build_layout(observed)
    assert lay.sticks.tolist() == [0, 2]
    assert lay.sizes.tolist() == [3, 3]
    assert lay.entry_rows.tolist() == [0, 1, 3, 0, 2, 3]
    assert lay.entry_cols.tolist() == [0, 0, 0, 2, 2, 2]
    assert lay.block_start.tolist() == [0, 9, 18]
    assert lay.diag_pos.tolist() == [0, 4, 8, 9, 13, 17]
    assert lay.col_start.tolist() == [0, 3, 6, 9, 12, 15]
    assert lay.entry_flat.tolist() == [0, 3, 9, 2, 8, 11]
    empty = build_layout(np.zeros((3, 2), dtype=bool))
    assert empty.sticks.size == 0
    st = psi_step(empty, np.eye(3), np.ones((3, 2)), np.zeros((3, 2)), np.zeros(0),
                  workspace=FactorWorkspace(empty))
    assert np.all(st.psi_mean == 1.0) and np.all(st.psi_var == 1.0)


@pytest.mark.parametrize("n", [96, 131, 200])
def test_blocked_cholesky_inverse_matches_dense(n):
    rng = np.random.default_rng(n)
    r = rng.normal(size=(n, n))
    a = r @ r.T / n + 0.1 * np.eye(n)
    w = np.asfortranarray(a.copy())
    assert _chol_inv_blocked(w) == 0
    expected = np.linalg.inv(np.linalg.cholesky(a))
    np.testing.assert_allclose(w, expected, rtol=1e-10, atol=1e-10 * np.abs(expected).max())
    assert np.all(np.triu(w, 1) == 0.0)


def test_psi_step_with_blocked_sticks_matches_dense_solves():
    # C = 120 with some sticks observed almost everywhere, so |O_k| >= 96 takes the block step
    rng = np.random.default_rng(11)
    c, km1 = 120, 4
    sigma, _ = jittered_covariance(_se_cov(c, 3.0, rng))
    observed = rng.random((c, km1)) < np.array([0.95, 0.9, 0.5, 0.85])
    assert np.any(observed.sum(axis=0) >= 96) and np.any(observed.sum(axis=0) < 96)
    omega = np.where(observed, 10.0 ** rng.uniform(-3.0, 3.0, size=(c, km1)), 0.0)
    kappa = np.where(observed, rng.normal(size=(c, km1)), 0.0)
    mu = rng.normal(size=(c, km1))
    layout = build_layout(observed)
    ws = FactorWorkspace(layout, sigma)
    st = psi_step(layout, sigma, mu, kappa, layout.gather(omega), workspace=ws)
    lam, var, trace_dv, logdet, quad, _ = _dense_step(sigma, mu, kappa, omega)
    np.testing.assert_allclose(st.psi_mean, lam, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(st.psi_var[observed], var[observed], rtol=1e-7, atol=1e-11)
    np.testing.assert_allclose(st.logdet_b, logdet, rtol=1e-9)
    np.testing.assert_allclose(st.trace_dv, trace_dv, rtol=1e-8)
    np.testing.assert_allclose(st.quad, quad, rtol=1e-8)
    filled = _marginal_variances(layout, sigma, ws, st.psi_var)
    np.testing.assert_allclose(filled, var, rtol=1e-7, atol=1e-11)
