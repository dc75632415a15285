"""Round 20: run_psrl's transition-matrix path scores with the model the agent plans with."""

import numpy as np
import pytest
import scipy.sparse as sp

from corrpriors.applications import DirichletTransitionModel, KnownTransitionModel, PSRLAgent, run_psrl
from corrpriors.mdp._sparse import SparseTransitionRewards


def _evaluate(P, R, discount, policy, terminal=None):
    """V^pi by a linear solve, V = 0 (no reward, no future) at terminal states."""
    S = P.shape[0]
    Pp, r = P[np.arange(S), policy].copy(), R[np.arange(S), policy].copy()
    if terminal is not None:
        Pp[terminal], r[terminal] = 0.0, 0.0
    return np.linalg.solve(np.eye(S) - discount * Pp, r)


def _optimal(P, R, discount, terminal=None):
    """V* by value iteration to convergence, V = 0 at terminal states."""
    V = np.zeros(P.shape[0])
    for _ in range(5000):
        V = (R + discount * P @ V).max(axis=1)
        if terminal is not None:
            V[terminal] = 0.0
    return V


class _Recording(PSRLAgent):
    """Keeps every greedy policy it computes."""

    def plan(self, *, rng):
        policy = super().plan(rng=rng)
        self.history = [*getattr(self, "history", []), policy.copy()]
        return policy


def _problem():
    S, A, g = 5, 2, 0.9
    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.ones(S), size=(S, A))
    r3 = rng.normal(size=(S, A, S))
    r3[rng.random((S, A, S)) < 0.3] = 0.0      # unlisted in the sparse forms below
    return P, r3, g


@pytest.mark.parametrize("form", ["SparseTransitionRewards", "scipy.sparse"])
def test_matrix_path_scores_with_sparse_transition_rewards(form):
    """Was 0 everywhere: the scorer used the agent's placeholder zeros for sparse r(s, a, s')
    (optimal 0.0 where the true optimal return is about 2)."""
    P, r3, g = _problem()
    S, A = P.shape[:2]
    flat = sp.csr_array(r3.reshape(S * A, S))
    rewards = SparseTransitionRewards.from_dense(r3) if form != "scipy.sparse" else flat
    agent = _Recording(DirichletTransitionModel(S, A, sparse=True), rewards, g, replan_every=10)
    res = run_psrl(P, agent, 50, start_state=0, rng=0)
    R = (P * r3).sum(axis=-1)
    optimal = _optimal(P, R, g).mean()
    assert abs(optimal) > 0.5
    np.testing.assert_allclose(res["optimal_return"], optimal, rtol=1e-8, atol=1e-10)
    # scored at steps 0, 10, ..., 50, each time the policy of the latest replan
    assert len(agent.history) == len(res["expected_return"])
    want = [_evaluate(P, R, g, pi).mean() for pi in agent.history]
    np.testing.assert_allclose(res["expected_return"], want, rtol=1e-8, atol=1e-10)
    # the same numbers as the dense (S, A, S) rewards of a dense agent give
    dense = run_psrl(P, PSRLAgent(DirichletTransitionModel(S, A, sparse=False), r3, g,
                                  replan_every=10), 50, start_state=0, rng=0)
    np.testing.assert_allclose(res["optimal_return"], dense["optimal_return"], rtol=1e-10)


def test_matrix_path_scores_with_the_agents_terminal_states():
    """Was scored without them: an optimal policy (given V = 0 at the terminal state) was
    reported at 3.97 against an optimum of 6.67."""
    S, A, g = 3, 2, 0.9
    P = np.zeros((S, A, S))
    P[0, 0, 1] = P[0, 1, 2] = 1.0
    P[1, :, 1] = P[2, :, 2] = 1.0
    R = np.repeat(np.array([0.0, 1.0, 0.1])[:, None], A, axis=1)
    terminal = np.array([False, True, False])
    agent = PSRLAgent(KnownTransitionModel(P), R[:, 0], g, variant="mean", terminal=terminal,
                      replan_every=5)
    res = run_psrl(P, agent, 10, start_state=0, rng=0)
    optimal = _optimal(P, R, g, terminal)
    np.testing.assert_allclose(res["optimal_return"], optimal.mean(), rtol=1e-10)
    np.testing.assert_allclose(res["expected_return"][-1],
                               _evaluate(P, R, g, agent.policy_, terminal).mean(), rtol=1e-10)
    # the agent knows the model, so its policy is optimal and has no regret
    np.testing.assert_allclose(res["expected_return"][-1], res["optimal_return"], rtol=1e-10)
    np.testing.assert_allclose(res["regret"], 0.0, atol=1e-12)


def test_matrix_path_refuses_an_agent_that_replans_per_episode():
    """Was accepted: no episodes on this path, so the agent never replanned (a flat curve)."""
    P, _, g = _problem()
    S, A = P.shape[:2]
    agent = PSRLAgent(DirichletTransitionModel(S, A, sparse=False), np.zeros((S, A)), g,
                      replan_every="episode")
    with pytest.raises(ValueError, match=r"^agent: replan_every='episode' needs an environment"):
        run_psrl(P, agent, 20, start_state=0, rng=0, eval_every=5)
    assert agent.n_plans_ == 0
