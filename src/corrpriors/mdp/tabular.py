"""The tabular Markov decision process record."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._validation import as_real_array, check_int
from ._sparse import SparseTransitionRewards, SparseTransitions, expected_transition_rewards
from .checks import check_discount, check_distribution, check_rewards, check_transitions

#: What a move that would leave the states does (:attr:`TabularMDP.boundary`, and the
#: relative encoding's ``boundary`` of :func:`~corrpriors.applications.transitions.displacement_category_map`).
BOUNDARY_RULES = ("exclude", "clip", "stay")


def check_boundary(rule: Any, name: str) -> str | None:
    """``rule`` if it is None (unsaid) or one of :data:`BOUNDARY_RULES`, else a ``ValueError``
    naming ``name``.
    """
    if rule is not None and (not isinstance(rule, str) or rule not in BOUNDARY_RULES):
        raise ValueError(f"{name}: expected one of {', '.join(BOUNDARY_RULES)}, got {rule!r}")
    return rule


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
    rewards :math:`R(s)` a reward state pays out once per visit. Transition rewards
    :math:`r(s, a, s')` (Gymnasium's convention) are kept as such; the expected reward
    :math:`R(s, a) = \sum_{s'} P(s' \mid s, a)\, r(s, a, s')` is derived from whichever
    transition model is in use (:meth:`expected_rewards`), so planning with a sampled or
    estimated model never uses the true model's averages.

    Episodic tasks mark **terminal** states: entering one ends the episode, so a terminal
    state pays nothing and has no future (the planners of :mod:`corrpriors.mdp.planning` fix
    :math:`V(s) = 0` there, whatever its rows of ``transitions`` and ``rewards`` say).

    Parameters
    ----------
    transitions : ndarray of shape (S, A, S), SparseTransitions, or scipy sparse array of shape (S·A, S)
        ``transitions[s, a, s']`` = :math:`P(s' \mid s, a)`; rows sum to one (within 1e-8).
        A sparse table (row ``s * A + a``, column ``s'``) is stored as a
        :class:`~corrpriors.mdp.SparseTransitions`; every planner, rollout and metric accepts
        either form.
    rewards : ndarray of shape (S,), (S, A) or (S, A, S), or SparseTransitionRewards
        State rewards :math:`R(s)`, state-action rewards :math:`R(s, a)` or transition
        rewards :math:`r(s, a, s')` (dense, or listed on a sparse support with a default
        elsewhere); finite.
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
    terminal : ndarray of shape (S,), optional
        Boolean mask of terminal states (default: none, a continuing task).
    initial_distribution : ndarray of shape (S,), optional
        Start-state distribution :math:`\mu` of an episode (default: unknown; metrics then
        average uniformly over the states).
    action_vectors : ndarray of shape (A, D), optional
        Where each action moves in coordinate space when actions are moves (grid worlds: the
        (d_row, d_col) step of every action); figures draw policies with it.
    boundary : {"stay", "clip", "exclude"}, optional
        What a move that would leave the states does, for beliefs that share moves between
        states (:meth:`~corrpriors.applications.CorrelatedTransitionModel.for_mdp`'s default
        ``boundary``): ``"stay"``, the agent stays where it is (a grid's edges and walls);
        ``"clip"``, every coordinate is clipped to the coordinates' box (bsuite's DeepSea:
        "left" in the first column still moves the agent down); ``"exclude"``, no move leaves.
        ``None`` (default): the MDP does not say, the belief chooses.

    Attributes
    ----------
    n_states : int
        S.
    n_actions : int
        A.
    is_sparse : bool
        Whether ``transitions`` is a :class:`~corrpriors.mdp.SparseTransitions` (then
        ``transitions[s, a]`` is still the dense row (S,), but ``np.asarray(transitions)``
        raises; :meth:`transition_matrix` is the (S·A, S) CSR matrix of either form).
    reward_matrix : ndarray of shape (S, A)
        Rewards broadcast to state-action form (transition rewards averaged under
        ``transitions``).
    cells : ndarray of shape (S, 2) or None
        Integer (row, col) grid cell of every state (when ``shape`` is set).

    Notes
    -----
    The arrays are copied and made read-only, so a ``TabularMDP`` is immutable. Use
    :meth:`with_transitions` / :func:`dataclasses.replace` for variants. A dense table costs
    8·S²·A bytes (320 GB at 10⁵ states and 4 actions); the environment builders switch to
    sparse tables above :data:`~corrpriors.mdp.DENSE_LIMIT_BYTES` (64 MiB).

    Examples
    --------
    >>> import numpy as np
    >>> P = np.zeros((2, 1, 2)); P[0, 0, 1] = P[1, 0, 0] = 1.0
    >>> mdp = TabularMDP(P, rewards=[1.0, 0.0], discount=0.5)
    >>> mdp.n_states, mdp.n_actions
    (2, 1)
    """

    transitions: np.ndarray | SparseTransitions
    rewards: np.ndarray | SparseTransitionRewards
    discount: float
    coordinates: np.ndarray | None = None
    shape: tuple[int, ...] | None = None
    walls: np.ndarray | None = None
    name: str = "mdp"
    terminal: np.ndarray | None = None
    initial_distribution: np.ndarray | None = None
    action_vectors: np.ndarray | None = None
    boundary: str | None = None
    _reward_matrix: np.ndarray = field(init=False, repr=False)
    _cells: np.ndarray | None = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:  # noqa: D105
        check_boundary(self.boundary, "boundary")
        P = check_transitions(self.transitions, "transitions", allow_sparse=True)
        S, A = P.shape[0], P.shape[1]
        R = check_rewards(self.rewards, S, A, "rewards")
        gamma = check_discount(self.discount, "discount")
        object.__setattr__(self, "transitions", P if isinstance(P, SparseTransitions) else _frozen(P))
        object.__setattr__(self, "rewards", R if isinstance(R, SparseTransitionRewards) else _frozen(R))
        object.__setattr__(self, "discount", gamma)
        if R.ndim == 3:
            RM = expected_transition_rewards(P, R)
        elif R.ndim == 1:
            RM = np.repeat(R[:, None], A, axis=1)
        else:
            RM = R
        object.__setattr__(self, "_reward_matrix", _frozen(RM))
        if self.terminal is not None:
            T = np.asarray(self.terminal)
            if T.shape != (S,) or T.dtype != bool:
                raise ValueError(f"terminal: expected a boolean mask of shape (S,) = ({S},), got "
                                 f"dtype {T.dtype}, shape {T.shape}")
            object.__setattr__(self, "terminal", _frozen(T))
        if self.initial_distribution is not None:
            mu = check_distribution(self.initial_distribution, S, "initial_distribution")
            object.__setattr__(self, "initial_distribution", _frozen(mu))
        if self.coordinates is not None:
            C = as_real_array(self.coordinates, "coordinates").astype(np.float64)
            if C.ndim == 1:
                C = C[:, None]
            if C.ndim != 2 or C.shape[0] != S:
                raise ValueError(f"coordinates: expected shape (S, D) with S={S}, got "
                                 f"{np.shape(self.coordinates)}")
            if not np.all(np.isfinite(C)):
                raise ValueError("coordinates: contains NaN or infinite values")
            object.__setattr__(self, "coordinates", _frozen(C))
        if self.action_vectors is not None:
            U = as_real_array(self.action_vectors, "action_vectors").astype(np.float64)
            if U.ndim != 2 or U.shape[0] != A or not np.all(np.isfinite(U)):
                raise ValueError(f"action_vectors: expected finite values of shape (A, D) with A={A}, "
                                 f"got shape {np.shape(self.action_vectors)}")
            object.__setattr__(self, "action_vectors", _frozen(U))
        if self.walls is not None and self.shape is None:
            raise ValueError("walls: requires shape (the grid the wall mask lives on)")
        cells = None
        if self.shape is not None:
            if np.ndim(self.shape) != 1 or len(self.shape) != 2:
                raise ValueError(f"shape: expected a grid shape (rows, cols), got {self.shape!r}")
            shape = tuple(check_int(n, "shape", 1) for n in self.shape)
            object.__setattr__(self, "shape", shape)
            if self.walls is None:
                W = np.zeros(shape, dtype=bool)
            else:
                W = as_real_array(self.walls, "walls")
                if W.dtype.kind != "b" and not np.all((W == 0) | (W == 1)):
                    raise ValueError(f"walls: expected a boolean mask (or 0/1), got values other than "
                                     f"0 and 1: {np.unique(W[(W != 0) & (W != 1)])[:3].tolist()}")
                W = W.astype(bool)
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
    def is_sparse(self) -> bool:
        """Whether the transitions are stored sparsely (:class:`~corrpriors.mdp.SparseTransitions`)."""
        return isinstance(self.transitions, SparseTransitions)

    def transition_matrix(self) -> sp.csr_array:
        """The transitions as a CSR matrix of shape (S·A, S): row ``s * A + a``, column ``s'``.

        Shared (read-only) for a sparse MDP; built from the dense table otherwise.
        """
        if isinstance(self.transitions, SparseTransitions):
            return self.transitions.matrix
        return sp.csr_array(self.transitions.reshape(self.n_states * self.n_actions, self.n_states))

    @property
    def reward_matrix(self) -> np.ndarray:
        """Expected rewards :math:`R(s, a)` under ``transitions``, ndarray of shape (S, A)."""
        return self._reward_matrix

    @property
    def terminal_mask(self) -> np.ndarray:
        """Boolean mask of terminal states, ndarray of shape (S,) (all False if none)."""
        if self.terminal is None:
            return np.zeros(self.n_states, dtype=bool)
        return self.terminal

    def expected_rewards(self, transitions: Any = None) -> np.ndarray:
        r"""Expected rewards :math:`R(s, a)` under a transition model.

        Parameters
        ----------
        transitions : ndarray of shape (S, A, S) or (..., S, A, S), or sparse, optional
            The model (a SparseTransitions or a list of them too) to average transition
            rewards :math:`r(s, a, s')` under (default: ``self.transitions``). State and
            state-action rewards do not depend on it. Not validated here (the planners do).

        Returns
        -------
        ndarray of shape (S, A) or (..., S, A)
            :math:`\sum_{s'} P(s' \mid s, a)\, r(s, a, s')` for transition rewards, else
            ``reward_matrix`` (broadcast against the batch axes of ``transitions``; a list
            of M sparse tables gives (M, S, A)).
        """
        if transitions is None or self.rewards.ndim < 3:
            return self._reward_matrix
        if not isinstance(transitions, np.ndarray):   # sparse tables, lists, other array-likes
            return expected_transition_rewards(check_transitions(transitions, batch=True, allow_sparse=True),
                                               self.rewards)
        P = np.asarray(transitions, dtype=np.float64)
        return expected_transition_rewards(P, self.rewards)

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

    def with_transitions(self, transitions: Any) -> TabularMDP:
        """Return a copy with other (validated) transition probabilities, e.g. a posterior sample.

        ``transitions`` may be dense (S, A, S), a :class:`~corrpriors.mdp.SparseTransitions`
        or a scipy sparse array of shape (S·A, S) (e.g. a posterior draw with K non-zeros per
        row). Transition rewards :math:`r(s, a, s')` stay; the copy's ``reward_matrix``
        averages them under the new transitions.
        """
        return replace(self, transitions=transitions)

    def __repr__(self) -> str:  # noqa: D105
        T = self.transitions
        sparse = f", sparse nnz={T.nnz}" if isinstance(T, SparseTransitions) else ""
        return (f"TabularMDP(name={self.name!r}, n_states={self.n_states}, "
                f"n_actions={self.n_actions}, discount={self.discount}{sparse})")


__all__ = ["TabularMDP"]
