r"""Families of related grid worlds with hidden parameters (for transfer between tasks).

Windy tunnel worlds
-------------------
Every task is an ``n_rows x n_cols`` grid (states = cells, actions up/right/down/left as in
:mod:`corrpriors.envs.gridworld`). Acting moves the agent by a displacement :math:`d` of the 3 x 3
neighbourhood (staying included) with probability

.. math::

    P(d \mid s, a) \propto \exp\big(\kappa\,\langle d,\; R_\phi v_a + w(s)\rangle
                                   - \lambda\,\lVert d\rVert^2\big),

with :math:`v_a` the action's unit move, :math:`R_\phi` a rotation by the task's *heading
offset* :math:`\phi`, :math:`w(s)` the task's *wind field* (a smooth random vector field over the
cells), :math:`\kappa` the *drive* (how firmly the agent follows heading and wind) and
:math:`\lambda` the *damping* (how strongly long moves are suppressed; with :math:`\kappa = 2,
\lambda = 1` and no wind the intended cell gets 0.41, staying and the two forward diagonals 0.15
each). A move that leaves the grid keeps the agent in place. As in the paper's tunnel world the
goal cell pays 1 and every action there jumps back to the start cell.

The hidden parameters of a task are :math:`(\phi, \kappa, \lambda, w)`. A *family* draws a
target task (:math:`\phi = 0, \kappa = 2, \lambda = 1`, wind :math:`w_T`) and source tasks whose
parameters lie closer to the target's the larger the *relatedness* :math:`r \in [0, 1]`:

.. math::

    w_u = r\,w_T + \sqrt{1 - r^2}\,w'_u, \quad \phi_u = (1 - r)\,U(-\pi, \pi), \quad
    \kappa_u = r\,\kappa_T + (1 - r)\,U(0.5, 4), \quad \lambda_u = r\,\lambda_T + (1 - r)\,U(0, 2),

with independent winds :math:`w'_u`. At :math:`r = 1` a source is the target (pooling all data
is then right); at :math:`r = 0` its heading, noise and wind are drawn independently of the
target's, so its dynamics say nothing about the target's beyond the shared grid (negative
transfer is possible and measured); in between the sources share the target's structure with
differences (a partly turned heading, other gusts), which is where a learned similarity should
beat both ignoring and pooling the sources. The winds are Gaussian-process draws (squared
exponential, length scale ``wind_lengthscale`` cells, standard deviation ``wind_amplitude`` per
component), the same smoothness the correlated prior assumes -- a family where transfer *can*
work, chosen on purpose; how well it works and when it fails is what the transfer experiment
measures.

Sources that share nothing
--------------------------
Even at :math:`r = 0` the tasks share the grid (a move off the grid stays), the goal's jump back
to the start and the *form* of the motion noise (mass on the 3 x 3 neighbourhood, damped long
moves), so a model of the sources can still predict part of the target's data.
``relabel_sources=True`` removes that: every source task is relabelled by its own uniformly random
permutation :math:`\pi_u` of the cells, :math:`P_u'(\pi_u(s') \mid \pi_u(s), a) = P_u(s' \mid s, a)`
(rewards moved alike). A relabelled source is the same kind of MDP, but in the target's cell
coordinates its moves land anywhere, its goal is elsewhere and its edges are not the grid's: it
shares nothing with the target beyond the number of states and actions -- the family in which
a learned similarity must go to zero.

Slippery lakes
--------------
A second family, of another kind (:func:`lake_task_family`): FrozenLake-like grids whose
dynamics change *abruptly* from cell to cell. An action moves the agent one cell in its
direction with probability :math:`1 - \varepsilon` and to each of the two perpendicular cells with
:math:`\varepsilon / 2` (the *slip* :math:`\varepsilon`; FrozenLake's slippery lake is
:math:`\varepsilon = 2/3`). A move off the grid keeps the agent in place; a move into a *hole*
drops the agent back to the start, and so does every action taken in a hole; the goal pays 1 and
jumps back to the start. The hidden parameters are the slip, the hole layout and the directions
the four actions move in. The target has slip 0.2, the usual directions and holes drawn
independently per cell with probability ``hole_density``; a source of relatedness :math:`r`

- slips :math:`\varepsilon_u = r\,\varepsilon_T + (1 - r)\,U(0, 2/3)`,
- copies each cell's hole-or-not from the target with probability :math:`r`, else draws it
  afresh with probability ``hole_density``,
- moves as the target with probability :math:`r`, else its four actions move in a uniformly
  random permutation of the four directions.

Every layout is redrawn until a path of free cells joins the start to the goal. Where the
windy family's tasks differ smoothly, the lakes' layouts differ cell by cell: the prior's
smoothness assumption is wrong at every hole, so this family measures whether transfer still
helps, and does no harm, where neighbouring states do not share dynamics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._memory import check_memory
from .._random import as_generator
from .._validation import check_bool, check_int, check_real
from ..mdp._sparse import SparseTransitionRewards, SparseTransitions
from ..mdp.tabular import TabularMDP
from .gridworld import ACTION_VECTORS, _cell_of, _check_shape, _targets

#: The most source tasks a family draws. Every task is a dense (S, A, S) model (320 kB on the
#: default 10 x 10 grid: 320 MB at this bound) and the windy family draws an S-cell wind per
#: source, so the bound keeps a slip such as ``n_sources=10**9`` from running without end while
#: leaving far more sources than transfer needs: the multi-task model pools the sources' data
#: into one source model per task, and the transfer experiment uses at most 20. (A family whose
#: tables cannot fit in memory together is refused before anything is drawn.)
MAX_SOURCES = 1000

#: Dense (S, 4, S) tables held at the peak of building one task: the table and the TabularMDP's
#: read-only copy of it (tracemalloc traced 2.01-2.19 tables for one grid of 10 x 10 to 30 x 30
#: cells).
TASK_PEAK_TABLES = 2

#: Largest wind amplitude (cells): far beyond any wind that changes the dynamics (from about 10
#: the moves follow the wind deterministically), and small enough that the move logits
#: (drive x wind) stay finite.
MAX_WIND_AMPLITUDE = 1e100

#: Drive and damping of the target task.
TARGET_DRIVE, TARGET_DAMPING = 2.0, 1.0
#: Ranges of the independently drawn drive and damping (relatedness 0).
DRIVE_RANGE, DAMPING_RANGE = (0.5, 4.0), (0.0, 2.0)

_MOVES = np.array([(i, j) for i in (-1, 0, 1) for j in (-1, 0, 1)], dtype=np.float64)


def _check_dense_grid(shape: tuple[int, int], what: str, n_tables: float = TASK_PEAK_TABLES,
                      alternative: str = "pass a smaller grid") -> None:
    """Refuse, naming ``shape``, ``n_tables`` dense (S, 4, S) float tables of ``shape`` held at
    once when they cannot fit in memory.
    """
    S = float(shape[0]) * float(shape[1])
    table = 8.0 * 4.0 * S * S
    check_memory(n_tables * table, f"shape: {what} on the grid {shape} ({int(S):,} states: {n_tables:g} "
                                   f"dense (S, 4, S) tables of {table / 2**20:,.1f} MiB each at its peak)",
                 alternative)


def _check_amplitude(amplitude: Any, name: str) -> float:
    """``amplitude`` as a wind amplitude in [0, :data:`MAX_WIND_AMPLITUDE`], naming ``name``."""
    return check_real(amplitude, name, 0.0, MAX_WIND_AMPLITUDE,
                      expected=f"a finite non-negative number at most {MAX_WIND_AMPLITUDE:g}")


def _check_lengthscale(lengthscale: Any, name: str) -> float:
    return check_real(lengthscale, name, 0.0, closed="right", expected="a finite positive number")


def _cells(shape: tuple[int, int]) -> np.ndarray:
    return np.array([(i, j) for i in range(shape[0]) for j in range(shape[1])], dtype=np.float64)


def _moved(shape: tuple[int, int], move: Any) -> np.ndarray:
    """Next state of every cell (row-major) under the step ``move`` = (d_row, d_col), the cell
    itself where the step would leave the grid (:func:`~.gridworld._targets` without walls).
    """
    S = shape[0] * shape[1]
    target, _ = _targets(_cells(shape).astype(np.int64), int(move[0]), int(move[1]), shape,
                         np.ones(shape, dtype=bool), np.arange(S).reshape(shape))
    return target


def _goal_and_start(shape: tuple[int, int], goal: Any, start: Any) -> tuple[int, int]:
    """State indices of ``goal`` (None: the far corner) and ``start``, which must differ."""
    g = _cell_of((shape[0] - 1, shape[1] - 1) if goal is None else goal, shape, "goal")
    s0 = _cell_of(start, shape, "start")
    if g == s0:
        raise ValueError("goal, start: must be different cells")
    return int(np.ravel_multi_index(g, shape)), int(np.ravel_multi_index(s0, shape))


#: Largest grid (cells) :func:`smooth_wind` accepts: its dense covariance's eigendecomposition
#: costs O(S^3) time, about a minute at this size.
MAX_WIND_CELLS = 6000


def smooth_wind(shape: tuple[int, int] = (10, 10), *, rng: Any, amplitude: float = 0.5,
                lengthscale: float = 3.0) -> np.ndarray:
    """A smooth random wind field: two independent Gaussian-process draws over the cells.

    Parameters
    ----------
    shape : (int, int)
        Grid (n_rows, n_cols).
    rng : int, Generator or None
        Randomness (required).
    amplitude : float
        Standard deviation of each component (cells).
    lengthscale : float
        Length scale of the squared-exponential covariance ``exp(-d^2 / l^2)`` (cells).

    Returns
    -------
    ndarray of shape (S, 2)
        Wind (d_row, d_col) per cell, row-major.
    """
    shape = _check_shape(shape)
    amplitude = _check_amplitude(amplitude, "amplitude")
    lengthscale = _check_lengthscale(lengthscale, "lengthscale")
    gen = as_generator(rng)
    root = _wind_root(shape, lengthscale)
    return float(amplitude) * (root @ gen.standard_normal((root.shape[0], 2)))


def _wind_root(shape: tuple[int, int], lengthscale: float) -> np.ndarray:
    """A square root (S, S) of the squared-exponential covariance of the cells: the winds are
    ``amplitude * (root @ standard_normal((S, 2)))``. Costs O(S^3) time: a family computes it
    once for all its winds.
    """
    S = shape[0] * shape[1]
    if S > MAX_WIND_CELLS:
        raise ValueError(f"shape: smooth_wind on {shape} ({S:,} cells) would build a dense {S:,} x {S:,} "
                         f"covariance and take its eigendecomposition, O(S^3) time; at most "
                         f"{MAX_WIND_CELLS:,} cells are allowed (pass wind= to windy_gridworld for larger grids)")
    check_memory(8.0 * 4 * S * S, f"shape: smooth_wind on {shape} ({S:,} cells): the dense covariance",
                 "pass a smaller grid")
    cells = _cells(shape)
    d2 = ((cells[:, None, :] - cells[None, :, :]) ** 2).sum(-1)
    scale2 = lengthscale * lengthscale   # inf at l = 1e300 (one constant field), 0 at 1e-300
    with np.errstate(divide="ignore", invalid="ignore"):   # (independent cells); ** raised there
        K = np.exp(-d2 / scale2)
    K[d2 == 0] = 1.0                       # a cell with itself (0 / 0 at l = 1e-300)
    w, V = np.linalg.eigh(K)                       # PSD square root (K is often singular)
    return V * np.sqrt(np.clip(w, 0.0, None))


def windy_gridworld(shape: tuple[int, int] = (10, 10), wind: Any = None, heading: float = 0.0,
                    drive: float = TARGET_DRIVE, damping: float = TARGET_DAMPING, goal: Any = None,
                    start: Any = (0, 0), discount: float = 0.9) -> TabularMDP:
    r"""One windy tunnel world (module docstring).

    Parameters
    ----------
    shape : (int, int)
    wind : array_like of shape (S, 2), optional
        :math:`w(s)` per cell (row-major); default no wind.
    heading : float
        :math:`\phi` (radians).
    drive, damping : float
        :math:`\kappa > 0` and :math:`\lambda \ge 0`.
    goal, start : (int, int), optional
        Goal (default the far corner) and start cells; the goal pays 1 and jumps to the start.
        ``goal=False`` builds the grid without goal and jump (``start`` must still be a cell).
    discount : float

    Returns
    -------
    TabularMDP
        With ``coordinates`` (S, 2) and ``shape`` set.

    Raises
    ------
    ValueError
        Move logits that overflow (a wind or drive near the largest float), naming ``wind, drive,
        damping``.
    corrpriors._memory.MemoryEstimateError
        A dense (S, 4, S) table that cannot fit in memory, naming ``shape``, before it is built.
    """
    shape = _check_shape(shape)
    _check_dense_grid(shape, "windy_gridworld")
    cells = _cells(shape)
    S = cells.shape[0]
    w = np.zeros((S, 2)) if wind is None else np.asarray(wind, dtype=np.float64)
    if w.shape != (S, 2) or not np.all(np.isfinite(w)):
        raise ValueError(f"wind: expected a finite array of shape (S, 2) = ({S}, 2), got {w.shape}")
    drive = check_real(drive, "drive", 0.0, closed="right", expected="a finite positive number")
    damping = check_real(damping, "damping", 0.0, expected="a finite non-negative number")
    heading = check_real(heading, "heading", expected="a finite angle")
    c, s = np.cos(heading), np.sin(heading)
    rot = np.array([[c, -s], [s, c]])
    P = np.zeros((S, 4, S))
    rows = np.arange(S)
    for a in range(4):
        v = rot @ ACTION_VECTORS[a].astype(np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            logits = drive * ((v[None, :] + w) @ _MOVES.T) - damping * (_MOVES ** 2).sum(1)   # (S, 9)
            logits = logits - logits.max(axis=1, keepdims=True)
        if not np.all(np.isfinite(logits)):
            raise ValueError(f"wind, drive, damping: the move logits drive * <d, v + wind> - damping * |d|^2 "
                             f"overflow (largest |wind| {np.abs(w).max():g}, drive {drive:g}, damping "
                             f"{damping:g}); use values far below 1e300")
        p = np.exp(logits)
        p /= p.sum(axis=1, keepdims=True)
        for k, d in enumerate(_MOVES):
            np.add.at(P, (rows, np.full(S, a), _moved(shape, d)), p[:, k])
    R = np.zeros(S)
    if goal is not False:
        gi, si = _goal_and_start(shape, goal, start)
        P[gi] = 0.0
        P[gi, :, si] = 1.0
        R[gi] = 1.0
    else:
        _cell_of(start, shape, "start")   # unused, but an off-grid start is a mistake
    return TabularMDP(P, R, discount, coordinates=cells, shape=shape, name="WindyTunnelWorld")


@dataclass(frozen=True)
class TaskParameters:
    """Hidden parameters of one windy tunnel world.

    Attributes
    ----------
    heading, drive, damping : float
    wind : ndarray of shape (S, 2)
    """

    heading: float
    drive: float
    damping: float
    wind: np.ndarray


def windy_task_family(relatedness: float, n_sources: int, *, rng: Any,
                      shape: tuple[int, int] = (10, 10), wind_amplitude: float = 0.5,
                      wind_lengthscale: float = 3.0, discount: float = 0.9,
                      relabel_sources: bool = False
                      ) -> tuple[list[TabularMDP], list[TaskParameters]]:
    r"""Draw a target task and ``n_sources`` source tasks of the given relatedness.

    Parameters
    ----------
    relatedness : float
        :math:`r \in [0, 1]` (module docstring).
    n_sources : int
        Number of source tasks, in [0, :data:`MAX_SOURCES`].
    rng : int, Generator or None
        Randomness (required): the target's wind first, then per source its own wind, heading,
        drive and damping.
    shape : (int, int)
        Grid (n_rows, n_cols), at least two cells; the start is the top-left cell and the goal
        the bottom-right one.
    wind_amplitude, wind_lengthscale : float
        Of :func:`smooth_wind`.
    discount : float
    relabel_sources : bool, default False
        Relabel every source's cells by its own random permutation (module docstring: sources
        that share nothing with the target); drawn after everything else, so the tasks'
        parameters are those of the same ``rng`` without relabelling.

    Returns
    -------
    mdps : list of TabularMDP
        The sources, then the target (last).
    params : list of TaskParameters
        Their hidden parameters, in the same order.
    """
    r, shape = _check_family(relatedness, n_sources, relabel_sources, shape)
    amplitude = _check_amplitude(wind_amplitude, "wind_amplitude")
    lengthscale = _check_lengthscale(wind_lengthscale, "wind_lengthscale")
    _check_family_memory(shape, n_sources, "the windy family")
    gen = as_generator(rng)
    root = _wind_root(shape, lengthscale)   # once for all the winds (O(S^3)): smooth_wind's draws
    S = root.shape[0]
    w_target = amplitude * (root @ gen.standard_normal((S, 2)))
    params = []
    for _ in range(int(n_sources)):
        w_own = amplitude * (root @ gen.standard_normal((S, 2)))
        heading = (1.0 - r) * gen.uniform(-np.pi, np.pi)
        drive = r * TARGET_DRIVE + (1.0 - r) * gen.uniform(*DRIVE_RANGE)
        damping = r * TARGET_DAMPING + (1.0 - r) * gen.uniform(*DAMPING_RANGE)
        params.append(TaskParameters(float(heading), float(drive), float(damping),
                                     r * w_target + np.sqrt(1.0 - r * r) * w_own))
    params.append(TaskParameters(0.0, TARGET_DRIVE, TARGET_DAMPING, w_target))
    mdps = [windy_gridworld(shape, p.wind, p.heading, p.drive, p.damping, discount=discount)
            for p in params]
    return _relabel_sources(mdps, relabel_sources, gen), params


def _check_family(relatedness: Any, n_sources: Any, relabel_sources: Any, shape: Any
                  ) -> tuple[float, tuple[int, int]]:
    """The arguments every family checks before drawing: ``relatedness`` a number in [0, 1] (not
    a bool or a string), ``n_sources`` an integer in [0, :data:`MAX_SOURCES`], ``relabel_sources``
    a bool and ``shape`` two positive integers with at least two cells (a start and a goal).

    Returns
    -------
    relatedness : float
    shape : (int, int)
    """
    r = check_real(relatedness, "relatedness", 0.0, 1.0)
    check_int(n_sources, "n_sources", 0, MAX_SOURCES)
    check_bool(relabel_sources, "relabel_sources")
    rows, cols = _check_shape(shape)
    if rows * cols < 2:
        raise ValueError(f"shape: expected at least two cells (a start and a goal), got {shape!r}")
    return r, (rows, cols)


def _check_family_memory(shape: tuple[int, int], n_sources: int, what: str) -> None:
    """Refuse, before anything is drawn, a family whose dense tables cannot fit together: the
    ``n_sources + 1`` tasks' tables are held at once, plus a task being built or relabelled (two
    tables) and the wind covariance's root (a quarter table). tracemalloc traced n_sources + 2.0
    to 2.5 tables (n_sources + 3.0 to 3.6 relabelled one at a time; 2 n_sources + 2 when the
    relabelled list was built beside the original one) for 0 to 8 sources on grids of 10 x 10
    and 30 x 30 cells: n_sources + 4 bounds them.
    """
    _check_dense_grid(shape, what, float(n_sources) + 4.0, "pass a smaller grid or fewer sources")


def _relabel_sources(mdps: list[TabularMDP], relabel: bool, gen: np.random.Generator) -> list[TabularMDP]:
    """``mdps`` with every source (all but the last) relabelled by its own random permutation
    (one at a time, so the original of a relabelled source is freed before the next one).
    """
    if relabel:
        for k in range(len(mdps) - 1):
            mdps[k] = relabel_states(mdps[k], gen.permutation(mdps[k].n_states))
    return mdps


def relabel_states(mdp: TabularMDP, permutation: Any) -> TabularMDP:
    r"""The MDP with state :math:`s` renamed :math:`\pi(s)` (coordinates kept, dynamics moved).

    Parameters
    ----------
    mdp : TabularMDP
        Dense or sparse transitions; state, state-action or dense transition rewards (sparse
        transition rewards, :class:`~corrpriors.mdp.SparseTransitionRewards`, are refused).
    permutation : array_like of int, shape (S,)
        :math:`\pi`: a permutation of ``range(S)``.

    Returns
    -------
    TabularMDP
        ``P'[pi[s], a, pi[s']] = P[s, a, s']``, rewards moved alike (``R'[pi[s]] = R[s]``,
        ``R'[pi[s], a] = R[s, a]``, ``R'[pi[s], a, pi[s']] = R[s, a, s']``), ``terminal`` and
        ``initial_distribution`` moved alike (``mu'[pi[s]] = mu[s]``), so every policy
        :math:`\sigma` has the expected return of :math:`\sigma'(\pi(s)) = \sigma(s)` on the
        original. ``mdp``'s coordinates, shape and walls are kept (the relabelled task lives on
        the same grid: state ``k`` keeps the cell of state ``k``) and so are its
        ``action_vectors`` (the actions are not renamed); ``boundary`` is not kept (None): the
        relabelled moves are not moves between neighbouring coordinates.
    """
    if not isinstance(mdp, TabularMDP):
        raise TypeError(f"mdp: expected a TabularMDP, got {type(mdp).__name__}")
    S, A = mdp.n_states, mdp.n_actions
    pi = np.asarray(permutation)
    if pi.dtype.kind not in "iu":   # 1.0 is not an index (nor True)
        raise ValueError(f"permutation: expected integers, got an array of dtype {pi.dtype}")
    if pi.shape != (S,) or not np.array_equal(np.sort(pi), np.arange(S)):
        raise ValueError(f"permutation: expected a permutation of range({S}), got shape {pi.shape}")
    if isinstance(mdp.rewards, SparseTransitionRewards):
        raise ValueError("mdp: its rewards are sparse transition rewards (SparseTransitionRewards), which "
                         "relabel_states does not relabel; give dense rewards")
    pi = pi.astype(np.int64)
    actions = np.arange(A)
    Pn: np.ndarray | SparseTransitions
    if isinstance(mdp.transitions, SparseTransitions):
        M = sp.coo_array(mdp.transitions.matrix)
        s, a = np.divmod(M.row.astype(np.int64), A)
        Pn = SparseTransitions(sp.csr_array((M.data, (pi[s] * A + a, pi[M.col.astype(np.int64)])),
                                            shape=(S * A, S)), copy=False)
    else:
        P = np.asarray(mdp.transitions)
        Pn = np.empty_like(P)
        Pn[np.ix_(pi, actions, pi)] = P
    R = np.asarray(mdp.rewards)
    Rn = np.empty_like(R)
    if R.ndim == 3:                     # r(s, a, s'): both state axes
        Rn[np.ix_(pi, actions, pi)] = R
    else:                               # R(s) or R(s, a)
        Rn[pi] = R
    terminal = initial = None
    if mdp.terminal is not None:
        terminal = np.empty_like(mdp.terminal)
        terminal[pi] = mdp.terminal
    if mdp.initial_distribution is not None:
        initial = np.empty_like(mdp.initial_distribution)
        initial[pi] = mdp.initial_distribution
    return TabularMDP(Pn, Rn, mdp.discount, coordinates=mdp.coordinates, shape=mdp.shape,
                      walls=mdp.walls, name=f"{mdp.name} (relabelled)", terminal=terminal,
                      initial_distribution=initial, action_vectors=mdp.action_vectors)


#: Slip of the target lake.
TARGET_SLIP = 0.2
#: Range of an independently drawn slip (relatedness 0).
SLIP_RANGE = (0.0, 2.0 / 3.0)
#: Layout draws before :func:`lake_task_family` gives up finding a path from start to goal.
MAX_LAYOUT_DRAWS = 1000


def _hole_mask(holes: Any, shape: tuple[int, int]) -> np.ndarray:
    """``holes`` (None, a boolean mask of shape (S,) or (row, col) cells) as a mask of shape (S,)."""
    S = shape[0] * shape[1]
    mask = np.zeros(S, dtype=bool)
    arr = np.asarray([] if holes is None else holes)
    if arr.dtype == bool:
        if arr.shape != (S,):
            raise ValueError(f"holes: expected a boolean mask of shape (S,) = ({S},), got {arr.shape}")
        return arr.copy()
    if arr.size and (arr.ndim != 2 or arr.shape[1] != 2):
        raise ValueError(f"holes: expected a boolean mask of shape ({S},) or (row, col) cells, got {holes!r}")
    for cell in arr.reshape(-1, 2):
        mask[np.ravel_multi_index(_cell_of(cell, shape, "holes"), shape)] = True
    return mask


def _path_exists(holes: np.ndarray, shape: tuple[int, int], start: int, goal: int) -> bool:
    """Whether free cells join ``start`` to ``goal`` through steps between neighbouring cells."""
    seen = np.zeros(holes.shape[0], dtype=bool)
    seen[start] = True
    stack = [start]
    while stack:
        r, c = divmod(stack.pop(), shape[1])
        for dr, dc in ACTION_VECTORS:
            i, j = r + dr, c + dc
            if 0 <= i < shape[0] and 0 <= j < shape[1]:
                k = i * shape[1] + j
                if not seen[k] and not holes[k]:
                    seen[k] = True
                    stack.append(k)
    return bool(seen[goal])


def slippery_lake(shape: tuple[int, int] = (10, 10), holes: Any = None, slip: float = TARGET_SLIP,
                  directions: Any = (0, 1, 2, 3), goal: Any = None, start: Any = (0, 0),
                  discount: float = 0.9) -> TabularMDP:
    r"""One slippery lake (module docstring).

    Parameters
    ----------
    shape : (int, int)
    holes : array_like, optional
        Boolean mask of shape (S,) (row-major cells) or a sequence of (row, col) cells; default
        no holes. The start and the goal cannot be holes.
    slip : float
        :math:`\varepsilon \in [0, 1]`: the probability of moving to one of the two cells
        perpendicular to the action's direction (half each).
    directions : sequence of 4 int
        The direction (an index of :data:`~corrpriors.envs.gridworld.ACTION_VECTORS`) action
        ``a`` moves in: a permutation of (0, 1, 2, 3); default the usual up, right, down, left.
    goal, start : (int, int), optional
        Goal (default the far corner) and start cells.
    discount : float

    Returns
    -------
    TabularMDP
        With ``coordinates`` (S, 2), ``shape`` and ``boundary="stay"`` set.

    Raises
    ------
    corrpriors._memory.MemoryEstimateError
        A dense (S, 4, S) table that cannot fit in memory, naming ``shape``, before it is built.
    """
    shape = _check_shape(shape)
    _check_dense_grid(shape, "slippery_lake")
    S = shape[0] * shape[1]
    slip = check_real(slip, "slip", 0.0, 1.0, expected="a number in [0, 1]")
    try:
        given = list(directions)
    except TypeError:
        given = []
    integral = all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in given)
    if len(given) != 4 or not integral or sorted(int(d) for d in given) != [0, 1, 2, 3]:   # 1.0, True
        raise ValueError(f"directions: expected a permutation of the integers (0, 1, 2, 3), got {directions!r}")
    dirs = np.array([int(d) for d in given], dtype=np.int64)
    hole = _hole_mask(holes, shape)
    gi, si = _goal_and_start(shape, goal, start)
    if hole[gi] or hole[si]:
        raise ValueError("holes: the start and the goal cannot be holes")
    cells = _cells(shape)
    rows = np.arange(S)
    P = np.zeros((S, 4, S))
    for a in range(4):
        d = int(dirs[a])
        for k, p in ((d, 1.0 - slip), ((d + 1) % 4, slip / 2), ((d + 3) % 4, slip / 2)):
            idx = _moved(shape, ACTION_VECTORS[k])
            idx = np.where(hole[idx], si, idx)
            np.add.at(P, (rows, np.full(S, a), idx), p)
    P[hole | (rows == gi)] = 0.0
    P[hole | (rows == gi), :, si] = 1.0
    R = np.zeros(S)
    R[gi] = 1.0
    return TabularMDP(P, R, discount, coordinates=cells, shape=shape, name="SlipperyLake",
                      boundary="stay")


@dataclass(frozen=True)
class LakeParameters:
    """Hidden parameters of one slippery lake.

    Attributes
    ----------
    slip : float
    directions : tuple of int
        The direction each action moves in (a permutation of 0..3).
    holes : ndarray of bool, shape (S,)
    """

    slip: float
    directions: tuple
    holes: np.ndarray


def _draw_layout(gen: np.random.Generator, shape: tuple[int, int], density: float,
                 keep: np.ndarray | None, base: np.ndarray | None) -> np.ndarray:
    """Holes: ``base`` where ``keep``, elsewhere fresh draws, redrawn until start and goal are joined."""
    S = shape[0] * shape[1]
    for _ in range(MAX_LAYOUT_DRAWS):
        holes = gen.random(S) < density
        if keep is not None and base is not None:
            holes = np.where(keep, base, holes)
        holes[[0, S - 1]] = False
        if _path_exists(holes, shape, 0, S - 1):
            return holes
    raise ValueError(f"hole_density: no layout with a path from start to goal in {MAX_LAYOUT_DRAWS} "
                     f"draws at density {density}")


def lake_task_family(relatedness: float, n_sources: int, *, rng: Any,
                     shape: tuple[int, int] = (10, 10), hole_density: float = 0.1,
                     discount: float = 0.9, relabel_sources: bool = False
                     ) -> tuple[list[TabularMDP], list[LakeParameters]]:
    r"""Draw a target lake and ``n_sources`` source lakes of the given relatedness.

    Parameters
    ----------
    relatedness : float
        :math:`r \in [0, 1]` (module docstring, "Slippery lakes").
    n_sources : int
        Number of source tasks, in [0, :data:`MAX_SOURCES`].
    rng : int, Generator or None
        Randomness (required): the target's layout first, then per source its slip, directions
        and layout.
    shape : (int, int)
        Grid (n_rows, n_cols), at least two cells; the start is the top-left cell and the goal
        the bottom-right one.
    hole_density : float
        Probability in [0, 0.5] that a cell is a hole.
    discount : float
    relabel_sources : bool, default False
        Relabel every source's cells by its own random permutation, as
        :func:`windy_task_family` does.

    Returns
    -------
    mdps : list of TabularMDP
        The sources, then the target (last).
    params : list of LakeParameters
        Their hidden parameters, in the same order.
    """
    r, shape = _check_family(relatedness, n_sources, relabel_sources, shape)
    hole_density = check_real(hole_density, "hole_density", 0.0, 0.5)   # False is not 0
    _check_family_memory(shape, n_sources, "the lake family")
    gen = as_generator(rng)
    S = shape[0] * shape[1]
    target = LakeParameters(TARGET_SLIP, (0, 1, 2, 3), _draw_layout(gen, shape, hole_density, None, None))
    params = []
    for _ in range(int(n_sources)):
        slip = r * TARGET_SLIP + (1.0 - r) * gen.uniform(*SLIP_RANGE)
        same = gen.random() < r
        perm = gen.permutation(4)
        directions = (0, 1, 2, 3) if same else tuple(int(v) for v in perm)
        holes = _draw_layout(gen, shape, hole_density, gen.random(S) < r, target.holes)
        params.append(LakeParameters(float(slip), directions, holes))
    params.append(target)
    mdps = [slippery_lake(shape, p.holes, p.slip, p.directions, discount=discount) for p in params]
    return _relabel_sources(mdps, relabel_sources, gen), params


__all__ = ["LakeParameters", "TaskParameters", "lake_task_family", "relabel_states", "slippery_lake",
           "smooth_wind", "windy_gridworld", "windy_task_family"]
