"""Decision-making applications built on the correlated multinomial model.

- imitation learning: :class:`PolicyEstimator` (policy posterior from demonstrations);
- subgoal inference: :class:`SubgoalPolicyEstimator`;
- system identification: transition beliefs (:class:`CorrelatedTransitionModel`,
  :class:`DirichletTransitionModel`) with category maps for relative encodings;
- posterior-sampling RL: :class:`PSRLAgent`, :func:`run_psrl`.
"""

from .imitation import PolicyEstimator, demonstration_counts, state_kernel
from .psrl import PSRLAgent, run_psrl
from .subgoals import (
    SubgoalPolicyEstimator,
    goal_action_probs,
    sample_categorical,
    subgoal_conditionals,
    subgoal_log_likelihoods,
)
from .transitions import (
    CategoryMap,
    CorrelatedTransitionModel,
    DirichletTransitionModel,
    KnownTransitionModel,
    TransitionBelief,
    TruncatedCategoryMap,
    displacement_category_map,
    identity_category_map,
    window_displacements,
)

__all__ = [
    "CategoryMap",
    "CorrelatedTransitionModel",
    "DirichletTransitionModel",
    "KnownTransitionModel",
    "PSRLAgent",
    "PolicyEstimator",
    "SubgoalPolicyEstimator",
    "TransitionBelief",
    "TruncatedCategoryMap",
    "demonstration_counts",
    "displacement_category_map",
    "goal_action_probs",
    "identity_category_map",
    "run_psrl",
    "sample_categorical",
    "state_kernel",
    "subgoal_conditionals",
    "subgoal_log_likelihoods",
    "window_displacements",
]
