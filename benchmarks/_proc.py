"""Helpers shared by the benchmark scripts: the memory of the running process (one copy of the
reading) and the name of a run's output file (:func:`output_name`).

``peak_mb()`` is the peak resident memory (VmHWM) of this process. Not ``ru_maxrss``: Linux keeps
``ru_maxrss`` across the fork and exec that start a child, so a benchmark started from a large
parent (a test runner, another benchmark) would report the parent's peak. Run what is measured
in a fresh process and read this there.
"""

from __future__ import annotations

import argparse
import hashlib
import re
from collections.abc import Iterable
from pathlib import Path


def status_mb(field: str) -> float:
    """``field`` of ``/proc/self/status`` (``"VmHWM"``, ``"VmRSS"``) in MB; NaN where there is no ``/proc``."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return float(line.split()[1]) / 1024.0
    except OSError:  # pragma: no cover - not Linux
        pass
    return float("nan")


def peak_mb() -> float:
    """Peak resident memory of this process in MB (VmHWM)."""
    return status_mb("VmHWM")


#: Options that never change the results, so never part of an output file's name.
NOT_SETTINGS = frozenset({"help", "out", "jobs", "child", "verbose"})


def _default(action: argparse.Action) -> object:
    default = action.default
    if isinstance(default, str) and callable(action.type):  # argparse converts a str default
        try:
            return action.type(default)
        except (TypeError, ValueError):  # pragma: no cover - a default its own type refuses
            return default
    return default


def _fmt(value: object) -> str:
    if isinstance(value, (list, tuple)):
        return "+".join(_fmt(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return re.sub(r"[^A-Za-z0-9.+=]+", "+", str(value)).strip("+")


def output_name(stem: str, args: argparse.Namespace, parser: argparse.ArgumentParser, *,
                ignore: Iterable[str] = (), suffix: str = ".json", max_len: int = 120) -> str:
    """``stem`` plus every setting of ``args`` that differs from its default, then ``suffix``:
    ``bench_core-sizes3+4-quick.json``; all defaults give ``bench_core.json``. So a run never
    overwrites, or is mistaken for, another configuration's output.

    A flag that is set adds its name (``quick``), another option ``<name><value>`` (lists joined
    by ``+``). Options in :data:`NOT_SETTINGS` or ``ignore`` and hidden ones are left out. A name
    longer than ``max_len`` characters is cut and ends with a hash of the full one, so it stays
    distinct and within file-name limits.
    """
    skip = NOT_SETTINGS | set(ignore)
    parts = [stem]
    for action in parser._actions:
        dest = action.dest
        if dest in skip or action.help == argparse.SUPPRESS or not hasattr(args, dest):
            continue
        value = getattr(args, dest)
        if value == _default(action) or value is None or value == []:
            continue
        name = dest.replace("_", "")
        parts.append(name if value is True else f"{name}{_fmt(value)}")
    name = "-".join(parts)
    if len(name) > max_len:
        digest = hashlib.sha256(name.encode()).hexdigest()[:12]
        name = f"{name[:max_len - 13]}-{digest}"
    return name + suffix
