"""The paper's environments as :class:`~corrpriors.mdp.TabularMDP` builders and Gymnasium envs.

Importing this package registers ``corrpriors/DenseGridworld-v0``,
``corrpriors/TunnelWorld-v0``, ``corrpriors/GoalGridworld-v0``, ``corrpriors/WallWorld-v0``
and ``corrpriors/QueueingNetwork-v0`` with Gymnasium. Without importing it first, use
``gymnasium.make("corrpriors.envs:corrpriors/TunnelWorld-v0")``.
"""

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

register_envs()

__all__ = [
    "ACTION_NAMES",
    "ACTION_VECTORS",
    "dense_gridworld",
    "tunnel_world",
    "goal_gridworld",
    "wall_world",
    "default_walls",
    "queueing_network",
    "queueing_transitions",
    "simulate_queueing",
    "gaussian_kernels",
    "cardinal_kernels",
    "transitions_from_kernels",
    "TabularEnv",
    "register_envs",
    "ENV_IDS",
]
