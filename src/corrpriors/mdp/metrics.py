"""Evaluation metrics: Hellinger distance, value loss, (normalised) expected return, EMD."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog
from scipy.spatial.distance import cdist

from .._memory import check_memory
from .._validation import check_int, short_repr
from ._sparse import CHUNK_ENTRIES, SparseTransitions, is_sparse_table, require_entries, sparse_rows
from .checks import check_distribution
from .planning import TransitionOperator, policy_evaluation, policy_iteration
from .tabular import TabularMDP

#: Bytes per flow (variable) of :func:`emd`'s linear program, for its memory check: the costs,
#: the sparse constraints (two entries each) and HiGHS's own copies. Measured (resident memory
#: added by one call, supports of m = n states): 1,187 at m = 100, 1,311 at 300, 1,291 at 600.
EMD_BYTES_PER_FLOW = 1300


def _as_rows(x: Any, name: str) -> tuple[Any, tuple[int, ...]]:
    """A sparse operand as a CSR matrix (R, K) and the leading shape of its rows."""
    if isinstance(x, SparseTransitions):
        return x.matrix, (x.n_states, x.n_actions)
    M = sp.csr_array(x, dtype=np.float64)
    M.sum_duplicates()
    if M.data.size and (not np.all(np.isfinite(M.data)) or M.data.min() < 0):
        raise ValueError(f"{name}: probabilities must be finite and non-negative")
    return M, (M.shape[0],)


def _sparse_hellinger(p: Any, q: Any, axis: int) -> np.ndarray:
    """Row-wise Hellinger distances when at least one operand is sparse (memory linear)."""
    sparse_p, sparse_q = is_sparse_table(p), is_sparse_table(q)
    first = p if sparse_p else q
    ndim = 3 if isinstance(first, SparseTransitions) else 2
    if axis not in (-1, ndim - 1):
        raise ValueError(f"axis: sparse tables hold their categories along the last axis, got axis={axis}")
    A, lead = _as_rows(first, "p" if sparse_p else "q")
    R, K = A.shape
    if sparse_p and sparse_q:
        B, _ = _as_rows(q, "q")
        if B.shape != A.shape:
            raise ValueError(f"p, q: expected tables of one shape, got {A.shape} and {B.shape} rows x "
                             f"categories")
        D = A.sqrt() - B.sqrt()                 # the union of the two supports
        d2 = 0.5 * np.asarray(D.multiply(D).sum(axis=1)).ravel()
        return np.sqrt(np.clip(d2, 0.0, 1.0)).reshape(lead)
    other = np.asarray(q if sparse_p else p, dtype=np.float64)
    if other.size != R * K or other.shape[-1] != K:
        raise ValueError(f"p, q: the dense operand must hold the sparse one's {R} rows of {K} "
                         f"categories, got shape {other.shape}")
    if (other < 0).any():
        raise ValueError("p, q: probabilities must be non-negative")
    other = other.reshape(R, K)
    out = np.empty(R)
    step = max(1, CHUNK_ENTRIES // K)
    for i in range(0, R, step):       # densify a block of rows at a time: the dense formula
        a = np.sqrt(A[i:i + step].toarray())
        out[i:i + step] = 0.5 * np.sum((a - np.sqrt(other[i:i + step])) ** 2, axis=-1)
    return np.sqrt(np.clip(out, 0.0, 1.0)).reshape(lead)


def _is_operator_table(x: Any) -> bool:
    """Whether ``x`` is a table given only as an operator (a TransitionOperator, not a SparseTransitions)."""
    return isinstance(x, TransitionOperator) and not isinstance(x, SparseTransitions)


def operator_hellinger(table: Any, other: Any) -> np.ndarray:
    r"""Hellinger distance of every row of an operator table to a dense or sparse table.

    :math:`H = \sqrt{1 - \sum_{s'} \sqrt{P(s') P'(s')}}` (both rows on the simplex), read on
    the support of ``other`` only with ``table.entries`` -- exact, with no (S, S) array.

    Parameters
    ----------
    table : transition table with ``n_states``, ``n_actions`` and ``entries(rows, cols)``
        Of shape (S, A, S), e.g. a :class:`~corrpriors.applications.BackgroundTransitions`.
    other : SparseTransitions, scipy sparse array of shape (S·A, S) (row ``s * A + a``) or
        ndarray of shape (S, A, S)

    Returns
    -------
    ndarray of shape (S, A)
    """
    S, A = int(table.n_states), int(table.n_actions)
    require_entries(table, "p, q: a table given as an operator needs entries(rows, cols) for the "
                           "Hellinger distance")
    if isinstance(other, SparseTransitions):
        other = other.matrix
    if sp.issparse(other):
        coo = sparse_rows(other, S, A, "p, q")
    else:
        arr = np.asarray(other, dtype=np.float64)
        if arr.shape != (S, A, S):
            raise ValueError(f"p, q: expected a dense table of shape (S, A, S) = ({S}, {A}, {S}), "
                             f"got {arr.shape}")
        coo = sp.coo_array(arr.reshape(S * A, S))
    if coo.data.size and (not np.all(np.isfinite(coo.data)) or coo.data.min() < 0):
        raise ValueError("p, q: probabilities must be finite and non-negative")
    keep = coo.data > 0
    rows, cols, prob = coo.row[keep], coo.col[keep], coo.data[keep]
    bc = np.bincount(rows, weights=np.sqrt(prob * np.maximum(table.entries(rows, cols), 0.0)),
                     minlength=S * A)
    return np.sqrt(np.maximum(1.0 - bc, 0.0)).reshape(S, A)


def hellinger(p: Any, q: Any, axis: int = -1) -> np.ndarray:
    r"""Hellinger distance between probability vectors along ``axis``.

    :math:`H(p, q) = \sqrt{\tfrac12 \sum_k (\sqrt{p_k} - \sqrt{q_k})^2} \in [0, 1]`.

    Parameters
    ----------
    p, q : array_like of shape (..., K), SparseTransitions, or scipy sparse array of shape (R, K)
        Probability vectors (broadcast against each other), e.g. two (S, A) policies or two
        (S, A, S) transition tensors. Either may be a sparse transition table (a
        :class:`~corrpriors.mdp.SparseTransitions` of shape (S, A, S), or a scipy sparse
        array of shape (S·A, S)); the other is then sparse too, or dense with as many rows
        (shape (S, A, S) or (S·A, S)). Either may also be a table given as an operator (a
        :class:`~corrpriors.mdp.planning.TransitionOperator` with ``entries(rows, cols)``,
        e.g. a belief's :class:`~corrpriors.applications.BackgroundTransitions` mean or
        draw); the other is then a dense (S, A, S) or a sparse table.
    axis : int
        Category axis (the last one for sparse tables).

    Returns
    -------
    ndarray of shape (...)
        One distance per row: (S, A) when a SparseTransitions or an operator table is
        involved, (R,) for scipy sparse arrays.

    Notes
    -----
    Sparse against sparse sums over the union of the two supports, so the mass an estimate
    puts outside the truth's support counts in full; memory and time grow with the two
    numbers of non-zeros. Sparse against dense densifies blocks of rows (16 MiB at a time)
    and applies the dense formula, so it matches the dense computation bit for bit. An
    operator table is read on the other table's support (:func:`operator_hellinger`): exact,
    with the rows' sums to one taken for granted; two operator tables are not compared (their
    union support is every state).
    """
    if _is_operator_table(p) or _is_operator_table(q):
        if _is_operator_table(p) and _is_operator_table(q):
            raise TypeError("p, q: two tables given as operators cannot be compared without "
                            "densifying; compare each with a dense or sparse table (the truth)")
        if axis not in (-1, 2):
            raise ValueError(f"axis: transition tables hold their next states along the last "
                             f"axis, got axis={axis}")
        return operator_hellinger(p, q) if _is_operator_table(p) else operator_hellinger(q, p)
    if is_sparse_table(p) or is_sparse_table(q):
        return _sparse_hellinger(p, q, axis)
    P = np.asarray(p, dtype=np.float64)
    Q = np.asarray(q, dtype=np.float64)
    if (P < 0).any() or (Q < 0).any():
        raise ValueError("p, q: probabilities must be non-negative")
    d2 = 0.5 * np.sum((np.sqrt(P) - np.sqrt(Q)) ** 2, axis=axis)
    return np.sqrt(np.clip(d2, 0.0, 1.0))


def mean_hellinger(p: Any, q: Any, axis: int = -1) -> float:
    """Average of :func:`hellinger` over all rows (e.g. all states, or all state-action pairs; sparse tables too)."""
    return float(np.mean(hellinger(p, q, axis=axis)))


def value_loss(mdp: TabularMDP, expert_policy: Any, estimated_policy: Any) -> float:
    r"""Normalised value loss :math:`\lVert V^{\pi_E} - V^{\hat\pi}\rVert_2 / \lVert V^{\pi_E}\rVert_2`.

    Both value vectors are computed exactly (linear solve) under the true ``mdp``; the norm is
    the Euclidean 2-norm over states (as in Šošić et al., 2018 and the paper's companion code).

    Parameters
    ----------
    mdp : TabularMDP
        True model.
    expert_policy, estimated_policy : array_like of shape (S, A) (or integer (S,))

    Returns
    -------
    float
    """
    V_e = policy_evaluation(mdp, expert_policy)
    V_h = policy_evaluation(mdp, estimated_policy)
    denom = np.linalg.norm(V_e)
    if denom == 0:
        raise ValueError("expert_policy: its value vector is zero, the value loss is undefined")
    return float(np.linalg.norm(V_e - V_h) / denom)


def _start_weights(mdp: TabularMDP, start: Any) -> np.ndarray:
    r"""The start distribution :math:`\mu` of ``start`` (None: the MDP's own, else uniform)."""
    S = mdp.n_states
    if start is None:
        if mdp.initial_distribution is not None:
            return np.asarray(mdp.initial_distribution)
        return np.full(S, 1.0 / S)
    if np.ndim(start) == 0:   # a state: True is not state 1, 1.5 and "1" are not states
        x = start.item() if isinstance(start, np.ndarray) else start
        try:
            state = check_int(x, "start", 0, S - 1)
        except ValueError:
            raise ValueError(f"start: expected a state, an integer in [0, {S - 1}], got "
                             f"{short_repr(x)}") from None
        mu = np.zeros(S)
        mu[state] = 1.0
        return mu
    return check_distribution(start, S, "start")


def expected_return(mdp: TabularMDP, policy: Any, start: Any = None,
                    transitions: Any = None) -> np.ndarray | float:
    r"""Compute the expected discounted return :math:`\sum_s \mu(s) V^\pi(s)` of a policy (exact).

    Parameters
    ----------
    mdp : TabularMDP
    policy : array_like of shape (..., S, A) or integer (..., S)
    start : None, int or array_like of shape (S,)
        None: the MDP's ``initial_distribution`` if it has one, else the uniform average over
        all start states; int: that start state; array: a start distribution :math:`\mu`.
    transitions : array_like of shape (S, A, S) or (M, S, A, S), optional
        Dynamics to evaluate under instead of ``mdp.transitions``.

    Returns
    -------
    float or ndarray of shape (...)
    """
    V = policy_evaluation(mdp, policy, transitions=transitions)
    mu = _start_weights(mdp, start)
    if start is None and mdp.initial_distribution is None:
        out = V.mean(axis=-1)          # the uniform average, as before start distributions
    elif start is not None and np.ndim(start) == 0:
        out = V[..., int(start)]
    else:
        out = V @ mu
    return float(out) if np.ndim(out) == 0 else out


def return_range(mdp: TabularMDP, start: Any = None) -> tuple[float, float]:
    """Expected returns of the uniformly random and of the optimal policy (the normalisers).

    Parameters
    ----------
    mdp : TabularMDP
    start : None, int or array_like of shape (S,)
        As in :func:`expected_return`.

    Returns
    -------
    (uniform, optimal) : tuple of float
    """
    uniform = np.full((mdp.n_states, mdp.n_actions), 1.0 / mdp.n_actions)
    optimal = policy_iteration(mdp).policy
    return (float(expected_return(mdp, uniform, start)),
            float(expected_return(mdp, optimal, start)))


def normalized_return(mdp: TabularMDP, policy: Any, start: Any = None) -> np.ndarray | float:
    r"""Expected return rescaled so that the uniformly random policy scores 0 and the optimal 1.

    .. math:: \frac{J(\pi) - J(\pi_{\mathrm{unif}})}{J(\pi^*) - J(\pi_{\mathrm{unif}})},
              \qquad J(\pi) = \sum_s \mu(s) V^\pi(s).

    Parameters
    ----------
    mdp : TabularMDP
        The true model (terminal states and start distribution included).
    policy : array_like of shape (..., S, A) or integer (..., S)
    start : None, int or array_like of shape (S,)
        As in :func:`expected_return` (default: the MDP's ``initial_distribution``).

    Returns
    -------
    float or ndarray of shape (...)

    See Also
    --------
    normalize_returns : the same rescaling of precomputed returns (scoring many policies).
    """
    return normalize_returns(expected_return(mdp, policy, start), *return_range(mdp, start))


def normalize_returns(values: Any, uniform: float, optimal: float) -> np.ndarray | float:
    r"""Rescale expected returns: ``(values - uniform) / (optimal - uniform)``.

    Parameters
    ----------
    values : float or array_like of shape (...)
        Expected returns :math:`J(\pi)`.
    uniform, optimal : float
        The returns of the uniformly random and the optimal policy (:func:`return_range`).

    Returns
    -------
    float or ndarray of shape (...)

    Raises
    ------
    ValueError
        If ``optimal`` does not exceed ``uniform`` (nothing to normalise by).
    """
    lo, hi = float(uniform), float(optimal)
    if not hi - lo > 1e-12 * max(1.0, abs(hi)):
        raise ValueError(f"mdp: the optimal policy's return ({hi:.6g}) does not exceed the uniform "
                         f"policy's ({lo:.6g}); normalized_return is undefined")
    out = (np.asarray(values, dtype=np.float64) - lo) / (hi - lo)
    return float(out) if out.ndim == 0 else out


def emd(p: Any, q: Any, ground_distance: Any = None, *, coordinates: Any = None) -> float:
    r"""Earth mover's (Wasserstein-1) distance between two distributions, by linear programming.

    Solves :math:`\min_{F \ge 0} \sum_{ij} F_{ij} D_{ij}` s.t. :math:`\sum_j F_{ij} = p_i`,
    :math:`\sum_i F_{ij} = q_j` with :func:`scipy.optimize.linprog` (HiGHS), over the two
    supports only: m x n flows for supports of m and n states, whatever K (no K x K array is
    formed unless ``ground_distance`` is given as one). Intended for small supports (up to a
    few hundred states each); the program is refused up front where its m x n flows cannot fit
    in memory.

    Parameters
    ----------
    p, q : array_like of shape (K,)
        Distributions (each is renormalised to sum one).
    ground_distance : array_like of shape (K, K), optional
        Cost :math:`D_{ij}` of moving mass from i to j.
    coordinates : array_like of shape (K, D), optional
        If ``ground_distance`` is None: Euclidean distances between these points (e.g.
        ``mdp.coordinates`` for the grid's distances). With neither given, the 0/1 distance
        is used (the EMD then equals the total-variation distance).

    Returns
    -------
    float

    Raises
    ------
    corrpriors._memory.MemoryEstimateError
        A ``ValueError`` naming ``p, q``: the linear program of m x n flows would need more
        memory than this process may use (:data:`EMD_BYTES_PER_FLOW` per flow).
    """
    a = np.asarray(p, dtype=np.float64).ravel()
    b = np.asarray(q, dtype=np.float64).ravel()
    if a.shape != b.shape:
        raise ValueError(f"p, q: expected equal shapes (K,), got {a.shape} and {b.shape}")
    if (a < 0).any() or (b < 0).any() or a.sum() <= 0 or b.sum() <= 0:
        raise ValueError("p, q: expected non-negative weights with positive total")
    a, b = a / a.sum(), b / b.sum()
    K = a.size
    # only the supports matter: the costs and the LP on them
    ia, ib = np.flatnonzero(a > 0), np.flatnonzero(b > 0)
    m, n = ia.size, ib.size
    if ground_distance is not None:
        D = np.asarray(ground_distance, dtype=np.float64)
        if D.shape != (K, K):
            raise ValueError(f"ground_distance: expected shape (K, K) = ({K}, {K}), got {D.shape}")
    elif coordinates is not None:
        C = np.asarray(coordinates, dtype=np.float64)
        if C.ndim == 1:
            C = C[:, None]
        if C.shape[0] != K:
            raise ValueError(f"coordinates: expected shape (K, D) with K={K}, got {C.shape}")
    check_memory(EMD_BYTES_PER_FLOW * m * n,
                 f"emd: the linear program between supports of {m:,} and {n:,} states ({m * n:,} "
                 f"flows)", "p, q: compare distributions with smaller supports (coarsen the states, "
                 "or drop negligible weights)")
    if ground_distance is not None:
        Dab = D[np.ix_(ia, ib)]
    elif coordinates is not None:
        Dab = cdist(C[ia], C[ib])
    else:
        Dab = (ia[:, None] != ib[None, :]).astype(np.float64)
    # row i: sum_j F_ij = a_i (columns i n .. i n + n - 1); row m + j: sum_i F_ij = b_j
    flows = np.arange(m * n)
    A_eq = sp.csc_array((np.ones(2 * m * n), (np.concatenate([flows // n, m + flows % n]),
                                               np.concatenate([flows, flows]))),
                        shape=(m + n, m * n))
    b_eq = np.concatenate([a[ia], b[ib]])
    res = linprog(Dab.ravel(), A_eq=A_eq, b_eq=b_eq, bounds=(0, None), method="highs")
    if not res.success:
        raise RuntimeError(f"emd: linear program failed ({res.message})")
    return float(res.fun)


def grid_distances(mdp: TabularMDP, metric: str = "euclidean") -> np.ndarray:
    """Pairwise distances between the states' coordinates, ndarray of shape (S, S).

    Parameters
    ----------
    mdp : TabularMDP
        Must have ``coordinates``.
    metric : str
        Any :func:`scipy.spatial.distance.cdist` metric (``"euclidean"``, ``"cityblock"``).

    Raises
    ------
    corrpriors._memory.MemoryEstimateError
        A ``ValueError``: the 8·S² bytes (75 GiB at 100,000 states) would not fit in the
        memory this process may use; raised before they are allocated.
    """
    if mdp.coordinates is None:
        raise ValueError("mdp: has no coordinates")
    S = mdp.n_states
    check_memory(8.0 * S * S, f"grid_distances: the (S, S) distances of {S:,} states",
                 "compute the rows you need, scipy.spatial.distance.cdist(mdp.coordinates[rows], "
                 "mdp.coordinates), or the neighbours (corrpriors.kernels.lattice_adjacency, "
                 "knn_adjacency)")
    return cdist(mdp.coordinates, mdp.coordinates, metric=metric)


__all__ = ["hellinger", "mean_hellinger", "value_loss", "expected_return", "return_range",
           "normalized_return", "normalize_returns", "emd", "grid_distances"]
