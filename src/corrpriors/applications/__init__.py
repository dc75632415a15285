"""Decision-making applications built on the correlated multinomial model.

- imitation learning: :class:`PolicyEstimator` (policy posterior from demonstrations);
- subgoal inference: :class:`SubgoalPolicyEstimator`;
- system identification: transition beliefs (:class:`CorrelatedTransitionModel`,
  :class:`DirichletTransitionModel`) with category maps for relative encodings;
- posterior-sampling RL: :class:`PSRLAgent`, :func:`run_psrl`;
- transfer between related tasks: :class:`MultiTaskTransitionModel`,
  :class:`MultiTaskPolicyEstimator`.
"""

from .imitation import PolicyEstimator, demonstration_counts, state_kernel
from .multitask import MultiTaskPolicyEstimator, MultiTaskTransitionModel, TransferSearch
from .psrl import PSRLAgent, plan_sparse, run_psrl
from .subgoals import (
    SubgoalPolicyEstimator,
    goal_action_probs,
    sample_categorical,
    subgoal_conditionals,
    subgoal_log_likelihoods,
)
from .transitions import (
    BackgroundTransitions,
    CategoryMap,
    CorrelatedTransitionModel,
    DirichletTransitionModel,
    KnownTransitionModel,
    TransitionBelief,
    TruncatedCategoryMap,
    WindowCategoryMap,
    displacement_category_map,
    identity_category_map,
    window_category_map,
    window_displacements,
)

__all__ = [
    "CategoryMap",
    "CorrelatedTransitionModel",
    "DirichletTransitionModel",
    "KnownTransitionModel",
    "MultiTaskPolicyEstimator",
    "MultiTaskTransitionModel",
    "PSRLAgent",
    "PolicyEstimator",
    "BackgroundTransitions",
    "SubgoalPolicyEstimator",
    "TransferSearch",
    "TransitionBelief",
    "TruncatedCategoryMap",
    "WindowCategoryMap",
    "demonstration_counts",
    "displacement_category_map",
    "goal_action_probs",
    "identity_category_map",
    "plan_sparse",
    "run_psrl",
    "sample_categorical",
    "state_kernel",
    "subgoal_conditionals",
    "subgoal_log_likelihoods",
    "window_category_map",
    "window_displacements",
]
