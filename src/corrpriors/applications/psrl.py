r"""Posterior sampling for reinforcement learning (PSRL) with a learned transition belief.

The agent knows the rewards and learns only the transitions. Every ``replan_every``
transitions it folds the new data into its belief and recomputes its policy, which it
then follows greedily until the next replan. Two variants, as in the paper (after
Osband, Russo & Van Roy, 2013):

* ``"sampling"`` -- draw ``n_samples`` models :math:`P^{(m)}` from the posterior, solve
  each for its optimal Q-values :math:`Q^{(m)}` and act greedily on
  :math:`\bar Q = \frac1M \sum_m Q^{(m)}`;
* ``"mean"`` -- act greedily on the optimal Q-values of the posterior-mean model.

Planning is exact for the discounted criterion (:func:`corrpriors.mdp.planning.policy_iteration`
batched over the M sampled models, warm-started from the previous greedy policy); the metric of
:func:`run_psrl` is the exact expected discounted return of the current greedy policy
under the true model, averaged over all start states.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._random import as_generator
from .._typing import FloatArray, IntArray, SeedLike
from .._validation import check_array
from ..mdp.planning import policy_evaluation, policy_iteration
from ..mdp.tabular import TabularMDP
from .transitions import _TransitionBelief

__all__ = ["PSRLAgent", "run_psrl"]


def _as_rewards(rewards: Any, n_states: int, n_actions: int) -> FloatArray:
    r = check_array(rewards, "rewards")
    if r.shape == (n_states,):
        r = np.repeat(r[:, None], n_actions, axis=1)
    if r.shape != (n_states, n_actions):
        raise ValueError(f"rewards: expected shape (S,) or (S, A) = ({n_states},) or "
                         f"({n_states}, {n_actions}), got {r.shape}")
    return r


# --------------------------------------------------------------------------------------
# Agent
# --------------------------------------------------------------------------------------
class PSRLAgent:
    """PSRL agent with a transition belief and known rewards.

    Parameters
    ----------
    belief : DirichletTransitionModel, CorrelatedTransitionModel or KnownTransitionModel
        Any transition belief of :mod:`corrpriors.applications.transitions`.
    rewards : array_like of shape (S,) or (S, A)
        Known expected rewards (a state reward is received for acting in that state).
    discount : float
        Discount factor in [0, 1).
    variant : {"sampling", "mean"}, default="sampling"
        ``"sampling"`` acts greedily on the average optimal Q-values of ``n_samples``
        posterior draws; ``"mean"`` on those of the posterior-mean model.
    n_samples : int, default=10
        M, the number of posterior draws per replan (``"sampling"`` only).
    replan_every : int, default=50
        Transitions between two posterior updates and replans.

    Attributes
    ----------
    policy_ : ndarray of shape (S,)
        The current greedy policy (actions whose Q-values tie within 1e-10 -- e.g. every
        action of a state the belief knows nothing about -- are chosen uniformly at random).
    q_values_ : ndarray of shape (S, A)
        The Q-values it is greedy on.
    n_plans_ : int
        Number of replans so far.
    """

    def __init__(self, belief: _TransitionBelief, rewards: Any, discount: float,
                 variant: str = "sampling", n_samples: int = 10, replan_every: int = 50) -> None:
        if not isinstance(belief, _TransitionBelief):
            raise TypeError(f"belief: expected a transition belief, got {type(belief).__name__}")
        if variant not in ("sampling", "mean"):
            raise ValueError(f"variant: expected 'sampling' or 'mean', got {variant!r}")
        if not 0.0 <= float(discount) < 1.0:
            raise ValueError(f"discount: expected a number in [0, 1), got {discount!r}")
        if int(n_samples) != n_samples or n_samples < 1:
            raise ValueError(f"n_samples: expected a positive int, got {n_samples!r}")
        if int(replan_every) != replan_every or replan_every < 1:
            raise ValueError(f"replan_every: expected a positive int, got {replan_every!r}")
        self.belief = belief
        self.rewards = _as_rewards(rewards, belief.n_states, belief.n_actions)
        self.discount = float(discount)
        S, A = belief.n_states, belief.n_actions
        # the rewards and discount the agent plans with; transitions come from the belief
        self.planning_mdp = TabularMDP(np.full((S, A, S), 1.0 / S), self.rewards, self.discount)
        self.variant = variant
        self.n_samples = int(n_samples)
        self.replan_every = int(replan_every)
        self.policy_: IntArray | None = None
        self.q_values_: FloatArray | None = None
        self.n_plans_ = 0
        self._buffer: list[tuple[int, int, int]] = []

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
        rng = as_generator(rng)
        warm = self.policy_
        if self.variant == "mean":
            Q = policy_iteration(self.planning_mdp, self.belief.mean(), initial_policy=warm).q_values
        else:
            models = self.belief.sample_many(self.n_samples, rng=rng)
            Q = policy_iteration(self.planning_mdp, models, initial_policy=warm).q_values.mean(axis=0)
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
        """Greedy action of the current policy in ``state``."""
        if self.policy_ is None:
            raise RuntimeError("act: call plan(rng=...) before acting")
        return int(self.policy_[state])

    def observe(self, state: int, action: int, next_state: int, *, rng: SeedLike) -> bool:
        """Record a transition; replan when ``replan_every`` transitions have been seen.

        Returns
        -------
        bool
            Whether the agent replanned.
        """
        self._buffer.append((int(state), int(action), int(next_state)))
        if len(self._buffer) >= self.replan_every:
            self.plan(rng=rng)
            return True
        return False

    def _flush(self) -> None:
        if self._buffer:
            s, a, s2 = np.array(self._buffer, dtype=np.int64).T
            self.belief.update(s, a, s2)
            self._buffer = []


# --------------------------------------------------------------------------------------
# Run loop
# --------------------------------------------------------------------------------------
def run_psrl(env_mdp: Any, agent: PSRLAgent, n_steps: int, start_state: int, rng: SeedLike,
             eval_every: int | None = None) -> dict[str, np.ndarray]:
    """Let a PSRL agent interact with a known tabular environment and score its policies.

    The agent plans once from its prior, then acts greedily, replanning every
    ``agent.replan_every`` transitions. At step 0 and after every ``eval_every``
    transitions (after the replan due at that step, if any) the current greedy
    policy is scored by its exact expected discounted return under the true model,
    averaged uniformly over all start states.

    Parameters
    ----------
    env_mdp : TabularMDP or ndarray of shape (S, A, S)
        The true environment (its ``transitions``); only the transitions are used --
        rewards and discount are the agent's.
    agent : PSRLAgent
    n_steps : int
        Number of transitions T.
    start_state : int
        Initial state.
    rng : numpy.random.Generator or seed
        Drives both the environment and the agent's posterior draws.
    eval_every : int, optional
        Evaluation period (default ``agent.replan_every``).

    Returns
    -------
    dict
        ``"steps"`` ndarray of shape (E,) (transitions so far, E = T // eval_every + 1),
        ``"expected_return"`` ndarray of shape (E,), ``"optimal_return"`` float array of
        shape () (the optimal policy's value averaged over start states), ``"states"``
        ndarray of shape (T + 1,) (the visited states) and ``"actions"`` of shape (T,).
    """
    rng = as_generator(rng)
    P = env_mdp.transitions if isinstance(env_mdp, TabularMDP) else env_mdp
    P = check_array(P, "env_mdp", ndim=3)
    S, A = P.shape[0], P.shape[1]
    if (S, A) != (agent.belief.n_states, agent.belief.n_actions):
        raise ValueError(f"env_mdp: expected (S, A) = ({agent.belief.n_states}, "
                         f"{agent.belief.n_actions}) like the agent's belief, got {(S, A)}")
    true_mdp = TabularMDP(P, agent.rewards, agent.discount)   # validates P
    if int(n_steps) != n_steps or n_steps < 0:
        raise ValueError(f"n_steps: expected a non-negative int, got {n_steps!r}")
    if int(start_state) != start_state or not 0 <= start_state < S:
        raise ValueError(f"start_state: expected an int in [0, {S}), got {start_state!r}")
    eval_every = agent.replan_every if eval_every is None else int(eval_every)
    if eval_every < 1:
        raise ValueError(f"eval_every: expected a positive int, got {eval_every!r}")

    cdf = np.cumsum(P, axis=-1)
    cdf[..., -1] = 1.0
    optimal = float(policy_iteration(true_mdp).values.mean())

    def score() -> float:
        return float(policy_evaluation(true_mdp, agent.policy_).mean())

    n_steps = int(n_steps)
    states = np.empty(n_steps + 1, dtype=np.int64)
    actions = np.empty(n_steps, dtype=np.int64)
    u = rng.random(n_steps)
    agent.plan(rng=rng)
    steps, values = [0], [score()]
    s = int(start_state)
    states[0] = s
    for t in range(n_steps):
        a = agent.act(s)
        s2 = int(np.searchsorted(cdf[s, a], u[t], side="right"))
        s2 = min(s2, S - 1)
        agent.observe(s, a, s2, rng=rng)
        actions[t] = a
        states[t + 1] = s = s2
        if (t + 1) % eval_every == 0:
            steps.append(t + 1)
            values.append(score())
    return {"steps": np.asarray(steps, dtype=np.int64), "expected_return": np.asarray(values),
            "optimal_return": np.asarray(optimal), "states": states, "actions": actions}
