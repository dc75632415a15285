r"""Sparse transition tables and transition rewards, for MDPs whose dense (S, A, S) tables do not fit.

A :class:`SparseTransitions` holds :math:`P(s' \mid s, a)` as a CSR matrix of shape (S·A, S):
row ``s * A + a`` is the next-state distribution of (s, a), column ``s'`` the next state (the
layout of ``P.reshape(S * A, S)`` for a dense table). Memory is 12-16 bytes per non-zero
instead of 8·S²·A bytes. A :class:`SparseTransitionRewards` holds transition rewards
:math:`r(s, a, s')` as the values listed on a sparse support plus a default rule for the
transitions the table does not list (what a sampled model may put mass on).

Builders (:mod:`corrpriors.envs`) choose between dense and sparse tables with
:func:`prefer_sparse`: sparse when the dense table would exceed :data:`DENSE_LIMIT_BYTES`,
unless told otherwise.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._memory import check_memory
from .._validation import as_real_array
from .checks import ROW_ATOL, row_divisors

#: Dense (S, A, S) float64 tables larger than this (64 MiB: S > 1,448 states with A = 4
#: actions) are built sparse by the environment builders unless ``sparse=False`` is passed.
DENSE_LIMIT_BYTES = 64 * 2**20

#: Rows densified at once (times S columns) by chunked dense-sparse operations: 2**21 floats (16 MiB).
CHUNK_ENTRIES = 2**21

#: What to use instead of a dense copy of a sparse table that cannot fit.
_KEEP_SPARSE = ("use .matrix (the CSR matrix of shape (S·A, S)) or P[s, a] for one row; the planners, "
                "rollouts and metrics of corrpriors.mdp take the sparse table as it is")


def dense_nbytes(n_states: int, n_actions: int) -> int:
    """Bytes of a dense float64 (S, A, S) table: ``8 * S * A * S``."""
    return 8 * int(n_states) * int(n_actions) * int(n_states)


def prefer_sparse(n_states: int, n_actions: int, sparse: bool | None = None) -> bool:
    """Decide whether a builder returns a sparse table.

    Parameters
    ----------
    n_states, n_actions : int
        S and A.
    sparse : bool or None
        True / False force the choice; None (auto) chooses sparse when the dense table
        would take more than :data:`DENSE_LIMIT_BYTES` bytes.

    Returns
    -------
    bool
    """
    if sparse is None:
        return dense_nbytes(n_states, n_actions) > DENSE_LIMIT_BYTES
    if not isinstance(sparse, (bool, np.bool_)):
        raise TypeError(f"sparse: expected True, False or None (automatic), got {sparse!r}")
    return bool(sparse)


def check_cell_keys(n_states: int, n_actions: int, name: str = "n_states") -> None:
    """Refuse sizes whose cells (s, a, s') have no 64-bit key.

    Sparse counts and rewards key a cell by ``(a * S + s) * S + s'`` (or ``(s * A + a) * S + s'``),
    below A·S²; from A·S² > 2**63 - 1 (S = 1,518,500,250 states with 4 actions) these keys wrap
    around to wrong cells. A ``ValueError`` naming ``name`` and the largest S that works.
    """
    S, A = int(n_states), int(n_actions)
    top = int(np.iinfo(np.int64).max)
    if A * S * S > top:                                 # Python integers: exact
        largest = math.isqrt(top // A)
        raise ValueError(f"{name}: expected at most {largest:,} states with {A} action{'s' * (A > 1)} (the "
                         f"cells (s, a, s') are keyed by (a S + s) S + s' in 64-bit integers), got {S:,}")


def is_sparse_table(x: Any) -> bool:
    """Whether ``x`` is a sparse transition table (SparseTransitions or a scipy sparse array)."""
    return isinstance(x, SparseTransitions) or sp.issparse(x)


def listed_transitions(n_states: int, n_actions: int, rows: Any, cols: Any, values: Any,
                       sparse: bool | None = None) -> Any:
    """A transition table from its listed entries (row ``s * A + a``, next state, probability;
    repeated cells add up): a :class:`SparseTransitions`, or the dense (S, A, S) array when
    :func:`prefer_sparse` says so -- the same numbers either way, and no dense table is built
    above :data:`DENSE_LIMIT_BYTES` unless asked for.
    """
    S, A = int(n_states), int(n_actions)
    table = sp.coo_array((np.asarray(values, dtype=np.float64),
                          (np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64))),
                         shape=(S * A, S))
    if prefer_sparse(S, A, sparse):
        return SparseTransitions(table.tocsr())
    return table.toarray().reshape(S, A, S)


def sparse_rows(table: Any, n_states: int, n_actions: int, name: str) -> sp.coo_array:
    """A scipy sparse (S·A, S) table (row ``s * A + a``) as COO with duplicates summed; a
    ``ValueError`` naming ``name`` if its shape is not (S·A, S).
    """
    if table.shape != (n_states * n_actions, n_states):
        raise ValueError(f"{name}: expected a sparse table of shape (S A, S) = ({n_states * n_actions}, "
                         f"{n_states}), got {table.shape}")
    coo = sp.coo_array(table)
    coo.sum_duplicates()
    return coo


def require_entries(table: Any, need: str) -> None:
    """A ``TypeError`` (``need``, then the table's type) unless ``table`` has ``entries(rows, cols)``,
    the cell lookup of the tables given as operators.
    """
    if not callable(getattr(table, "entries", None)):
        raise TypeError(f"{need}, which {type(table).__name__} does not have")


def listed_expectation(model: Any, rows: Any, cols: Any, weights: Any) -> np.ndarray:
    r"""Per (s, a), :math:`\sum_{s'} P(s' \mid s, a)\, w(s, a, s')` over listed cells only.

    For a transition table given as an operator (a belief's
    :class:`~corrpriors.applications.BackgroundTransitions` mean or draw): the table's
    ``entries`` at the listed cells, with no (S, S) array.

    Parameters
    ----------
    model : transition table with ``n_states``, ``n_actions`` and ``entries(rows, cols)``
        P(s' | s, a), rows ``s * A + a``.
    rows, cols : array_like of int, shape (L,)
        The cells (row ``s * A + a``, next state ``s'``).
    weights : array_like of shape (L,)
        :math:`w` at the cells.

    Returns
    -------
    ndarray of shape (S, A)
    """
    S, A = int(model.n_states), int(model.n_actions)
    require_entries(model, "transitions: transition rewards r(s, a, s') need the table's entries "
                           "(entries(rows, cols))")
    r = np.asarray(rows, dtype=np.int64)
    w = np.asarray(weights, dtype=np.float64) * model.entries(r, cols)
    return np.bincount(r, weights=w, minlength=S * A).reshape(S, A)


def _freeze(*arrays: np.ndarray) -> None:
    for a in arrays:
        a.setflags(write=False)


def _row_cumsum(data: np.ndarray, indptr: np.ndarray) -> np.ndarray:
    """Per-row running sums of CSR values, accumulated left to right within each row.

    The additions are those of ``np.cumsum`` over the dense row (zeros add nothing), so the
    values equal the dense cumulative sums at the non-zeros bit for bit.
    """
    out = np.array(data, dtype=np.float64, copy=True)
    starts = indptr[:-1]
    lengths = np.diff(indptr)
    order = np.argsort(-lengths, kind="stable")          # longest rows first: a prefix is active
    sorted_len = lengths[order]
    for k in range(1, int(sorted_len[0]) if sorted_len.size else 0):
        rows = order[:np.searchsorted(-sorted_len, -k, side="left")]   # rows with length > k
        pos = starts[rows] + k
        out[pos] = out[pos - 1] + data[pos]
    return out


class _StateActionTable:
    """The (S, A, S) shape shared by the sparse tables (they set ``_S`` and ``_A``)."""

    _S: int
    _A: int

    @property
    def shape(self) -> tuple[int, int, int]:
        """(S, A, S), the shape of the dense table."""
        return (self._S, self._A, self._S)

    @property
    def ndim(self) -> int:
        """3, like the dense table."""
        return 3

    @property
    def n_states(self) -> int:
        """S."""
        return self._S

    @property
    def n_actions(self) -> int:
        """A."""
        return self._A


class SparseTransitions(_StateActionTable):
    r"""Transition probabilities :math:`P(s' \mid s, a)` stored sparsely, shape (S, A, S).

    The table is a CSR matrix of shape (S·A, S) (:attr:`matrix`): row ``s * A + a`` holds
    :math:`P(\cdot \mid s, a)`, column ``s'`` the next state -- the rows of
    ``P.reshape(S * A, S)`` of the dense table. Instances are immutable (the arrays are
    read-only) and validated once, on construction.

    It behaves like the dense table where that is cheap: ``shape`` is (S, A, S), ``P[s, a]``
    is the dense row (S,), ``P[s]`` the dense (A, S) block and ``P[s, a, s']`` one
    probability. ``np.asarray(P)`` raises a :class:`TypeError` (a dense copy of a large
    table is rarely intended): use :meth:`toarray` to ask for one.

    Parameters
    ----------
    matrix : scipy sparse array or matrix of shape (S·A, S), or SparseTransitions
        Real (not complex), non-negative, finite; every row sums to one (within ``atol``); a
        row further than :data:`~corrpriors.mdp.checks.RESCALE_ATOL` (1e-12) from one is divided
        by its sum, so the stored rows sum to one to rounding. Duplicate entries
        are summed, explicit zeros dropped, indices sorted.
    name : str
        Argument name used in error messages.
    atol : float
        Tolerance on the row sums.
    copy : bool
        Copy the input's arrays (False: take them over; the caller must not modify them).

    Attributes
    ----------
    n_states : int
        S.
    n_actions : int
        A.
    nnz : int
        Number of stored (positive) probabilities.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> M = sp.csr_array(([1.0, 0.5, 0.5, 1.0], ([0, 1, 1, 2], [1, 0, 1, 0])), shape=(4, 2))
    >>> P = SparseTransitions(M)          # S = 2 states, A = 2 actions
    >>> P.shape, P[0, 1].tolist(), P.nnz
    ((2, 2, 2), [0.5, 0.5], 4)
    """

    def __init__(self, matrix: Any, *, name: str = "transitions", atol: float = ROW_ATOL,
                 copy: bool = True) -> None:
        if isinstance(matrix, SparseTransitions):
            matrix = matrix.matrix
        if not sp.issparse(matrix):
            raise TypeError(f"{name}: expected a scipy sparse array of shape (S*A, S), got "
                            f"{type(matrix).__name__}")
        rows, S = (int(n) for n in matrix.shape)
        if S < 1 or rows < S or rows % S:
            raise ValueError(f"{name}: expected a sparse table of shape (S*A, S) (row s*A + a, "
                             f"column s'), got shape {matrix.shape}")
        if matrix.dtype.kind not in "biuf":
            raise TypeError(f"{name}: expected real probabilities, got dtype {matrix.dtype}"
                            + (" (the imaginary part would be lost)" if matrix.dtype.kind == "c" else ""))
        try:
            M = sp.csr_array(matrix, dtype=np.float64, copy=copy)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{name}: expected numeric entries ({exc})") from None
        M.sum_duplicates()
        self._S, self._A = S, rows // S
        divisors = row_divisors(self._check_values(M, name, atol))   # rows accepted within atol: now to rounding
        if divisors is not None:
            M.data = M.data / np.repeat(divisors, np.diff(M.indptr))
        M.eliminate_zeros()
        if M.nnz < 2**31 and M.indptr.dtype != np.int32:   # 4-byte indices: a third less memory
            M.indices, M.indptr = M.indices.astype(np.int32), M.indptr.astype(np.int32)
        _freeze(M.data, M.indices, M.indptr)
        self._M = M
        self._cdf: np.ndarray | None = None

    def __setstate__(self, state: dict) -> None:      # unpickled arrays are read-only again
        self.__dict__.update(state)
        _freeze(self._M.data, self._M.indices, self._M.indptr)

    def _check_values(self, M: sp.csr_array, name: str, atol: float) -> np.ndarray:
        """Refuse non-finite, negative entries and rows not summing to one; return the row sums."""
        d = M.data
        if not np.all(np.isfinite(d)):
            raise ValueError(f"{name}: contains NaN or infinite values")
        if d.size and d.min() < 0:
            j = int(np.argmin(d))
            row = int(np.searchsorted(M.indptr, j, side="right")) - 1
            s, a = divmod(row, self._A)
            raise ValueError(f"{name}: probabilities must be non-negative, found {d[j]:g} at (s, a, s') "
                             f"= ({s}, {a}, {int(M.indices[j])})")
        sums = np.add.reduceat(d, M.indptr[:-1]) if d.size else np.zeros(M.shape[0])
        sums[np.diff(M.indptr) == 0] = 0.0          # reduceat gives d[start] for empty rows
        dev = np.abs(sums - 1.0)
        if (dev > atol).any():
            row = int(np.argmax(dev))
            s, a = divmod(row, self._A)
            raise ValueError(f"{name}: every row P[s, a, :] must sum to one; worst row (s, a) = "
                             f"({s}, {a}) sums to {sums[row]:.12g}")
        return sums

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_dense(cls, transitions: Any, *, name: str = "transitions") -> SparseTransitions:
        """The non-zeros of a dense table (S, A, S), values unchanged (rows off one by more than
        rounding divided by their sums, as in the constructor).
        """
        P = as_real_array(transitions, name).astype(np.float64)
        if P.ndim != 3 or P.shape[0] != P.shape[2]:
            raise ValueError(f"{name}: expected shape (S, A, S), got {P.shape}")
        return cls(sp.csr_array(P.reshape(-1, P.shape[2])), name=name, copy=False)

    @classmethod
    def from_entries(cls, next_states: Any, probs: Any, *,
                     name: str = "transitions") -> SparseTransitions:
        r"""Build a table from K (next state, probability) entries per (s, a).

        The natural form of a posterior draw with K categories per row: entry ``k`` of
        (s, a) moves to ``next_states[s, a, k]`` with probability ``probs[s, a, k]``.
        Entries naming the same next state are summed (in order of k), zeros dropped.

        Parameters
        ----------
        next_states : array_like of int, shape (S, A, K)
            Next states in [0, S).
        probs : array_like of shape (S, A, K)
            Probabilities; every (s, a) sums to one (within 1e-8).
        name : str
            Argument name used in error messages.

        Returns
        -------
        SparseTransitions
        """
        idx = np.asarray(next_states)
        p = as_real_array(probs, name).astype(np.float64)
        if idx.ndim != 3 or idx.shape != p.shape or idx.shape[0] < 1:
            raise ValueError(f"{name}: expected next_states and probs of one shape (S, A, K), got "
                             f"{idx.shape} and {p.shape}")
        if not np.issubdtype(idx.dtype, np.integer):
            raise ValueError(f"{name}: next_states must be integers, got dtype {idx.dtype}")
        S, A, K = idx.shape
        if idx.size and (idx.min() < 0 or idx.max() >= S):
            raise ValueError(f"{name}: next states must lie in [0, {S - 1}], found "
                             f"{idx.min()}..{idx.max()}")
        rows = np.repeat(np.arange(S * A), K)
        M = sp.coo_array((p.ravel(), (rows, idx.ravel().astype(np.int64))), shape=(S * A, S))
        return cls(M.tocsr(), name=name, copy=False)

    # ------------------------------------------------------------------ array-like surface
    @property
    def nnz(self) -> int:
        """Number of stored probabilities."""
        return int(self._M.nnz)

    @property
    def nbytes(self) -> int:
        """Bytes held by the CSR arrays."""
        return int(self._M.data.nbytes + self._M.indices.nbytes + self._M.indptr.nbytes)

    @property
    def matrix(self) -> sp.csr_array:
        """The CSR matrix of shape (S·A, S) (read-only arrays, canonical format)."""
        return self._M

    def toarray(self) -> np.ndarray:
        """A dense copy, ndarray of shape (S, A, S) (8·S²·A bytes).

        Raises
        ------
        corrpriors._memory.MemoryEstimateError
            A ``ValueError``: the copy would not fit in the memory this process may use;
            raised before it is allocated.
        """
        check_memory(dense_nbytes(self._S, self._A),
                     f"SparseTransitions.toarray(): the dense (S, A, S) copy of {self._S:,} states x "
                     f"{self._A:,} actions", _KEEP_SPARSE)
        return self._M.toarray().reshape(self.shape)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError(f"SparseTransitions of shape {self.shape} ({self.nnz} non-zeros) is not "
                        f"converted to a dense array implicitly; use .toarray() for a dense "
                        f"(S, A, S) copy ({dense_nbytes(self._S, self._A) / 2**20:.1f} MiB) or "
                        f".matrix for the CSR matrix of shape (S*A, S)")

    def __getitem__(self, key: Any) -> Any:
        A = self._A
        key = key if isinstance(key, tuple) else (key,)
        try:
            ints = [int(k) for k in key]
            if any(isinstance(k, (bool, np.bool_)) or int(k) != k for k in key):
                raise TypeError
        except (TypeError, ValueError):
            raise TypeError("SparseTransitions: index with integers P[s], P[s, a] or P[s, a, s']; "
                            "for other selections use .matrix (rows s*A + a) or .toarray()") from None
        if not 1 <= len(ints) <= 3:
            raise IndexError(f"SparseTransitions: too many indices ({len(ints)}) for shape {self.shape}")
        for i, (v, n) in enumerate(zip(ints, self.shape)):
            if not -n <= v < n:
                raise IndexError(f"SparseTransitions: index {v} is out of bounds for axis {i} with "
                                 f"size {n}")
        ints = [v % n for v, n in zip(ints, self.shape)]
        if len(ints) == 1:
            return self._M[ints[0] * A:(ints[0] + 1) * A].toarray()
        row = self._dense_row(ints[0] * A + ints[1])
        return row if len(ints) == 2 else float(row[ints[2]])

    def _dense_row(self, row: int) -> np.ndarray:
        lo, hi = self._M.indptr[row], self._M.indptr[row + 1]
        out = np.zeros(self._S)
        out[self._M.indices[lo:hi]] = self._M.data[lo:hi]
        return out

    def __repr__(self) -> str:
        return f"SparseTransitions(n_states={self._S}, n_actions={self._A}, nnz={self.nnz})"

    # ------------------------------------------------------------------ numerics
    @property
    def row_cdf(self) -> np.ndarray:
        """Per-row cumulative sums of the stored probabilities, ndarray of shape (nnz,) (cached)."""
        if self._cdf is None:
            cdf = _row_cumsum(self._M.data, self._M.indptr)
            cdf.setflags(write=False)
            self._cdf = cdf
        return self._cdf

    def sample(self, states: Any, actions: Any, u: Any) -> np.ndarray:
        r"""Next states by inverse CDF: the first s' whose cumulative probability exceeds ``u`` times the row total.

        The same rule as :func:`corrpriors._random.inverse_cdf` on the dense row, so equal
        uniforms give equal next states (except when ``u * total`` rounds to the total, where
        the dense rule returns state S - 1 and this one the row's last listed state).

        Parameters
        ----------
        states, actions : array_like of int, shape (E,)
            Current states and actions (or scalars).
        u : array_like of shape (E,)
            Uniforms in [0, 1).

        Returns
        -------
        ndarray of shape (E,), int64
        """
        rows = np.asarray(states, dtype=np.int64) * self._A + np.asarray(actions, dtype=np.int64)
        u = np.asarray(u, dtype=np.float64)
        cdf, indptr = self.row_cdf, self._M.indptr
        end = indptr[rows + 1].astype(np.int64)
        lo = indptr[rows].astype(np.int64)
        target = u * cdf[end - 1]
        if lo.ndim == 0:        # one step (a Gymnasium env): binary search in the row
            seg = cdf[int(lo):int(end)]
            j = min(int(np.searchsorted(seg, target, side="right")), seg.size - 1)
            return np.int64(self._M.indices[int(lo) + j])
        hi = end.copy()
        active = lo < hi
        while active.any():
            mid = (lo + hi) // 2
            right = active & (cdf[np.minimum(mid, cdf.size - 1)] <= target)
            lo = np.where(right, mid + 1, lo)
            hi = np.where(active & ~right, mid, hi)
            active = lo < hi
        return self._M.indices[np.minimum(lo, end - 1)].astype(np.int64)

    def expect(self, values: Any) -> np.ndarray:
        r""":math:`\sum_{s'} P(s' \mid s, a) V(s')` for values of shape (S,) or (..., S); returns (..., S, A)."""
        V = np.asarray(values, dtype=np.float64)
        S, A = self._S, self._A
        if V.ndim == 1:
            return (self._M @ V).reshape(S, A)
        flat = V.reshape(-1, S)
        out = np.asarray(self._M @ flat.T).T
        return out.reshape(V.shape[:-1] + (S, A))

    def policy_matrix(self, policy: np.ndarray, keep: np.ndarray | None = None) -> sp.csr_array:
        r"""The state-to-state matrix :math:`P_\pi(s, s') = \sum_a \pi(a \mid s) P(s' \mid s, a)`.

        Parameters
        ----------
        policy : ndarray of shape (S, A)
            Row-stochastic action probabilities.
        keep : ndarray of shape (S,), optional
            Row weights (0 empties the rows of terminal states).

        Returns
        -------
        scipy.sparse.csr_array of shape (S, S)
        """
        S, A = self._S, self._A
        w = np.asarray(policy, dtype=np.float64)
        if keep is not None:
            w = w * keep[:, None]
        s, a = np.nonzero(w)
        G = sp.csr_array((w[s, a], (s, s * A + a)), shape=(S, S * A))
        return sp.csr_array(G @ self._M)


class SparseTransitionRewards(_StateActionTable):
    r"""Transition rewards :math:`r(s, a, s')` listed on a sparse support, with a default elsewhere.

    .. math::

        r(s, a, s') = \begin{cases}
            0 & s \text{ inert (e.g. terminal: never stepped from)},\\
            \text{listed}(s, a, s') & (s, a, s') \text{ listed},\\
            \text{arrival}(s') & \text{arrival known for } s',\\
            \text{fallback}(s, a) & \text{otherwise.}
        \end{cases}

    This is how :func:`corrpriors.envs.from_gymnasium` stores the rewards of a large table:
    the listed rewards, the reward of arriving in a state where the table's reward is a
    function of the next state, else the (s, a) mean. The expected reward under any model
    :math:`P'` (:meth:`expected`) costs O(nnz) -- what planning with a posterior draw needs.

    Parameters
    ----------
    n_states, n_actions : int
        S and A.
    indptr, indices, values : array_like
        The listed support in CSR form over rows ``s * A + a`` (shape (S·A + 1,), (L,),
        (L,)); column indices sorted and unique within each row. Listed zeros count.
    arrival : array_like of shape (S,), optional
        Reward of arriving in s' (default 0).
    arrival_known : array_like of bool, shape (S,), optional
        Where ``arrival`` applies (default: nowhere).
    fallback : array_like of shape (S, A), optional
        Reward of an unlisted transition otherwise (default 0).
    inert : array_like of bool, shape (S,), optional
        States whose rewards are all 0 (default: none).

    Notes
    -----
    ``shape`` is (S, A, S) and ``ndim`` 3, so code that branches on transition rewards
    (``rewards.ndim == 3``) takes this for them; ``r[s, a, s']`` and ``r[s, a]`` (a dense
    row) work, :meth:`toarray` gives the dense table, ``np.asarray`` raises.
    """

    def __init__(self, n_states: int, n_actions: int, indptr: Any, indices: Any, values: Any, *,
                 arrival: Any = None, arrival_known: Any = None, fallback: Any = None,
                 inert: Any = None) -> None:
        S, A = int(n_states), int(n_actions)
        if S < 1 or A < 1:
            raise ValueError(f"n_states, n_actions: expected positive sizes, got ({n_states}, {n_actions})")
        check_cell_keys(S, A)
        self._S, self._A = S, A
        self.indptr = np.array(indptr, dtype=np.int64)
        self.indices = np.array(indices, dtype=np.int64)
        self.values = np.array(values, dtype=np.float64)
        self.arrival = np.zeros(S) if arrival is None else np.array(arrival, dtype=np.float64)
        self.arrival_known = (np.zeros(S, bool) if arrival_known is None
                              else np.array(arrival_known, dtype=bool))
        self.fallback = np.zeros((S, A)) if fallback is None else np.array(fallback, dtype=np.float64)
        self.inert = np.zeros(S, bool) if inert is None else np.array(inert, dtype=bool)
        self._validate()
        _freeze(self.indptr, self.indices, self.values, self.arrival, self.arrival_known,
                self.fallback, self.inert)
        keys = self._row_ids() * S + self.indices
        keys.setflags(write=False)
        self._keys = keys                     # sorted: row-major (s*A + a, s')
        self._correction = self._build_correction()

    def __setstate__(self, state: dict) -> None:      # unpickled arrays are read-only again
        self.__dict__.update(state)
        _freeze(self.indptr, self.indices, self.values, self.arrival, self.arrival_known,
                self.fallback, self.inert, self._keys)

    def _validate(self) -> None:
        S, A = self._S, self._A
        ip, ix, v = self.indptr, self.indices, self.values
        if ip.shape != (S * A + 1,) or ip[0] != 0 or (np.diff(ip) < 0).any() or ip[-1] != ix.size \
                or ix.shape != v.shape:
            raise ValueError(f"rewards: expected a CSR support over S*A = {S * A} rows (indptr of "
                             f"shape ({S * A + 1},), indices and values of one length)")
        if ix.size and (ix.min() < 0 or ix.max() >= S):
            raise ValueError(f"rewards: listed next states must lie in [0, {S - 1}]")
        for nm, arr, shape in (("arrival", self.arrival, (S,)), ("arrival_known", self.arrival_known, (S,)),
                               ("fallback", self.fallback, (S, A)), ("inert", self.inert, (S,))):
            if arr.shape != shape:
                raise ValueError(f"{nm}: expected shape {shape}, got {arr.shape}")
        if not (np.all(np.isfinite(v)) and np.all(np.isfinite(self.arrival))
                and np.all(np.isfinite(self.fallback))):
            raise ValueError("rewards: contains NaN or infinite values")
        if ix.size:
            same_row = np.diff(self._row_ids()) == 0
            if (np.diff(ix)[same_row] <= 0).any():
                raise ValueError("rewards: listed next states must be sorted and unique within each row")

    def _row_ids(self) -> np.ndarray:
        return np.repeat(np.arange(self._S * self._A), np.diff(self.indptr))

    def _default(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Default reward of the transitions (row = s*A + a, s'), inert rows included."""
        s = rows // self._A
        out = np.where(self.arrival_known[cols], self.arrival[cols], self.fallback.ravel()[rows])
        return np.where(self.inert[s], 0.0, out)

    def _build_correction(self) -> sp.csr_array:
        """The listed rewards minus the default on the listed support (zero on inert rows), CSR (S·A, S)."""
        rows = self._row_ids()
        d = np.where(self.inert[rows // self._A], 0.0, self.values - self._default(rows, self.indices))
        C = sp.csr_array((d, self.indices.copy(), self.indptr.copy()), shape=(self._S * self._A, self._S))
        C.eliminate_zeros()
        return C

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_dense(cls, rewards: Any, support: Any = None) -> SparseTransitionRewards:
        """List the entries of a dense (S, A, S) reward table on ``support`` (default: all).

        Outside ``support`` the default is 0.
        """
        r = np.asarray(rewards, dtype=np.float64)
        if r.ndim != 3 or r.shape[0] != r.shape[2]:
            raise ValueError(f"rewards: expected shape (S, A, S), got {r.shape}")
        S, A = r.shape[:2]
        mask = np.ones(r.shape, bool) if support is None else np.asarray(support, dtype=bool)
        if mask.shape != r.shape:
            raise ValueError(f"support: expected shape {r.shape}, got {mask.shape}")
        flat = mask.reshape(S * A, S)
        indptr = np.concatenate([[0], np.cumsum(flat.sum(axis=1))])
        return cls(S, A, indptr, np.nonzero(flat)[1], r.reshape(S * A, S)[flat])

    # ------------------------------------------------------------------ array-like surface
    @property
    def n_listed(self) -> int:
        """Number of listed transitions."""
        return int(self.values.size)

    def values_at(self, states: Any, actions: Any, next_states: Any) -> np.ndarray:
        """Vectorised :math:`r(s, a, s')` for arrays of equal shape; returns that shape."""
        s = np.asarray(states, dtype=np.int64)
        rows = s * self._A + np.asarray(actions, dtype=np.int64)
        cols = np.asarray(next_states, dtype=np.int64)
        q = rows * self._S + cols
        j = np.minimum(np.searchsorted(self._keys, q), max(self._keys.size - 1, 0))
        found = (self._keys[j] == q) if self._keys.size else np.zeros(q.shape, bool)
        listed = self.values[j] if self._keys.size else np.zeros(q.shape)
        out = np.where(found, listed, self._default(rows, cols))
        return np.where(self.inert[s], 0.0, out)

    def toarray(self) -> np.ndarray:
        """The dense reward table, ndarray of shape (S, A, S) (8·S²·A bytes).

        Raises
        ------
        corrpriors._memory.MemoryEstimateError
            A ``ValueError``: the table would not fit in the memory this process may use;
            raised before it is allocated.
        """
        S, A = self._S, self._A
        check_memory(dense_nbytes(S, A), f"SparseTransitionRewards.toarray(): the dense (S, A, S) "
                                         f"table of {S:,} states x {A:,} actions",
                     "use .values_at(s, a, s'), r[s, a] for one row, or .expected(P) for R(s, a)")
        out = np.where(self.arrival_known[None, None, :], self.arrival[None, None, :],
                       self.fallback[:, :, None])
        flat = out.reshape(S * A, S)
        flat[self._row_ids(), self.indices] = self.values
        out[self.inert] = 0.0
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError(f"SparseTransitionRewards of shape {self.shape} is not converted to a dense "
                        f"array implicitly; use .toarray() for the dense (S, A, S) table, "
                        f".values_at(s, a, s') or .expected(P)")

    def __getitem__(self, key: Any) -> Any:
        key = key if isinstance(key, tuple) else (key,)
        try:
            ints = [int(k) for k in key]
        except (TypeError, ValueError):
            raise TypeError("SparseTransitionRewards: index with integers r[s, a] or r[s, a, s']") from None
        if len(ints) not in (2, 3) or not all(0 <= v < n for v, n in zip(ints, self.shape)):
            raise IndexError(f"SparseTransitionRewards: expected r[s, a] or r[s, a, s'] within shape "
                             f"{self.shape}, got {key!r}")
        if len(ints) == 3:
            return float(self.values_at(ints[0], ints[1], ints[2]))
        cols = np.arange(self._S)
        return self.values_at(np.full(self._S, ints[0]), np.full(self._S, ints[1]), cols)

    def __repr__(self) -> str:
        return (f"SparseTransitionRewards(n_states={self._S}, n_actions={self._A}, "
                f"listed={self.n_listed})")

    def expected(self, transitions: Any) -> np.ndarray:
        r"""Expected rewards :math:`\sum_{s'} P(s' \mid s, a)\, r(s, a, s')` under a model.

        A model that is an operator (``expect(values)`` and ``entries(rows, cols)``, as a
        belief's posterior mean or draw) can put mass on next states the rewards do not list:
        there the defaults apply (the reward of arriving in s' where known, else the (s, a)
        fallback).

        Parameters
        ----------
        transitions : SparseTransitions, ndarray of shape (S, A, S) or (..., S, A, S), or a
            transition table with ``expect`` and ``entries``

        Returns
        -------
        ndarray of shape (S, A) (or (..., S, A) for a dense batch)
        """
        if not isinstance(transitions, np.ndarray) and hasattr(transitions, "expect"):
            known = self.arrival_known.astype(np.float64)
            out = np.asarray(transitions.expect(known * self.arrival)) + \
                self.fallback * np.asarray(transitions.expect(1.0 - known))
            if isinstance(transitions, SparseTransitions):
                out = out + np.asarray(transitions.matrix.multiply(self._correction).sum(axis=1)
                                       ).reshape(self._S, self._A)
            else:
                corr = self._correction.tocoo()
                if corr.nnz:
                    out = out + listed_expectation(transitions, corr.row, corr.col, corr.data)
            out[self.inert] = 0.0
            return out
        P = np.asarray(transitions, dtype=np.float64)
        return np.einsum("...sat,sat->...sa", P, self.toarray())


def expected_transition_rewards(transitions: Any, rewards: Any) -> np.ndarray:
    r"""Expected rewards :math:`\sum_{s'} P(s' \mid s, a) r(s, a, s')` for any pair of tables.

    Parameters
    ----------
    transitions : ndarray of shape (..., S, A, S), SparseTransitions, another transition table
        with ``expect`` and ``entries`` (a belief's posterior mean or draw), or a list of them
    rewards : ndarray of shape (S, A, S) or SparseTransitionRewards

    Returns
    -------
    ndarray of shape (..., S, A) (a leading axis M for a list)
    """
    if isinstance(transitions, list):
        return np.stack([expected_transition_rewards(p, rewards) for p in transitions])
    if isinstance(rewards, SparseTransitionRewards):
        return rewards.expected(transitions)
    if isinstance(transitions, SparseTransitions):
        M = transitions.matrix
        S, A = transitions.n_states, transitions.n_actions
        rows = np.repeat(np.arange(S * A), np.diff(M.indptr))
        vals = M.data * np.asarray(rewards).reshape(S * A, S)[rows, M.indices]
        return np.bincount(rows, weights=vals, minlength=S * A).reshape(S, A)
    if not isinstance(transitions, np.ndarray):   # a table given as an operator
        S, A = int(transitions.n_states), int(transitions.n_actions)
        cells = sp.coo_array(np.asarray(rewards, dtype=np.float64).reshape(S * A, S))
        return listed_expectation(transitions, cells.row, cells.col, cells.data)
    return np.einsum("...sat,sat->...sa", transitions, rewards)


def transition_entries(transitions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The positive entries (s, a, s', p) of a dense or sparse table, in (s, a, s') order.

    Parameters
    ----------
    transitions : ndarray of shape (S, A, S) or SparseTransitions

    Returns
    -------
    (states, actions, next_states, probs) : four ndarrays of shape (L,)
    """
    if isinstance(transitions, SparseTransitions):
        M, A = transitions.matrix, transitions.n_actions
        s, a = np.divmod(np.repeat(np.arange(M.shape[0]), np.diff(M.indptr)), A)
        return s, a, M.indices.astype(np.int64), np.asarray(M.data)
    P = np.asarray(transitions, dtype=np.float64)
    s, a, s2 = np.nonzero(P > 0)
    return s, a, s2, P[s, a, s2]


def transition_reward_values(rewards: Any, states: Any, actions: Any, next_states: Any) -> np.ndarray:
    """:math:`r(s, a, s')` of dense (S, A, S) or sparse transition rewards at arrays of transitions."""
    if isinstance(rewards, SparseTransitionRewards):
        return rewards.values_at(states, actions, next_states)
    return np.asarray(rewards, dtype=np.float64)[states, actions, next_states]


def absorb_rows(P: SparseTransitions, states: Any, targets: Any) -> SparseTransitions:
    """A copy of ``P`` in which every action of ``states[i]`` moves to ``targets[i]`` with probability 1.

    Parameters
    ----------
    P : SparseTransitions
    states, targets : array_like of int, shape (R,)

    Returns
    -------
    SparseTransitions
        The untouched rows are copied segment by segment (no masks over the non-zeros).
    """
    S, A = P.n_states, P.n_actions
    st = np.asarray(states, dtype=np.int64).ravel()
    tg = np.broadcast_to(np.asarray(targets, dtype=np.int64), st.shape)
    target_of_state = np.full(S, -1, dtype=np.int64)
    target_of_state[st] = tg
    replaced = np.flatnonzero(target_of_state >= 0)          # sorted states
    M = P.matrix
    old_ptr = M.indptr.astype(np.int64)
    lengths = np.diff(old_ptr)
    rows_new = (replaced[:, None] * A + np.arange(A)).ravel()
    lengths[rows_new] = 1
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(M.indptr.dtype)
    data = np.empty(int(indptr[-1]))
    indices = np.empty(int(indptr[-1]), dtype=M.indices.dtype)
    bounds = np.concatenate([[0], replaced * A, [S * A]])    # kept row ranges between replaced states
    for i in range(bounds.size - 1):
        lo = bounds[i] + (A if i > 0 else 0)
        hi = bounds[i + 1]
        if lo < hi:
            src, dst = slice(old_ptr[lo], old_ptr[hi]), slice(indptr[lo], indptr[hi])
            data[dst], indices[dst] = M.data[src], M.indices[src]
    data[indptr[rows_new]] = 1.0
    indices[indptr[rows_new]] = target_of_state[rows_new // A]
    return SparseTransitions(sp.csr_array((data, indices, indptr), shape=(S * A, S)), copy=False)


__all__ = ["SparseTransitions", "SparseTransitionRewards", "DENSE_LIMIT_BYTES", "prefer_sparse",
           "dense_nbytes", "is_sparse_table", "expected_transition_rewards", "absorb_rows",
           "transition_entries", "transition_reward_values"]
