"""Round-20 audit of the kernels: bounds round-off, GMRF size and input checks."""

from __future__ import annotations

import time

import numpy as np
import pytest
import scipy.sparse as sp

from corrpriors import CorrelatedMultinomial
from corrpriors._memory import MemoryEstimateError
from corrpriors.kernels import (
    Exponential,
    Matern52,
    Scaled,
    SquaredExponential,
    graph_precision,
    grid_adjacency,
    grid_precision,
)
from corrpriors.kernels import gmrf
from corrpriors.linalg import SparseCholesky

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


# ---------------------------------------------------------------- 2. GMRF size refused up front
def test_huge_grid_precision_refused_before_building():
    """(3000, 3000) used to take ~10 s then a raw MemoryError; (2000, 2000) ran 190 s and died
    in SuperLU (SystemError). Both need tens of GiB for the normalisation's factor."""
    for shape in ((3000, 3000), (2000, 2000)):
        start = time.perf_counter()
        with pytest.raises(MemoryEstimateError, match=rf"shape: a grid of shape \({shape[0]}, "
                           rf"{shape[1]}\) .*GMRF precision .*sparse Cholesky factor.*GiB"):
            grid_precision(shape, length_scale=5.0)
        assert time.perf_counter() - start < 1.0


def test_graph_precision_refused_before_the_product(monkeypatch):
    adj = grid_adjacency((250, 250))             # 62,500 nodes
    nnz = graph_precision(adj, length_scale=5.0, dim=2, normalize=False).nnz
    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "40M")
    calls = []
    original = gmrf._normalised
    monkeypatch.setattr(gmrf, "_normalised", lambda q: calls.append(q) or original(q))
    with pytest.raises(MemoryEstimateError, match=r"adjacency: a graph \(62,500 nodes\): the "
                       rf"alpha = 2 GMRF precision \({nnz:,} stored entries\)"):
        graph_precision(adj, length_scale=5.0, dim=2)
    assert not calls
    small = graph_precision(grid_adjacency((20, 20)), length_scale=5.0, dim=2)   # unaffected
    assert small.shape == (400, 400)


@pytest.mark.parametrize("alpha", [1, 2])
def test_precision_entry_count_is_exact(alpha):
    rng = np.random.default_rng(alpha)
    a = sp.random_array((300, 300), density=0.02, random_state=rng)
    w = sp.csr_array(a + a.T)
    w.setdiag(0)
    w.eliminate_zeros()
    m = sp.csr_array(sp.eye_array(300) + sp.diags_array(w.sum(axis=1)) - w)
    m.sort_indices()
    q = m @ m if alpha == 2 else m
    assert gmrf._precision_nnz(m, alpha) == sp.csr_array(q).nnz


@pytest.mark.parametrize("shape, alpha", [((3000,), 1), ((3000,), 2), ((60, 60), 1), ((60, 60), 2),
                                          ((14, 14, 14), 1), ((14, 14, 14), 2), ((7, 7, 7, 7), 2)])
def test_grid_factor_estimate_is_below_the_real_one(shape, alpha):
    """The up-front estimate never refuses what the factorisation's own check would accept."""
    kw = {"length_scale": 5.0} if 2 * alpha > len(shape) else {"kappa": 0.5}
    q = grid_precision(shape, alpha=alpha, normalize=False, **kw)
    real = SparseCholesky(q).memory_bytes
    estimate = gmrf._grid_factor_bytes(q.shape[0], len(shape), alpha)
    assert 0.4 * real < estimate <= real
