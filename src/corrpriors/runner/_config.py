"""An experiment's configuration: its identity (a short hash), its label and ``--set`` overrides.

A run's results live in ``DIR/NAME/<label>-<hash>/`` where ``<hash>`` is the first
:data:`HASH_LENGTH` hex digits of the SHA-256 of the experiment name and the configuration
(as canonical JSON) and ``<label>`` is ``paper`` (the experiment's ``Config()``), ``quick``
(its ``quick_config()``) or ``custom``. So two configurations never share a folder, and the
folder name says which settings produced it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import typing
from collections.abc import Mapping
from typing import Any

from ._io import config_to_json
from ._ranges import number_from_text

#: Hex digits of the configuration hash in folder names (40 bits).
HASH_LENGTH = 10


def config_hash(name: str, config_json: Mapping, revision: int = 0) -> str:
    """Short hash of experiment ``name``, its JSON config (order of keys does not matter) and its
    results ``revision`` (:func:`results_revision`; 0 leaves the hash as it was before revisions).
    """
    record: dict[str, Any] = {"experiment": name, "config": config_json}
    if revision:
        record["revision"] = int(revision)
    text = json.dumps(record, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:HASH_LENGTH]


def results_revision(experiment: Any) -> int:
    """The experiment's ``RESULTS_REVISION`` (0 if it has none).

    A change of the code that changes a configuration's numbers (not its settings) raises it, so
    that the configuration's results go to a new folder and no seed computed by the old code is
    read back as if the new code had computed it (the seed files are matched by configuration).
    """
    return int(getattr(experiment, "RESULTS_REVISION", 0))


def settings_label(experiment: Any, config: Any) -> str:
    """Label a configuration ``"paper"`` (``Config()``), ``"quick"`` (``quick_config()``) or ``"custom"``.

    An experiment whose defaults are not the paper's names them by ``DEFAULT_LABEL`` (optional).
    """
    if config == experiment.Config():
        return default_label(experiment)
    if config == experiment.quick_config():
        return "quick"
    return "custom"


def default_label(experiment: Any) -> str:
    """Return the label of an experiment's ``Config()``: its ``DEFAULT_LABEL``, else ``"paper"``."""
    label = getattr(experiment, "DEFAULT_LABEL", "paper")
    return label if isinstance(label, str) and label else "paper"


def full_scale_status(label: str) -> str:
    """The claims status of a run at ``label`` (the default) settings with the full seed count.

    ``"paper-scale"`` for the paper's settings, ``"full-scale (<label> settings)"`` for an
    experiment whose defaults are not the paper's (``DEFAULT_LABEL``).
    """
    return "paper-scale" if label == "paper" else f"full-scale ({label} settings)"


def is_full_scale(status: str | None) -> bool:
    """Whether a recorded claims status is a verdict (not indicative); ``None`` (an older record) counts."""
    return status is None or status == "paper-scale" or status.startswith("full-scale")


def run_folder_name(experiment: Any, config: Any) -> str:
    """``<label>-<hash>``: the folder of this configuration's results under ``DIR/NAME``."""
    digest = config_hash(experiment.NAME, config_to_json(config), results_revision(experiment))
    return f"{settings_label(experiment, config)}-{digest}"


def parse_assignments(items: list[str] | None) -> dict[str, str]:
    """``["a=1", "b=x,y"]`` -> ``{"a": "1", "b": "x,y"}``; each item must be ``KEY=VALUE``."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"--set: expected KEY=VALUE, got {item!r}")
        if key in out:
            raise ValueError(f"--set: {key} is given twice")
        out[key] = value.strip()
    return out


_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def _parse_scalar(kind: type, value: Any, where: str) -> Any:
    """``value`` (a string from the command line, or a Python value) as a ``kind``."""
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in _TRUE | _FALSE:
            return value.lower() in _TRUE
        raise ValueError(f"{where}: expected a boolean (true/false), got {value!r}")
    if kind is int:
        if isinstance(value, bool):
            raise ValueError(f"{where}: expected an integer, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, str):
            try:
                return number_from_text(value, int)   # ASCII digits only: int() reads "٣" and "1_0"
            except ValueError as exc:
                raise ValueError(f"{where}: {exc}, got {value!r}") from None
        raise ValueError(f"{where}: expected an integer, got {value!r}")
    if kind is float:
        if isinstance(value, bool):
            raise ValueError(f"{where}: expected a number, got {value!r}")
        try:
            number = number_from_text(value, float) if isinstance(value, str) else float(value)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc if isinstance(value, str) else 'expected a number'}, "
                             f"got {value!r}") from None
        except TypeError:
            raise ValueError(f"{where}: expected a number, got {value!r}") from None
        if not math.isfinite(number):
            raise ValueError(f"{where}: expected a finite number, got {value!r}")
        return number
    if kind is str:
        if isinstance(value, str):
            return value
        raise ValueError(f"{where}: expected a string, got {value!r}")
    raise ValueError(f"{where}: a field of type {kind.__name__} cannot be set this way")


def _element_kind(*defaults: Any) -> type | None:
    """Return the element type of a tuple field, from its default values (None if they are all empty)."""
    items = [v for d in defaults if isinstance(d, tuple) for v in d]
    if not items:
        return None
    if all(isinstance(v, str) for v in items):
        return str
    if all(isinstance(v, bool) for v in items):
        return bool
    if all(isinstance(v, int) and not isinstance(v, bool) for v in items):
        return int
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items):
        return float
    return None


def _parse_tuple(value: Any, kind: type | None, where: str) -> tuple:
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in "[(" and text[-1:] in "])":
            text = text[1:-1]
        parts = [p.strip() for p in text.split(",")] if text.strip() else []
        if any(p == "" for p in parts):
            raise ValueError(f"{where}: expected comma-separated values, got {value!r}")
    elif isinstance(value, (list, tuple)):
        parts = list(value)
    else:
        raise ValueError(f"{where}: expected comma-separated values, got {value!r}")
    if kind is None:  # no default to learn from: numbers where possible, else strings
        out = []
        for p in parts:
            try:
                out.append(_parse_scalar(int, p, where))
            except ValueError:
                try:
                    out.append(_parse_scalar(float, p, where))
                except ValueError:
                    out.append(p if isinstance(p, str) else _parse_scalar(str, p, where))
        return tuple(out)
    return tuple(_parse_scalar(kind, p, f"{where} (element {i})") for i, p in enumerate(parts))


def apply_overrides(experiment: Any, base: Any, overrides: Mapping[str, Any] | None) -> tuple[Any, dict]:
    """Return ``(config, parsed)``: ``base`` with the fields in ``overrides`` replaced.

    Parameters
    ----------
    experiment : Experiment
        Its ``Config`` gives the fields and their types.
    base : Config
        The starting configuration (``Config()`` or ``quick_config()``).
    overrides : mapping of str to str or value
        Field name -> new value; strings (from ``--set key=value``) are parsed by the field's
        type: ``int``, ``float`` (finite), ``bool`` (true/false/yes/no/on/off/1/0), ``str``,
        ``tuple`` (comma-separated, elements typed like the default's).

    Returns
    -------
    config : Config
    parsed : dict
        The parsed values (recorded in ``metrics.json``).

    Raises
    ------
    ValueError
        An unknown field or a value that does not fit the field's type.
    """
    if not overrides:
        return base, {}
    cls = experiment.Config
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # unresolvable annotations: fall back to the defaults' types
        hints = {}
    parsed: dict[str, Any] = {}
    for key, value in overrides.items():
        if key not in fields:
            raise ValueError(
                f"{key}: not a Config field of experiment {experiment.NAME}; "
                f"fields: {', '.join(sorted(fields))}"
            )
        where = f"{key}={value}" if isinstance(value, str) else f"{key}={value!r}"
        where = f"{where} ({experiment.NAME}: Config.{key})"
        current = getattr(base, key)
        kind = hints.get(key, type(current))
        origin = typing.get_origin(kind) or kind
        if origin is tuple or isinstance(current, tuple):
            parsed[key] = _parse_tuple(value, _element_kind(current, getattr(cls(), key)), where)
        elif kind in (bool, int, float, str):
            parsed[key] = _parse_scalar(kind, value, where)
        else:
            raise ValueError(f"{where}: fields of type {kind} cannot be set with --set")
    config = dataclasses.replace(base, **parsed)
    return config, parsed


__all__ = [
    "HASH_LENGTH",
    "apply_overrides",
    "config_hash",
    "results_revision",
    "default_label",
    "parse_assignments",
    "run_folder_name",
    "settings_label",
]
