"""Kernels: PSD, gradients vs finite differences, distances vs coordinates, metadata, errors."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import gamma as gamma_fn
from scipy.special import kv

from corrpriors.kernels import (
    BoundKernel,
    Exponential,
    Matern32,
    Matern52,
    Product,
    Scaled,
    SquaredExponential,
    Sum,
    euclidean_distances,
    graph_distances,
)

BASE = [SquaredExponential, Exponential, Matern32, Matern52]


def all_kernels():
    ks = {}
    for cls in BASE:
        ks[cls.__name__] = cls(lengthscale=1.3)
        ks[cls.__name__ + "_var"] = cls(lengthscale=0.7, variance=2.0, variance_bounds=(1e-3, 1e3))
    ks["sum"] = SquaredExponential(lengthscale=2.0) + Matern32(lengthscale=0.5)
    ks["product"] = Exponential(lengthscale=3.0) * Matern52(lengthscale=1.1, variance=1.5,
                                                             variance_bounds=(0.1, 10.0))
    ks["scaled_free"] = Scaled(SquaredExponential(lengthscale=0.9), 2.5, scale_bounds=(1e-2, 1e2))
    ks["scaled_op"] = 0.3 * Matern32(lengthscale=1.7)
    ks["nested"] = (SquaredExponential(lengthscale=1.0) + 0.5 * Exponential(lengthscale=2.0)) * Matern52(
        lengthscale=4.0, variance=0.8, variance_bounds=(1e-2, 1e2))
    ks["all_fixed"] = SquaredExponential(lengthscale=1.0, lengthscale_bounds="fixed")
    return ks


KERNELS = all_kernels()


def random_points(rng, n, d):
    return rng.uniform(-2, 2, size=(n, d))


@pytest.mark.parametrize("name", list(KERNELS))
@pytest.mark.parametrize("dim", [1, 2, 3])
def test_psd_on_random_points(name, dim):
    k = KERNELS[name]
    rng = np.random.default_rng(dim)
    X = random_points(rng, 40, dim)
    K = k(X)
    np.testing.assert_allclose(K, K.T, rtol=0, atol=1e-14)
    eig = np.linalg.eigvalsh(K)
    assert eig[0] >= -1e-10 * eig[-1]
    np.testing.assert_allclose(k.diag(X), np.diag(K), rtol=1e-14)


@pytest.mark.parametrize("name", list(KERNELS))
def test_gradient_matches_central_differences(name):
    k = KERNELS[name]
    rng = np.random.default_rng(1)
    X = random_points(rng, 12, 2)
    G = k.gradient(X=X)
    assert G.shape == (12, 12, k.n_params)
    theta = k.theta
    h = 1e-6
    for p in range(k.n_params):
        e = np.zeros_like(theta)
        e[p] = h
        fd = (k.with_theta(theta + e)(X) - k.with_theta(theta - e)(X)) / (2 * h)
        np.testing.assert_allclose(G[..., p], fd, rtol=1e-6, atol=1e-8,
                                   err_msg=f"{name}: {k.hyperparameter_names[p]}")
    np.testing.assert_allclose(k.gradient(distances=euclidean_distances(X)), G, rtol=1e-14)


@pytest.mark.parametrize("name", list(KERNELS))
def test_from_distances_matches_coordinates(name):
    k = KERNELS[name]
    rng = np.random.default_rng(2)
    X, Y = random_points(rng, 7, 3), random_points(rng, 5, 3)
    np.testing.assert_allclose(k.from_distances(euclidean_distances(X, Y)), k(X, Y), rtol=1e-14)
    np.testing.assert_allclose(k.from_distances(euclidean_distances(X)), k(X), rtol=1e-14)


@pytest.mark.parametrize("name", list(KERNELS))
def test_with_theta_round_trip_and_immutability(name):
    k = KERNELS[name]
    k1 = k.with_theta(k.theta)
    assert type(k1) is type(k)
    np.testing.assert_allclose(k1.theta, k.theta, rtol=0, atol=1e-14)
    assert [h.value for h in k1.hyperparameters] == pytest.approx([h.value for h in k.hyperparameters],
                                                                  rel=1e-14)
    assert len(k.hyperparameter_names) == k.n_params == k.theta.shape[0] == k.bounds.shape[0]
    if k.n_params:
        t = 0.5 * (k.bounds[:, 0] + k.bounds[:, 1]) * 0.1 + 0.9 * k.theta
        k2 = k.with_theta(t)
        np.testing.assert_allclose(k2.theta, t, rtol=1e-14)
        assert k2 != k and k == KERNELS[name]  # the original is unchanged
        np.testing.assert_allclose(k.theta, all_kernels()[name].theta)
        np.testing.assert_allclose(k2.bounds, k.bounds)


def test_closed_forms():
    d = np.array([[0.0, 0.5, 1.0, 2.0, 7.0]])
    l = 1.7
    r = d / l
    np.testing.assert_allclose(SquaredExponential(l, 2.0).from_distances(d), 2.0 * np.exp(-r**2))
    # the paper's form has no factor 1/2: k(l) = variance / e
    assert SquaredExponential(lengthscale=3.0).from_distances(np.array([[3.0]]))[0, 0] == pytest.approx(np.exp(-1))
    np.testing.assert_allclose(Exponential(l).from_distances(d), np.exp(-r))

    def matern(nu, r):  # general Bessel form (independent oracle)
        s = np.sqrt(2 * nu) * np.where(r == 0, 1.0, r)
        val = 2 ** (1 - nu) / gamma_fn(nu) * s**nu * kv(nu, s)
        return np.where(r == 0, 1.0, val)

    np.testing.assert_allclose(Matern32(l).from_distances(d), matern(1.5, r), rtol=1e-12)
    np.testing.assert_allclose(Matern52(l).from_distances(d), matern(2.5, r), rtol=1e-12)


def test_combinations_algebra():
    a, b = SquaredExponential(lengthscale=1.0), Matern32(lengthscale=2.0)
    X = random_points(np.random.default_rng(3), 6, 2)
    assert isinstance(a + b, Sum) and isinstance(a * b, Product)
    assert isinstance(2.0 * a, Scaled) and isinstance(a * 2, Scaled)
    np.testing.assert_allclose((a + b)(X), a(X) + b(X))
    np.testing.assert_allclose((a * b)(X), a(X) * b(X))
    np.testing.assert_allclose((2.0 * a)(X), 2.0 * a(X))
    assert sum([a, b]) == a + b
    assert (a + b).hyperparameter_names == ["k1__lengthscale", "k2__lengthscale"]
    assert (2.0 * a).hyperparameter_names == ["kernel__lengthscale"]  # scale fixed by default
    with pytest.raises(TypeError, match="k2: expected a Kernel"):
        Sum(a, 3.0)


def test_fixed_and_bounds_respected():
    k = SquaredExponential(lengthscale=2.0, variance=3.0)
    assert k.hyperparameter_names == ["lengthscale"]
    np.testing.assert_allclose(k.bounds, np.log([[1e-2, 1e3]]))
    k2 = k.with_theta([np.log(5.0)])
    assert k2.lengthscale == pytest.approx(5.0) and k2.variance == 3.0
    with pytest.raises(ValueError, match="lengthscale = 2000 lies outside its bounds"):
        k.with_theta([np.log(2000.0)])
    with pytest.raises(ValueError, match=r"theta: expected shape \(P,\) = \(1,\)"):
        k.with_theta([0.0, 0.0])
    with pytest.raises(ValueError, match="theta: contains NaN"):
        k.with_theta([np.nan])
    kf = SquaredExponential(lengthscale=2.0, lengthscale_bounds="fixed")
    assert kf.n_params == 0 and kf.theta.shape == (0,) and kf.bounds.shape == (0, 2)
    assert kf.gradient(X=np.zeros((3, 1))).shape == (3, 3, 0)
    assert kf.with_theta([]) == kf
    # round-off at the bound is clipped, not rejected
    kb = k.with_theta([np.log(1e3) + 1e-12])
    assert kb.lengthscale <= 1e3


@pytest.mark.parametrize("kwargs, match", [
    ({"lengthscale": -1.0}, "lengthscale: expected a finite positive number"),
    ({"lengthscale": np.nan}, "lengthscale: expected a finite positive number"),
    ({"variance": 0.0}, "variance: expected a finite positive number"),
    ({"lengthscale_bounds": (2.0, 1.0)}, r"lengthscale_bounds: expected finite 0 < low <= high"),
    ({"lengthscale_bounds": "free"}, "lengthscale_bounds: expected 'fixed' or a pair"),
    ({"variance_bounds": (0.0, 1.0)}, "variance_bounds: expected finite 0 < low <= high"),
])
def test_bad_hyperparameters_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SquaredExponential(**kwargs)


def test_bounds_apply_only_when_learning():
    """A length scale outside its bounds is fine while it is not learned (issue 11): the kernel
    evaluates exactly as ``exp(-d^2 / l^2)``, a model fits with it, and only learning (which asks
    for the bounds) refuses it, naming the way out."""
    from corrpriors.core import CorrelatedMultinomial

    k = SquaredExponential(lengthscale=5000.0)
    X = np.arange(4.0)[:, None]
    np.testing.assert_allclose(k(X), np.exp(-((X - X.T) / 5000.0) ** 2), rtol=1e-15)
    with pytest.raises(ValueError, match=r"lengthscale: value 5000 lies outside its bounds "
                                         r"\(0.01, 1000\), which apply when it is learned"):
        k.bounds
    inner = Scaled(Matern32(lengthscale=1e-3), 2.0)
    with pytest.raises(ValueError, match="kernel__lengthscale: value 0.001 .* pass "
                                         "lengthscale_bounds to widen"):
        inner.bounds
    counts = np.array([[3, 1], [2, 2], [0, 4], [1, 1]])
    m = CorrelatedMultinomial(k.bind(coords=X)).fit(counts)
    assert m.converged_ and np.isfinite(m.elbo_)
    with pytest.raises(ValueError, match="lengthscale: value 5000 lies outside its bounds"):
        CorrelatedMultinomial(k.bind(coords=X), learn_kernel=True).fit(counts)
    # widened bounds make it learnable
    kw = SquaredExponential(lengthscale=5000.0, lengthscale_bounds=(1e-2, 1e4))
    assert CorrelatedMultinomial(kw.bind(coords=X), learn_kernel=True).fit(counts).converged_


def test_bind_coords_and_distances():
    rng = np.random.default_rng(4)
    X = random_points(rng, 9, 2)
    k = SquaredExponential(lengthscale=1.5) * Exponential(lengthscale=2.0, variance=2.0,
                                                          variance_bounds=(0.1, 10))
    bc = k.bind(coords=X)
    bd = k.bind(distances=euclidean_distances(X))
    assert isinstance(bc, BoundKernel) and bc.n_covariates == 9 and bc.kernel is k
    np.testing.assert_allclose(bc.gram(), k(X), rtol=1e-14)
    np.testing.assert_allclose(bd.gram(), k(X), rtol=1e-14)
    np.testing.assert_allclose(bc.gram_gradient(), k.gradient(X=X), rtol=1e-14)
    np.testing.assert_array_equal(bc.theta, k.theta)
    np.testing.assert_array_equal(bc.bounds, k.bounds)
    assert bc.hyperparameter_names == k.hyperparameter_names and bc.n_params == 3
    t = bc.theta + 0.1
    b2 = bc.with_theta(t)
    assert isinstance(b2, BoundKernel)
    np.testing.assert_allclose(b2.gram(), k.with_theta(t)(X), rtol=1e-14)
    G = bc.gram()
    G[0, 0] = 99.0  # a fresh array each call
    assert bc.gram()[0, 0] != 99.0
    X[0, 0] = 1e3  # the bound kernel holds its own read-only copy
    np.testing.assert_allclose(bc.gram(), bd.gram())
    with pytest.raises(ValueError, match="read-only"):
        bc.distances[0, 1] = 0.0


@pytest.mark.parametrize("D, match", [
    (np.ones((3, 2)), r"expected a square \(N, N\) matrix"),
    (np.array([[0.0, 1.0], [2.0, 0.0]]), "must be symmetric"),
    (np.array([[0.0, -1.0], [-1.0, 0.0]]), "must be non-negative"),
    (np.array([[1.0, 1.0], [1.0, 0.0]]), "must have a zero diagonal"),
    (np.array([[0.0, np.nan], [np.nan, 0.0]]), "contains NaN"),
    (np.zeros(3), "expected a 2-D array"),
])
def test_bind_rejects_bad_distances(D, match):
    with pytest.raises(ValueError, match="distances: " + match):
        SquaredExponential().bind(distances=D)


def test_bad_coordinates_and_arguments():
    k = Matern52()
    with pytest.raises(ValueError, match=r"coords: expected a 2-D array .*reshape\(-1, 1\)"):
        k.bind(coords=np.arange(3.0))
    with pytest.raises(ValueError, match="coords: contains NaN"):
        k.bind(coords=np.array([[0.0], [np.nan]]))
    with pytest.raises(ValueError, match="Y: expected D=2 columns"):
        k(np.zeros((2, 2)), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="pass exactly one of coords and distances"):
        k.bind()
    with pytest.raises(ValueError, match="pass exactly one of coords and distances"):
        k.bind(coords=np.zeros((2, 1)), distances=np.zeros((2, 2)))
    with pytest.raises(ValueError, match="pass exactly one of X and distances"):
        k.gradient()
    with pytest.raises(ValueError, match="distances: must be non-negative"):
        k.from_distances(-np.ones((2, 2)))


def test_graph_distances():
    # path graph 0-1-2-3 and a 3x3 grid (Manhattan distances)
    A = np.diag(np.ones(3), 1)
    A = A + A.T
    np.testing.assert_array_equal(graph_distances(A), np.abs(np.subtract.outer(np.arange(4), np.arange(4))))
    n = 3
    idx = np.arange(n * n).reshape(n, n)
    G = np.zeros((n * n, n * n))
    G[idx[:, :-1].ravel(), idx[:, 1:].ravel()] = 1
    G[idx[:-1, :].ravel(), idx[1:, :].ravel()] = 1
    rc = np.stack(np.unravel_index(np.arange(n * n), (n, n)), axis=1)
    manhattan = np.abs(rc[:, None, :] - rc[None, :, :]).sum(-1)
    np.testing.assert_array_equal(graph_distances(G), manhattan)  # one direction given: undirected
    np.testing.assert_array_equal(graph_distances(sp.csr_matrix(G)), manhattan)
    W = 2.5 * A
    np.testing.assert_allclose(graph_distances(W), 2.5 * graph_distances(A))
    np.testing.assert_allclose(graph_distances(W, weighted=False), graph_distances(A))
    # disconnected
    B = np.zeros((4, 4))
    B[0, 1] = B[1, 0] = B[2, 3] = B[3, 2] = 1
    with pytest.raises(ValueError, match=r"adjacency: the graph is disconnected \(2 components\)"):
        graph_distances(B)
    D = graph_distances(B, allow_disconnected=True)
    assert np.isinf(D[0, 2]) and D[0, 1] == 1
    for cls in BASE:
        K = cls(lengthscale=1.0).bind(distances=D).gram()
        assert np.all(np.isfinite(K)) and K[0, 2] == 0 and K[0, 1] > 0
        assert np.all(np.isfinite(cls(lengthscale=1.0).bind(distances=D).gram_gradient()))
    with pytest.raises(ValueError, match="adjacency: edge weights must be non-negative"):
        graph_distances(-A)
    with pytest.raises(ValueError, match=r"adjacency: expected a square \(N, N\) matrix"):
        graph_distances(np.ones((2, 3)))


def test_grid_graph_se_is_indefinite_exponential_is_psd():
    """Documented caveat: SE / Matern on grid shortest-path (Manhattan) distances is indefinite
    for length scales of a cell or more; the exponential kernel stays PSD; on the cells'
    Euclidean coordinates every kernel is PSD."""
    n = 6
    idx = np.arange(n * n).reshape(n, n)
    G = np.zeros((n * n, n * n))
    G[idx[:, :-1].ravel(), idx[:, 1:].ravel()] = 1
    G[idx[:-1, :].ravel(), idx[1:, :].ravel()] = 1
    D = graph_distances(G)
    rc = np.stack(np.unravel_index(np.arange(n * n), (n, n)), axis=1).astype(float)
    for l in [1.0, 2.0, 5.0]:
        for cls in [SquaredExponential, Matern52, Matern32]:
            eig = np.linalg.eigvalsh(cls(lengthscale=l).bind(distances=D).gram())
            assert eig[0] < -1e-3 * eig[-1]
        for cls in BASE:
            eig = np.linalg.eigvalsh(cls(lengthscale=l).bind(coords=rc).gram())
            assert eig[0] >= -1e-10 * eig[-1]
        eig = np.linalg.eigvalsh(Exponential(lengthscale=l).bind(distances=D).gram())
        assert eig[0] >= -1e-10 * eig[-1]
    eig = np.linalg.eigvalsh(SquaredExponential(lengthscale=0.5).bind(distances=D).gram())
    assert eig[0] >= -1e-10 * eig[-1]
