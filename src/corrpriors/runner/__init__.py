"""The jobs behind the command line: experiment runs, the HTML report and fits from files.

* :mod:`.protocol` -- what an experiment is (:class:`Experiment`, :class:`SeedResult`,
  :class:`Claim`, :class:`FigureSpec`);
* :mod:`.registry` -- experiment names to experiments, imported lazily;
* :func:`run_experiment` -- seeds in parallel (loky, Dask or Ray), one file per seed (resume),
  a folder per configuration, ``metrics.json``, figures and ``warnings.log``;
* :mod:`.report` -- one self-contained HTML page of a results folder;
* :mod:`.fit` -- ``corrpriors fit``: a count table in, the fitted model's files out.

Only the command line (:mod:`corrpriors.cli`) and the experiments import this package.

Examples
--------
>>> from corrpriors.runner import run_experiment
>>> report = run_experiment("system-id", quick=True, out="results")  # doctest: +SKIP
"""

from __future__ import annotations

from ._io import ConfigMismatch, OutputError, RunLocked
from ._run import (
    BACKENDS,
    MAX_SEEDS,
    RunFailed,
    RunInterrupted,
    RunReport,
    run_experiment,
    seed_generator,
    summarise,
)
from .protocol import Claim, Experiment, ExperimentUnavailable, FigureSpec, SavedFigure, SeedResult
from .registry import (
    EXPERIMENTS,
    available_experiments,
    experiment_names,
    get_experiment,
    register,
    unregister,
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
