"""GMRF precision builders (kernels.gmrf): structure, SPDE link, normalisation, errors."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.linalg import splu
from scipy.special import kv

from corrpriors.kernels import graph_precision, grid_adjacency, grid_precision, knn_adjacency, matern_kappa


def dense_laplacian_1d(n: int) -> np.ndarray:
    lap = 2.0 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1)
    lap[0, 0] = lap[-1, -1] = 1.0
    return lap


def assert_spd(q: sp.csr_array) -> np.ndarray:
    dense = q.toarray()
    np.testing.assert_array_equal(dense, dense.T)
    assert np.linalg.eigvalsh(dense).min() > 0
    return dense


def interior_row_nnz(q: sp.csr_array, shape: tuple, cell: tuple) -> int:
    return int(q[[np.ravel_multi_index(cell, shape)]].count_nonzero())


@pytest.mark.parametrize("alpha", [1, 2])
def test_grid_1d_closed_form(alpha):
    n, kappa, tau = 9, 0.7, 2.5
    q = grid_precision(n, kappa=kappa, alpha=alpha, tau=tau, normalize=False)
    m = kappa ** 2 * np.eye(n) + dense_laplacian_1d(n)
    expected = tau * np.linalg.matrix_power(m, alpha)
    np.testing.assert_allclose(q.toarray(), expected, rtol=1e-14, atol=1e-14)


def test_grid_2d_is_kronecker_sum_with_spacing():
    shape, h = (5, 4), (0.5, 2.0)
    q = grid_precision(shape, kappa=1.3, alpha=2, normalize=False, spacing=h)
    lap = (np.kron(dense_laplacian_1d(5) / h[0] ** 2, np.eye(4))
           + np.kron(np.eye(5), dense_laplacian_1d(4) / h[1] ** 2))
    m = 1.3 ** 2 * np.eye(20) + lap
    np.testing.assert_allclose(q.toarray(), m @ m, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("shape, alpha, expected", [
    ((12, 12), 1, 5), ((12, 12), 2, 13), ((7, 7, 7), 1, 7), ((7, 7, 7), 2, 25),
    ((9,), 2, 5)])
def test_sparsity_and_positive_definiteness(shape, alpha, expected):
    q = grid_precision(shape, kappa=0.5, alpha=alpha)
    assert_spd(q)
    centre = tuple(s // 2 for s in shape)
    assert interior_row_nnz(q, shape, centre) == expected
    assert q.nnz <= expected * q.shape[0]
    assert q.has_sorted_indices


def test_normalisation_geometric_mean_of_marginal_variances():
    for q in (grid_precision((15, 11), length_scale=4.0),
              grid_precision((15, 11), kappa=0.4, alpha=1),
              graph_precision(knn_adjacency(np.random.default_rng(0).random((120, 2)), 5),
                              length_scale=0.2, dim=2)):
        variances = np.diag(np.linalg.inv(assert_spd(q)))
        np.testing.assert_allclose(np.exp(np.mean(np.log(variances))), 1.0, rtol=1e-10)


def test_correlation_matches_matern_and_decays():
    n, rho = 41, 8.0
    q = grid_precision((n, n), length_scale=rho)
    centre = (n // 2) * n + n // 2
    r = np.arange(0, 16)
    cells = np.concatenate([centre + r, centre + r[1:] * n])
    rhs = np.zeros((n * n, cells.size))
    rhs[cells, np.arange(cells.size)] = 1.0
    cov = splu(sp.csc_array(q)).solve(rhs)[cells]  # covariance among the chosen cells
    corr = cov[0] / np.sqrt(cov[0, 0] * np.diag(cov))
    kappa = np.sqrt(8.0) / rho
    along = corr[1:16]
    matern = kappa * r[1:] * kv(1, kappa * r[1:])  # nu = 1: (kappa r) K_1(kappa r)
    assert np.all(np.diff(along) < 0)
    np.testing.assert_allclose(along, matern, atol=0.035)
    np.testing.assert_allclose(corr[8], 0.1397, atol=0.01)
    np.testing.assert_allclose(corr[16:], along, rtol=1e-10)  # isotropy


def test_grid_builder_equals_graph_builder_on_grid_adjacency():
    shape = (6, 5, 3)
    mask = np.ones(shape, dtype=bool)
    mask[2, 1:4, :] = False
    walls = np.array([[0, 1], [20, 35]])  # (0,0,0)-(0,0,1) and (1,1,2)-(2,1,2)
    walls = walls[mask.ravel()[walls].all(axis=1)]
    a = grid_precision(shape, length_scale=3.0, mask=mask, walls=walls)
    b = graph_precision(grid_adjacency(shape, mask=mask, walls=walls), length_scale=3.0,
                        dim=3)
    np.testing.assert_allclose(a.toarray(), b.toarray(), rtol=1e-13)


@pytest.mark.parametrize("alpha", [1, 2])
def test_mask_and_walls_are_respected(alpha):
    shape = (6, 7)
    mask = np.ones(shape, dtype=bool)
    mask[3, 2] = False
    walls = np.array([[[0, 0], [0, 1]], [[4, 4], [5, 4]]])  # coordinate form
    q = grid_precision(shape, kappa=0.6, alpha=alpha, mask=mask, walls=walls,
                       normalize=False)
    assert q.shape == (41, 41)
    new = np.cumsum(mask.ravel()) - 1
    idx = lambda i, j: new[np.ravel_multi_index((i, j), shape)]  # noqa: E731
    dense = assert_spd(q)
    assert dense[idx(0, 0), idx(0, 1)] == 0 and dense[idx(4, 4), idx(5, 4)] == 0
    assert dense[idx(0, 0), idx(1, 0)] != 0
    # the masked cell is gone: its former neighbours are not linked through it
    assert dense[idx(2, 2), idx(4, 2)] == 0
    # equivalent to the graph builder without those edges
    adj = grid_adjacency(shape, mask=mask).toarray()
    for (a, b) in walls:
        adj[idx(*a), idx(*b)] = adj[idx(*b), idx(*a)] = 0
    ref = graph_precision(adj, kappa=0.6, alpha=alpha, normalize=False)
    np.testing.assert_allclose(dense, ref.toarray(), rtol=1e-14)


def test_walls_cutting_the_grid_give_independent_components():
    walls = [[r * 4 + 1, r * 4 + 2] for r in range(4)]  # a vertical wall through 4 x 4
    q = grid_precision((4, 4), kappa=0.5, walls=np.array(walls))
    cov = np.linalg.inv(assert_spd(q))
    left, right = [0, 1, 4, 5, 8, 9], [2, 3, 6, 7, 10, 11]
    assert np.abs(cov[np.ix_(left, right)]).max() < 1e-14


def test_knn_adjacency_weights():
    x = np.stack(np.meshgrid(np.arange(8.0), np.arange(8.0), indexing="ij"), -1)
    x = x.reshape(-1, 2) * 0.5
    adj = knn_adjacency(x, 4)
    assert (adj != adj.T).nnz == 0
    # interior point: its 4 axis neighbours at distance 0.5, weight 2D/(k h_i h_j) ~ 1/h^2
    row = adj[[3 * 8 + 3]].toarray().ravel()
    kbar = adj.nnz / 64
    np.testing.assert_allclose(row[row > 0], 4.0 / (kbar * 0.25))
    unit = knn_adjacency(x, 4, weights="unit")
    assert set(np.unique(unit.data)) == {1.0}
    # near-duplicate points do not blow the weights up (local spacing, not 1/d^2)
    y = np.vstack([x, x[:1] + 1e-9])
    near = knn_adjacency(y, 4)
    assert near.max() < 100 * adj.max()


def test_matern_kappa_mapping():
    assert matern_kappa(2.0, alpha=2, dim=2) == pytest.approx(np.sqrt(8) / 2)
    assert matern_kappa(2.0, alpha=1, dim=1) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="nu = alpha - dim/2 > 0, got nu = 0"):
        matern_kappa(2.0, alpha=1, dim=2)
    with pytest.raises(ValueError, match="give kappa"):
        grid_precision((4, 4), length_scale=2.0, alpha=1)


def test_bad_input_raises():
    with pytest.raises(ValueError, match="kappa = 0 is an intrinsic GMRF"):
        grid_precision((4, 4), kappa=0.0)
    with pytest.raises(ValueError, match="kappa: expected a finite positive"):
        grid_precision((4, 4), kappa=-1.0)
    with pytest.raises(ValueError, match="exactly one of kappa and length_scale"):
        grid_precision((4, 4))
    with pytest.raises(ValueError, match="exactly one of kappa and length_scale"):
        grid_precision((4, 4), kappa=1.0, length_scale=2.0)
    with pytest.raises(ValueError, match="alpha: expected 1 or 2, got 3"):
        grid_precision((4, 4), kappa=1.0, alpha=3)
    with pytest.raises(ValueError, match="tau: must be None with normalize=True"):
        grid_precision((4, 4), kappa=1.0, tau=2.0)
    with pytest.raises(ValueError, match="shape: expected a tuple of positive integers"):
        grid_precision((4, 0), kappa=1.0)
    with pytest.raises(ValueError, match=r"mask: expected a boolean array of shape \(4, 4\)"):
        grid_precision((4, 4), kappa=1.0, mask=np.ones((4, 5), dtype=bool))
    with pytest.raises(ValueError, match="mask: no cell is kept"):
        grid_precision((4, 4), kappa=1.0, mask=np.zeros((4, 4), dtype=bool))
    with pytest.raises(ValueError, match="walls: each pair must be neighbouring cells"):
        grid_precision((4, 4), kappa=1.0, walls=np.array([[0, 5]]))
    with pytest.raises(ValueError, match=r"walls: expected shape \(W, 2\)"):
        grid_precision((4, 4), kappa=1.0, walls=np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="spacing: expected a positive number"):
        grid_precision((4, 4), kappa=1.0, spacing=(1.0, -1.0))
    with pytest.raises(ValueError, match="dim: needed with length_scale"):
        graph_precision(np.ones((3, 3)), length_scale=1.0)
    with pytest.raises(ValueError, match="adjacency: expected a symmetric matrix"):
        graph_precision(np.triu(np.ones((3, 3))), kappa=1.0)
    with pytest.raises(ValueError, match="adjacency: edge weights must be non-negative"):
        graph_precision(-np.ones((3, 3)), kappa=1.0)
    with pytest.raises(ValueError, match="adjacency: contains NaN"):
        graph_precision(np.full((3, 3), np.nan), kappa=1.0)
    with pytest.raises(ValueError, match=r"adjacency: expected a square \(C, C\)"):
        graph_precision(np.ones((3, 4)), kappa=1.0)
    with pytest.raises(ValueError, match="coords: contains duplicate points"):
        knn_adjacency(np.zeros((5, 2)), 2)
    with pytest.raises(ValueError, match=r"n_neighbors: expected an integer in \[1, 4\]"):
        knn_adjacency(np.random.default_rng(0).random((5, 2)), 5)


def test_disconnected_graph_and_isolated_vertex():
    adj = sp.block_diag([np.ones((3, 3)) - np.eye(3), np.zeros((1, 1)),
                         np.ones((2, 2)) - np.eye(2)]).tocsr()
    q = graph_precision(adj, kappa=0.8, alpha=2)
    cov = np.linalg.inv(assert_spd(q))
    assert np.abs(cov[:3, 3:]).max() < 1e-14 and np.abs(cov[3, 4:]).max() < 1e-14


def test_lattice_adjacency_is_the_grid_graph_of_occupied_cells():
    from corrpriors.kernels import grid_adjacency, lattice_adjacency

    cells = np.array([(i, j) for i in range(4) for j in range(5)])
    got = lattice_adjacency(cells).toarray()
    want = (grid_adjacency((4, 5)).toarray() > 0).astype(float)
    np.testing.assert_array_equal(got, want)
    # a sparse 4-D lattice (Taxi-like) against brute force on |x - y|_1 == 1
    rng = np.random.default_rng(0)
    pts = np.unique(rng.integers(-2, 3, size=(200, 4)), axis=0)
    rng.shuffle(pts)
    brute = (np.abs(pts[:, None] - pts[None]).sum(-1) == 1).astype(float)
    np.testing.assert_array_equal(lattice_adjacency(pts).toarray(), brute)
    with pytest.raises(ValueError, match="coords: expected integer"):
        lattice_adjacency(np.array([[0.5, 1.0]]))
    with pytest.raises(ValueError, match="coords: expected distinct"):
        lattice_adjacency(np.array([[1, 1], [1, 1]]))


def test_low_rank_sticks_match_the_factorised_psi_step():
    """Sticks observed at a few covariates (Woodbury from the prior's factor) give the psi step
    of the factorised path, and a whole fit the same answer."""
    import scipy.sparse as sp

    from corrpriors import CorrelatedMultinomial
    from corrpriors.core.priors import sparse as sparse_prior
    from corrpriors.kernels import grid_precision

    rng = np.random.default_rng(2)
    q = grid_precision((9, 9), length_scale=3.0)
    counts = np.zeros((81, 4))
    counts[:, 0] = rng.poisson(3.0, 81)                 # stick 0: observed everywhere
    counts[rng.choice(81, 3, replace=False), 1] = 2     # sticks 1-2: at a few states
    counts[rng.choice(81, 5, replace=False), 2] = 1
    fits = []
    for low_rank_max in (0, 8):
        old = sparse_prior.LOW_RANK_MAX
        sparse_prior.LOW_RANK_MAX = low_rank_max
        try:
            fits.append(CorrelatedMultinomial(precision=sp.csr_array(q), learn_scale=True,
                                              tol=1e-12, max_iter=500).fit(counts))
        finally:
            sparse_prior.LOW_RANK_MAX = old
    full, low = fits
    np.testing.assert_allclose(low.psi_mean_, full.psi_mean_, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(low.psi_var_, full.psi_var_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(low.elbo_, full.elbo_, rtol=1e-11)
    np.testing.assert_allclose(low.scale_, full.scale_, rtol=1e-9)


@pytest.mark.parametrize("n_observed", [0, 3])
def test_low_rank_stick_draws_have_the_posterior_moments(n_observed):
    """Draws of a stick observed nowhere (the prior's factor) or at a few covariates
    (Matheron's rule) have the posterior mean and covariance of the dense algebra."""
    from corrpriors.core.priors import SparsePrecisionPrior
    from corrpriors.kernels import grid_precision

    rng = np.random.default_rng(4)
    q = grid_precision((4, 4), length_scale=2.0)
    prior = SparsePrecisionPrior(q)
    c, theta = 16, 0.7
    site = np.zeros((c, 1))
    obs = rng.choice(c, n_observed, replace=False)
    site[obs, 0] = rng.uniform(0.5, 2.0, n_observed)
    center = rng.standard_normal((c, 1))
    pseudo = rng.standard_normal((c, 1))
    n = 40000
    draws = prior.sample_posterior(theta, center, site, n, rng=rng, pseudo=pseudo)[:, :, 0]
    prec = q.toarray() / theta + np.diag(site[:, 0])
    cov = np.linalg.inv(prec)
    mean = cov @ (q.toarray() @ center[:, 0] / theta + site[:, 0] * pseudo[:, 0])
    sd = np.sqrt(np.diag(cov))
    np.testing.assert_array_less(np.abs(draws.mean(axis=0) - mean), 5 * sd / np.sqrt(n))
    emp = np.cov(draws.T)
    np.testing.assert_allclose(emp, cov, atol=6 * np.outer(sd, sd).max() / np.sqrt(n))
