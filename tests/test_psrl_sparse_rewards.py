"""PSRL with sparse transition rewards (``from_gymnasium`` of a large map) on a sparse belief."""

import numpy as np
import pytest

from corrpriors.applications import PSRLAgent
from corrpriors.applications.psrl import expected_table_rewards
from corrpriors.applications.transitions import DirichletTransitionModel
from corrpriors.mdp._sparse import SparseTransitionRewards


def _rewards(S, A, rng):
    """Listed rewards on part of the table, arrival rewards on some states, fallbacks, an inert state."""
    listed = rng.random((S, A, S)) < 0.3
    dense = np.where(listed, rng.normal(size=(S, A, S)), 0.0)
    ip = np.concatenate([[0], np.cumsum(listed.reshape(S * A, S).sum(axis=1))])
    ix = np.nonzero(listed.reshape(S * A, S))[1]
    known = rng.random(S) < 0.4
    return SparseTransitionRewards(S, A, ip, ix, dense.reshape(S * A, S)[listed.reshape(S * A, S)],
                                   arrival=rng.normal(size=S), arrival_known=known,
                                   fallback=rng.normal(size=(S, A)), inert=np.arange(S) == 2)


def test_expected_table_rewards_matches_the_dense_sum():
    rng = np.random.default_rng(0)
    S, A = 7, 3
    rewards = _rewards(S, A, rng)
    belief = DirichletTransitionModel(S, A, alpha=0.5, sparse=True)
    belief.update(rng.integers(S, size=40), rng.integers(A, size=40), rng.integers(S, size=40))
    for model in (belief.mean(), *belief.sample_many(2, rng=1)):
        P = model.toarray()
        want = np.einsum("sat,sat->sa", P, rewards.toarray())
        np.testing.assert_allclose(expected_table_rewards(rewards, model), want, rtol=0, atol=1e-12)


def test_sparse_agent_plans_with_sparse_transition_rewards():
    """Was a ValueError: ``corrpriors psrl`` failed on every map read sparsely with known rewards."""
    rng = np.random.default_rng(1)
    S, A = 6, 2
    rewards = _rewards(S, A, rng)
    sparse = PSRLAgent(DirichletTransitionModel(S, A, sparse=True), rewards, 0.9, variant="mean")
    dense = PSRLAgent(DirichletTransitionModel(S, A, sparse=False), rewards.toarray(), 0.9, variant="mean")
    data = rng.integers(S, size=30), rng.integers(A, size=30), rng.integers(S, size=30)
    for agent in (sparse, dense):
        agent.belief.update(*data)
        agent.plan(rng=0)
    np.testing.assert_allclose(sparse.q_values_, dense.q_values_, atol=1e-8)
    with pytest.raises(ValueError, match="rewards"):
        PSRLAgent(DirichletTransitionModel(S, A, sparse=True), rewards.toarray(), 0.9)
