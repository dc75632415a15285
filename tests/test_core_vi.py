"""CAVI for the correlated multinomial model: fast path vs the naive transcription, bound,
monotonicity, stationarity, EM recovery, warm start, extreme counts."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.special import gammaln, logsumexp
from scipy.stats import multivariate_t

from corrpriors.core import CorrelatedMultinomial
from corrpriors.core.cavi import CAVIOptions
from corrpriors.core.cavi import run_cavi as _run_cavi
from corrpriors.core.fixed_point import FixedPointOptions
from corrpriors.core.polya_gamma import pg_mean_unchecked as pg_expectation
from corrpriors.core.priors.dense import DenseCovariancePrior
from corrpriors.core.stick_breaking import count_statistics, log_probs, uniform_psi
from corrpriors.exceptions import ConvergenceWarning
from reference import naive_cavi


def _exp_cov(c, length=1.5, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 4, size=(c, 2))
    d = np.sqrt(((x[:, None] - x[None]) ** 2).sum(-1))
    return np.exp(-d / length)


def _se_cov(c, length=1.0, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 4, size=(c, 2))
    d2 = ((x[:, None] - x[None]) ** 2).sum(-1)
    return np.exp(-d2 / length ** 2)


def _counts(c, k, seed=1, lam=3.0):
    rng = np.random.default_rng(seed)
    x = rng.poisson(lam, size=(c, k))
    x[0] = 0                 # an unobserved covariate
    x[1, 1:] = 0             # later sticks empty for this row
    return x


def _grid_cov(n_side, length):
    g = np.stack(np.meshgrid(np.arange(n_side), np.arange(n_side), indexing="ij"), -1)
    g = g.reshape(-1, 2).astype(float)
    d = np.sqrt(((g[:, None] - g[None]) ** 2).sum(-1))
    return np.exp(-d / length)


def jittered_covariance(cov):
    prior = DenseCovariancePrior(cov)
    return prior, prior.jitter


def run_cavi(counts, prior, mean, *, scale=1.0, init=None, max_iter=1000, tol=1e-8,
             acceleration="anderson", anderson_memory=5, **kw):
    """The functional CAVI entry with keyword options (the old test signature)."""
    iteration = FixedPointOptions(max_iter=max_iter, tol=tol, acceleration=acceleration,
                                  memory=anderson_memory)
    return _run_cavi(counts, prior, mean, CAVIOptions(iteration=iteration, **kw), scale=scale,
                     init=init)


# ------------------------------------------------------------------ fast == naive


@pytest.mark.parametrize("kw", [
    {},
    {"learn_scale": True},
    {"learn_mean": "constant"},
    {"learn_scale": True, "learn_mean": "constant"},
])
def test_fast_path_matches_naive_transcription(kw):
    c, k = 12, 5
    base, eps = jittered_covariance(_se_cov(c))
    counts = _counts(c, k)
    mu = np.repeat(uniform_psi(k)[None], c, 0) + 0.3
    # tol < 0: never stop early, both run exactly 60 plain iterations along the same path
    # (the paper's scheme: the constant mean by a separate M-step)
    fast = run_cavi(counts, base, mu, max_iter=60, tol=-1.0, acceleration=None,
                    mean_update="em", **kw)
    naive = naive_cavi(counts, base.base, mu, max_iter=60, tol=-1.0, **kw)
    assert fast.n_iter == naive["n_iter"] == 60
    np.testing.assert_allclose(fast.psi_mean, naive["psi_mean"], atol=1e-6)
    np.testing.assert_allclose(fast.psi_var, naive["psi_var"], atol=1e-6)
    np.testing.assert_allclose(fast.elbo_trace, naive["elbo_trace"], rtol=1e-9, atol=1e-6)
    assert fast.scale == pytest.approx(naive["scale"], rel=1e-6)
    np.testing.assert_allclose(fast.mean, naive["mean"], atol=1e-6)


@pytest.mark.parametrize("kw", [
    {},
    {"learn_scale": True},
    {"learn_mean": "constant"},
    {"learn_scale": True, "learn_mean": "constant", "scale_prior": (2.0, 1.0),
     "mean_prior_mean": uniform_psi(6), "mean_prior_std": 2.0},
])
def test_accelerated_fit_reaches_the_naive_fixed_point(kw):
    # Anderson acceleration follows a different path: it must end at the fixed point of the
    # paper's plain updates (the naive transcription run to a tight tolerance), with a
    # monotone trace and no more psi steps than the plain iteration needs.
    c, k = 25, 6
    base, eps = jittered_covariance(_se_cov(c, length=1.3, seed=7))
    counts = _counts(c, k, seed=8, lam=2.0)
    mu = np.repeat(uniform_psi(k)[None], c, 0) + 0.3
    naive_kw = {key: v for key, v in kw.items() if key in ("learn_scale", "learn_mean")}
    if naive_kw == kw:
        naive = naive_cavi(counts, base.base, mu, max_iter=5000, tol=1e-15, **naive_kw)
        ref_mean, ref_var, ref_scale = naive["psi_mean"], naive["psi_var"], naive["scale"]
    else:  # hyper-priors: the naive reference has none, use the plain fast path instead
        plain = run_cavi(counts, base, mu, max_iter=20000, tol=1e-15,
                         acceleration=None, **kw)
        ref_mean, ref_var, ref_scale = plain.psi_mean, plain.psi_var, plain.scale
    fast = run_cavi(counts, base, mu, max_iter=5000, tol=1e-14, **kw)
    plain = run_cavi(counts, base, mu, max_iter=20000, tol=1e-14,
                     acceleration=None, **kw)
    assert fast.converged
    np.testing.assert_allclose(fast.psi_mean, ref_mean, atol=1e-6)
    np.testing.assert_allclose(fast.psi_var, ref_var, atol=1e-6)
    assert fast.scale == pytest.approx(ref_scale, rel=1e-5)
    obj = fast.objective_trace
    assert np.all(np.diff(obj) >= -1e-12 * np.abs(obj[1:]))
    assert fast.n_iter <= fast.n_psi_steps <= plain.n_psi_steps
    # the returned q is the one the trace ends at: its ELBO recomputed from scratch agrees
    # (one more plain sweep at the fitted hyper-parameters cannot change it materially)
    again = run_cavi(counts, base, fast.mean, scale=fast.scale, max_iter=1,
                     init=fast, acceleration=None)
    assert again.elbo == pytest.approx(fast.elbo, rel=1e-10)


@pytest.mark.parametrize("prior_std", [None, 1.5])
def test_joint_constant_mean_reaches_the_em_fixed_point_in_fewer_steps(prior_std):
    # The joint (q(psi), m) block and the paper's separate M-step have the same fixed points;
    # the joint block converges in a fraction of the iterations when the prior couples
    # many covariates (a long length scale), and its plain trace never decreases.
    c, k = 40, 5
    base, _ = jittered_covariance(_se_cov(c, length=2.0, seed=11))
    rng = np.random.default_rng(12)   # data from the prior: the scale's optimum is interior
    psi = 0.8 + np.linalg.cholesky(base.base) @ rng.standard_normal((c, k - 1))
    counts = np.stack([rng.multinomial(6, p) for p in np.exp(log_probs(psi))])
    mu = np.repeat(uniform_psi(k)[None], c, 0)
    kw = dict(learn_mean="constant", learn_scale=True, mean_prior_mean=uniform_psi(k),
              mean_prior_std=prior_std)
    em = run_cavi(counts, base, mu, max_iter=50000, tol=1e-15, mean_update="em", **kw)
    joint = run_cavi(counts, base, mu, max_iter=50000, tol=1e-15, **kw)
    plain = run_cavi(counts, base, mu, max_iter=50000, tol=1e-15, acceleration=None, **kw)
    for fit in (joint, plain):
        np.testing.assert_allclose(fit.psi_mean, em.psi_mean, atol=1e-6)
        np.testing.assert_allclose(fit.mean, em.mean, atol=1e-6)
        assert fit.scale == pytest.approx(em.scale, rel=1e-5)
        assert fit.objective == pytest.approx(em.objective, rel=1e-10)
    obj = plain.objective_trace
    assert np.all(np.diff(obj) >= -1e-12 * np.abs(obj[1:]))
    assert joint.n_psi_steps < em.n_psi_steps


def test_anderson_rejects_worse_points_and_stays_monotone():
    # A tiny memory and many sticks: some extrapolations overshoot; the recorded trace must
    # still never decrease, and rejections show up as extra psi steps.
    c, k = 40, 8
    base, eps = jittered_covariance(_se_cov(c, length=2.0, seed=9))
    counts = _counts(c, k, seed=10, lam=6.0)
    mu = np.repeat(uniform_psi(k)[None], c, 0)
    fit = run_cavi(counts, base, mu, max_iter=500, tol=1e-13, learn_scale=True,
                   anderson_memory=1)
    obj = fit.objective_trace
    assert np.all(np.diff(obj) >= -1e-12 * np.abs(obj[1:]))
    with pytest.raises(ValueError, match="acceleration"):
        run_cavi(counts, base, mu, acceleration="newton")
    with pytest.raises(ValueError, match="max_iter"):
        run_cavi(counts, base, mu, max_iter=0)


def test_pg_expectation_limits_and_agrees_with_polya_gamma_module():
    b = np.array([1.0, 3.0, 7.0, 2.0, 5.0])
    w = np.array([0.0, 1e-9, 1e-3, 2.0, 1e4])
    got = pg_expectation(b, w)
    assert got[0] == pytest.approx(0.25)
    assert got[1] == pytest.approx(0.75, rel=1e-12)
    np.testing.assert_allclose(got[2:], b[2:] * np.tanh(w[2:] / 2) / (2 * w[2:]), rtol=1e-12)
    from corrpriors.core import polya_gamma as pg

    np.testing.assert_allclose(got, pg.pg_mean(b, w), rtol=1e-10)


# ------------------------------------------------------------------ monotone traces


@pytest.mark.parametrize("kw", [
    {},
    {"learn_scale": True},
    {"learn_mean": "constant"},
    {"learn_scale": True, "learn_mean": "constant"},
    {"learn_scale": True, "scale_prior": (2.0, 1.0)},
    {"learn_scale": True, "learn_mean": "constant", "scale_prior": (2.0, 0.5),
     "mean_prior_std": 1.0},
])
def test_objective_never_decreases(kw):
    c, k = 30, 6
    cov = _se_cov(c, length=1.2, seed=3)
    counts = _counts(c, k, seed=4, lam=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = CorrelatedMultinomial(covariance=cov, max_iter=200, tol=1e-12, **kw).fit(counts)
    obj = m.objective_trace_
    slack = 1e-9 * np.abs(obj[1:])
    assert np.all(np.diff(obj) >= -slack), np.diff(obj).min()
    if "scale_prior" not in kw and "mean_prior_std" not in kw:
        np.testing.assert_array_equal(m.elbo_trace_, m.objective_trace_)
    else:
        assert not np.allclose(m.elbo_trace_, m.objective_trace_)


# ------------------------------------------------------------------ stationarity


def test_stationarity_equations_hold_at_convergence():
    c, k = 10, 4
    cov = _se_cov(c, seed=5)
    rng = np.random.default_rng(6)
    chol = np.linalg.cholesky(cov + 1e-9 * np.eye(c))
    psi = uniform_psi(k) + chol @ rng.standard_normal((c, k - 1))
    counts = np.stack([rng.multinomial(40, p) for p in np.exp(log_probs(psi))])
    counts[0] = 0
    m = CorrelatedMultinomial(covariance=cov, learn_scale=True, learn_mean="constant",
                              max_iter=5000, tol=1e-15)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(counts)
    b, kappa = count_statistics(counts)
    sigma = m.scale_ * m.covariance_
    sinv = np.linalg.inv(sigma)
    lam, var = m.psi_mean_, m.psi_var_
    w = np.sqrt(var + lam ** 2)
    ew = b * np.tanh(w / 2) / (2 * np.where(w > 0, w, 1))
    total = 0.0
    for j in range(k - 1):
        v = np.linalg.inv(sinv + np.diag(ew[:, j]))
        np.testing.assert_allclose(np.diag(v), var[:, j], rtol=1e-6)
        np.testing.assert_allclose(v @ (kappa[:, j] + sinv @ m.mean_[:, j]), lam[:, j], atol=1e-6)
        d = m.mean_[:, j] - lam[:, j]
        total += np.trace(np.linalg.inv(m.covariance_) @ (v + np.outer(d, d)))
        one = np.ones(c)
        assert m.mean_[0, j] == pytest.approx((one @ sinv @ lam[:, j]) / (one @ sinv @ one),
                                              abs=1e-6)
    assert m.scale_ == pytest.approx(total / ((k - 1) * c), rel=1e-5)


# ------------------------------------------------------------------ the bound vs log p(X)


def _log_mult(counts, log_pi):
    n = counts.sum(-1)
    return np.sum(gammaln(n + 1) - gammaln(counts + 1).sum(-1)
                  + np.sum(counts * log_pi, axis=-1), axis=-1)


def test_elbo_below_quadrature_evidence_k2():
    # C = 2, K = 2: psi is 2-D, integrate p(X | psi) N(psi | mu, Sigma) on a fine grid.
    cov = np.array([[1.0, 0.7], [0.7, 1.0]]) * 1.5
    counts = np.array([[3, 1], [0, 4]])
    m = CorrelatedMultinomial(covariance=cov, mean=np.array([0.2]), tol=1e-14,
                              max_iter=5000).fit(counts)
    sigma = m.covariance_
    grid = np.linspace(-12, 12, 1201)
    g1, g2 = np.meshgrid(grid, grid, indexing="ij")
    psi = np.stack([g1, g2], -1)[..., None]  # (G, G, C=2, K-1=1)
    loglik = _log_mult(counts, log_probs(psi))
    diff = psi[..., 0] - 0.2
    sinv = np.linalg.inv(sigma)
    logprior = (-0.5 * np.einsum("...i,ij,...j->...", diff, sinv, diff)
                - 0.5 * np.linalg.slogdet(2 * np.pi * sigma)[1])
    dx = grid[1] - grid[0]
    log_evidence = logsumexp(loglik + logprior) + 2 * np.log(dx)
    assert np.all(m.elbo_trace_ <= log_evidence + 1e-9)
    assert m.elbo_ > log_evidence - 0.1


@pytest.mark.parametrize("c,k,seed", [(3, 3, 0), (5, 4, 1)])
def test_elbo_below_importance_sampling_evidence(c, k, seed):
    rng = np.random.default_rng(seed)
    cov = _se_cov(c, length=2.0, seed=seed)
    counts = rng.poisson(2.0, size=(c, k))
    m = CorrelatedMultinomial(covariance=cov, tol=1e-14, max_iter=5000).fit(counts)
    sigma = m.covariance_
    lam = m.psi_mean_
    # Full V_k by the dense formula (allowed in tests), proposal: multivariate t (df 5)
    # centred at q with inflated scale; unbiased for p(X) whatever the proposal.
    b, _ = count_statistics(counts)
    sinv = np.linalg.inv(sigma)
    w = np.sqrt(m.psi_var_ + lam ** 2)
    n_draw = 200_000
    log_w = np.zeros(n_draw)
    psi = np.empty((n_draw, c, k - 1))
    for j in range(k - 1):
        v = np.linalg.inv(sinv + np.diag(m.result_.site_precision[:, j]))
        prop = multivariate_t(loc=lam[:, j], shape=1.5 * v, df=5)
        x = prop.rvs(size=n_draw, random_state=rng)
        psi[:, :, j] = x
        diff = x - m.mean_[:, j]
        log_prior = (-0.5 * np.einsum("ni,ij,nj->n", diff, sinv, diff)
                     - 0.5 * np.linalg.slogdet(2 * np.pi * sigma)[1])
        log_w += log_prior - prop.logpdf(x)
    log_w += _log_mult(counts, log_probs(psi))
    log_evidence = logsumexp(log_w) - np.log(n_draw)
    ww = np.exp(log_w - log_w.max())
    ess = ww.sum() ** 2 / (ww ** 2).sum()
    assert ess > 1000
    se = np.sqrt(np.var(ww) / n_draw) / np.mean(ww)  # relative s.e. ~ s.e. of the log
    assert np.all(m.elbo_trace_ <= log_evidence + 4 * se + 1e-9)
    assert m.elbo_ > log_evidence - 1.0  # measured gaps: 0.33 (C=3, K=3), 0.53 (C=5, K=4)
    # the collapsed bound sits between the ELBO and log p(X)
    assert m.elbo_ <= m.collapsed_bound() <= log_evidence + 4 * se + 1e-9
    del b, w


# ------------------------------------------------------------------ EM recovers the scale


def test_em_recovers_scale_from_prior_draws():
    rng = np.random.default_rng(7)
    c, k, theta = 100, 5, 2.0
    cov = _grid_cov(10, 3.0)
    base, _ = jittered_covariance(cov)
    chol = np.linalg.cholesky(theta * base.base)
    mu = uniform_psi(k)
    psi = mu[None, :] + chol @ rng.standard_normal((c, k - 1))
    pi = np.exp(log_probs(psi))
    counts = np.stack([rng.multinomial(300, p / p.sum()) for p in pi])
    m = CorrelatedMultinomial(covariance=cov, learn_scale=True, max_iter=2000,
                              tol=1e-10).fit(counts)
    assert abs(m.scale_ / theta - 1) < 0.2, m.scale_


# ------------------------------------------------------------------ warm start


def test_warm_start_reaches_same_optimum_faster():
    rng = np.random.default_rng(8)
    c, k = 25, 5
    cov = _grid_cov(5, 2.0)
    counts = rng.poisson(4.0, size=(c, k))
    cold = CorrelatedMultinomial(covariance=cov, learn_scale=True, scale_prior=(2.0, 1.0),
                                 tol=1e-11, max_iter=3000).fit(counts)
    more = counts.copy()
    more[3, 2] += 1
    warm_model = CorrelatedMultinomial(covariance=cov, learn_scale=True, scale_prior=(2.0, 1.0),
                                       tol=1e-11, max_iter=3000, warm_start=True)
    warm_model.fit(counts)
    warm_model.fit(more)
    fresh = CorrelatedMultinomial(covariance=cov, learn_scale=True, scale_prior=(2.0, 1.0),
                                  tol=1e-11, max_iter=3000).fit(more)
    assert warm_model.n_iter_ < fresh.n_iter_
    np.testing.assert_allclose(warm_model.psi_mean_, fresh.psi_mean_, atol=1e-4)
    assert warm_model.objective_ == pytest.approx(fresh.objective_, abs=1e-5)
    # init= a previous model works too
    via_init = CorrelatedMultinomial(covariance=cov, learn_scale=True, scale_prior=(2.0, 1.0),
                                     tol=1e-11, max_iter=3000).fit(more, init=cold)
    assert via_init.n_iter_ < fresh.n_iter_


# ------------------------------------------------------------------ extreme counts


def test_huge_counts_give_finite_results():
    c = 6
    cov = _se_cov(c, seed=9)
    counts = np.array([[10 ** 6, 0, 0, 0], [0, 0, 0, 10 ** 6], [5 * 10 ** 5, 5 * 10 ** 5, 0, 0],
                       [1, 0, 10 ** 6 - 1, 0], [0, 0, 0, 0], [3, 3, 3, 3]])
    m = CorrelatedMultinomial(covariance=cov, learn_scale=True, learn_mean="constant",
                              scale_prior=(2.0, 1.0), max_iter=300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(counts)
    for arr in (m.psi_mean_, m.psi_var_, m.elbo_trace_, m.probs()):
        assert np.all(np.isfinite(arr))
    assert np.all(m.psi_var_ > 0)
    p = m.probs()
    assert p[0, 0] > 0.999 and p[1, 3] > 0.999
    assert p[2, 0] == pytest.approx(0.5, abs=1e-3)


def test_nonconvergence_warns_and_is_recorded():
    cov = _se_cov(8, seed=10)
    counts = _counts(8, 4, seed=11)
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        m = CorrelatedMultinomial(covariance=cov, learn_scale=True, max_iter=2,
                                  tol=1e-14).fit(counts)
    assert m.converged_ is False and m.n_iter_ == 2


def test_full_mean_learning_warns_and_collapses_coupling():
    cov = _se_cov(8, seed=12)
    counts = _counts(8, 3, seed=13, lam=5.0)
    with pytest.warns(UserWarning, match="coupling"), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m = CorrelatedMultinomial(covariance=cov, learn_mean="full", max_iter=3000,
                                  tol=1e-12).fit(counts)
    b, kappa = count_statistics(counts)
    obs = b > 0
    # drifts towards the prior-free estimate lambda = kappa / E[omega] on observed entries
    w = np.sqrt(m.psi_var_ + m.psi_mean_ ** 2)
    ew = pg_expectation(b, w)
    gap = np.abs(m.psi_mean_ - kappa / np.where(obs, ew, 1.0))[obs]
    fixed = CorrelatedMultinomial(covariance=cov, max_iter=3000, tol=1e-12).fit(counts)
    w0 = np.sqrt(fixed.psi_var_ + fixed.psi_mean_ ** 2)
    gap0 = np.abs(fixed.psi_mean_ - kappa / np.where(obs, pg_expectation(b, w0), 1.0))[obs]
    assert gap.max() < 0.2 * gap0.max()
