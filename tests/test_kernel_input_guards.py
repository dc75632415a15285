"""Kernel, GMRF, task-kernel and Dirichlet inputs refused at the boundary (audit 2, kernels and
baselines): booleans and strings were taken as numbers (``lengthscale=True`` was 1.0,
``normalize="no"`` was true), dense distance / adjacency / task arrays too big for memory died in
a raw ``MemoryError`` (or a dense 20,000 x 20,000 Cholesky that looked like a hang), extreme
``kappa`` gave NaN precisions or a singular one, ``BoundKernel`` took negative distances and
non-kernels, nested scales overflowed to an infinite Gram matrix, and
``DirichletMultinomial(alpha='1')`` was accepted. Nothing big is allocated here: memory
budgets are set through ``CORRPRIORS_MEMORY_LIMIT`` or the arrays are broadcast views.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from corrpriors._memory import MemoryEstimateError
from corrpriors.baselines import DirichletMultinomial
from corrpriors.kernels import (
    BoundKernel,
    Exponential,
    Matern32,
    Scaled,
    SquaredExponential,
    TaskCorrelation,
    euclidean_distances,
    graph_distances,
    graph_precision,
    grid_adjacency,
    grid_precision,
    kronecker_precision,
    matern_kappa,
)
from corrpriors.kernels.gmrf import knn_adjacency

X3 = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]])


# ---------------------------------------------------------------- 1. bools and strings
@pytest.mark.parametrize("make, match", [
    (lambda: SquaredExponential(lengthscale=True), "lengthscale: expected a finite positive number, got True"),
    (lambda: Matern32(lengthscale="1"), "lengthscale: expected a finite positive number, got '1'"),
    (lambda: Exponential(variance=True), "variance: expected a finite positive number, got True"),
    (lambda: Scaled(SquaredExponential(), True), "scale: expected a finite positive number, got True"),
    (lambda: SquaredExponential(lengthscale_bounds=(True, 2)), r"lengthscale_bounds: expected .*real numbers"),
    (lambda: SquaredExponential(lengthscale_bounds=("0.1", 2)), r"lengthscale_bounds: expected .*real numbers"),
    (lambda: SquaredExponential().with_theta([True]), "theta: expected log hyper-parameters"),
    (lambda: matern_kappa(True, dim=2), "length_scale: expected a finite positive number, got True"),
    (lambda: grid_precision((3, 3), kappa=True), "kappa: expected a finite positive number, got True"),
    (lambda: grid_precision((3, 3), length_scale="2"), "length_scale: expected a finite positive number"),
    (lambda: grid_adjacency((3, 3), spacing=True), "spacing: expected a positive number"),
    (lambda: grid_adjacency((3, 3), spacing=[1.0, True]), "spacing: expected a positive number"),
    (lambda: graph_precision(grid_adjacency((3, 3)), kappa=1, normalize="no"), "normalize: expected True or False"),
    (lambda: grid_precision((3, 3), kappa=1, normalize=0), "normalize: expected True or False"),
])
def test_bools_and_strings_are_not_numbers(make, match):
    with pytest.raises(TypeError, match=match):
        make()


def test_real_numbers_still_accepted():
    k = SquaredExponential(lengthscale=np.float32(2), variance=3, lengthscale_bounds=(np.float64(0.1), 10))
    assert k(X3).shape == (3, 3)
    assert k.with_theta([np.log(2.0)]).lengthscale == pytest.approx(2.0)
    a = grid_adjacency((3, 3), spacing=[1, np.float64(2.0)])
    assert a.shape == (9, 9)
    assert graph_precision(a, kappa=1, normalize=np.bool_(False)).shape == (9, 9)


# ---------------------------------------------------------------- 2. distance and adjacency memory
def test_dense_distance_helpers_refuse_before_allocating():
    huge = np.broadcast_to(0.0, (10**6, 2))          # no memory behind it
    with pytest.raises(MemoryEstimateError, match=r"X: the dense \(1,000,000, 1,000,000\) float64 distance matrix"):
        euclidean_distances(huge)
    with pytest.raises(MemoryEstimateError, match=r"X, Y: the dense \(1,000,000, 100,000\)"):
        euclidean_distances(huge, np.broadcast_to(0.0, (10**5, 2)))
    with pytest.raises(MemoryEstimateError, match=r"adjacency: the dense \(1,000,000, 1,000,000\) float64 "):
        graph_distances(grid_adjacency((1000, 1000)))


def test_knn_and_grid_refuse_before_allocating(monkeypatch):
    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "100M")
    coords = np.random.default_rng(0).random((20_000, 2))
    with pytest.raises(MemoryEstimateError, match="coords, n_neighbors: the 19,999-nearest-neighbour graph"):
        knn_adjacency(coords, 19_999)
    start = time.perf_counter()
    for make in (lambda: grid_adjacency((10**6, 10**6)), lambda: grid_precision((10**6, 10**6), kappa=1.0)):
        with pytest.raises(MemoryEstimateError, match=r"shape: a grid of shape \(1000000, 1000000\)"):
            make()
    assert time.perf_counter() - start < 1.0
    assert knn_adjacency(coords[:100], 5).shape == (100, 100)   # small problems unaffected


# ---------------------------------------------------------------- 3. task kernels
def test_task_kernels_refuse_huge_sizes_before_allocating():
    from corrpriors.kernels.task import MAX_DENSE_TASKS  # (here: the old code had none)

    start = time.perf_counter()
    with pytest.raises(MemoryEstimateError, match="n_tasks: the T \\(T - 1\\) / 2 correlation angles of T = 100,000"):
        TaskCorrelation(10**5)
    with pytest.raises(MemoryEstimateError, match="n_tasks: the \\(T, T, P\\) derivative"):
        TaskCorrelation(300).correlation_gradient()
    assert TaskCorrelation(300).correlation.shape == (300, 300)   # no (T, T, P) array for B alone
    big = np.broadcast_to(0.0, (MAX_DENSE_TASKS + 1, MAX_DENSE_TASKS + 1))
    with pytest.raises(ValueError, match="task_correlation: T = 5,001 tasks is more than MAX_DENSE_TASKS"):
        kronecker_precision(big, grid_precision((3, 3), kappa=1))
    assert time.perf_counter() - start < 2.0


def test_kronecker_product_memory_checked(monkeypatch):
    state_precision = grid_precision((30, 30), kappa=1)   # before the limit: it factorises itself
    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "1M")
    with pytest.raises(MemoryEstimateError, match="task_correlation, state_precision: the Kronecker product"):
        kronecker_precision(np.eye(100), state_precision)
    assert kronecker_precision(np.eye(2), grid_precision((3, 3), kappa=1)).shape == (18, 18)


# ---------------------------------------------------------------- 4. extreme kappa
@pytest.mark.parametrize("kw, match", [
    (dict(length_scale=1e-300), r"length_scale: kappa = 2\.8\d+e\+300 \(from length_scale\) is too large"),
    (dict(kappa=1e300), r"kappa: kappa = 1e\+300 is too large, kappa\*\*4 overflows"),
    (dict(kappa=1e150), r"kappa: kappa = 1e\+150 is too large"),
    (dict(length_scale=1e300), r"length_scale: kappa = 2\.8\d+e-300 \(from length_scale\) is too small"),
    (dict(kappa=1e-300), r"kappa: kappa = 1e-300 is too small, kappa\*\*4 = 0 is negligible against "
                         r"the graph's largest degree 4"),
    (dict(kappa=1e-100, alpha=1), r"kappa\*\*2 = 1e-200 is negligible"),
])
def test_extreme_kappa_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        grid_precision((3, 3), **kw)


def test_moderate_kappa_unaffected():
    for kappa in (1e-2, 1.0, 1e50):
        q = grid_precision((3, 3), kappa=kappa, normalize=False)
        assert np.all(np.isfinite(q.data))
        assert np.all(np.linalg.eigvalsh(q.toarray()) > 0)


# ---------------------------------------------------------------- 5. BoundKernel
def test_bound_kernel_validates_its_inputs():
    k = SquaredExponential()
    d = euclidean_distances(X3)
    with pytest.raises(ValueError, match="distances: must be non-negative"):
        BoundKernel(k, -d)
    with pytest.raises(ValueError, match="distances: must be symmetric"):
        BoundKernel(k, d + np.triu(np.ones((3, 3)), 1))
    with pytest.raises(TypeError, match="kernel: expected a corrpriors.kernels.Kernel, got str"):
        BoundKernel("k", d)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="distances: expected a numeric array"):
        BoundKernel(k, "x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="coords: expected one row per covariate"):
        BoundKernel(k, d, X3[:2])
    bound = BoundKernel(k, d)
    assert not bound.distances.flags.writeable and bound.distances is not d


def test_bind_does_not_revalidate(monkeypatch):
    """bind / with_theta validate once: BoundKernel.__post_init__'s checks are not repeated."""
    import corrpriors.kernels.base as base

    calls = []
    real = base.check_distances
    monkeypatch.setattr(base, "check_distances", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    k = SquaredExponential()
    b = k.bind(coords=X3)
    assert calls == []
    b2 = k.bind(distances=euclidean_distances(X3)).with_theta([0.5])
    assert len(calls) == 1
    np.testing.assert_allclose(b.with_theta([0.5]).gram(), b2.gram())
    assert not b2.distances.flags.writeable and not b.coords.flags.writeable


# ---------------------------------------------------------------- 6. overflowing scales
def test_overflowing_scale_product_refused():
    k = SquaredExponential()
    with pytest.raises(ValueError, match="scale: 1e\\+300 times the kernel's own amplitude overflows"):
        Scaled(Scaled(k, 1e300), 1e300)
    with pytest.raises(ValueError, match="scale: .* overflows"):
        Scaled(SquaredExponential(variance=1e300), 1e10)
    assert np.all(np.isfinite(Scaled(Scaled(k, 1e150), 1e150)(X3)))


# ---------------------------------------------------------------- 7. Dirichlet alpha
@pytest.mark.parametrize("alpha", ["1", True, np.array([True, False]), 0.0, np.inf, 1e101, None])
def test_dirichlet_alpha_refused_at_fit(alpha):
    """``__init__`` only stores its arguments (scikit-learn's estimator shape); ``fit`` refuses
    a concentration that is not a positive number in ALPHA_RANGE ('1' and True were taken as 1)."""
    model = DirichletMultinomial(alpha=alpha)
    with pytest.raises(ValueError, match="alpha: "):
        model.fit([[1, 0], [0, 1]])


def test_dirichlet_alpha_array_still_accepted():
    m = DirichletMultinomial(alpha=[1, 2.0]).fit([[1, 0], [0, 1]])
    assert m.prior_alpha_.shape == (2, 2)


@pytest.mark.parametrize("tau", [1e308, 1e307])
def test_a_tau_that_overflows_the_precision_is_refused(tau):
    """tau = 1e307 (times these entries, up to 29) made the precision's entries inf without a word."""
    from corrpriors.kernels import graph_precision, grid_adjacency

    A = grid_adjacency((3, 3))
    with pytest.raises(ValueError, match="^tau: "):
        graph_precision(A, kappa=1.0, tau=tau, normalize=False)
    q = graph_precision(A, kappa=1.0, tau=2.0, normalize=False)
    np.testing.assert_array_equal(q.toarray(), 2.0 * graph_precision(A, kappa=1.0, normalize=False).toarray())
