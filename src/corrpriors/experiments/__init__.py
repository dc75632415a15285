"""The paper's experiments and the runner behind ``corrpriors reproduce``.

Each experiment is a module (``system_id``, ``imitation``, ``subgoal``, ``psrl_grid``,
``psrl_queueing``) imported lazily through the registry, so a missing or broken one
does not stop the others.

Examples
--------
>>> from corrpriors.experiments import run_experiment
>>> report = run_experiment("system-id", quick=True, out="results")  # doctest: +SKIP
"""

from __future__ import annotations

from ._registry import (
    EXPERIMENTS,
    ExperimentUnavailable,
    available_experiments,
    experiment_names,
    get_experiment,
    register,
    unregister,
)
from ._runner import BACKENDS, RunReport, run_experiment, seed_generator, summarise

__all__ = [
    "BACKENDS",
    "EXPERIMENTS",
    "ExperimentUnavailable",
    "RunReport",
    "available_experiments",
    "experiment_names",
    "get_experiment",
    "register",
    "run_experiment",
    "seed_generator",
    "summarise",
    "unregister",
]
