"""Calibrated credible intervals (issue 24): the hyper-parameter grid, the per-entry marginals,
PSIS, and the estimator's API.

Oracles: a Gaussian log posterior, whose mean and variance the grid's weights must reproduce;
Gaussian quantile tables (a tabulated marginal must draw like the Gaussian); ``np.quantile``;
scipy's generalised Pareto draws for the shape estimator; exact per-entry quantiles of a
two-covariate posterior by grid quadrature; long Gibbs runs.
"""

import warnings

import numpy as np
import pytest
from scipy.special import expit, ndtr
from scipy.stats import genpareto

from corrpriors import CorrelatedMultinomial
from corrpriors.core.hyper_grid import GridOptions, integrate
from corrpriors.core.marginals import SCORES, MarginalMixture, MarginalPsi, central_interval
from corrpriors.core.psis import gpd_fit, pareto_smooth, psis_draws
from corrpriors.exceptions import ConvergenceWarning
from corrpriors.kernels import SquaredExponential, grid_precision

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


# ------------------------------------------------------------------------ the grid
@pytest.mark.parametrize("p", [1, 2])
def test_grid_weights_reproduce_a_gaussian_posterior(p):
    mean = np.array([0.7, -1.2])[:p]
    cov = np.array([[0.3, 0.1], [0.1, 0.2]])[:p, :p]
    prec = np.linalg.inv(cov)
    calls = []

    def evaluate(eta, warm):
        calls.append(warm)
        d = eta - mean
        return -0.5 * d @ prec @ d, float(eta[0])

    grid = integrate(evaluate, np.zeros(p), np.array([[-10.0, 10.0]] * p),
                     GridOptions(step=1.0, drop=4.5))
    m = grid.weights @ grid.points
    dev = grid.points - m
    np.testing.assert_allclose(grid.mode, mean, atol=1e-8)  # one Newton step on a quadratic
    np.testing.assert_allclose(m, mean, atol=1e-6)
    np.testing.assert_allclose((grid.weights[:, None] * dev).T @ dev, cov, rtol=0.02)
    assert calls[0] is None and all(c is not None for c in calls[1:])  # warm starts
    assert [pl for pl in grid.payloads] == list(grid.points[:, 0])


def test_grid_respects_bounds_and_budget():
    with pytest.warns(ConvergenceWarning, match="max_points"):
        grid = integrate(lambda eta, warm: (0.0, None), np.zeros(1), np.array([[-1.0, 1.0]]),
                         GridOptions(max_points=4))
    assert np.all(np.abs(grid.points) <= 1.0)
    flat = integrate(lambda eta, warm: (0.0, None), np.zeros(1), np.array([[-1.0, 1.0]]))
    np.testing.assert_allclose(np.sort(flat.points[:, 0]), [-1.0, -0.5, 0.0, 0.5, 1.0])
    np.testing.assert_allclose(flat.weights, 0.2)  # flat: the climb's lattice, equal weights


def test_grid_options_are_validated():
    with pytest.raises(ValueError, match="drop"):
        GridOptions(drop=0.0)
    with pytest.raises(ValueError, match="max_points"):
        GridOptions(max_points=0)


# ------------------------------------------------------------------------ marginals
def test_a_gaussian_table_draws_like_the_gaussian():
    rng = np.random.default_rng(0)
    mean, var = rng.normal(size=(5, 3)), rng.uniform(0.1, 2.0, size=(5, 3))
    entries = np.array([1, 4, 7, 13])
    table = mean.ravel()[entries, None] + np.sqrt(var.ravel()[entries])[:, None] * SCORES
    plain = MarginalPsi(mean, var)
    tab = MarginalPsi(mean + 5.0, var, entries, table)  # the table must win on its entries
    z = rng.standard_normal((3, 7))
    a, b = plain.draw(z, slice(0, 5)), tab.draw(z, slice(0, 5))  # (K - 1, R, M)
    np.testing.assert_allclose(a, mean.T[:, :, None] + np.sqrt(var).T[:, :, None] * z[:, None])
    a, b = (np.moveaxis(x, (0, 2), (2, 0)).reshape(7, -1) for x in (a, b))  # (M, C (K - 1))
    flat = np.zeros(15, bool)
    flat[entries] = True
    np.testing.assert_allclose(a[:, flat], b[:, flat], atol=1e-12)
    np.testing.assert_allclose(a[:, ~flat] + 5.0, b[:, ~flat])
    np.testing.assert_allclose(tab.draw(z, slice(1, 4)), tab.draw(z, slice(0, 5))[:, 1:4])


def test_mixture_allocation_follows_the_weights():
    comps = tuple(MarginalPsi(np.full((2, 1), float(g)), np.full((2, 1), 1e-12))
                  for g in range(3))
    mix = MarginalMixture(comps, np.array([0.5, 0.3, 0.2]), np.zeros((3, 1)))
    draws = mix.draw_psi(1024, rng=np.random.default_rng(1))
    shares = [np.mean(np.round(draws[:, 0, 0]) == g) for g in range(3)]
    np.testing.assert_allclose(shares, [0.5, 0.3, 0.2], atol=2e-3)  # a Sobol' dimension
    assert np.all(np.round(draws[:, 0, 0]) == np.round(draws[:, 1, 0]))  # one point per draw


def test_quasi_monte_carlo_draws_have_the_marginal_distributions():
    rng = np.random.default_rng(3)
    mean, var = rng.normal(size=(4, 3)), rng.uniform(0.5, 2.0, size=(4, 3))
    comps = (MarginalPsi(mean, var), MarginalPsi(mean + 1.0, 2.0 * var))
    mix = MarginalMixture(comps, np.array([0.25, 0.75]), np.zeros((2, 1)))
    draws = mix.draw_psi(4096, rng=rng)
    np.testing.assert_allclose(draws.mean(0), mean + 0.75, atol=0.01)
    np.testing.assert_allclose(draws.var(0), var * 1.75 + 0.25 * 0.75, rtol=0.01)
    # the sticks of a draw are independent
    assert abs(np.corrcoef(draws[:, 0, 0], draws[:, 0, 1])[0, 1]) < 0.05 + 0.1875 / 2
    single = MarginalMixture.single(comps[0]).draw_psi(4096, rng=rng)
    corr = np.corrcoef(single[:, 0, :].T)
    assert np.max(np.abs(corr - np.eye(3))) < 0.01  # balanced Sobol' columns
    again = MarginalMixture.single(comps[0]).draw_psi(100, rng=np.random.default_rng(5))
    np.testing.assert_array_equal(again, MarginalMixture.single(comps[0]).draw_psi(
        100, rng=np.random.default_rng(5)))


def test_stick_major_probs_equal_psi_to_pi():
    from corrpriors.core.marginals import stick_major_probs
    from corrpriors.core.stick_breaking import psi_to_pi

    x = np.random.default_rng(0).normal(size=(4, 10, 7)) * 30
    np.testing.assert_allclose(np.moveaxis(stick_major_probs(x), 0, -1),
                               psi_to_pi(np.moveaxis(x, 0, -1)), rtol=1e-13, atol=1e-300)


def test_central_interval_equals_numpy_quantile():
    x = np.random.default_rng(2).normal(size=(999, 4, 3))
    for level in (0.5, 0.9, 0.999):
        lo, hi = central_interval(x, level)
        ref = np.quantile(x, [(1 - level) / 2, (1 + level) / 2], axis=0)
        np.testing.assert_allclose(lo, ref[0], rtol=0, atol=1e-14)
        np.testing.assert_allclose(hi, ref[1], rtol=0, atol=1e-14)


# ------------------------------------------------------------------------ PSIS
@pytest.mark.parametrize("k", [-0.2, 0.3, 0.8])
def test_gpd_fit_recovers_the_shape(k):
    rng = np.random.default_rng(4)
    est = [gpd_fit(np.sort(genpareto.rvs(k, scale=2.0, size=2000, random_state=rng)))
           for _ in range(10)]
    assert np.mean([e[0] for e in est]) == pytest.approx(k, abs=0.05)
    assert np.mean([e[1] for e in est]) == pytest.approx(2.0, rel=0.1)


@pytest.mark.parametrize("sd, khat", [(0.8, 0.36), (0.6, 0.64)])
def test_pareto_shape_of_a_too_narrow_gaussian_proposal(sd, khat):
    # target N(0, 1), proposal N(0, sd^2): weights exp(x^2 (1/sd^2 - 1)/2), tail shape 1 - sd^2
    x = np.random.default_rng(5).standard_normal(20000) * sd
    lw, k = pareto_smooth(-0.5 * x ** 2 + 0.5 * x ** 2 / sd ** 2)
    assert k == pytest.approx(khat, abs=0.1)
    assert np.exp(lw).sum() == pytest.approx(1.0)


def test_equal_weights_have_no_tail():
    lw, k = pareto_smooth(np.zeros(100))
    assert k == -np.inf
    np.testing.assert_allclose(np.exp(lw), 0.01)


# ------------------------------------------------------------------------ the estimator
@pytest.fixture(scope="module")
def fitted():
    coords = np.array([(i, j) for i in range(4) for j in range(4)], float)
    rng = np.random.default_rng(6)
    counts = rng.multinomial(6, [0.5, 0.3, 0.2], size=16)
    counts[::3] = 0
    kernel = SquaredExponential(lengthscale=2.0).bind(coords=coords)
    return CorrelatedMultinomial(kernel, scale=2.0).fit(counts), counts, kernel


@pytest.fixture(scope="module")
def bounded_kernel(fitted):
    coords = fitted[2].coords
    return SquaredExponential(lengthscale=2.0, lengthscale_bounds=(0.5, 8.0)).bind(coords=coords)


@pytest.mark.parametrize("method", ["calibrated", "vi", "gibbs"])
def test_credible_interval_shapes_order_and_seed(fitted, method):
    model, counts, _ = fitted
    lo, hi, sd = model.credible_interval(0.9, method=method, rng=3, n_samples=400,
                                         return_std=True)
    assert lo.shape == hi.shape == sd.shape == counts.shape
    assert np.all((0 <= lo) & (lo < hi) & (hi <= 1)) and np.all(sd > 0)
    lo2, hi2 = model.credible_interval(0.9, method=method, rng=3, n_samples=400)
    np.testing.assert_array_equal(lo, lo2)
    lo3, _ = model.credible_interval(0.9, method=method, rng=4, n_samples=400)
    assert not np.array_equal(lo, lo3)
    narrow, _ = model.credible_interval(0.5, method=method, rng=3, n_samples=400)
    assert np.all(narrow >= lo)


def test_credible_interval_validates_its_arguments(fitted):
    model = fitted[0]
    with pytest.raises(ValueError, match="level"):
        model.credible_interval(1.0)
    with pytest.raises(ValueError, match="method"):
        model.credible_interval(method="laplace")
    with pytest.raises(ValueError, match="n_samples"):
        model.credible_interval(n_samples=1)
    with pytest.raises(ValueError, match="hyper"):
        model.credible_interval(hyper="some")
    with pytest.raises(ValueError, match="not fitted"):
        CorrelatedMultinomial(np.eye(2)).credible_interval()
    with pytest.raises(ValueError, match="method"):
        model.sample_probs(2, rng=0, method="gibbs")


def test_predict_credible_interval(fitted):
    model, _, _ = fitted
    new = np.array([[0.5, 0.5], [30.0, 30.0]])
    prior = CorrelatedMultinomial(np.eye(1), scale=2.0).fit(np.zeros((1, 3), int))
    plo, phi = prior.credible_interval(0.9, method="vi", rng=1, n_samples=20000)
    for method in ("calibrated", "vi", "gibbs"):
        lo, hi = model.predict_credible_interval(new, 0.9, method=method, rng=0, n_samples=1500)
        assert lo.shape == (2, 3)
        # far from the data: the prior's interval, the same for every method
        np.testing.assert_allclose(lo[1], plo[0], atol=0.03)
        np.testing.assert_allclose(hi[1], phi[0], atol=0.03)
    with pytest.raises(ValueError, match="new_covariates"):
        CorrelatedMultinomial(np.eye(3)).fit(np.ones((3, 2), int)).predict_credible_interval(
            new)


def test_predictions_at_fitted_covariates_match_the_fit(fitted):
    model, counts, _ = fitted
    coords = model.kernel_.coords
    unobserved = np.flatnonzero(counts.sum(axis=1) == 0)
    a = model.predict_credible_interval(coords[unobserved], 0.9, rng=0, n_samples=20000)
    b = model.credible_interval(0.9, rng=0, n_samples=20000)
    np.testing.assert_allclose(a[0], b[0][unobserved], atol=0.01)
    np.testing.assert_allclose(a[1], b[1][unobserved], atol=0.01)


def test_calibrated_intervals_match_exact_quantiles_of_a_small_posterior():
    """K = 2, two observed covariates and one without data: pi_1 = sigmoid(psi_1), so the exact
    interval is the sigmoid of the exact psi quantiles (grid quadrature over both logits for
    the observed ones)."""
    cov = np.array([[1.0, 0.6, 0.3], [0.6, 1.0, 0.6], [0.3, 0.6, 1.0]])
    counts = np.array([[0, 6], [2, 1], [0, 0]])
    model = CorrelatedMultinomial(cov, scale=4.0, tol=1e-12).fit(counts)
    g = np.linspace(-14, 14, 1401)
    p1, p2 = np.meshgrid(g, g, indexing="ij")
    mu = model.mean_[0, 0]
    (a, b), (_, c) = np.linalg.inv(4.0 * model.covariance_[:2, :2])
    log_d = (-6 * np.logaddexp(0, p1) + 2 * p2 - 3 * np.logaddexp(0, p2)
             - 0.5 * (a * (p1 - mu) ** 2 + 2 * b * (p1 - mu) * (p2 - mu) + c * (p2 - mu) ** 2))
    dens = np.exp(log_d - log_d.max())
    exact = [expit(np.interp([0.05, 0.95], np.cumsum(m) / m.sum(), g))
             for m in (dens.sum(axis=1), dens.sum(axis=0))]
    lo, hi = model.credible_interval(0.9, rng=0, n_samples=200000)
    vlo, vhi = model.credible_interval(0.9, method="vi", rng=0, n_samples=200000)
    for i in range(2):  # tilted marginals (error ~0.01 sd) and Monte Carlo (~0.005 sd)
        np.testing.assert_allclose([lo[i, 0], hi[i, 0]], exact[i], atol=6e-3)
    assert vlo[0, 0] - exact[0][0] > 3 * abs(lo[0, 0] - exact[0][0])  # VI misses the low tail


def test_learned_scale_is_integrated_over(fitted, bounded_kernel):
    _, counts, kernel = fitted
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = CorrelatedMultinomial(kernel, learn_scale=True).fit(counts)
    post = model.calibrated_posterior()
    assert post.names == ("log_scale",) and post.marginals.weights.size >= 3
    fixed = model.calibrated_posterior(hyper="fixed")
    assert fixed.names == () and fixed.marginals.weights.size == 1
    both = CorrelatedMultinomial(bounded_kernel).fit(counts).calibrated_posterior(hyper="all")
    assert both.names == ("log_scale", "lengthscale")
    assert np.ptp(both.marginals.points, axis=0).min() > 0
    draws = model.sample_probs(50, rng=0, method="calibrated")
    assert draws.shape == (50,) + counts.shape


def test_a_selected_scale_is_integrated_over_until_refitted(fitted):
    from corrpriors import select_scale

    _, counts, kernel = fitted
    sel = select_scale(CorrelatedMultinomial(kernel), counts, step=0.5)
    assert sel.model.scale_selected_
    assert sel.model.calibrated_posterior().names == ("log_scale",)
    sel.model.fit(counts)
    assert not sel.model.scale_selected_ and sel.model.calibrated_posterior().names == ()


def test_sparse_prior_gives_calibrated_intervals():
    q = grid_precision((5, 5), length_scale=2.0)
    cov = np.linalg.inv(q.toarray())
    counts = np.random.default_rng(8).multinomial(4, [0.6, 0.3, 0.1], size=25)
    counts[::4] = 0
    sparse = CorrelatedMultinomial(precision=q, tol=1e-12).fit(counts)
    dense = CorrelatedMultinomial(0.5 * (cov + cov.T), tol=1e-12).fit(counts)
    a = sparse.credible_interval(0.9, rng=0, n_samples=400)
    b = dense.credible_interval(0.9, rng=0, n_samples=400)
    np.testing.assert_allclose(a[0], b[0], atol=1e-6)
    np.testing.assert_allclose(a[1], b[1], atol=1e-6)


def test_psis_draws_agree_with_gibbs_on_a_small_problem(fitted):
    model, counts, _ = fitted
    out = psis_draws(counts, model.result_, 2000, rng=np.random.default_rng(9))
    gibbs = model.fit_gibbs(counts, 3000, burn_in=300, rng=10).psi
    assert out.psi.shape == (2000,) + model.psi_mean_.shape
    np.testing.assert_allclose(out.psi.mean(0), gibbs.mean(0), atol=0.08)
    np.testing.assert_allclose(out.psi.std(0), gibbs.std(0), rtol=0.1)
    assert np.all(out.khat[np.isfinite(out.khat)] < 0.7) and not out.fallback.any()


def test_probs_std_is_documented_as_the_mean_field():
    doc = CorrelatedMultinomial.probs.__doc__
    assert "mean-field" in doc and "credible_interval" in doc
    assert ndtr(0.0) == 0.5


def test_intervals_beyond_the_sobol_dimensions_use_plain_monte_carlo():
    """K - 1 > 21,201 sticks: scipy's Sobol' sequences stop there, and the intervals failed after
    the fit ("Maximum supported dimensionality is 21201"). The draws are then independent
    uniforms; the intervals hold the posterior means of the observed categories."""
    from corrpriors.core.marginals import SOBOL_MAX_DIM

    c, k = 3, SOBOL_MAX_DIM + 100
    x = np.zeros((c, k), dtype=int)
    x[:, :3] = [[6, 2, 1], [5, 3, 1], [1, 1, 7]]
    model = CorrelatedMultinomial(np.eye(c)).fit(x)
    lo, hi = model.credible_interval(0.9, n_samples=64, rng=0)
    p = model.probs()
    assert lo.shape == hi.shape == (c, k) and np.all(np.isfinite(lo)) and np.all(lo <= hi)
    assert np.all((lo[:, :3] <= p[:, :3]) & (p[:, :3] <= hi[:, :3]))


def test_calibration_refuses_a_scale_range_outside_the_priors_usable_range():
    """A covariance of mean diagonal 1e18 has usable scales near 1e-18, outside the calibration's
    default range [1e-2, 1e4]: the intersection was empty and the grid failed on inverted bounds
    (numpy's 'zero-size array' error), naming nothing the user passed."""
    x = np.arange(6.0)
    cov = 1e18 * np.exp(-0.5 * np.subtract.outer(x, x) ** 2)
    counts = np.array([[3, 1], [2, 2], [0, 4], [1, 1], [5, 0], [2, 3]])
    model = CorrelatedMultinomial(covariance=cov, scale=1e-18).fit(counts)
    with pytest.raises(ValueError, match=r"^scale_range: the scale is integrated over \[0.01, 1e\+04\] clipped "
                                         r"to the prior's usable range \[1e-168, 0.001\].*mean diagonal is 1e\+18"):
        model.calibrated_posterior(hyper="scale")
    assert model.calibrated_posterior(hyper="fixed").grid is None            # plugging in still works
