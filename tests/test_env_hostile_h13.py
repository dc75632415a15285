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
