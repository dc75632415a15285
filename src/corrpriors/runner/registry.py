"""Experiment names -> experiments (modules or objects), imported lazily.

The five paper experiments live in their own modules, each following the experiment protocol
(:mod:`corrpriors.runner.protocol`). A name whose module cannot be imported is
reported as unavailable, with the reason, instead of crashing the command.
"""

from __future__ import annotations

import importlib
import types
from typing import Any, Union

from .protocol import REQUIRED_ATTRIBUTES, ExperimentUnavailable, validate_experiment

#: The paper's experiments, in the order ``reproduce all`` runs them.
EXPERIMENTS: dict[str, str] = {
    "system-id": "corrpriors.experiments.system_id",
    "imitation": "corrpriors.experiments.imitation",
    "subgoal": "corrpriors.experiments.subgoal",
    "psrl-grid": "corrpriors.experiments.psrl_grid",
    "psrl-queueing": "corrpriors.experiments.psrl_queueing",
    "transfer": "corrpriors.experiments.transfer",
}

#: Extra experiments registered at run time (tests, user plug-ins): name -> module, path or object.
_EXTRA: dict[str, Any] = {}


def register(name: str, experiment: Any) -> None:
    """Register an extra experiment under ``name``.

    ``experiment`` is a module, its dotted import path, or any object following the
    experiment protocol (e.g. one instance per Gymnasium environment). Registering a name
    twice replaces the earlier entry; the paper's names cannot be overridden.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"name: expected a non-empty string, got {name!r}")
    if name in EXPERIMENTS or name == "all":
        raise ValueError(f"name: {name!r} is reserved for a paper experiment")
    if isinstance(experiment, str) or isinstance(experiment, types.ModuleType):
        _EXTRA[name] = experiment
        return
    missing = [a for a in REQUIRED_ATTRIBUTES if not hasattr(experiment, a)]
    if missing:
        raise TypeError(
            f"experiment: expected a module, a dotted path or an object following the experiment "
            f"protocol; {type(experiment).__name__} lacks {', '.join(missing)}"
        )
    _EXTRA[name] = experiment


def unregister(name: str) -> None:
    """Remove an experiment added with :func:`register` (no error if absent)."""
    _EXTRA.pop(name, None)


#: Names a user may try with ``reproduce`` that are commands of their own (Gymnasium environments).
GYM_COMMANDS = {"sysid": "corrpriors sysid ENV_ID", "psrl": "corrpriors psrl ENV_ID"}


def unknown_name_hint(name: str) -> str:
    """What to say after "unknown experiment NAME", in parentheses: the close registered names
    and, for ``sysid`` or ``psrl``, the command that runs them on a Gymnasium environment ("" when
    neither fits).
    """
    import difflib

    hints = difflib.get_close_matches(str(name), experiment_names(), n=2)
    command = GYM_COMMANDS.get(str(name).strip().lower())
    if command is not None:
        hints.append(f"the command {command}, for a Gymnasium environment")
    return f" (did you mean {' or '.join(hints)}?)" if hints else ""


def experiment_names(include_extra: bool = True) -> list[str]:
    """All known experiment names: the paper's, then the registered extras."""
    names = list(EXPERIMENTS)
    if include_extra:
        names += [n for n in _EXTRA if n not in EXPERIMENTS]
    return names


def validate_module(module: Any, name: str | None = None) -> None:
    """Raise :class:`ExperimentUnavailable` unless ``module`` follows the protocol."""
    validate_experiment(module, name)


def get_experiment(name: str) -> Any:
    """Import and return the experiment registered as ``name``.

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
        hint = unknown_name_hint(name)
        raise ValueError(f"name: unknown experiment {name!r}{hint}; expected one of "
                         f"{', '.join(experiment_names())} or 'all'")
    if not isinstance(target, str):
        experiment = target
    else:
        try:
            experiment = importlib.import_module(target)
        except ModuleNotFoundError as exc:
            if exc.name == target:
                raise ExperimentUnavailable(f"{name}: not implemented (no module {target})") from None
            raise ExperimentUnavailable(f"{name}: {target} needs {exc.name!r}, which is missing ({exc})") from exc
        except Exception as exc:  # a broken module is reported, not fatal for `reproduce all`
            raise ExperimentUnavailable(
                f"{name}: importing {target} failed: {type(exc).__name__}: {exc}"
            ) from exc
    validate_experiment(experiment, name)
    return experiment


def available_experiments() -> dict[str, Union[Any, str]]:
    """Map every known name to its experiment, or to the reason it is unavailable."""
    out: dict[str, Any] = {}
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
    "unknown_name_hint",
    "unregister",
    "validate_module",
]
