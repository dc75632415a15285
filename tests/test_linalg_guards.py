"""Input guards of corrpriors.linalg: refusals that name the argument instead of wrong numbers."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from corrpriors.linalg import SparseCholesky, jittered_cholesky

A2 = sp.csr_array(np.array([[2.0, 1.0], [1.0, 2.0]]))


# ---------------------------------------------------------------- overflow (finite SPD input)
def test_symmetrising_near_the_float_limit_keeps_the_log_determinant_finite():
    big = np.array([[1.7e308, 1e308], [1e308, 1.7e308]])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        f = SparseCholesky(sp.csr_array(big)).factorize(sp.csr_array(big))
        logdet = f.logdet()
    assert logdet == pytest.approx(np.linalg.slogdet(big)[1], rel=1e-12)


@pytest.mark.parametrize("prepared", [False, True])
def test_scale_that_overflows_is_refused_naming_scale(prepared):
    chol = SparseCholesky(A2)
    a = chol.prepare(A2) if prepared else A2
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(ValueError, match="scale.*overflows"):
            chol.factorize(a, scale=1e308)
        with pytest.raises(ValueError, match="diagonal.*overflows"):
            chol.factorize(a, scale=1e307, diagonal=np.array([1.79e308, 0.0]))
    # large but representable: still accepted, on both paths
    assert np.isfinite(chol.factorize(a, scale=1e300).logdet())


# ---------------------------------------------------------------- complex input and scale
def test_complex_inputs_are_refused_naming_the_argument():
    chol = SparseCholesky(A2)
    with pytest.raises(TypeError, match="^A: .*complex"):
        chol.factorize(A2 + 5j * sp.eye_array(2))
    with pytest.raises(TypeError, match="^A: .*complex"):
        chol.factorize(A2.toarray() + 0j)
    with pytest.raises(TypeError, match="^B: .*complex"):
        chol.factorize(A2).trace_inverse_product(A2 * 1j)
    with pytest.raises(TypeError, match="^diagonal: .*complex"):
        chol.factorize(A2, diagonal=np.array([1j, 1j]))
    f = chol.factorize(A2)
    for method, arg in [(f.solve, "b"), (f.solve_factor, "b"), (f.sample, "z"), (f.matvec, "x")]:
        with pytest.raises(TypeError, match=f"^{arg}: .*complex"):
            method(np.array([1 + 1j, 1j]))


@pytest.mark.parametrize("scale", ["x", np.ones(2), None, True])
def test_bad_scale_names_scale(scale):
    with pytest.raises((TypeError, ValueError), match="^scale: "):
        SparseCholesky(A2).factorize(A2, scale=scale)


# ---------------------------------------------------------------- jittered_cholesky
@pytest.mark.parametrize("matrix, message", [
    (np.array([[2.0, np.nan], [np.nan, 2.0]]), "NaN or infinite"),
    (np.array([[np.inf, 0.0], [0.0, 1.0]]), "NaN or infinite"),
    (np.array([[2.0, 5.0], [0.0, 2.0]]), "symmetric"),
    (np.ones(3), "square"),
    (np.ones((2, 3)), "square"),
])
def test_jittered_cholesky_refuses_what_it_cannot_factorise(matrix, message):
    with pytest.raises(ValueError, match=f"^K: .*{message}"):
        jittered_cholesky(matrix, name="K")


def test_jittered_cholesky_refuses_complex_and_keeps_round_off_asymmetry():
    with pytest.raises(TypeError, match="^K: .*complex"):
        jittered_cholesky(np.eye(2) * (1 + 1j), name="K")
    x = np.random.default_rng(0).standard_normal((6, 4))
    k = x @ x.T + np.eye(6)
    k[0, 1] *= 1 + 1e-14   # round-off of a product is still accepted
    chol, jittered, _ = jittered_cholesky(k)
    np.testing.assert_allclose(chol @ chol.T, jittered, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- user orderings
def symbolic_fill(a: np.ndarray, order: np.ndarray) -> int:
    """Entries of the lower Cholesky factor of a[order][:, order] (elimination graph)."""
    g = a[np.ix_(order, order)] != 0
    n = g.shape[0]
    total = 0
    for k in range(n):
        later = k + 1 + np.flatnonzero(g[k, k + 1:])
        total += 1 + later.size
        g[np.ix_(later, later)] = True
    return total


@pytest.mark.parametrize("given", ["random", "natural"])
def test_user_ordering_is_an_equivalent_order_reported_in_perm(given):
    """A user order is re-sequenced (documented): ``perm`` is what is factorised, with the
    fill of the order given."""
    rng = np.random.default_rng(0)
    n = 30
    m = sp.random_array((n, n), density=0.08, random_state=1)
    m = abs(m) + abs(m).T
    a = sp.csr_array(m + sp.diags_array(np.asarray(m.sum(axis=1)).ravel() + 1.0))
    order = rng.permutation(n) if given == "random" else np.arange(n)
    chol = SparseCholesky(a, ordering=order if given == "random" else "natural")
    f = chol.factorize(a)
    dense = a.toarray()
    lower = f.L.toarray()
    permuted = dense[np.ix_(chol.perm, chol.perm)]
    np.testing.assert_allclose(lower @ lower.T, permuted, rtol=1e-12, atol=1e-12)
    assert np.array_equal(f.perm, chol.perm)
    assert symbolic_fill(dense, chol.perm) == symbolic_fill(dense, order)
    b = rng.standard_normal(n)
    np.testing.assert_allclose(f.solve_factor(b), np.linalg.solve(lower, b[chol.perm]),
                               rtol=1e-10)
    z = rng.standard_normal(n)
    np.testing.assert_allclose(f.sample(z)[chol.perm], np.linalg.solve(lower.T, z), rtol=1e-10)
    assert "re-sequenced" in SparseCholesky.__doc__   # the docstring says so (it did not)


# ---------------------------------------------------------------- memory estimate and refusal
def arrow(n: int) -> sp.csr_array:
    """Hub 0 joined to every other vertex: eliminated first (natural order), a dense factor."""
    rows = np.concatenate([np.zeros(n - 1, int), np.arange(1, n), np.arange(n)])
    cols = np.concatenate([np.arange(1, n), np.zeros(n - 1, int), np.arange(n)])
    vals = np.concatenate([np.full(2 * (n - 1), -1.0 / n), np.full(n, 2.0)])
    return sp.csr_array((vals, (rows, cols)), shape=(n, n))


def test_dense_factor_is_refused_before_the_quadratic_analysis(monkeypatch):
    """C = 20,000 in the natural order: 2 * 10^8 factor entries (1.6 GB). With a 20 MiB budget
    the analysis stops after about 1.3 * 10^6 entries (~70 columns) and refuses naming the
    ordering; it used to run the O(C^2) analysis (15 s at C = 16,000) and then die in numpy."""
    from corrpriors._memory import MemoryEstimateError
    from corrpriors.linalg import _supernodal

    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "20M")
    seen = []
    real = _supernodal.block_structures

    def spy(indptr, indices, bounds, limit=None):
        try:
            return real(indptr, indices, bounds, limit)
        except _supernodal.FactorTooLarge as err:
            seen.append(err.entries)
            raise

    monkeypatch.setattr(_supernodal, "block_structures", spy)
    with pytest.raises(MemoryEstimateError, match=r"ordering 'natural'.*at least .*auto"):
        SparseCholesky(arrow(20_000), ordering="natural")
    assert seen and seen[0] <= 20 * 2**20 / 16 + 20_000   # stopped at the budget
    # the good ordering of the same matrix fits
    assert SparseCholesky(arrow(20_000)).nnz_factor < 10 * 20_000


def test_factor_plus_selected_inverse_over_budget_is_refused(monkeypatch):
    """A 3,000-vertex arrow, natural order: one 3,000 x 3,000 panel (72 MB); the factor and
    selected-inverse buffers (144 MB) fit in 180 MiB, not with the inverse's dense temporary
    (72 MB more): refused after the analysis, before any allocation of that size."""
    from corrpriors._memory import MemoryEstimateError

    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "180M")
    with pytest.raises(MemoryEstimateError, match=r"9,000,000 entries\) and its selected inverse"):
        SparseCholesky(arrow(3000), ordering="natural")
    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "300M")
    assert SparseCholesky(arrow(3000), ordering="natural").memory_bytes <= 300 * 2**20


def grid_laplacian(k: int) -> sp.csr_array:
    t = sp.diags_array([-1.0, 2.0, -1.0], offsets=[-1, 0, 1], shape=(k, k))
    eye = sp.eye_array(k)
    return sp.csr_array(sp.kron(t, eye) + sp.kron(eye, t) + 0.1 * sp.eye_array(k * k))


@pytest.mark.parametrize("case", ["grid", "grid-natural", "arrow", "random"])
def test_memory_estimate_bounds_what_is_allocated(case):
    """Everything numpy allocates (tracemalloc) for the analysis, a factorisation, the
    selected inverse and a draw stays under ``memory_bytes``."""
    import tracemalloc

    if case == "random":
        m = sp.random_array((600, 600), density=0.005, random_state=2)
        a, order = sp.csr_array(m + m.T + 10 * sp.eye_array(600)), "auto"
    else:
        a = arrow(500) if case == "arrow" else grid_laplacian(40)
        order = "auto" if case == "grid" else "natural"
    tracemalloc.start()
    try:
        chol = SparseCholesky(a, ordering=order)
        f = chol.factorize(a, scale=0.5, diagonal=np.ones(a.shape[0]))
        f.inverse_diagonal()
        f.trace_inverse_product(a)
        f.sample(np.ones(a.shape[0]))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= chol.memory_bytes <= 4 * peak
