r"""Exact sparse Cholesky factorisation and selected inversion of SPD matrices.

For a symmetric positive-definite ``scipy.sparse`` matrix :math:`A` (C x C) with a fixed
sparsity pattern, :class:`SparseCholesky` computes a fill-reducing ordering :math:`P` and
the symbolic factorisation **once**; :meth:`SparseCholesky.factorize` then factorises any
matrix on that pattern, :math:`P A P^T = L L^T`, and the :class:`CholeskyFactor` gives
solves, :math:`\log\det A`, draws with covariance :math:`A^{-1}` and, by selected inversion
(Takahashi recursions), the **exact** entries of :math:`A^{-1}` on the pattern of
:math:`L + L^T` -- in particular its diagonal (marginal variances of a Gaussian with
precision :math:`A`) and :math:`\operatorname{tr}(A^{-1} B)` for any :math:`B` on the pattern.

This is what a Gaussian Markov random field prior needs in the Polya-Gamma CAVI: the
posterior precision of stick ``k`` is :math:`Q/\theta + \operatorname{diag}(d_k)`, the same
pattern for every stick and iteration, so one analysis serves a whole fit.

The implementation is a supernodal multifrontal Cholesky with dense LAPACK kernels on the
fronts and the supernodal selected inversion of Lin et al. (2011), in numpy/scipy only (no
compiled extension), ordered by nested dissection (or minimum degree, whichever is
cheaper). BLAS runs single-threaded inside (``corrpriors._threads.blas_threads``): the fronts
are small to medium, and two OpenBLAS threads on a shared machine made the factorisation
5x and the selected inversion 30x slower in CPU time (measured, C = 40,000). On a 2-D grid the cost grows about as
:math:`C^{1.5}` (fill :math:`O(C \log C)`), against :math:`C^3` for dense algebra; see
``benchmarks/README.md`` ("Sparse Cholesky and selected inversion") for measurements.

Use in the Polya-Gamma CAVI (prior :math:`\Sigma = \theta Q^{-1}`, stick ``k`` with
:math:`d_k = E[\omega_k]`, zero off the observed set)::

    chol = SparseCholesky(Q)                          # once per pattern
    prior = chol.factorize(Q)                         # log det Q; prior draws
    f = chol.factorize(Q, scale=1 / theta, diagonal=d_k)   # P_k = Q / theta + diag(d_k)
    lam = f.solve(kappa_k + Q @ mu_k / theta)         # posterior mean
    var = f.inverse_diagonal()                        # V_k,ii exactly (any subset: index it)
    logdet_V = -f.logdet()
    tr_QV = f.trace_inverse_product(Q)                # EM: theta = (tr(Q V) + r'Q r) / C
    psi = lam[:, None] + f.sample(z)                  # z ~ N(0, I) of shape (C, M)
    prior_draw = np.sqrt(theta) * prior.sample(z)     # ~ N(0, theta Q^-1)

The selected inverse is computed once per factor (on the first of ``inverse_diagonal``,
``selected_inverse``, ``trace_inverse_product``) and cached; it costs about one more
factorisation.

References
----------
Takahashi, Fagan & Chen (1973), Formation of a sparse bus impedance matrix and its
application to short circuit study. Liu (1992), The multifrontal method for sparse matrix
solution: theory and practice, SIAM Review 34. Lin, Yang, Meza, Lu, Ying & E (2011), SelInv
-- an algorithm for selected inversion of a sparse symmetric matrix, ACM TOMS 37.
Rue & Held (2005), Gaussian Markov Random Fields, ch. 2.4 and 2.6.

Examples
--------
>>> import numpy as np, scipy.sparse as sp
>>> from corrpriors.linalg.sparse import SparseCholesky
>>> Q = sp.diags_array([-1.0, 2.5, -1.0], offsets=[-1, 0, 1], shape=(5, 5)).tocsr()
>>> chol = SparseCholesky(Q)
>>> f = chol.factorize(Q, diagonal=np.ones(5))          # Q + I
>>> bool(np.allclose(f.inverse_diagonal(), np.diag(np.linalg.inv(Q.toarray() + np.eye(5)))))
True
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._memory import MemoryEstimateError, check_memory, memory_budget
from .._threads import blas_threads
from .._validation import SYMMETRY_RTOL, as_real_array, check_real
from . import _supernodal
from ._ordering import ORDERINGS, fill_reducing_ordering

__all__ = ["CholeskyFactor", "FactorWorkspace", "NotPositiveDefiniteError", "PreparedMatrix",
           "SparseCholesky", "analysis_for"]


class NotPositiveDefiniteError(np.linalg.LinAlgError):
    """The matrix given to :meth:`SparseCholesky.factorize` is not positive definite.

    A subclass of ``numpy.linalg.LinAlgError`` (hence of ``ValueError``).

    Attributes
    ----------
    index : int
        Row/column of the original matrix at which the factorisation broke down.
    """

    def __init__(self, message: str, index: int):
        super().__init__(message)
        self.index = index


def _canonical_structure(pattern: Any, name: str) -> sp.csr_array:
    """Structure of ``pattern + pattern^T + I`` as a sorted CSR array (values 1)."""
    if not sp.issparse(pattern):
        try:
            pattern = np.asarray(pattern, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"{name}: expected a scipy.sparse matrix or a numeric (C, C) "
                            f"array, got {type(pattern).__name__}") from None
    if pattern.ndim != 2 or pattern.shape[0] != pattern.shape[1]:
        raise ValueError(f"{name}: expected a square (C, C) matrix, got shape "
                         f"{tuple(pattern.shape)}")
    n = pattern.shape[0]
    if n == 0:
        raise ValueError(f"{name}: expected a square (C, C) matrix with C >= 1, got (0, 0)")
    coo = sp.coo_array(pattern)
    if not sp.issparse(pattern):
        keep = coo.data != 0
        coo = sp.coo_array((coo.data[keep], (coo.row[keep], coo.col[keep])), shape=(n, n))
    diag = np.arange(n)
    rows = np.concatenate([coo.row, coo.col, diag]).astype(np.int64)
    cols = np.concatenate([coo.col, coo.row, diag]).astype(np.int64)
    s = sp.csr_array((np.ones(rows.size), (rows, cols)), shape=(n, n))
    s.sum_duplicates()
    s.data[:] = 1.0
    return s


def _real_matrix(A: Any, name: str) -> Any:
    """A sparse matrix or a float64 array of real numbers (TypeError naming ``name`` for
    complex or non-numeric input: the imaginary part is never dropped).
    """
    if sp.issparse(A):
        A = sp.csr_array(A)   # (``.data`` of a LIL matrix holds lists)
        as_real_array(A.data, name)
        return A
    if isinstance(A, (str, bytes)):
        raise TypeError(f"{name}: expected a scipy.sparse matrix or a numeric (C, C) array, "
                        f"got {type(A).__name__}")
    return as_real_array(A, name).astype(np.float64)


def _check_finite_sum(values: np.ndarray, scale: float) -> None:
    """Refuse ``scale * A + diag(diagonal)`` when it overflowed (``A`` and ``diagonal`` are
    finite, so only their sum or product can be infinite).
    """
    if not np.all(np.isfinite(values)):
        raise ValueError(f"scale, A, diagonal: scale * A + diag(diagonal) overflows float64 "
                         f"(scale = {scale:.3g}); rescale A or scale")


def _advice(ordering: Any) -> str:
    """What to do instead of a factor too large for memory."""
    if isinstance(ordering, str) and ordering == "auto":
        return "use a smaller or sparser precision (fewer states or long-range neighbours)"
    return ("use a fill-reducing ordering (ordering='auto', the default) or a smaller or "
            "sparser precision")


class SparseCholesky:
    """Ordering and symbolic factorisation of a symmetric sparsity pattern, done once.

    Parameters
    ----------
    pattern : scipy.sparse matrix or ndarray of shape (C, C)
        Its stored entries (any value) define the pattern; the analysed pattern is that of
        ``pattern + pattern^T`` plus the full diagonal.
    ordering : {"auto", "nested_dissection", "metis", "mmd", "rcm", "natural"} or ndarray of shape (C,)
        Fill-reducing ordering. ``"auto"`` (default) analyses both ``"nested_dissection"``
        (the package's own, breadth-first level separators: best on grids and meshes) and
        ``"mmd"`` (SuperLU's multiple minimum degree: far better on graphs without small
        level separators, e.g. grid worlds with random long-range transitions) and keeps
        the one with fewer factorisation flops, at twice the analysis time. ``"metis"`` uses
        METIS through the optional package ``pymetis``; ``"rcm"`` reverse Cuthill-McKee (a
        banded factor); ``"natural"`` the identity; an array of shape (C,) is a user
        elimination order. A column ordering (``"rcm"``, ``"natural"``, an array) is
        re-sequenced into an equivalent elimination order with the same fill (a topological
        order of its elimination tree that makes the supernodes contiguous), so ``perm`` is
        in general *not* the order given: it is the order actually factorised,
        ``L L^T = A[perm][:, perm]``.
    leaf_size : int, default=64
        Nested dissection stops at sub-graphs of this many vertices (dense leaf blocks).

    Attributes
    ----------
    n : int
        Order C.
    perm : ndarray of shape (C,)
        Elimination order actually factorised, ``L L^T = A[perm][:, perm]`` (for a column
        ordering, an equivalent re-sequencing of it: see ``ordering``).
    nnz_pattern : int
        Stored entries of the analysed (symmetric) pattern.
    nnz_factor : int
        Entries of the lower triangle of the supernodal factor (explicit zeros included).
    n_supernodes : int
    flops : float
        Floating-point operations of one numeric factorisation.
    memory_bytes : float
        Upper bound of the bytes one factorisation and its selected inverse allocate (with
        the analysis' maps); compared with the process's memory budget
        (``corrpriors._memory.memory_budget``) before anything of that size is allocated.

    Raises
    ------
    corrpriors._memory.MemoryEstimateError
        The factor in this ordering (with its selected inverse) would not fit in memory. The
        symbolic analysis stops as soon as the factor alone exceeds the budget, so a hopeless
        ordering (a dense factor of a large sparse matrix) is refused quickly.

    Notes
    -----
    :meth:`factorize` accepts any symmetric matrix whose non-zeros lie in the analysed
    pattern, so one analysis serves ``Q / theta + diag(d)`` for every stick, iteration
    and ``theta`` (``factorize(Q, scale=1 / theta, diagonal=d)``).
    """

    def __init__(self, pattern: Any, *, ordering: str | np.ndarray = "auto",
                 leaf_size: int = 64):
        structure = _canonical_structure(pattern, "pattern")
        n = structure.shape[0]
        if isinstance(leaf_size, (bool, np.bool_)) or not isinstance(leaf_size, (int, np.integer)) \
                or leaf_size < 1:
            raise ValueError(f"leaf_size: expected a positive integer, got {leaf_size!r}")
        self.n = n
        self._indptr = structure.indptr.astype(np.int64)
        self._indices = structure.indices.astype(np.int64)
        rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(self._indptr))
        cols = self._indices
        self._keys = rows * n + cols
        self._transpose = np.searchsorted(self._keys, cols * n + rows)
        self._diag = np.searchsorted(self._keys, np.arange(n, dtype=np.int64) * (n + 1))
        if isinstance(ordering, str) and ordering not in ("auto",) + ORDERINGS:
            raise ValueError(f"ordering: expected one of {('auto',) + ORDERINGS} or a "
                             f"permutation array, got {ordering!r}")
        self.perm, self._lower, sym, prow, pcol, self.memory_bytes = \
            self._choose(structure, ordering, int(leaf_size))
        check_memory(self.memory_bytes, self._what(ordering, f"the Cholesky factor "
                     f"({sym.size:,} entries) and its selected inverse"), _advice(ordering))
        self._symbolic = _supernodal.with_maps(sym)
        self._position = _supernodal.positions(self._symbolic, np.maximum(prow, pcol),
                                               np.minimum(prow, pcol))
        self._lower_slots: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def _choose(self, structure: sp.csr_array, ordering: Any, leaf_size: int) -> tuple:
        """The analysis of ``ordering`` (for ``"auto"``, of the candidate with fewer flops
        among those that fit): (perm, lower, symbolic, prow, pcol, memory_bytes).

        An analysis is stopped as soon as the factor and selected-inverse buffers alone (8
        bytes per factor entry each, part of ``memory_bytes``) exceed the memory budget: the
        symbolic work grows with the factor (O(C^2) for a dense one). If every candidate
        stops, :class:`~corrpriors._memory.MemoryEstimateError`.
        """
        auto = isinstance(ordering, str) and ordering == "auto"
        budget = float(memory_budget()[0])
        candidates, stopped = [], []
        for name in ("nested_dissection", "mmd") if auto else (ordering,):
            try:
                found = self._analyse(structure, name, leaf_size, budget / 16.0)
            except _supernodal.FactorTooLarge as err:
                stopped.append(int(err.entries))
                continue
            candidates.append(found + (_supernodal.memory_bytes(found[2], self.nnz_pattern),))
        if not candidates:
            what = self._what(ordering, f"the Cholesky factor and its selected inverse (at "
                              f"least {min(stopped):,} entries each: the symbolic analysis "
                              "stopped there)")
            check_memory(16.0 * min(stopped), what, _advice(ordering))
            raise MemoryEstimateError(what)   # (check_memory raised: 16 * entries > budget)
        return min(candidates, key=lambda c: (c[5] > budget, c[2].flops()))

    def _what(self, ordering: Any, thing: str) -> str:
        name = repr(ordering) if isinstance(ordering, str) else "given as an array"
        return f"SparseCholesky (C = {self.n:,}, ordering {name}): {thing}"

    def _analyse(self, structure: sp.csr_array, ordering: Any, leaf_size: int,
                 limit: float) -> tuple:
        """Ordering, then symbolic factorisation without the maps: (perm, lower, symbolic,
        prow, pcol); :class:`_supernodal.FactorTooLarge` past ``limit`` factor entries.
        """
        perm, bounds = self._ordering(structure, ordering, leaf_size)
        if bounds is None:  # a column ordering: find its supernodes, made contiguous
            indptr, lo_rows = self._permuted_lower(perm)[:2]
            order, bounds = _supernodal.relaxed_supernodes(indptr, lo_rows, limit)
            perm = perm[order]
        indptr, lo_rows, prow, pcol, lower = self._permuted_lower(perm)
        symbolic = _supernodal.analyse(indptr, lo_rows, bounds, limit=limit, maps=False)
        return perm, lower, symbolic, prow, pcol

    def _permuted_lower(self, perm: np.ndarray) -> tuple[np.ndarray, ...]:
        """Permuted pattern: lower-triangle CSC (indptr, rows), every entry's permuted row
        and column, and which entries are in the lower triangle.
        """
        n = self.n
        iperm = np.empty(n, dtype=np.int64)
        iperm[perm] = np.arange(n)
        rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(self._indptr))
        prow, pcol = iperm[rows], iperm[self._indices]
        lower = np.flatnonzero(prow >= pcol)
        lo_r, lo_c = prow[lower], pcol[lower]
        order = np.lexsort((lo_r, lo_c))
        indptr = np.concatenate([[0], np.cumsum(np.bincount(lo_c, minlength=n))])
        return indptr, lo_r[order], prow, pcol, lower

    @staticmethod
    def _ordering(structure: sp.csr_array, ordering: Any, leaf_size: int
                  ) -> tuple[np.ndarray, np.ndarray | None]:
        n = structure.shape[0]
        if isinstance(ordering, str):
            graph = sp.csr_array(structure - sp.eye_array(n, format="csr"))
            graph.eliminate_zeros()
            return fill_reducing_ordering(graph, ordering, leaf_size=leaf_size)
        perm = np.asarray(ordering)
        if perm.shape != (n,) or not np.issubdtype(perm.dtype, np.integer) \
                or not np.array_equal(np.sort(perm), np.arange(n)):
            raise ValueError(f"ordering: expected one of {('auto',) + ORDERINGS} or a "
                             f"permutation of 0..{n - 1} of shape (C,) = ({n},), got "
                             f"{type(ordering).__name__} of shape {np.shape(ordering)}")
        return perm.astype(np.int64), None

    @property
    def nnz_pattern(self) -> int:
        """Stored entries of the analysed pattern."""
        return int(self._keys.size)

    @property
    def nnz_factor(self) -> int:
        """Lower-triangle entries of the supernodal factor (explicit zeros included)."""
        w = np.diff(self._symbolic.bounds)
        r = np.array([s.size for s in self._symbolic.struct])
        return int(np.sum(w * (w + 1) // 2 + w * r))

    @property
    def n_supernodes(self) -> int:
        """Number of supernodes (dense column blocks)."""
        return self._symbolic.n_blocks

    @property
    def flops(self) -> float:
        """Floating-point operations of one numeric factorisation."""
        return self._symbolic.flops()

    def values(self, A: Any, name: str = "A", *, symmetric: bool = True) -> np.ndarray:
        """Entries of ``A`` aligned with the analysed pattern (validated).

        Parameters
        ----------
        A : scipy.sparse matrix or ndarray of shape (C, C)
        name : str
            Argument name used in error messages.
        symmetric : bool, default=True
            Require ``A`` symmetric (to ``SYMMETRY_RTOL``) and return its symmetric part.

        Returns
        -------
        ndarray of shape (nnz_pattern,)

        Raises
        ------
        ValueError
            Wrong shape, NaN/inf, a non-zero outside the pattern, or not symmetric.
        """
        n = self.n
        A = _real_matrix(A, name)
        if A.ndim != 2 or A.shape != (n, n):
            raise ValueError(f"{name}: expected shape (C, C) = ({n}, {n}), got "
                             f"{tuple(A.shape)}")
        csr = sp.csr_array(A, dtype=np.float64, copy=True)
        csr.sum_duplicates()
        if not np.all(np.isfinite(csr.data)):
            raise ValueError(f"{name}: contains NaN or infinite values")
        if csr.nnz == self._keys.size and np.array_equal(csr.indptr, self._indptr) \
                and np.array_equal(csr.indices, self._indices):
            vals = csr.data
        else:
            vals = self._scatter(csr, name)
        if not symmetric:
            return vals
        vt = vals[self._transpose]
        big = float(np.max(np.abs(vals))) if vals.size else 0.0
        gap = float(np.max(np.abs(vals - vt))) if vals.size else 0.0
        if gap > SYMMETRY_RTOL * big:
            raise ValueError(f"{name}: expected a symmetric matrix, got max |A - A^T| = "
                             f"{gap:.3g} (max |A| = {big:.3g})")
        return 0.5 * vals + 0.5 * vt   # (vals + vt) could overflow

    def _scatter(self, csr: sp.csr_array, name: str) -> np.ndarray:
        n = self.n
        rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(csr.indptr))
        keys = rows * n + csr.indices
        pos = np.minimum(np.searchsorted(self._keys, keys), self._keys.size - 1)
        inside = self._keys[pos] == keys
        stray = ~inside & (csr.data != 0)
        if stray.any():
            k = int(np.flatnonzero(stray)[0])
            raise ValueError(f"{name}: has {int(stray.sum())} non-zero entries outside the "
                             f"analysed pattern, e.g. ({rows[k]}, {csr.indices[k]}); build "
                             "the SparseCholesky from a pattern that contains them")
        vals = np.zeros(self._keys.size)
        vals[pos[inside]] = csr.data[inside]
        return vals

    def prepare(self, A: Any, name: str = "A") -> PreparedMatrix:
        """Validate ``A`` once and lay it out for repeated factorisations.

        ``factorize(prepared, scale=..., diagonal=...)`` then skips the validation and the
        scatter into the factor's layout: it scales a copy of the prepared lower triangle and
        adds the diagonal (the same numbers as ``factorize(A, ...)``, bit for bit).

        Parameters
        ----------
        A : scipy.sparse matrix or ndarray of shape (C, C)
            Symmetric, finite, non-zeros within the analysed pattern.
        name : str
            Argument name used in error messages.

        Returns
        -------
        PreparedMatrix
        """
        vals = self.values(A, name)
        lower = np.zeros(self._symbolic.size)
        lower[self._position[self._lower]] = vals[self._lower]
        vals.setflags(write=False)
        lower.setflags(write=False)
        return PreparedMatrix(self, vals, lower)

    def workspace(self) -> FactorWorkspace:
        """Factor and selected-inverse buffers to reuse across factorisations.

        A factor computed into a workspace (``factorize(..., workspace=ws)``) is valid until
        the next factorisation into the same workspace; using it afterwards raises.
        Workspaces are not thread-safe: give every thread its own.
        """
        return FactorWorkspace(self._symbolic.size)

    def factorize(self, A: Any, *, scale: float = 1.0, diagonal: Any = None,
                  workspace: FactorWorkspace | None = None) -> CholeskyFactor:
        """Numeric factorisation of ``scale * A + diag(diagonal)`` on the analysed pattern.

        Parameters
        ----------
        A : scipy.sparse matrix, ndarray of shape (C, C) or PreparedMatrix
            Symmetric, finite, non-zeros within the analysed pattern; a matrix from
            :meth:`prepare` is not validated again.
        scale : float, default=1.0
            Positive multiplier of ``A`` (e.g. ``1 / theta``).
        diagonal : ndarray of shape (C,), optional
            Added to the diagonal (e.g. the Polya-Gamma expectations ``E[omega]``).
        workspace : FactorWorkspace, optional
            Buffers (from :meth:`workspace`) to factorise into instead of fresh ones; the
            factor previously computed there becomes invalid.

        Returns
        -------
        CholeskyFactor

        Raises
        ------
        NotPositiveDefiniteError
            The matrix is not (numerically) positive definite.
        ValueError
            Bad shape, non-finite values, not symmetric, or outside the pattern.
        """
        scale = check_real(scale, "scale", 0.0, np.inf, closed="neither",
                           expected="a finite positive number")
        d = None
        if diagonal is not None:
            d = as_real_array(diagonal, "diagonal").astype(np.float64)
            if d.shape != (self.n,):
                raise ValueError(f"diagonal: expected shape (C,) = ({self.n},), got "
                                 f"{d.shape}")
            if not np.all(np.isfinite(d)):
                raise ValueError("diagonal: contains NaN or infinite values")
        if workspace is not None and (not isinstance(workspace, FactorWorkspace)
                                      or workspace.factor.size != self._symbolic.size):
            raise ValueError("workspace: expected a FactorWorkspace of this analysis "
                             "(SparseCholesky.workspace())")
        prepared = A if isinstance(A, PreparedMatrix) else None
        if prepared is not None and prepared.analysis is not self:
            raise ValueError("A: a PreparedMatrix of another analysis")
        values: Any
        if prepared is None:
            buffer, values = self._load(A, scale, d, workspace)
        else:
            buffer, values = self._load_prepared(prepared, scale, d, workspace)
        return self._factorize_buffer(buffer, values, workspace)

    def _load(self, A: Any, scale: float, d: np.ndarray | None,
              workspace: FactorWorkspace | None) -> tuple[np.ndarray, np.ndarray]:
        """Validate ``A``; the factor buffer holding the lower triangle of ``scale * A +
        diag(d)``, and that matrix's values on the pattern.
        """
        vals = self.values(A, "A")
        with np.errstate(over="ignore"):
            vals = vals * scale if scale != 1.0 else vals.copy()
            if d is not None:
                vals[self._diag] += d
        _check_finite_sum(vals, scale)
        buffer = np.zeros(self._symbolic.size) if workspace is None \
            else workspace.acquire(zero=True)
        buffer[self._position[self._lower]] = vals[self._lower]
        return buffer, vals

    def _load_prepared(self, prepared: PreparedMatrix, scale: float, d: np.ndarray | None,
                       workspace: FactorWorkspace | None) -> tuple[np.ndarray, tuple]:
        """The factor buffer of ``scale * prepared + diag(d)`` (no validation, no scatter)."""
        buffer = np.empty(self._symbolic.size) if workspace is None \
            else workspace.acquire(zero=False)
        with np.errstate(over="ignore"):
            if scale != 1.0:
                np.multiply(prepared.lower, scale, out=buffer)
            else:
                buffer[:] = prepared.lower
            if d is not None:
                buffer[self._symbolic.diag] += d[self.perm]
        bound = scale * prepared.max_abs + (float(np.max(np.abs(d))) if d is not None else 0.0)
        if not np.isfinite(bound):   # only then look at every entry
            _check_finite_sum(buffer, scale)
        return buffer, (prepared, scale, d)

    def _factorize_buffer(self, buffer: np.ndarray, values: Any,
                          workspace: FactorWorkspace | None) -> CholeskyFactor:
        try:
            with blas_threads(1):
                _supernodal.factorize(self._symbolic, buffer)
        except _supernodal.NotPositiveDefinite as err:
            index = int(self.perm[err.column])
            raise NotPositiveDefiniteError(
                f"A: expected a positive-definite matrix, but the Cholesky factorisation "
                f"broke down at row/column {index} (pivot {err.column + 1} of {self.n} in "
                "elimination order)", index) from None
        return CholeskyFactor(self, buffer, values, workspace)

    def lower_slots(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rows, columns (elimination order) and buffer positions of the factor's slots."""
        if self._lower_slots is None:
            rows, cols, pos = _supernodal.lower_entries(self._symbolic)
            self._lower_slots = (rows, cols, pos)
        return self._lower_slots


class CholeskyFactor:
    r"""Numeric Cholesky factor :math:`P A P^T = L L^T` from :meth:`SparseCholesky.factorize`.

    Attributes
    ----------
    analysis : SparseCholesky
        The shared symbolic analysis.
    n : int
        Order C.
    perm : ndarray of shape (C,)
        Elimination order :math:`P` actually factorised (``A[perm][:, perm] = L L^T``),
        ``SparseCholesky.perm``: for a user ordering an equivalent re-sequencing of it.
    """

    def __init__(self, analysis: SparseCholesky, factor: np.ndarray, values: Any,
                 workspace: FactorWorkspace | None = None):
        self.analysis = analysis
        self.n = analysis.n
        self.perm = analysis.perm
        self._buffer = factor
        self._values_spec = values
        self._sigma_buffer: np.ndarray | None = None
        self._matrix: sp.csr_array | None = None
        self._workspace = workspace
        self._generation = None if workspace is None else workspace.generation

    @property
    def _factor(self) -> np.ndarray:
        """The factor's buffer (checked to be still this factor's when in a workspace)."""
        ws = self._workspace
        if ws is not None and ws.generation != self._generation:
            raise RuntimeError("CholeskyFactor: its workspace was reused by a later "
                               "factorisation; this factor is no longer valid")
        return self._buffer

    @property
    def _values(self) -> np.ndarray:
        """Entries of the factorised matrix aligned with the analysed pattern."""
        spec = self._values_spec
        if isinstance(spec, tuple):   # (prepared, scale, diagonal): built on first use
            prepared, scale, d = spec
            vals = prepared.values * scale if scale != 1.0 else prepared.values.copy()
            if d is not None:
                vals[self.analysis._diag] += d
            self._values_spec = spec = vals
        return spec

    def _rhs(self, b: Any, name: str) -> tuple[np.ndarray, bool]:
        arr = as_real_array(b, name).astype(np.float64, copy=False)
        if arr.ndim not in (1, 2) or arr.shape[0] != self.n:
            raise ValueError(f"{name}: expected shape (C,) or (C, m) with C = {self.n}, got "
                             f"{arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name}: contains NaN or infinite values")
        return arr, arr.ndim == 1

    def _unpermute(self, x: np.ndarray, vector: bool) -> np.ndarray:
        out = np.empty_like(x)
        out[self.perm] = x
        return out[:, 0] if vector else out

    def _forward(self, b: Any) -> tuple[np.ndarray, bool]:
        """``L^-1 P b`` as a (C, m) array in elimination order, and whether b was 1-D."""
        arr, vector = self._rhs(b, "b")
        x = np.ascontiguousarray(arr.reshape(self.n, -1)[self.perm])
        with blas_threads(1):
            _supernodal.solve_lower(self.analysis._symbolic, self._factor, x)
        return x, vector

    def solve(self, b: Any) -> np.ndarray:
        """Solve ``A x = b``.

        Parameters
        ----------
        b : ndarray of shape (C,) or (C, m)

        Returns
        -------
        ndarray of the shape of ``b``
        """
        x, vector = self._forward(b)
        with blas_threads(1):
            _supernodal.solve_upper(self.analysis._symbolic, self._factor, x)
        return self._unpermute(x, vector)

    def solve_factor(self, b: Any) -> np.ndarray:
        r"""Half solve :math:`y = L^{-1} P b`, so that :math:`b^T A^{-1} b = \|y\|^2`.

        The adjoint of :meth:`sample`; the result is in elimination order, ``y = L^-1 b[perm]``
        with ``perm`` = :attr:`perm` (not necessarily the order given to
        :class:`SparseCholesky`).

        Parameters
        ----------
        b : ndarray of shape (C,) or (C, m)

        Returns
        -------
        ndarray of the shape of ``b``
        """
        x, vector = self._forward(b)
        return x[:, 0] if vector else x

    def sample(self, z: Any) -> np.ndarray:
        r"""Map standard normal ``z`` to draws with covariance :math:`A^{-1}`.

        Returns :math:`x = P^T L^{-T} z` (``x[perm] = L^-T z`` with ``perm`` =
        :attr:`perm`, :math:`P` its permutation matrix), so :math:`\operatorname{Cov}(x) = A^{-1}` when the
        columns of ``z`` are independent standard normal vectors (with ``z`` the identity,
        ``x x^T = A^{-1}`` exactly).

        Parameters
        ----------
        z : ndarray of shape (C,) or (C, m)

        Returns
        -------
        ndarray of the shape of ``z``
        """
        arr, vector = self._rhs(z, "z")
        x = np.array(arr.reshape(self.n, -1), dtype=np.float64, order="C", copy=True)
        with blas_threads(1):
            _supernodal.solve_upper(self.analysis._symbolic, self._factor, x)
        return self._unpermute(x, vector)

    def logdet(self) -> float:
        """Natural logarithm of ``det(A)``."""
        return float(2.0 * np.sum(np.log(self._factor[self.analysis._symbolic.diag])))

    def matvec(self, x: Any) -> np.ndarray:
        """``A @ x`` for ``x`` of shape (C,) or (C, m) (the factorised matrix)."""
        arr, _ = self._rhs(x, "x")
        if self._matrix is None:
            a = self.analysis
            self._matrix = sp.csr_array((self._values, a._indices, a._indptr),
                                        shape=(self.n, self.n))
        return self._matrix @ arr

    def _selected(self) -> np.ndarray:
        factor = self._factor   # (checks the workspace first)
        if self._sigma_buffer is None:
            out = None if self._workspace is None else self._workspace.sigma
            with blas_threads(1):
                self._sigma_buffer = _supernodal.selected_inverse(self.analysis._symbolic,
                                                                  factor, out)
        return self._sigma_buffer

    def inverse_diagonal(self) -> np.ndarray:
        r"""Exact diagonal of :math:`A^{-1}` (marginal variances), by selected inversion.

        Returns
        -------
        ndarray of shape (C,)
        """
        out = np.empty(self.n)
        out[self.perm] = self._selected()[self.analysis._symbolic.diag]
        return out

    def selected_inverse(self) -> sp.csr_array:
        r"""Exact entries of :math:`A^{-1}` on the pattern of the factor :math:`L + L^T`.

        The pattern (of the supernodal factor, original ordering) contains that of ``A``;
        entries of :math:`A^{-1}` outside it are not computed (they are not zero).

        Returns
        -------
        scipy.sparse.csr_array of shape (C, C)
        """
        rows, cols, pos = self.analysis.lower_slots()
        vals = self._selected()[pos]
        r, c = self.perm[rows], self.perm[cols]
        off = rows != cols
        out = sp.csr_array((np.concatenate([vals, vals[off]]),
                            (np.concatenate([r, c[off]]), np.concatenate([c, r[off]]))),
                           shape=(self.n, self.n))
        out.sort_indices()
        return out

    def trace_inverse_product(self, B: Any) -> float:
        r""":math:`\operatorname{tr}(A^{-1} B)` for ``B`` on the analysed pattern, exactly.

        Parameters
        ----------
        B : scipy.sparse matrix or ndarray of shape (C, C)
            Non-zeros within the analysed pattern (e.g. the prior precision ``Q`` for the
            EM trace term :math:`\operatorname{tr}(Q V)`); need not be symmetric.

        Returns
        -------
        float
        """
        b = self.analysis.values(B, "B", symmetric=False)
        sigma = self._selected()[self.analysis._position]
        return float(np.dot(sigma, b))

    @property
    def L(self) -> sp.csc_array:
        """Lower-triangular factor of ``A[perm][:, perm]`` with ``perm`` = :attr:`perm` (the
        order actually factorised, not necessarily the one given; explicit zeros included).
        """
        rows, cols, pos = self.analysis.lower_slots()
        return sp.csc_array((self._factor[pos], (rows, cols)), shape=(self.n, self.n))


class PreparedMatrix:
    """A matrix validated once and laid out in a factor's layout (:meth:`SparseCholesky.prepare`).

    Attributes
    ----------
    analysis : SparseCholesky
    values : ndarray of shape (nnz_pattern,)
        Symmetric entries aligned with the analysed pattern (read-only).
    lower : ndarray of shape (factor size,)
        Its lower triangle scattered into the factor's panels, zeros elsewhere (read-only).
    max_abs : float
        Largest ``|values|`` (to check ``scale * A`` for overflow without a pass over ``lower``).
    """

    def __init__(self, analysis: SparseCholesky, values: np.ndarray, lower: np.ndarray):
        self.analysis = analysis
        self.values = values
        self.lower = lower
        self.max_abs = float(np.max(np.abs(values), initial=0.0))


class FactorWorkspace:
    """Reusable factor and selected-inverse buffers (:meth:`SparseCholesky.workspace`).

    Attributes
    ----------
    factor, sigma : ndarray of shape (factor size,)
    generation : int
        Bumped by every factorisation into the workspace (older factors become invalid).
    """

    def __init__(self, size: int):
        self.factor = np.zeros(int(size))
        self.sigma = np.empty(int(size))
        self.generation = 0

    def acquire(self, *, zero: bool) -> np.ndarray:
        """The factor buffer for a new factorisation (zeroed on request)."""
        self.generation += 1
        if zero:
            self.factor[:] = 0.0
        return self.factor


#: Analyses kept for reuse (a fit, a scale search and a normalisation share one pattern).
_CACHE_SIZE = 8
_ANALYSES: OrderedDict[tuple, SparseCholesky] = OrderedDict()


def analysis_for(matrix: sp.csr_array, ordering: Any = "auto") -> SparseCholesky:
    """The symbolic analysis of ``matrix``'s pattern, shared by every prior on that pattern.

    Parameters
    ----------
    matrix : scipy.sparse.csr_array of shape (C, C)
        Canonical (sorted indices, no duplicates).
    ordering : str
        See :class:`SparseCholesky`.

    Returns
    -------
    SparseCholesky
    """
    if not isinstance(ordering, str):
        return SparseCholesky(matrix, ordering=ordering)
    digest = hashlib.sha1(np.ascontiguousarray(matrix.indptr, dtype=np.int64).tobytes())
    digest.update(np.ascontiguousarray(matrix.indices, dtype=np.int64).tobytes())
    key = (matrix.shape, ordering, digest.hexdigest())
    if key in _ANALYSES:
        _ANALYSES.move_to_end(key)
        return _ANALYSES[key]
    analysis = SparseCholesky(matrix, ordering=ordering)
    _ANALYSES[key] = analysis
    while len(_ANALYSES) > _CACHE_SIZE:
        _ANALYSES.popitem(last=False)
    return analysis
