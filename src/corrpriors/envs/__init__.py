"""The paper's environments as :class:`~corrpriors.mdp.TabularMDP` builders and Gymnasium envs.

Any other discrete Gymnasium environment becomes a :class:`~corrpriors.mdp.TabularMDP` with
:func:`from_gymnasium` (exact model, terminal states, start distribution, coordinates), or,
without a published model, is described for the beliefs by :func:`env_info`.

Importing this package registers ``corrpriors/DenseGridworld-v0``,
``corrpriors/TunnelWorld-v0``, ``corrpriors/GoalGridworld-v0``, ``corrpriors/WallWorld-v0``,
``corrpriors/QueueingNetwork-v0``, ``corrpriors/DeepSea-v0`` (bsuite's deep-exploration
benchmark, :func:`deep_sea`) and ``corrpriors/RandomMDP-v0`` (no structure, :func:`random_mdp`)
with Gymnasium. Without importing it first, use
``gymnasium.make("corrpriors.envs:corrpriors/TunnelWorld-v0")``.
"""

from .adapter import (
    DiscreteTupleObservation,
    EnvInfo,
    EnvTransitions,
    discrete_observations,
    env_info,
    from_gymnasium,
    random_exploration,
    reachable_states,
)
from .deepsea import DeepSeaEnv, deep_sea, deep_sea_right_actions
from .gridworld import (
    ACTION_NAMES,
    ACTION_VECTORS,
    cardinal_kernels,
    default_walls,
    dense_gridworld,
    gaussian_kernels,
    goal_gridworld,
    transitions_from_kernels,
    tunnel_world,
    wall_world,
)
from .gym import ENV_IDS, TabularEnv, register_envs
from .queueing import queueing_network, queueing_transitions, simulate_queueing
from .task_family import (
    LakeParameters,
    TaskParameters,
    lake_task_family,
    relabel_states,
    slippery_lake,
    smooth_wind,
    windy_gridworld,
    windy_task_family,
)
from .unstructured import RandomMDPEnv, random_mdp, state_index

register_envs()

__all__ = [
    "from_gymnasium",
    "env_info",
    "discrete_observations",
    "DiscreteTupleObservation",
    "EnvInfo",
    "EnvTransitions",
    "random_exploration",
    "reachable_states",
    "ACTION_NAMES",
    "ACTION_VECTORS",
    "dense_gridworld",
    "tunnel_world",
    "goal_gridworld",
    "wall_world",
    "windy_gridworld",
    "windy_task_family",
    "slippery_lake",
    "lake_task_family",
    "LakeParameters",
    "relabel_states",
    "smooth_wind",
    "TaskParameters",
    "default_walls",
    "queueing_network",
    "queueing_transitions",
    "simulate_queueing",
    "gaussian_kernels",
    "cardinal_kernels",
    "transitions_from_kernels",
    "TabularEnv",
    "DeepSeaEnv",
    "deep_sea",
    "deep_sea_right_actions",
    "RandomMDPEnv",
    "random_mdp",
    "state_index",
    "register_envs",
    "ENV_IDS",
]
