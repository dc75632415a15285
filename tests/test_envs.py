"""Grid-world builders and the Gymnasium environments."""

import warnings

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from corrpriors.envs import (
    ACTION_VECTORS,
    ENV_IDS,
    TabularEnv,
    cardinal_kernels,
    default_walls,
    dense_gridworld,
    gaussian_kernels,
    goal_gridworld,
    queueing_network,
    tunnel_world,
    wall_world,
)
from corrpriors.mdp import check_mdp, value_iteration

BUILDERS = {
    "dense": dense_gridworld,
    "tunnel": tunnel_world,
    "goal": lambda: goal_gridworld(rng=0),
    "goal_gaussian": lambda: goal_gridworld(rng=0, motion="gaussian"),
    "wall": wall_world,
    "queue": queueing_network,
}


@pytest.fixture(scope="module")
def built():
    return {k: f() for k, f in BUILDERS.items()}


@pytest.mark.parametrize("name", list(BUILDERS))
def test_builders_give_valid_mdps(built, name):
    mdp = built[name]
    check_mdp(mdp)
    np.testing.assert_allclose(mdp.transitions.sum(-1), 1.0, atol=1e-12)
    assert mdp.coordinates.shape == (mdp.n_states, 2)
    assert mdp.discount == 0.9


def test_default_sizes(built):
    assert built["dense"].transitions.shape == (100, 4, 100)
    assert built["tunnel"].transitions.shape == (100, 4, 100)
    assert built["wall"].n_states == 101          # 121 cells minus 20 wall cells
    assert built["queue"].transitions.shape == (121, 2, 121)


def test_state_index_is_row_major(built):
    mdp = built["dense"]
    rc = mdp.coordinates.astype(int)
    np.testing.assert_array_equal(np.ravel_multi_index(rc.T, (10, 10)), np.arange(100))
    np.testing.assert_array_equal(mdp.cells, rc)


def dense_reference(shape, spread, window, r, c, a):
    """Loop reference for one row of the dense grid."""
    dr, dc = ACTION_VECTORS[a]
    probs = {}
    total = 0.0
    for i in range(-window, window + 1):
        for j in range(-window, window + 1):
            w = np.exp(-0.5 * ((i - dr) ** 2 + (j - dc) ** 2) / spread ** 2)
            total += w
            rr, cc = r + i, c + j
            key = (rr, cc) if 0 <= rr < shape[0] and 0 <= cc < shape[1] else (r, c)
            probs[key] = probs.get(key, 0.0) + w
    row = np.zeros(shape)
    for (rr, cc), w in probs.items():
        row[rr, cc] += w / total
    return row.ravel()


@pytest.mark.parametrize("r,c,a", [(0, 0, 0), (5, 5, 1), (9, 3, 2), (4, 0, 3), (9, 9, 1)])
def test_dense_moves_match_loop_reference(r, c, a):
    mdp = dense_gridworld(step_spread=1.0, window=3)
    s = np.ravel_multi_index((r, c), (10, 10))
    np.testing.assert_allclose(mdp.transitions[s, a], dense_reference((10, 10), 1.0, 3, r, c, a),
                               atol=1e-14)


def test_dense_moves_point_in_the_action_direction():
    mdp = dense_gridworld()
    s = np.ravel_multi_index((5, 5), (10, 10))
    for a, (dr, dc) in enumerate(ACTION_VECTORS):
        mean = mdp.transitions[s, a] @ mdp.coordinates - mdp.coordinates[s]
        assert np.dot(mean, [dr, dc]) > 0.5
        # the most likely next cell is the intended neighbour
        assert mdp.transitions[s, a].argmax() == np.ravel_multi_index((5 + dr, 5 + dc), (10, 10))


def test_kernels_are_normalised():
    np.testing.assert_allclose(gaussian_kernels(1.0, 4).sum(axis=(1, 2)), 1.0)
    K = cardinal_kernels(0.7)
    np.testing.assert_allclose(K.sum(axis=(1, 2)), 1.0)
    assert K[0, 0, 1] == pytest.approx(0.7) and K[0, 2, 1] == pytest.approx(0.1)


def test_tunnel_world(built):
    mdp = built["tunnel"]
    goal = np.ravel_multi_index((9, 9), (10, 10))
    np.testing.assert_array_equal(mdp.transitions[goal, :, 0], 1.0)
    assert mdp.rewards[goal] == 1.0 and mdp.rewards.sum() == 1.0
    # optimal behaviour heads towards the goal: V increases along the diagonal
    V = value_iteration(mdp).values.reshape(10, 10)
    assert np.all(np.diff(np.diag(V)) > 0)


def test_goal_gridworld_layout_is_seeded():
    a, b, c = goal_gridworld(rng=3), goal_gridworld(rng=3), goal_gridworld(rng=4)
    assert a.rewards.sum() == 3
    np.testing.assert_array_equal(a.rewards, b.rewards)
    assert not np.array_equal(a.rewards, c.rewards)
    # cardinal moves: interior row has 0.7 on the intended neighbour, 0.1 on the others
    s = np.ravel_multi_index((4, 4), (10, 10))
    row = a.transitions[s, 1]
    assert row[np.ravel_multi_index((4, 5), (10, 10))] == pytest.approx(0.7)
    for cell in [(3, 4), (5, 4), (4, 3)]:
        assert row[np.ravel_multi_index(cell, (10, 10))] == pytest.approx(0.1)
    # blocked mass stays: corner (0, 0) moving up keeps 0.7 (up) + 0.1 (left)
    assert a.transitions[0, 0, 0] == pytest.approx(0.8)
    with pytest.raises(ValueError, match="motion"):
        goal_gridworld(rng=0, motion="teleport")


def test_wall_world(built):
    mdp = built["wall"]
    W = default_walls()
    assert W.sum() == 20 and not W[7, 3] and not W[3, 7]
    np.testing.assert_array_equal(mdp.cells[[10, 90]], [[1, 1], [9, 9]])
    assert mdp.rewards[10] == 1 and mdp.rewards[90] == 1 and mdp.rewards.sum() == 2
    # nobody moves into a wall: next cells are never wall cells, and crossing x=3 happens only at y=7
    cells = mdp.cells
    src, _, dst = np.nonzero(mdp.transitions)
    crossing = (cells[src, 1] < 3) & (cells[dst, 1] > 3) | (cells[src, 1] > 3) & (cells[dst, 1] < 3)
    assert not crossing.any()                      # one step never jumps over the wall column
    into_gap = (cells[dst, 1] == 3)
    assert np.all(cells[dst[into_gap], 0] == 7)
    # a cell next to a wall keeps the blocked mass: (0, 2) moving right (into the wall)
    s = np.flatnonzero((cells == [0, 2]).all(1))[0]
    assert mdp.transitions[s, 1, s] == pytest.approx(0.7 + 0.1)   # right blocked, up blocked


@pytest.mark.parametrize("env_id", list(ENV_IDS))
def test_registered_envs_pass_check_env(env_id):
    env = gymnasium.make(env_id)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped, skip_render_check=True)
    assert isinstance(env.unwrapped.mdp.transitions, np.ndarray)
    assert env.spec.max_episode_steps == 1000
    assert env.observation_space.n == env.unwrapped.mdp.n_states
    env.close()


def test_env_start_states_and_truncation():
    env = gymnasium.make("corrpriors/TunnelWorld-v0")
    obs, _ = env.reset(seed=0)
    assert obs == 0
    steps = 0
    while True:
        obs, r, term, trunc, _ = env.step(env.action_space.sample())
        steps += 1
        assert not term
        if trunc:
            break
    assert steps == 1000
    q = gymnasium.make("corrpriors/QueueingNetwork-v0")
    assert q.reset(seed=1)[0] == 0


def test_env_seeding_and_dynamics():
    mdp = wall_world()
    env = TabularEnv(mdp)
    def run(seed):
        obs, _ = env.reset(seed=seed)
        out = [obs]
        for t in range(50):
            out.append(env.step(t % 4)[0])
        return out
    assert run(5) == run(5)
    assert run(5) != run(6)
    # empirical next-state frequencies from one state match the model
    env.reset(seed=0)
    s = 40
    n = 4000
    counts = np.zeros(mdp.n_states)
    for _ in range(n):
        env.reset(options={"state": s})
        counts[env.step(2)[0]] += 1
    p = mdp.transitions[s, 2]
    assert np.all(np.abs(counts / n - p) <= 5 * np.sqrt(p * (1 - p) / n) + 1e-12)
    # reward is that of the current state
    env.reset(options={"state": 10})
    assert env.step(0)[1] == 1.0


def test_env_rejects_bad_input():
    env = TabularEnv(tunnel_world(), initial_distribution=0)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="action"):
        env.step(7)
    with pytest.raises(ValueError, match="initial_distribution"):
        TabularEnv(tunnel_world(), initial_distribution=500)
    with pytest.raises(TypeError, match="mdp"):
        TabularEnv(np.eye(3))


@pytest.mark.parametrize("build", [dense_gridworld, tunnel_world, lambda shape: goal_gridworld(shape, rng=0),
                                   default_walls, wall_world])
def test_grid_shapes_are_integers_not_truncated(build):
    """A fractional size was cut silently ((2.7, 3.9) built a 2 x 3 grid); it is refused."""
    for bad in ((2.7, 3.9), (4, 4.5), ("4", "4"), (4,), (0, 4)):
        with pytest.raises(ValueError, match=r"^shape: expected \(n_rows, n_cols\), two positive integers"):
            build(bad)
    assert build((np.int64(11), 11.0)) is not None   # numpy integers and whole floats are integers


def test_make_with_module_prefix():
    env = gymnasium.make("corrpriors.envs:corrpriors/WallWorld-v0")
    assert env.unwrapped.mdp.n_states == 101


def test_make_forwards_builder_kwargs():
    a = gymnasium.make("corrpriors/GoalGridworld-v0", layout_seed=3).unwrapped.mdp
    np.testing.assert_array_equal(a.rewards, goal_gridworld(rng=3).rewards)
    q = gymnasium.make("corrpriors/QueueingNetwork-v0", buffers=(4, 3)).unwrapped.mdp
    assert q.n_states == 20


try:
    from hypothesis import given, settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover
    given = None

if given is not None:

    @settings(max_examples=25, deadline=None)
    @given(rows=st.integers(1, 9), cols=st.integers(1, 9), spread=st.floats(0.2, 3.0),
           window=st.integers(1, 4), p=st.floats(0.0, 1.0), seed=st.integers(0, 10))
    def test_builders_always_stochastic(rows, cols, spread, window, p, seed):
        mdps = [dense_gridworld((rows, cols), spread, window),
                goal_gridworld((rows, cols), min(2, rows * cols), rng=seed, success_prob=p)]
        if rows * cols >= 2:
            mdps.append(tunnel_world((rows, cols), step_spread=spread, window=window))
        if rows >= 8 and cols >= 8:
            mdps.append(wall_world((rows, cols), success_prob=p, reward_states=[0]))
        for mdp in mdps:
            check_mdp(mdp)
            np.testing.assert_allclose(mdp.transitions.sum(-1), 1.0, atol=1e-12)
            assert mdp.coordinates.shape == (rows * cols - (mdp.walls.sum()), 2)


def test_random_frozen_lake_is_gymnasiums_map_fixed_by_two_numbers():
    from gymnasium.envs.toy_text.frozen_lake import generate_random_map

    env = gymnasium.make("corrpriors/RandomFrozenLake-v0", size=9, p=0.85, map_seed=4,
                         is_slippery=False)
    expected = [list(row.encode()) for row in generate_random_map(size=9, p=0.85, seed=4)]
    assert env.unwrapped.desc.tolist() == [[bytes([c]) for c in row] for row in expected]
    assert env.spec.max_episode_steps is None and len(env.unwrapped.P[0][0]) == 1   # not slippery
    again = gymnasium.make("corrpriors/RandomFrozenLake-v0", size=9, p=0.85, map_seed=4)
    other = gymnasium.make("corrpriors/RandomFrozenLake-v0", size=9, p=0.85, map_seed=5)
    assert (again.unwrapped.desc == env.unwrapped.desc).all()
    assert (other.unwrapped.desc != env.unwrapped.desc).any()
    for kwargs, name in [({"size": 1}, "size"), ({"size": 2.5}, "size"), ({"map_seed": -1}, "map_seed"),
                         ({"p": 0.0}, "p"), ({"size": "abc"}, "size"), ({"map_seed": None}, "map_seed"),
                         ({"p": "abc"}, "p"), ({"p": 1.5}, "p")]:
        with pytest.raises(ValueError, match=f"^{name}: "):
            gymnasium.make("corrpriors/RandomFrozenLake-v0", **kwargs)
