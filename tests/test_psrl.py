"""Tests for corrpriors.applications.psrl (planning, agent, run loop)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from corrpriors.applications.psrl import PSRLAgent, run_psrl
from corrpriors.applications.transitions import (
    DirichletTransitionModel,
    KnownTransitionModel,
)


def random_mdp(rng, S, A):
    P = rng.random((S, A, S)) ** 3
    P /= P.sum(-1, keepdims=True)
    R = rng.normal(size=(S, A))
    return P, R


def chain_mdp(n=8, slip=0.1):
    """A chain with a reward at the far end: moving right pays off only if planned."""
    P = np.zeros((n, 2, n))
    for s in range(n):
        left, right = max(s - 1, 0), min(s + 1, n - 1)
        P[s, 0, left] += 1 - slip
        P[s, 0, right] += slip
        P[s, 1, right] += 1 - slip
        P[s, 1, left] += slip
    R = np.zeros(n)
    R[0] = 0.05
    R[-1] = 1.0
    return P, R


def test_mean_agent_q_values_match_policy_enumeration():
    rng = np.random.default_rng(1)
    P, R = random_mdp(rng, 3, 2)
    counts = rng.integers(0, 4, size=P.shape)
    belief = DirichletTransitionModel(3, 2, alpha=0.5).set_counts(counts)
    Pm = belief.mean()
    agent = PSRLAgent(belief, R, 0.95, variant="mean")
    pi = agent.plan(rng=0)

    def values(policy):
        idx = np.arange(3)
        return np.linalg.solve(np.eye(3) - 0.95 * Pm[idx, policy], R[idx, policy])

    best = max((values(np.array(p)) for p in itertools.product(range(2), repeat=3)),
               key=lambda v: v.sum())
    np.testing.assert_allclose(values(pi), best, rtol=1e-10)
    np.testing.assert_allclose(agent.q_values_.max(-1), best, rtol=1e-10)


def test_known_model_agent_reaches_optimal_return():
    P, R = chain_mdp()
    agent = PSRLAgent(KnownTransitionModel(P), R, 0.95, variant="sampling", n_samples=3,
                      replan_every=10)
    out = run_psrl(P, agent, 100, 0, rng=np.random.default_rng(3))
    np.testing.assert_array_equal(out["steps"], np.arange(0, 101, 10))
    np.testing.assert_allclose(out["expected_return"], out["optimal_return"], rtol=1e-12)
    assert agent.n_plans_ == 11
    # the optimal policy walks right: the chain end is reached
    assert out["states"].max() == 7


def test_sampling_with_concentrated_posterior_equals_mean():
    P, R = chain_mdp(slip=0.2)
    a_s = PSRLAgent(KnownTransitionModel(P), R, 0.9, variant="sampling", n_samples=5)
    a_m = PSRLAgent(KnownTransitionModel(P), R, 0.9, variant="mean")
    np.testing.assert_array_equal(a_s.plan(rng=0), a_m.plan(rng=0))
    np.testing.assert_allclose(a_s.q_values_, a_m.q_values_, rtol=1e-12)
    # a Dirichlet posterior with overwhelming data: same policy, Q-values within 1e-4
    big = DirichletTransitionModel(8, 2, alpha=1.0).set_counts(np.round(P * 1e9))
    b_s = PSRLAgent(big, R, 0.9, variant="sampling", n_samples=5)
    b_m = PSRLAgent(DirichletTransitionModel(8, 2).set_counts(np.round(P * 1e9)), R, 0.9,
                    variant="mean")
    np.testing.assert_array_equal(b_s.plan(rng=1), b_m.plan(rng=1))
    np.testing.assert_allclose(b_s.q_values_, b_m.q_values_, rtol=1e-4)


def test_dirichlet_agent_with_enough_data_plans_optimally():
    P, R = chain_mdp(n=6)
    rng = np.random.default_rng(4)
    counts = rng.multinomial(2000, P.reshape(-1, 6)).reshape(P.shape)      # exploratory data
    agent = PSRLAgent(DirichletTransitionModel(6, 2, alpha=1.0).set_counts(counts), R, 0.95,
                      variant="sampling", n_samples=10, replan_every=20)
    out = run_psrl(P, agent, 100, 0, rng=rng)
    np.testing.assert_allclose(out["expected_return"], float(out["optimal_return"]), rtol=1e-9)
    assert agent.belief.counts.sum() == counts.sum() + 100      # 100 = 5 full replan blocks


def test_run_is_reproducible_and_validates():
    P, R = chain_mdp(n=5)

    def go(seed):
        agent = PSRLAgent(DirichletTransitionModel(5, 2, alpha=1e-3), R, 0.9, replan_every=7)
        return run_psrl(P, agent, 50, 0, rng=seed, eval_every=10)

    o1, o2, o3 = go(5), go(5), go(6)
    np.testing.assert_array_equal(o1["states"], o2["states"])
    np.testing.assert_array_equal(o1["expected_return"], o2["expected_return"])
    assert not np.array_equal(o1["states"], o3["states"])
    agent = PSRLAgent(DirichletTransitionModel(5, 2), R, 0.9)
    with pytest.raises(ValueError, match="variant"):
        PSRLAgent(DirichletTransitionModel(5, 2), R, 0.9, variant="greedy")
    with pytest.raises(ValueError, match="discount"):
        PSRLAgent(DirichletTransitionModel(5, 2), R, 1.0)
    with pytest.raises(ValueError, match="rewards"):
        PSRLAgent(DirichletTransitionModel(5, 2), np.zeros(4), 0.9)
    with pytest.raises(ValueError, match="start_state"):
        run_psrl(P, agent, 10, 5, rng=0)
    with pytest.raises(RuntimeError, match="plan"):
        PSRLAgent(DirichletTransitionModel(5, 2), R, 0.9).act(0)


def test_ties_are_broken_at_random():
    S, A = 30, 4
    agent = PSRLAgent(DirichletTransitionModel(S, A), np.zeros(S), 0.9, variant="mean")
    pi = agent.plan(rng=np.random.default_rng(0))        # all actions tie everywhere
    counts = np.bincount(pi, minlength=A)
    assert (counts > 0).all()                            # not always action 0
    np.testing.assert_array_equal(pi, PSRLAgent(DirichletTransitionModel(S, A), np.zeros(S), 0.9,
                                                variant="mean").plan(rng=np.random.default_rng(0)))
