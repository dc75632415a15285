"""Tabular MDPs: the model record, planners, rollouts and evaluation metrics.

Transition tables are dense (S, A, S) arrays or, for large state spaces,
:class:`SparseTransitions` (a CSR matrix of shape (S·A, S), row ``s * A + a``); every
planner, rollout and metric here accepts both.
"""

from ._sparse import (
    DENSE_LIMIT_BYTES,
    SparseTransitionRewards,
    SparseTransitions,
    dense_nbytes,
    prefer_sparse,
)
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
    TransitionOperator,
    boltzmann_policy,
    finite_horizon,
    goal_q_values,
    greedy_policy,
    normalize_q,
    policy_evaluation,
    policy_iteration,
    policy_iteration_operator,
    q_values,
    value_iteration,
)
from .rollout import (
    NextStateSampler,
    Trajectories,
    sample_trajectories,
    state_action_counts,
    transition_counts,
)
from .tabular import TabularMDP

__all__ = [
    "TabularMDP",
    "SparseTransitions",
    "SparseTransitionRewards",
    "DENSE_LIMIT_BYTES",
    "prefer_sparse",
    "dense_nbytes",
    "NextStateSampler",
    "check_mdp",
    "check_policy",
    "check_distribution",
    "check_transitions",
    "PlanningResult",
    "FiniteHorizonResult",
    "q_values",
    "value_iteration",
    "policy_iteration",
    "policy_iteration_operator",
    "TransitionOperator",
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
