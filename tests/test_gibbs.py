"""Gibbs sampler: Geweke joint-distribution test (which must catch broken steps), the exact
Gaussian conditional, posterior means vs quadrature / importance sampling, and input errors.

The Geweke test runs R independent chains at once by treating (chain, stick) pairs as the
columns of one sweep: sticks are independent given Sigma, so a sweep over R * (K-1)
columns is R sweeps of the K-1 stick problem.
"""

import warnings

import numpy as np
import pytest

from corrpriors.core.gibbs import (
    GibbsResult,
    effective_sample_size,
    gibbs_sweep,
    run_gibbs,
    sample_omega,
    sample_psi,
)
from corrpriors.core.stick_breaking import count_statistics, psi_to_pi
from corrpriors.exceptions import JitterWarning

# ----------------------------------------------------------------------------- Geweke
# (mu (C, K-1), Sigma (C, C), N (C,)): a small K = 3 problem, and one with a covariate that
# is never observed (N = 0, so b = 0 and it moves only through the prior correlation).
SMALL = (np.array([[0.5, -0.7], [0.9, 0.2]]), np.array([[1.0, 0.6], [0.6, 1.3]]), np.array([4, 2]))
WITH_EMPTY = (np.array([[0.3, -0.2, 0.1], [-0.5, 0.4, 0.0], [0.2, 0.2, -0.6]]),
              np.array([[1.0, 0.7, 0.3], [0.7, 1.2, 0.5], [0.3, 0.5, 0.8]]), np.array([3, 0, 1]))


def _draw_x(psi, N, rng):
    """x | psi for stacked problems: psi (C, R, K-1) -> x (C, R, K)."""
    return rng.multinomial(N[:, None], psi_to_pi(psi))


def _stats(psi, x):
    """Test functions g(psi, x) per chain: psi, psi^2, psi_1k * psi_2k, x, psi_c1 x_c1."""
    _C, R, _Km1 = psi.shape
    cols = [psi.transpose(1, 0, 2).reshape(R, -1), (psi**2).transpose(1, 0, 2).reshape(R, -1),
            psi[0] * psi[1], x.transpose(1, 0, 2).reshape(R, -1).astype(float),
            (psi[:, :, 0] * x[:, :, 0]).T]
    return np.concatenate(cols, axis=1)


def correct_step(psi_cols, b, kappa, mean, cov, rng):
    return gibbs_sweep(psi_cols, b, kappa, mean, cov, rng=rng)[0]


def halved_omega_step(psi_cols, b, kappa, mean, cov, rng):
    omega = sample_omega(psi_cols, b, rng=rng)
    return sample_psi(0.5 * omega, kappa, mean, cov, rng=rng, observed=b > 0)


def slightly_shrunk_omega_step(psi_cols, b, kappa, mean, cov, rng):
    omega = sample_omega(psi_cols, b, rng=rng)
    return sample_psi(0.8 * omega, kappa, mean, cov, rng=rng, observed=b > 0)


def dropped_mean_step(psi_cols, b, kappa, mean, cov, rng):
    omega = sample_omega(psi_cols, b, rng=rng)
    return sample_psi(omega, kappa, np.zeros_like(mean), cov, rng=rng, observed=b > 0)


def geweke_z(step, problem=SMALL, n_chains=300, n_iter=60, n_marginal=100_000, seed=0):
    """z-scores of successive-conditional vs marginal-conditional means of the test functions."""
    mu, Sigma, N = problem
    rng = np.random.default_rng(seed)
    C, Km1 = mu.shape
    L = np.linalg.cholesky(Sigma)
    # marginal-conditional: i.i.d. (psi, x) from the joint
    psi_m = mu[:, None, :] + np.einsum("ij,jrk->irk", L, rng.standard_normal((C, n_marginal, Km1)))
    g_m = _stats(psi_m, _draw_x(psi_m, N, rng))
    mean_m, se_m = g_m.mean(0), g_m.std(0) / np.sqrt(n_marginal)
    # successive-conditional: R chains, each started from the joint (so stationary from t = 0)
    psi = mu[:, None, :] + np.einsum("ij,jrk->irk", L, rng.standard_normal((C, n_chains, Km1)))
    x = _draw_x(psi, N, rng)
    mean_cols = np.tile(mu, (1, n_chains))                      # columns ordered (chain, stick)
    acc = np.zeros((n_chains, g_m.shape[1]))
    for _ in range(n_iter):
        b, kappa = count_statistics(x)                           # (C, R, K-1)
        new = step(psi.reshape(C, -1), b.reshape(C, -1), kappa.reshape(C, -1), mean_cols, Sigma, rng)
        psi = new.reshape(C, n_chains, Km1)
        x = _draw_x(psi, N, rng)
        acc += _stats(psi, x)
    chain_means = acc / n_iter                                   # independent across chains
    mean_s, se_s = chain_means.mean(0), chain_means.std(0, ddof=1) / np.sqrt(n_chains)
    se = np.sqrt(se_s**2 + se_m**2)
    diff = mean_s - mean_m
    assert np.all(diff[se == 0] == 0)  # constant statistics (x of an unobserved covariate)
    return np.divide(diff, se, out=np.zeros_like(diff), where=se > 0)


def test_geweke_joint_distribution_passes_for_the_sampler():
    z = geweke_z(correct_step)
    assert np.max(np.abs(z)) < 4.0, np.round(z, 2)


@pytest.mark.parametrize("step", [halved_omega_step, dropped_mean_step])
def test_geweke_detects_a_broken_step(step):
    z = geweke_z(step)
    assert np.max(np.abs(z)) > 8.0, np.round(z, 2)


@pytest.mark.slow
def test_geweke_with_unobserved_covariate_long():
    kw = {"problem": WITH_EMPTY, "n_chains": 1000, "n_iter": 200, "n_marginal": 400_000, "seed": 1}
    z = geweke_z(correct_step, **kw)
    assert np.max(np.abs(z)) < 4.5, np.round(z, 2)
    assert np.max(np.abs(geweke_z(slightly_shrunk_omega_step, **kw))) > 6.0


# ----------------------------------------------------------------------------- psi | omega
def test_psi_given_omega_matches_closed_form_one_covariate():
    """C = 1: psi | omega ~ N(V (kappa + mu / s2), V), V = 1 / (1 / s2 + omega)."""
    rng = np.random.default_rng(3)
    S = 50_000
    s2, w, kap, mu = 2.0, 0.8, 1.3, -0.4
    psi = sample_psi(np.full((1, S), w), np.full((1, S), kap), np.full((1, S), mu), np.array([[s2]]), rng=rng)
    V = 1.0 / (1.0 / s2 + w)
    m = V * (kap + mu / s2)
    assert abs(psi.mean() - m) < 4.5 * np.sqrt(V / S)
    assert abs(psi.var() / V - 1) < 4.5 * np.sqrt(2 / S)


def test_psi_given_omega_matches_dense_formula_with_unobserved_covariate():
    rng = np.random.default_rng(4)
    C, S = 3, 60_000
    A = rng.standard_normal((C, C))
    Sig = A @ A.T + 0.5 * np.eye(C)
    om = np.array([0.7, 0.0, 2.5])          # covariate 1 unobserved (b = 0)
    ka = np.array([1.5, 0.0, -2.0])
    mu = np.array([0.3, -1.0, 0.5])
    psi = sample_psi(np.repeat(om[:, None], S, 1), np.repeat(ka[:, None], S, 1),
                     np.repeat(mu[:, None], S, 1), Sig, rng=rng)
    P = np.linalg.inv(Sig) + np.diag(om)    # naive dense transcription (oracle)
    V = np.linalg.inv(P)
    m = V @ (ka + np.linalg.solve(Sig, mu))
    se_m = np.sqrt(np.diag(V) / S)
    np.testing.assert_array_less(np.abs(psi.mean(1) - m), 4.5 * se_m)
    se_V = np.sqrt((np.outer(np.diag(V), np.diag(V)) + V**2) / S)
    np.testing.assert_array_less(np.abs(np.cov(psi) - V), 4.5 * se_V)


# ----------------------------------------------------------------------------- posterior means
def _log_lik(psi, counts):
    """log prod_ck Bin(x_ck | b_ck, sigma(psi_ck)) up to a constant; psi (..., C, K-1)."""
    b, _kappa = count_statistics(counts)
    x = counts[:, :-1]
    ls = -np.logaddexp(0, -psi)
    l1s = -np.logaddexp(0, psi)
    return np.sum(x * ls + (b - x) * l1s, axis=(-2, -1))


def _batch_se(samples, n_batches=25):
    M = samples.shape[0] // n_batches * n_batches
    bm = samples[:M].reshape(n_batches, -1, *samples.shape[1:]).mean(1)
    return bm.std(0, ddof=1) / np.sqrt(n_batches)


def _grid_posterior_mean_2d(mu2, Sig2, loglik_fn, to_pi, half_width=8.0, n=401):
    """Quadrature of E[pi | x] over a 2-D psi (prior N(mu2, Sig2))."""
    sd = np.sqrt(np.diag(Sig2))
    g0 = np.linspace(mu2[0] - half_width * sd[0], mu2[0] + half_width * sd[0], n)
    g1 = np.linspace(mu2[1] - half_width * sd[1], mu2[1] + half_width * sd[1], n)
    P0, P1 = np.meshgrid(g0, g1, indexing="ij")
    pts = np.stack([P0.ravel(), P1.ravel()], axis=1)
    d = pts - mu2
    lp = -0.5 * np.einsum("ni,ij,nj->n", d, np.linalg.inv(Sig2), d) + loglik_fn(pts)
    w = np.exp(lp - lp.max())
    w /= w.sum()
    return np.einsum("n,nk->k", w, to_pi(pts))


def test_posterior_mean_one_covariate_three_categories_vs_quadrature():
    counts = np.array([[3.0, 0.0, 1.0]])
    mu = np.array([[0.2, -0.5]])
    sig = np.array([[1.5]])
    # C = 1: the two sticks are a priori independent with variance 1.5
    exact = _grid_posterior_mean_2d(mu[0], 1.5 * np.eye(2),
                                    lambda p: _log_lik(p[:, None, :], counts),
                                    lambda p: psi_to_pi(p))
    res = run_gibbs(counts, mu, sig, n_samples=6000, burn_in=100, rng=np.random.default_rng(5))
    pi = res.pi[:, 0, :]
    err = np.abs(pi.mean(0) - exact)
    assert np.all(err < 4.5 * _batch_se(pi) + 1e-4), (pi.mean(0), exact)


def test_posterior_mean_two_correlated_covariates_vs_quadrature():
    counts = np.array([[5.0, 1.0], [0.0, 2.0]])
    mu = np.array([[0.0], [0.3]])
    Sig = np.array([[1.0, 0.8], [0.8, 1.0]])
    exact = _grid_posterior_mean_2d(mu[:, 0], Sig, lambda p: _log_lik(p[:, :, None], counts),
                                    lambda p: psi_to_pi(p[:, :, None])[:, :, 0])
    res = run_gibbs(counts, mu, Sig, n_samples=6000, burn_in=100, rng=np.random.default_rng(6))
    pi1 = res.pi[:, :, 0]
    err = np.abs(pi1.mean(0) - exact)
    assert np.all(err < 4.5 * _batch_se(pi1) + 1e-4), (pi1.mean(0), exact)


def test_posterior_mean_with_unobserved_covariate_vs_importance_sampling():
    """C = 2, K = 3, covariate 1 never observed: its posterior is carried by the correlation."""
    counts = np.array([[6.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    mu = np.array([-0.3, 0.1])
    Sig = np.array([[1.0, 0.9], [0.9, 1.0]])
    rng = np.random.default_rng(7)
    M = 400_000
    L = np.linalg.cholesky(Sig)
    psi = mu[None, None, :] + np.einsum("ij,mjk->mik", L, rng.standard_normal((M, 2, 2)))
    w = np.exp(_log_lik(psi, counts))
    w /= w.sum()
    pis = psi_to_pi(psi)
    exact = np.einsum("m,mck->ck", w, pis)
    is_se = np.sqrt(np.einsum("m,mck->ck", w**2, (pis - exact) ** 2))
    res = run_gibbs(counts, mu, Sig, n_samples=6000, burn_in=100, rng=np.random.default_rng(8))
    err = np.abs(res.probs() - exact)
    assert np.all(err < 4.5 * np.sqrt(_batch_se(res.pi) ** 2 + is_se**2) + 1e-4), (res.probs(), exact)
    # the correlation moves the unobserved covariate towards category 0 (prior mean alone: 0.43)
    assert res.probs()[1, 0] > psi_to_pi(mu)[0] + 0.1


# ----------------------------------------------------------------------------- API
def test_result_shapes_reproducibility_and_thinning():
    counts = np.array([[2, 0, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1]])
    Sig = np.exp(-np.subtract.outer(np.arange(3.0), np.arange(3.0)) ** 2)
    r1 = run_gibbs(counts, np.zeros(3), Sig, n_samples=7, burn_in=3, thin=2, rng=11)
    r2 = run_gibbs(counts, np.zeros(3), Sig, n_samples=7, burn_in=3, thin=2, rng=11)
    r3 = run_gibbs(counts, np.zeros(3), Sig, n_samples=7, burn_in=3, thin=2, rng=12)
    assert isinstance(r1, GibbsResult)
    assert r1.psi.shape == (7, 3, 3) and r1.pi.shape == (7, 3, 4) and r1.n_sweeps == 17
    np.testing.assert_allclose(r1.pi.sum(-1), 1.0)
    np.testing.assert_array_equal(r1.psi, r2.psi)
    assert not np.array_equal(r1.psi, r3.psi)
    np.testing.assert_array_equal(r1.psi[-1], r1.psi_last)
    np.testing.assert_array_equal(r1.omega_last[1], 0.0)      # b = 0 -> omega = 0
    assert np.all(r1.omega_last[0, :1] > 0)
    np.testing.assert_allclose(r1.probs(), r1.pi.mean(0))
    # continuing from psi_last
    r4 = run_gibbs(counts, np.zeros(3), Sig, n_samples=2, burn_in=0, rng=1, init_psi=r1.psi_last)
    assert r4.psi.shape == (2, 3, 3)


def test_rank_deficient_covariance_jitters_and_large_counts_are_finite():
    counts = np.array([[10**6, 3, 0], [5, 10**6, 10**5]])
    # round-off-level jitter (the core's one rule: <= 1e-8 x mean diagonal) is silent
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitterWarning)
        res = run_gibbs(counts, np.zeros((2, 2)), np.ones((2, 2)), n_samples=20, burn_in=5, rng=0)
    assert res.jitter > 0 and np.all(np.isfinite(res.psi))
    # huge, imbalanced counts: the normal-approximation PG regime; the chain mixes slowly in
    # the far tail (a known property of PG Gibbs with imbalanced data, Johndrow et al. 2019),
    # so start near the mode and compare psi_00 with 1-D quadrature of its exact posterior
    g = np.linspace(-5, 25, 300_001)
    lp = -0.5 * g**2 - 1e6 * np.logaddexp(0, -g) - 3 * np.logaddexp(0, g)
    w = np.exp(lp - lp.max())
    exact = np.sum(w * g) / np.sum(w)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = run_gibbs(counts, np.zeros(2), np.eye(2), n_samples=1500, burn_in=200, rng=0,
                        init_psi=np.array([[11.0, 0.0], [-8.0, 2.3]]))
    assert np.all(np.isfinite(res.psi))
    assert abs(res.psi[:, 0, 0].mean() - exact) < 0.3
    np.testing.assert_allclose(res.probs()[1], counts[1] / counts[1].sum(), atol=1e-3)


@pytest.mark.parametrize("kwargs, match", [
    ({"counts": [[1, -1]]}, "counts: counts must be non-negative"),
    ({"counts": [[1.5, 1]]}, "counts: counts must be integers"),
    ({"covariance": np.eye(3)}, r"covariance: expected shape \(2, 2\)"),
    ({"covariance": np.array([[1.0, 2.0], [0.0, 1.0]])}, "covariance: must be symmetric"),
    ({"covariance": np.array([[1.0, 2.0], [2.0, 1.0]])}, "covariance: must be positive semi-definite"),
    ({"mean": np.zeros((3, 2))}, r"mean: expected shape \(C, K-1\) = \(2, 2\)"),
    ({"mean": np.array([0.0, np.nan])}, "mean: contains NaN"),
    ({"n_samples": 0}, "n_samples: expected an integer >= 1"),
    ({"thin": 0}, "thin: expected an integer >= 1"),
    ({"burn_in": -1}, "burn_in: expected an integer >= 0"),
    ({"init_psi": np.full((2, 2), np.inf)}, "init_psi: contains NaN or infinite"),
])
def test_bad_input_raises(kwargs, match):
    args = {"counts": [[1, 2, 0], [0, 1, 1]], "mean": np.zeros(2), "covariance": np.eye(2), "n_samples": 2,
                "burn_in": 1, "rng": 0}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        run_gibbs(**args)


# ----------------------------------------------------------------------------- Gibbs vs VI
def test_gibbs_agrees_with_variational_posterior_on_data_rich_problem():
    """Data-rich problem (C = 12, K = 4, 200 draws per covariate): the Gibbs posterior means and
    standard deviations agree with CorrelatedMultinomial's q(psi). Tolerance: 4.5 Monte Carlo
    standard errors plus a VI bias allowance of 0.15 posterior standard deviations."""
    from corrpriors.core.model import CorrelatedMultinomial
    from corrpriors.kernels import SquaredExponential

    rng = np.random.default_rng(0)
    C, K = 12, 4
    bound = SquaredExponential(lengthscale=1.0).bind(coords=np.linspace(0, 3, C)[:, None])
    L = np.linalg.cholesky(bound.gram() + 1e-8 * np.eye(C))
    pi = psi_to_pi(L @ rng.standard_normal((C, K - 1)))
    counts = np.stack([rng.multinomial(200, p) for p in pi])
    vi = CorrelatedMultinomial(covariance=bound).fit(counts)
    res = vi.fit_gibbs(counts, n_samples=2000, burn_in=200, rng=1)
    sd = res.psi.std(0)
    err = np.abs(res.psi_mean() - vi.psi_mean_)
    assert np.all(err < 4.5 * _batch_se(res.psi) + 0.15 * sd), err.max()
    np.testing.assert_allclose(np.sqrt(vi.psi_var_), sd, rtol=0.25)
    assert np.abs(res.probs() - vi.probs(method="mc", n_samples=4000, rng=0)).max() < 0.01


def test_effective_sample_size_on_ar1():
    """AR(1) with coefficient rho: ESS / M -> (1 - rho) / (1 + rho); i.i.d. draws: ESS ~ M."""
    rng = np.random.default_rng(9)
    M, rho = 40_000, 0.8
    e = rng.standard_normal((M, 3))
    x = np.empty_like(e)
    x[0] = e[0] / np.sqrt(1 - rho**2)
    for t in range(1, M):
        x[t] = rho * x[t - 1] + e[t]
    ess = effective_sample_size(x)
    assert ess.shape == (3,)
    np.testing.assert_allclose(ess / M, (1 - rho) / (1 + rho), rtol=0.3)
    assert np.all(effective_sample_size(e) > 0.6 * M)
    with pytest.raises(ValueError, match="samples: need at least 4 draws"):
        effective_sample_size(np.zeros((3, 2)))
    res = run_gibbs([[5, 1], [0, 3]], np.zeros(1), np.eye(2), n_samples=400, burn_in=20, rng=0)
    assert res.effective_sample_size().shape == (2, 1)
