"""Dirichlet-multinomial baseline: evidence vs integration / Monte Carlo, posterior means, errors."""

import numpy as np
import pytest
from scipy import integrate, stats
from scipy.special import gammaln

from corrpriors.baselines import DirichletMultinomial


@pytest.mark.parametrize("x, a", [((3, 5), (1.0, 1.0)), ((0, 7), (0.5, 2.0)), ((10, 0), (3.0, 0.2)),
                                  ((0, 0), (1.0, 1.0))])
def test_log_marginal_k2_matches_beta_binomial_integral(x, a):
    n = sum(x)
    m = DirichletMultinomial(alpha=np.array(a)).fit(np.array([x]))

    def integrand(u):  # p = sigmoid(u), dp = p (1 - p) du: smooth even where the Beta pdf is not
        lp, l1p = -np.logaddexp(0, -u), -np.logaddexp(0, u)
        return np.exp(stats.binom.logpmf(x[0], n, np.exp(lp)) + a[0] * lp + a[1] * l1p
                      - (gammaln(a[0]) + gammaln(a[1]) - gammaln(a[0] + a[1])))

    val, _ = integrate.quad(integrand, -np.inf, np.inf, limit=400, epsabs=0, epsrel=1e-12)
    assert m.log_marginal_likelihood_ == pytest.approx(np.log(val), rel=1e-9, abs=1e-9)
    assert m.log_marginal_likelihood_ == pytest.approx(stats.betabinom.logpmf(x[0], n, *a), rel=1e-12)
    assert m.elbo_ == m.log_marginal_likelihood_


def test_log_marginal_k3_matches_monte_carlo():
    counts = np.array([[4, 1, 2], [0, 3, 0]])
    alpha = np.array([[0.7, 1.5, 2.0], [1.0, 1.0, 1.0]])
    m = DirichletMultinomial(alpha=alpha).fit(counts)
    rng = np.random.default_rng(0)
    M = 400_000
    for c in range(2):
        p = rng.dirichlet(alpha[c], size=M)
        lik = np.exp(gammaln(counts[c].sum() + 1) - gammaln(counts[c] + 1).sum()
                     + (counts[c] * np.log(p)).sum(1))
        est, se = lik.mean(), lik.std() / np.sqrt(M)
        got = np.exp(m.log_marginal_likelihood_per_covariate_[c])
        assert abs(got - est) < 4.5 * se
    np.testing.assert_allclose(m.log_marginal_likelihood_, m.log_marginal_likelihood_per_covariate_.sum())
    # independent closed form from scipy
    ref = sum(stats.dirichlet_multinomial.logpmf(counts[c], alpha[c], counts[c].sum()) for c in range(2))
    assert m.log_marginal_likelihood_ == pytest.approx(ref, rel=1e-12)


def test_probs_normalised_over_category_axis():
    counts = np.array([[3, 0, 1, 0, 0], [0, 0, 0, 0, 2]])   # C = 2 != K = 5
    m = DirichletMultinomial(alpha=0.5).fit(counts)
    p = m.probs()
    assert p.shape == (2, 5)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-15)
    np.testing.assert_allclose(p[0], (counts[0] + 0.5) / (4 + 2.5))
    np.testing.assert_array_equal(m.posterior_alpha_, counts + 0.5)
    np.testing.assert_array_equal(m.prior_alpha_, np.full((2, 5), 0.5))


def test_alpha_to_zero_limit():
    counts = np.array([[3, 1, 0], [0, 0, 0]])
    m = DirichletMultinomial(alpha=1e-12).fit(counts)
    np.testing.assert_allclose(m.probs()[1], 1 / 3, rtol=1e-12)          # empty row -> uniform
    np.testing.assert_allclose(m.probs()[0], [0.75, 0.25, 0.0], atol=1e-11)  # observed -> frequencies
    s = m.sample_probs(200, rng=0)
    assert np.all(np.isfinite(s))
    np.testing.assert_allclose(s.sum(-1), 1.0)


def test_sample_probs_matches_posterior_and_is_reproducible():
    counts = np.array([[2, 5, 1], [0, 0, 9]])
    alpha = np.array([1.0, 0.3, 2.0])
    m = DirichletMultinomial(alpha=alpha).fit(counts)
    s = m.sample_probs(20_000, rng=np.random.default_rng(1))
    assert s.shape == (20_000, 2, 3)
    np.testing.assert_allclose(s.sum(-1), 1.0, rtol=1e-14)
    a = m.posterior_alpha_
    A = a.sum(1, keepdims=True)
    mean, var = a / A, a * (A - a) / (A**2 * (A + 1))
    assert np.all(np.abs(s.mean(0) - mean) < 4.5 * np.sqrt(var / 20_000))
    np.testing.assert_allclose(s.var(0), var, rtol=0.05)
    np.testing.assert_array_equal(m.sample_probs(5, rng=3), m.sample_probs(5, rng=3))
    assert not np.array_equal(m.sample_probs(5, rng=3), m.sample_probs(5, rng=4))
    mc = m.probs(method="mc", n_samples=20_000, rng=2)
    assert np.all(np.abs(mc - mean) < 4.5 * np.sqrt(var / 20_000))


def test_interface_parity_with_correlated_model():
    m = DirichletMultinomial().fit([[1, 2], [0, 1]], warm_start=True)
    assert m.converged_ and m.n_iter_ == 0
    m2 = DirichletMultinomial(alpha=np.ones((2, 2))).fit(np.array([[1.0, 2.0], [0.0, 1.0]]))
    np.testing.assert_allclose(m.probs(), m2.probs())


@pytest.mark.parametrize("alpha, match", [
    (0.0, "alpha: concentrations must be positive"),
    (-1.0, "alpha: concentrations must be positive"),
    (np.nan, "alpha: contains NaN"),
    (np.ones(4), r"alpha: expected shape \(K,\) = \(3,\)"),
    (np.ones((3, 3)), r"alpha: expected shape \(C, K\) = \(2, 3\)"),
    (np.ones((1, 2, 3)), "alpha: expected a scalar, shape"),
    ("a", "alpha: expected a positive number"),
])
def test_bad_alpha_raises(alpha, match):
    with pytest.raises(ValueError, match=match):
        DirichletMultinomial(alpha=alpha).fit([[1, 0, 2], [0, 0, 1]])


def test_bad_usage_raises():
    with pytest.raises(ValueError, match="not fitted yet"):
        DirichletMultinomial().probs()
    m = DirichletMultinomial().fit([[1, 0], [0, 1]])
    with pytest.raises(ValueError, match="method: expected 'plugin' or 'mc'"):
        m.probs(method="mean")
    with pytest.raises(ValueError, match="n: expected an integer >= 1"):
        m.sample_probs(0)
    with pytest.raises(ValueError, match="counts: counts must be non-negative"):
        DirichletMultinomial().fit([[1, -1]])
    with pytest.raises(ValueError, match="counts: expected at least K=2 categories"):
        DirichletMultinomial().fit([[1], [2]])


def test_concentrations_beyond_the_exact_range_are_refused():
    """Below about 1e-160 the evidence underflowed to -inf (1e-200: exact -461.43 by mpmath),
    and at 5e307 it was NaN; the range [1e-100, 1e100] is refused outside, exact inside
    (mpmath, 60 digits, at the small end; the multinomial limit at the large end)."""
    import math

    import mpmath as mp

    from corrpriors.baselines.dirichlet import ALPHA_RANGE

    x = [5, 1, 0]
    for bad in (1e-101, 1e-200, 1e101, 5e307):
        with pytest.raises(ValueError, match=r"^alpha: expected concentrations in \[1e-100, 1e\+100\]"):
            DirichletMultinomial(alpha=bad).fit([x])
    lo, hi = ALPHA_RANGE
    with mp.workdps(60):
        a = mp.mpf(lo)
        exact = (mp.loggamma(7) - mp.loggamma(6) - mp.loggamma(2) + mp.loggamma(3 * a) - mp.loggamma(3 * a + 6)
                 + mp.loggamma(a + 5) + mp.loggamma(a + 1) - 2 * mp.loggamma(a))
    assert DirichletMultinomial(alpha=lo).fit([x]).elbo_ == pytest.approx(float(exact), rel=1e-13)
    multinomial = math.log(6) - 6 * math.log(3)                   # alpha -> infinity
    assert DirichletMultinomial(alpha=hi).fit([x]).elbo_ == pytest.approx(multinomial, rel=1e-13)


def test_mc_draw_count_is_named_n_samples():
    """probs(method='mc', n_samples=0) said 'n: expected an integer >= 1'."""
    m = DirichletMultinomial().fit([[1, 0], [0, 1]])
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match=r"^n_samples: expected an integer >= 1, got "):
            m.probs(method="mc", n_samples=bad)


def test_draws_that_do_not_fit_in_memory_are_refused_before_anything_is_allocated():
    """sample_probs(10**10), probs('mc', n_samples=10**10) and PolicyEstimator('dirichlet')
    .policy('mc', n_samples=10**10) raised a raw MemoryError (after asking numpy for 18.6 GiB);
    sample_policies was already refused with MemoryEstimateError."""
    from corrpriors._memory import MemoryEstimateError
    from corrpriors.applications.imitation import PolicyEstimator

    m = DirichletMultinomial().fit([[1, 2]])
    with pytest.raises(MemoryEstimateError, match=r"^n: 10,000,000,000 draws from the "
                                                  r"DirichletMultinomial posterior of \(C, K\) = \(1, 2\)"):
        m.sample_probs(10**10, rng=0)
    with pytest.raises(MemoryEstimateError, match=r"^n_samples: 10,000,000,000 draws .* would need"):
        m.probs(method="mc", n_samples=10**10)
    est = PolicyEstimator("dirichlet").fit([[1, 2]])
    with pytest.raises(MemoryEstimateError, match=r"^n_samples: 10,000,000,000 draws"):
        est.policy("mc", n_samples=10**10, rng=0)


@pytest.mark.parametrize("alpha", [1e-3, 1.0])
@pytest.mark.parametrize("shape", [(100, 4, 500), (10, 50, 200), (1, 2, 20_000), (300, 3, 100)])
def test_draw_memory_estimate_covers_the_traced_peak(monkeypatch, alpha, shape):
    """The estimate checked before drawing is at least the peak tracemalloc sees (numpy's
    arrays are traced), and not more than twice it."""
    import corrpriors.baselines.dirichlet as mod
    from memory_checks import traced_peak

    n_rows, n_cat, n = shape
    counts = np.random.default_rng(0).integers(0, 5, (n_rows, n_cat))
    m = DirichletMultinomial(alpha).fit(counts)
    seen = []
    real = mod.check_memory
    monkeypatch.setattr(mod, "check_memory", lambda needed, *a: seen.append(needed) or real(needed, *a))
    for call in (lambda: m.sample_probs(n, rng=0), lambda: m.probs("mc", n_samples=n, rng=0)):
        seen.clear()
        _, peak = traced_peak(call)
        assert len(seen) == 1 and peak <= seen[0] <= 2 * peak, (peak, seen)
