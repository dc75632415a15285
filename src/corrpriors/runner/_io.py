"""Saving and loading experiment results: one ``.npz`` + ``.json`` pair per seed, ``metrics.json``.

Layout under the output directory ``DIR``::

    DIR/NAME/<label>-<hash>/            # one folder per configuration (see _config.py)
        config.json                     # the configuration every file in the folder belongs to
        seeds/seed-<k>.npz              # the seed's arrays (no pickle)
        seeds/seed-<k>.json             # experiment, seed, config, where each array is, sha256
        metrics.json                    # the summary
        warnings.log                    # every warning the run collected, in full
        <NAME>-<what>.png / .pdf        # the figures
        .lock                           # held (flock) by the run writing the folder

Every file is written atomically (:func:`corrpriors._fileio.atomic_write_bytes`), the ``.npz``
before its ``.json``: a seed counts as finished only when its ``.json`` exists and the
``.npz`` it describes has the recorded SHA-256, so a killed run never leaves a file that is
later trusted. A seed whose ``.json`` records another configuration is never reused and
never overwritten (:class:`ConfigMismatch`).

Files already in the folder are read only if they are regular files of bounded size
(:func:`corrpriors._fileio.read_regular`): a named pipe placed under one of these names would
block the read for ever, and a huge file would exhaust memory. An oversized seed file counts as
corrupt (recomputed); a name held by something that is not a regular file (a FIFO, a device, a
directory) is refused (:class:`OutputError`), never read and never replaced.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import io
import json
import math
import os
import pathlib
import stat
from collections.abc import Callable
from typing import Any

import numpy as np

from .._fileio import NotReadable, TooLarge, atomic_write_bytes, check_output_dir, check_regular, read_regular
from .._methods import VOCABULARY, renames
from .protocol import SeedResult

#: Bumped when the seed-file layout changes; files of another format are recomputed.
SEED_FORMAT = 2

#: Largest ``config.json``, seed ``.json`` and ``metrics.json`` read back (the runner's are at
#: most a few hundred kB); a larger seed ``.json`` is corrupt, a larger record refused.
MAX_JSON_BYTES = 64 * 2**20
#: Largest seed ``.npz`` read back (the runner's are kB to a few MB); a larger one is recomputed.
MAX_SEED_NPZ_BYTES = 1024 * 2**20


class OutputError(OSError):
    """An output location that cannot be used (not a directory, not writable, ...).

    ``str(exc)`` is one line naming the path and the reason.
    """

    def __init__(self, path: os.PathLike | str, reason: str):
        self.path = pathlib.Path(path)
        self.reason = reason
        super().__init__(f"cannot write results to {self.path}: {reason}")


class RunLocked(OutputError):
    """Another run is writing the same configuration's folder."""


class ConfigMismatch(ValueError):
    """A results folder holds files of another configuration; they are neither reused nor overwritten."""


def _read_own(path: pathlib.Path, limit: int) -> bytes:
    """The bytes of one of the run folder's own files, a regular file of at most ``limit`` bytes.

    Raises
    ------
    FileNotFoundError
        Nothing is there (a dangling symbolic link included).
    OutputError
        Something other than a regular file holds the name (a named pipe, a device, a
        directory): it is neither read (a pipe would block for ever) nor replaced.
    TooLarge
        A regular file larger than ``limit`` (not read).
    OSError
        It cannot be read for another reason.
    """
    try:
        return read_regular(path, limit)
    except TooLarge:
        raise
    except NotReadable as exc:
        raise OutputError(path, f"{exc}; it is neither read nor replaced: move it away or use another --out") from None


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


def json_bytes(obj: Any) -> bytes:
    """``obj`` (converted with :func:`to_jsonable`) as the indented JSON text the runner writes."""
    return (json.dumps(to_jsonable(obj), indent=2, allow_nan=False) + "\n").encode()


def write_json(path: pathlib.Path, obj: Any) -> None:
    """Write ``obj`` as :func:`json_bytes`, atomically."""
    atomic_write_bytes(pathlib.Path(path), json_bytes(obj))


# ----------------------------------------------------------------------------- the folder


def prepare_run_dir(run_dir: pathlib.Path) -> pathlib.Path:
    """Create ``run_dir/seeds`` and check that ``run_dir`` can be written; return the seeds folder.

    Raises
    ------
    OutputError
        A path on the way exists and is not a directory, cannot be created, or the folder
        is not writable. The message names the path and the reason.
    """
    seed_dir = pathlib.Path(run_dir) / "seeds"
    try:
        check_output_dir(seed_dir)  # the package's one check: a directory, creatable, writable
        seed_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(seed_dir, str(exc) if not exc.filename else _reason(exc)) from None
    return seed_dir


def _reason(exc: OSError) -> str:
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied (not writable)"
    if exc.errno == errno.EROFS:
        return "read-only file system"
    if exc.errno == errno.ENOTDIR:
        return "a parent path exists and is not a directory"
    if exc.errno == errno.EEXIST:
        return "it exists and is not a directory"
    if exc.errno == errno.ENOSPC:
        return "no space left on the device"
    return exc.strerror or str(exc)


class RunLock:
    """An exclusive lock on a results folder (``flock`` on ``.lock``), held while a run writes it.

    The operating system releases it when the process ends, however it ends, so a killed run
    leaves no stale lock. A second run of the same configuration into the same folder gets
    :class:`RunLocked` up front instead of racing the first.
    """

    def __init__(self, run_dir: pathlib.Path):
        self.path = pathlib.Path(run_dir) / ".lock"
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        """Take the lock or raise :class:`RunLocked` (naming the holder's pid)."""
        # O_NOFOLLOW: a ``.lock`` that is a symbolic link is refused, never followed (the
        # pid written below would otherwise truncate the link's target, anyone's file).
        flags = (os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
                 | getattr(os, "O_CLOEXEC", 0))
        if os.path.islink(self.path):  # also where the system has no O_NOFOLLOW
            raise OutputError(self.path, "it is a symbolic link; remove it (it is not followed)")
        try:
            fd = os.open(self.path, flags, 0o666)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise OutputError(self.path, "it is a symbolic link; remove it (it is not "
                                  "followed)") from None
            raise OutputError(self.path.parent, _reason(exc)) from None
        try:
            is_regular = stat.S_ISREG(os.fstat(fd).st_mode)
        except OSError as exc:
            os.close(fd)
            raise OutputError(self.path, _reason(exc)) from None
        if not is_regular:
            os.close(fd)
            raise OutputError(self.path, "it exists and is not a regular file")
        try:
            import fcntl
        except ImportError:  # pragma: no cover - no flock (Windows): no protection
            self._fd = fd
            return self
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = ""
            try:
                holder = os.read(fd, 64).decode(errors="replace").strip()
            finally:
                os.close(fd)
            raise RunLocked(
                self.path.parent,
                f"another corrpriors run{f' (pid {holder})' if holder else ''} is writing this "
                "configuration's results; wait for it to finish or use another --out",
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        return self

    def release(self) -> None:
        """Release the lock (closing the file releases the flock)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


#: Files and folders that make a folder a run folder (any of them; ``config.json`` only when it
#: is the runner's record, see :func:`is_run_folder`).
RUN_MARKERS = ("metrics.json", "config.json", "seeds")


def is_run_folder(folder: pathlib.Path) -> bool:
    """Whether ``folder`` is a run folder of the runner, finished or interrupted.

    It is when it holds a ``metrics.json`` or a ``seeds/`` folder (the runner creates
    ``seeds/`` first), or a ``config.json`` that is the runner's configuration record (an
    object naming the experiment and the configuration hash; a ``config.json`` of another
    program does not make a folder a run folder). Used on the folders above an output path
    (the report's page, a run's ``--out``), where the file names alone could be anyone's.
    """
    folder = pathlib.Path(folder)
    if os.path.lexists(folder / "metrics.json") or os.path.isdir(folder / "seeds"):
        return True
    try:
        record = json.loads(read_regular(folder / "config.json", MAX_JSON_BYTES))
    except (OSError, ValueError, RecursionError):   # absent, not regular, not JSON
        return False
    return isinstance(record, dict) and "experiment" in record and "config_hash" in record


def enclosing_run_folder(folder: pathlib.Path) -> pathlib.Path | None:
    """The first run folder (:func:`is_run_folder`) at or above ``folder`` (resolved), or None."""
    start = pathlib.Path(folder).resolve()
    return next((f for f in (start, *start.parents) if is_run_folder(f)), None)


def check_not_inside_run(run_dir: pathlib.Path) -> None:
    """Refuse (:class:`OutputError`) a run folder ``DIR/NAME/<label>-<hash>`` whose ``DIR`` is, or
    lies inside, another run folder (:func:`is_run_folder`): ``--out`` never nests a run in
    another configuration's results. Checked before anything is created.
    """
    above = pathlib.Path(run_dir).parent.parent   # DIR, from DIR/NAME/<label>-<hash>
    folder = enclosing_run_folder(above)
    if folder is not None:
        where = "is the run folder" if folder == above.resolve() else "lies inside the run folder"
        raise OutputError(above, f"{where} {folder}, which holds another run's results; use an "
                                 "--out outside every run folder")


def check_config_record(run_dir: pathlib.Path, experiment: str, config_json: dict, config_hash: str) -> None:
    """Write ``run_dir/config.json``, or check that the one there records the same configuration.

    Raises
    ------
    ConfigMismatch
        ``config.json`` records another experiment or configuration, or is unreadable (too
        large for a record included).
    OutputError
        ``config.json`` is not a regular file (a named pipe, a device, a directory).
    """
    path = pathlib.Path(run_dir) / "config.json"
    record = {"experiment": experiment, "config_hash": config_hash, "config": config_json}
    try:
        existing = json.loads(_read_own(path, MAX_JSON_BYTES))
    except FileNotFoundError:
        existing = None
    except OutputError:
        raise
    except (OSError, ValueError, RecursionError):
        existing = "unreadable"
    if existing is None:
        write_json(path, record)
        return
    same = isinstance(existing, dict) and existing.get("experiment") == experiment
    if not same or existing.get("config") != config_json:
        raise ConfigMismatch(
            f"{path} records another configuration ({_differences(existing, config_json)}); "
            "its results are neither reused nor overwritten: use another --out or move that folder"
        )


def check_not_special(path: pathlib.Path) -> None:
    """Refuse (:class:`OutputError`) a ``path`` the run will replace that exists and is not a
    regular file (a named pipe, a device, a directory): checked before any seed is computed.
    """
    try:
        check_regular(path, 2**63)
    except NotReadable as exc:
        raise OutputError(path, f"{exc}; it is not replaced: move it away or use another --out") from None
    except OSError:  # nothing there (or a dangling link): written like a missing file
        return


def _differences(existing: Any, config_json: dict) -> str:
    if not isinstance(existing, dict) or not isinstance(existing.get("config"), dict):
        return "the file is unreadable"
    old = existing["config"]
    keys = sorted(k for k in set(old) | set(config_json) if old.get(k) != config_json.get(k))
    return "differs in " + ", ".join(f"{k}: {old.get(k)!r} there vs {config_json.get(k)!r} now" for k in keys[:4]) + (
        f" and {len(keys) - 4} more" if len(keys) > 4 else ""
    )


# ----------------------------------------------------------------------------- seeds


def seed_paths(seed_dir: pathlib.Path, seed: int) -> tuple[pathlib.Path, pathlib.Path]:
    """Return the ``(npz, json)`` paths of seed ``seed`` under ``seed_dir``."""
    seed_dir = pathlib.Path(seed_dir)
    return seed_dir / f"seed-{seed}.npz", seed_dir / f"seed-{seed}.json"


@dataclasses.dataclass(frozen=True)
class StoredSeed:
    """A finished seed read back from disk: its result and its ``.json`` record."""

    result: SeedResult
    meta: dict
    #: Old -> new method names applied on load (empty: written under the current vocabulary).
    renamed: dict = dataclasses.field(default_factory=dict)


def _pack(result: SeedResult) -> tuple[dict[str, np.ndarray], dict]:
    """Arrays under unique npz keys, and the layout (which key holds which array) for the json."""
    arrays: dict[str, np.ndarray] = {}
    layout: dict[str, Any] = {"curves": {}, "extras": {}, "method_extras": {}}
    for metric, methods in result.curves.items():
        layout["curves"][metric] = {}
        for method, arr in methods.items():
            key = f"curves/{metric}/{method}"
            arrays[key], layout["curves"][metric][method] = arr, key
    for name, arr in result.extras.items():
        key = f"extras/{name}"
        arrays[key], layout["extras"][name] = arr, key
    for name, methods in result.method_extras.items():
        layout["method_extras"][name] = {}
        for method, arr in methods.items():
            key = f"method_extras/{name}/{method}"
            arrays[key], layout["method_extras"][name][method] = arr, key
    return arrays, layout


def _unpack(arrays: dict[str, np.ndarray], layout: dict) -> SeedResult:
    def nested(block: dict) -> dict[str, dict[str, np.ndarray]]:
        return {k: {m: arrays[key] for m, key in inner.items()} for k, inner in block.items()}

    return SeedResult(
        curves=nested(layout["curves"]),
        extras={k: arrays[key] for k, key in layout["extras"].items()},
        method_extras=nested(layout["method_extras"]),
    )


def save_seed(
    seed_dir: pathlib.Path,
    seed: int,
    result: SeedResult,
    *,
    experiment: str,
    config_json: dict,
    elapsed: float | None = None,
    cpu: float | None = None,
    warnings: list[dict] | None = None,
) -> tuple[pathlib.Path, pathlib.Path]:
    """Write one finished seed: the arrays as ``.npz``, then its description as ``.json``.

    Parameters
    ----------
    seed_dir : path
        The configuration's ``seeds`` folder (created if missing).
    seed : int
        The seed index ``k``.
    result : SeedResult
        What ``run_seed`` returned.
    experiment : str
        The experiment's name.
    config_json : dict
        The config as returned by :func:`config_to_json`.
    elapsed, cpu : float, optional
        Wall-clock and CPU seconds the seed took (recorded for information).
    warnings : list of dict, optional
        The warnings the seed raised (``category``, ``message``, ``where``, ``count``).

    Returns
    -------
    (npz_path, json_path) : tuple of pathlib.Path
    """
    npz_path, json_path = seed_paths(seed_dir, seed)
    arrays, layout = _pack(result)
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]  # (numpy's stub types the first keyword)
    data = buf.getvalue()
    atomic_write_bytes(npz_path, data)
    meta = {
        "format": SEED_FORMAT,
        "vocabulary": VOCABULARY,
        "experiment": experiment,
        "seed": int(seed),
        "config": config_json,
        "layout": layout,
        "sha256": hashlib.sha256(data).hexdigest(),
        "elapsed_seconds": elapsed,
        "cpu_seconds": cpu,
        "warnings": list(warnings or []),
    }
    write_json(json_path, meta)
    return npz_path, json_path


def load_seed(seed_dir: pathlib.Path, seed: int, *, experiment: str, config_json: dict,
              check: Callable[[SeedResult], Any] | None = None, notes: list[str] | None = None) -> StoredSeed | None:
    """Load a finished seed if it is complete, intact, usable and was run with ``config_json``.

    Returns ``None`` (the seed must be computed) when either file is missing, the ``.json``
    does not parse or is of another format, the ``.npz`` does not match its recorded
    SHA-256 or does not load without pickle, or ``check`` (e.g. the curves' lengths against the
    x grid) rejects the result. Every reason but a missing file is appended to ``notes`` as one
    line, so the caller can say why the seed is recomputed.

    A seed file larger than :data:`MAX_JSON_BYTES` / :data:`MAX_SEED_NPZ_BYTES` is not read
    and counts as corrupt.

    Raises
    ------
    ConfigMismatch
        The seed's intact ``.json`` records another experiment or configuration: it is
        another run's result, so it is neither reused nor recomputed over.
    OutputError
        The seed's ``.json`` or ``.npz`` name is held by something other than a regular file
        (a named pipe, a device, a directory): it is neither read nor replaced.
    """
    npz_path, json_path = seed_paths(seed_dir, seed)

    def unusable(reason: str) -> None:
        if notes is not None:
            notes.append(f"seed {seed}: the stored result is unusable ({reason}); it is recomputed")

    check_not_special(npz_path)  # a pipe or device under a seed's name: refused, never replaced
    try:
        meta = json.loads(_read_own(json_path, MAX_JSON_BYTES))
    except FileNotFoundError:
        return None
    except OutputError:
        raise
    except TooLarge as exc:
        unusable(f"{json_path.name} {exc}")
        return None
    except (OSError, ValueError, RecursionError):
        unusable(f"{json_path.name} does not parse")
        return None
    if not isinstance(meta, dict) or meta.get("format") != SEED_FORMAT or meta.get("seed") != int(seed):
        unusable(f"{json_path.name} is of another format or seed")
        return None
    if meta.get("experiment") != experiment or meta.get("config") != config_json:
        raise ConfigMismatch(
            f"{json_path} was computed with another configuration ({_differences(meta, config_json)}); "
            "it is neither reused nor overwritten: use another --out or move that file"
        )
    try:
        data = _read_own(npz_path, MAX_SEED_NPZ_BYTES)
    except OutputError:
        raise
    except TooLarge as exc:
        unusable(f"{npz_path.name} {exc}")
        return None
    except OSError:
        unusable(f"{npz_path.name} is missing or unreadable")
        return None
    if hashlib.sha256(data).hexdigest() != meta.get("sha256"):
        unusable(f"{npz_path.name} does not match its recorded checksum")
        return None
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
        result = _unpack(arrays, meta["layout"])
        if check is not None:
            check(result)
    except Exception as exc:  # any unreadable / inconsistent / unusable file means: recompute
        unusable(" ".join(f"{type(exc).__name__}: {exc}".split())[:200])
        return None
    mapping = renames(experiment, meta.get("vocabulary"))
    if mapping:  # written under the old method names: read under the new ones (by the recorded version)
        def inner(block: Any) -> dict:
            return {k: {mapping.get(m, m): a for m, a in v.items()} for k, v in block.items()}

        result = SeedResult(curves=inner(result.curves), extras=result.extras,
                            method_extras=inner(result.method_extras))
    return StoredSeed(result, meta, mapping)


def read_metrics(path: pathlib.Path) -> dict:
    """Read a ``metrics.json`` file (a regular file of at most :data:`MAX_JSON_BYTES` bytes).

    Raises
    ------
    OutputError
        It is not a regular file (a named pipe, a device, a directory).
    TooLarge
        It is larger than :data:`MAX_JSON_BYTES` (not read).
    """
    return json.loads(_read_own(pathlib.Path(path), MAX_JSON_BYTES))


__all__ = [
    "SEED_FORMAT",
    "MAX_JSON_BYTES",
    "MAX_SEED_NPZ_BYTES",
    "RUN_MARKERS",
    "ConfigMismatch",
    "OutputError",
    "RunLock",
    "RunLocked",
    "StoredSeed",
    "atomic_write_bytes",
    "check_config_record",
    "check_not_inside_run",
    "check_not_special",
    "config_to_json",
    "enclosing_run_folder",
    "is_run_folder",
    "load_seed",
    "prepare_run_dir",
    "read_metrics",
    "save_seed",
    "seed_paths",
    "to_jsonable",
    "write_json",
]
