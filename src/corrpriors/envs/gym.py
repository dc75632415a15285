"""Gymnasium interface: one generic :class:`TabularEnv` wrapping any :class:`~corrpriors.mdp.TabularMDP`.

The five paper environments, bsuite's DeepSea and a random MDP are registered (on ``import corrpriors.envs``)
as

- ``corrpriors/DenseGridworld-v0``, ``corrpriors/TunnelWorld-v0``,
  ``corrpriors/GoalGridworld-v0``, ``corrpriors/WallWorld-v0``,
  ``corrpriors/QueueingNetwork-v0``, ``corrpriors/DeepSea-v0``
  (:class:`~corrpriors.envs.deepsea.DeepSeaEnv`) and ``corrpriors/RandomMDP-v0`` (an MDP without
  structure, :class:`~corrpriors.envs.unstructured.RandomMDPEnv`),

each with ``max_episode_steps=1000`` (the paper's tasks are infinite-horizon, so their episodes
end by truncation only; DeepSea's end after N steps). Builder keyword arguments pass through
``gymnasium.make(id, **kwargs)``.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from .._random import inverse_cdf
from .._validation import check_int, check_positive
from ..mdp._sparse import transition_entries, transition_reward_values
from ..mdp.checks import check_distribution
from ..mdp.rollout import NextStateSampler
from ..mdp.tabular import TabularMDP
from . import gridworld, queueing

#: Steps before truncation for the registered environments.
MAX_EPISODE_STEPS = 1000


class TabularEnv(gymnasium.Env):
    r"""A Gymnasium environment that simulates a :class:`~corrpriors.mdp.TabularMDP`.

    Observations and actions are :class:`gymnasium.spaces.Discrete` state and action
    indices. ``step(a)`` draws the next state :math:`s' \sim P(\cdot \mid s, a)` and returns
    the reward :math:`R(s, a)` of the *current* state ``s`` (state rewards :math:`R(s)` are
    broadcast over actions), or :math:`r(s, a, s')` when the MDP has transition rewards.
    ``terminated`` is True when :math:`s'` is one of the MDP's ``terminal`` states (never, for
    the paper's continuing tasks); wrap with a time limit (the registered ids do) to truncate
    episodes. The environment owns one :class:`numpy.random.Generator`, ``self.np_random``,
    re-seeded by ``reset(seed=...)``. A sparse model (:class:`~corrpriors.mdp.SparseTransitions`)
    is stepped from its sparse table (a binary search in the row) with the same draws as the
    dense table.

    Parameters
    ----------
    mdp : TabularMDP
        The model; available as ``env.unwrapped.mdp``.
    initial_distribution : None, int or array_like of shape (S,)
        Start state: None = the MDP's ``initial_distribution`` if it has one, else uniform over
        states; an int = that state; an array = a distribution.
    render_mode : None
        Rendering is not supported (plot with :mod:`corrpriors.plotting`).

    Attributes
    ----------
    state : int
        Current state index (None before the first reset).
    state_coordinates : ndarray of shape (S, D) or None
        The MDP's state coordinates: the attribute through which any environment gives
        :func:`~corrpriors.envs.from_gymnasium` (and so the ``psrl`` and ``sysid`` commands)
        coordinates for its states.
    P : dict
        The model as Gymnasium's toy-text table, ``P[s][a] = [(prob, next_state, reward,
        terminated), ...]`` (built on first use).
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, mdp: TabularMDP, initial_distribution: Any = None,
                 render_mode: str | None = None) -> None:
        if not isinstance(mdp, TabularMDP):
            raise TypeError(f"mdp: expected a TabularMDP, got {type(mdp).__name__}")
        if render_mode is not None:
            raise ValueError(f"render_mode: rendering is not supported, got {render_mode!r}")
        self.mdp = mdp
        S = mdp.n_states
        if initial_distribution is None:
            p0 = np.full(S, 1.0 / S) if mdp.initial_distribution is None else \
                np.asarray(mdp.initial_distribution)
        elif np.ndim(initial_distribution) == 0:
            s0 = _index(initial_distribution, "initial_distribution (a start state)", S)
            p0 = np.zeros(S)
            p0[s0] = 1.0
        else:
            p0 = check_distribution(initial_distribution, S, "initial_distribution")
        self.initial_distribution = p0
        self.observation_space = spaces.Discrete(S)
        self.action_space = spaces.Discrete(mdp.n_actions)
        self.render_mode = render_mode
        self._next = NextStateSampler(mdp.transitions)   # dense or sparse table
        self._cdf0 = np.cumsum(p0)
        self._rewards = mdp.rewards if mdp.rewards.ndim == 3 else mdp.reward_matrix
        self._terminal = mdp.terminal_mask
        self.state: int | None = None

    @property
    def state_coordinates(self) -> np.ndarray | None:
        """The MDP's state coordinates, ndarray of shape (S, D) (None if it has none)."""
        return self.mdp.coordinates

    @property
    def P(self) -> dict[int, dict[int, list[tuple[float, int, float, bool]]]]:  # noqa: N802
        """The model as a toy-text table ``P[s][a] = [(prob, next_state, reward, terminated)]``."""
        table = getattr(self, "_table", None)
        if table is None:
            s, a, s2, p = transition_entries(self.mdp.transitions)   # dense or sparse (CSR rows)
            r = (transition_reward_values(self._rewards, s, a, s2) if self._rewards.ndim == 3
                 else np.asarray(self._rewards, dtype=np.float64)[s, a])
            table = {i: {j: [] for j in range(self.mdp.n_actions)} for i in range(self.mdp.n_states)}
            for entry in zip(s.tolist(), a.tolist(), p.tolist(), s2.tolist(), r.tolist(),
                             self._terminal[s2].tolist()):
                table[entry[0]][entry[1]].append(entry[2:])
            self._table = table
        return table

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        """Start an episode; ``options={"state": s}`` forces the start state."""
        super().reset(seed=seed)
        if options and "state" in options:
            self.state = _index(options["state"], "options['state']", self.mdp.n_states)
        else:
            self.state = int(inverse_cdf(self._cdf0, self.np_random.random()))
        return self.state, {}

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict[str, Any]]:
        """Take ``action``; return (next state, reward, terminated, False, {})."""
        if self.state is None:
            raise RuntimeError("step: call reset() before step()")
        a = _index(action, "action", self.mdp.n_actions)
        s = self.state
        self.state = s2 = int(self._next(s, a, self.np_random.random()))
        reward = float(self._rewards[s, a, s2] if self._rewards.ndim == 3 else self._rewards[s, a])
        return s2, reward, bool(self._terminal[s2]), False, {}


def _index(x: Any, name: str, n: int) -> int:
    """A state or action index in [0, n) (a 0-d array counts as its value), or a ``ValueError``
    naming ``name``: 1.7 is not index 1 and True is not 1 (:func:`~corrpriors._validation.check_int`).
    """
    if isinstance(x, np.ndarray) and x.ndim == 0:
        x = x[()]
    return check_int(x, name, 0, n - 1)


# ----------------------------------------------------------------------------- factories
def make_dense_gridworld(initial_distribution: Any = None, **kwargs: Any) -> TabularEnv:
    """Env factory for ``corrpriors/DenseGridworld-v0`` (uniform start by default)."""
    return TabularEnv(gridworld.dense_gridworld(**kwargs), initial_distribution)


def make_tunnel_world(initial_distribution: Any = None, **kwargs: Any) -> TabularEnv:
    """Env factory for ``corrpriors/TunnelWorld-v0`` (starts in the ``start`` cell, default (0, 0))."""
    mdp = gridworld.tunnel_world(**kwargs)
    if initial_distribution is None:
        start = kwargs.get("start", (0, 0))
        shape = mdp.shape if mdp.shape is not None else (mdp.n_states, 1)
        initial_distribution = int(np.ravel_multi_index(tuple(int(v) for v in start), shape))
    return TabularEnv(mdp, initial_distribution)


def make_goal_gridworld(initial_distribution: Any = None, layout_seed: int = 0,
                        **kwargs: Any) -> TabularEnv:
    """Env factory for ``corrpriors/GoalGridworld-v0``; ``layout_seed`` fixes the reward cells."""
    return TabularEnv(gridworld.goal_gridworld(rng=layout_seed, **kwargs), initial_distribution)


def make_wall_world(initial_distribution: Any = None, **kwargs: Any) -> TabularEnv:
    """Env factory for ``corrpriors/WallWorld-v0`` (uniform start by default)."""
    return TabularEnv(gridworld.wall_world(**kwargs), initial_distribution)


def make_queueing_network(initial_distribution: Any = 0, **kwargs: Any) -> TabularEnv:
    """Env factory for ``corrpriors/QueueingNetwork-v0`` (starts with empty queues, state 0)."""
    return TabularEnv(queueing.queueing_network(**kwargs), initial_distribution)


def make_random_frozen_lake(size: int = 8, p: float = 0.8, map_seed: int = 0,
                            **kwargs: Any) -> gymnasium.Env:
    """Env factory for ``corrpriors/RandomFrozenLake-v0``: Gymnasium's FrozenLake on the map
    ``generate_random_map(size, p, seed=map_seed)`` -- a fixed map of any size by two numbers
    (a 316 x 316 map as ``--env-kwargs`` text would be 100,833 characters). Other keyword
    arguments (``is_slippery``, ``success_rate``, ...) go to ``FrozenLakeEnv``.
    """
    from gymnasium.envs.toy_text.frozen_lake import FrozenLakeEnv, generate_random_map

    size, map_seed = check_int(size, "size", 2, 2000), check_int(map_seed, "map_seed", 0)
    if not check_positive(p, "p") <= 1.0:
        raise ValueError(f"p: expected the probability of a frozen cell in (0, 1], got {p!r}")
    _check_lake_memory(size, kwargs.get("is_slippery", True) is not False)
    desc = generate_random_map(size=size, p=float(p), seed=map_seed)
    return FrozenLakeEnv(desc=desc, **kwargs)


#: Bytes per listed entry of Gymnasium's own toy-text table ``P[s][a]`` (Python lists of tuples of
#: Python numbers), alive while a seed holds the environment.
ENV_TABLE_BYTES_PER_ENTRY = 300.0


def _check_lake_memory(size: int, slippery: bool) -> None:
    """Refuse a map whose Gymnasium table ``P[s][a]`` (built by FrozenLakeEnv's constructor, about
    :data:`ENV_TABLE_BYTES_PER_ENTRY` per entry: 3 per (s, a)
    when slippery, else 1) cannot fit, before it is built (a ``MemoryEstimateError`` naming ``size``).
    """
    from .._memory import check_memory

    entries = size * size * 4 * (3 if slippery else 1)
    check_memory(ENV_TABLE_BYTES_PER_ENTRY * entries,
                 f"size: FrozenLake's table of a {size:,} x {size:,} map ({size * size:,} states, "
                 f"{entries:,} listed transitions)", "pass a smaller size")


#: Gymnasium environments of :func:`register_envs` that are not :class:`TabularEnv` (no step
#: limit: the caller's, e.g. ``corrpriors psrl --horizon``).
GYMNASIUM_IDS = {
    "corrpriors/RandomFrozenLake-v0": "corrpriors.envs.gym:make_random_frozen_lake",
}

ENV_IDS = {
    "corrpriors/DenseGridworld-v0": "corrpriors.envs.gym:make_dense_gridworld",
    "corrpriors/TunnelWorld-v0": "corrpriors.envs.gym:make_tunnel_world",
    "corrpriors/GoalGridworld-v0": "corrpriors.envs.gym:make_goal_gridworld",
    "corrpriors/WallWorld-v0": "corrpriors.envs.gym:make_wall_world",
    "corrpriors/QueueingNetwork-v0": "corrpriors.envs.gym:make_queueing_network",
    "corrpriors/DeepSea-v0": "corrpriors.envs.deepsea:DeepSeaEnv",
    "corrpriors/RandomMDP-v0": "corrpriors.envs.unstructured:RandomMDPEnv",
}


def register_envs() -> None:
    """Register the environments of :data:`ENV_IDS` and :data:`GYMNASIUM_IDS` with Gymnasium
    (idempotent).
    """
    for env_id, entry_point in ENV_IDS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point=entry_point,
                               max_episode_steps=MAX_EPISODE_STEPS)
    for env_id, entry_point in GYMNASIUM_IDS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point=entry_point)


__all__ = ["TabularEnv", "register_envs", "ENV_IDS", "GYMNASIUM_IDS", "MAX_EPISODE_STEPS",
           "make_random_frozen_lake", "make_dense_gridworld",
           "make_tunnel_world", "make_goal_gridworld", "make_wall_world", "make_queueing_network"]
