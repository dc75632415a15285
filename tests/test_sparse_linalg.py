"""Sparse Cholesky and selected inversion (core.sparse_linalg) against dense oracles."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from corrpriors.linalg import _supernodal
from corrpriors.linalg.sparse import CholeskyFactor, NotPositiveDefiniteError, SparseCholesky

ORDERINGS = ["auto", "nested_dissection", "mmd", "rcm", "natural"]


# ---------------------------------------------------------------- matrices and oracles
def random_spd(n: int, density: float, rng: np.random.Generator, shift: float = 0.1
               ) -> sp.csr_array:
    """M M^T + shift I for a random sparse M (random pattern)."""
    m = sp.random_array((n, n), density=density, random_state=rng)
    return sp.csr_array(m @ m.T + shift * sp.eye_array(n))


def path_laplacian(n: int) -> np.ndarray:
    """Graph Laplacian of a path (free ends), singular with the constant null vector."""
    lap = 2.0 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1)
    lap[0, 0] = lap[-1, -1] = 1.0
    return lap


def grid_matern(k: int, kappa2: float = 0.2) -> sp.csr_array:
    """(kappa^2 I + L)^2 on a k x k grid: the 13-point alpha = 2 SPDE precision."""
    t = sp.csr_array(path_laplacian(k))
    eye = sp.eye_array(k)
    m = kappa2 * sp.eye_array(k * k) + sp.kron(t, eye) + sp.kron(eye, t)
    return sp.csr_array(m @ m)


def exact_inverse(a: np.ndarray) -> np.ndarray:
    """Inverse in exact rational arithmetic (Gauss-Jordan on Fractions), rounded once."""
    n = a.shape[0]
    rows = [[Fraction(float(a[i, j])) for j in range(n)]
            + [Fraction(int(i == j)) for j in range(n)] for i in range(n)]
    for c in range(n):
        pivot = rows[c][c]
        rows[c] = [v / pivot for v in rows[c]]
        for r in range(n):
            if r != c and rows[r][c] != 0:
                f = rows[r][c]
                rows[r] = [v - f * w for v, w in zip(rows[r], rows[c])]
    return np.array([[float(rows[i][n + j]) for j in range(n)] for i in range(n)])


def check_against_dense(a: sp.csr_array, f: CholeskyFactor, rng: np.random.Generator,
                        rtol: float = 1e-9) -> None:
    dense = a.toarray()
    inv = np.linalg.inv(dense)
    scale = np.abs(inv).max()
    np.testing.assert_allclose(f.inverse_diagonal(), np.diag(inv), rtol=rtol,
                               atol=rtol * scale)
    sel = f.selected_inverse().toarray()
    on = sel != 0
    assert np.all(on[dense != 0]), "selected inverse pattern must contain A's"
    np.testing.assert_allclose(sel[on], inv[on], rtol=rtol, atol=rtol * scale)
    np.testing.assert_allclose(f.logdet(), np.linalg.slogdet(dense)[1],
                               rtol=rtol, atol=rtol * a.shape[0])
    b = rng.standard_normal((a.shape[0], 3))
    np.testing.assert_allclose(f.solve(b), inv @ b, rtol=rtol, atol=rtol * scale * 10)
    np.testing.assert_allclose(f.solve(b[:, 0]), inv @ b[:, 0], rtol=rtol,
                               atol=rtol * scale * 10)


# ---------------------------------------------------------------- correctness
@pytest.mark.parametrize("ordering", ORDERINGS)
@pytest.mark.parametrize("n, density", [(1, 1.0), (2, 0.5), (7, 0.3), (60, 0.04),
                                        (250, 0.008)])
def test_random_spd_against_dense(n, density, ordering):
    rng = np.random.default_rng(n)
    a = random_spd(n, density, rng)
    f = SparseCholesky(a, ordering=ordering, leaf_size=4).factorize(a)
    check_against_dense(a, f, rng)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 14), density=st.floats(0.0, 0.6), seed=st.integers(0, 2**31),
       leaf=st.integers(1, 6))
def test_property_inverse_on_factor_pattern(n, density, seed, leaf):
    rng = np.random.default_rng(seed)
    a = random_spd(n, density, rng, shift=0.5)
    f = SparseCholesky(a, leaf_size=leaf).factorize(a)
    check_against_dense(a, f, rng)


@pytest.mark.parametrize("ordering", ORDERINGS)
def test_grid_matern_multilevel_dissection(ordering):
    rng = np.random.default_rng(1)
    a = grid_matern(13)
    chol = SparseCholesky(a, ordering=ordering, leaf_size=6)
    f = chol.factorize(a)
    check_against_dense(a, f, rng)
    lower = f.L.toarray()
    np.testing.assert_allclose(lower @ lower.T, a.toarray()[np.ix_(f.perm, f.perm)],
                               atol=1e-11)
    assert np.all(np.triu(lower, 1) == 0)


def test_knn_graph_precision():
    rng = np.random.default_rng(2)
    x = rng.random((300, 2))
    d = ((x[:, None] - x[None]) ** 2).sum(-1)
    nb = np.argsort(d, axis=1)[:, 1:7]
    adj = sp.csr_array((np.ones(nb.size), (np.repeat(np.arange(300), 6), nb.ravel())),
                       shape=(300, 300))
    adj = sp.csr_array(((adj + adj.T) > 0).astype(float))
    lap = sp.diags_array(adj.sum(axis=1)) - adj
    m = sp.csr_array(0.1 * sp.eye_array(300) + lap)
    a = sp.csr_array(m @ m)
    f = SparseCholesky(a, leaf_size=8).factorize(a)
    check_against_dense(a, f, rng)


@pytest.mark.parametrize("ordering", ORDERINGS)
def test_disconnected_components(ordering):
    rng = np.random.default_rng(3)
    blocks = [random_spd(k, 0.5, rng) for k in (1, 3, 1, 9, 2, 30, 1)]
    a = sp.csr_array(sp.block_diag(blocks))
    perm = rng.permutation(a.shape[0])  # interleave the components
    a = sp.csr_array(a[perm][:, perm])
    f = SparseCholesky(a, ordering=ordering, leaf_size=4).factorize(a)
    check_against_dense(a, f, rng)


def test_diagonal_matrix():
    d = np.linspace(0.5, 3.0, 40)
    a = sp.diags_array(d).tocsr()
    f = SparseCholesky(a).factorize(a)
    np.testing.assert_allclose(f.inverse_diagonal(), 1 / d, rtol=1e-15)
    np.testing.assert_allclose(f.logdet(), np.log(d).sum(), rtol=1e-14)


@pytest.mark.parametrize("case", ["alpha1", "alpha2"])
def test_ill_conditioned_against_exact_rational_inverse(case):
    n = 14
    lap = path_laplacian(n)
    a = lap + 1e-10 * np.eye(n) if case == "alpha1" else \
        (lap + 1e-5 * np.eye(n)) @ (lap + 1e-5 * np.eye(n))
    a = 0.5 * (a + a.T)
    cond = np.linalg.cond(a)
    assert cond > 1e10
    exact = exact_inverse(a)
    csr = sp.csr_array(a)
    # normwise forward-error bound of a backward-stable Cholesky: cond * eps
    tol = 10 * cond * np.finfo(float).eps * np.abs(exact).max()
    for ordering in ORDERINGS:
        f = SparseCholesky(csr, ordering=ordering, leaf_size=2).factorize(csr)
        sel = f.selected_inverse().toarray()
        on = sel != 0
        assert np.abs(sel[on] - exact[on]).max() < tol
        assert np.abs(f.inverse_diagonal() - np.diag(exact)).max() < tol
        np.testing.assert_allclose(f.logdet(), np.linalg.slogdet(a)[1], atol=1e-5)


def test_ill_conditioned_grid_against_numpy():
    a = grid_matern(12, kappa2=1e-4)  # condition ~ 1e10
    dense = a.toarray()
    cond = np.linalg.cond(dense)
    assert cond > 1e9
    inv = np.linalg.inv(dense)
    f = SparseCholesky(a, leaf_size=5).factorize(a)
    tol = 20 * cond * np.finfo(float).eps * np.abs(inv).max()
    assert np.abs(f.inverse_diagonal() - np.diag(inv)).max() < tol
    sel = f.selected_inverse().toarray()
    assert np.abs(sel[sel != 0] - inv[sel != 0]).max() < tol


def test_badly_scaled_matrix():
    rng = np.random.default_rng(4)
    s = np.exp(rng.uniform(-6, 6, 80))  # diagonal scaling over 5 orders of magnitude
    a = sp.csr_array(sp.diags_array(s) @ random_spd(80, 0.05, rng) @ sp.diags_array(s))
    f = SparseCholesky(a).factorize(a)
    inv = np.linalg.inv(a.toarray())
    np.testing.assert_allclose(f.inverse_diagonal(), np.diag(inv), rtol=1e-8)
    np.testing.assert_allclose(f.logdet(), np.linalg.slogdet(a.toarray())[1], rtol=1e-12)


# ---------------------------------------------------------------- sampling, traces, reuse
def test_sample_identity_gives_exact_covariance():
    a = grid_matern(7)
    f = SparseCholesky(a, leaf_size=4).factorize(a)
    x = f.sample(np.eye(a.shape[0]))
    np.testing.assert_allclose(x @ x.T, np.linalg.inv(a.toarray()), atol=1e-10)
    z = np.random.default_rng(0).standard_normal(a.shape[0])
    np.testing.assert_allclose(f.sample(z), x @ z, atol=1e-10)
    # the half solve is the adjoint: b^T A^-1 b = |L^-1 P b|^2, and sample(solve_factor(b))
    # = A^-1 b
    b = np.random.default_rng(1).standard_normal((a.shape[0], 2))
    y = f.solve_factor(b)
    np.testing.assert_allclose((y * y).sum(0), np.einsum("ij,ij->j", b, f.solve(b)),
                               rtol=1e-12)
    np.testing.assert_allclose(f.sample(y), f.solve(b), rtol=1e-12, atol=1e-12)


def test_trace_inverse_product():
    rng = np.random.default_rng(5)
    a = grid_matern(8)
    f = SparseCholesky(a, leaf_size=4).factorize(a)
    inv = np.linalg.inv(a.toarray())
    np.testing.assert_allclose(f.trace_inverse_product(a), a.shape[0], rtol=1e-12)
    b = a.copy()
    b.data = rng.standard_normal(b.nnz)  # non-symmetric, on the pattern
    np.testing.assert_allclose(f.trace_inverse_product(b), np.trace(inv @ b.toarray()),
                               rtol=1e-10)
    diag = sp.diags_array(rng.random(a.shape[0])).tocsr()  # pattern strictly inside
    np.testing.assert_allclose(f.trace_inverse_product(diag),
                               np.trace(inv @ diag.toarray()), rtol=1e-12)


def test_matvec():
    rng = np.random.default_rng(6)
    a = random_spd(30, 0.1, rng)
    f = SparseCholesky(a).factorize(a)
    x = rng.standard_normal((30, 2))
    np.testing.assert_allclose(f.matvec(x), a @ x, rtol=1e-13)


def test_one_analysis_many_factorisations(monkeypatch):
    rng = np.random.default_rng(7)
    q = grid_matern(9)
    chol = SparseCholesky(q, leaf_size=5)
    calls = []
    monkeypatch.setattr(_supernodal, "analyse", lambda *a: calls.append(a))
    for _ in range(4):
        theta = rng.uniform(0.1, 10)
        d = rng.uniform(0, 5, q.shape[0]) * (rng.random(q.shape[0]) < 0.5)
        f = chol.factorize(q, scale=1 / theta, diagonal=d)
        assert f.analysis is chol
        dense = q.toarray() / theta + np.diag(d)
        np.testing.assert_allclose(f.inverse_diagonal(), np.diag(np.linalg.inv(dense)),
                                   rtol=1e-10)
        np.testing.assert_allclose(f.logdet(), np.linalg.slogdet(dense)[1], rtol=1e-12)
    assert calls == []  # numeric factorisations never redo the symbolic analysis


def test_values_on_a_subpattern_and_other_formats():
    rng = np.random.default_rng(8)
    q = grid_matern(6)
    chol = SparseCholesky(q)
    d = rng.uniform(1, 2, q.shape[0])
    for a in (sp.diags_array(d).tocsc(), sp.coo_array(sp.diags_array(d)), np.diag(d)):
        np.testing.assert_allclose(chol.factorize(a).inverse_diagonal(), 1 / d, rtol=1e-14)


def test_metis_ordering_if_available():
    pytest.importorskip("pymetis")
    rng = np.random.default_rng(9)
    a = grid_matern(10)
    check_against_dense(a, SparseCholesky(a, ordering="metis").factorize(a), rng)


def test_auto_ordering_keeps_the_cheaper_analysis():
    rng = np.random.default_rng(11)
    side = 40  # grid world with random long-range edges: no small level separators
    lap = sp.csr_array(grid_matern(side, kappa2=0.3))
    tele = rng.integers(0, side * side, size=(40, 2))
    extra = sp.csr_array((np.full(40, -0.01), (tele[:, 0], tele[:, 1])),
                         shape=lap.shape)
    a = sp.csr_array(lap + extra + extra.T + 0.1 * sp.eye_array(side * side))
    flops = {o: SparseCholesky(a, ordering=o).flops for o in ("nested_dissection", "mmd")}
    auto = SparseCholesky(a)
    assert auto.flops == min(flops.values())
    check_against_dense(a, auto.factorize(a), rng)


def test_explicit_permutation_and_fill_reduction():
    a = grid_matern(50)  # the gap widens with C: fill C log C against C^1.5
    nd = SparseCholesky(a, ordering="nested_dissection")
    natural = SparseCholesky(a, ordering="natural")
    assert nd.nnz_factor < 0.7 * natural.nnz_factor
    assert nd.flops < 0.5 * natural.flops
    rng = np.random.default_rng(10)
    perm = rng.permutation(a.shape[0])
    small = grid_matern(5)
    f = SparseCholesky(small, ordering=perm[perm < 25]).factorize(small)
    check_against_dense(small, f, rng)


# ---------------------------------------------------------------- bad input
@pytest.fixture()
def chol():
    return SparseCholesky(grid_matern(4))


def test_indefinite_raises_linalg_error(chol):
    a = grid_matern(4) - 2.0 * sp.eye_array(16)
    with pytest.raises(NotPositiveDefiniteError, match="positive-definite") as err:
        chol.factorize(a)
    assert isinstance(err.value, np.linalg.LinAlgError)
    assert isinstance(err.value, ValueError)
    assert 0 <= err.value.index < 16
    neg = sp.csr_array(grid_matern(4))
    neg[5, 5] = -1.0
    with pytest.raises(NotPositiveDefiniteError):
        chol.factorize(neg, scale=1.0)


def test_bad_values_raise(chol):
    a = grid_matern(4)
    asym = a.copy()
    asym[0, 1] = asym[0, 1] + 1.0
    with pytest.raises(ValueError, match="A: expected a symmetric matrix"):
        chol.factorize(asym)
    nan = a.copy()
    nan.data[3] = np.nan
    with pytest.raises(ValueError, match="A: contains NaN"):
        chol.factorize(nan)
    with pytest.raises(ValueError, match=r"A: expected shape \(C, C\) = \(16, 16\), got \(15, 15\)"):
        chol.factorize(grid_matern(4)[:15, :15])
    outside = a + 0.01 * sp.csr_array(np.ones((16, 16)))
    with pytest.raises(ValueError, match="outside the analysed pattern"):
        chol.factorize(outside)
    with pytest.raises(ValueError, match=r"diagonal: expected shape \(C,\) = \(16,\)"):
        chol.factorize(a, diagonal=np.ones(15))
    with pytest.raises(ValueError, match="diagonal: contains NaN"):
        chol.factorize(a, diagonal=np.full(16, np.nan))
    with pytest.raises(ValueError, match="scale: expected a finite positive"):
        chol.factorize(a, scale=0.0)
    with pytest.raises(TypeError, match="A: expected a scipy.sparse matrix"):
        chol.factorize("not a matrix")


def test_bad_pattern_and_options_raise():
    with pytest.raises(ValueError, match=r"pattern: expected a square \(C, C\) matrix"):
        SparseCholesky(sp.csr_array(np.ones((3, 4))))
    with pytest.raises(ValueError, match="pattern: expected a square"):
        SparseCholesky(np.ones(5))
    with pytest.raises(ValueError, match="C >= 1"):
        SparseCholesky(np.zeros((0, 0)))
    with pytest.raises(ValueError, match="ordering: expected one of"):
        SparseCholesky(np.eye(3), ordering="amd")
    with pytest.raises(ValueError, match="ordering: expected one of .* permutation"):
        SparseCholesky(np.eye(3), ordering=np.array([0, 0, 1]))
    with pytest.raises(ValueError, match="leaf_size: expected a positive integer"):
        SparseCholesky(np.eye(3), leaf_size=0)


def test_bad_right_hand_sides_raise(chol):
    f = chol.factorize(grid_matern(4))
    with pytest.raises(ValueError, match=r"b: expected shape \(C,\) or \(C, m\) with C = 16"):
        f.solve(np.ones(15))
    with pytest.raises(ValueError, match="z: contains NaN"):
        f.sample(np.full(16, np.nan))
    with pytest.raises(ValueError, match="B: has 1 non-zero entries outside"):
        f.trace_inverse_product(sp.csr_array(([1.0], ([0], [15])), shape=(16, 16)))


# ---------------------------------------------------------------- reuse of buffers
@pytest.mark.parametrize("ordering", ["nested_dissection", "mmd"])
def test_prepared_matrix_and_workspace_give_bit_identical_factors(ordering):
    """Analysis once, numbers many times: a prepared matrix factorised into one reused
    workspace gives exactly the factor, inverse, solves and log-determinant of a fresh
    factorisation, whatever was factorised into the workspace before."""
    rng = np.random.default_rng(11)
    q = grid_matern(12)
    chol = SparseCholesky(q, ordering=ordering, leaf_size=8)
    prepared = chol.prepare(q)
    ws = chol.workspace()
    b = rng.standard_normal((q.shape[0], 2))
    for _ in range(4):
        theta = rng.uniform(0.1, 10)
        d = rng.uniform(0, 5, q.shape[0]) * (rng.random(q.shape[0]) < 0.5)
        fresh = chol.factorize(q, scale=1 / theta, diagonal=d)
        chol.factorize(prepared, scale=theta, diagonal=d[::-1].copy(), workspace=ws)  # junk
        reused = chol.factorize(prepared, scale=1 / theta, diagonal=d, workspace=ws)
        assert np.array_equal(reused.L.data, fresh.L.data)
        assert np.array_equal(reused.inverse_diagonal(), fresh.inverse_diagonal())
        assert np.array_equal(reused.solve(b), fresh.solve(b))
        assert np.array_equal(reused.sample(b), fresh.sample(b))
        assert reused.logdet() == fresh.logdet()
        assert reused.trace_inverse_product(q) == fresh.trace_inverse_product(q)
        np.testing.assert_array_equal(reused.matvec(b), fresh.matvec(b))
    # the dense oracle for the last one
    check_against_dense(sp.csr_array(q / theta + sp.diags_array(d)), reused, rng)


def test_stale_factor_of_a_reused_workspace_raises():
    q = grid_matern(5)
    chol = SparseCholesky(q)
    ws = chol.workspace()
    first = chol.factorize(q, workspace=ws)
    first.inverse_diagonal()
    chol.factorize(q, scale=2.0, workspace=ws)
    with pytest.raises(RuntimeError, match="workspace was reused"):
        first.solve(np.ones(q.shape[0]))
    with pytest.raises(ValueError, match="workspace"):
        SparseCholesky(grid_matern(4)).factorize(grid_matern(4), workspace=ws)
    with pytest.raises(ValueError, match="PreparedMatrix of another analysis"):
        SparseCholesky(q).factorize(chol.prepare(q))


def test_prepared_matrix_is_validated_once():
    q = grid_matern(4).tolil()
    q[0, 1] = 5.0   # not symmetric
    chol = SparseCholesky(grid_matern(4))
    with pytest.raises(ValueError, match="symmetric"):
        chol.prepare(q)


def test_unwritten_buffers_are_never_read(monkeypatch):
    """The factorisation's update matrices (upper triangles never computed, syrk with beta = 0
    into an empty buffer) and the selected inverse's fronts (upper right block never written)
    are read on and below their diagonals only: with every ``np.empty`` inside the kernels
    filled with NaN the results are unchanged, bit for bit."""
    a = grid_matern(11)
    chol = SparseCholesky(a, leaf_size=4)
    sym = chol._symbolic
    assert any(len(c) for c in sym.children)       # fronts and extend-adds are exercised
    lower = chol.prepare(a).lower
    clean = lower.copy()
    _supernodal.factorize(sym, clean)
    sigma = _supernodal.selected_inverse(sym, clean)

    real_empty = np.empty

    def nan_empty(shape, *args, **kwargs):
        out = real_empty(shape, *args, **kwargs)
        out.fill(np.nan)
        return out

    monkeypatch.setattr(_supernodal.np, "empty", nan_empty)
    dirty = lower.copy()
    _supernodal.factorize(sym, dirty)
    dirty_sigma = _supernodal.selected_inverse(sym, dirty)
    monkeypatch.undo()
    np.testing.assert_array_equal(dirty, clean)
    np.testing.assert_array_equal(dirty_sigma, sigma)
    check_against_dense(a, chol.factorize(a), np.random.default_rng(0))
