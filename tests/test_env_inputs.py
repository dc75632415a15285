"""Hostile inputs to the environment builders (round 18 audit): each is refused with a message naming
the argument, instead of an invalid table, a truncation, a MemoryError or a hang.
"""

import numpy as np
import pytest

from corrpriors.envs.gridworld import cardinal_kernels, transitions_from_kernels


@pytest.mark.parametrize("kernels, match", [
    (np.zeros((4, 3, 3)), "sums to 0"),
    (-np.ones((4, 3, 3)), "non-negative"),
    (np.full((4, 3, 3), np.nan), "finite"),
    (np.full((4, 3, 3), np.inf), "finite"),
    (2 * cardinal_kernels(), "sums to 2"),
    (np.zeros((0, 3, 3)), "at least one action"),
])
def test_transitions_from_kernels_refuses_non_probability_kernels(kernels, match):
    with pytest.raises(ValueError, match=f"kernels: .*{match}"):
        transitions_from_kernels(kernels, (4, 4))


def test_transitions_from_kernels_still_builds_valid_tables():
    P = transitions_from_kernels(cardinal_kernels(0.7), (4, 4))
    np.testing.assert_allclose(P.sum(axis=-1), 1.0)


@pytest.mark.parametrize("states, actions, match", [
    ([1.5], [0], "states: expected integer indices"),
    ([1.0], [0], "states: expected integer indices"),
    ([True], [0], "states: expected integer indices, got dtype bool"),
    ([99], [0], r"states: expected indices in \[0, S\) = \[0, 16\)"),
    ([-1], [0], "states: expected indices in"),
    ([1], [9], r"actions: expected indices in \[0, A\) = \[0, 2\)"),
    ([1], [0.0], "actions: expected integer indices"),
    ([1], [False], "actions: expected integer indices, got dtype bool"),
    ([0, 1], [0], "states, actions: expected arrays of the same shape"),
    (["a"], [0], "states: expected a numeric array"),
])
def test_simulate_queueing_refuses_bad_indices(states, actions, match):
    from corrpriors.envs.queueing import simulate_queueing

    with pytest.raises((ValueError, TypeError), match=match):
        simulate_queueing(states, actions, rng=0, buffers=(3, 3))


def test_simulate_queueing_valid_indices():
    from corrpriors.envs.queueing import simulate_queueing

    out = simulate_queueing(np.array([0, 5, 15], dtype=np.uint8), [0, 1, 1], rng=0, buffers=(3, 3))
    assert out.shape == (3,) and ((out >= 0) & (out < 16)).all()
    assert simulate_queueing([], [], rng=0, buffers=(3, 3)).shape == (0,)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"step_size": np.nan}, ValueError, "step_size"),
    ({"step_size": 0.0}, ValueError, "step_size"),
    ({"step_size": -1.0}, ValueError, "step_size"),
    ({"step_size": 1e300}, ValueError, "step_size"),
    ({"step_size": True}, TypeError, "step_size"),
    ({"window": 2.5}, ValueError, "window"),
    ({"window": "2"}, ValueError, "window"),
    ({"window": True}, ValueError, "window"),
    ({"window": 10**9}, ValueError, "window: the Gaussian kernels"),
    ({"step_spread": True}, TypeError, "step_spread"),
    ({"step_spread": "1"}, TypeError, "step_spread"),
])
def test_gaussian_kernels_refuses_bad_parameters(kwargs, error, match):
    from corrpriors.envs.gridworld import gaussian_kernels

    with pytest.raises(error, match=match):
        gaussian_kernels(**kwargs)


@pytest.mark.parametrize("window", [2.5, "2", True])
def test_dense_gridworld_refuses_coerced_window(window):
    from corrpriors.envs.gridworld import dense_gridworld

    with pytest.raises(ValueError, match="window"):
        dense_gridworld((4, 4), window=window)


@pytest.mark.parametrize("spread", [1e300, 1e-300])
def test_extreme_step_spreads_give_valid_kernels(spread, recwarn):
    import warnings

    from corrpriors.envs.gridworld import dense_gridworld, gaussian_kernels

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        K = gaussian_kernels(spread, 2)
        mdp = dense_gridworld((4, 4), step_spread=spread, window=2)
    assert np.isfinite(K).all()
    np.testing.assert_allclose(K.sum(axis=(1, 2)), 1.0)
    if spread < 1:       # a point mass one cell away
        assert K[1, 2, 3] == 1.0
    else:                # uniform over the window
        np.testing.assert_allclose(K, 1.0 / 25)
    np.testing.assert_allclose(np.asarray(mdp.transitions).sum(axis=-1), 1.0)


def test_gaussian_kernels_default_values_unchanged():
    from corrpriors.envs.gridworld import gaussian_kernels

    off = np.arange(-3, 4.0)
    dr, dc = np.meshgrid(off, off, indexing="ij")
    k = np.exp(-0.5 * ((dr - 0) ** 2 + (dc - 1) ** 2) / 0.6 ** 2)
    np.testing.assert_array_equal(gaussian_kernels(0.6, 3)[1], k / k.sum())


def _call(name, *args, **kwargs):
    import corrpriors.envs as E
    from corrpriors.envs import queueing, task_family

    f = getattr(E, name, None) or getattr(task_family, name, None) or getattr(queueing, name)
    return f(*args, **kwargs)


@pytest.mark.parametrize("name, args, kwargs, match", [
    ("windy_gridworld", ((4, 4),), {"goal": (1.5, 1)}, "goal"),
    ("tunnel_world", ((4, 4),), {"start": (True, False)}, "start"),
    ("random_mdp", (5, 2, 2), {"rng": 0, "discount": "0.9"}, "discount"),
    ("random_mdp", (5, 2, 2), {"rng": 0, "discount": False}, "discount"),
    ("deep_sea", (4,), {"rng": 0, "deterministic": "no"}, "deterministic"),
    ("deep_sea", (4,), {"rng": 0, "walls": 1}, "walls"),
    ("goal_gridworld", ((4, 4), True), {"rng": 0}, "n_rewards"),
    ("goal_gridworld", ((4, 4),), {"rng": 0, "success_prob": True}, "success_prob"),
    ("goal_gridworld", ((4, 4),), {"rng": 0, "success_prob": "1"}, "success_prob"),
    ("slippery_lake", ((4, 4),), {"slip": True}, "slip"),
    ("windy_gridworld", ((4, 4),), {"drive": True}, "drive"),
    ("windy_gridworld", ((4, 4),), {"damping": True}, "damping"),
    ("smooth_wind", ((4, 4),), {"rng": 0, "amplitude": True}, "amplitude"),
    ("smooth_wind", ((4, 4),), {"rng": 0, "lengthscale": True}, "lengthscale"),
    ("queueing_network", ((True, 3),), {}, "buffers"),
])
def test_env_parameters_are_not_coerced(name, args, kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        _call(name, *args, **kwargs)


@pytest.mark.parametrize("name, args, kwargs, match", [
    ("smooth_wind", ((10**6, 10**6),), {"rng": 0}, "shape"),
    ("windy_task_family", (0.5, 1), {"rng": 0, "shape": (10**6, 10**6)}, "shape"),
    ("random_mdp", (10**6,), {"rng": 0}, "n_states"),
    ("deep_sea", (10**6,), {"rng": 0}, "size"),
])
def test_huge_sizes_are_refused_up_front(name, args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        _call(name, *args, **kwargs)


@pytest.mark.parametrize("build", ["tunnel_world", "goal_gridworld", "wall_world", "slippery_lake",
                                   "windy_gridworld", "dense_gridworld"])
def test_a_grid_too_large_for_memory_is_refused_naming_shape(build):
    """A 10^6 x 10^6 grid (10^12 states) was a numpy MemoryError, or a hang, inside the builder."""
    import inspect
    import time

    import corrpriors.envs as envs

    builder = getattr(envs, build)
    extra = {"rng": 0} if "rng" in inspect.signature(builder).parameters else {}
    tic = time.perf_counter()
    with pytest.raises(ValueError, match=r"^shape: a 1000000 x 1000000 grid \(1,000,000,000,000 states\)"):
        builder((10**6, 10**6), **extra)
    assert time.perf_counter() - tic < 1.0


def test_relabel_states_checks_its_arguments_by_name():
    """A float permutation was an IndexError, a non-MDP an AttributeError."""
    from corrpriors.envs import tunnel_world
    from corrpriors.envs.task_family import relabel_states

    mdp = tunnel_world((2, 3))
    with pytest.raises(ValueError, match="^permutation: expected integers"):
        relabel_states(mdp, np.arange(6, dtype=float))
    with pytest.raises(ValueError, match="^permutation: expected integers"):
        relabel_states(mdp, np.ones(6, dtype=bool))
    with pytest.raises(TypeError, match="^mdp: expected a TabularMDP"):
        relabel_states("x", [0])
    moved = relabel_states(mdp, np.arange(6)[::-1])
    np.testing.assert_array_equal(np.asarray(moved.transitions)[::-1][:, :, ::-1], np.asarray(mdp.transitions))


def test_smooth_wind_at_extreme_lengthscales_is_the_limit_field():
    """lengthscale 1e300 raised OverflowError (l ** 2), 1e-300 divided by zero: they are the
    limits, one constant field and independent cells; ordinary ones are bit for bit as before."""
    from corrpriors.envs.task_family import smooth_wind

    const = smooth_wind((3, 4), rng=0, lengthscale=1e300)
    assert np.all(np.isfinite(const)) and np.allclose(const, const[0])
    iid = smooth_wind((3, 4), rng=0, lengthscale=1e-300)
    assert np.all(np.isfinite(iid)) and np.unique(iid[:, 0]).size == 12
    cells = np.array([(r, c) for r in range(3) for c in range(4)], dtype=float)
    d2 = ((cells[:, None] - cells[None]) ** 2).sum(-1)
    w, V = np.linalg.eigh(np.exp(-d2 / 3.0 ** 2))     # the old construction, transcribed
    old = 0.5 * ((V * np.sqrt(np.clip(w, 0.0, None))) @ np.random.default_rng(0).standard_normal((12, 2)))
    np.testing.assert_array_equal(smooth_wind((3, 4), rng=0), old)


@pytest.mark.parametrize("rate", [True, "1", float("nan"), -1.0])
def test_queueing_rates_are_numbers(rate):
    """True and '1' were taken as the rate 1."""
    from corrpriors.envs import queueing_network

    with pytest.raises((TypeError, ValueError), match="^arrival_rate: expected a finite non-negative rate"):
        queueing_network((3, 3), arrival_rate=rate)
