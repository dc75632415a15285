"""Round 20 audit of the multi-task module and the task kernels: inputs that were accepted and
gave wrong or meaningless results, a reported scale no kept model had, an aliased belief, a raw
MemoryError, and options that were accepted but could have no effect."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from corrpriors.kernels import TaskCorrelation, kronecker_precision
from corrpriors.kernels.task import correlation_from_angles


# ------------------------------------------------------------------ kernels/task.py
@pytest.mark.parametrize("bad", [np.diag([4.0, 4.0]), np.array([[2.0, 1.0], [1.0, 2.0]]),
                                 np.array([[1.0, 0.5], [0.5, 1.5]])])
def test_kronecker_precision_refuses_a_non_unit_diagonal(bad):
    """diag [4, 4] and [[2, 1], [1, 2]] were accepted: a covariance, not a correlation (the
    prior's variance in every task would be B_tt times the model's scale)."""
    with pytest.raises(ValueError, match=r"^task_correlation: expected a correlation matrix \(unit diagonal\)"):
        kronecker_precision(bad, np.eye(3))
    # a diagonal within round-off of 1 is a correlation: B^-1 (x) Q
    B = np.array([[1.0 + 1e-12, 0.3], [0.3, 1.0]])
    np.testing.assert_allclose(kronecker_precision(B, np.eye(2)).toarray(),
                               np.kron(np.linalg.inv(B), np.eye(2)), atol=1e-12)


def test_kronecker_precision_refuses_no_tasks():
    """A 0 x 0 task correlation gave an empty (0, 0) precision."""
    with pytest.raises(ValueError, match=r"^task_correlation: expected a square \(T, T\) matrix with T >= 1"):
        kronecker_precision(np.zeros((0, 0)), np.eye(3))


@pytest.mark.parametrize("bad", [[4.0], [np.nan], [-0.1], [np.inf]])
def test_correlation_from_angles_refuses_angles_outside_0_pi(bad):
    """[4.0] gave a correlation of cos(4) = -0.65 (the angle 2 pi - 4's), [nan] a NaN matrix."""
    with pytest.raises(ValueError, match=r"^angles: expected values in \[0, pi\]"):
        correlation_from_angles(bad, 2)
    # the ends are the singular matrices angles_from_correlation gives
    np.testing.assert_allclose(correlation_from_angles([0.0], 2), np.ones((2, 2)))
    np.testing.assert_allclose(correlation_from_angles([np.pi], 2), [[1.0, -1.0], [-1.0, 1.0]])


@pytest.mark.parametrize("bad", [[True], ["1.0"], [np.bool_(True)]])
def test_task_correlation_refuses_bool_and_string_angles(bad):
    """angles=[True] was taken as 1 radian, ["1.0"] as 1.0."""
    with pytest.raises(TypeError, match="^angles: expected"):
        TaskCorrelation(2, angles=bad)
    assert TaskCorrelation(2, angles=[1.0]).correlation[0, 1] == pytest.approx(np.cos(1.0))


def test_from_correlation_warns_when_it_clips_into_the_bounds():
    """0.9999 became 0.99875 and -0.5 under bounds (0.05, pi/2) became 0, silently."""
    near_one = np.array([[1.0, 0.9999], [0.9999, 1.0]])
    with pytest.warns(UserWarning, match="^correlation: 1 of 1 angles lie outside angle_bounds"):
        k = TaskCorrelation.from_correlation(near_one)
    assert k.correlation[0, 1] == pytest.approx(np.cos(0.05))
    with pytest.warns(UserWarning, match="clipped"):
        TaskCorrelation.from_correlation(np.array([[1.0, -0.5], [-0.5, 1.0]]), angle_bounds=(0.05, np.pi / 2))
    with warnings.catch_warnings():   # inside the bounds, or fixed: exact and silent
        warnings.simplefilter("error")
        C = np.array([[1.0, 0.8, 0.3], [0.8, 1.0, -0.2], [0.3, -0.2, 1.0]])
        np.testing.assert_allclose(TaskCorrelation.from_correlation(C).correlation, C, atol=1e-12)
        fixed = TaskCorrelation.from_correlation(near_one, angle_bounds="fixed")
        np.testing.assert_allclose(fixed.correlation, near_one, atol=1e-12)
