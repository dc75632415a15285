"""The paper's experiments and the runner behind ``corrpriors reproduce``.

Each experiment is a module (``system_id``, ``imitation``, ``subgoal``, ``psrl_grid``,
``psrl_queueing``) following the experiment protocol (:mod:`._protocol`: an
:class:`Experiment` returns one :class:`SeedResult` per seed), imported lazily through the
registry, so a missing or broken one does not stop the others. Adding an experiment is one
module implementing the protocol plus :func:`register`.

Examples
--------
>>> from corrpriors.experiments import run_experiment
>>> report = run_experiment("system-id", quick=True, out="results")  # doctest: +SKIP
"""

from __future__ import annotations

from ._io import ConfigMismatch, OutputError, RunLocked
from ._protocol import Claim, Experiment, ExperimentUnavailable, FigureSpec, SavedFigure, SeedResult
from ._registry import (
    EXPERIMENTS,
    available_experiments,
    experiment_names,
    get_experiment,
    register,
    unregister,
)
from ._runner import (
    BACKENDS,
    MAX_SEEDS,
    RunFailed,
    RunInterrupted,
    RunReport,
    run_experiment,
    seed_generator,
    summarise,
)

__all__ = [
    "BACKENDS",
    "Claim",
    "ConfigMismatch",
    "EXPERIMENTS",
    "Experiment",
    "ExperimentUnavailable",
    "FigureSpec",
    "MAX_SEEDS",
    "OutputError",
    "RunFailed",
    "RunInterrupted",
    "RunLocked",
    "RunReport",
    "SavedFigure",
    "SeedResult",
    "available_experiments",
    "experiment_names",
    "get_experiment",
    "register",
    "run_experiment",
    "seed_generator",
    "summarise",
    "unregister",
]
