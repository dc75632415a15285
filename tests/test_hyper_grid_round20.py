"""Round 20: non-finite values in the hyper-parameter grid and in PSIS, bools as positive numbers.

Oracles: normalised ``exp`` of the log posterior over the finite grid points (computed here);
Pareto smoothing of the finite log weights alone for input with ``-inf`` entries.
"""

import numpy as np
import pytest
from scipy.special import logsumexp

from corrpriors import CorrelatedMultinomial, select_scale
from corrpriors._validation import check_positive
from corrpriors.core import intervals
from corrpriors.core.hyper_grid import integrate
from corrpriors.core.psis import pareto_smooth

COV = np.exp(-np.subtract.outer(np.arange(6.0), np.arange(6.0)) ** 2 / 4)
COUNTS = np.array([[5, 1], [4, 2], [0, 0], [1, 4], [0, 6], [1, 5]])
BOUNDS = np.array([[-5.0, 5.0]])


def _gauss(centre, sd):
    return lambda eta: float(-0.5 * ((eta[0] - centre) / sd) ** 2)


# ------------------------------------------------------------------------ the grid, directly
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_grid_refuses_a_nan_or_plus_inf_log_posterior(bad):
    g = _gauss(0.3, 0.7)
    with pytest.raises(ValueError, match=r"not finite at eta=\[0\.5\]: (nan|inf)"):
        integrate(lambda eta, warm: (bad if eta[0] > 0.4 else g(eta), None), np.zeros(1), BOUNDS)


def test_grid_refuses_a_log_posterior_that_is_minus_inf_everywhere():
    with pytest.raises(ValueError, match="-inf at every point evaluated"):
        integrate(lambda eta, warm: (-np.inf, None), np.zeros(1), BOUNDS)


@pytest.mark.parametrize("start, bounds, name", [
    ([0.0], [[5.0, -5.0]], "bounds"),            # inverted
    ([0.0], [[-5.0, np.nan]], "bounds"),
    ([0.0], [[-5.0, 5.0], [0.0, 1.0]], "bounds"),  # one row too many
    ([np.nan], [[-5.0, 5.0]], "start"),
    ([np.inf], [[-5.0, 5.0]], "start"),
])
def test_grid_refuses_bad_start_and_bounds(start, bounds, name):
    with pytest.raises(ValueError, match=f"^{name}: expected"):
        integrate(lambda eta, warm: (0.0, None), np.array(start), np.array(bounds))


@pytest.mark.parametrize("edge, start", [(1.0, 0.0), (1.0, 1.3), (-1.0, -1.2)])
def test_minus_inf_values_get_weight_zero_and_stop_the_grid(edge, start):
    """A support edge inside the bounds (``-inf`` beyond ``edge``): the grid keeps to the finite
    side, also when it starts beyond the edge next to it, with weights exp(l) normalised over
    the finite points."""
    g = _gauss(0.8 if edge > 0 else -0.5, 0.7)
    beyond = (lambda x: x > edge) if edge > 0 else (lambda x: x < edge)
    grid = integrate(lambda eta, warm: (-np.inf if beyond(eta[0]) else g(eta), None),
                     np.array([start]), BOUNDS)
    finite = np.isfinite(grid.log_post)
    assert finite.sum() >= 3 and not beyond(grid.mode[0])
    assert not any(beyond(x) for x in grid.points[finite, 0])
    np.testing.assert_array_equal(grid.weights[~finite], 0.0)
    ref = np.exp(grid.log_post[finite] - logsumexp(grid.log_post[finite]))
    np.testing.assert_allclose(grid.weights[finite], ref, rtol=1e-12)
    np.testing.assert_allclose(grid.log_post[finite], [g(p) for p in grid.points[finite]])


# ------------------------------------------------------------------------ through the estimator
@pytest.fixture(scope="module")
def model():
    return CorrelatedMultinomial(covariance=COV, scale=2.0).fit(COUNTS)


def _fresh(model):
    model._calibrated = None  # the calibrated posterior is cached
    return model


def test_calibrated_posterior_refuses_a_nan_log_posterior(model, monkeypatch):
    edge = np.log(2.0) + 0.2
    monkeypatch.setattr(intervals, "_log_scale_prior",
                        lambda prior, log_scale: np.nan if log_scale > edge else 0.0)
    with pytest.raises(ValueError, match="log posterior of the hyper-parameters is not finite"):
        _fresh(model).credible_interval(0.9, hyper="scale", rng=0, n_samples=64)


def test_calibrated_posterior_with_a_support_edge(model, monkeypatch):
    edge = np.log(2.0) + 0.2
    monkeypatch.setattr(intervals, "_log_scale_prior",
                        lambda prior, log_scale: -np.inf if log_scale > edge else 0.0)
    post = _fresh(model).calibrated_posterior(hyper="scale")
    mix = post.marginals
    assert np.all(mix.points[:, 0] <= edge) and mix.weights.sum() == pytest.approx(1.0)
    grid = post.grid
    finite = np.isfinite(grid.log_post)
    assert (~finite).any()   # the grid met the edge
    np.testing.assert_allclose(grid.weights[finite],
                               np.exp(grid.log_post[finite] - logsumexp(grid.log_post[finite])))
    lo, hi = _fresh(model).credible_interval(0.9, hyper="scale", rng=0, n_samples=64)
    assert np.all((0 <= lo) & (lo < hi) & (hi <= 1))
    _fresh(model)


# ------------------------------------------------------------------------ PSIS
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_pareto_smooth_refuses_nan_and_plus_inf(bad):
    lw = np.r_[np.random.default_rng(0).normal(size=99), bad]
    with pytest.raises(ValueError, match=r"^log_weights: .* at index 99"):
        pareto_smooth(lw)


def test_pareto_smooth_refuses_all_minus_inf_and_empty():
    with pytest.raises(ValueError, match="^log_weights: every entry is -inf"):
        pareto_smooth(np.full(10, -np.inf))
    with pytest.raises(ValueError, match="^log_weights: expected a non-empty 1-d array"):
        pareto_smooth(np.zeros(0))


@pytest.mark.parametrize("n_drop", [1, 40, 399])
def test_minus_inf_log_weights_are_weight_zero_draws(n_drop):
    """-inf entries stay -inf; the others are smoothed as if they were the only draws."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal(400) * 0.6
    finite = -0.5 * x ** 2 + 0.5 * x ** 2 / 0.6 ** 2   # a heavy tail (khat ~ 0.64)
    pos = rng.choice(400 + n_drop, size=n_drop, replace=False)
    lw = np.insert(finite, np.sort(pos) - np.arange(n_drop), -np.inf)
    assert np.isneginf(lw).sum() == n_drop
    out, khat = pareto_smooth(lw)
    ref, ref_khat = pareto_smooth(finite)
    assert khat == ref_khat and khat > 0.3
    np.testing.assert_array_equal(out[np.isneginf(lw)], -np.inf)
    np.testing.assert_allclose(out[np.isfinite(lw)], ref, rtol=0, atol=1e-12)
    assert logsumexp(out) == pytest.approx(0.0, abs=1e-12)


def test_pareto_smooth_of_one_finite_entry():
    out, khat = pareto_smooth(np.array([-np.inf, 3.0, -np.inf]))
    np.testing.assert_array_equal(out, [-np.inf, 0.0, -np.inf])
    assert khat == -np.inf


# ------------------------------------------------------------------------ bools
@pytest.mark.parametrize("flag", [True, False, np.True_])
def test_check_positive_refuses_bools(flag):
    with pytest.raises(ValueError, match="^start: expected a finite positive number"):
        check_positive(flag, "start")
    with pytest.raises(ValueError, match="^x: expected a finite non-negative number"):
        check_positive(flag, "x", strict=False)


def test_select_scale_refuses_a_bool_start():
    model = CorrelatedMultinomial(covariance=COV)
    with pytest.raises(ValueError, match="^start: "):
        select_scale(model, COUNTS, start=True)
