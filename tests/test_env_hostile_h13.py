"""Hostile inputs to the environment builders (audit h13): each is refused with a message naming
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
