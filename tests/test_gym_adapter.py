"""The Gymnasium adapter against hand-built models: FrozenLake 2x2, CliffWalking rows, Taxi."""

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from corrpriors.envs import (
    TabularEnv,
    env_info,
    from_gymnasium,
    random_exploration,
    tunnel_world,
)
from corrpriors.mdp import check_mdp

LEFT, DOWN, RIGHT, UP = range(4)            # FrozenLake's actions
C_UP, C_RIGHT, C_DOWN, C_LEFT = range(4)    # CliffWalking's actions
THIRD = 1.0 / 3.0


def test_frozen_lake_2x2_against_a_hand_built_model():
    # S F     states 0 1; slippery: the intended move or one of its two perpendiculars, 1/3 each
    # H G     states 2 (hole) 3 (goal)
    env = gymnasium.make("FrozenLake-v1", desc=["SF", "HG"], is_slippery=True)
    mdp = from_gymnasium(env)
    P = np.zeros((4, 4, 4))
    # state 0 = (0, 0): walls keep it in place
    P[0, LEFT] = [2 * THIRD, 0, THIRD, 0]       # up (stay), left (stay), down (hole): listed twice
    P[0, DOWN] = [THIRD, THIRD, THIRD, 0]       # left (stay), down (hole), right
    P[0, RIGHT] = [THIRD, THIRD, THIRD, 0]      # down, right, up (stay)
    P[0, UP] = [2 * THIRD, THIRD, 0, 0]         # right, up (stay), left (stay)
    # state 1 = (0, 1)
    P[1, LEFT] = [THIRD, THIRD, 0, THIRD]       # up (stay), left, down (goal)
    P[1, DOWN] = [THIRD, THIRD, 0, THIRD]       # left, down (goal), right (stay)
    P[1, RIGHT] = [0, 2 * THIRD, 0, THIRD]      # down (goal), right (stay), up (stay)
    P[1, UP] = [THIRD, 2 * THIRD, 0, 0]         # right (stay), up (stay), left
    P[2, :, 2] = P[3, :, 3] = 1.0               # terminal states are absorbing
    np.testing.assert_allclose(mdp.transitions, P, atol=1e-15)
    r = np.zeros((4, 4, 4))
    # every listed arrival in the goal earns 1 and in any other state 0: the reward is a
    # function of the next state, so an unlisted arrival (from state 0) earns it as well,
    # and the goal's reward is not spread over the other next states of (1, a)
    r[:2, :, 3] = 1.0
    np.testing.assert_allclose(mdp.rewards, r, atol=1e-15)
    np.testing.assert_allclose(mdp.reward_matrix,
                               [[0, 0, 0, 0], [THIRD, THIRD, THIRD, 0], [0] * 4, [0] * 4])
    np.testing.assert_array_equal(mdp.terminal, [False, False, True, True])
    np.testing.assert_array_equal(mdp.initial_distribution, [1, 0, 0, 0])
    np.testing.assert_array_equal(mdp.coordinates, [[0, 0], [0, 1], [1, 0], [1, 1]])
    assert mdp.shape == (2, 2) and mdp.name == "FrozenLake-v1"
    assert mdp.discount == 0.99
    check_mdp(mdp)


def test_cliff_walking_rows_against_hand_built_ones():
    start, goal = 36, 47                         # (3, 0) and (3, 11) of the 4 x 12 grid
    mdp = from_gymnasium(gymnasium.make("CliffWalking-v1"))
    np.testing.assert_array_equal(mdp.transitions[start, C_RIGHT], np.eye(48)[start])  # the cliff
    assert mdp.rewards[start, C_RIGHT, start] == -100.0
    np.testing.assert_array_equal(mdp.transitions[35, C_DOWN], np.eye(48)[goal])
    assert mdp.rewards[35, C_DOWN, goal] == -1.0
    # the cliff cell below (2, 2) is never entered; stepping "into" it costs what the fall does
    assert mdp.transitions[26, C_DOWN, 38] == 0.0 and mdp.rewards[26, C_DOWN, 38] == -100.0
    assert mdp.rewards[25, C_RIGHT, 0] == -1.0           # an impossible jump: the step's cost
    np.testing.assert_array_equal(np.flatnonzero(mdp.terminal), [goal])
    np.testing.assert_array_equal(mdp.initial_distribution, np.eye(48)[start])
    assert mdp.shape == (4, 12)
    np.testing.assert_array_equal(mdp.coordinates[goal], [3, 11])

    slip = from_gymnasium(gymnasium.make("CliffWalkingSlippery-v1"))
    # RIGHT from the start slips up, goes right (cliff: back to the start, -100) or down
    # (the wall: stays at the start, -1): the start is listed twice with different rewards
    row = np.zeros(48)
    row[24], row[start] = THIRD, 2 * THIRD
    np.testing.assert_allclose(slip.transitions[start, C_RIGHT], row, atol=1e-15)
    assert slip.rewards[start, C_RIGHT, start] == pytest.approx((-100.0 - 1.0) / 2)
    assert slip.rewards[start, C_RIGHT, 24] == -1.0
    assert slip.reward_matrix[start, C_RIGHT] == pytest.approx((-1 - 100 - 1) / 3)
    # the goal row is absorbing (the raw table lets the agent walk on from it)
    np.testing.assert_array_equal(slip.transitions[goal], np.tile(np.eye(48)[goal], (4, 1)))
    np.testing.assert_array_equal(slip.rewards[goal], 0.0)


def test_taxi_coordinates_terminals_and_start():
    env = gymnasium.make("Taxi-v4")
    mdp = from_gymnasium(env)
    u = env.unwrapped
    assert mdp.coordinates.shape == (500, 4)
    for s in (0, 77, 499):
        np.testing.assert_array_equal(mdp.coordinates[s], list(u.decode(s)))
    # terminal: the passenger delivered, i.e. at its destination with the taxi there
    want = [u.encode(*loc, d, d) for d, loc in enumerate(u.locs)]
    np.testing.assert_array_equal(np.flatnonzero(mdp.terminal), sorted(want))
    np.testing.assert_allclose(mdp.initial_distribution, u.initial_state_distrib)
    assert mdp.rewards.max() == 20.0


def test_own_environment_keeps_its_model_grid_and_start():
    env = gymnasium.make("corrpriors.envs:corrpriors/TunnelWorld-v0")
    mdp = from_gymnasium(env)
    base = tunnel_world()
    np.testing.assert_array_equal(mdp.transitions, base.transitions)
    np.testing.assert_array_equal(mdp.coordinates, base.coordinates)
    np.testing.assert_array_equal(mdp.initial_distribution, np.eye(100)[0])
    assert mdp.discount == base.discount and mdp.terminal is None and mdp.shape == (10, 10)
    assert from_gymnasium(env, discount=0.5).discount == 0.5


def test_features_replace_the_coordinates():
    env = gymnasium.make("FrozenLake-v1", map_name="4x4")
    mdp = from_gymnasium(env, features=lambda s: [s % 4, s // 4, 1.0])
    assert mdp.coordinates.shape == (16, 3) and mdp.shape is None
    np.testing.assert_array_equal(mdp.coordinates[6], [2, 1, 1])
    np.testing.assert_array_equal(env_info(env, features=np.arange(16.0)).coordinates[:, 0],
                                  np.arange(16))


class TableEnv(gymnasium.Env):
    """A minimal discrete environment publishing a toy-text table ``P``."""

    def __init__(self, P, n_states=2, n_actions=1, obs_space=None):
        self.P = P
        self.observation_space = obs_space or spaces.Discrete(n_states)
        self.action_space = spaces.Discrete(n_actions)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.s = 0
        return 0, {}

    def step(self, a):
        entries = self.P[self.s][a]
        i = self.np_random.choice(len(entries), p=[e[0] for e in entries])
        _, self.s, r, done = entries[i]
        return self.s, r, done, False, {}


GOOD = {0: {0: [(0.5, 0, 0.0, False), (0.5, 1, 1.0, True)]}, 1: {0: [(1.0, 1, 0.0, True)]}}


def test_a_custom_table_without_coordinates():
    mdp = from_gymnasium(TableEnv(GOOD))
    np.testing.assert_array_equal(mdp.transitions[:, 0], [[0.5, 0.5], [0, 1]])
    np.testing.assert_array_equal(mdp.terminal, [False, True])
    assert mdp.coordinates is None and mdp.initial_distribution is None
    assert mdp.name == "TableEnv"


def test_unlisted_transitions_earn_the_reward_of_the_next_state_or_of_the_step():
    # arrivals in 2 always earn 5 and in 0, 1 always 0 (terminal 2's own row says 0: ignored)
    by_next = {0: {0: [(0.5, 1, 0.0, False), (0.5, 2, 5.0, True)], 1: [(1.0, 0, 0.0, False)]},
               1: {0: [(1.0, 0, 0.0, False)], 1: [(1.0, 2, 5.0, True)]},
               2: {0: [(1.0, 2, 0.0, True)], 1: [(1.0, 2, 0.0, True)]}}
    r = from_gymnasium(TableEnv(by_next, n_states=3, n_actions=2)).rewards
    np.testing.assert_array_equal(r[:2], np.broadcast_to([0.0, 0.0, 5.0], (2, 2, 3)))
    np.testing.assert_array_equal(r[2], 0.0)
    # the step from 1 to 0 now costs 1 while another arrival in 0 is free: not a function of
    # the next state, so an unlisted next state earns the mean of the rewards listed for (s, a)
    by_step = {**by_next, 1: {0: [(1.0, 0, -1.0, False)], 1: [(1.0, 2, 5.0, True)]}}
    r = from_gymnasium(TableEnv(by_step, n_states=3, n_actions=2)).rewards
    np.testing.assert_array_equal(r[0, 0], [2.5, 0.0, 5.0])      # mean of 0 and 5 for state 0
    np.testing.assert_array_equal(r[0, 1], [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(r[1, 0], [-1.0, -1.0, -1.0])
    np.testing.assert_array_equal(r[1, 1], [5.0, 5.0, 5.0])


def test_rewards_are_exact_when_the_probabilities_carry_round_off():
    # the row sums to 1 + 5e-9 (within the check); r(s, a, s') is the listed reward, not
    # the listed reward over the renormalised probability
    table = {0: {0: [(0.5 + 5e-9, 0, 3.0, False), (0.5, 1, 7.0, False)]},
             1: {0: [(1.0, 1, 7.0, False)]}}
    mdp = from_gymnasium(TableEnv(table))
    np.testing.assert_array_equal(mdp.rewards[0, 0], [3.0, 7.0])
    np.testing.assert_allclose(mdp.transitions[0, 0].sum(), 1.0, rtol=0, atol=1e-15)


def test_taxi_unlisted_transitions_earn_the_step_reward():
    env = gymnasium.make("Taxi-v4")
    mdp, u = from_gymnasium(env), env.unwrapped
    pickup, dropoff = 4, 5
    s = u.encode(0, 0, 1, 2)        # taxi at R, passenger at G: pickup and dropoff are illegal
    np.testing.assert_array_equal(mdp.rewards[s, [pickup, dropoff]], -10.0)
    s = u.encode(*u.locs[2], 4, 2)  # passenger in the taxi at its destination Y: delivery
    np.testing.assert_array_equal(mdp.rewards[s, dropoff], 20.0)
    np.testing.assert_array_equal(mdp.rewards[s, 0], -1.0)


@pytest.mark.parametrize("env,error,match", [
    (TableEnv({0: {0: [(0.5, 0, 0.0, False), (0.4, 1, 0.0, False)]}, 1: {0: [(1.0, 1, 0, False)]}}),
     ValueError, r"P\[0\]\[0\]: probabilities must sum to 1, they sum to 0.9"),
    (TableEnv({0: {0: [(1.0, 2, 0.0, False)]}, 1: {0: [(1.0, 1, 0, False)]}}),
     ValueError, r"next state 2 \(entry .*\) is not a state index in \[0, 1\]"),
    (TableEnv({0: {0: [(1.0, 1, 0.0)]}, 1: {0: [(1.0, 1, 0, False)]}}),
     ValueError, "expected entries"),
    (TableEnv({0: {}, 1: {0: [(1.0, 1, 0, False)]}}), ValueError, r"P\[0\]\[0\] is missing"),
    (TableEnv({0: {0: [(0.5, 1, 0.0, True), (0.5, 0, 0.0, False)]},
               1: {0: [(1.0, 0, 0, False)]}, 2: {0: [(1.0, 1, 0.0, False)]}}, n_states=3),
     ValueError, "termination to depend only on the state reached"),
    (TableEnv(None), ValueError, "publishes no tabular model"),
    (TableEnv(GOOD, obs_space=spaces.Box(0.0, 1.0, (2,))), TypeError,
     "observation_space: expected a gymnasium.spaces.Discrete"),
    (TableEnv(GOOD, obs_space=spaces.Discrete(2, start=1)), ValueError, "starting at 0"),
])
def test_bad_environments_get_clear_errors(env, error, match):
    with pytest.raises(error, match=match):
        from_gymnasium(env)


def test_continuous_environment_is_refused():
    with pytest.raises(TypeError, match="observation_space: expected a gymnasium.spaces.Discrete"):
        env_info(gymnasium.make("CartPole-v1"))


@pytest.mark.parametrize("features,match", [
    (lambda s: np.zeros(1 + s % 2), r"one length D = 1; state 1 gave shape \(2,\)"),
    (np.zeros((15, 2)), r"features: expected shape \(S, D\) with S = 16"),
    (lambda s: [np.nan], "NaN"),
])
def test_bad_features_get_clear_errors(features, match):
    with pytest.raises(ValueError, match=match):
        from_gymnasium(gymnasium.make("FrozenLake-v1", map_name="4x4"), features=features)


def test_env_without_a_model_is_described_for_learning():
    info = env_info(TableEnv(None, n_states=3, n_actions=2), features=lambda s: [s])
    assert (info.n_states, info.n_actions) == (3, 2)
    np.testing.assert_array_equal(info.coordinates, [[0], [1], [2]])


def test_tabular_env_of_an_adapted_model_replays_terminals_and_rewards():
    mdp = from_gymnasium(gymnasium.make("FrozenLake-v1", desc=["SF", "HG"], is_slippery=True))
    env = TabularEnv(mdp)                     # the adapted model as an environment again
    np.testing.assert_array_equal(env.initial_distribution, [1, 0, 0, 0])
    data = random_exploration(env, 400, rng=1)
    ended = data.terminated
    assert ended.any() and not data.truncated.any()
    np.testing.assert_array_equal(ended, mdp.terminal[data.next_states])
    np.testing.assert_array_equal(data.rewards, (data.next_states == 3).astype(float))
    # after an episode ends the next transition starts from the start state, not the terminal
    np.testing.assert_array_equal(data.states[1:][ended[:-1]], 0)
    np.testing.assert_array_equal(np.flatnonzero(np.isin(data.states, [2, 3])), [])


def test_random_exploration_is_reproducible():
    env = gymnasium.make("FrozenLake-v1", map_name="4x4")
    a, b = random_exploration(env, 200, rng=5), random_exploration(env, 200, rng=5)
    c = random_exploration(env, 200, rng=6)
    np.testing.assert_array_equal(a.next_states, b.next_states)
    short = random_exploration(env, 50, rng=5)               # a shorter walk is a prefix
    np.testing.assert_array_equal(short.next_states, a.next_states[:50])
    assert not np.array_equal(a.next_states, c.next_states)
    freq = np.bincount(a.actions, minlength=4) / 200
    assert np.all(np.abs(freq - 0.25) < 4 * np.sqrt(0.25 * 0.75 / 200))
