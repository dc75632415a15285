"""The joint M-step of the scale and the kernel (issue 22, item 5): value and gradient against a
naive dense ELBO and finite differences, the same fixed points as EM, monotone, and convergence
of learned scale + learned length scale on small tables."""

from __future__ import annotations

import dataclasses
import re
import warnings

import numpy as np
import pytest
from scipy.special import gammaln

from corrpriors import kernels
from corrpriors.core import CorrelatedMultinomial
from corrpriors.core.cavi import CAVIOptions, CountData, Hyper, initial_state, sweep
from corrpriors.core.fixed_point import FixedPointOptions
from corrpriors.core.hyper_em import marginal_objective, optimise_marginal
from corrpriors.core.polya_gamma import pg_mean_unchecked
from corrpriors.core.priors.dense import DenseCovariancePrior
from corrpriors.core.stick_breaking import log_probs, uniform_psi


def _grid(nx, ny):
    return np.array([(i, j) for i in range(nx) for j in range(ny)], dtype=float)


def _table(kind, nx, ny, k, seed):
    """A small count table on an nx x ny grid: independent uniform counts, sparse Poisson
    counts or counts of a smooth latent field."""
    rng = np.random.default_rng(seed)
    c = nx * ny
    if kind == "iid":
        return rng.integers(0, 6, size=(c, k))
    if kind == "sparse":
        return rng.poisson(0.5, size=(c, k))
    xy = _grid(nx, ny)
    cov = np.exp(-((xy[:, None] - xy[None]) ** 2).sum(-1) / 2.0 ** 2) + 1e-8 * np.eye(c)
    psi = uniform_psi(k) + 1.5 * np.linalg.cholesky(cov) @ rng.standard_normal((c, k - 1))
    return np.stack([rng.multinomial(int(rng.integers(0, 10)), p)
                     for p in np.exp(log_probs(psi))])


def _naive_elbo_at_best_q(counts, cov, mean, scale, tilts_full):
    r"""ELBO maximised over q(psi) for a fixed q(omega) = PG(b, w), by dense algebra.

    Every term written out: E_q[log binom - b log 2 + kappa psi - omega psi^2 / 2] plus
    E[log PG(omega | b, 0) - log PG(omega | b, w)] = -b log cosh(w/2) + w^2 E[omega] / 2, minus
    KL(N(lambda_k, V_k) || N(mu_k, Sigma)), with V = (Sigma^-1 + D)^-1 and
    lambda = V (kappa + Sigma^-1 mu).
    """
    x = np.asarray(counts, dtype=float)
    c, k = x.shape
    b = np.cumsum(x[:, ::-1], axis=1)[:, ::-1][:, :]  # b_k = sum_{j >= k} x_j
    b = b[:, :k - 1]
    kappa = x[:, :k - 1] - b / 2
    sigma = scale * cov
    sinv = np.linalg.inv(sigma)
    total = 0.0
    for j in range(k - 1):
        w = tilts_full[:, j]
        e = np.where(b[:, j] > 0, b[:, j] * np.tanh(w / 2) / (2 * w), 0.0)
        v = np.linalg.inv(sinv + np.diag(e))
        lam = v @ (kappa[:, j] + sinv @ mean[:, j])
        obs = b[:, j] > 0
        bj, xj = b[obs, j], x[obs, j]
        logbin = gammaln(bj + 1) - gammaln(xj + 1) - gammaln(bj - xj + 1)
        total += np.sum(logbin - bj * np.log(2) + kappa[obs, j] * lam[obs]
                        - 0.5 * e[obs] * (lam[obs] ** 2 + np.diag(v)[obs])
                        - bj * np.log(np.cosh(w[obs] / 2)) + 0.5 * w[obs] ** 2 * e[obs])
        d = lam - mean[:, j]
        kl = 0.5 * (np.trace(sinv @ v) + d @ sinv @ d - c
                    + np.linalg.slogdet(sigma)[1] - np.linalg.slogdet(v)[1])
        total -= kl
    return total


@pytest.mark.parametrize("learn_scale", [True, False])
def test_marginal_objective_is_the_elbo_maximised_over_q_psi(learn_scale):
    """g(theta, eta) - g(theta', eta') equals the same difference of the ELBO at the best q(psi)
    for a fixed q(omega), computed by dense inverses (an independent transcription)."""
    rng = np.random.default_rng(3)
    xy = _grid(3, 4)
    counts = rng.poisson(2.0, size=(12, 4))
    counts[0] = 0
    counts[1, 1:] = 0
    c, k = counts.shape
    bound = kernels.SquaredExponential(lengthscale=1.3).bind(coords=xy)
    prior = DenseCovariancePrior.from_kernel(bound)
    data = CountData.from_counts(counts)
    mean = np.repeat(uniform_psi(k)[None], c, 0) + rng.normal(0, 0.3, size=(c, k - 1))
    tilts = rng.uniform(0.2, 2.0, size=data.layout.entry_flat.size)
    site = pg_mean_unchecked(data.b_obs, tilts)
    resid = data.layout.gather(data.kappa) / site - data.layout.gather(mean)
    tilts_full = data.layout.scatter(tilts, fill=1.0)

    def g(log_scale, log_ell):
        params = np.array([log_scale, log_ell] if learn_scale else [log_ell])
        return marginal_objective(params, bound, prior.jitter, data.layout, resid, 1 / site,
                                  scale=float(np.exp(log_scale)), learn_scale=learn_scale)[0]

    def naive(log_scale, log_ell):
        gram = bound.with_theta([log_ell]).gram() + prior.jitter * np.eye(c)
        return _naive_elbo_at_best_q(counts, gram, mean, float(np.exp(log_scale)), tilts_full)

    points = [(0.0, np.log(1.3)), (-1.2, 0.1), (0.8, np.log(3.0)), (-0.3, np.log(0.4))]
    ref_g, ref_naive = g(*points[0]), naive(*points[0])
    for p in points[1:]:
        assert g(*p) - ref_g == pytest.approx(naive(*p) - ref_naive, abs=1e-9, rel=1e-9)


@pytest.mark.parametrize("make, learn_scale, scale_prior", [
    (lambda: kernels.SquaredExponential(lengthscale=1.3), True, None),
    (lambda: kernels.Matern32(lengthscale=0.8), True, (2.0, 1.0)),
    (lambda: kernels.SquaredExponential(lengthscale=2.0)
     + 0.5 * kernels.Exponential(lengthscale=1.0), False, None),
    (lambda: kernels.SquaredExponential(lengthscale=2.0)
     + 0.5 * kernels.Exponential(lengthscale=1.0), True, (3.0, 0.5)),
])
def test_marginal_objective_gradient_matches_finite_differences(make, learn_scale, scale_prior):
    rng = np.random.default_rng(0)
    bound = make().bind(coords=_grid(4, 4))
    counts = rng.poisson(1.5, size=(16, 3))
    data = CountData.from_counts(counts)
    site = pg_mean_unchecked(data.b_obs, rng.uniform(0.3, 2.0, size=data.b_obs.size))
    resid = data.layout.gather(data.kappa) / site + 0.4
    eta = np.asarray(bound.theta, dtype=float)
    x = np.concatenate([[0.4], eta]) if learn_scale else eta

    def f(p):
        return marginal_objective(p, bound, 1e-6, data.layout, resid, 1 / site, scale=1.7,
                                  learn_scale=learn_scale, scale_prior=scale_prior)

    val, grad = f(x)
    h = 1e-5
    fd = np.array([(f(x + h * e)[0] - f(x - h * e)[0]) / (2 * h) for e in np.eye(x.size)])
    assert np.isfinite(val)
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-6 * max(1.0, abs(val)))


def _fit(counts, xy, kernel_update, max_iter=1000, tol=1e-8, init=None):
    """Fit scale and length scale with the joint M-step or with EM (``kernel_update``)."""
    bound = kernels.SquaredExponential(lengthscale=1.0, lengthscale_bounds=(1e-2, 1e3))
    model = CorrelatedMultinomial(covariance=bound.bind(coords=xy), learn_scale=True,
                                  learn_kernel=True, max_iter=max_iter, tol=tol)
    options = dataclasses.replace(model._options(counts.shape[1]), kernel_update=kernel_update)
    model._options = lambda k: options  # type: ignore[method-assign]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.fit(counts, init=init)


CASES = [("iid", 5, 6, 3, 0), ("sparse", 7, 5, 4, 1), ("smooth", 6, 6, 3, 2),
         ("iid", 3, 3, 5, 3), ("smooth", 8, 4, 2, 4), ("sparse", 4, 8, 2, 5)]


@pytest.mark.parametrize("kind, nx, ny, k, seed", CASES)
def test_learned_scale_and_lengthscale_converge_on_small_tables(kind, nx, ny, k, seed):
    """Issue 22: EM with the scale and the length scale stopped at max_iter on small tables
    (1,000 and 5,000 iterations); the joint M-step converges in tens of iterations, the ELBO
    never decreasing."""
    counts = _table(kind, nx, ny, k, seed)
    bound = kernels.SquaredExponential(lengthscale=1.0, lengthscale_bounds=(1e-2, 1e3))
    m = CorrelatedMultinomial(covariance=bound.bind(coords=_grid(nx, ny)), learn_scale=True,
                              learn_kernel=True, max_iter=200, tol=1e-8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m.fit(counts)
    assert m.converged_
    obj = m.objective_trace_
    assert np.all(np.diff(obj) >= -1e-9 * np.abs(obj[1:]))


@pytest.mark.parametrize("kind, nx, ny, k, seed", CASES)
def test_joint_fixed_point_is_a_fixed_point_of_em(kind, nx, ny, k, seed):
    """Started at the joint step's solution, EM (closed-form scale, L-BFGS-B kernel step with
    q(psi) fixed) stops at once and moves nothing: the point is stationary for both."""
    counts, xy = _table(kind, nx, ny, k, seed), _grid(nx, ny)
    joint = _fit(counts, xy, "joint", tol=1e-12)
    em = _fit(counts, xy, "em", max_iter=50, tol=1e-10, init=joint)
    assert em.converged_ and em.n_iter_ <= 5
    assert em.elbo_ == pytest.approx(joint.elbo_, abs=1e-7 * abs(joint.elbo_))
    assert em.scale_ == pytest.approx(joint.scale_, rel=1e-3, abs=1e-6)
    np.testing.assert_allclose(em.kernel_.theta, joint.kernel_.theta, atol=1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("kind, nx, ny, k, seed", [("smooth", 6, 6, 3, 2),
                                                   ("smooth", 8, 4, 2, 4)])
def test_joint_step_reaches_the_fixed_point_of_em(kind, nx, ny, k, seed):
    """Where EM converges (interior optimum), the joint step finds the same scale, length
    scale and ELBO in a tenth of the iterations, and an ELBO at least as high (EM's relative
    change falls below tol while it is still 1e-6 short: it converges linearly at a rate
    close to 1)."""
    counts, xy = _table(kind, nx, ny, k, seed), _grid(nx, ny)
    em = _fit(counts, xy, "em", max_iter=20000, tol=1e-12)
    joint = _fit(counts, xy, "joint", tol=1e-12)
    assert em.converged_ and joint.converged_
    assert joint.n_iter_ * 10 < em.n_iter_
    assert em.elbo_ - 1e-9 <= joint.elbo_ <= em.elbo_ + 1e-5
    assert joint.scale_ == pytest.approx(em.scale_, rel=1e-2)
    np.testing.assert_allclose(joint.kernel_.theta, em.kernel_.theta, atol=1e-2)


def test_joint_step_does_not_stall_on_the_small_scale_plateau():
    """The objective flattens out as the scale goes to 0. On this table (uniform counts 0..5,
    K = 4, 8 x 6 grid) an unrestricted quasi-Newton step from the start landed on that plateau
    (scale 1e-8, ELBO -246.076) and stopped there, below the ELBO of an interior point; with
    the trust region the fit ends above it (EM, after 5,018 iterations: scale 0.018, length
    scale 1.30, ELBO -246.017)."""
    rng = np.random.default_rng(7)
    rng.integers(3, 9, size=2)
    rng.integers(2, 6)
    counts, xy = rng.integers(0, 6, size=(48, 4)), _grid(8, 6)
    joint = _fit(counts, xy, "joint")
    interior = CorrelatedMultinomial(
        covariance=kernels.SquaredExponential(lengthscale=1.3).bind(coords=xy),
        scale=0.02).fit(counts)
    assert joint.converged_
    assert joint.elbo_ >= interior.elbo_


def test_joint_step_does_not_jump_onto_the_short_lengthscale_plateau():
    """Length scales below the grid spacing all give the identity matrix: a flat region. On
    this table (uniform counts 0..5, K = 4, 7 x 5 grid) a trust region of +-3 in log units let
    the first step jump there (length scale 0.05) and stop 0.1 below the ELBO that EM reaches
    at length scale 0.86; within +-1 the fit ends at least as high as that point."""
    rng = np.random.default_rng(67)
    rng.integers(3, 9, size=2)
    rng.integers(2, 6)
    counts, xy = rng.integers(0, 6, size=(35, 4)), _grid(7, 5)
    joint = _fit(counts, xy, "joint")
    interior = CorrelatedMultinomial(
        covariance=kernels.SquaredExponential(lengthscale=0.862).bind(coords=xy),
        scale=0.127).fit(counts)
    assert joint.converged_
    assert joint.elbo_ >= interior.elbo_
    assert float(np.exp(joint.kernel_.theta[0])) > 0.3


def test_boundary_maximum_is_approached_geometrically():
    """Where the ELBO is highest as the scale goes to 0 (every row's frequencies are the prior
    mean's, 1/3 each), the joint step moves the scale towards 0 by a factor of up to e per
    iteration and stops once the objective changes by less than tol: the ELBO is then within
    tol of its limit at scale 0 (EM is sublinear there and stops far short)."""
    xy = _grid(5, 4)
    counts = np.repeat(np.array([[2, 2, 2], [1, 1, 1], [0, 0, 0], [3, 3, 3]]), 5, axis=0)
    joint = _fit(counts, xy, "joint")
    assert joint.converged_ and joint.n_iter_ < 60
    bound = kernels.SquaredExponential(lengthscale=1.0).bind(coords=xy)
    limit = CorrelatedMultinomial(covariance=bound, scale=1e-12).fit(counts).elbo_
    assert joint.scale_ < 1e-4
    assert abs(joint.elbo_ - limit) <= 1e-7 * abs(limit)


def test_trust_region_bounds_each_step():
    rng = np.random.default_rng(1)
    bound = kernels.SquaredExponential(lengthscale=1.0).bind(coords=_grid(4, 4))
    data = CountData.from_counts(rng.poisson(3.0, size=(16, 3)))
    site = pg_mean_unchecked(data.b_obs, np.ones(data.b_obs.size))
    resid = data.layout.gather(data.kappa) / site
    for step in (0.5, 3.0):
        scale, kern = optimise_marginal(bound, 1e-8, data.layout, resid, 1 / site, 1e-6,
                                        learn_scale=True, learn_kernel=True,
                                        scale_range=(1e-10, 1e10), max_log_step=step)
        assert abs(np.log(scale) - np.log(1e-6)) <= step + 1e-12
        assert np.all(np.abs(kern.theta - bound.theta) <= step + 1e-12)


def test_kernel_update_option_is_validated():
    with pytest.raises(ValueError, match="kernel_update"):
        CAVIOptions(kernel_update="newton")


def test_joint_step_sweeps_skip_the_full_variances():
    """The joint step needs no C x C reduction in every psi step (the EM kernel step does)."""
    counts = _table("iid", 4, 4, 3, 0)
    bound = kernels.SquaredExponential(lengthscale=1.0).bind(coords=_grid(4, 4))
    prior = DenseCovariancePrior.from_kernel(bound)
    data = CountData.from_counts(counts)
    mean = np.repeat(uniform_psi(3)[None], 16, 0)
    for update, complete in (("joint", False), ("em", True)):
        opts = CAVIOptions(learn_scale=True, learn_kernel=True, kernel_update=update,
                           iteration=FixedPointOptions())
        tilts, hyper = initial_state(data, Hyper(1.0, mean, prior), opts, None)
        step = sweep(data, hyper, tilts, opts).step
        assert step.complete is complete
        assert (step.reduction is not None) is complete


def test_convergence_warning_says_what_to_try():
    """Issue 22: the warning of a fit stopped at its cap did not say what to do. It gives the
    last relative change, the iterations still needed at the recent rate and what to try."""
    from corrpriors.exceptions import ConvergenceWarning

    counts, xy = _table("smooth", 6, 6, 3, 2), _grid(6, 6)
    bound = kernels.SquaredExponential(lengthscale=1.0).bind(coords=xy)
    model = CorrelatedMultinomial(covariance=bound, learn_scale=True, max_iter=4,
                                  acceleration=None)
    with pytest.warns(ConvergenceWarning) as record:
        model.fit(counts)
    text = str(record[0].message)
    assert "did not converge in max_iter=4 iterations" in text
    assert re.search(r"the objective still changed by \S+ \(relative\)", text)
    assert "Try max_iter=" in text and "acceleration='anderson'" in text
    flat = np.repeat(np.array([[2, 2, 2], [1, 1, 1], [3, 3, 3]]), 5, axis=0)
    collapse = CorrelatedMultinomial(covariance=kernels.SquaredExponential(1.0).bind(
        coords=_grid(5, 3)), learn_scale=True, max_iter=60, acceleration=None)
    with pytest.warns(ConvergenceWarning, match="a fixed scale or a scale_prior"):
        collapse.fit(flat)


def test_stall_forecast_of_a_geometric_sequence():
    from corrpriors.core.fixed_point import stall_forecast

    obj = -1.0 - 0.5 ** np.arange(30)  # changes halve every iteration
    last, more = stall_forecast(obj, 1e-12)
    assert last == pytest.approx(0.5 ** 29 / (1 + 0.5 ** 29))
    assert more == pytest.approx(np.log2(last / 1e-12), abs=1.5)
    assert stall_forecast([1.0], 1e-8)[1] is None


def test_stall_advice_retry_settings():
    from corrpriors.core.fixed_point import stall_advice

    obj = -1.0 - 0.5 ** np.arange(30)
    advice = stall_advice(obj, 1e-12, 30)
    assert advice.max_iter == 30 + advice.more and advice.tol == pytest.approx(10 * advice.last)
    assert "more iterations would reach --tol" in advice.how_far("--tol")
    single = stall_advice([1.0], 1e-8, 1)
    assert single.max_iter == 10 and single.tol is None and single.how_far("tol") == ""
    far = stall_advice(-1.0 - 0.9 ** np.arange(5), 1e-8, 5)
    assert far.tol is None and "changed by" in far.how_far("tol")
