"""Round-20 audit of the kernels: bounds round-off, GMRF size and input checks."""

from __future__ import annotations

import numpy as np
import pytest

from corrpriors import CorrelatedMultinomial
from corrpriors.kernels import Exponential, Matern52, Scaled, SquaredExponential

# ---------------------------------------------------------------- 1. theta left on a bound

_RNG = np.random.default_rng(20)
_BOUND_VALUES = [0.1, 5.0, 10.0, 100.0, 1e-2, 1e3, 0.3, 7.0, 1e5, 3e-3,
                 *_RNG.uniform(0.02, 1e3, 40), *np.logspace(-2.5, 4, 40)]


@pytest.mark.parametrize("hi", _BOUND_VALUES)
def test_theta_on_a_bound_stays_within_it(hi):
    """exp(log(hi)) is often one ulp above hi (0.1, 5, 10, 100): a kernel set to its bound
    used to fail its own ``bounds`` check, which an optimiser calls next."""
    lo = hi / 10.0
    k = SquaredExponential(lengthscale=hi / 3.0, lengthscale_bounds=(lo, hi),
                           variance=hi / 3.0, variance_bounds=(lo, hi))
    for column in (0, 1):
        moved = k.with_theta(k.bounds[:, column])
        np.testing.assert_allclose(moved.bounds, k.bounds)          # no ValueError
        for value in (moved.lengthscale, moved.variance):
            assert lo <= value <= hi and value == pytest.approx((lo, hi)[column], rel=1e-15)
    scaled = Scaled(Exponential(hi / 3.0, lengthscale_bounds=(lo, hi)), hi / 3.0,
                    scale_bounds=(lo, hi))
    edge = scaled.with_theta(scaled.bounds[:, 1])
    for value in (edge.scale, edge.kernel.lengthscale):
        assert lo <= value <= hi and value == pytest.approx(hi, rel=1e-15)
    edge.bounds


def test_unmoved_entry_keeps_its_exact_value():
    """with_theta(k.theta) keeps the values themselves, not exp(log(value))."""
    k = Matern52(lengthscale=0.1, lengthscale_bounds=(1e-2, 0.1), variance=5.0,
                 variance_bounds=(1.0, 5.0))
    assert np.exp(np.log(0.1)) != 0.1                                 # the round-off at stake
    k2 = k.with_theta(k.theta)
    assert k2.lengthscale == 0.1 and k2.variance == 5.0
    k2.bounds
    k3 = k.with_theta([np.log(0.05), k.theta[1]])
    assert k3.variance == 5.0 and k3.lengthscale == pytest.approx(0.05, rel=1e-15)


def test_learned_kernel_stopping_on_its_bound_fits():
    """End to end: the optimiser of a learned length scale stops on the bound 100 and the fit
    used to die in hyper_em.optimise_marginal (BoundKernel.bounds)."""
    rng = np.random.default_rng(0)
    X = np.linspace(0, 10, 30)[:, None]
    counts = rng.multinomial(50, [0.2, 0.3, 0.5], size=30)
    kernel = SquaredExponential(lengthscale=1.0, lengthscale_bounds=(0.1, 100.0))
    model = CorrelatedMultinomial(kernel.bind(coords=X), learn_kernel=True).fit(counts)
    learned = model.kernel_.kernel if hasattr(model.kernel_, "kernel") else model.kernel_
    assert 0.1 <= learned.lengthscale <= 100.0
    assert learned.lengthscale == 100.0          # the data are i.i.d.: the longest length scale
    learned.bounds
