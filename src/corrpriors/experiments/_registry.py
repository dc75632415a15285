"""Experiment names -> modules, imported lazily.

The five paper experiments live in their own modules (see the experiment protocol:
``NAME``, ``DESCRIPTION``, ``X_NAME``, ``METRICS``, ``PAPER_SEEDS``, ``QUICK_SEEDS``,
``Config``, ``quick_config``, ``x_values``, ``run_seed``, optional ``summarise_extra``
and ``plot``). A name whose module cannot be imported is reported as unavailable, with
the reason, instead of crashing the command.
"""

from __future__ import annotations

import importlib
import types
from typing import Union

#: The paper's experiments, in the order ``reproduce all`` runs them.
EXPERIMENTS: dict[str, str] = {
    "system-id": "corrpriors.experiments.system_id",
    "imitation": "corrpriors.experiments.imitation",
    "subgoal": "corrpriors.experiments.subgoal",
    "psrl-grid": "corrpriors.experiments.psrl_grid",
    "psrl-queueing": "corrpriors.experiments.psrl_queueing",
}

#: Extra experiments registered at run time (tests, user plug-ins): name -> module or path.
_EXTRA: dict[str, Union[str, types.ModuleType]] = {}

REQUIRED_ATTRIBUTES = (
    "NAME",
    "DESCRIPTION",
    "X_NAME",
    "METRICS",
    "PAPER_SEEDS",
    "QUICK_SEEDS",
    "Config",
    "quick_config",
    "x_values",
    "run_seed",
)


class ExperimentUnavailable(RuntimeError):
    """The experiment's module is missing, fails to import or breaks the protocol."""


def register(name: str, module: Union[str, types.ModuleType]) -> None:
    """Register an extra experiment under ``name`` (a module or its dotted import path).

    Used by the tests (a toy experiment) and by anyone plugging in their own
    experiment. Registering a name twice replaces the earlier entry; the paper's
    names cannot be overridden.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"name: expected a non-empty string, got {name!r}")
    if name in EXPERIMENTS or name == "all":
        raise ValueError(f"name: {name!r} is reserved for a paper experiment")
    if not isinstance(module, (str, types.ModuleType)):
        raise TypeError(f"module: expected a module or a dotted path, got {type(module).__name__}")
    _EXTRA[name] = module


def unregister(name: str) -> None:
    """Remove an experiment added with :func:`register` (no error if absent)."""
    _EXTRA.pop(name, None)


def experiment_names(include_extra: bool = True) -> list[str]:
    """All known experiment names: the paper's, then the registered extras."""
    names = list(EXPERIMENTS)
    if include_extra:
        names += [n for n in _EXTRA if n not in EXPERIMENTS]
    return names


def validate_module(module: types.ModuleType, name: str | None = None) -> None:
    """Raise :class:`ExperimentUnavailable` unless ``module`` follows the protocol."""
    missing = [a for a in REQUIRED_ATTRIBUTES if not hasattr(module, a)]
    if missing:
        raise ExperimentUnavailable(
            f"experiment module {module.__name__} lacks {', '.join(missing)} (see the experiment protocol)"
        )
    metrics = module.METRICS
    if not isinstance(metrics, dict) or not metrics:
        raise ExperimentUnavailable(f"{module.__name__}.METRICS: expected a non-empty dict")
    bad = {m: b for m, b in metrics.items() if b not in ("lower", "higher")}
    if bad:
        raise ExperimentUnavailable(
            f"{module.__name__}.METRICS: 'better' must be 'lower' or 'higher', got {bad}"
        )
    if name is not None and module.NAME != name:
        raise ExperimentUnavailable(
            f"{module.__name__}.NAME is {module.NAME!r} but it is registered as {name!r}"
        )


def get_experiment(name: str) -> types.ModuleType:
    """Import and return the module of experiment ``name``.

    Raises
    ------
    ValueError
        ``name`` is not a known experiment.
    ExperimentUnavailable
        The module does not exist (yet), fails to import, or breaks the protocol.
    """
    if name in _EXTRA:
        target = _EXTRA[name]
    elif name in EXPERIMENTS:
        target = EXPERIMENTS[name]
    else:
        raise ValueError(
            f"name: unknown experiment {name!r}; expected one of {', '.join(experiment_names())} or 'all'"
        )
    if isinstance(target, types.ModuleType):
        module = target
    else:
        try:
            module = importlib.import_module(target)
        except ModuleNotFoundError as exc:
            if exc.name == target:
                raise ExperimentUnavailable(f"{name}: not implemented (no module {target})") from None
            raise ExperimentUnavailable(f"{name}: {target} needs {exc.name!r}, which is missing ({exc})") from exc
        except Exception as exc:  # a broken module is reported, not fatal for `reproduce all`
            raise ExperimentUnavailable(
                f"{name}: importing {target} failed: {type(exc).__name__}: {exc}"
            ) from exc
    validate_module(module, name)
    return module


def available_experiments() -> dict[str, Union[types.ModuleType, str]]:
    """Map every known name to its module, or to the reason it is unavailable."""
    out: dict[str, Union[types.ModuleType, str]] = {}
    for name in experiment_names():
        try:
            out[name] = get_experiment(name)
        except ExperimentUnavailable as exc:
            out[name] = str(exc)
    return out


__all__ = [
    "EXPERIMENTS",
    "ExperimentUnavailable",
    "available_experiments",
    "experiment_names",
    "get_experiment",
    "register",
    "unregister",
    "validate_module",
]
