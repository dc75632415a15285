"""Trajectory sampling and count statistics.

Sampling is vectorised over episodes: each step draws the actions and next states of all
episodes at once by inverse-CDF lookup with one :class:`numpy.random.Generator`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._memory import MemoryEstimateError, check_memory
from .._random import as_generator, inverse_cdf
from .._validation import check_index_array, check_int
from ._sparse import SparseTransitions, dense_nbytes, prefer_sparse
from .checks import check_distribution, check_policy
from .planning import _model
from .tabular import TabularMDP


class NextStateSampler:
    r"""Draw next states :math:`s' \sim P(\cdot \mid s, a)` by inverse CDF from a dense or sparse table.

    The cumulative sums are computed once. Dense and sparse tables with equal probabilities
    map equal uniforms to equal next states (:meth:`SparseTransitions.sample`), so rollouts,
    the Gymnasium wrapper and the PSRL loop give the same trajectories for both.

    Parameters
    ----------
    transitions : ndarray of shape (S, A, S) or SparseTransitions
    """

    def __init__(self, transitions: Any) -> None:
        if isinstance(transitions, SparseTransitions):
            self._sparse: SparseTransitions | None = transitions
            transitions.row_cdf   # noqa: B018 - computed once, here
            self._cdf = None
        else:
            self._sparse = None
            self._cdf = np.cumsum(np.asarray(transitions, dtype=np.float64), axis=-1)

    def __call__(self, states: Any, actions: Any, u: Any) -> Any:
        """Next states for ``states``, ``actions`` and uniforms ``u`` (arrays of shape (E,) or scalars)."""
        if self._sparse is not None:
            return self._sparse.sample(states, actions, u)
        assert self._cdf is not None
        return inverse_cdf(self._cdf[states, actions], u)


@dataclass(frozen=True)
class Trajectories:
    """Sampled episodes of equal length.

    Attributes
    ----------
    states : ndarray of shape (E, T)
        :math:`s_t` of episode ``e``.
    actions : ndarray of shape (E, T)
        :math:`a_t`.
    next_states : ndarray of shape (E, T)
        :math:`s_{t+1}`.
    rewards : ndarray of shape (E, T)
        :math:`R(s_t, a_t)` (0 in a terminal state).
    """

    states: np.ndarray
    actions: np.ndarray
    next_states: np.ndarray
    rewards: np.ndarray

    @property
    def n_episodes(self) -> int:
        """Number of episodes E."""
        return int(self.states.shape[0])

    @property
    def n_steps(self) -> int:
        """Steps per episode T."""
        return int(self.states.shape[1])

    def state_sequence(self, episode: int = 0) -> np.ndarray:
        r"""Return the T + 1 visited states :math:`(s_0, \dots, s_T)` of one episode, shape (T + 1,)."""
        return np.concatenate([self.states[episode], self.next_states[episode, -1:]])


#: (E, T) 8-byte arrays at the peak of :func:`sample_trajectories` (states, actions, next states,
#: rewards, and one index temporary; measured with tracemalloc: 4.2-4.8 on grid worlds).
ROLLOUT_ARRAYS = 5


def sample_trajectories(mdp: TabularMDP, policy: Any, n_steps: int, *, rng: Any,
                        n_episodes: int = 1, start: Any = None,
                        initial_distribution: Any = None) -> Trajectories:
    """Roll out a stationary policy.

    Terminal states (``mdp.terminal``) are treated as the planners and
    :func:`~corrpriors.mdp.expected_return` treat them: absorbing with no reward. An episode
    that enters one stays there (``next_states`` repeats it) and collects 0 for the remaining
    steps, so the mean discounted reward sum estimates ``expected_return``.

    Parameters
    ----------
    mdp : TabularMDP
    policy : array_like of shape (S, A), or integer actions of shape (S,)
        Stationary policy.
    n_steps : int
        Transitions per episode T.
    rng : int, Generator or None
        Randomness source (normalised with :func:`~corrpriors._random.as_generator`).
    n_episodes : int
        Number of independent episodes E.
    start : int or array_like of int, shape (E,), optional
        Fixed start state(s); integers only (1.5 and True are refused, not truncated).
        Mutually exclusive with ``initial_distribution``.
    initial_distribution : array_like of shape (S,), optional
        Start-state distribution. Default (when ``start`` is None too): the MDP's
        ``initial_distribution`` if it has one, else uniform over the states -- the start
        :func:`~corrpriors.mdp.expected_return` averages over.

    Returns
    -------
    Trajectories

    Raises
    ------
    corrpriors._memory.MemoryEstimateError
        A ``ValueError`` naming ``n_steps, n_episodes``: the (E, T) arrays
        (:data:`ROLLOUT_ARRAYS` of them, and a dense table's (S, A, S) cumulative sums) would
        not fit in the memory this process may use; raised before they are allocated.
    """
    gen = as_generator(rng)
    S, A = mdp.n_states, mdp.n_actions
    pi = check_policy(policy, S, A, "policy")
    T, E = int(n_steps), int(n_episodes)
    if T < 1 or T != n_steps:
        raise ValueError(f"n_steps: expected a positive integer, got {n_steps!r}")
    if E < 1 or E != n_episodes:
        raise ValueError(f"n_episodes: expected a positive integer, got {n_episodes!r}")
    cdf = 0 if isinstance(mdp.transitions, SparseTransitions) else dense_nbytes(S, A)
    check_memory(8.0 * ROLLOUT_ARRAYS * E * T + cdf,
                 f"sample_trajectories: {E:,} episodes x {T:,} steps"
                 + (" (and the cumulative sums of a dense table)" if cdf else ""),
                 "n_steps, n_episodes: sample fewer steps at a time (e.g. episodes in chunks, "
                 "counting each chunk with transition_counts)")
    if start is not None and initial_distribution is not None:
        raise ValueError("start, initial_distribution: give at most one of them")
    if start is not None:
        first = check_index_array(start, "start", S, "S")
        if first.ndim > 1 or first.size not in (1, E):
            raise ValueError(f"start: expected a state or {E} states (one per episode), got shape "
                             f"{first.shape}")
        s = np.broadcast_to(first.reshape(-1), (E,)).astype(np.int64)
    else:
        if initial_distribution is not None:
            p0 = check_distribution(initial_distribution, S, "initial_distribution")
        elif mdp.initial_distribution is not None:
            p0 = np.asarray(mdp.initial_distribution)
        else:
            p0 = np.full(S, 1.0 / S)
        s = inverse_cdf(np.cumsum(p0), gen.random(E))
    pi_cdf = np.cumsum(pi, axis=1)
    step = NextStateSampler(mdp.transitions)
    _, R, _, keep = _model(mdp, None)      # the planners' rewards: 0 at terminal states
    absorbing = None if keep is None else keep == 0.0
    states = np.empty((E, T), dtype=np.int64)
    actions = np.empty((E, T), dtype=np.int64)
    nxt = np.empty((E, T), dtype=np.int64)
    for t in range(T):
        a = inverse_cdf(pi_cdf[s], gen.random(E))
        s2 = step(s, a, gen.random(E))
        if absorbing is not None:          # a terminal state has no future: the episode stays
            s2 = np.where(absorbing[s], s, s2)
        states[:, t], actions[:, t], nxt[:, t] = s, a, s2
        s = s2
    return Trajectories(states, actions, nxt, R[states, actions])


def _as_arrays(data: Any, *names: str) -> list[np.ndarray]:
    if isinstance(data, Trajectories):
        return [np.asarray(getattr(data, n)).ravel() for n in names]
    if len(data) != len(names):
        raise ValueError(f"data: expected Trajectories or a tuple ({', '.join(names)}), "
                         f"got {len(data)} items")
    out = [np.asarray(x).ravel() for x in data]
    for n, x in zip(names, out):
        if not np.issubdtype(x.dtype, np.integer):
            raise ValueError(f"{n}: expected integer indices, got dtype {x.dtype}")
    if len({x.size for x in out}) != 1:
        raise ValueError(f"data: {', '.join(names)} must have equal lengths, got "
                         f"{[x.size for x in out]}")
    return out


def _check_sizes(n_states: Any, n_actions: Any) -> tuple[int, int]:
    """S and A as positive ints, or a ``ValueError`` naming ``n_states`` / ``n_actions``."""
    return check_int(n_states, "n_states", 1), check_int(n_actions, "n_actions", 1)


def state_action_counts(data: Any, n_states: int, n_actions: int) -> np.ndarray:
    r"""Count matrix :math:`X_{sa} = \#\{t: s_t = s, a_t = a\}`.

    Parameters
    ----------
    data : Trajectories or tuple (states, actions)
        Integer arrays of equal size.
    n_states, n_actions : int
        S and A.

    Returns
    -------
    ndarray of shape (S, A), int64

    Raises
    ------
    corrpriors._memory.MemoryEstimateError
        A ``ValueError``: the (S, A) matrix would not fit in the memory this process may use
        (:func:`corrpriors._memory.check_memory`); raised before it is allocated.
    """
    n_states, n_actions = _check_sizes(n_states, n_actions)
    check_memory(8.0 * n_states * n_actions,
                 f"state_action_counts: the (S, A) int64 counts of {n_states:,} states x "
                 f"{n_actions:,} actions", "check n_states and n_actions")
    s, a = _as_arrays(data, "states", "actions")
    if s.size and ((s < 0).any() or (s >= n_states).any() or (a < 0).any() or (a >= n_actions).any()):
        raise ValueError(f"data: indices out of range for S={n_states}, A={n_actions}")
    return np.bincount(s * n_actions + a, minlength=n_states * n_actions).reshape(n_states, n_actions)


def transition_counts(data: Any, n_states: int, n_actions: int, *,
                      sparse: bool | None = False) -> Any:
    r"""Count tensor :math:`X_{s a s'} = \#\{t: s_t = s, a_t = a, s_{t+1} = s'\}`.

    Parameters
    ----------
    data : Trajectories or tuple (states, actions, next_states)
        Integer arrays of equal size.
    n_states, n_actions : int
        S and A.
    sparse : bool or None, default=False
        Return a scipy CSR array of shape (S·A, S) (row ``s * A + a``, column ``s'``)
        instead of the dense tensor; None chooses as the environment builders do
        (:func:`~corrpriors.mdp.prefer_sparse`: sparse above
        :data:`~corrpriors.mdp.DENSE_LIMIT_BYTES`, and wherever the dense tensor would not fit
        in memory). Memory then grows with the number of distinct observed transitions, not
        S²·A. The dense tensor takes 8·S²·A bytes (75 GiB per action at 100,000 states);
        ``False`` refuses it where it cannot fit (see Raises).

    Returns
    -------
    ndarray of shape (S, A, S), int64, or scipy.sparse.csr_array of shape (S·A, S), int64
        ``counts[:, a, :]`` is the paper's :math:`\mathbf X^{(a)}`.

    Raises
    ------
    corrpriors._memory.MemoryEstimateError
        A ``ValueError`` naming ``sparse``: with ``sparse=False``, the dense tensor would need
        more memory than this process may use (``ulimit -v``, the physical memory,
        ``CORRPRIORS_MEMORY_LIMIT``: :func:`corrpriors._memory.check_memory`); raised before
        it is allocated.
    """
    n_states, n_actions = _check_sizes(n_states, n_actions)
    dense = not prefer_sparse(n_states, n_actions, sparse)
    if dense:
        try:
            check_memory(8.0 * n_states * n_actions * n_states,
                         f"transition_counts(sparse=False): the dense (S, A, S) int64 counts of "
                         f"{n_states:,} states x {n_actions:,} actions",
                         "pass sparse=True for a scipy CSR array of shape (S·A, S) (memory grows "
                         "with the observed transitions) or sparse=None (sparse where dense is "
                         "large)")
        except MemoryEstimateError:
            if sparse is not None:
                raise
            dense = False               # None: sparse where the dense tensor cannot fit either
    s, a, s2 = _as_arrays(data, "states", "actions", "next_states")
    if s.size and ((np.minimum(s, s2) < 0).any() or (np.maximum(s, s2) >= n_states).any()
                   or (a < 0).any() or (a >= n_actions).any()):
        raise ValueError(f"data: indices out of range for S={n_states}, A={n_actions}")
    if not dense:
        rows = s.astype(np.int64) * n_actions + a
        out = sp.coo_array((np.ones(s.size, dtype=np.int64), (rows, s2.astype(np.int64))),
                           shape=(n_states * n_actions, n_states)).tocsr()
        out.sum_duplicates()
        return out
    flat = (s * n_actions + a) * n_states + s2
    return np.bincount(flat, minlength=n_states * n_actions * n_states).reshape(
        n_states, n_actions, n_states)


__all__ = ["Trajectories", "sample_trajectories", "state_action_counts", "transition_counts",
           "NextStateSampler"]
