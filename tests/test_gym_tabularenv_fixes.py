"""Gymnasium integration with corrpriors' own TabularEnv: terminal rows, sparse models, argument checks."""

import numpy as np
import pytest

from corrpriors.envs import TabularEnv, from_gymnasium
from corrpriors.experiments._gym import goal_states, horizon_stats
from corrpriors.mdp import SparseTransitions, TabularMDP


def _chain_with_live_terminal_row(sparse):
    """0 -> 1 -> 2 (terminal goal); the model's row of 2 leads back to 0 and pays 5."""
    P = np.zeros((3, 1, 3))
    P[0, 0, 1] = P[1, 0, 2] = P[2, 0, 0] = 1.0
    r = np.zeros((3, 1, 3))
    r[1, 0, 2], r[2, 0, 0] = 1.0, 5.0
    table = SparseTransitions.from_dense(P) if sparse else P
    return TabularMDP(table, r, 0.9, terminal=np.array([False, False, True]),
                      initial_distribution=np.array([1.0, 0.0, 0.0]))


@pytest.mark.parametrize("sparse", [False, True])
def test_horizon_stats_never_step_out_of_a_terminal_row_of_a_tabularenv(sparse):
    # from_gymnasium keeps a TabularEnv's rows: the terminal row is not absorbing there
    mdp = from_gymnasium(TabularEnv(_chain_with_live_terminal_row(sparse)))
    goals = goal_states(mdp)
    assert goals.tolist() == [2]
    for horizon in (2, 3, 4, 7):
        success, ret = horizon_stats(mdp, np.zeros((1, 3), dtype=int), goals, horizon)
        assert success[0] == pytest.approx(1.0)     # reached at step 2, the episode has ended
        assert ret[0] == pytest.approx(1.0)         # the goal's own row pays nothing
    success, ret = horizon_stats(mdp, np.zeros((1, 3), dtype=int), goals, 1)
    assert success[0] == 0.0 and ret[0] == 0.0


def test_a_sparse_tabularenv_publishes_the_same_toy_text_table_as_a_dense_one():
    import gymnasium

    lake = gymnasium.make("FrozenLake-v1", map_name="4x4")
    dense, sparse = TabularEnv(from_gymnasium(lake, sparse=False)), TabularEnv(from_gymnasium(lake, sparse=True))
    assert sparse.mdp.is_sparse and not dense.mdp.is_sparse
    assert sparse.P == dense.P
    entries = sparse.P[14][2]
    assert [e[1:] for e in entries] == [(10, 0.0, False), (14, 0.0, False), (15, 1.0, True)]
    assert [e[0] for e in entries] == pytest.approx([1 / 3] * 3)


def test_the_commands_take_a_large_sparse_tabularenv_and_count_its_entries_without_a_table():
    from corrpriors.experiments._gym import load_env
    from corrpriors.experiments._gym_memory import env_entries

    env, mdp = load_env("corrpriors/DeepSea-v0", {"size": 60})   # was "is not tabular"
    assert mdp.is_sparse and mdp.n_states == 60 * 61
    assert env_entries(env, mdp.n_states, mdp.n_actions) == mdp.transitions.nnz
    assert getattr(env.unwrapped, "_table", None) is None      # no Python table was built


def test_sysid_checks_an_environment_without_coordinates():
    from corrpriors.experiments.gym_sysid import SysIdExperiment

    exp = SysIdExperiment("corrpriors/RandomMDP-v0", {"n_states": 20})
    exp.check_config(exp.Config(transitions=(10, 20), methods=("dirichlet_sparse",)))  # was an IndexError


@pytest.mark.parametrize("bad", [1.7, True, -0.5, "a", float("nan")])
def test_tabularenv_refuses_indices_it_would_truncate_naming_the_argument(bad):
    P = np.zeros((3, 2, 3))
    P[:, :, 1] = 1.0
    mdp = TabularMDP(P, np.arange(3.0), 0.9)
    with pytest.raises(ValueError, match=r"^initial_distribution \(a start state\): expected an integer in \[0, 2\]"):
        TabularEnv(mdp, bad)
    env = TabularEnv(mdp, 0)
    with pytest.raises(ValueError, match=r"^options\['state'\]: expected an integer in \[0, 2\]"):
        env.reset(options={"state": bad if bad is not True else 2.9})
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"^action: expected an integer in \[0, 1\]"):
        env.step(bad)
    with pytest.raises(ValueError, match=r"^action: expected an integer"):
        env.step(None)
    assert env.step(np.int64(1))[0] == 1 and env.step(np.array(0))[0] == 1   # numpy integers still work
    assert TabularEnv(mdp, np.int32(2)).reset()[0] == 2


def test_random_frozen_lake_too_large_is_refused_before_gymnasium_builds_its_table(monkeypatch):
    from corrpriors._memory import MemoryEstimateError
    from corrpriors.experiments._gym import load_env

    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "100M")
    with pytest.raises(MemoryEstimateError, match=r"^size: FrozenLake's table of a 2,000 x 2,000 map "
                       r"\(4,000,000 states, 48,000,000 listed transitions\) would need about 13.4 GiB"):
        load_env("corrpriors/RandomFrozenLake-v0", {"size": 2000})
    with pytest.raises(MemoryEstimateError, match=r"16,000,000 listed transitions"):
        load_env("corrpriors/RandomFrozenLake-v0", {"size": 2000, "is_slippery": False})
    env, mdp = load_env("corrpriors/RandomFrozenLake-v0", {"size": 20})   # small maps still load
    assert mdp.n_states == 400


def test_from_gymnasium_refuses_wrappers_that_change_what_the_model_describes():
    import gymnasium
    from gymnasium import spaces

    from corrpriors.envs import DiscreteTupleObservation

    class Flip(gymnasium.ObservationWrapper):
        def __init__(self, env):
            super().__init__(env)
            self.observation_space = spaces.Discrete(16)

        def observation(self, o):
            return 15 - int(o)

    class Passthrough(gymnasium.Wrapper):    # adds an attribute, overrides nothing: read through
        note = "mine"

    class Logged(gymnasium.Wrapper):         # overrides step: what it does cannot be read
        def step(self, action):
            return super().step(action)

    class FewerActions(gymnasium.Wrapper):   # shows other spaces without overriding step
        def __init__(self, env):
            super().__init__(env)
            self.action_space = spaces.Discrete(2)

    lake = gymnasium.make("FrozenLake-v1", map_name="4x4", is_slippery=False)
    rewards = gymnasium.wrappers.TransformReward(lake, lambda r: 10.0 * r - 1.0)
    for env, name, what in ((rewards, "TransformReward", "rewards"), (Flip(lake), "Flip", "observations"),
                            (gymnasium.wrappers.TimeLimit(Flip(lake), 5), "Flip", "observations"),
                            (Logged(lake), "Logged", "rewards, observations or actions"),
                            (Passthrough(FewerActions(lake)), "FewerActions", "rewards, observations or actions")):
        with pytest.raises(ValueError, match=f"^env: the wrapper {name} may change the {what} the agent sees"):
            from_gymnasium(env)
    # gymnasium.make's own wrappers, statistics and corrpriors' flattening are read through
    kept = gymnasium.wrappers.RecordEpisodeStatistics(gymnasium.wrappers.TimeLimit(Passthrough(lake), 7))
    assert np.array_equal(from_gymnasium(kept).transitions, from_gymnasium(lake.unwrapped).transitions)
    box = TabularEnv(TabularMDP(np.ones((2, 1, 2)) / 2, np.zeros(2), 0.9))
    box.observation_space = spaces.Tuple((spaces.Discrete(2),))
    assert from_gymnasium(DiscreteTupleObservation(box)).n_states == 2


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), None, 2.5, -1, True, 10**13])
def test_random_exploration_names_n_steps(bad):
    import gymnasium

    from corrpriors.envs import random_exploration

    with pytest.raises(ValueError, match=r"^n_steps: expected an integer in \[0, 10000000\]"):
        random_exploration(gymnasium.make("FrozenLake-v1", map_name="4x4"), bad, rng=0)


def test_random_exploration_refuses_steps_that_cannot_fit(monkeypatch):
    import gymnasium

    from corrpriors._memory import MemoryEstimateError
    from corrpriors.envs import random_exploration

    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "10M")
    with pytest.raises(MemoryEstimateError, match=r"^n_steps: 10,000,000 transitions would need about 324 MiB"):
        random_exploration(gymnasium.make("FrozenLake-v1", map_name="4x4"), 10**7, rng=0)
    assert random_exploration(gymnasium.make("FrozenLake-v1", map_name="4x4"), 100, rng=0).states.size == 100
