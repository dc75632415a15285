"""Expectation propagation and the tilted distributions (issue 24) against independent oracles.

Oracles: adaptive quadrature (scipy.integrate.quad) for the one-dimensional tilted densities;
for one covariate EP is exact, so its evidence and moments equal quadrature over psi; a naive
sequential EP with explicit inverses and quadrature moments (tests/reference.py) for its fixed
point and its evidence formula; two-dimensional quadrature for the exact posterior of two
covariates; the dense prior with Sigma = Q^-1 for the sparse one.
"""

import numpy as np
import pytest
from scipy import integrate, optimize
from scipy.special import expit, gammaln, ndtr

from corrpriors import CorrelatedMultinomial
from corrpriors.core.cavi import CountData
from corrpriors.core.ep import EPOptions, ep_marginals, run_ep
from corrpriors.core.marginals import SCORES
from corrpriors.core.tilted import tilted_mode, tilted_moments, tilted_quantiles
from corrpriors.kernels import grid_precision
from reference import naive_ep, naive_tilted

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

CASES = [(m, v, b, x) for m in (-20.0, 0.0, 3.0) for v in (1e-3, 0.5, 4.0, 1e4)
         for b, x in ((1, 0), (1, 1), (5, 2), (50, 0), (1000, 3), (10 ** 6, 5 * 10 ** 5))]


def test_tilted_moments_match_adaptive_quadrature():
    m, v, b, x = (np.array(c, float) for c in zip(*CASES))
    got = tilted_moments(m, v, b, x)
    ref = np.array([naive_tilted(*c) for c in CASES])
    np.testing.assert_allclose(got.log_z, ref[:, 0], rtol=0, atol=1e-6)
    np.testing.assert_allclose((got.mean - ref[:, 1]) / np.sqrt(ref[:, 2]), 0, atol=1e-6)
    np.testing.assert_allclose(got.var / ref[:, 2], 1, atol=1e-6)


def test_a_sharp_likelihood_inside_a_wide_cavity_is_refined():
    # one success, prior sd 100: the likelihood's step (width ~1) sits inside the cavity's mass
    ref = naive_tilted(15.0, 1e4, 1.0, 1.0)
    coarse = tilted_moments([15.0], [1e4], [1.0], [1.0], max_nodes=33)
    fine = tilted_moments([15.0], [1e4], [1.0], [1.0])
    assert abs(fine.log_z[0] - ref[0]) < 1e-6
    assert abs(coarse.log_z[0] - ref[0]) > 1e-3  # without refinement the rule is wrong


def test_tilted_mode_solves_the_stationarity_condition():
    m, v, b, x = (np.array(c, float) for c in zip(*CASES))
    mode, scale = tilted_mode(m, v, b, x)
    grad = (m - mode) / v + x - b * expit(mode)
    assert np.all(np.abs(grad) * scale <= 1e-6)


def _quantiles_by_quadrature(m, v, b, x, probs):
    def dens(p):
        return np.exp(-0.5 * (p - m) ** 2 / v + x * p - b * np.logaddexp(0, p))

    lo, hi = m - 12 * np.sqrt(v), m + 12 * np.sqrt(v)
    total = integrate.quad(dens, lo, hi, limit=200)[0]

    def cdf(q):
        return integrate.quad(dens, lo, q, limit=200)[0] / total

    return np.array([optimize.brentq(lambda q, p=p: cdf(q) - p, lo, hi) for p in probs])


def test_tilted_quantiles_invert_the_quadrature_cdf():
    cases = [(0.0, 0.5, 50, 20), (-1.0, 2.0, 5, 0), (1.0, 0.3, 50, 49), (0.0, 4.0, 1, 1)]
    z = np.array([-1.6449, -0.6745, 0.0, 0.6745, 1.6449])
    got = tilted_quantiles(*(np.array(c, float) for c in zip(*cases)), z)
    for row, (m, v, b, x) in zip(got, cases):
        ref = _quantiles_by_quadrature(m, v, b, x, ndtr(z))
        _, _, var = naive_tilted(m, v, b, x)
        np.testing.assert_allclose((row - ref) / np.sqrt(var), 0, atol=1e-3)


def _fit(counts, cov, scale=1.0, mean=None, **kw):
    model = CorrelatedMultinomial(covariance=cov, scale=scale, mean=mean, tol=1e-12, **kw)
    model.fit(counts)
    data = CountData.from_counts(counts)
    res = model.result_
    return model, data, res


def _ep(data, res, **kw):
    return run_ep(data, res.prior, res.scale, res.mean, data.layout.gather(res.site_precision),
                  data.kappa_obs, EPOptions(**kw))


@pytest.mark.parametrize("n, x, scale, mu", [(1, 0, 1.0, 0.0), (5, 2, 4.0, -1.0),
                                             (50, 50, 4.0, 0.0), (3, 1, 0.5, 2.0)])
def test_ep_is_exact_for_one_covariate(n, x, scale, mu):
    counts = np.array([[x, n - x]])
    _, data, res = _fit(counts, np.eye(1), scale, np.array([mu]))
    ep = _ep(data, res, tol=1e-10)
    lb = gammaln(n + 1) - gammaln(x + 1) - gammaln(n - x + 1)

    def dens(p):
        return np.exp(lb + x * p - n * np.logaddexp(0, p) - 0.5 * (p - mu) ** 2 / scale) \
            / np.sqrt(2 * np.pi * scale)

    kw = dict(points=[mu, 0.0], limit=200, epsabs=0, epsrel=1e-12)
    z = integrate.quad(dens, -60, 60, **kw)[0]
    m1 = integrate.quad(lambda p: p * dens(p), -60, 60, **kw)[0] / z
    m2 = integrate.quad(lambda p: (p - m1) ** 2 * dens(p), -60, 60, **kw)[0] / z
    assert ep.converged
    assert ep.log_evidence == pytest.approx(np.log(z), abs=1e-8)
    assert ep.psi_mean[0, 0] == pytest.approx(m1, abs=1e-8)
    assert ep.psi_var[0, 0] == pytest.approx(m2, rel=1e-8)


@pytest.fixture(scope="module")
def small_problem():
    coords = np.arange(3.0)[:, None]
    cov = np.exp(-np.subtract.outer(coords[:, 0], coords[:, 0]) ** 2 / 2.0) + 1e-9 * np.eye(3)
    counts = np.array([[4, 1, 0], [0, 0, 3], [0, 0, 0]])
    return counts, cov


def test_ep_fixed_point_and_evidence_equal_naive_sequential_ep(small_problem):
    counts, cov = small_problem
    model, data, res = _fit(counts, cov, scale=3.0)
    ep = _ep(data, res, tol=1e-10)
    ref = naive_ep(counts, 3.0 * model.covariance_, res.mean, n_sweeps=25)
    np.testing.assert_allclose(ep.psi_mean, ref["mean"], atol=1e-7)
    np.testing.assert_allclose(ep.psi_var, ref["var"], rtol=1e-7)
    np.testing.assert_allclose(ep.site_precision, ref["tau"], rtol=1e-6, atol=1e-12)
    assert ep.log_evidence == pytest.approx(ref["log_evidence"], abs=1e-7)


def test_ep_evidence_is_close_to_the_exact_evidence_and_above_the_bounds(small_problem):
    """Two observed covariates of one stick (K = 2): exact log p(X) by 2-D quadrature."""
    counts = np.array([[5, 0], [1, 3], [0, 0]])
    _, cov = small_problem
    model, data, res = _fit(counts, cov, scale=4.0)
    ep = _ep(data, res, tol=1e-10)
    s = 4.0 * model.covariance_[:2, :2]
    g = np.linspace(-25, 25, 1251)  # trapezoid on a fine grid: the integrand is smooth
    p1, p2 = np.meshgrid(g, g, indexing="ij")
    d1, d2 = p1 - res.mean[0, 0], p2 - res.mean[0, 0]
    (a, bb), (_, c) = np.linalg.inv(s)
    log_d = (5 * p1 - 5 * np.logaddexp(0, p1) + p2 - 4 * np.logaddexp(0, p2) + np.log(4.0)
             - 0.5 * (a * d1 ** 2 + 2 * bb * d1 * d2 + c * d2 ** 2)
             - np.log(2 * np.pi * np.sqrt(np.linalg.det(s))))
    z = integrate.trapezoid(integrate.trapezoid(np.exp(log_d), g, axis=1), g)
    assert abs(ep.log_evidence - np.log(z)) < 0.01
    assert model.collapsed_bound() < np.log(z) and model.elbo_ < np.log(z)
    assert abs(ep.log_evidence - np.log(z)) < 0.2 * (np.log(z) - model.collapsed_bound())


def _exact_marginal_quantiles(counts, s, mu, probs):
    """Exact quantiles of psi_1 and psi_2 (K = 2, two observed covariates) on a fine grid."""
    g = np.linspace(-14, 14, 1401)
    p1, p2 = np.meshgrid(g, g, indexing="ij")
    sinv = np.linalg.inv(s)
    d1, d2 = p1 - mu, p2 - mu
    (a, bb), (_, c) = sinv
    x, n = counts[:2, 0], counts[:2].sum(axis=1)
    log_d = (x[0] * p1 - n[0] * np.logaddexp(0, p1) + x[1] * p2 - n[1] * np.logaddexp(0, p2)
             - 0.5 * (a * d1 ** 2 + 2 * bb * d1 * d2 + c * d2 ** 2))
    dens = np.exp(log_d - log_d.max())
    out = []
    for marg in (dens.sum(axis=1), dens.sum(axis=0)):
        cdf = np.cumsum(marg) / marg.sum()
        out.append(np.interp(probs, cdf, g))
    return np.array(out)


def test_tilted_marginals_are_closer_to_the_exact_marginals_than_gaussian_ones(small_problem):
    counts = np.array([[0, 6], [2, 1], [0, 0]])  # a skewed entry: no success in 6 trials
    _, cov = small_problem
    model, data, res = _fit(counts, cov, scale=4.0)
    ep = _ep(data, res, tol=1e-10)
    probs = ndtr(np.array([-1.6449, -0.6745, 0.6745, 1.6449]))
    exact = _exact_marginal_quantiles(counts, 4.0 * model.covariance_[:2, :2],
                                      res.mean[0, 0], probs)
    z = np.interp(probs, ndtr(SCORES), SCORES)
    gauss = ep.psi_mean[:2, :1] + np.sqrt(ep.psi_var[:2, :1]) * z[None, :]
    tilted_m = ep_marginals(ep, data)
    tilted = np.stack([np.interp(z, SCORES, tilted_m.table[i]) for i in range(2)])
    sd = np.sqrt(ep.psi_var[:2, :1])
    err_t = np.abs(tilted - exact) / sd
    err_g = np.abs(gauss - exact) / sd
    assert err_t.max() < 0.02
    assert err_g.max() > 2 * err_t.max()


def test_ep_beats_vi_on_the_exact_marginal_variances(small_problem):
    counts = np.array([[0, 6], [2, 1], [0, 0]])
    _, cov = small_problem
    model, data, res = _fit(counts, cov, scale=4.0)
    ep = _ep(data, res, tol=1e-10)
    probs = ndtr(np.array([-1.0, 1.0]))
    exact = _exact_marginal_quantiles(counts, 4.0 * model.covariance_[:2, :2],
                                      res.mean[0, 0], probs)
    exact_sd = (exact[:, 1] - exact[:, 0]) / 2  # about one sd for a near-Gaussian marginal
    ep_ratio = np.sqrt(ep.psi_var[:2, 0]) / exact_sd
    vi_ratio = np.sqrt(model.psi_var_[:2, 0]) / exact_sd
    assert np.all(np.abs(ep_ratio - 1) < 0.05)
    assert np.all(vi_ratio < ep_ratio) and vi_ratio.min() < 0.85  # mean field: too narrow


def test_sparse_and_dense_priors_give_the_same_ep():
    q = grid_precision((4, 4), length_scale=2.0)
    cov = np.linalg.inv(q.toarray())
    rng = np.random.default_rng(3)
    counts = rng.multinomial(3, [0.5, 0.3, 0.2], size=16) * (rng.random(16) < 0.7)[:, None]
    sparse = CorrelatedMultinomial(precision=q, scale=2.0, tol=1e-12).fit(counts)
    dense = CorrelatedMultinomial(0.5 * (cov + cov.T), scale=2.0, tol=1e-12).fit(counts)
    data = CountData.from_counts(counts)
    a = _ep(data, sparse.result_, tol=1e-10)
    b = _ep(data, dense.result_, tol=1e-10)
    np.testing.assert_allclose(a.psi_mean, b.psi_mean, atol=1e-7)
    np.testing.assert_allclose(a.psi_var, b.psi_var, rtol=1e-7)
    assert a.log_evidence == pytest.approx(b.log_evidence, abs=1e-7)


def test_ep_options_are_validated():
    with pytest.raises(ValueError, match="damping"):
        EPOptions(damping=0.0)
    with pytest.raises(ValueError, match="max_iter"):
        EPOptions(max_iter=0)
    with pytest.raises(ValueError, match="tol"):
        EPOptions(tol=-1.0)
    with pytest.raises(ValueError, match="n_nodes"):
        tilted_moments([0.0], [1.0], [1.0], [0.0], n_nodes=10)


def test_ep_reports_non_convergence(small_problem):
    from corrpriors.exceptions import ConvergenceWarning

    counts, cov = small_problem
    _, data, res = _fit(counts, cov, scale=3.0)
    with pytest.warns(ConvergenceWarning, match="EP did not converge"):
        ep = _ep(data, res, max_iter=1, tol=1e-14)
    assert not ep.converged


def test_tilted_tables_belong_to_their_entries():
    rng = np.random.default_rng(11)
    cov = np.exp(-np.subtract.outer(np.arange(6.0), np.arange(6.0)) ** 2 / 8) + 1e-9 * np.eye(6)
    counts = rng.multinomial(7, [0.2, 0.3, 0.1, 0.4], size=6)
    counts[2] = 0
    _, data, res = _fit(counts, cov, scale=2.0)
    ep = _ep(data, res, tol=1e-8)
    marg = ep_marginals(ep, data)
    assert np.all(np.diff(marg.entries) > 0)
    for e, flat in enumerate(data.layout.entry_flat):  # layout order: stick after stick
        row = np.searchsorted(marg.entries, flat)
        own = tilted_quantiles(ep.cavity_mean[e:e + 1], ep.cavity_var[e:e + 1],
                               data.b_obs[e:e + 1], data.x_obs[e:e + 1], SCORES)[0]
        np.testing.assert_allclose(marg.table[row], own, rtol=0, atol=1e-6)
        c, k = divmod(flat, 3)
        mid = np.interp(0.0, SCORES, own)  # the tilted median is near the EP mean
        assert abs(mid - ep.psi_mean[c, k]) < 0.2 * np.sqrt(ep.psi_var[c, k])
