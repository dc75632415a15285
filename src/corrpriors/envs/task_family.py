r"""A family of related grid worlds with hidden parameters (for transfer between tasks).

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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._random import as_generator
from .._validation import check_int
from ..mdp.tabular import TabularMDP
from .gridworld import ACTION_VECTORS, _cell_of, _check_shape

#: Drive and damping of the target task.
TARGET_DRIVE, TARGET_DAMPING = 2.0, 1.0
#: Ranges of the independently drawn drive and damping (relatedness 0).
DRIVE_RANGE, DAMPING_RANGE = (0.5, 4.0), (0.0, 2.0)

_MOVES = np.array([(i, j) for i in (-1, 0, 1) for j in (-1, 0, 1)], dtype=np.float64)


def _cells(shape: tuple[int, int]) -> np.ndarray:
    return np.array([(i, j) for i in range(shape[0]) for j in range(shape[1])], dtype=np.float64)


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
    if not (np.isfinite(amplitude) and amplitude >= 0):
        raise ValueError(f"amplitude: expected a non-negative number, got {amplitude!r}")
    if not (np.isfinite(lengthscale) and lengthscale > 0):
        raise ValueError(f"lengthscale: expected a positive number, got {lengthscale!r}")
    gen = as_generator(rng)
    cells = _cells(shape)
    d2 = ((cells[:, None, :] - cells[None, :, :]) ** 2).sum(-1)
    K = np.exp(-d2 / lengthscale ** 2)
    w, V = np.linalg.eigh(K)                       # PSD square root (K is often singular)
    root = V * np.sqrt(np.clip(w, 0.0, None))
    return float(amplitude) * (root @ gen.standard_normal((cells.shape[0], 2)))


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
        ``goal=False`` builds the grid without goal and jump.
    discount : float

    Returns
    -------
    TabularMDP
        With ``coordinates`` (S, 2) and ``shape`` set.
    """
    shape = _check_shape(shape)
    cells = _cells(shape)
    S = cells.shape[0]
    w = np.zeros((S, 2)) if wind is None else np.asarray(wind, dtype=np.float64)
    if w.shape != (S, 2) or not np.all(np.isfinite(w)):
        raise ValueError(f"wind: expected a finite array of shape (S, 2) = ({S}, 2), got {w.shape}")
    if not (np.isfinite(drive) and drive > 0):
        raise ValueError(f"drive: expected a positive number, got {drive!r}")
    if not (np.isfinite(damping) and damping >= 0):
        raise ValueError(f"damping: expected a non-negative number, got {damping!r}")
    if not np.isfinite(heading):
        raise ValueError(f"heading: expected a finite angle, got {heading!r}")
    c, s = np.cos(heading), np.sin(heading)
    rot = np.array([[c, -s], [s, c]])
    P = np.zeros((S, 4, S))
    rows = np.arange(S)
    for a in range(4):
        v = rot @ ACTION_VECTORS[a].astype(np.float64)
        logits = drive * ((v[None, :] + w) @ _MOVES.T) - damping * (_MOVES ** 2).sum(1)   # (S, 9)
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        for k, d in enumerate(_MOVES):
            tgt = cells + d
            ok = np.all((tgt >= 0) & (tgt < np.array(shape)), axis=1)
            idx = np.where(ok, (tgt[:, 0] * shape[1] + tgt[:, 1]).astype(np.int64), rows)
            np.add.at(P, (rows, np.full(S, a), idx), p[:, k])
    R = np.zeros(S)
    if goal is not False:
        g = _cell_of((shape[0] - 1, shape[1] - 1) if goal is None else goal, shape, "goal")
        s0 = _cell_of(start, shape, "start")
        if g == s0:
            raise ValueError("goal, start: must be different cells")
        gi, si = np.ravel_multi_index(g, shape), np.ravel_multi_index(s0, shape)
        P[gi] = 0.0
        P[gi, :, si] = 1.0
        R[gi] = 1.0
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
        Number of source tasks (>= 0).
    rng : int, Generator or None
        Randomness (required): the target's wind first, then per source its own wind, heading,
        drive and damping.
    shape : (int, int)
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
    r = float(relatedness)
    if not 0.0 <= r <= 1.0:
        raise ValueError(f"relatedness: expected a number in [0, 1], got {relatedness!r}")
    check_int(n_sources, "n_sources", 0)
    gen = as_generator(rng)
    shape = _check_shape(shape)
    w_target = smooth_wind(shape, rng=gen, amplitude=wind_amplitude, lengthscale=wind_lengthscale)
    params = []
    for _ in range(int(n_sources)):
        w_own = smooth_wind(shape, rng=gen, amplitude=wind_amplitude, lengthscale=wind_lengthscale)
        heading = (1.0 - r) * gen.uniform(-np.pi, np.pi)
        drive = r * TARGET_DRIVE + (1.0 - r) * gen.uniform(*DRIVE_RANGE)
        damping = r * TARGET_DAMPING + (1.0 - r) * gen.uniform(*DAMPING_RANGE)
        params.append(TaskParameters(float(heading), float(drive), float(damping),
                                     r * w_target + np.sqrt(1.0 - r * r) * w_own))
    params.append(TaskParameters(0.0, TARGET_DRIVE, TARGET_DAMPING, w_target))
    if not isinstance(relabel_sources, (bool, np.bool_)):
        raise TypeError(f"relabel_sources: expected a bool, got {type(relabel_sources).__name__}")
    mdps = [windy_gridworld(shape, p.wind, p.heading, p.drive, p.damping, discount=discount)
            for p in params]
    if relabel_sources:
        mdps[:-1] = [relabel_states(m, gen.permutation(m.n_states)) for m in mdps[:-1]]
    return mdps, params


def relabel_states(mdp: TabularMDP, permutation: Any) -> TabularMDP:
    r"""The MDP with state :math:`s` renamed :math:`\pi(s)` (coordinates kept, dynamics moved).

    Parameters
    ----------
    mdp : TabularMDP
    permutation : array_like of int, shape (S,)
        :math:`\pi`: a permutation of ``range(S)``.

    Returns
    -------
    TabularMDP
        ``P'[pi[s], a, pi[s']] = P[s, a, s']`` and ``R'[pi[s]] = R[s]``, with ``mdp``'s
        coordinates and shape (so the relabelled task lives on the same grid).
    """
    S = mdp.n_states
    pi = np.asarray(permutation)
    if pi.shape != (S,) or not np.array_equal(np.sort(pi), np.arange(S)):
        raise ValueError(f"permutation: expected a permutation of range({S}), got shape {pi.shape}")
    P = np.asarray(mdp.transitions)
    R = np.asarray(mdp.rewards)
    Pn = np.empty_like(P)
    Pn[np.ix_(pi, np.arange(P.shape[1]), pi)] = P
    Rn = np.empty_like(R)
    Rn[pi] = R
    return TabularMDP(Pn, Rn, mdp.discount, coordinates=mdp.coordinates, shape=mdp.shape,
                      name=f"{mdp.name} (relabelled)")


__all__ = ["TaskParameters", "relabel_states", "smooth_wind", "windy_gridworld", "windy_task_family"]
