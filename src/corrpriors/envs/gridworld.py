r"""Grid worlds of the paper (section 4), built as explicit :class:`~corrpriors.mdp.TabularMDP` data.

Conventions (shared by every builder here)
------------------------------------------
- Cells are addressed as (row, col) = (y, x); row 0 is the top row of a plot.
- States are the non-wall cells in row-major order: on a grid without walls,
  ``state = row * n_cols + col`` (``np.ravel_multi_index((row, col), shape)``).
- ``coordinates`` are the float (row, col) positions, ndarray of shape (S, 2).
- Actions: 0 = up/north (row - 1), 1 = right/east (col + 1), 2 = down/south (row + 1),
  3 = left/west (col - 1); :data:`ACTION_VECTORS` holds these (d_row, d_col) steps.
- Probability mass that would leave the grid or enter a wall stays in the current cell,
  so every row sums to one exactly (up to round-off).
- Rewards are state rewards :math:`R(s)` collected for the current state.
- Transitions are dense (S, A, S) arrays, or :class:`~corrpriors.mdp.SparseTransitions`
  when the dense table would exceed :data:`~corrpriors.mdp.DENSE_LIMIT_BYTES` (64 MiB,
  about 38 x 38 cells with 4 actions); ``sparse=True`` / ``False`` forces either. The
  numbers are the same bit for bit.

Two motion models:

- ``"gaussian"`` (dense): the next cell is a discretised isotropic Gaussian with standard
  deviation ``step_spread`` centred one cell away in the chosen direction, truncated to a
  square window of half-width ``window`` around the current cell and renormalised over the
  window (the default ``window=None`` uses ``n // 2`` per axis, as the companion code does).
- ``"cardinal"``: the intended neighbour with probability ``success_prob`` (0.7) and each of
  the three other neighbours with ``(1 - success_prob) / 3`` (0.1).
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._memory import check_memory
from .._random import as_generator
from .._validation import check_int, check_real
from ..mdp._sparse import CHUNK_ENTRIES, SparseTransitions, absorb_rows, prefer_sparse
from ..mdp.tabular import TabularMDP

#: Action names in index order.
ACTION_NAMES = ("up", "right", "down", "left")
#: Unit moves (d_row, d_col) of the four actions, ndarray of shape (4, 2).
ACTION_VECTORS = np.array([[-1, 0], [0, 1], [1, 0], [0, -1]], dtype=np.int64)
ACTION_VECTORS.setflags(write=False)


#: The least memory a grid world takes per state, whatever its storage: the coordinates (2
#: float64), the reward (float64) and one transition entry per action (4 x a float64
#: probability and an int32 column) -- a floor, so a shape refused by it cannot be built.
MIN_STATE_BYTES = 16 + 8 + 4 * 12


def _check_shape(shape: Any) -> tuple[int, int]:
    """``shape`` as (n_rows, n_cols), or a ``ValueError`` naming it: two positive integers (a
    fractional size is refused, not truncated: (2.7, 3.9) is not (2, 3)) whose grid can be held
    in memory at :data:`MIN_STATE_BYTES` a state (a 10^6 x 10^6 grid was a numpy MemoryError
    or a hang inside the builder).
    """
    try:
        r, c = shape
        r, c = check_int(r, "shape", 1), check_int(c, "shape", 1)
    except (TypeError, ValueError):
        raise ValueError(f"shape: expected (n_rows, n_cols), two positive integers, got {shape!r}") from None
    check_memory(float(r) * float(c) * MIN_STATE_BYTES, f"shape: a {r} x {c} grid ({r * c:,} states)",
                 "use a smaller shape")
    return r, c


def _cell_of(cell: Any, shape: tuple[int, int], name: str) -> tuple[int, int]:
    try:
        r, c = cell
        r, c = check_int(r, name, -(2**62)), check_int(c, name, -(2**62))   # 1.5 and True refused
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a (row, col) cell of two integers, got {cell!r}") from None
    if not (0 <= r < shape[0] and 0 <= c < shape[1]):
        raise ValueError(f"{name}: cell {cell!r} lies outside the grid {shape}")
    return r, c


def gaussian_kernels(step_spread: float = 1.0, window: int = 5, step_size: float = 1.0) -> np.ndarray:
    """Dense motion kernels of the four actions.

    Parameters
    ----------
    step_spread : float
        Standard deviation of the Gaussian (in cells).
    window : int
        Half-width W of the square window of offsets (``|d_row|, |d_col| <= W``).
    step_size : float
        Distance of the Gaussian's centre from the current cell, in (0, ``window``].

    Returns
    -------
    ndarray of shape (4, 2W + 1, 2W + 1)
        ``kernels[a, W + dr, W + dc]`` = probability of the offset (dr, dc); each kernel sums to one.
    """
    spread = np.float64(_check_spread(step_spread))   # squared under errstate: inf, not OverflowError
    W = _check_window(window)
    step = check_real(step_size, "step_size", 0.0, W, closed="right",
                      expected=f"a real number in (0, window] = (0, {W}] (the move's centre lies in the window)")
    off = np.arange(-W, W + 1, dtype=np.float64)
    dr, dc = np.meshgrid(off, off, indexing="ij")
    kernels = np.empty((4, 2 * W + 1, 2 * W + 1))
    for a, (vr, vc) in enumerate(ACTION_VECTORS):
        d2 = (dr - step * vr) ** 2 + (dc - step * vc) ** 2
        with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
            k = np.exp(-0.5 * d2 / spread ** 2)
            total = k.sum()
            if not (np.isfinite(total) and total > 0):
                # an extreme spread: spread ** 2 over- or underflowed, or every weight underflowed;
                # measure from the nearest offsets (the limit is uniform / the nearest cells)
                k = np.exp(-0.5 * ((d2 - d2.min()) / spread / spread))
                total = k.sum()
        kernels[a] = k / total
    return kernels


def _check_spread(step_spread: Any) -> float:
    """``step_spread`` as a finite positive float, or an error naming it."""
    return check_real(step_spread, "step_spread", 0.0, np.inf, closed="neither",
                      expected="a finite positive number")


def _check_window(window: Any) -> int:
    """``window`` as a positive int whose kernels fit in memory, or an error naming it (2.5,
    ``'2'`` and ``True`` are refused, not coerced).
    """
    W = check_int(window, "window", 1)
    check_memory(8.0 * 8 * (2.0 * W + 1) ** 2, f"window: the Gaussian kernels with window {W} "
                 f"(4 x {2 * W + 1} x {2 * W + 1} offsets)",
                 "pass a smaller window (the Gaussian's mass beyond 6 step_spreads is below 1e-8)")
    return W


def cardinal_kernels(success_prob: float = 0.7) -> np.ndarray:
    """Four-neighbour motion kernels: intended move ``success_prob``, others ``(1 - p) / 3``.

    Returns
    -------
    ndarray of shape (4, 3, 3)
    """
    p = check_real(success_prob, "success_prob", 0.0, 1.0, expected="a probability in [0, 1]")
    kernels = np.zeros((4, 3, 3))
    for a in range(4):
        for b, (vr, vc) in enumerate(ACTION_VECTORS):
            kernels[a, 1 + vr, 1 + vc] = p if a == b else (1.0 - p) / 3.0
    return kernels


def transitions_from_kernels(kernels: Any, shape: tuple[int, int],
                             walls: np.ndarray | None = None, *,
                             sparse: bool | None = None) -> np.ndarray | SparseTransitions:
    """Transition tensor of a grid from per-action offset kernels.

    Parameters
    ----------
    kernels : array_like of shape (A, 2W + 1, 2W + 1)
        Offset probabilities centred on the current cell.
    shape : tuple of int
        Grid (n_rows, n_cols).
    walls : ndarray of bool of shape ``shape``, optional
        Wall cells (not states). Mass that would land outside the grid or on a wall stays put.
    sparse : bool or None
        Build a :class:`~corrpriors.mdp.SparseTransitions` (True), a dense array (False), or
        choose by size (None: sparse when the dense table would exceed
        :data:`~corrpriors.mdp.DENSE_LIMIT_BYTES`). Both hold the same numbers bit for bit.

    Returns
    -------
    ndarray of shape (S, A, S) or SparseTransitions
        S = number of non-wall cells, in row-major order.
    """
    K = np.asarray(kernels, dtype=np.float64)
    if K.ndim != 3 or K.shape[1] != K.shape[2] or K.shape[1] % 2 == 0:
        raise ValueError(f"kernels: expected shape (A, 2W+1, 2W+1), got {K.shape}")
    _check_kernel_values(K)
    W = np.zeros(shape, dtype=bool) if walls is None else np.asarray(walls, dtype=bool)
    free = ~W
    index = np.full(shape, -1, dtype=np.int64)
    index[free] = np.arange(int(free.sum()))
    cells = np.argwhere(free)
    S, A = cells.shape[0], K.shape[0]
    if prefer_sparse(S, A, sparse):
        return _sparse_transitions_from_kernels(K, shape, free, index, cells)
    P = np.zeros((S, A, S))
    states = np.arange(S)
    for di, dj, w in _offsets(K):
        target, _ = _targets(cells, di, dj, shape, free, index)
        np.add.at(P, (states[:, None], np.arange(A)[None, :], target[:, None]), w[None, :])
    return P


def _check_kernel_values(K: np.ndarray) -> None:
    """Refuse kernels that are not probability tables: every weight finite and non-negative and
    every action's kernel summing to one (a ``ValueError`` naming ``kernels``), so that each row of
    the transition table is a distribution.
    """
    if K.shape[0] == 0:
        raise ValueError("kernels: expected at least one action, got shape (0, ...)")
    if not np.isfinite(K).all():
        raise ValueError("kernels: expected finite offset probabilities, got NaN or infinite values")
    if (K < 0).any():
        raise ValueError(f"kernels: expected non-negative offset probabilities, found {K.min():g}")
    totals = K.sum(axis=(1, 2))
    bad = np.flatnonzero(~(np.abs(totals - 1.0) <= 1e-6))
    if bad.size:
        a = int(bad[0])
        raise ValueError(f"kernels: each action's kernel must sum to one, action {a} sums to {totals[a]:g} "
                         f"(divide each kernels[a] by its sum)")


def _offsets(K: np.ndarray) -> list[tuple[int, int, np.ndarray]]:
    """The offsets (d_row, d_col) with some positive weight, in raster order, with their weights (A,)."""
    half = K.shape[1] // 2
    return [(int(i) - half, int(j) - half, K[:, i, j]) for i, j in np.argwhere(K.any(axis=0))]


def _targets(cells: np.ndarray, di: int, dj: int, shape: tuple[int, int], free: np.ndarray,
             index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Next state of every cell under the offset (di, dj): the target cell, or the cell itself
    when the target is off the grid or a wall; and the mask of moves that happen.
    """
    r, c = cells[:, 0] + di, cells[:, 1] + dj
    inside = (r >= 0) & (r < shape[0]) & (c >= 0) & (c < shape[1])
    ok = inside.copy()
    ok[inside] = free[r[inside], c[inside]]
    target = np.arange(cells.shape[0])
    target[ok] = index[r[ok], c[ok]]
    return target, ok


def _check_sparse_size(n_rows: int, n_slots: int) -> None:
    """Refuse a build whose entries alone would exceed the machine's memory (clear error, no MemoryError)."""
    need = 12 * n_rows * n_slots
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        return
    if need > total:
        raise ValueError(f"window: the motion kernel has {n_slots} offsets per move, i.e. up to "
                         f"{n_rows * n_slots:.3g} transitions ({need / 2**30:.1f} GiB) for "
                         f"{n_rows} (state, action) pairs, more than this machine's memory; pass a "
                         f"smaller window (the Gaussian's mass beyond 6 step_spreads is below 1e-8)")


def _sparse_transitions_from_kernels(K: np.ndarray, shape: tuple[int, int], free: np.ndarray,
                                     index: np.ndarray, cells: np.ndarray) -> SparseTransitions:
    """The sparse table of :func:`transitions_from_kernels`, built in blocks of states.

    Row (s, a) lists its moves in the kernel's raster order, which is the order of the next
    states (states are row-major cells), with the "stay" entry at the centre offset. The stay
    probability accumulates the centre weight and every blocked move in raster order -- the
    additions of the dense ``np.add.at`` -- so the values equal the dense table's bit for bit.
    """
    S, A = cells.shape[0], K.shape[0]
    _check_sparse_size(S * A, int(np.count_nonzero(K.any(axis=0))) + 1)
    offsets = _offsets(K)
    centre = sum(1 for di, dj, _ in offsets if (di, dj) < (0, 0))   # slot of the stay entry
    moves = [(di, dj, w) for di, dj, w in offsets if (di, dj) != (0, 0)]
    stay_w = next((w for di, dj, w in offsets if (di, dj) == (0, 0)), np.zeros(A))
    n_slots = len(moves) + 1
    block = max(1, CHUNK_ENTRIES // (A * n_slots))
    index_type = np.int32 if S * A * n_slots < 2**31 else np.int64
    data = np.empty(S * A * n_slots)                 # filled block by block, then cut to size
    indices = np.empty(S * A * n_slots, dtype=index_type)
    counts, filled = [], 0
    for lo in range(0, S, block):
        ids = np.arange(lo, min(S, lo + block))
        cols = np.empty((ids.size, A, n_slots), dtype=np.int64)
        vals = np.zeros((ids.size, A, n_slots))
        stay = np.zeros((ids.size, A))
        slot = 0
        for di, dj, w in offsets:
            if (di, dj) == (0, 0):
                stay += stay_w[None, :]
                continue
            if slot == centre:
                slot += 1
            target, ok = _targets(cells[ids], di, dj, shape, free, index)
            cols[:, :, slot] = target[:, None]
            vals[:, :, slot] = np.where(ok[:, None], w[None, :], 0.0)
            stay[~ok] += w[None, :]
            slot += 1
        cols[:, :, centre] = ids[:, None]
        vals[:, :, centre] = stay
        keep = (vals != 0).reshape(-1, n_slots)
        counts.append(keep.sum(axis=1))
        n = int(counts[-1].sum())
        indices[filled:filled + n] = cols.reshape(-1, n_slots)[keep]
        data[filled:filled + n] = vals.reshape(-1, n_slots)[keep]
        filled += n
    indptr = np.concatenate([[0], np.cumsum(np.concatenate(counts))]).astype(index_type)
    M = sp.csr_array((data[:filled].copy() if filled < 0.8 * data.size else data[:filled],
                      indices[:filled].copy() if filled < 0.8 * data.size else indices[:filled], indptr),
                     shape=(S * A, S))
    return SparseTransitions(M, copy=False)


def _grid_mdp(P, rewards, discount, shape, walls, name) -> TabularMDP:
    free = np.ones(shape, dtype=bool) if walls is None else ~np.asarray(walls, dtype=bool)
    coords = np.argwhere(free).astype(np.float64)
    return TabularMDP(P, rewards, discount, coordinates=coords, shape=shape, walls=walls, name=name,
                      action_vectors=ACTION_VECTORS)


#: The default window of the Gaussian moves reaches this many step spreads beyond the move's
#: centre: the normal tail cut off is below 1e-9 (relative) on every side.
WINDOW_SPREADS = 6.0


def _default_window(shape: tuple[int, int], window: int | None, step_spread: float) -> int:
    """``window``, or the default: ``max(shape) // 2``, capped at the move plus
    :data:`WINDOW_SPREADS` step spreads (at least 1).
    """
    if window is not None:
        return _check_window(window)
    reach = math.ceil(1.0 + WINDOW_SPREADS * _check_spread(step_spread))
    return max(min(max(shape) // 2, reach), 1)


def dense_gridworld(shape: tuple[int, int] = (10, 10), step_spread: float = 1.0,
                    window: int | None = None, rewards: Any = None,
                    discount: float = 0.9, *, sparse: bool | None = None) -> TabularMDP:
    """Grid with dense Gaussian moves in the four cardinal directions.

    Parameters
    ----------
    shape : tuple of int
        (n_rows, n_cols); default the paper's 10 x 10.
    step_spread : float
        Standard deviation of the Gaussian move (cells).
    window : int, optional
        Half-width of the truncation window around the current cell (default ``max(shape) // 2``
        capped at ``ceil(1 + 6 step_spread)``, see :data:`WINDOW_SPREADS`: 5 on the paper's
        10 x 10 grid, 7 on any grid of 16 x 16 or more with ``step_spread=1``).
    rewards : array_like of shape (S,) or (S, A), optional
        Default zeros.
    discount : float
    sparse : bool or None
        Transitions as a :class:`~corrpriors.mdp.SparseTransitions` (True), dense (False) or
        by size (None: sparse above :data:`~corrpriors.mdp.DENSE_LIMIT_BYTES`); the numbers
        are the same bit for bit.

    Returns
    -------
    TabularMDP
        With ``coordinates`` (S, 2) = (row, col), ``shape`` set, S = n_rows * n_cols.
    """
    shape = _check_shape(shape)
    kernels = gaussian_kernels(step_spread, _default_window(shape, window, step_spread))
    P = transitions_from_kernels(kernels, shape, sparse=sparse)
    R = np.zeros(P.shape[0]) if rewards is None else rewards
    return _grid_mdp(P, R, discount, shape, None, "DenseGridworld")


def tunnel_world(shape: tuple[int, int] = (10, 10), goal: Any = None, start: Any = (0, 0),
                 step_spread: float = 1.0, window: int | None = None,
                 discount: float = 0.9, *, sparse: bool | None = None) -> TabularMDP:
    """Build the "Grid10"-like domain of the system-identification and PSRL experiments.

    The dense grid of :func:`dense_gridworld` with state reward :math:`R(s) = 1` at the
    ``goal`` cell (default the corner ``(n_rows - 1, n_cols - 1)`` = (9, 9)) and 0 elsewhere.
    From the goal, every action moves the agent deterministically to ``start`` (default (0, 0)),
    so the reward is paid once per visit, on leaving the goal.

    Parameters
    ----------
    shape : tuple of int
    goal, start : tuple of int, optional
        (row, col) cells.
    step_spread : float
    window : int, optional
        As in :func:`dense_gridworld` (pass a small one for large grids).
    discount : float
        Default 0.9.
    sparse : bool or None
        As in :func:`dense_gridworld`.

    Returns
    -------
    TabularMDP
    """
    shape = _check_shape(shape)
    g = _cell_of((shape[0] - 1, shape[1] - 1) if goal is None else goal, shape, "goal")
    s0 = _cell_of(start, shape, "start")
    if g == s0:
        raise ValueError("goal, start: must be different cells")
    kernels = gaussian_kernels(step_spread, _default_window(shape, window, step_spread))
    P = transitions_from_kernels(kernels, shape, sparse=sparse)
    gi, si = np.ravel_multi_index(g, shape), np.ravel_multi_index(s0, shape)
    if isinstance(P, SparseTransitions):
        P = absorb_rows(P, [gi], [si])
    else:
        P[gi] = 0.0
        P[gi, :, si] = 1.0
    R = np.zeros(P.shape[0])
    R[gi] = 1.0
    return _grid_mdp(P, R, discount, shape, None, "TunnelWorld")


def goal_gridworld(shape: tuple[int, int] = (10, 10), n_rewards: int = 3, *, rng: Any,
                   motion: str = "cardinal", success_prob: float = 0.7, step_spread: float = 1.0,
                   window: int | None = None, discount: float = 0.9,
                   sparse: bool | None = None) -> TabularMDP:
    """Imitation-learning grid: reward 1 at ``n_rewards`` random cells.

    Parameters
    ----------
    shape : tuple of int
        Default 10 x 10.
    n_rewards : int
        Number of reward cells, drawn uniformly without replacement.
    rng : int, Generator or None
        Randomness for the reward layout (required; pass a seed for a fixed layout).
    motion : {"cardinal", "gaussian"}
        ``"cardinal"``: intended neighbour ``success_prob``, each other neighbour
        ``(1 - success_prob) / 3``; ``"gaussian"``: the dense moves of :func:`dense_gridworld`.
    success_prob : float
        Default 0.7 (others then get 0.1 each).
    step_spread, window : float, int
        Dense-motion parameters (``motion="gaussian"``).
    discount : float
    sparse : bool or None
        As in :func:`dense_gridworld`.

    Returns
    -------
    TabularMDP
    """
    shape = _check_shape(shape)
    S = shape[0] * shape[1]
    n = check_int(n_rewards, "n_rewards", 0, S)
    gen = as_generator(rng)
    if motion == "cardinal":
        kernels = cardinal_kernels(success_prob)
    elif motion == "gaussian":
        kernels = gaussian_kernels(step_spread, _default_window(shape, window, step_spread))
    else:
        raise ValueError(f"motion: expected 'cardinal' or 'gaussian', got {motion!r}")
    P = transitions_from_kernels(kernels, shape, sparse=sparse)
    R = np.zeros(S)
    R[gen.choice(S, size=n, replace=False)] = 1.0
    return _grid_mdp(P, R, discount, shape, None, "GoalGridworld")


def default_walls(shape: tuple[int, int] = (11, 11)) -> np.ndarray:
    """Wall mask of the subgoal domain: wall columns x=3 (open at y=7) and x=7 (open at y=3).

    Returns
    -------
    ndarray of bool of shape ``shape``
        ``walls[y, x]``; for 11 x 11 there are 20 wall cells and 101 states.
    """
    shape = _check_shape(shape)
    if shape[0] < 8 or shape[1] < 8:
        raise ValueError(f"shape: the default walls need at least 8 x 8 cells, got {shape}")
    W = np.zeros(shape, dtype=bool)
    W[:, 3] = True
    W[7, 3] = False
    W[:, 7] = True
    W[3, 7] = False
    return W


def wall_world(shape: tuple[int, int] = (11, 11), walls: Any = None,
               reward_states: Any = (10, 90), success_prob: float = 0.7,
               discount: float = 0.9, *, sparse: bool | None = None) -> TabularMDP:
    """Subgoal domain: two wall columns, cardinal 0.7/0.1 moves, two reward states.

    Parameters
    ----------
    shape : tuple of int
        Default 11 x 11.
    walls : array_like of bool of shape ``shape``, optional
        Default :func:`default_walls` (columns x=3 and x=7, open at y=7 and y=3).
    reward_states : sequence of int
        State indices (row-major over the non-wall cells) with reward 1; the defaults 10 and
        90 are the cells (1, 1) and (9, 9).
    success_prob : float
    discount : float
    sparse : bool or None
        As in :func:`dense_gridworld`.

    Returns
    -------
    TabularMDP
        S = number of non-wall cells (101 for the default); walls are not states.
    """
    shape = _check_shape(shape)
    W = default_walls(shape) if walls is None else np.asarray(walls, dtype=bool)
    if W.shape != shape:
        raise ValueError(f"walls: expected shape {shape}, got {W.shape}")
    P = transitions_from_kernels(cardinal_kernels(success_prob), shape, W, sparse=sparse)
    S = P.shape[0]
    idx = np.asarray(reward_states)
    if idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer) or (idx < 0).any() or (idx >= S).any():
        raise ValueError(f"reward_states: expected state indices in [0, {S - 1}], got {reward_states!r}")
    R = np.zeros(S)
    R[idx] = 1.0
    return _grid_mdp(P, R, discount, shape, W, "WallWorld")


__all__ = ["ACTION_NAMES", "ACTION_VECTORS", "WINDOW_SPREADS", "gaussian_kernels", "cardinal_kernels",
           "transitions_from_kernels", "dense_gridworld", "tunnel_world", "goal_gridworld",
           "default_walls", "wall_world"]
