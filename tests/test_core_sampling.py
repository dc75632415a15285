"""Draws from q, Monte Carlo probabilities and VI vs the exact Gibbs sampler."""

from __future__ import annotations

import numpy as np
import pytest

from corrpriors.core import CorrelatedMultinomial
from corrpriors.core.stick_breaking import log_probs, psi_to_pi, uniform_psi


def _setup(c=6, k=4, seed=0, n=8):
    rng = np.random.default_rng(seed)
    x = np.linspace(0, 3, c)
    cov = np.exp(-np.subtract.outer(x, x) ** 2 / 1.5)
    counts = rng.poisson(n / k, size=(c, k))
    counts[2] = 0
    return cov, counts


def test_joint_draws_have_the_variational_covariance():
    cov, counts = _setup()
    m = CorrelatedMultinomial(covariance=cov).fit(counts)
    draws = m.sample_psi(40_000, rng=np.random.default_rng(1))
    assert draws.shape == (40_000, 6, 3)
    sigma = m.scale_ * m.covariance_
    sinv = np.linalg.inv(sigma)
    for k in range(3):
        v = np.linalg.inv(sinv + np.diag(m.result_.site_precision[:, k]))
        emp = np.cov(draws[:, :, k], rowvar=False)
        np.testing.assert_allclose(emp, v, atol=0.04 * np.max(np.diag(v)))
        np.testing.assert_allclose(draws[:, :, k].mean(0), m.psi_mean_[:, k],
                                   atol=5 * np.sqrt(np.diag(v).max() / 40_000))
        np.testing.assert_allclose(np.diag(v), m.psi_var_[:, k], rtol=1e-8)
    # sticks are independent under q
    cross = np.corrcoef(draws[:, 0, 0], draws[:, 0, 1])[0, 1]
    assert abs(cross) < 0.03


def test_sample_probs_shape_simplex_and_reproducibility():
    cov, counts = _setup()
    m = CorrelatedMultinomial(covariance=cov).fit(counts)
    p1 = m.sample_probs(50, rng=3)
    p2 = m.sample_probs(50, rng=np.random.default_rng(3))
    p3 = m.sample_probs(50, rng=4)
    assert p1.shape == (50, 6, 4)
    np.testing.assert_allclose(p1.sum(-1), 1.0)
    np.testing.assert_array_equal(p1, p2)
    assert not np.array_equal(p1, p3)


def test_mc_probs_match_joint_draws_and_differ_from_plugin():
    cov, counts = _setup(n=4)
    m = CorrelatedMultinomial(covariance=cov).fit(counts)
    mc = m.probs(method="mc", n_samples=20_000, rng=5)
    joint = m.sample_probs(20_000, rng=6).mean(0)
    np.testing.assert_allclose(mc, joint, atol=0.01)
    np.testing.assert_allclose(mc.sum(-1), 1.0)
    plugin = m.probs()
    np.testing.assert_allclose(plugin, psi_to_pi(m.psi_mean_))
    assert np.abs(mc - plugin).max() > 0.01  # E[pi(psi)] != pi(E[psi]) with wide q


def test_gibbs_and_vi_agree_on_a_data_rich_problem():
    rng = np.random.default_rng(7)
    c, k = 5, 3
    x = np.linspace(0, 2, c)
    cov = np.exp(-np.subtract.outer(x, x) ** 2)
    chol = np.linalg.cholesky(cov + 1e-8 * np.eye(c))
    psi = uniform_psi(k) + chol @ rng.standard_normal((c, k - 1))
    counts = np.stack([rng.multinomial(300, p) for p in np.exp(log_probs(psi))])
    m = CorrelatedMultinomial(covariance=cov).fit(counts)
    g = m.fit_gibbs(counts, n_samples=1500, burn_in=200, rng=8)
    gm = g.psi.mean(0)
    gsd = g.psi.std(0)
    # 4 Monte Carlo standard errors (effective sample size taken as n/5) plus a small VI bias
    tol = 4 * gsd / np.sqrt(1500 / 5) + 0.02 * gsd
    assert np.all(np.abs(gm - m.psi_mean_) < tol)
    # mean-field VI slightly under-estimates the marginal spread, but not by much here
    np.testing.assert_allclose(np.sqrt(m.psi_var_), gsd, rtol=0.15)


@pytest.mark.filterwarnings("ignore::corrpriors.exceptions.JitterWarning")
def test_select_kernel_ranks_by_elbo():
    rng = np.random.default_rng(9)
    c, k = 20, 3
    x = np.linspace(0, 6, c)
    smooth = np.exp(-np.subtract.outer(x, x) ** 2 / 4.0)
    chol = np.linalg.cholesky(smooth + 1e-8 * np.eye(c))
    psi = uniform_psi(k) + 2.0 * chol @ rng.standard_normal((c, k - 1))
    counts = np.stack([rng.multinomial(30, p) for p in np.exp(log_probs(psi))])
    from corrpriors.core import select_kernel
    ranked = select_kernel(counts, {"independent": np.eye(c), "smooth": smooth},
                           learn_scale=True, scale_prior=(2.0, 0.5))
    assert [name for name, _ in ranked][0] == "smooth"
    assert ranked[0][1].elbo_ >= ranked[1][1].elbo_
    with pytest.raises(ValueError, match="candidates"):
        select_kernel(counts, {})


def test_joint_draws_equal_dense_matheron_with_the_same_random_numbers():
    # the packed sampler against a dense transcription of Matheron's rule that draws the
    # random numbers in the documented order (per stick: prior draw, then the noise of O_k)
    from corrpriors.core.priors.dense import DenseCovariancePrior

    rng = np.random.default_rng(5)
    c, km1, n = 9, 5, 4
    x = np.linspace(0, 4, c)
    sigma = 1.3 * np.exp(-np.subtract.outer(x, x) ** 2) + 1e-8 * np.eye(c)
    site = np.where(rng.random((c, km1)) < 0.6, 10.0 ** rng.uniform(-2, 2, (c, km1)), 0.0)
    site[:, 1] = 0.0  # an unobserved stick: prior draws only
    mean = rng.normal(size=(c, km1))
    got = DenseCovariancePrior(sigma, jitter=0.0).sample_posterior(
        1.0, mean, site, n, rng=np.random.default_rng(9))

    gen = np.random.default_rng(9)
    chol = np.linalg.cholesky(sigma)
    want = np.empty((n, c, km1))
    for k in range(km1):
        f = chol @ gen.standard_normal((c, n))
        obs = np.flatnonzero(site[:, k] > 0)
        if obs.size:
            eps = gen.standard_normal((obs.size, n))
            b = sigma[np.ix_(obs, obs)] + np.diag(1.0 / site[obs, k])
            y = f[obs] + eps / np.sqrt(site[obs, k])[:, None]
            f = f - sigma[:, obs] @ np.linalg.solve(b, y)
        want[:, :, k] = (mean[:, k][:, None] + f).T
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
