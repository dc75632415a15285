"""The tabular Markov decision process record."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .checks import check_discount, check_rewards, check_transitions


def _frozen(arr: np.ndarray) -> np.ndarray:
    arr = np.array(arr, copy=True)
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class TabularMDP:
    r"""A finite discounted MDP stored as explicit arrays.

    The agent in state :math:`s` takes action :math:`a`, receives
    :math:`R(s, a)` (or :math:`R(s)` for state rewards) and moves to
    :math:`s' \sim P(\cdot \mid s, a)`; returns are discounted by :math:`\gamma`:

    .. math:: V^\pi(s) = \mathbb E\Big[\sum_{t\ge 0} \gamma^t R(s_t, a_t) \,\Big|\, s_0 = s\Big].

    Rewards are collected for the state being *left* (the current state), so with state
    rewards :math:`R(s)` a reward state pays out once per visit.

    Parameters
    ----------
    transitions : ndarray of shape (S, A, S)
        ``transitions[s, a, s']`` = :math:`P(s' \mid s, a)`; rows sum to one (within 1e-8).
    rewards : ndarray of shape (S,) or (S, A)
        State rewards :math:`R(s)` or state-action rewards :math:`R(s, a)`; finite.
    discount : float
        :math:`\gamma \in [0, 1)`.
    coordinates : ndarray of shape (S, D), optional
        Covariates of the states (grid positions, queue lengths); used by kernels.
    shape : tuple of int, optional
        Grid shape (rows, cols) for plotting. The states are the non-wall cells of this grid
        in row-major order.
    walls : ndarray of shape ``shape``, optional
        Boolean wall mask; wall cells are not states. Requires ``shape``.
    name : str
        Label for plots and reprs.

    Attributes
    ----------
    n_states : int
        S.
    n_actions : int
        A.
    reward_matrix : ndarray of shape (S, A)
        Rewards broadcast to state-action form.
    cells : ndarray of shape (S, 2) or None
        Integer (row, col) grid cell of every state (when ``shape`` is set).

    Notes
    -----
    The arrays are copied and made read-only, so a ``TabularMDP`` is immutable. Use
    :meth:`with_transitions` / :func:`dataclasses.replace` for variants.

    Examples
    --------
    >>> import numpy as np
    >>> P = np.zeros((2, 1, 2)); P[0, 0, 1] = P[1, 0, 0] = 1.0
    >>> mdp = TabularMDP(P, rewards=[1.0, 0.0], discount=0.5)
    >>> mdp.n_states, mdp.n_actions
    (2, 1)
    """

    transitions: np.ndarray
    rewards: np.ndarray
    discount: float
    coordinates: np.ndarray | None = None
    shape: tuple[int, ...] | None = None
    walls: np.ndarray | None = None
    name: str = "mdp"
    _cells: np.ndarray | None = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:  # noqa: D105
        P = check_transitions(self.transitions, "transitions")
        S, A = P.shape[0], P.shape[1]
        R = check_rewards(self.rewards, S, A, "rewards")
        gamma = check_discount(self.discount, "discount")
        object.__setattr__(self, "transitions", _frozen(P))
        object.__setattr__(self, "rewards", _frozen(R))
        object.__setattr__(self, "discount", gamma)
        if self.coordinates is not None:
            C = np.asarray(self.coordinates, dtype=np.float64)
            if C.ndim == 1:
                C = C[:, None]
            if C.ndim != 2 or C.shape[0] != S:
                raise ValueError(f"coordinates: expected shape (S, D) with S={S}, got "
                                 f"{np.shape(self.coordinates)}")
            if not np.all(np.isfinite(C)):
                raise ValueError("coordinates: contains NaN or infinite values")
            object.__setattr__(self, "coordinates", _frozen(C))
        if self.walls is not None and self.shape is None:
            raise ValueError("walls: requires shape (the grid the wall mask lives on)")
        cells = None
        if self.shape is not None:
            shape = tuple(int(n) for n in self.shape)
            if len(shape) != 2 or min(shape) < 1:
                raise ValueError(f"shape: expected a grid shape (rows, cols), got {self.shape!r}")
            object.__setattr__(self, "shape", shape)
            if self.walls is None:
                W = np.zeros(shape, dtype=bool)
            else:
                W = np.asarray(self.walls, dtype=bool)
                if W.shape != shape:
                    raise ValueError(f"walls: expected shape {shape} (the grid shape), got {W.shape}")
            n_free = int((~W).sum())
            if n_free != S:
                raise ValueError(f"shape/walls: the grid {shape} has {n_free} non-wall cells but the "
                                 f"MDP has S={S} states")
            object.__setattr__(self, "walls", _frozen(W))
            cells = np.argwhere(~W)
            cells.setflags(write=False)
        object.__setattr__(self, "_cells", cells)

    # ------------------------------------------------------------------ properties
    @property
    def n_states(self) -> int:
        """Number of states S."""
        return int(self.transitions.shape[0])

    @property
    def n_actions(self) -> int:
        """Number of actions A."""
        return int(self.transitions.shape[1])

    @property
    def reward_matrix(self) -> np.ndarray:
        """Rewards as an ndarray of shape (S, A)."""
        if self.rewards.ndim == 1:
            return np.broadcast_to(self.rewards[:, None], (self.n_states, self.n_actions))
        return self.rewards

    @property
    def cells(self) -> np.ndarray | None:
        """Integer (row, col) grid cell of every state, ndarray of shape (S, 2), or None."""
        return self._cells

    def state_grid(self, values: Any, fill: float = np.nan) -> np.ndarray:
        """Scatter per-state values onto the grid.

        Parameters
        ----------
        values : array_like of shape (S,) or (S, ...)
            One value (or vector) per state.
        fill : float
            Value for wall cells.

        Returns
        -------
        ndarray of shape (rows, cols) or (rows, cols, ...)
        """
        if self._cells is None or self.shape is None:
            raise ValueError("state_grid: this MDP has no grid shape")
        v = np.asarray(values, dtype=np.float64)
        if v.shape[:1] != (self.n_states,):
            raise ValueError(f"values: expected leading axis S={self.n_states}, got shape {v.shape}")
        out = np.full(self.shape + v.shape[1:], fill, dtype=np.float64)
        out[self._cells[:, 0], self._cells[:, 1]] = v
        return out

    def with_transitions(self, transitions: Any) -> "TabularMDP":
        """Return a copy with other (validated) transition probabilities, e.g. a posterior sample."""
        return replace(self, transitions=transitions)

    def __repr__(self) -> str:  # noqa: D105
        return (f"TabularMDP(name={self.name!r}, n_states={self.n_states}, "
                f"n_actions={self.n_actions}, discount={self.discount})")


__all__ = ["TabularMDP"]
