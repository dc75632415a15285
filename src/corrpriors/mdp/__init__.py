"""Tabular MDPs: the model record, planners, rollouts and evaluation metrics."""

from .checks import check_distribution, check_mdp, check_policy, check_transitions
from .metrics import (
    emd,
    expected_return,
    grid_distances,
    hellinger,
    mean_hellinger,
    normalize_returns,
    normalized_return,
    return_range,
    value_loss,
)
from .planning import (
    FiniteHorizonResult,
    PlanningResult,
    boltzmann_policy,
    finite_horizon,
    goal_q_values,
    greedy_policy,
    normalize_q,
    policy_evaluation,
    policy_iteration,
    q_values,
    value_iteration,
)
from .rollout import Trajectories, sample_trajectories, state_action_counts, transition_counts
from .tabular import TabularMDP

__all__ = [
    "TabularMDP",
    "check_mdp",
    "check_policy",
    "check_distribution",
    "check_transitions",
    "PlanningResult",
    "FiniteHorizonResult",
    "q_values",
    "value_iteration",
    "policy_iteration",
    "policy_evaluation",
    "finite_horizon",
    "greedy_policy",
    "boltzmann_policy",
    "normalize_q",
    "goal_q_values",
    "Trajectories",
    "sample_trajectories",
    "state_action_counts",
    "transition_counts",
    "hellinger",
    "mean_hellinger",
    "value_loss",
    "expected_return",
    "normalized_return",
    "normalize_returns",
    "return_range",
    "emd",
    "grid_distances",
]
