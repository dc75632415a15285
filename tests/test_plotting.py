"""Plots render headless, write files, and draw what they claim."""

import numpy as np
import pytest

from corrpriors.envs import ACTION_VECTORS, dense_gridworld, queueing_network, wall_world
from corrpriors.mdp import hellinger, value_iteration
from corrpriors.plotting import (
    GridLayout,
    plot_error_map,
    plot_policy,
    plot_queueing_policy,
    plot_queueing_states,
    plot_state_values,
    policy_arrows,
    save_figure,
)
from corrpriors.plotting._policy import DATA_GREY, REWARD_GREEN


@pytest.fixture(scope="module")
def wall():
    return wall_world()


def test_policy_arrows():
    pi = np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0.25] * 4, [0.5, 0.5, 0, 0]])
    np.testing.assert_allclose(policy_arrows(pi, ACTION_VECTORS), [[-1, 0], [0, 1], [0, 0], [-0.5, 0.5]])
    with pytest.raises(ValueError, match="policy"):
        policy_arrows(np.ones((3, 2)) / 2, ACTION_VECTORS)
    with pytest.raises(ValueError, match="action_vectors"):
        policy_arrows(pi, np.ones((4, 3)))


def test_plot_policy_takes_action_vectors_as_data(wall):
    """The plot draws whatever moves it is given: reversed vectors reverse every arrow, and a
    layout without action vectors is refused by name (plotting knows no world)."""
    pi = np.zeros((wall.n_states, 4))
    pi[:, 1] = 1.0                              # always action 1 (right in the grid worlds)
    layout = GridLayout(walls=wall.walls, cells=wall.cells)
    _, ax = plot_policy(layout, pi, action_vectors=ACTION_VECTORS)
    u_right = ax.collections[-1].U.copy()
    _, ax = plot_policy(layout, pi, action_vectors=-ACTION_VECTORS)
    np.testing.assert_allclose(ax.collections[-1].U, -u_right)
    assert np.all(u_right > 0)
    _, ax = plot_policy(wall, pi)                # the MDP carries its action vectors
    np.testing.assert_allclose(ax.collections[-1].U, u_right)
    with pytest.raises(ValueError, match="action_vectors"):
        plot_policy(layout, pi)


def test_plot_policy_layers_and_arrows(tmp_path, wall):
    S = wall.n_states
    pi = np.zeros((S, 4))
    pi[:, 1] = 1.0                      # everyone goes right
    data = np.zeros(S, dtype=bool)
    data[0] = True
    fig, ax = plot_policy(wall, pi, data_states=data, title="t")
    img = np.asarray(ax.images[0].get_array())
    assert img.shape == (11, 11, 3)
    np.testing.assert_allclose(img[0, 3], 0.0)                 # wall cell is black
    np.testing.assert_allclose(img[1, 1], REWARD_GREEN)        # reward state 10 = cell (1, 1)
    np.testing.assert_allclose(img[0, 0], DATA_GREY)           # state 0 has data
    np.testing.assert_allclose(img[5, 5], 1.0)                 # plain cell is white
    quiver = ax.collections[0]
    np.testing.assert_allclose(quiver.U, 1.0)                  # rightwards on screen
    np.testing.assert_allclose(quiver.V, 0.0)
    assert quiver.N == S
    paths = save_figure(fig, tmp_path / "sub" / "policy")
    assert [p.suffix for p in paths] == [".png", ".pdf"]
    assert all(p.exists() and p.stat().st_size > 1000 for p in paths)


def test_plot_policy_up_is_drawn_upwards(wall):
    pi = np.zeros((wall.n_states, 4))
    pi[:, 0] = 1.0
    _, ax = plot_policy(wall, pi)
    q = ax.collections[0]
    np.testing.assert_allclose(q.V, 1.0)        # screen-up for action "up" (row - 1)
    assert ax.get_ylim()[0] > ax.get_ylim()[1]  # row 0 at the top


def test_plot_policy_error_colours(tmp_path, wall):
    expert = value_iteration(wall).policy
    unif = np.full_like(expert, 0.25)
    err = hellinger(expert, unif)
    fig, ax = plot_policy(wall, unif, errors=err, colorbar=True, reward_states=np.zeros(wall.n_states))
    img = np.asarray(ax.images[0].get_array())
    worst = wall.cells[np.argmax(err)]
    best = wall.cells[np.argmin(err)]
    # darker red (lower green channel) where the error is larger
    assert img[worst[0], worst[1], 1] < img[best[0], best[1], 1]
    assert not ax.collections            # uniform policy: zero arrows are not drawn
    save_figure(fig, tmp_path / "err", formats=("png",))
    assert (tmp_path / "err.png").stat().st_size > 0


def test_heat_maps(tmp_path, wall):
    V = value_iteration(wall).values
    fig, ax = plot_state_values(wall, V, label="V")
    arr = ax.images[0].get_array()
    assert arr.shape == (11, 11) and arr.mask[0, 3] and not arr.mask[0, 0]
    assert arr[1, 1] == pytest.approx(V[10])
    save_figure(fig, tmp_path / "values")
    assert (tmp_path / "values.png").stat().st_size > 0
    fig, ax = plot_error_map(dense_gridworld(), np.linspace(0, 1, 100))
    assert ax.images[0].get_clim() == (0.0, 1.0)


def test_queueing_image(tmp_path):
    q = queueing_network()
    res = value_iteration(q)
    fig, ax = plot_queueing_states(q, res.values, label="V")
    arr = ax.images[0].get_array()
    assert arr.shape == (11, 11)
    assert arr[3, 7] == pytest.approx(res.values[np.ravel_multi_index((3, 7), (11, 11))])
    assert ax.get_ylim()[0] < ax.get_ylim()[1]   # b1 increases upwards
    fig2, ax2 = plot_queueing_policy(q, res.policy)
    save_figure(fig2, tmp_path / "queue_policy")
    assert (tmp_path / "queue_policy.png").stat().st_size > 0
    with pytest.raises(ValueError, match="policy"):
        plot_queueing_policy(q, np.ones((121, 3)) / 3)


def test_bad_inputs(wall):
    with pytest.raises(ValueError, match="values"):
        plot_state_values(wall, np.zeros(5))
    with pytest.raises(ValueError, match="errors"):
        plot_policy(wall, np.full((wall.n_states, 4), 0.25), errors=np.zeros(3))


def test_draws_into_given_axes():
    from matplotlib.figure import Figure

    fig = Figure()
    axs = fig.subplots(1, 2)
    m = dense_gridworld(shape=(4, 5))
    f, a = plot_policy(m, np.full((20, 4), 0.25), axs[1])
    assert f is fig and a is axs[1]


def test_grid_layout_matches_the_mdp_and_draws_the_same(wall):
    from corrpriors.plotting import GridLayout

    layout = GridLayout.from_walls(wall.walls, action_vectors=ACTION_VECTORS)
    np.testing.assert_array_equal(layout.cells, wall.cells)
    assert layout.shape == wall.shape and layout.n_states == wall.n_states
    values = np.arange(wall.n_states, dtype=float)
    np.testing.assert_array_equal(layout.state_grid(values), wall.state_grid(values))
    pi = np.full((wall.n_states, 4), 0.25)
    pi[:, 2] = 0.7
    pi /= pi.sum(1, keepdims=True)
    rewards = wall.rewards > 0
    _, a = plot_policy(wall, pi, reward_states=rewards)
    _, b = plot_policy(layout, pi, reward_states=rewards)
    np.testing.assert_array_equal(a.images[0].get_array(), b.images[0].get_array())
    np.testing.assert_array_equal(a.collections[0].U, b.collections[0].U)
    with pytest.raises(ValueError, match="cells"):
        GridLayout(walls=np.zeros((2, 2), bool), cells=np.array([[0, 0], [2, 0]]))


def test_plotting_builds_no_environment_and_draws_no_random_numbers():
    """Plotting takes data: no environment builders, no generators, no fixed seeds."""
    import pathlib
    import re

    import corrpriors.plotting

    for path in pathlib.Path(corrpriors.plotting.__file__).parent.glob("*.py"):
        text = path.read_text()
        assert not re.search(r"rng\s*=|default_rng|np\.random|random_state", text), path.name
        assert not re.search(r"\b(wall_world|goal_gridworld|tunnel_world|queueing_network|dense_gridworld)\(",
                             text), path.name
        assert "import matplotlib.pyplot" not in text, path.name   # plain Figures, no global pyplot state
