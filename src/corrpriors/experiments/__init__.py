"""The paper's experiments (and the Gymnasium studies behind ``corrpriors sysid`` / ``psrl``).

Each experiment is one module following the experiment protocol
(:mod:`corrpriors.runner.protocol`: an :class:`~corrpriors.runner.Experiment` returns one
:class:`~corrpriors.runner.SeedResult` per seed): ``system_id``, ``imitation``, ``subgoal``,
``psrl_grid``, ``psrl_queueing``, ``gym_sysid``, ``gym_psrl``, ``transfer``; the private modules hold what
several of them share. Adding an experiment is one module here plus its name in
:data:`corrpriors.runner.registry.EXPERIMENTS` (or :func:`corrpriors.runner.register`);
``corrpriors reproduce NAME`` then runs it.

The runner's names (``run_experiment``, ``SeedResult``, ``register``, ...) moved to
:mod:`corrpriors.runner`; importing them from here still works, with a ``DeprecationWarning``.
"""

from __future__ import annotations

from .._deprecation import moved

__getattr__, _dir = moved(__name__, "corrpriors.runner")

#: The experiment modules are imported by name (``corrpriors.experiments.system_id``, ...).
__all__: list[str] = []
