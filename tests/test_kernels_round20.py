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
    gmrf,
    graph_distances,
    graph_precision,
    grid_adjacency,
    grid_precision,
    knn_adjacency,
    lattice_adjacency,
)
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


# ---------------------------------------------------------------- 3-8. GMRF and distance inputs
def test_knn_grid_weights_are_the_documented_factor():
    g = np.array([(a, b) for a in range(12) for b in range(12)], dtype=float)
    w = knn_adjacency(g, 4)
    mean_degree = w.nnz / len(g)
    interior = [i for i, (a, b) in enumerate(g) if 2 <= a <= 9 and 2 <= b <= 9]
    values = w.toarray()[interior]
    np.testing.assert_allclose(values[values > 0], 4.0 / mean_degree, rtol=1e-12)
    assert 4.0 / mean_degree == pytest.approx(0.923, abs=1e-3)
    assert "mean degree counts the boundary" in " ".join(knn_adjacency.__doc__.split())


def test_asymmetric_tiny_weights_refused():
    with pytest.raises(ValueError, match=r"adjacency: expected a symmetric matrix.*max \|W - W\^T\|"):
        graph_precision(np.array([[0, 1e-14], [3e-14, 0]]), kappa=1e-7)
    graph_precision(np.array([[0, 2e-14], [2e-14, 0]]), kappa=1e-6)     # symmetric: fine


def test_tiny_spacing_blamed_on_spacing():
    with pytest.raises(ValueError, match=r"^spacing: 1e-200 is too small"):
        grid_precision((10, 10), length_scale=5.0, spacing=1e-200)


def test_four_dimensional_hint_does_not_suggest_the_given_alpha():
    with pytest.raises(ValueError, match=r"alpha = 2, dim = 4\); give kappa") as err:
        grid_precision((5, 5, 5, 5), length_scale=3.0)
    assert "use alpha = 2" not in str(err.value)
    with pytest.raises(ValueError, match=r"alpha = 1, dim = 2\); use alpha = 2 or give kappa"):
        grid_precision((5, 5), length_scale=3.0, alpha=1)


@pytest.mark.parametrize("call", [
    lambda: graph_distances(np.array([[0, 1 + 1j], [1 - 1j, 0]])),
    lambda: graph_distances(np.array([["0", "1"], ["1", "0"]])),
    lambda: graph_distances(sp.csr_array(np.array([[0, 1 + 1j], [1 - 1j, 0]]))),
    lambda: graph_precision(np.array([[0, 1 + 1j], [1 - 1j, 0]]), kappa=1.0),
    lambda: graph_precision(np.array([["0", "1"], ["1", "0"]]), kappa=1.0),
    lambda: lattice_adjacency(np.array([[1 + 0j], [2]])),
    lambda: lattice_adjacency(np.array([["1"], ["2"]])),
    lambda: graph_distances(np.array([[0, 2], [2, 0.0]]), weighted="no"),
    lambda: graph_distances(np.array([[0, 2], [2, 0.0]]), directed=1),
])
def test_complex_strings_and_non_flags_refused(call):
    with pytest.raises(TypeError, match=r"^(adjacency|coords|weighted|directed): expected"):
        call()


def test_graph_distances_undirected_takes_the_shorter_direction_as_documented():
    d = graph_distances(np.array([[0, 1.0], [5.0, 0]]))
    np.testing.assert_array_equal(d, [[0, 1], [1, 0]])
    assert "the shorter" in graph_distances.__doc__


def test_lattice_adjacency_large_integers_and_no_dimensions():
    for base in (2**53, 2**60, -(2**62)):
        w = lattice_adjacency(np.array([[base], [base + 1], [base + 3]], dtype=np.int64)).toarray()
        np.testing.assert_array_equal(w, [[0, 1, 0], [1, 0, 0], [0, 0, 0]])
    with pytest.raises(ValueError, match=r"coords: expected an array of shape \(C, D\) with C, D >= 1"):
        lattice_adjacency(np.zeros((3, 0)))


def test_infinite_bounds_and_overflowing_combinations_are_refused():
    """An infinite upper bound let learning reach exp(theta) = inf, and the sum (or product) of
    two kernels of variance 1e308 gave an infinite Gram matrix with only a RuntimeWarning (Scaled
    refused the same overflow)."""
    import numpy as np

    from corrpriors.kernels import Exponential, SquaredExponential

    with pytest.raises(ValueError, match=r"^lengthscale_bounds: expected finite 0 < low <= high, got \(0.01, inf\)"):
        SquaredExponential(1.0, lengthscale_bounds=(1e-2, np.inf))
    big = SquaredExponential(1.0, variance=1e308)
    for combined in (lambda: big + Exponential(2.0, variance=1e308), lambda: big * Exponential(2.0, variance=10.0)):
        with pytest.raises(ValueError, match=r"^k1, k2: their amplitudes .* combine to an overflow"):
            combined()
    fine = big + Exponential(2.0, variance=1.0)                    # no overflow: accepted
    assert np.isfinite(fine.bind(coords=np.arange(3.0)[:, None]).gram()).all()


def test_grid_precision_names_array_shaped_alpha_and_shape():
    """alpha=np.array([2]) raised numpy's ambiguous-truth TypeError and shape=np.array(10)
    'iteration over a 0-d array'; a 0-d array is a number, a 2-d one is not a shape."""
    import numpy as np

    from corrpriors.kernels import grid_precision

    for bad in (np.array([2]), np.array([[1]]), "2", np.True_):
        with pytest.raises(ValueError, match="^alpha: expected 1 or 2"):
            grid_precision((5, 5), length_scale=2.0, alpha=bad)
    with pytest.raises(ValueError, match="^shape: expected a tuple of positive integers"):
        grid_precision(np.array([[5, 5]]), length_scale=2.0)
    same = grid_precision((10,), length_scale=3.0)
    for shape in (np.array(10), np.int64(10), np.array([10]), [10]):
        assert (grid_precision(shape, length_scale=3.0) != same).nnz == 0
    assert (grid_precision((5, 5), length_scale=2.0, alpha=np.array(2)) != grid_precision(
        (5, 5), length_scale=2.0)).nnz == 0


def test_graph_precision_checks_dim_even_beside_kappa():
    """dim='abc' passed silently when kappa was given (dim is then unused, but never wrong)."""
    import numpy as np

    from corrpriors.kernels import graph_precision

    ring = np.roll(np.eye(6), 1, axis=1) + np.roll(np.eye(6), -1, axis=1)
    for bad in ("abc", 0, True, 1.5):
        with pytest.raises(ValueError, match="^dim: expected an integer >= 1"):
            graph_precision(ring, kappa=1.0, dim=bad)
    q = graph_precision(ring, kappa=1.0, dim=1)
    assert (q != graph_precision(ring, kappa=1.0)).nnz == 0
