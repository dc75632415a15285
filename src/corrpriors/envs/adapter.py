r"""Any discrete Gymnasium environment as a :class:`~corrpriors.mdp.TabularMDP`.

:func:`from_gymnasium` reads the exact model of an environment that publishes one -- the
toy-text convention ``env.unwrapped.P[s][a] = [(prob, next_state, reward, terminated), ...]``
(FrozenLake, CliffWalking, Taxi) or a :class:`~corrpriors.envs.TabularEnv` -- and turns it into

- transitions :math:`P(s' \mid s, a)` (entries listing the same next state are summed);
- transition rewards :math:`r(s, a, s')` (the probability-weighted mean of the rewards listed
  for that next state), so that the expected reward :math:`R(s, a)` is derived from whatever
  model is planned with, never averaged under the true one behind the agent's back. A
  transition the table does not list matters only to a model that puts mass on it (an early
  posterior draw); it earns the reward of arriving in that next state where the table's
  reward is a function of the next state (FrozenLake: 1 for the goal, 0 elsewhere), and
  otherwise the unweighted mean of the rewards listed for (s, a) -- R(s, a) itself on every
  deterministic table (CliffWalking, Taxi). Measured with ``corrpriors psrl`` (terminal states
  known), the alternatives mislead exploration: 0 made the cliff cells no episode enters look
  like free steps on CliffWalking (policies kept testing them) and illegal moves look free on
  Taxi (success of ``pg_mean`` after 3,000 steps .05 against .48, 3 seeds); the (s, a) mean on
  FrozenLake spread a third of the goal's reward over every other next state of the cells
  beside it, a reward a draw could collect without ending the episode
  (``dirichlet_sparse_sampling`` .03 against .29 after 5,000 steps, 8 seeds);
- a terminal mask (a next state reached with ``terminated=True``); terminal rows become
  absorbing self-loops without reward (the environment never steps from them);
- the initial-state distribution (``initial_state_distrib`` / ``initial_distribution``);
- state **coordinates** for the kernel, from the first of: the ``features=`` you supply; the
  environment's own ``state_coordinates`` attribute (see below); the known environments'
  layouts -- (row, col) for FrozenLake and CliffWalking, Taxi's ``decode(s)`` = (taxi row,
  taxi col, passenger location, destination), the grid cells of corrpriors' own environments;
  the components of a ``Tuple`` observation.

**Your own environment** publishes its coordinates by giving its unwrapped class an attribute
(or property) ``state_coordinates``: an array of shape (S, D), row ``s`` the coordinates of
state ``s`` (integers, such as grid cells, let the beliefs share *moves* between states; any
real features work with absolute next-state categories). On the command line,
``--features module:function`` does the same from outside: ``function(env)`` receives the
environment and returns that array.
With integer coordinates it may also say what a move off the grid does, as an attribute
``state_boundary``: ``"stay"`` (the agent stays where it is: a grid's edges and walls, the
beliefs' default on grids), ``"clip"`` (every coordinate is clipped to the grid and the rest of
the move happens: bsuite's DeepSea, whose "left" in the first column still goes down a row) or
``"exclude"``; it becomes the model's :attr:`~corrpriors.mdp.TabularMDP.boundary`.

**Tuple observations.** An observation space that is a ``Tuple`` of ``Discrete`` spaces
(Blackjack's (player sum, dealer card, usable ace)) is a grid: :func:`discrete_observations`
flattens it to one ``Discrete`` index (row-major over the components, ``np.ravel_multi_index``)
and the components become the state coordinates. Its model table may be keyed by either the
index or the tuple.

Environments without a published model can still be learned and controlled: :func:`env_info`
gives the sizes and coordinates the beliefs need (only exact evaluation needs the true model).
:func:`random_exploration` collects uniformly random transitions with restarts.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import gymnasium
import numpy as np

from .._memory import check_memory
from .._random import as_generator
from .._typing import SeedLike
from .._validation import MAX_STEPS, as_real_array, check_int, check_points
from ..mdp._sparse import SparseTransitionRewards, SparseTransitions, prefer_sparse
from ..mdp.checks import ROW_ATOL, check_distribution
from ..mdp.tabular import TabularMDP, check_boundary
from ._sparse_adapter import reachable_sparse, sparse_model

__all__ = ["DiscreteTupleObservation", "EnvInfo", "EnvTransitions", "discrete_observations",
           "env_info", "from_gymnasium", "random_exploration", "reachable_states"]

#: Bytes per collected transition (three int64 indices, a float64 reward, two flags).
STEP_BYTES = 34

#: Discount given to models of environments that do not define one.
DEFAULT_DISCOUNT = 0.99


@dataclasses.dataclass(frozen=True, eq=False)
class EnvInfo:
    """What a belief needs to know about a discrete environment (no dynamics).

    Attributes
    ----------
    n_states : int
        S, the size of the discrete observation space.
    n_actions : int
        A, the size of the discrete action space.
    coordinates : ndarray of shape (S, D) or None
        State coordinates (or features) for the kernel; None when none are derivable.
    shape : tuple of int or None
        Grid shape (rows, cols) when the states are the cells of a grid.
    name : str
        The environment's id (or class name).
    """

    n_states: int
    n_actions: int
    coordinates: np.ndarray | None
    shape: tuple[int, ...] | None
    name: str


@dataclasses.dataclass(frozen=True, eq=False)
class EnvTransitions:
    """Transitions collected by interacting with an environment (T steps).

    Attributes
    ----------
    states, actions, next_states : ndarray of shape (T,)
        :math:`(s_t, a_t, s_{t+1})`; after an episode ends, ``states[t + 1]`` is the next
        episode's start, not ``next_states[t]``.
    rewards : ndarray of shape (T,)
        The reward returned by ``step``.
    terminated, truncated : ndarray of shape (T,)
        The episode-end flags returned by ``step``.
    """

    states: np.ndarray
    actions: np.ndarray
    next_states: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray


# --------------------------------------------------------------------------------------
# Spaces and coordinates
# --------------------------------------------------------------------------------------
def _discrete_size(space: Any, name: str) -> int:
    from gymnasium import spaces

    if not isinstance(space, spaces.Discrete):
        raise TypeError(f"env.{name}: expected a gymnasium.spaces.Discrete space (a tabular "
                        f"environment), got {space!r}")
    if int(space.start) != 0:
        raise ValueError(f"env.{name}: expected a Discrete space starting at 0, got start="
                         f"{int(space.start)}")
    return int(space.n)


class DiscreteTupleObservation(gymnasium.ObservationWrapper):
    """Gymnasium wrapper: a ``Tuple`` of ``Discrete`` observations as one ``Discrete`` index.

    The index of an observation ``(o_1, ..., o_D)`` is ``np.ravel_multi_index`` of
    ``o_i - start_i`` over the component sizes (row-major); state ``s`` has the components
    ``state_coordinates[s]``.

    Parameters
    ----------
    env : gymnasium.Env
        With an observation space that is a Tuple of Discrete spaces.

    Attributes
    ----------
    sizes : tuple of int
        The components' sizes.
    starts : ndarray of shape (D,)
        The components' ``start`` values.
    """

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        parts = _tuple_parts(env.observation_space)
        if parts is None:
            raise TypeError(f"env.observation_space: expected a Tuple of Discrete spaces, got "
                            f"{env.observation_space!r}")
        self.sizes = tuple(n for n, _ in parts)
        self.starts = np.array([st for _, st in parts], dtype=np.int64)
        self.observation_space = gymnasium.spaces.Discrete(int(np.prod(self.sizes)))

    def observation(self, observation: Any) -> int:
        """The index of a tuple observation."""
        comps = np.asarray(observation, dtype=np.int64).ravel() - self.starts
        return int(np.ravel_multi_index(tuple(comps), self.sizes))

    def components(self, index: int) -> tuple[int, ...]:
        """The tuple observation of an index."""
        comps = np.unravel_index(int(index), self.sizes)
        return tuple(int(c) + int(st) for c, st in zip(comps, self.starts))

    @property
    def state_coordinates(self) -> np.ndarray:
        """The components of every index, ndarray of shape (S, D)."""
        grid = np.unravel_index(np.arange(int(np.prod(self.sizes))), self.sizes)
        return (np.stack(grid, axis=1) + self.starts).astype(np.float64)


def _tuple_parts(space: Any) -> list[tuple[int, int]] | None:
    """``[(n, start)]`` of a Tuple of Discrete spaces, else None."""
    spaces = gymnasium.spaces
    if not isinstance(space, spaces.Tuple) or not space.spaces:
        return None
    parts = [sp for sp in space.spaces if isinstance(sp, spaces.Discrete)]
    if len(parts) != len(space.spaces):
        return None
    return [(int(sp.n), int(sp.start)) for sp in parts]


def discrete_observations(env: Any) -> Any:
    """The environment with one ``Discrete`` observation index.

    Parameters
    ----------
    env : gymnasium.Env
        With a ``Discrete`` observation space (returned unchanged) or a ``Tuple`` of
        ``Discrete`` spaces (wrapped in :class:`DiscreteTupleObservation`).

    Returns
    -------
    gymnasium.Env

    Raises
    ------
    TypeError
        Any other observation space (continuous or other composite spaces are not tabular).
    """
    if isinstance(env.observation_space, gymnasium.spaces.Discrete):
        return env
    if _tuple_parts(env.observation_space) is not None:
        return DiscreteTupleObservation(env)
    raise TypeError(f"env.observation_space: expected a gymnasium.spaces.Discrete space or a Tuple "
                    f"of Discrete spaces (a tabular environment), got {env.observation_space!r}")


def _model_preserving_wrappers() -> tuple[type, ...]:
    """Wrappers that leave the model ``env.unwrapped`` publishes as the environment's own: episode
    limits and checks (``gymnasium.make`` adds them), statistics, corrpriors' own flattening.
    """
    w = gymnasium.wrappers
    return (w.TimeLimit, w.OrderEnforcing, w.PassiveEnvChecker, w.RecordEpisodeStatistics,
            DiscreteTupleObservation)


def _delegates_everything(wrapper: Any) -> bool:
    """Whether ``wrapper`` passes ``step`` and ``reset`` through untouched and shows its inner
    environment's spaces: a ``gymnasium.Wrapper`` subclass that overrides neither (it may add
    attributes, rendering or closing), is no reward, observation or action wrapper, and has the
    same observation and action spaces as the environment it wraps.
    """
    base = gymnasium.Wrapper
    if isinstance(wrapper, (gymnasium.RewardWrapper, gymnasium.ObservationWrapper, gymnasium.ActionWrapper)):
        return False
    cls = type(wrapper)
    if any(getattr(cls, name, None) is not getattr(base, name) for name in ("step", "reset", "unwrapped")):
        return False
    return bool(wrapper.observation_space == wrapper.env.observation_space
                and wrapper.action_space == wrapper.env.action_space)


def _check_wrappers(env: Any) -> None:
    """Raise ``ValueError`` naming the first wrapper of ``env`` (outermost first, through ``env.env``)
    that may change what the model ``env.unwrapped`` publishes: rewards (``TransformReward``),
    observations (any ``ObservationWrapper``), actions, or a wrapper of unknown kind that overrides
    ``step`` or ``reset`` or shows other spaces. Wrappers that pass both through untouched with
    the same spaces (:func:`_delegates_everything`) are read through, like ``gymnasium.make``'s.
    """
    harmless = _model_preserving_wrappers()
    inner = env
    while isinstance(inner, gymnasium.Wrapper):
        if not isinstance(inner, harmless) and not _delegates_everything(inner):
            kinds = [k for k, base in (("rewards", gymnasium.RewardWrapper),
                                       ("observations", gymnasium.ObservationWrapper),
                                       ("actions", gymnasium.ActionWrapper)) if isinstance(inner, base)]
            what = kinds[0] if kinds else "rewards, observations or actions"
            raise ValueError(f"env: the wrapper {type(inner).__name__} may change the {what} the agent sees, "
                             "which the model read from env.unwrapped would not describe; pass the environment "
                             "without it (read through: TimeLimit, OrderEnforcing, PassiveEnvChecker, "
                             "RecordEpisodeStatistics, DiscreteTupleObservation, and wrappers that override "
                             "neither step nor reset and keep the spaces)")
        inner = inner.env


def _published_coordinates(u: Any, n_states: int) -> np.ndarray | None:
    """The environment's own ``state_coordinates`` attribute, validated (None if absent)."""
    coords = getattr(u, "state_coordinates", None)
    if coords is None:
        return None
    if callable(coords):
        raise TypeError(f"env.unwrapped.state_coordinates: expected an array of shape (S, D) "
                        f"(an attribute or property, not a method), got {coords!r}")
    return _features(coords, n_states, name="env.unwrapped.state_coordinates")


def _known_coordinates(u: Any, n_states: int) -> tuple[np.ndarray | None, Any, Any]:
    """Coordinates, grid shape and walls published by the environment or derivable from its class."""
    from gymnasium.envs.toy_text.cliffwalking import CliffWalkingEnv
    from gymnasium.envs.toy_text.frozen_lake import FrozenLakeEnv
    from gymnasium.envs.toy_text.taxi import TaxiEnv

    from .gym import TabularEnv

    s = np.arange(n_states)
    shape: tuple[int, ...]
    if isinstance(u, TabularEnv):
        return u.mdp.coordinates, u.mdp.shape, u.mdp.walls
    published = _published_coordinates(u, n_states)
    if published is not None:
        return published, None, None
    if isinstance(u, FrozenLakeEnv):
        shape = (int(u.nrow), int(u.ncol))
    elif isinstance(u, CliffWalkingEnv):
        shape = tuple(int(n) for n in u.shape)
    elif isinstance(u, TaxiEnv):
        return np.array([list(u.decode(int(i))) for i in s], dtype=np.float64), None, None
    else:
        return None, None, None
    if shape[0] * shape[1] != n_states:   # a subclass with another state layout
        return None, None, None
    return np.stack(np.unravel_index(s, shape), axis=1).astype(np.float64), shape, None


def _published_boundary(u: Any) -> str | None:
    """What a move off the grid does, as the environment publishes it (``state_boundary``;
    corrpriors' own environments: their MDP's ``boundary``), validated; None if unsaid.
    """
    from .gym import TabularEnv

    if isinstance(u, TabularEnv):
        return u.mdp.boundary
    return check_boundary(getattr(u, "state_boundary", None), "env.unwrapped.state_boundary")


def _features(features: Any, n_states: int, name: str = "features") -> np.ndarray:
    """Validate user features (called ``name`` in errors): a callable ``state -> (D,)`` or an
    array of shape (S, D) (one row per state; :func:`corrpriors._validation.check_points`).
    """
    if callable(features):
        rows: list[np.ndarray] = []
        for s in range(n_states):
            f = np.atleast_1d(as_real_array(features(s), f"{name}({s})")).astype(np.float64)
            if f.ndim != 1 or (rows and f.shape != rows[0].shape):
                raise ValueError(f"{name}: expected every state to give a vector of one length "
                                 f"D = {rows[0].size if rows else f.size}; state {s} gave shape "
                                 f"{f.shape}")
            rows.append(f)
        X: Any = np.stack(rows)
    elif isinstance(features, (str, bytes)) or not hasattr(features, "__len__"):
        raise TypeError(f"{name}: expected a callable state -> vector or an array of shape "
                        f"(S, D), got {type(features).__name__}")
    else:
        X = as_real_array(features, name)
        if X.ndim == 1:
            X = X[:, None]
    return check_points(X, name, n_points=n_states, what="states", symbol="S")


def env_info(env: Any, *, features: Callable[[int], Any] | Any = None) -> EnvInfo:
    """Sizes and state coordinates of a discrete environment (no model needed).

    Parameters
    ----------
    env : gymnasium.Env
        An environment (wrapped or not) with a Discrete action space and a Discrete observation
        space or a Tuple of Discrete ones (flattened by :func:`discrete_observations`). The
        sizes are the wrapped environment's; derived coordinates come from ``env.unwrapped``,
        so pass ``features=`` for an observation wrapper that relabels states.
    features : callable or array_like of shape (S, D), optional
        ``features(s)`` -> a length-D vector per state, or the (S, D) array; replaces the
        coordinates the environment publishes (``env.unwrapped.state_coordinates``) or that
        are derived from known environments (FrozenLake, CliffWalking: (row, col);
        Taxi: ``decode(s)``; corrpriors' own: their grid cells) or from Tuple observations.

    Returns
    -------
    EnvInfo

    Raises
    ------
    TypeError
        If a space is not Discrete or a Tuple of Discrete (continuous or other composite spaces
        are not tabular).
    ValueError
        If the features or the published coordinates have the wrong length.
    """
    u = env.unwrapped
    flat = discrete_observations(env)
    S = _discrete_size(flat.observation_space, "observation_space")
    A = _discrete_size(env.action_space, "action_space")
    coords, shape, _ = _known_coordinates(u, S)
    if coords is None and flat is not env:
        coords = flat.state_coordinates
    if features is not None:
        coords, shape = _features(features, S), None
    spec = getattr(env, "spec", None)
    name = spec.id if spec is not None else type(u).__name__
    return EnvInfo(S, A, coords, shape, name)


# --------------------------------------------------------------------------------------
# The exact model
# --------------------------------------------------------------------------------------
def _entry(entry: Any, s: int, a: int, S: int) -> tuple[float, int, float, bool]:
    """One checked entry ``(prob, next_state, reward, terminated)`` of ``P[s][a]``; each message names the field."""
    where = f"env.unwrapped.P[{s}][{a}]"
    prob, s2, reward, done = entry
    if isinstance(s2, (bool, np.bool_)) or not isinstance(s2, (int, np.integer, float, np.floating)) \
            or not np.isfinite(s2) or int(s2) != s2 or not 0 <= int(s2) < S:
        raise ValueError(f"{where}: next state {s2!r} (entry {entry!r}) is not a state index in [0, {S - 1}]")
    values = []
    for name, value in (("probability", prob), ("reward", reward)):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise ValueError(f"{where}: the {name} {value!r} (entry {entry!r}) is not a number")
        values.append(float(value))
    p, r = values
    if not (np.isfinite(p) and p >= 0):
        raise ValueError(f"{where}: expected a probability >= 0, got {prob!r} (entry {entry!r})")
    if not np.isfinite(r):
        raise ValueError(f"{where}: expected a finite reward, got {reward!r} (entry {entry!r})")
    if not isinstance(done, (bool, np.bool_, int, np.integer)):
        raise ValueError(f"{where}: expected terminated to be true or false, got {done!r} (entry {entry!r})")
    return p, int(s2), r, bool(done)


def _listed(table: Any, S: int, A: int, flat: Any = None
            ) -> Iterator[tuple[int, int, list[tuple[float, int, float, bool]]]]:
    """Every (s, a) of a toy-text table with its validated entries (prob, next_state, reward,
    terminated).

    With ``flat`` (a :class:`DiscreteTupleObservation`), rows and next states may be given by
    their tuple observations instead of their indices.
    """
    for s in range(S):
        for a in range(A):
            try:
                row = table[flat.components(s)] if flat is not None and isinstance(table, dict) \
                    and s not in table else table[s]
                entries = row[a]
            except (KeyError, IndexError, TypeError):
                raise ValueError(f"env.unwrapped.P: expected P[s][a] for every state s < {S} and "
                                 f"action a < {A}; P[{s}][{a}] is missing") from None
            if isinstance(entries, (str, bytes)) or not hasattr(entries, "__iter__"):
                raise ValueError(f"env.unwrapped.P[{s}][{a}]: expected a list of entries (prob, next_state, "
                                 f"reward, terminated), got {entries!r}")
            out = []
            for entry in entries:
                if isinstance(entry, (str, bytes)) or not hasattr(entry, "__len__") or len(entry) != 4:
                    raise ValueError(f"env.unwrapped.P[{s}][{a}]: expected entries (prob, "
                                     f"next_state, reward, terminated), got {entry!r}")
                if flat is not None and np.ndim(entry[1]) == 1:   # a tuple observation
                    entry = (entry[0], flat.observation(entry[1]), *tuple(entry)[2:])
                out.append(_entry(entry, s, a, S))
            yield s, a, out


def _row_sum_error(s: int, a: int, total: float) -> ValueError:
    return ValueError(f"env.unwrapped.P[{s}][{a}]: probabilities must sum to 1, they sum to {total:.12g}")


def _read_table(table: Any, S: int, A: int, flat: Any = None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """P (S, A, S), summed rewards p*r (S, A, S), and which next states end / continue
    (``flat``: see :func:`_listed`).
    """
    P = np.zeros((S, A, S))
    PR = np.zeros((S, A, S))
    ends = np.zeros((S, A, S), dtype=bool)     # reached with terminated=True (prob > 0)
    goes_on = np.zeros((S, A, S), dtype=bool)  # reached with terminated=False (prob > 0)
    for s, a, entries in _listed(table, S, A, flat):
        for p, s2, r, done in entries:
            P[s, a, s2] += p
            PR[s, a, s2] += p * r
            if p > 0:
                (ends if done else goes_on)[s, a, s2] = True
        total = P[s, a].sum()
        if abs(total - 1.0) > ROW_ATOL:
            raise _row_sum_error(s, a, total)
    return P, PR, ends, goes_on


def _reachable(P: Any, start: np.ndarray, terminal: np.ndarray) -> np.ndarray:
    """States reachable from ``start`` without stepping out of a terminal state."""
    if isinstance(P, SparseTransitions):
        return reachable_sparse(P, start, terminal)
    edges = (P > 0).any(axis=1) & ~terminal[:, None]     # (S, S): s -> s' possible
    seen = start.copy()
    frontier = start.copy()
    while frontier.any():
        frontier = edges[frontier].any(axis=0) & ~seen
        seen |= frontier
    return seen


def reachable_states(mdp: TabularMDP) -> np.ndarray:
    """Mark the states an episode can visit: reachable from the start distribution under some policy.

    A state counts if a chain of transitions with positive probability leads to it from a
    state of positive start probability (every state, for a model without a start
    distribution), never passing *through* a terminal state (reaching one counts).

    Parameters
    ----------
    mdp : TabularMDP

    Returns
    -------
    ndarray of shape (S,)
        Boolean mask (e.g. CliffWalking's cliff cells, where no episode ever is, are False).
    """
    if not isinstance(mdp, TabularMDP):
        raise TypeError(f"mdp: expected a TabularMDP, got {type(mdp).__name__}")
    S = mdp.n_states
    mu = mdp.initial_distribution
    start = np.ones(S, dtype=bool) if mu is None else np.asarray(np.asarray(mu) > 0, dtype=bool)
    terminal = np.zeros(S, dtype=bool) if mdp.terminal is None else np.asarray(mdp.terminal, dtype=bool)
    P = mdp.transitions
    return _reachable(P if isinstance(P, SparseTransitions) else np.asarray(P), start, terminal)


def _terminal_states(P: np.ndarray, ends: np.ndarray, goes_on: np.ndarray,
                     start: np.ndarray) -> np.ndarray:
    """States whose arrival ends the episode; checks that termination depends on them only.

    The check covers the rows an episode can reach from ``start`` (Taxi lists rows for
    states that only exist after an episode has ended, where the rule does not hold).
    """
    terminal = np.asarray(ends.any(axis=(0, 1)))
    live = _reachable(P, start, terminal) & ~terminal
    clash = goes_on[live][:, :, terminal]       # from a live state into a terminal one, not ending
    if clash.any():
        s_live, a, j = np.argwhere(clash)[0]
        s = int(np.flatnonzero(live)[s_live])
        s2 = int(np.flatnonzero(terminal)[j])
        raise ValueError(f"env.unwrapped.P: state {s2} ends the episode on some transitions but "
                         f"not on P[{s}][{a}]; the adapter needs termination to depend only on "
                         "the state reached")
    return terminal


def _transition_rewards(P: np.ndarray, PR: np.ndarray, terminal: np.ndarray) -> np.ndarray:
    """r(s, a, s') (S, A, S) from the summed p*r, filled in where the table lists nothing.

    Where every listed arrival in a next state s' (from a non-terminal state) carries one
    reward, the table's reward is a function of s' (FrozenLake) and an unlisted arrival in s'
    earns it too. Otherwise an unlisted next state earns the unweighted mean of the rewards
    listed for (s, a), which is R(s, a) whenever these agree (every deterministic table).
    """
    listed = P > 0
    r = np.divide(PR, P, out=np.zeros_like(PR), where=listed)
    fill = np.broadcast_to((r.sum(axis=-1) / listed.sum(axis=-1))[..., None], r.shape)
    live = listed & ~terminal[:, None, None]     # the environment never steps from a terminal
    low = np.where(live, r, np.inf).min(axis=(0, 1))
    high = np.where(live, r, -np.inf).max(axis=(0, 1))
    entered = live.any(axis=(0, 1))                                          # (S,)
    if np.all(high[entered] - low[entered] <= 1e-12 * np.maximum(1.0, np.abs(low[entered]))):
        fill = np.where(entered, low, fill)   # r(s') where an arrival is listed
    return np.where(listed, r, fill)


def from_gymnasium(env: Any, *, features: Callable[[int], Any] | Any = None,
                   discount: float | None = None, sparse: bool | None = None) -> TabularMDP:
    r"""Read the exact tabular model of a discrete Gymnasium environment.

    Parameters
    ----------
    env : gymnasium.Env
        An environment with Discrete spaces whose ``unwrapped`` publishes its model: toy-text's
        ``P[s][a] = [(prob, next_state, reward, terminated), ...]`` or a
        :class:`~corrpriors.envs.TabularEnv`. Wrapped only by wrappers that keep that model
        (``gymnasium.make``'s TimeLimit, OrderEnforcing and PassiveEnvChecker,
        RecordEpisodeStatistics, :class:`DiscreteTupleObservation`, and any wrapper that overrides
        neither ``step`` nor ``reset`` and keeps the spaces): reward, observation and action
        wrappers, and any other, are refused, since the model read from ``env.unwrapped`` would
        not describe what they change.
    features : callable or array_like of shape (S, D), optional
        State features for the kernel (see :func:`env_info`); default: the coordinates
        derivable from the environment, if any.
    discount : float, optional
        :math:`\gamma` of the returned model (default: a TabularEnv's own, else 0.99).
    sparse : bool or None
        Store the model sparsely (True), densely (False) or by size (None: sparse when the
        dense (S, A, S) table would exceed :data:`~corrpriors.mdp.DENSE_LIMIT_BYTES`, e.g.
        FrozenLake maps beyond 38 x 38). A sparse model never allocates an (S, A, S) array:
        memory grows with the number of listed transitions. A TabularEnv keeps its model's
        form unless True / False is given.

    Returns
    -------
    TabularMDP
        ``transitions`` (S, A, S) (dense, or a :class:`~corrpriors.mdp.SparseTransitions`);
        ``rewards`` :math:`r(s, a, s')` of shape (S, A, S) (a
        :class:`~corrpriors.mdp.SparseTransitionRewards` for a sparse model, the model's own
        rewards for a TabularEnv); ``terminal`` (S,); ``initial_distribution`` (S,) if the
        environment has one; ``coordinates`` (S, D) and, for grids, ``shape``; ``boundary``
        when the environment publishes it (``state_boundary``, module docstring; not with
        ``features``).

    Raises
    ------
    TypeError
        If a space is not Discrete.
    ValueError
        If a wrapper may change rewards, observations or actions (named), the environment
        publishes no model or an unknown ``state_boundary``, its
        probabilities do not sum to one, a next state is out of range, termination depends on
        more than the state reached, or the features have the wrong length.

    Examples
    --------
    >>> import gymnasium
    >>> from corrpriors.envs import from_gymnasium
    >>> mdp = from_gymnasium(gymnasium.make("FrozenLake-v1", map_name="4x4"))
    >>> mdp.transitions.shape, int(mdp.terminal.sum()), mdp.coordinates[5].tolist()
    ((16, 4, 16), 5, [1.0, 1.0])
    """
    from .gym import TabularEnv

    _check_wrappers(env)
    info = env_info(env, features=features)
    u = env.unwrapped
    S, A = info.n_states, info.n_actions
    _, shape, walls = _known_coordinates(u, S)
    boundary = _published_boundary(u)
    if features is not None:   # the features' coordinates are not the grid's
        shape, walls, boundary = None, None, None
    if isinstance(u, TabularEnv):
        gamma = u.mdp.discount if discount is None else discount
        return dataclasses.replace(_in_form(u.mdp, sparse), discount=gamma,
                                   coordinates=info.coordinates, shape=shape, walls=walls,
                                   initial_distribution=u.initial_distribution, boundary=boundary)
    table = getattr(u, "P", None)
    if table is None:
        raise ValueError(f"env: {info.name} publishes no tabular model (env.unwrapped.P); it can "
                         "still be learned and controlled -- use corrpriors.envs.env_info(env) for "
                         "the beliefs -- but exact evaluation needs the model")
    if getattr(u, "fickle_passenger", False):
        warnings.warn("env: Taxi's fickle passenger changes destination outside env.unwrapped.P; "
                      "the model returned describes the environment without it", UserWarning,
                      stacklevel=2)
    flat = discrete_observations(env)
    flat = flat if flat is not env else None
    mu = getattr(u, "initial_state_distrib", None)
    if mu is not None:
        mu = check_distribution(mu, S, "env.unwrapped.initial_state_distrib")
    gamma = DEFAULT_DISCOUNT if discount is None else discount
    if prefer_sparse(S, A, sparse):
        P_sp, r_sp, terminal = sparse_model(_listed(table, S, A, flat), S, A,
                                            np.ones(S, bool) if mu is None else mu > 0)
        return TabularMDP(P_sp, r_sp, gamma, coordinates=info.coordinates, shape=shape, walls=walls,
                          name=info.name, terminal=terminal, initial_distribution=mu,
                          boundary=boundary)
    P, PR, ends, goes_on = _read_table(table, S, A, flat)
    terminal = _terminal_states(P, ends, goes_on, np.ones(S, bool) if mu is None else mu > 0)
    r = _transition_rewards(P, PR, terminal)  # before normalising: PR / P is the listed mean
    P /= P.sum(axis=-1, keepdims=True)       # remove the round-off the check allowed
    P[terminal] = 0.0
    P[terminal, :, terminal.nonzero()[0]] = 1.0   # absorbing: P[t, a, t] = 1
    r[terminal] = 0.0
    return TabularMDP(P, r, gamma, coordinates=info.coordinates, shape=shape, walls=walls,
                      name=info.name, terminal=terminal, initial_distribution=mu, boundary=boundary)


def _in_form(mdp: TabularMDP, sparse: bool | None) -> TabularMDP:
    """``mdp`` with dense or sparse tables as asked (None: as it is)."""
    if sparse is None or bool(prefer_sparse(mdp.n_states, mdp.n_actions, sparse)) == mdp.is_sparse:
        return mdp
    if isinstance(mdp.transitions, SparseTransitions):
        rewards = mdp.rewards
        return dataclasses.replace(mdp, transitions=mdp.transitions.toarray(),
                                   rewards=rewards.toarray()
                                   if isinstance(rewards, SparseTransitionRewards) else rewards)
    return dataclasses.replace(mdp, transitions=SparseTransitions.from_dense(mdp.transitions))


# --------------------------------------------------------------------------------------
# Data collection
# --------------------------------------------------------------------------------------
def random_exploration(env: Any, n_steps: int, *, rng: SeedLike) -> EnvTransitions:
    """Uniformly random actions for ``n_steps`` steps, resetting whenever an episode ends.

    Parameters
    ----------
    env : gymnasium.Env
        A discrete environment (wrapped or not; a time limit truncates episodes; Tuple
        observations are flattened by :func:`discrete_observations`).
    n_steps : int
        Number of transitions T, at most :data:`~corrpriors._validation.MAX_STEPS`.
    rng : numpy.random.Generator or seed
        Draws the actions and seeds the environment's first reset.

    Returns
    -------
    EnvTransitions
    """
    T = check_int(n_steps, "n_steps", 0, MAX_STEPS)
    check_memory(STEP_BYTES * T, f"n_steps: {T:,} transitions", "collect fewer steps")
    info = env_info(env)
    env = discrete_observations(env)
    gen = as_generator(rng)
    out = {k: np.zeros(T, dtype=np.int64) for k in ("states", "actions", "next_states")}
    rewards = np.zeros(T)
    flags = {k: np.zeros(T, dtype=bool) for k in ("terminated", "truncated")}
    s, _ = env.reset(seed=int(gen.integers(2**32)))
    for t in range(T):
        a = int(gen.integers(info.n_actions))     # one draw per step: a shorter run is a prefix
        s2, r, term, trunc, _ = env.step(a)
        out["states"][t], out["actions"][t], out["next_states"][t] = s, a, s2
        rewards[t], flags["terminated"][t], flags["truncated"][t] = r, term, trunc
        s = env.reset()[0] if term or trunc else s2
    return EnvTransitions(out["states"], out["actions"], out["next_states"], rewards,
                          flags["terminated"], flags["truncated"])
