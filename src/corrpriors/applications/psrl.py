r"""Posterior sampling for reinforcement learning (PSRL) with a learned transition belief.

Every ``replan_every`` transitions (or at the end of every episode) the agent folds the new
data into its belief and recomputes its policy, which it then follows greedily until the next
replan; with ``replan_on_doubling`` also as soon as a (state, action) pair's visits have doubled
since the last replan (TSDE, Ouyang et al., 2017), and with ``replan_on_revisit`` as soon as a pair
visited since the last replan comes back with its visits doubled (the same rule without the first
visits: a plan caught in a cycle, a wall it keeps bumping into, is not followed on). Two
variants, as in the paper (after Osband, Russo & Van Roy, 2013):

* ``"sampling"`` -- draw ``n_samples`` models :math:`P^{(m)}` from the posterior, solve
  each for its optimal Q-values :math:`Q^{(m)}` and act greedily on
  :math:`\bar Q = \frac1M \sum_m Q^{(m)}`;
* ``"mean"`` -- act greedily on the optimal Q-values of the posterior-mean model.

Rewards are either known -- :math:`R(s)`, :math:`R(s, a)` or transition rewards
:math:`r(s, a, s')` (e.g. from :func:`corrpriors.envs.from_gymnasium`), whose expectation is
taken under each sampled model -- or learned (``learn_rewards=True``: an independent
Normal-Gamma posterior per (s, a), :class:`NormalGammaRewards`, drawn together with the
transitions). Terminal states are model structure, not data: once a step reports
``terminated``, the state reached is known to be terminal (absorbing, no reward, planned with
:math:`V = 0`), and the restart of the next episode never enters the belief.

Planning is exact for the discounted criterion (:func:`corrpriors.mdp.planning.policy_iteration`
batched over the M sampled models, warm-started from the previous greedy policy).
:func:`run_psrl` runs the agent on a Gymnasium environment (``reset``/``step``, with
``terminated``/``truncated``) or, as in the paper experiments, on a transition matrix, and scores
the greedy policy by its exact expected discounted return under the true model.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._memory import check_memory
from .._random import as_generator
from .._typing import FloatArray, IntArray, SeedLike
from .._validation import (
    MAX_SAMPLES,
    MAX_STEPS,
    check_array,
    check_bool,
    check_index_array,
    check_int,
    check_real,
)
from ..mdp._sparse import (
    SparseTransitionRewards,
    SparseTransitions,
    is_sparse_table,
    listed_expectation,
    transition_entries,
    transition_reward_values,
)
from ..mdp.checks import check_rewards
from ..mdp.metrics import expected_return, normalize_returns, return_range
from ..mdp.planning import (
    PlanningResult,
    policy_evaluation,
    policy_iteration,
    policy_iteration_operator,
)
from ..mdp.rollout import NextStateSampler
from ..mdp.tabular import TabularMDP
from .transitions import TransitionBelief

__all__ = ["MAX_REWARD", "OPTIMAL_TOL", "PRIOR_RANGE", "NormalGammaRewards", "PSRLAgent", "plan_sparse", "run_psrl"]

#: A greedy policy counts as optimal when its normalised return is at least ``1 - OPTIMAL_TOL``.
OPTIMAL_TOL = 1e-6
#: Largest magnitude of a learned reward (and of the reward prior's mean): the Normal-Gamma
#: posterior sums the rewards' squares and weighs squared deviations by ``kappa`` (at most 1e100),
#: which stays far inside float64 (a reward of 1e200 made its draws infinite).
MAX_REWARD = 1e100
#: Range of the Normal-Gamma prior's ``kappa``, ``shape`` and ``rate``: with rewards and the prior
#: mean at most :data:`MAX_REWARD` in magnitude, every posterior parameter stays finite (the
#: largest, the rate, below about 1e301).
PRIOR_RANGE = (1e-100, 1e100)


def _as_rewards(rewards: Any, n_states: int, n_actions: int) -> Any:
    if isinstance(rewards, SparseTransitionRewards):     # r(s, a, s') of a large model
        return check_rewards(rewards, n_states, n_actions, "rewards")
    r = check_array(rewards, "rewards")
    if r.shape == (n_states,):
        r = np.repeat(r[:, None], n_actions, axis=1)
    if r.shape not in ((n_states, n_actions), (n_states, n_actions, n_states)):
        raise ValueError(f"rewards: expected shape (S,), (S, A) or (S, A, S) = ({n_states},), "
                         f"({n_states}, {n_actions}) or ({n_states}, {n_actions}, {n_states}), "
                         f"got {r.shape}")
    return r


def _index_arrays(n_states: int, n_actions: int, states: Any, actions: Any,
                  values: Any) -> tuple[IntArray, IntArray, FloatArray]:
    s = np.atleast_1d(check_index_array(states, "states", n_states, "S"))
    a = np.atleast_1d(check_index_array(actions, "actions", n_actions, "A"))
    v = np.atleast_1d(np.asarray(values, dtype=np.float64))
    if not (s.shape == a.shape == v.shape) or s.ndim != 1:
        raise ValueError(f"states, actions, rewards: expected equal 1-D shapes, got {s.shape}, "
                         f"{a.shape}, {v.shape}")
    if not np.all(np.isfinite(v)):
        raise ValueError("rewards: contains NaN or infinite values")
    if v.size and np.abs(v).max() > MAX_REWARD:
        raise ValueError(f"rewards: expected magnitudes at most {MAX_REWARD:g} (their squares are summed), "
                         f"got {v[np.argmax(np.abs(v))]:g}")
    return s, a, v


# --------------------------------------------------------------------------------------
# Reward belief
# --------------------------------------------------------------------------------------
class NormalGammaRewards:
    r"""Independent conjugate belief over the mean reward of every (state, action).

    For every (s, a) the observed rewards are :math:`r \mid \mu, \tau \sim N(\mu, 1/\tau)` with
    the Normal-Gamma prior

    .. math:: \mu \mid \tau \sim N(m_0, 1/(\kappa_0 \tau)), \qquad
              \tau \sim \mathrm{Gamma}(\alpha_0, \beta_0),

    whose posterior after n rewards with mean :math:`\bar r` is Normal-Gamma with
    :math:`\kappa_n = \kappa_0 + n`, :math:`m_n = (\kappa_0 m_0 + n\bar r)/\kappa_n`,
    :math:`\alpha_n = \alpha_0 + n/2`,
    :math:`\beta_n = \beta_0 + \frac12\sum (r - \bar r)^2
    + \frac{\kappa_0 n (\bar r - m_0)^2}{2\kappa_n}`.

    Parameters
    ----------
    n_states : int
        S.
    n_actions : int
        A.
    mean : float, default=0.0
        :math:`m_0`, at most :data:`MAX_REWARD` in magnitude.
    kappa : float, default=1.0
        :math:`\kappa_0` (prior pseudo-observations of the mean).
    shape : float, default=1.0
        :math:`\alpha_0`.
    rate : float, default=1.0
        :math:`\beta_0` (:math:`\beta_0/\alpha_0` is the prior guess of the reward variance).
        ``kappa``, ``shape`` and ``rate`` lie in :data:`PRIOR_RANGE`.

    Notes
    -----
    Rewards are at most :data:`MAX_REWARD` in magnitude, so the posterior's parameters stay
    finite. A precision draw :math:`\kappa_n \tau` that underflows float64 (with ``shape`` 0.01,
    :math:`\tau = 0` in 6 of 10,000 draws of an unvisited pair; with 0.001 in nearly half) is
    raised to the smallest subnormal number, about 5e-324: the mean's draw is then huge but
    finite.
    """

    def __init__(self, n_states: int, n_actions: int, mean: float = 0.0, kappa: float = 1.0,
                 shape: float = 1.0, rate: float = 1.0) -> None:
        S, A = check_int(n_states, "n_states", 1), check_int(n_actions, "n_actions", 1)
        check_memory(3 * 8.0 * S * A, f"n_states, n_actions: a reward belief over {S:,} x {A:,} (state, "
                     "action) pairs (three float64 tables)", "use a smaller model")
        lo, hi = PRIOR_RANGE
        self.n_states, self.n_actions = S, A
        self.prior = (check_real(mean, "mean", -MAX_REWARD, MAX_REWARD),
                      *(check_real(v, name, lo, hi) for name, v in
                        (("kappa", kappa), ("shape", shape), ("rate", rate))))
        self._n = np.zeros((self.n_states, self.n_actions))
        self._sum = np.zeros_like(self._n)
        self._sumsq = np.zeros_like(self._n)

    def update(self, states: Any, actions: Any, rewards: Any) -> NormalGammaRewards:
        """Fold in rewards observed for ``(states[t], actions[t])``, arrays of shape (T,)
        (finite, at most :data:`MAX_REWARD` in magnitude).

        Returns
        -------
        self
        """
        s, a, r = _index_arrays(self.n_states, self.n_actions, states, actions, rewards)
        np.add.at(self._n, (s, a), 1.0)
        np.add.at(self._sum, (s, a), r)
        np.add.at(self._sumsq, (s, a), r * r)
        return self

    def posterior(self) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        r""":math:`(m_n, \kappa_n, \alpha_n, \beta_n)`, each an ndarray of shape (S, A)."""
        m0, k0, a0, b0 = self.prior
        n = self._n
        mean = np.divide(self._sum, n, out=np.zeros_like(n), where=n > 0)
        spread = np.maximum(self._sumsq - n * mean**2, 0.0)
        kn = k0 + n
        mn = (k0 * m0 + self._sum) / kn
        an = a0 + 0.5 * n
        bn = b0 + 0.5 * spread + k0 * n * (mean - m0) ** 2 / (2.0 * kn)
        return mn, kn, an, bn

    def mean(self) -> FloatArray:
        """Posterior mean of the expected rewards, ndarray of shape (S, A)."""
        return self.posterior()[0]

    def sample_many(self, n: int, *, rng: SeedLike) -> FloatArray:
        """``n`` joint posterior draws of the expected rewards, ndarray of shape (n, S, A)."""
        n = check_int(n, "n", 1)
        check_memory(2 * 8.0 * n * self._n.size, f"n: {n:,} draws of {self.n_states:,} x {self.n_actions:,} "
                     "expected rewards", "draw fewer")
        gen = as_generator(rng)
        mn, kn, an, bn = self.posterior()
        tau = gen.gamma(an, 1.0 / bn, size=(n,) + mn.shape)
        precision = np.maximum(kn * tau, np.finfo(np.float64).smallest_subnormal)   # see Notes
        return mn + gen.standard_normal(tau.shape) / np.sqrt(precision)


# --------------------------------------------------------------------------------------
# Agent
# --------------------------------------------------------------------------------------
class PSRLAgent:
    """PSRL agent with a transition belief and known or learned rewards.

    Parameters
    ----------
    belief : TransitionBelief
        Any object implementing :class:`~corrpriors.applications.TransitionBelief`
        (``n_states``, ``n_actions``, ``update``, ``mean``, ``sample_many``), e.g. a
        :class:`~corrpriors.applications.CorrelatedTransitionModel`.
    rewards : array_like of shape (S,), (S, A) or (S, A, S), SparseTransitionRewards, scipy.sparse table, or None
        Known rewards: a state reward is received for acting in that state; transition rewards
        :math:`r(s, a, s')` (dense, or the sparse ones of a large
        :func:`~corrpriors.envs.from_gymnasium` model) are averaged under each model planned
        with; with a belief that returns :class:`~corrpriors.applications.BackgroundTransitions`
        they are given as a scipy.sparse (S A, S) table (row ``s * A + a``). None with
        ``learn_rewards=True``.
    discount : float
        Discount factor in [0, 1).
    variant : {"sampling", "mean"}, default="sampling"
        ``"sampling"`` acts greedily on the average optimal Q-values of ``n_samples``
        posterior draws; ``"mean"`` on those of the posterior-mean model.
    n_samples : int, default=10
        M, the number of posterior draws per replan (``"sampling"`` only), at most
        10,000 (each draw is a model of the belief's size).
    replan_every : int or "episode", default=50
        Transitions between two posterior updates and replans, or ``"episode"`` to replan
        whenever an episode ends (terminated or truncated).
    learn_rewards : bool or NormalGammaRewards, default=False
        Learn the expected rewards with an independent Normal-Gamma posterior per (s, a)
        (``True``: the default prior of :class:`NormalGammaRewards`; or pass one). The
        ``"sampling"`` variant draws rewards together with the transitions.
    terminal : array_like of bool, shape (S,), optional
        States known to be terminal from the start (more are learned from ``terminated``).
    replan_on_doubling : bool, default=False
        Also replan as soon as the (state, action) pair just left has been visited more than
        twice as often as at the last replan -- its first visit included: the second stopping
        rule of Thompson sampling with dynamic episodes (TSDE; Ouyang et al., 2017), with
        ``replan_every`` as the longest interval. A plan whose models have just been refuted
        -- a wall where the draw had a corridor -- is then not followed for up to
        ``replan_every`` more steps. It adds at most 1 + log2(n) replans per pair
        visited n times: many early, few later.
    replan_on_revisit : bool, default=False
        Also replan as soon as the pair just left has been visited at least twice since the
        last replan and more than twice as often as at the last replan: the doubling rule above
        without the pairs' first visits since a replan. In a deterministic world a pair that
        comes back under one plan means the agent is in a cycle that the plan repeats until
        the next replan (a wall it keeps bumping into, a loop through a refuted shortcut); in a
        stochastic one, that the pair's data have doubled. It takes the doubling rule's
        replans that follow a refuted plan and leaves the first visits, a replan per new pair,
        which make most of that rule's cost. Implied by ``replan_on_doubling``.

    Attributes
    ----------
    policy_ : ndarray of shape (S,)
        The current greedy policy (actions whose Q-values tie within 1e-10 -- e.g. every
        action of a state the belief knows nothing about -- are chosen uniformly at random).
    q_values_ : ndarray of shape (S, A)
        The Q-values it is greedy on.
    n_plans_ : int
        Number of replans so far.
    visits_ : ndarray of shape (S, A)
        Transitions observed from every (state, action) pair.
    terminal_ : ndarray of shape (S,)
        States known to be terminal.
    reward_belief_ : NormalGammaRewards or None
        The reward posterior (``learn_rewards``).
    """

    def __init__(self, belief: TransitionBelief, rewards: Any, discount: float,
                 variant: str = "sampling", n_samples: int = 10, replan_every: int | str = 50,
                 learn_rewards: bool | NormalGammaRewards = False, terminal: Any = None,
                 replan_on_doubling: bool = False, replan_on_revisit: bool = False) -> None:
        if not isinstance(belief, TransitionBelief):
            raise TypeError(f"belief: expected a transition belief (n_states, n_actions, update, "
                            f"mean, sample_many), got {type(belief).__name__}")
        if variant not in ("sampling", "mean"):
            raise ValueError(f"variant: expected 'sampling' or 'mean', got {variant!r}")
        discount = check_real(discount, "discount", 0.0, 1.0, closed="left")
        n_samples = check_int(n_samples, "n_samples", 1, MAX_SAMPLES)
        if isinstance(replan_every, str):
            if replan_every != "episode":
                raise ValueError(f"replan_every: expected a positive int or 'episode', got {replan_every!r}")
        else:
            replan_every = check_int(replan_every, "replan_every", 1)
        check_bool(replan_on_doubling, "replan_on_doubling")
        check_bool(replan_on_revisit, "replan_on_revisit")
        S, A = int(belief.n_states), int(belief.n_actions)
        self.belief = belief
        self.reward_belief_ = self._reward_belief(learn_rewards, rewards, S, A)
        self._transition_rewards = None
        if sp.issparse(rewards):   # r(s, a, s') as a sparse (S A, S) table: sparse beliefs only
            if rewards.shape != (S * A, S) or not getattr(belief, "sparse", False):
                raise ValueError(f"rewards: a sparse table of transition rewards needs a belief "
                                 f"with sparse tables and shape (S A, S) = ({S * A}, {S}), got "
                                 f"{rewards.shape}")
            coo = sp.coo_array(rewards)
            coo.sum_duplicates()
            if not np.all(np.isfinite(coo.data)):
                raise ValueError("rewards: contains NaN or infinite values")
            self._transition_rewards = coo
            rewards = np.zeros((S, A))   # planned with the expectation under each model
        self.rewards = None if rewards is None else _as_rewards(rewards, S, A)
        self.discount = discount
        self.terminal_ = np.zeros(S, dtype=bool)
        if terminal is not None:
            t = np.asarray(terminal)
            if t.shape != (S,) or t.dtype != bool:
                raise ValueError(f"terminal: expected a boolean mask of shape (S,) = ({S},), got "
                                 f"dtype {t.dtype}, shape {t.shape}")
            self.terminal_ |= t
        # the rewards and discount the agent plans with; transitions come from the belief
        self.sparse = bool(getattr(belief, "sparse", False))
        self._reward_table: SparseTransitionRewards | None = None
        if self.sparse and isinstance(self.rewards, SparseTransitionRewards):
            # r(s, a, s') of a large model (from_gymnasium): planned with its expectation
            # under each model, defaults (arrival, fallback) included, in O(nnz)
            self._reward_table, self.rewards = self.rewards, np.zeros((S, A))
        if self.sparse:   # the belief's tables are planned by plan_sparse
            if self.rewards is not None and self.rewards.ndim == 3:
                raise ValueError(f"rewards: a belief with sparse tables plans with rewards of "
                                 f"shape (S,) or (S, A), or transition rewards as a scipy.sparse "
                                 f"(S A, S) table; got {type(rewards).__name__} of shape (S, A, S)")
            self.planning_mdp = None
        else:   # (the placeholder self-loops are never planned with and cost O(S A))
            stay = np.broadcast_to(np.arange(S)[:, None, None], (S, A, 1))
            self.planning_mdp = TabularMDP(SparseTransitions.from_entries(stay, np.ones((S, A, 1))),
                                           np.zeros((S, A)) if self.rewards is None
                                           else self.rewards, self.discount)
        self.variant = variant
        self.n_samples = n_samples
        self.replan_every = replan_every
        self.replan_on_doubling = bool(replan_on_doubling)
        self.replan_on_revisit = bool(replan_on_revisit)
        self.visits_ = np.zeros((S, A), dtype=np.int64)
        self._visits_at_plan = np.zeros((S, A), dtype=np.int64)
        self.policy_: IntArray | None = None
        self.q_values_: FloatArray | None = None
        self.n_plans_ = 0
        self._buffer: list[tuple[int, int, int]] = []
        self._reward_buffer: list[float] = []

    @staticmethod
    def _reward_belief(learn: Any, rewards: Any, S: int, A: int) -> NormalGammaRewards | None:
        if isinstance(learn, NormalGammaRewards):
            if (learn.n_states, learn.n_actions) != (S, A):
                raise ValueError(f"learn_rewards: expected a reward belief over (S, A) = "
                                 f"({S}, {A}), got ({learn.n_states}, {learn.n_actions})")
            belief = learn
        elif learn is True:
            belief = NormalGammaRewards(S, A)
        elif learn is False:
            belief = None
        else:
            raise TypeError(f"learn_rewards: expected a bool or a NormalGammaRewards, got "
                            f"{type(learn).__name__}")
        if (belief is None) == (rewards is None):
            raise ValueError("rewards, learn_rewards: give known rewards or learn_rewards=True "
                             "(exactly one)")
        return belief

    def _known_rewards(self) -> Any:
        """The known rewards as given, transition rewards r(s, a, s') kept as such, in a form
        :class:`~corrpriors.mdp.TabularMDP` takes (a scipy.sparse table becomes a
        :class:`~corrpriors.mdp.SparseTransitionRewards` that is 0 off its listed cells, as the
        agent plans with it); None when the agent learns its rewards.
        """
        if self._reward_table is not None:
            return self._reward_table
        if self._transition_rewards is not None:
            S, A = self.belief.n_states, self.belief.n_actions
            csr = sp.csr_array(self._transition_rewards)   # duplicates were summed
            csr.sort_indices()
            return SparseTransitionRewards(S, A, csr.indptr, csr.indices, csr.data)
        return self.rewards

    def _planning_mdp(self) -> TabularMDP:
        """The planning model with the terminal states known so far."""
        assert self.planning_mdp is not None   # dense beliefs only
        known = self.terminal_ if self.terminal_.any() else None
        current = self.planning_mdp.terminal
        if (known is None) != (current is None) or (known is not None and current is not None
                                                    and not np.array_equal(known, current)):
            self.planning_mdp = dataclasses.replace(self.planning_mdp, terminal=known)
        return self.planning_mdp

    def plan(self, *, rng: SeedLike) -> IntArray:
        """Fold buffered transitions into the belief and recompute the greedy policy.

        Parameters
        ----------
        rng : numpy.random.Generator or seed
            Used for the posterior draws of the ``"sampling"`` variant and to break ties.

        Returns
        -------
        ndarray of shape (S,)
            The new policy (also stored in ``policy_``).
        """
        self._flush()
        self._visits_at_plan = self.visits_.copy()
        rng = as_generator(rng)
        warm = self.policy_
        if self.sparse:
            Q = self._plan_sparse(rng, warm)
            return self._greedy(Q, rng)
        mdp = self._planning_mdp()
        rewards = None
        if self.variant == "mean":
            if self.reward_belief_ is not None:
                rewards = self.reward_belief_.mean()
            Q = policy_iteration(mdp, self.belief.mean(), initial_policy=warm,
                                 rewards=rewards).q_values
        else:
            models = self.belief.sample_many(self.n_samples, rng=rng)
            if self.reward_belief_ is not None:
                rewards = self.reward_belief_.sample_many(self.n_samples, rng=rng)
            Q = policy_iteration(mdp, models, initial_policy=warm,
                                 rewards=rewards).q_values.mean(axis=0)
        return self._greedy(Q, rng)

    def _plan_sparse(self, rng: np.random.Generator, warm: IntArray | None) -> FloatArray:
        """Q-values of the sparse-table path (:func:`plan_sparse` per model)."""
        S, A = self.belief.n_states, self.belief.n_actions
        known = self.rewards
        models: list[Any]
        rewards: list[Any]
        if self.variant == "mean":
            models = [self.belief.mean()]
            rewards = [self.reward_belief_.mean() if self.reward_belief_ is not None else known]
        else:
            models = list(self.belief.sample_many(self.n_samples, rng=rng))
            if self.reward_belief_ is not None:
                rewards = list(self.reward_belief_.sample_many(self.n_samples, rng=rng))
            else:
                rewards = [known] * self.n_samples
        terminal = self.terminal_ if self.terminal_.any() else None
        Q = np.zeros((S, A))
        values = getattr(self, "_sparse_values", None)
        tr = self._transition_rewards
        for m, (model, r) in enumerate(zip(models, rewards)):
            assert r is not None
            if tr is not None:   # E[r(s, a, s')] under this model, from the reward's cells
                r = listed_expectation(model, tr.row, tr.col, tr.data)
            elif self._reward_table is not None:
                r = expected_table_rewards(self._reward_table, model)
            res = plan_sparse(model, r, self.discount, terminal=terminal, initial_policy=warm,
                              initial_values=values)
            Q += res.q_values / len(models)
            if m == 0:
                self._sparse_values = res.values
        return Q

    def _greedy(self, Q: FloatArray, rng: np.random.Generator) -> IntArray:
        """Store ``Q`` and its greedy policy (ties broken at random)."""
        self.q_values_ = Q
        best = Q.max(axis=1, keepdims=True)
        tied = Q >= best - 1e-10 * (1.0 + np.abs(best))
        if (tied.sum(axis=1) > 1).any():   # break ties uniformly at random, not towards action 0
            self.policy_ = np.argmax(np.where(tied, rng.random(Q.shape), -1.0), axis=1)
        else:
            self.policy_ = np.argmax(Q, axis=1)
        self.n_plans_ += 1
        return self.policy_

    def act(self, state: int) -> int:
        """Greedy action of the current policy in ``state`` (an int in [0, S))."""
        if self.policy_ is None:
            raise RuntimeError("act: call plan(rng=...) before acting")
        return int(self.policy_[check_int(state, "state", 0, self.belief.n_states - 1)])

    def observe(self, state: int, action: int, next_state: int, *, rng: SeedLike,
                reward: float | None = None, terminated: bool = False,
                truncated: bool = False) -> bool:
        """Record a transition; replan when the schedule says so.

        Parameters
        ----------
        state, action, next_state : int
            The transition: states in [0, S), the action in [0, A).
        rng : numpy.random.Generator or seed
            For the replan, if one is due.
        reward : float, optional
            The reward received (required when learning rewards; finite, at most 1e100 in
            magnitude, :data:`~corrpriors.applications.psrl.MAX_REWARD`).
        terminated : bool
            Whether ``next_state`` ended the episode: it becomes a known terminal state.
        truncated : bool
            Whether the episode was cut short (a time limit); the transition is still data.

        Returns
        -------
        bool
            Whether the agent replanned.

        Raises
        ------
        ValueError
            A state, action or reward out of range (nothing is recorded).
        """
        S, A = self.belief.n_states, self.belief.n_actions
        s, a = check_int(state, "state", 0, S - 1), check_int(action, "action", 0, A - 1)
        s2 = check_int(next_state, "next_state", 0, S - 1)
        check_bool(terminated, "terminated")
        check_bool(truncated, "truncated")
        if self.reward_belief_ is not None:
            if reward is None:
                raise ValueError("reward: required when the agent learns rewards")
            self._reward_buffer.append(check_real(reward, "reward", -MAX_REWARD, MAX_REWARD))
        self._buffer.append((s, a, s2))
        self.visits_[s, a] += 1
        if terminated:
            self.terminal_[s2] = True
        if isinstance(self.replan_every, str):   # "episode" (validated)
            due = terminated or truncated
        else:
            due = len(self._buffer) >= self.replan_every
        if self.replan_on_doubling or self.replan_on_revisit:
            now, before = self.visits_[s, a], self._visits_at_plan[s, a]
            doubled = now > 2 * before     # TSDE's rule: the pair's count doubled since the plan
            due = due or (doubled and (self.replan_on_doubling or now - before >= 2))
        if due:
            self.plan(rng=rng)
        return due

    def _flush(self) -> None:
        if self._buffer:
            s, a, s2 = np.array(self._buffer, dtype=np.int64).T
            self.belief.update(s, a, s2)
            if self.reward_belief_ is not None:
                self.reward_belief_.update(s, a, np.array(self._reward_buffer))
            self._buffer, self._reward_buffer = [], []


def expected_table_rewards(rewards: SparseTransitionRewards, model: Any) -> FloatArray:
    r"""Expected rewards :math:`\sum_{s'} P(s' \mid s, a)\, r(s, a, s')` under a belief's sparse table.

    :meth:`SparseTransitionRewards.expected
    <corrpriors.mdp._sparse.SparseTransitionRewards.expected>` for a model that is an operator
    (``expect(values)`` and ``entries(rows, cols)``, as a belief's posterior mean or draw),
    which can put mass on next states the true table never lists: there the rewards' defaults
    apply (the reward of arriving in s' where known, else the (s, a) fallback).

    Parameters
    ----------
    rewards : SparseTransitionRewards
        r(s, a, s') of shape (S, A, S).
    model : transition table with ``expect`` and ``entries``
        P(s' | s, a) over the same S and A.

    Returns
    -------
    ndarray of shape (S, A)
    """
    return rewards.expected(model)


def plan_sparse(transitions: Any, rewards: Any, discount: float, *, terminal: Any = None,
                initial_policy: Any = None, initial_values: Any = None, tol: float = 1e-10,
                max_iter: int = 1000) -> PlanningResult:
    r"""Policy iteration on a :class:`~corrpriors.applications.BackgroundTransitions` table.

    :func:`corrpriors.mdp.planning.policy_iteration_operator` (the planners' own Howard
    iteration, tie rule and certified iterative evaluation, warm-started from the previous
    policy's values), with the table as a
    :class:`~corrpriors.mdp.planning.TransitionOperator`: :math:`P_\pi` is the sparse part of
    the table plus its background profiles, so nothing of size S^2 is formed.

    Parameters
    ----------
    transitions : BackgroundTransitions
        Of shape (S, A, S) (any TransitionOperator is accepted).
    rewards : array_like of shape (S,) or (S, A)
        Expected rewards.
    discount : float
        In [0, 1).
    terminal : array_like of bool, shape (S,), optional
    initial_policy : array_like of int, shape (S,), optional
        Default: greedy after value-iteration sweeps (as :func:`~corrpriors.mdp.policy_iteration`).
    initial_values : array_like of shape (S,), optional
        Warm start of the first evaluation.
    tol : float, default=1e-10
        Certified accuracy of every evaluation, relative to :math:`\max(1, \lVert V\rVert_\infty)`.
    max_iter : int, default=1000
        Cap on policy improvements.

    Returns
    -------
    PlanningResult
        ``values`` (S,), ``q_values`` (S, A), ``policy`` (S, A), ``n_iter``, ``converged``.
    """
    return policy_iteration_operator(transitions, rewards, discount, terminal=terminal,
                                     initial_policy=initial_policy,
                                     initial_values=initial_values, max_iter=max_iter,
                                     solver="iterative", tol=tol)


# --------------------------------------------------------------------------------------
# Run loops
# --------------------------------------------------------------------------------------
def _check_run(n_steps: Any, eval_every: Any, agent: PSRLAgent, scoring: bool = True,
               episodes: bool = True) -> tuple[int, int | str]:
    if not isinstance(agent, PSRLAgent):
        raise TypeError(f"agent: expected a PSRLAgent, got {type(agent).__name__}")
    n_steps = check_int(n_steps, "n_steps", 0, MAX_STEPS)
    if isinstance(eval_every, str):
        if eval_every != "episode" or not episodes:
            allowed = "a positive int or 'episode'" if episodes else "a positive int (no episodes)"
            raise ValueError(f"eval_every: expected {allowed}, got {eval_every!r}")
        return n_steps, "episode"
    if eval_every is None:
        if not scoring:
            return n_steps, 1
        if agent.replan_every == "episode":
            raise ValueError("eval_every: required when the agent replans per episode")
        eval_every = agent.replan_every
    return n_steps, check_int(eval_every, "eval_every", 1)


class _Progress:
    """What :func:`run_psrl` reports besides the curves: regret, first reward, first optimum.

    Built from the true model ``mdp`` (at the agent's discount): the action gaps
    :math:`V^*(s) - Q^*(s, a)`, the noise-free reward of every transition and the largest one
    the model pays (over the transitions an agent can take from non-terminal states).
    """

    def __init__(self, mdp: TabularMDP, uniform: float, optimal: float) -> None:
        plan = policy_iteration(mdp)
        live = ~mdp.terminal_mask
        self.gap = np.where(live[:, None], plan.values[:, None] - plan.q_values, 0.0)
        s, a, s2, _ = transition_entries(mdp.transitions)
        keep = live[s]
        self.rewards = mdp.rewards if mdp.rewards.ndim == 3 else mdp.reward_matrix
        paid = self._reward(s[keep], a[keep], s2[keep])
        self.best = float(paid.max()) if paid.size else np.inf
        self.uniform, self.optimal = uniform, optimal
        self.regret = 0.0
        self.first_reward = (np.nan, np.nan)

    def _reward(self, s: IntArray, a: IntArray, s2: IntArray) -> FloatArray:
        """Noise-free rewards of transitions (s, a, s') (``R(s, a)`` if the rewards are such)."""
        if self.rewards.ndim == 2:
            return np.asarray(self.rewards, dtype=np.float64)[s, a]
        return transition_reward_values(self.rewards, s, a, s2)

    def step(self, t: int, episode: int, s: int, a: int, s2: int) -> float:
        """Account for transition ``t`` (0-based) of episode ``episode``; the cumulative regret."""
        self.regret += float(self.gap[s, a])
        r = float(self._reward(np.array([s]), np.array([a]), np.array([s2]))[0])
        if np.isnan(self.first_reward[0]) and r >= self.best - 1e-9 * (1.0 + abs(self.best)):
            self.first_reward = (float(t + 1), float(episode))
        return self.regret

    def first_optimal(self, values: Any, steps: Any, episodes: Any) -> tuple[float, float]:
        """(step, episode) of the first scoring at which the greedy policy is optimal (NaN: never)."""
        v = np.asarray(values, dtype=np.float64)
        if self.optimal - self.uniform > 1e-12 * max(1.0, abs(self.optimal)):
            hit = np.flatnonzero(normalize_returns(v, self.uniform, self.optimal)
                                 >= 1.0 - OPTIMAL_TOL)
        else:   # every policy is optimal (nothing to normalise by)
            hit = np.flatnonzero(v >= self.optimal - 1e-9 * (1.0 + abs(self.optimal)))
        if hit.size == 0:
            return np.nan, np.nan
        return float(np.asarray(steps)[hit[0]]), float(np.asarray(episodes)[hit[0]])

    def report(self, regret: Any, values: Any, steps: Any, episodes: Any) -> dict[str, np.ndarray]:
        """The entries :func:`run_psrl` adds to its result."""
        first_step, first_episode = self.first_optimal(values, steps, episodes)
        return {"regret": np.asarray(regret, dtype=np.float64),
                "first_reward_step": np.asarray(self.first_reward[0]),
                "first_reward_episode": np.asarray(self.first_reward[1]),
                "first_optimal_step": np.asarray(first_step),
                "first_optimal_episode": np.asarray(first_episode)}


def run_psrl(env: Any, agent: PSRLAgent, n_steps: int, start_state: int | None = None, *,
             rng: SeedLike, eval_every: int | str | None = None,
             true_mdp: TabularMDP | None = None, env_seed: int | None = None,
             reset_options: dict[str, Any] | None = None) -> dict[str, np.ndarray]:
    r"""Let a PSRL agent interact with an environment and score its greedy policies.

    The agent plans once from its prior, then acts greedily, replanning on its schedule. At
    step 0, after every ``eval_every`` transitions and after the last one (after the replan due
    at that step, if any) the current greedy policy is scored by its exact expected discounted
    return under the true model.

    Parameters
    ----------
    env : gymnasium.Env, TabularMDP, ndarray of shape (S, A, S) or sparse table
        A discrete Gymnasium environment (anything with ``reset``/``step``, a Discrete action
        space and a Discrete observation space, or a Tuple of Discrete ones, which is
        flattened to one index by :func:`corrpriors.envs.discrete_observations`): episodes
        restart after ``terminated`` or ``truncated``; the restart is not a transition. Or the
        true transitions of a continuing task (the paper experiments' path; only the
        transitions are used -- rewards, discount and terminal states are the agent's, so the
        greedy policy is scored on the model the agent plans with; an agent that replans per
        episode is refused, there are no episodes): dense, a SparseTransitions or a scipy
        sparse array of shape (S·A, S).
    agent : PSRLAgent
    n_steps : int
        Number of transitions T, at most 10,000,000 (the run keeps up to 42 bytes per step).
    start_state : int, optional
        Initial state of the matrix path (required there; not used with an environment).
    rng : numpy.random.Generator or seed
        Drives the agent's posterior draws, the matrix path's dynamics and, unless
        ``env_seed`` is given, the seed of the environment's first reset.
    eval_every : int or "episode", optional
        Evaluation period (default ``agent.replan_every``); ``"episode"`` (environment path):
        after every episode. The last transition is scored either way.
    true_mdp : TabularMDP, optional
        Environment path: the true model to score with (e.g.
        :func:`corrpriors.envs.from_gymnasium` of ``env``), at the agent's discount; without
        it nothing is scored.
    env_seed : int, optional
        Seed of the environment's first ``reset``, a non-negative int (default: drawn from
        ``rng``).
    reset_options : dict, optional
        ``options`` passed to every ``env.reset``.

    Returns
    -------
    dict
        Matrix path: ``"steps"`` ndarray of shape (E,) (transitions so far: 0, eval_every,
        2 eval_every, ... and T, so E = ceil(T / eval_every) + 1), ``"expected_return"`` of
        shape (E,) (averaged uniformly over start states), ``"optimal_return"`` of shape (),
        ``"states"`` of shape (T + 1,) and ``"actions"`` of shape (T,).

        Environment path: ``"states"``, ``"actions"``, ``"next_states"``, ``"rewards"``,
        ``"terminated"``, ``"truncated"`` of shape (T,) and ``"episode_returns"`` (undiscounted
        returns of the finished episodes); with ``true_mdp`` also ``"steps"``,
        ``"episodes"`` (episodes finished by then), ``"expected_return"`` and
        ``"normalized_return"`` of shape (E,) (from the model's start distribution; 0 =
        uniformly random policy, 1 = optimal, see :func:`corrpriors.mdp.normalized_return`),
        ``"policies"`` of shape (E, S) (the greedy policies scored), ``"optimal_return"`` and
        ``"uniform_return"`` of shape ().

        Both paths (with a true model) also report how learning went:

        ``"regret"`` of shape (T,)
            The cumulative regret :math:`\sum_{u \le t} V^*(s_u) - Q^*(s_u, a_u)`, the sum of
            the action gaps of the actions taken under the true model at the agent's discount
            (noise-free; by the performance-difference lemma an episode's gaps, discounted from
            its start, add up in expectation to the shortfall of its policy's return).
        ``"first_reward_step"``, ``"first_reward_episode"`` of shape ()
            The transition (1-based) at which, and the episode (1-based) in which, the agent
            first collected the largest one-step reward the true model pays (DeepSea's
            treasure, FrozenLake's goal; its noise-free value); NaN if never. The matrix path
            has no episodes (NaN).
        ``"first_optimal_step"``, ``"first_optimal_episode"`` of shape ()
            The first scoring step at which the greedy policy was optimal (normalised return
            at least ``1 - OPTIMAL_TOL``) and the number of episodes finished by then; NaN if
            never.
    """
    if hasattr(env, "reset") and hasattr(env, "step"):
        return _run_env(env, agent, n_steps, rng=rng, eval_every=eval_every, true_mdp=true_mdp,
                        env_seed=env_seed, reset_options=reset_options)
    if start_state is None:
        raise ValueError("start_state: required when env is a transition matrix")
    if agent.reward_belief_ is not None:
        raise ValueError("agent: learning rewards needs an environment that returns them, not a "
                         "transition matrix")
    if agent.replan_every == "episode":
        raise ValueError("agent: replan_every='episode' needs an environment with episodes, not a "
                         "transition matrix")
    return _run_matrix(env, agent, n_steps, start_state, rng=rng, eval_every=eval_every)


def _run_matrix(env_mdp: Any, agent: PSRLAgent, n_steps: int, start_state: int, *,
                rng: SeedLike, eval_every: int | str | None) -> dict[str, np.ndarray]:
    """The paper experiments' loop: a continuing task simulated from its transition matrix."""
    rng = as_generator(rng)
    P = env_mdp.transitions if isinstance(env_mdp, TabularMDP) else env_mdp
    P = P if is_sparse_table(P) else check_array(P, "env_mdp", ndim=3)
    S, A = P.shape[-1], P.shape[0] // P.shape[-1] if P.ndim == 2 else P.shape[1]
    if (S, A) != (agent.belief.n_states, agent.belief.n_actions):
        raise ValueError(f"env_mdp: expected (S, A) = ({agent.belief.n_states}, "
                         f"{agent.belief.n_actions}) like the agent's belief, got {(S, A)}")
    rewards = agent._known_rewards()
    assert rewards is not None   # run_psrl refuses reward learning on this path
    # scored with the model the agent plans with: its rewards (r(s, a, s') as such, sparse
    # ones included) and terminal states (V = 0 there), on the true transitions
    terminal = agent.terminal_.copy() if agent.terminal_.any() else None
    true_mdp = TabularMDP(P, rewards, agent.discount, terminal=terminal)   # validates P
    n_steps, period = _check_run(n_steps, eval_every, agent, episodes=False)
    every = int(period)
    start_state = check_int(start_state, "start_state", 0, S - 1)

    step = NextStateSampler(true_mdp.transitions)
    uniform, optimal = return_range(true_mdp)
    progress = _Progress(true_mdp, uniform, optimal)

    def score() -> float:
        return float(policy_evaluation(true_mdp, agent.policy_).mean())

    states = np.empty(n_steps + 1, dtype=np.int64)
    actions = np.empty(n_steps, dtype=np.int64)
    regret = np.empty(n_steps)
    u = rng.random(n_steps)
    agent.plan(rng=rng)
    steps, values = [0], [score()]
    s = int(start_state)
    states[0] = s
    for t in range(n_steps):
        a = agent.act(s)
        s2 = int(step(s, a, u[t]))
        agent.observe(s, a, s2, rng=rng)
        actions[t] = a
        regret[t] = progress.step(t, 0, s, a, s2)
        states[t + 1] = s = s2
        if (t + 1) % every == 0 or t + 1 == n_steps:
            steps.append(t + 1)
            values.append(score())
    out = {"steps": np.asarray(steps, dtype=np.int64), "expected_return": np.asarray(values),
           "optimal_return": np.asarray(optimal), "states": states, "actions": actions}
    out.update(progress.report(regret, values, steps, np.full(len(steps), np.nan)))
    out["first_reward_episode"] = np.asarray(np.nan)
    return out


def _discrete_n(space: Any, name: str) -> int:
    n = getattr(space, "n", None)
    if n is None or int(getattr(space, "start", 0)) != 0:
        raise TypeError(f"env.{name}: expected a Discrete space starting at 0, got {space!r}")
    return int(n)


def _run_env(env: Any, agent: PSRLAgent, n_steps: int, *, rng: SeedLike,
             eval_every: int | str | None, true_mdp: TabularMDP | None, env_seed: int | None,
             reset_options: dict[str, Any] | None) -> dict[str, np.ndarray]:
    """PSRL on a Gymnasium environment: reset, step, terminated / truncated."""
    from ..envs.adapter import discrete_observations

    gen = as_generator(rng)
    n_steps, every = _check_run(n_steps, eval_every, agent, scoring=true_mdp is not None)
    if env_seed is not None:
        env_seed = check_int(env_seed, "env_seed", 0)
    env = discrete_observations(env)
    S, A = agent.belief.n_states, agent.belief.n_actions
    got = (_discrete_n(env.observation_space, "observation_space"),
           _discrete_n(env.action_space, "action_space"))
    if got != (S, A):
        raise ValueError(f"env: expected (S, A) = ({S}, {A}) like the agent's belief, got {got}")
    score: Callable[[], float] | None = None
    progress: _Progress | None = None
    if true_mdp is not None:
        if not isinstance(true_mdp, TabularMDP):
            raise TypeError(f"true_mdp: expected a TabularMDP, got {type(true_mdp).__name__}")
        if (true_mdp.n_states, true_mdp.n_actions) != (S, A):
            raise ValueError(f"true_mdp: expected (S, A) = ({S}, {A}), got "
                             f"({true_mdp.n_states}, {true_mdp.n_actions})")
        scored = dataclasses.replace(true_mdp, discount=agent.discount)
        uniform, optimal = return_range(scored)
        normalize_returns(optimal, uniform, optimal)      # fails early if nothing to normalise
        progress = _Progress(scored, uniform, optimal)

        def score_policy() -> float:
            return float(expected_return(scored, agent.policy_))
        score = score_policy

    seed = int(gen.integers(2**32)) if env_seed is None else env_seed
    s, _ = env.reset(seed=seed, options=reset_options)
    out = {k: np.zeros(n_steps, dtype=np.int64) for k in ("states", "actions", "next_states")}
    rewards, regret = np.zeros(n_steps), np.zeros(n_steps)
    flags = {k: np.zeros(n_steps, dtype=bool) for k in ("terminated", "truncated")}
    episode_returns: list[float] = []
    running = 0.0
    agent.plan(rng=gen)
    steps, values = [0], ([score()] if score is not None else [])
    policies = [np.array(agent.policy_, dtype=np.int64)]
    for t in range(n_steps):
        a = agent.act(int(s))
        s2, r, term, trunc, _ = env.step(a)
        agent.observe(int(s), a, int(s2), rng=gen, reward=float(r), terminated=bool(term),
                      truncated=bool(trunc))
        out["states"][t], out["actions"][t], out["next_states"][t] = s, a, s2
        rewards[t], flags["terminated"][t], flags["truncated"][t] = r, term, trunc
        if progress is not None:
            regret[t] = progress.step(t, len(episode_returns) + 1, int(s), a, int(s2))
        running += float(r)
        s = s2
        if term or trunc:
            episode_returns.append(running)
            running = 0.0
            s, _ = env.reset(options=reset_options)
        due = (term or trunc) if every == "episode" else (t + 1) % int(every) == 0
        due = due or t + 1 == n_steps      # the last step is always scored
        if score is not None and due:
            steps.append(t + 1)
            values.append(score())
            policies.append(np.array(agent.policy_, dtype=np.int64))
    result = dict(out, rewards=rewards, **flags, episode_returns=np.asarray(episode_returns))
    if score is not None and progress is not None:
        v = np.asarray(values)
        step_arr = np.asarray(steps, dtype=np.int64)
        ends = np.cumsum(flags["terminated"] | flags["truncated"])
        episodes = np.array([0] + [int(ends[k - 1]) for k in steps[1:]], dtype=np.int64)
        result.update(steps=step_arr, episodes=episodes, expected_return=v,
                      policies=np.asarray(policies, dtype=np.int64),
                      normalized_return=np.asarray(normalize_returns(v, uniform, optimal)),
                      optimal_return=np.asarray(optimal), uniform_return=np.asarray(uniform))
        result.update(progress.report(regret, v, step_arr, episodes))
    return result
