"""Saving and loading experiment results: one ``.npz`` + ``.json`` pair per seed, ``metrics.json``.

Layout under the output directory ``DIR``::

    DIR/NAME/seeds/seed-<k>.npz    # the arrays returned by run_seed (no pickle)
    DIR/NAME/seeds/seed-<k>.json   # experiment, seed, config, array keys, sha256 of the .npz
    DIR/NAME/metrics.json          # the summary (schema in experiment_protocol / issue 4)

Every file is written atomically (a temporary file in the same directory, then
:func:`os.replace`), the ``.npz`` before its ``.json``: a seed counts as finished only
when its ``.json`` exists and the ``.npz`` it describes has the recorded SHA-256, so a
killed run never leaves a file that is later trusted.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import math
import os
import pathlib
from typing import Any

import numpy as np

from .._fileio import atomic_write_bytes

#: Bumped when the seed-file layout changes; older files are recomputed.
SEED_FORMAT = 1


def to_jsonable(value: Any) -> Any:
    """Convert ``value`` to plain JSON types.

    Dataclasses become dicts, tuples and arrays become lists, numpy scalars become
    Python numbers and non-finite floats become ``None`` (JSON has no NaN).
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [to_jsonable(v) for v in value.tolist()] if value.ndim else to_jsonable(value.item())
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        f = float(value)
        return f if math.isfinite(f) else None
    if isinstance(value, pathlib.PurePath):
        return str(value)
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"cannot convert a value of type {type(value).__name__} to JSON")


def config_to_json(config: Any) -> dict:
    """Return the experiment ``Config`` as a JSON-normalised dict (tuples become lists)."""
    if not (dataclasses.is_dataclass(config) and not isinstance(config, type)):
        raise TypeError(f"config: expected a dataclass instance, got {type(config).__name__}")
    return json.loads(json.dumps(to_jsonable(config)))


def write_json(path: pathlib.Path, obj: Any) -> None:
    """Write ``obj`` (converted with :func:`to_jsonable`) as indented JSON, atomically."""
    text = json.dumps(to_jsonable(obj), indent=2, allow_nan=False)
    atomic_write_bytes(pathlib.Path(path), (text + "\n").encode())


def seed_paths(seed_dir: pathlib.Path, seed: int) -> tuple[pathlib.Path, pathlib.Path]:
    """Return the ``(npz, json)`` paths of seed ``seed`` under ``seed_dir``."""
    seed_dir = pathlib.Path(seed_dir)
    return seed_dir / f"seed-{seed}.npz", seed_dir / f"seed-{seed}.json"


def save_seed(
    seed_dir: pathlib.Path,
    seed: int,
    result: dict[str, np.ndarray],
    *,
    experiment: str,
    config_json: dict,
    elapsed: float | None = None,
    cpu: float | None = None,
) -> tuple[pathlib.Path, pathlib.Path]:
    """Write one finished seed: the arrays as ``.npz``, then its description as ``.json``.

    Parameters
    ----------
    seed_dir : path
        The experiment's ``seeds`` directory (created if missing).
    seed : int
        The seed index ``k``.
    result : dict of str to ndarray
        The arrays returned by ``run_seed``.
    experiment : str
        The experiment's name.
    config_json : dict
        The config as returned by :func:`config_to_json`.
    elapsed : float, optional
        Wall-clock seconds the seed took (recorded for information).
    cpu : float, optional
        CPU seconds of the worker process for the seed (recorded for information).

    Returns
    -------
    (npz_path, json_path) : tuple of pathlib.Path
    """
    npz_path, json_path = seed_paths(seed_dir, seed)
    buf = io.BytesIO()
    np.savez(buf, **{k: np.asarray(v) for k, v in result.items()})
    data = buf.getvalue()
    atomic_write_bytes(npz_path, data)
    meta = {
        "format": SEED_FORMAT,
        "experiment": experiment,
        "seed": int(seed),
        "config": config_json,
        "keys": list(result),
        "sha256": hashlib.sha256(data).hexdigest(),
        "elapsed_seconds": elapsed,
        "cpu_seconds": cpu,
    }
    write_json(json_path, meta)
    return npz_path, json_path


def load_seed(
    seed_dir: pathlib.Path,
    seed: int,
    *,
    experiment: str,
    config_json: dict,
) -> dict[str, np.ndarray] | None:
    """Load a finished seed if it is complete, intact and was run with ``config_json``.

    Returns ``None`` (the seed must be recomputed) when either file is missing, the
    ``.json`` does not parse, the experiment, seed, format or config differ, the
    ``.npz`` does not match its recorded SHA-256, or it does not load without pickle.
    """
    npz_path, json_path = seed_paths(seed_dir, seed)
    try:
        meta = json.loads(json_path.read_text())
        if not isinstance(meta, dict):
            return None
        if (
            meta.get("format") != SEED_FORMAT
            or meta.get("experiment") != experiment
            or meta.get("seed") != int(seed)
            or meta.get("config") != config_json
        ):
            return None
        data = npz_path.read_bytes()
        if hashlib.sha256(data).hexdigest() != meta.get("sha256"):
            return None
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
        keys = meta.get("keys")
        if not isinstance(keys, list) or set(keys) != set(arrays):
            return None
        return {k: arrays[k] for k in keys}
    except Exception:  # any unreadable / truncated / corrupt file means: recompute
        return None


def read_metrics(path: pathlib.Path) -> dict:
    """Read a ``metrics.json`` file."""
    return json.loads(pathlib.Path(path).read_text())


__all__ = [
    "SEED_FORMAT",
    "atomic_write_bytes",
    "config_to_json",
    "load_seed",
    "read_metrics",
    "save_seed",
    "seed_paths",
    "to_jsonable",
    "write_json",
]
