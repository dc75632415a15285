"""Sparse environment tables: every builder against its dense table, the adapter, the Gymnasium
wrapper, PSRL and the experiment helpers on sparse models, and memory at scale."""

import tracemalloc

import gymnasium
import numpy as np
import pytest

import corrpriors.mdp._sparse as sparse_module
from corrpriors.applications import PSRLAgent
from corrpriors.applications.psrl import run_psrl
from corrpriors.envs import (
    TabularEnv,
    cardinal_kernels,
    default_walls,
    dense_gridworld,
    from_gymnasium,
    gaussian_kernels,
    goal_gridworld,
    gridworld,
    queueing_network,
    random_exploration,
    reachable_states,
    transitions_from_kernels,
    tunnel_world,
    wall_world,
)
from corrpriors.experiments._gym import goal_states, horizon_stats, return_is_success
from corrpriors.mdp import (
    SparseTransitionRewards,
    SparseTransitions,
    check_mdp,
    hellinger,
    policy_evaluation,
    policy_iteration,
    value_iteration,
)

BUILDERS = {
    "dense_gridworld": lambda sparse: dense_gridworld((7, 9), sparse=sparse),
    "dense_gridworld_window": lambda sparse: dense_gridworld((6, 6), 0.7, window=2, sparse=sparse),
    "tunnel_world": lambda sparse: tunnel_world((8, 5), goal=(3, 3), start=(0, 4), sparse=sparse),
    "goal_gridworld": lambda sparse: goal_gridworld((9, 7), rng=1, sparse=sparse),
    "goal_gridworld_gaussian": lambda sparse: goal_gridworld((6, 8), rng=2, motion="gaussian", window=2,
                                                             sparse=sparse),
    "goal_gridworld_sure": lambda sparse: goal_gridworld((5, 5), rng=3, success_prob=1.0, sparse=sparse),
    "wall_world": lambda sparse: wall_world(sparse=sparse),
    "queueing_network": lambda sparse: queueing_network(sparse=sparse),
    "queueing_capped": lambda sparse: queueing_network((4, 3), 2.5, (0.0, 4.0), capped=True, sparse=sparse),
}


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_every_builder_gives_the_dense_numbers_sparsely(name):
    dense, sparse = BUILDERS[name](False), BUILDERS[name](True)
    assert isinstance(sparse.transitions, SparseTransitions) and not dense.is_sparse
    np.testing.assert_array_equal(sparse.transitions.toarray(), dense.transitions)   # bit for bit
    assert sparse.transitions.nnz == int((dense.transitions > 0).sum())
    np.testing.assert_array_equal(sparse.reward_matrix, dense.reward_matrix)
    np.testing.assert_array_equal(sparse.coordinates, dense.coordinates)
    check_mdp(sparse)
    a, b = value_iteration(dense), value_iteration(sparse)
    np.testing.assert_allclose(b.values, a.values, rtol=0, atol=1e-9)
    pi = np.full((dense.n_states, dense.n_actions), 1.0 / dense.n_actions)
    ref = policy_evaluation(dense, pi)
    np.testing.assert_allclose(policy_evaluation(sparse, pi), ref, rtol=0, atol=1e-12 * np.abs(ref).max())


def test_kernels_with_walls_and_the_automatic_choice(monkeypatch):
    walls = default_walls((11, 11))
    for K in (cardinal_kernels(0.7), gaussian_kernels(1.0, 3)):
        dense = transitions_from_kernels(K, (11, 11), walls, sparse=False)
        np.testing.assert_array_equal(transitions_from_kernels(K, (11, 11), walls, sparse=True).toarray(), dense)
    assert isinstance(transitions_from_kernels(cardinal_kernels(), (10, 10)), np.ndarray)
    monkeypatch.setattr(sparse_module, "DENSE_LIMIT_BYTES", 8 * 101 * 4 * 101)
    assert wall_world().is_sparse is False          # 101 states: at the limit
    assert goal_gridworld((11, 11), rng=0).is_sparse   # 121 states: above
    assert not goal_gridworld((11, 11), rng=0, sparse=False).is_sparse
    with pytest.raises(TypeError, match="sparse: expected True, False or None"):
        dense_gridworld((3, 3), sparse="yes")


def test_a_window_too_wide_for_memory_is_refused_before_allocating():
    with pytest.raises(ValueError, match="smaller window"):
        tunnel_world((400, 400), window=200, sparse=True)       # ~2.6e11 transitions


def test_default_window_is_the_half_grid_up_to_six_spreads():
    """The default window is n // 2 (the companion code's) where that is within 6 step spreads
    of the move -- the paper's 10 x 10 grid bit for bit -- and is capped beyond: the cut-off mass
    changes no probability by more than 1e-9."""
    assert gridworld._default_window((316, 316), None, 1.0) == 7
    assert gridworld._default_window((316, 316), None, 0.5) == 4
    assert gridworld._default_window((10, 10), None, 1.0) == 5
    assert gridworld._default_window((3, 1), None, 1.0) == 1
    np.testing.assert_array_equal(dense_gridworld((10, 10)).transitions,
                                  dense_gridworld((10, 10), window=5).transitions)
    capped = dense_gridworld((30, 30)).transitions
    half = dense_gridworld((30, 30), window=15).transitions
    assert 0 < np.abs(capped - half).max() < 1e-9
    with pytest.raises(ValueError, match="step_spread"):
        tunnel_world((30, 30), step_spread=float("nan"))


@pytest.mark.slow
def test_default_tunnel_world_builds_at_ten_to_the_five_states():
    mdp = tunnel_world((316, 316))
    assert mdp.n_states == 316 ** 2 and mdp.transitions.nnz <= 4 * 316 ** 2 * 225
    np.testing.assert_allclose(mdp.transitions.matrix.sum(axis=1), 1.0, atol=1e-12)


# ----------------------------------------------------------------------------- the Gymnasium adapter
TOY_TEXT = [dict(id="FrozenLake-v1", map_name="8x8"), dict(id="FrozenLake-v1", map_name="4x4", is_slippery=False),
            dict(id="CliffWalking-v1"), dict(id="Taxi-v4")]


@pytest.mark.parametrize("kwargs", TOY_TEXT, ids=lambda k: k["id"])
def test_from_gymnasium_sparse_equals_dense(kwargs):
    env = gymnasium.make(**kwargs)
    dense, sparse = from_gymnasium(env, sparse=False), from_gymnasium(env, sparse=True)
    assert isinstance(sparse.rewards, SparseTransitionRewards)
    np.testing.assert_array_equal(sparse.transitions.toarray(), dense.transitions)
    np.testing.assert_array_equal(sparse.rewards.toarray(), dense.rewards)   # unlisted fill included
    np.testing.assert_array_equal(sparse.reward_matrix, dense.reward_matrix)
    np.testing.assert_array_equal(sparse.terminal, dense.terminal)
    np.testing.assert_array_equal(sparse.initial_distribution, dense.initial_distribution)
    np.testing.assert_array_equal(reachable_states(sparse), reachable_states(dense))
    # a sampled model with mass on unlisted transitions: the same expected rewards
    rng = np.random.default_rng(0)
    S, A = dense.n_states, dense.n_actions
    draw = rng.dirichlet(np.full(3, 0.5), size=(S, A))
    nxt = rng.integers(S, size=(S, A, 3))
    T = SparseTransitions.from_entries(nxt, draw)
    np.testing.assert_allclose(sparse.expected_rewards(T), dense.expected_rewards(T.toarray()), rtol=0, atol=1e-12)
    goals = goal_states(dense)
    np.testing.assert_array_equal(goal_states(sparse), goals)
    assert return_is_success(sparse, goals) == return_is_success(dense, goals)
    pols = rng.integers(A, size=(2, S))
    for x, y in zip(horizon_stats(sparse, pols, goals, 25), horizon_stats(dense, pols, goals, 25)):
        np.testing.assert_allclose(x, y, rtol=0, atol=1e-12)


def test_sparse_adapter_reports_the_same_errors():
    from tests.test_gym_adapter import TableEnv

    bad = [(TableEnv({0: {0: [(0.5, 0, 0.0, False), (0.4, 1, 0.0, False)]}, 1: {0: [(1.0, 1, 0, False)]}}),
            r"P\[0\]\[0\]: probabilities must sum to 1, they sum to 0.9"),
           (TableEnv({0: {0: [(0.5, 1, 0.0, True), (0.5, 0, 0.0, False)]},
                      1: {0: [(1.0, 0, 0, False)]}, 2: {0: [(1.0, 1, 0.0, False)]}}, n_states=3),
            "termination to depend only on the state reached")]
    for env, match in bad:
        for sparse in (False, True):
            with pytest.raises(ValueError, match=match):
                from_gymnasium(env, sparse=sparse)


def test_tabular_env_steps_identically_from_dense_and_sparse_models():
    env = gymnasium.make("FrozenLake-v1", map_name="8x8")
    dense, sparse = from_gymnasium(env, sparse=False), from_gymnasium(env, sparse=True)
    a = random_exploration(TabularEnv(dense), 600, rng=3)
    b = random_exploration(TabularEnv(sparse), 600, rng=3)
    for f in ("states", "next_states", "rewards", "terminated"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    back = from_gymnasium(TabularEnv(sparse), sparse=False)       # a TabularEnv converts on request
    np.testing.assert_array_equal(back.transitions, dense.transitions)
    np.testing.assert_array_equal(back.rewards, dense.rewards)
    assert from_gymnasium(TabularEnv(dense), sparse=True).is_sparse


# ----------------------------------------------------------------------------- PSRL on sparse models
class _PointMass:
    """A belief that is the true model, in a dense or a sparse form."""

    def __init__(self, P, sparse):
        self.n_states, self.n_actions = P.shape[:2]
        self.P = SparseTransitions.from_dense(P) if sparse else P

    def update(self, *args):
        return self

    def mean(self):
        return self.P

    def sample_many(self, n, *, rng):
        return [self.P] * n if isinstance(self.P, SparseTransitions) else np.stack([self.P] * n)


def test_psrl_plans_with_sparse_draws_and_runs_on_a_sparse_truth():
    mdp = tunnel_world((5, 5), sparse=False)
    runs = []
    for sparse in (False, True):
        agent = PSRLAgent(_PointMass(mdp.transitions, sparse), mdp.reward_matrix, 0.9, n_samples=2,
                          replan_every=20)
        truth = tunnel_world((5, 5), sparse=sparse)
        runs.append(run_psrl(truth, agent, 60, 0, rng=4))
    for key in ("states", "actions", "steps"):
        np.testing.assert_array_equal(runs[1][key], runs[0][key])
    np.testing.assert_allclose(runs[1]["expected_return"], runs[0]["expected_return"], rtol=0, atol=1e-12)
    assert runs[1]["optimal_return"] == pytest.approx(float(runs[0]["optimal_return"]), abs=1e-12)


# ----------------------------------------------------------------------------- memory at scale
def test_a_large_sparse_grid_never_materialises_a_dense_table():
    """120 x 120 cells: a dense (S, A, S) table would take 6.6 GB and one (S, S) matrix 1.7 GB."""
    tracemalloc.start()
    try:
        mdp = goal_gridworld((120, 120), n_rewards=5, rng=0)
        assert mdp.is_sparse
        res = value_iteration(mdp)
        V = policy_evaluation(mdp, res.policy)
        S = mdp.n_states                # an estimate that always stays put: K = 1 entry per row
        stay = SparseTransitions.from_entries(np.tile(np.arange(S)[:, None, None], (1, 4, 1)),
                                              np.ones((S, 4, 1)))
        h = hellinger(mdp.transitions, stay)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 150 * 2**20, f"peak {peak / 2**20:.0f} MiB"
    assert np.abs(V - res.values).max() < 1e-7 * max(1.0, np.abs(V).max())
    assert h.shape == (mdp.n_states, 4) and np.all((h > 0) & (h <= 1))


def test_a_large_frozen_lake_is_read_without_a_dense_table():
    from gymnasium.envs.toy_text.frozen_lake import generate_random_map

    desc = generate_random_map(size=70, p=0.9, seed=1)
    env = gymnasium.make("FrozenLake-v1", desc=desc, is_slippery=True)
    tracemalloc.start()
    try:
        mdp = from_gymnasium(env)                 # dense P and r would take 770 MB each
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert mdp.is_sparse and peak < 40 * 2**20, f"peak {peak / 2**20:.0f} MiB"
    assert mdp.transitions.nnz <= 3 * 4 * 70 * 70
    res = policy_iteration(mdp)
    assert res.converged and res.values.max() > 0


@pytest.mark.slow
def test_316_grid_builds_plans_and_evaluates_within_bounds():
    tracemalloc.start()
    try:
        mdp = tunnel_world((316, 316), window=2)
        res = value_iteration(mdp)
        V = policy_evaluation(mdp, res.policy)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1024 * 2**20
    assert np.abs(V - res.values).max() < 1e-7


def test_transition_model_and_agent_accept_a_sparse_mdp():
    from corrpriors.applications import CorrelatedTransitionModel

    dense, sparse = BUILDERS["goal_gridworld"](False), BUILDERS["goal_gridworld"](True)
    a = CorrelatedTransitionModel.for_mdp(dense)
    b = CorrelatedTransitionModel.for_mdp(sparse)          # reads coordinates and sizes only
    assert (a.n_states, a.n_actions, a.n_categories) == (b.n_states, b.n_actions, b.n_categories)
    lake = from_gymnasium(gymnasium.make("FrozenLake-v1", map_name="4x4"), sparse=True)
    agent = PSRLAgent(_PointMass(lake.transitions.toarray(), True), lake.rewards, 0.95, variant="mean",
                      terminal=lake.terminal)            # sparse transition rewards
    dense_lake = from_gymnasium(gymnasium.make("FrozenLake-v1", map_name="4x4"), sparse=False)
    ref = PSRLAgent(_PointMass(dense_lake.transitions, False), dense_lake.rewards, 0.95, variant="mean",
                    terminal=dense_lake.terminal)
    np.testing.assert_array_equal(agent.plan(rng=0), ref.plan(rng=0))
    np.testing.assert_allclose(agent.q_values_, ref.q_values_, rtol=0, atol=1e-12)
