"""The seed-sweep runner behind ``corrpriors reproduce``.

:func:`run_experiment` runs an experiment's ``run_seed`` for every requested seed (in
parallel with joblib/loky, on a Dask cluster or on Ray), writes each finished seed to disk at
once, skips seeds already on disk with the same configuration (``resume``), then writes
``metrics.json``, the figures and ``warnings.log`` and prints a short table. Results live in
one folder per configuration, ``DIR/NAME/<label>-<hash>/`` (see :mod:`._config` and
:mod:`._io`), locked while a run writes it.

Seed ``k`` of experiment ``NAME`` always gets the generator
``numpy.random.default_rng([k, zlib.crc32(NAME.encode())])``, whatever the backend, the
number of workers or the order in which seeds finish, so every backend gives the same
numbers.

Seeds are the unit of parallelism: inside a seed, BLAS runs single-threaded (through
:func:`corrpriors._threads.blas_threads` in-process and on Dask/Ray workers; joblib's loky
does the same for its workers), because the experiments' small matrices gain nothing from BLAS threads and a
busy machine loses a lot to oversubscription. Loky workers watch the runner and exit
within a second when it dies (even by SIGKILL).

Warnings raised inside a seed are collected with the seed, counted and written in full to
``warnings.log``; none reaches the terminal. (Seeds that run in a worker thread rather than a
process's main thread -- Dask workers -- are not captured: Python's warning filters are
process-wide, so those warnings appear in the workers' logs.)
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import importlib
import json
import logging
import math
import os
import pathlib
import shutil
import sys
import threading
import time
import warnings
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from .._fileio import atomic_write_many, read_regular
from .._format import WIDTH, mean_std, num, wrap
from .._methods import VOCABULARY, describe, is_known, migration_note, setting_notes
from .._repr import short_repr
from .._validation import check_int
from . import _config, _io
from ._ranges import check_ranges, number_from_text
from .protocol import (
    FigureSpec,
    SavedFigure,
    SeedResult,
    check_seed_result,
    label_of,
    std_over_seeds,
    validate_experiment,
)
from .registry import get_experiment

#: The runner's log: every run's prior estimate, shown or not.
_LOG = logging.getLogger("corrpriors.runner")

BACKENDS = ("loky", "dask", "ray")

#: Most seeds one run may request (a typo such as ``0-200000000`` must not eat the memory).
MAX_SEEDS = 100_000
#: Largest seed, 2**63 - 1: a seed names its result files (``seed-<k>.npz``), and a 300-digit one
#: made a name longer than the file system allows (OSError, file name too long).
MAX_SEED = 2**63 - 1

_DIST_HINT = "install the optional extra: pip install 'corrpriors[dist]'"

#: What the experiments' warnings mean (shown next to their counts).
WARNING_NOTES = {
    "JitterWarning": "expected: a smooth kernel's Gram matrix is numerically singular; a relative "
                     "diagonal jitter of about 1e-10 is added and the jittered matrix is fitted exactly",
    "ConvergenceWarning": "a variational fit stopped at its iteration cap; its result is kept and "
                          "marked converged_=False",
}


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run: ``saved`` of ``total`` seeds are on disk under ``run_dir``."""

    def __init__(self, name: str, saved: int, total: int, run_dir: pathlib.Path):
        self.name, self.saved, self.total, self.run_dir = name, saved, total, run_dir
        super().__init__(f"stopped; {saved} of {total} seeds saved under {run_dir}; the same command "
                         "resumes from them")


class RunFailed(RuntimeError):
    """A seed or the summary failed; ``saved`` seeds of ``total`` are kept under ``run_dir``."""

    def __init__(self, name: str, saved: int, total: int, run_dir: pathlib.Path, cause: BaseException):
        self.name, self.saved, self.total, self.run_dir, self.cause = name, saved, total, run_dir, cause
        super().__init__(f"{type(cause).__name__}: {cause}")


@dataclasses.dataclass(frozen=True)
class RunReport:
    """What one :func:`run_experiment` call did.

    Attributes
    ----------
    name : str
        The experiment's name.
    out_dir : pathlib.Path
        The configuration's folder ``DIR/NAME/<label>-<hash>``.
    metrics_path : pathlib.Path
        The ``metrics.json`` written.
    figures : tuple of pathlib.Path
        The figure files written (``.png`` and ``.pdf``).
    computed_seeds : tuple of int
        Seeds run in this call.
    skipped_seeds : tuple of int
        Seeds found finished on disk (with the same config) and not rerun.
    elapsed : float
        Wall-clock seconds of the whole call.
    summary : dict
        The content of ``metrics.json``.
    saved_figures : tuple of SavedFigure
        The figures with their captions.
    warnings : dict of str to int
        Number of warnings collected per category (all seeds, and the summary and plots).
    warnings_log : pathlib.Path
        The file holding every warning in full.
    cpu_seconds : float
        CPU seconds of the seeds computed in this call (their workers' time, as recorded).
    in_process : bool
        Whether those seeds ran in this process (one worker, or one seed), so that this
        process's own CPU time already holds them.
    """

    name: str
    out_dir: pathlib.Path
    metrics_path: pathlib.Path
    figures: tuple
    computed_seeds: tuple
    skipped_seeds: tuple
    elapsed: float
    summary: dict
    saved_figures: tuple = ()
    warnings: dict = dataclasses.field(default_factory=dict)
    warnings_log: pathlib.Path | None = None
    cpu_seconds: float = 0.0
    in_process: bool = False

    @property
    def n_warnings(self) -> int:
        """Total number of warnings collected."""
        return int(sum(self.warnings.values()))


def seed_generator(name: str, seed: int) -> np.random.Generator:
    """Return the generator of seed ``seed`` of experiment ``name``.

    ``numpy.random.default_rng([seed, zlib.crc32(name.encode())])``: distinct
    experiments never share a stream, and the stream does not depend on the backend.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed: expected a non-negative integer, got {seed!r}")
    return np.random.default_rng([int(seed), zlib.crc32(name.encode())])


# ----------------------------------------------------------------------------- estimates

#: A run whose estimated wall time exceeds this many seconds says its estimate.
ESTIMATE_ABOVE = 60.0


def duration(seconds: float) -> str:
    """``"48 s"``, ``"3 min 16 s"``, ``"1 h 05 min"``."""
    seconds = max(0.0, float(seconds))
    if seconds < 59.5:
        return f"{seconds:.0f} s" if seconds >= 9.5 else f"{seconds:.1f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(int(round(seconds / 60.0)), 60)
    return f"{hours} h {minutes:02d} min"


@dataclasses.dataclass(frozen=True)
class RunEstimate:
    """What the remaining seeds of a run will cost: seeds x the measured cost per seed.

    ``measured`` holds ``(wall, CPU)`` seconds of seeds already run with the same
    configuration (on disk, or the first seed of this run); the wall time assumes the seeds
    share ``jobs`` workers evenly and cost what the measured ones did.
    """

    n_seeds: int
    jobs: int
    measured: list
    source: str

    @property
    def per_seed(self) -> tuple[float, float]:
        """Mean (wall, CPU) seconds of one measured seed."""
        walls = [float(w) for w, _ in self.measured if w is not None]
        cpus = [float(c) for _, c in self.measured if c is not None]
        wall = float(np.mean(walls)) if walls else 0.0
        return wall, float(np.mean(cpus)) if cpus else wall

    @property
    def wall(self) -> float:
        """Estimated wall seconds of all ``n_seeds`` seeds on ``jobs`` workers."""
        return _turns(self.n_seeds, self.jobs) * self.per_seed[0]

    def text(self) -> str:
        """One sentence: the measured wall and CPU seconds per seed, then the run's totals from them."""
        wall, cpu = self.per_seed
        return (f"estimate: measured on {self.source}, {duration(wall)} wall, {duration(cpu)} CPU per seed; "
                f"{_seeds(self.n_seeds)} on {_workers(self.jobs)}: about {duration(self.wall)} wall "
                f"({_rounds(self.n_seeds, self.jobs)} x {duration(wall)}), {duration(self.n_seeds * cpu)} CPU "
                f"({self.n_seeds} x {duration(cpu)})")

    def lines(self, indent: str = "  ") -> list[str]:
        """:meth:`text` wrapped to :data:`WIDTH` columns, never inside a duration ("1 min 15 s")."""
        return _wrap_durations(self.text(), indent)


def _seeds(n: int) -> str:
    return f"{n} seed{'s' if n != 1 else ''}"


def _workers(jobs: int) -> str:
    return f"{jobs} worker{'s' if jobs != 1 else ''}"


def _turns(n_seeds: int, jobs: int) -> int:
    """How many seeds one worker runs in turn (what the wall time is a multiple of)."""
    return math.ceil(n_seeds / max(jobs, 1))


def _rounds(n_seeds: int, jobs: int) -> str:
    """How many seeds one worker runs in turn: ``"3 seeds in turn"``."""
    return f"{_seeds(_turns(n_seeds, jobs))} in turn"


def _wrap_durations(text: str, indent: str) -> list[str]:
    """``text`` wrapped to :data:`WIDTH` columns, never inside a duration ("1 min 15 s")."""
    import re

    glued = re.sub(r"(?<=\d) (?=(?:min|h|s)\b)|(?<=\bmin) (?=\d)|(?<=\bh) (?=\d)", "\0", text)
    return [line.replace("\0", " ") for line in wrap(glued, indent, indent + "  ")]


@dataclasses.dataclass(frozen=True)
class ModelEstimate:
    """What a run will cost by the experiment's cost model, before any seed of it has run.

    ``cpu`` is the model's CPU seconds of one seed (an experiment's ``estimate_seed_cost``);
    the wall time assumes the seeds share ``jobs`` workers evenly, one core each.
    """

    n_seeds: int
    jobs: int
    cpu: float
    model: str

    @property
    def wall(self) -> float:
        """Estimated wall seconds of all ``n_seeds`` seeds on ``jobs`` workers."""
        return _turns(self.n_seeds, self.jobs) * self.cpu

    def text(self) -> str:
        """One sentence: the model's CPU seconds per seed, the run's totals from them, and the model."""
        return (f"estimate: by the cost model, before any seed, {duration(self.cpu)} CPU per seed; "
                f"{_seeds(self.n_seeds)} on {_workers(self.jobs)}, one core each: about "
                f"{duration(self.n_seeds * self.cpu)} CPU ({self.n_seeds} x {duration(self.cpu)}), "
                f"{duration(self.wall)} wall ({_rounds(self.n_seeds, self.jobs)} x {duration(self.cpu)}) "
                f"(CPU per seed by the model: {self.model})")

    def lines(self, indent: str = "  ") -> list[str]:
        """:meth:`text` wrapped to :data:`WIDTH` columns, never inside a duration ("1 min 15 s")."""
        return _wrap_durations(self.text(), indent)

    def record(self) -> dict:
        """The estimate as recorded in ``metrics.json`` (``run.estimate``)."""
        return {"cpu_seconds": self.n_seeds * self.cpu, "cpu_seconds_per_seed": self.cpu,
                "wall_seconds": self.wall, "jobs": self.jobs, "model": self.model}


def model_estimate(experiment: Any, config: Any, n_seeds: int, jobs: int) -> ModelEstimate | None:
    """The experiment's prior estimate of ``n_seeds`` seeds (None: it has no cost model)."""
    cost_of = getattr(experiment, "estimate_seed_cost", None)
    if cost_of is None or n_seeds < 1:
        return None
    cost = cost_of(config)
    if cost is None:
        return None
    return ModelEstimate(n_seeds, jobs, float(cost.cpu), str(cost.model))


def _measured_costs(seed_dir: pathlib.Path, name: str, config_json: dict) -> list[tuple[float, Any]]:
    """``(wall, CPU)`` seconds of every finished seed of this configuration under ``seed_dir``."""
    out = []
    for path in sorted(pathlib.Path(seed_dir).glob("seed-*.json")):
        try:
            meta = json.loads(read_regular(path, _io.MAX_JSON_BYTES))
        except (OSError, ValueError, RecursionError):  # a pipe, a device, too large, corrupt: not a measurement
            continue
        if (isinstance(meta, dict) and meta.get("experiment") == name and meta.get("config") == config_json
                and isinstance(meta.get("elapsed_seconds"), (int, float))):
            out.append((float(meta["elapsed_seconds"]), meta.get("cpu_seconds")))
    return out


def _migration_note(name: str, stored: Mapping[int, Any]) -> str | None:
    """One line naming the seeds read under renamed methods (None: there are none)."""
    old = sorted(s for s, st in stored.items() if getattr(st, "renamed", None))
    if not old:
        return None
    mapping = stored[old[0]].renamed
    seeds = ", ".join(map(str, old[:8])) + (" ..." if len(old) > 8 else "")
    return migration_note(name, mapping, f"seed{'s' if len(old) != 1 else ''} {seeds}")


# ----------------------------------------------------------------------------- workers

_WATCHDOG_LOCK = threading.Lock()
_WATCHDOG_FOR: int | None = None


def _watch_parent(parent_pid: int, interval: float = 0.25) -> None:
    """In a worker process: exit at once (``os._exit``) when the runner ``parent_pid`` is gone.

    Loky workers are children of the runner; when it dies (SIGKILL included) they are
    re-parented, which this daemon thread notices within ``interval`` seconds. Without it a
    worker would finish its seed (minutes) before noticing.
    """
    global _WATCHDOG_FOR
    if parent_pid == os.getpid():
        return
    with _WATCHDOG_LOCK:
        if _WATCHDOG_FOR == parent_pid:
            return
        _WATCHDOG_FOR = parent_pid
    direct_child = os.getppid() == parent_pid

    def alive() -> bool:
        if direct_child:
            return os.getppid() == parent_pid
        try:
            os.kill(parent_pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # exists, owned by someone else
            return True
        return True

    def watch() -> None:
        while alive():
            time.sleep(interval)
        os._exit(1)

    threading.Thread(target=watch, name="corrpriors-parent-watchdog", daemon=True).start()


def _collect(caught: list) -> list[dict]:
    """Count recorded warnings by (category, message, where)."""
    counts: dict[tuple[str, str, str], int] = {}
    for w in caught:
        key = (w.category.__name__, str(w.message), f"{w.filename}:{w.lineno}")
        counts[key] = counts.get(key, 0) + 1
    return [{"category": c, "message": m, "where": where, "count": n} for (c, m, where), n in counts.items()]


def _execute_seed(
    run_seed: Callable, config: Any, name: str, seed: int, n_blas_threads: int | None = None,
    parent_pid: int | None = None,
) -> tuple[int, SeedResult, tuple[float, float], list[dict]]:
    """Run one seed (on whatever worker).

    Returns ``(seed, result, (wall seconds, CPU seconds), warnings)``; the seed's garbage is
    collected before it returns (a worker runs many seeds: the reference cycles of a seed's
    models -- a multi-task model and its beliefs point at each other -- held their arrays until
    a full collection, and a loky worker grew by about 150 MB per transfer seed until loky
    restarted it with "A worker stopped while some jobs were given to the executor").
    ``n_blas_threads`` caps the BLAS threads of the worker
    (:func:`corrpriors._threads.blas_threads`) so that parallel seeds do not oversubscribe the
    cores (loky limits its workers itself); ``parent_pid`` starts the watchdog that ends the
    worker with the runner.
    """
    from .._threads import blas_threads

    if parent_pid is not None:
        _watch_parent(parent_pid)
    start, cpu_start = time.perf_counter(), time.process_time()
    caught: list = []
    with blas_threads(n_blas_threads) if n_blas_threads is not None else contextlib.nullcontext():
        if threading.current_thread() is threading.main_thread():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                result = run_seed(config, rng=seed_generator(name, seed))
        else:  # catch_warnings is process-global: threads (Dask workers) leave warnings alone
            result = run_seed(config, rng=seed_generator(name, seed))
    seconds = (time.perf_counter() - start, time.process_time() - cpu_start)
    gc.collect()   # the seed's reference cycles (e.g. a multi-task model and its beliefs) go now
    return int(seed), result, seconds, _collect(caught)


# ----------------------------------------------------------------------------- backends


#: One seed's task: (run_seed, config, experiment name, seed).
Task = tuple[Callable, Any, str, int]


def _iter_loky(tasks: list[Task], jobs: int) -> Iterator[tuple]:
    if jobs == 1 or len(tasks) == 1:
        for task in tasks:
            yield _execute_seed(*task, 1)
        return
    from joblib import Parallel, delayed

    parallel = Parallel(n_jobs=jobs, backend="loky", return_as="generator_unordered")
    gen = parallel(delayed(_execute_seed)(*task, None, os.getpid()) for task in tasks)
    try:
        yield from gen
    finally:
        gen.close()


def _iter_dask(tasks: list[Task], jobs: int, scheduler: str | None, processes: bool) -> Iterator[tuple]:
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError as exc:
        raise ImportError(f"--backend dask needs dask.distributed ({exc}); {_DIST_HINT}") from None
    cluster = None
    if scheduler:
        client = Client(scheduler)
    else:
        cluster = LocalCluster(
            n_workers=jobs, threads_per_worker=1, processes=processes, dashboard_address=None
        )
        client = Client(cluster)
    try:
        futures = [client.submit(_execute_seed, *task, 1, pure=False) for task in tasks]
        for future in as_completed(futures):
            yield future.result()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _iter_ray(tasks: list[Task], jobs: int, scheduler: str | None) -> Iterator[tuple]:
    try:
        import ray
    except ImportError:
        raise ImportError(f"--backend ray needs the 'ray' package, which is not installed; {_DIST_HINT}") from None
    started = not ray.is_initialized()
    if started:
        if scheduler:
            ray.init(address=scheduler)
        else:
            ray.init(num_cpus=jobs)
    try:
        remote = ray.remote(num_cpus=1)(_execute_seed)
        pending = [remote.remote(*task, 1) for task in tasks]
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            yield ray.get(done[0])
    finally:
        if started:
            ray.shutdown()


def _iter_results(tasks: list[Task], backend: str, jobs: int, scheduler: str | None,
                  processes: bool) -> Iterator[tuple]:
    if backend == "loky":
        return _iter_loky(tasks, jobs)
    if backend == "dask":
        return _iter_dask(tasks, jobs, scheduler, processes)
    return _iter_ray(tasks, jobs, scheduler)


# ----------------------------------------------------------------------------- summary


def summarise(experiment: Any, config: Any, seed_results: Mapping[int, SeedResult]) -> dict:
    """Build the core of the ``metrics.json`` record from the per-seed results.

    ``mean`` and ``std`` are taken over seeds for every x value; ``std`` is the sample
    standard deviation (``ddof=1``) and 0 when there is a single seed; ``per_seed`` keeps every
    seed's curve (rows in the order of ``seeds``). Methods keep the
    order of the first seed; a method missing in some seed is an error. ``config`` is
    recorded with its sentinels resolved (the experiment's ``resolve_config``).
    """
    seeds = sorted(seed_results)
    if not seeds:
        raise ValueError("seed_results: expected at least one seed")
    first = seed_results[seeds[0]]
    metrics: dict[str, dict] = {}
    for metric, better in experiment.METRICS.items():
        methods: dict[str, dict] = {}
        for method in first.methods(metric):
            missing = [s for s in seeds if method not in seed_results[s].curves.get(metric, {})]
            if missing:
                raise ValueError(f"{experiment.NAME}: curves[{metric!r}][{method!r}] is missing in seeds {missing}")
            values = np.stack([seed_results[s].curves[metric][method] for s in seeds])
            mean = values.mean(axis=0)
            std = std_over_seeds(values)
            methods[method] = {"mean": mean.tolist(), "std": std.tolist(),
                               "per_seed": values.tolist()}
        metrics[metric] = {"better": better, "methods": methods}
    resolve = getattr(experiment, "resolve_config", None)
    used = resolve(config) if resolve is not None else config
    names = list(dict.fromkeys(m for block in metrics.values() for m in block["methods"]))
    summary = {
        "experiment": experiment.NAME,
        "vocabulary": VOCABULARY,
        "methods": method_labels(experiment, names, used),
        "x": {"name": experiment.X_NAME, "values": [float(x) for x in experiment.x_values(config)]},
        "seeds": [int(s) for s in seeds],
        "config": _io.config_to_json(used),
        "metrics": metrics,
        "extra": {},
    }
    extra_fn = getattr(experiment, "summarise_extra", None)
    if extra_fn is not None:
        extra = extra_fn(config, seed_results, _io.to_jsonable(metrics))
        summary["extra"] = _io.to_jsonable(extra or {})
    return _io.to_jsonable(summary)


def method_labels(experiment: Any, names: Sequence[str], config: Any = None) -> dict:
    """The ``metrics.json`` block ``methods``: each name's entry of the method vocabulary under ``config``.

    A model named for a concentration that ``config`` changes (``dirichlet_sparse`` with
    ``alpha_sparse=1``) is labelled with the α used, and a model that a setting changes
    (``pg`` with the transfer experiment's ``layer=true``) says so
    (:func:`corrpriors._methods.method`). A
    name outside the vocabulary (a user's plug-in experiment) gets the label its experiment
    gives in the optional ``METHOD_LABELS``, else the name itself.
    """
    known = describe(names, config)
    own = getattr(experiment, "METHOD_LABELS", None) or {}
    return {n: known.get(n) or {"label": str(own.get(n, n))} for n in names}


def claims_status(experiment: Any, settings: str, n_seeds: int) -> str:
    """Say how far the claim checks of a run can be trusted.

    ``"paper-scale"`` for the paper's settings with at least its seed count,
    ``"full-scale (default settings)"`` for the defaults of an experiment whose defaults are
    not the paper's (its ``DEFAULT_LABEL``), else
    ``"indicative (N seeds, quick settings; see README for the paper-scale verdict)"``.
    """
    label = _config.default_label(experiment)
    if settings == label and n_seeds >= int(experiment.PAPER_SEEDS):
        return _config.full_scale_status(label)
    scale = "paper-scale" if label == "paper" else "full-scale"
    own = "the paper's" if label == "paper" else label
    what = {label: f"{own} settings, {experiment.PAPER_SEEDS} seeds in the {scale} run"}.get(
        settings, f"{settings} settings")
    return f"indicative ({_seeds(n_seeds)}, {what}; see README for the {scale} verdict)"


def table_columns(summary: dict, max_columns: int = 5) -> list[int]:
    """Indices of the x values a terminal table shows.

    The first and the last x, every x that a claim or a note cites (``extra["table_x"]``; all of
    them, whatever ``max_columns``), then evenly spaced ones while there are fewer than
    ``max_columns``.
    """
    xs = [float(x) for x in summary["x"]["values"]]
    if len(xs) <= max_columns:
        return list(range(len(xs)))
    extra = summary.get("extra") if isinstance(summary.get("extra"), dict) else {}
    cited = {0, len(xs) - 1}
    for value in (extra or {}).get("table_x", []):
        hits = [i for i, x in enumerate(xs) if math.isclose(x, float(value), rel_tol=1e-9, abs_tol=1e-12)]
        if not hits:
            raise ValueError(f"{summary.get('experiment')}: extra['table_x'] cites x = {value}, "
                             f"which is not on the x grid")
        cited.add(hits[0])
    chosen = set(cited)
    for n in range(2, len(xs) + 1):
        even = set(np.linspace(0, len(xs) - 1, n).round().astype(int).tolist())
        if len(chosen | even) > max(max_columns, len(cited)):
            break
        chosen = cited | even
    return sorted(chosen)


def _blocks(rows: list[tuple[str, list[str]]], header: list[str], indent: int, width: int,
            pad: int) -> list[list[int]]:
    """Split the columns into consecutive blocks that fit ``width`` characters."""
    name_w = max(len(r[0]) for r in rows)
    col_w = [max(len(header[j]), *(len(r[1][j]) for r in rows)) + pad for j in range(len(header))]
    blocks: list[list[int]] = [[]]
    used = indent + name_w
    for j, w in enumerate(col_w):
        if blocks[-1] and used + w > width:
            blocks.append([])
            used = indent + name_w
        blocks[-1].append(j)
        used += w
    return blocks


def format_table(summary: dict, max_columns: int = 5, width: int = WIDTH) -> str:
    """Format the terminal table of a ``metrics.json`` record: at most ``width`` columns of text.

    Mean±std of every method at the x values of :func:`table_columns` (split into blocks of
    columns where they do not fit), a line per change the record's ``config`` made to what
    its methods are (a concentration, ``dirichlet_sparse: α = 1 ...``, or a qualifier,
    ``pg_transfer, pg, pg_pooled: with the per-(state, action) Dirichlet layer ...``; none in a
    default run; :func:`corrpriors._methods.setting_notes`), the
    experiment's short ``extra["notes"]`` and one verdict line per claim (the numbers behind
    each verdict are in ``metrics.json`` and the report).
    Every number has three significant digits (:mod:`corrpriors._format`).
    """
    xs = summary["x"]["values"]
    cols = table_columns(summary, max_columns)
    n = len(summary["seeds"])
    status = summary.get("run", {}).get("claims", "paper-scale")
    lines = [f"{summary['experiment']}: {_seeds(n)}, mean±std over seeds"]
    for metric, block in summary["metrics"].items():
        header = [_x_text(float(xs[c])) for c in cols]
        rows = [(method, [mean_std(stats["mean"][c], stats["std"][c]) for c in cols])
                for method, stats in block["methods"].items()]
        rows.insert(0, (summary["x"]["name"], header))
        lines.append(f"  {metric} ({block['better']} is better)")
        name_w = max(len(r[0]) for r in rows)
        pad = 2 if len(_blocks(rows, header, 4, width, 2)) == 1 else 1
        for part in _blocks(rows, header, 4, width, pad):
            col_w = {j: max(len(r[1][j]) for r in rows) + pad for j in part}
            for name, cells in rows:
                lines.append("    " + name.ljust(name_w) + "".join(cells[j].rjust(col_w[j]) for j in part))
    config = summary.get("config")
    names = dict.fromkeys(m for block in summary["metrics"].values() for m in block["methods"])
    for note in setting_notes(names, config if isinstance(config, dict) else None):
        lines += wrap(note, "  ", "    ", width)
    extra: dict = summary["extra"] if isinstance(summary.get("extra"), dict) else {}
    for note in extra.get("notes", []):
        lines += wrap(note, "  ", "    ", width)
    claims = extra.get("claims", [])
    if claims:
        judged = _config.is_full_scale(status)
        lines.append("  claim checks" + (f" ({status.split(' (')[0].replace('-', ' ')})" if judged
                                         else f" ({_short_status(status)})")
                     + "; the numbers behind each are in metrics.json")
        for claim in claims:
            if judged:
                mark = "holds" if claim.get("holds") else "DOES NOT HOLD"
            else:
                mark = "met" if claim.get("holds") else "not met"
            lines += wrap(f"[{mark}] {claim.get('claim', '')}", "    ", "      ", width)
    return "\n".join(lines)


def _x_text(x: float) -> str:
    """An x value of a table header: integers as integers (``1,000``), others to three digits."""
    return num(int(x)) if float(x).is_integer() else num(x)


def _short_status(status: str) -> str:
    """``"indicative (2 seeds, quick settings; see README ...)"`` -> ``"indicative: 2 seeds, quick settings"``."""
    if status.startswith("indicative (") and status.endswith(")"):
        return "indicative: " + status[len("indicative ("):-1].split(";")[0]
    return status


def default_figures(experiment: Any, summary: dict) -> list[FigureSpec]:
    """One curve figure per metric (mean ± std over seeds), for experiments without ``figures``."""
    from ..plotting._curves import curves_figure

    specs = []
    for metric in summary["metrics"]:
        fig = curves_figure(summary, metric, **curve_labels(experiment, metric))
        specs.append(FigureSpec(
            f"{experiment.NAME}-{metric.replace('_', '-')}", fig,
            f"{label_of(experiment, 'METRIC_LABELS', metric)} against "
            f"{label_of(experiment, 'X_LABEL', default=experiment.X_NAME)}, mean ± std over seeds"))
    return specs


def curve_labels(experiment: Any, metric: str) -> dict:
    """Axis labels, title and legend labels of a metric's curves, from the protocol's labels.

    ``METHOD_LABELS`` labels only names outside the method vocabulary (a plug-in's methods): a
    vocabulary name keeps its vocabulary label in the figures, as in ``metrics.json``, the
    terminal and the report (:func:`method_labels`).
    """
    own = getattr(experiment, "METHOD_LABELS", None) or {}
    return {
        "x_label": label_of(experiment, "X_LABEL", default=experiment.X_NAME),
        "y_label": label_of(experiment, "METRIC_LABELS", metric, default=metric.replace("_", " ")),
        "environment": label_of(experiment, "ENVIRONMENT", default=experiment.NAME),
        "labels": {str(k): str(v) for k, v in dict(own).items() if not is_known(str(k))},
    }


def _mark_figures(specs: Sequence[FigureSpec], status: str, settings: str, n_seeds: int) -> None:
    """Say in every figure's title that a run's results are indicative (quick or custom settings,
    or fewer seeds than the full run), as its terminal summary and report already do.
    """
    if _config.is_full_scale(status):
        return
    from ..plotting._common import mark_indicative

    note = f"{settings} settings, {_seeds(n_seeds)}: indicative only"
    for spec in specs:
        mark_indicative(spec.figure, note)


#: The formats every figure of a run is written in (``<name>.png`` and ``<name>.pdf``).
FIGURE_FORMATS = ("png", "pdf")


def _figure_files(specs: Sequence[FigureSpec], run_dir: pathlib.Path) -> tuple[list[SavedFigure], dict]:
    """The figures of a run as ``(saved figures, {path: bytes})``, nothing written yet."""
    from ..plotting._common import figure_bytes

    saved, files = [], {}
    for spec in specs:
        paths = tuple(run_dir / f"{spec.name}.{fmt}" for fmt in FIGURE_FORMATS)
        for path, fmt in zip(paths, FIGURE_FORMATS):
            files[path] = figure_bytes(spec.figure, fmt)
        saved.append(SavedFigure(paths, spec.caption))
    return saved, files


def stale_figures(run_dir: pathlib.Path, name: str, keep: Iterable[pathlib.Path]) -> list[pathlib.Path]:
    """Figure files of an earlier run of ``run_dir`` that this run does not write again.

    Only the files the folder's previous ``metrics.json`` lists as its figures (``run.figures``),
    with the names the runner gives them (``<experiment>-<what>.png`` / ``.pdf`` directly in the
    run folder; regular files or links, never a folder), and not in ``keep``: a re-run with
    ``--no-plot``, or one that draws fewer figures, leaves no figure that ``metrics.json`` does
    not list. Nothing the runner did not record is touched.
    """
    try:
        old = json.loads(read_regular(run_dir / "metrics.json", _io.MAX_JSON_BYTES))
        listed = [f for fig in old["run"]["figures"] for f in fig["files"]]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    kept = {os.path.abspath(p) for p in keep}
    out = []
    for file in listed:
        if not isinstance(file, str) or os.path.basename(file) != file:
            continue
        stem, dot, fmt = file.rpartition(".")
        path = run_dir / file
        if (dot and fmt in FIGURE_FORMATS and stem.startswith(f"{name}-") and len(stem) > len(name) + 1
                and (path.is_symlink() or path.is_file()) and os.path.abspath(path) not in kept):
            out.append(path)
    return sorted(set(out))


# ----------------------------------------------------------------------------- seeds


def _resolve_seeds(experiment: Any, quick: bool, seeds, n_seeds) -> list[int]:
    if seeds is not None and n_seeds is not None:
        raise ValueError("seeds, n_seeds: give at most one of them")
    if seeds is not None:
        out = [check_int(s, "seeds", 0, MAX_SEED) for s in seeds]
        if not out or len(set(out)) != len(out):
            raise ValueError(f"seeds: expected distinct non-negative integers, got {list(seeds)[:20]}")
        if len(out) > MAX_SEEDS:
            raise ValueError(f"seeds: {len(out)} seeds requested, at most {MAX_SEEDS:,} per run")
        return out
    if n_seeds is None:
        n_seeds = experiment.QUICK_SEEDS if quick else experiment.PAPER_SEEDS
    if isinstance(n_seeds, bool) or int(n_seeds) != n_seeds or n_seeds < 1:
        raise ValueError(f"n_seeds: expected a positive integer, got {n_seeds!r}")
    if n_seeds > MAX_SEEDS:
        raise ValueError(f"n_seeds: {n_seeds} seeds requested, at most {MAX_SEEDS:,} per run")
    return list(range(int(n_seeds)))


def parse_seeds(text: str, *, name: str = "seeds") -> list[int]:
    """Parse ``"0,1,2"`` or ranges ``"0-4,7"`` into a list of distinct seeds.

    Parameters
    ----------
    text : str
        Comma-separated integers in [0, 2**63 - 1] (:data:`MAX_SEED`) or ``LOW-HIGH`` ranges.
    name : str, default "seeds"
        The field named in the errors (a script's other lists of distinct integers, e.g.
        ``"--sizes"``, use the same parser).

    Raises
    ------
    ValueError
        An entry that is not an integer in [0, 2**63 - 1] or ``LOW-HIGH`` range, an empty entry, a
        reversed range (``10-5``), a value given twice, or more than :data:`MAX_SEEDS` values
        (checked before any list is built).
    """
    if not isinstance(text, str):
        raise TypeError(f"{name}: expected a string such as '0-4,7', got {type(text).__name__}")
    ranges: list[tuple[int, int]] = []
    total = 0
    for raw in text.split(","):
        part = raw.strip()
        lo_text, dash, hi_text = part.partition("-")
        try:   # ASCII digits only: int() also reads "١" and "1_0"
            lo = number_from_text(lo_text.strip(), int)
            hi = number_from_text(hi_text.strip(), int) if dash else lo
        except ValueError:
            raise ValueError(
                f"{name}: expected comma-separated non-negative integers (ASCII digits) or ranges like "
                f"0-4, got {part!r} in {text!r}") from None
        if lo < 0 or hi < 0:
            raise ValueError(f"{name}: expected non-negative integers, got {part!r}")
        if hi > MAX_SEED:
            raise ValueError(f"{name}: expected integers at most 2**63 - 1 (a seed names its result files), "
                             f"got {short_repr(part)}")
        if hi < lo:
            raise ValueError(f"{name}: range {part!r} is reversed (expected LOW-HIGH with LOW <= HIGH)")
        total += hi - lo + 1
        if total > MAX_SEEDS:
            raise ValueError(f"{name}: {text!r} asks for more than {MAX_SEEDS:,} values (the limit per run)")
        ranges.append((lo, hi))
    out = [s for lo, hi in ranges for s in range(lo, hi + 1)]
    if len(set(out)) != len(out):
        dup = sorted({s for s in out if out.count(s) > 1})[:5]
        raise ValueError(f"{name}: value(s) {dup} given more than once in {text!r}")
    return out


# ----------------------------------------------------------------------------- the runner


@dataclasses.dataclass
class _Plan:
    """Everything decided before any seed runs."""

    experiment: Any
    config: Any
    config_json: dict
    config_hash: str
    settings: str
    overrides: dict
    seeds: list[int]
    run_dir: pathlib.Path

    @property
    def name(self) -> str:
        return self.experiment.NAME


def plan_run(
    experiment: Any, *, quick: bool = False, config: Any = None, overrides: Mapping[str, Any] | None = None,
    seeds: Sequence[int] | None = None, n_seeds: int | None = None, out: str | os.PathLike = "results",
) -> _Plan:
    """Resolve the experiment, its configuration, its seeds and its results folder (no I/O)."""
    if isinstance(experiment, str):
        experiment = get_experiment(experiment)
    validate_experiment(experiment)
    base = config if config is not None else (experiment.quick_config() if quick else experiment.Config())
    config, parsed = _config.apply_overrides(experiment, base, overrides)
    check_ranges(experiment, config)          # the declared range of every field, then the experiment's own
    check = getattr(experiment, "check_config", None)
    if check is not None:
        check(config)
    seed_list = _resolve_seeds(experiment, quick, seeds, n_seeds)
    config_json = _io.config_to_json(config)
    settings = _config.settings_label(experiment, config)
    run_dir = pathlib.Path(out) / experiment.NAME / _config.run_folder_name(experiment, config)
    digest = run_dir.name.rsplit("-", 1)[1]
    return _Plan(experiment, config, config_json, digest, settings, parsed, seed_list, run_dir)


def run_experiment(
    experiment: Any,
    *,
    quick: bool = False,
    config: Any = None,
    overrides: Mapping[str, Any] | None = None,
    seeds: Sequence[int] | None = None,
    n_seeds: int | None = None,
    jobs: int | None = None,
    backend: str = "loky",
    scheduler: str | None = None,
    processes: bool = True,
    out: str | os.PathLike = "results",
    resume: bool = True,
    progress: bool = True,
    plot: bool = True,
    echo: Callable[[str], None] | None = print,
) -> RunReport:
    """Run an experiment's seeds, save them, summarise, plot and print a table.

    Parameters
    ----------
    experiment : str or Experiment
        A registered name (``"system-id"``, ...) or an object following the experiment
        protocol (see :mod:`corrpriors.runner.protocol`).
    quick : bool, default False
        Start from ``quick_config()`` and ``QUICK_SEEDS`` instead of ``Config()`` and ``PAPER_SEEDS``.
    config : Config, optional
        An explicit starting config (overrides ``quick`` for the settings, not for the seed count).
    overrides : mapping of str to value, optional
        Config fields to replace (``reproduce --set key=value``); strings are parsed by the
        field's type. Recorded in ``metrics.json``.
    seeds : sequence of int, optional
        The seed indices to run (at most :data:`MAX_SEEDS`, each an int in [0, 2**63 - 1]).
        Default ``range(n_seeds)``.
    n_seeds : int, optional
        Run seeds ``0 .. n_seeds - 1``. Default ``QUICK_SEEDS`` or ``PAPER_SEEDS``.
    jobs : int, optional
        Parallel workers (``-1`` or ``None``: all cores, capped at the number of seeds).
    backend : {"loky", "dask", "ray"}, default "loky"
        ``loky``: joblib processes on this machine (``jobs=1`` runs in-process).
        ``dask``: a Dask cluster at ``scheduler``, or a ``LocalCluster`` with ``jobs``
        workers. ``ray``: the Ray cluster at ``scheduler`` or a local one. Dask and
        Ray are the optional ``[dist]`` extra.
    scheduler : str, optional
        Cluster address (``tcp://host:8786`` for Dask, ``ray://host:10001`` or ``auto`` for Ray);
        refused with ``backend="loky"``, which runs on this machine and would ignore it.
    processes : bool, default True
        Dask ``LocalCluster`` only: worker processes (True) or threads in this process.
    out : path, default "results"
        Output directory ``DIR``; results go to ``DIR/NAME/<label>-<hash>``.
    resume : bool, default True
        Skip seeds already on disk with the same config (corrupt or partial files are
        recomputed). ``False`` recomputes every seed of this configuration.
    progress : bool, default True
        Show a tqdm progress bar (seeds done, time left) on stderr.
    plot : bool, default True
        Draw the figures after writing ``metrics.json``.
    echo : callable or None, default print
        Where the table and messages go; ``None`` silences them.

    Returns
    -------
    RunReport

    Raises
    ------
    OutputError
        The results folder cannot be created or written (raised before any seed runs);
        :class:`~corrpriors.runner.RunLocked` if another run is writing it.
    ConfigMismatch
        The folder holds seeds of another configuration (never reused or overwritten).
    RunInterrupted
        Ctrl-C; the finished seeds are on disk.
    RunFailed
        A seed, the summary or a figure failed; the finished seeds are on disk.
    """
    plan = plan_run(experiment, quick=quick, config=config, overrides=overrides, seeds=seeds,
                    n_seeds=n_seeds, out=out)
    return run_plan(plan, jobs=jobs, backend=backend, scheduler=scheduler, processes=processes,
                    resume=resume, progress=progress, plot=plot, echo=echo)


def _require_backend_package(backend: str) -> None:
    """Refuse a Dask/Ray backend whose package is missing before anything is written."""
    module = {"dask": "dask.distributed", "ray": "ray"}.get(backend)
    if module is None:
        return
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"--backend {backend} needs {module} ({exc}); {_DIST_HINT}") from None


def check_backend(backend: str, jobs: int | None, scheduler: str | None = None) -> int:
    """Validate ``backend``, ``jobs`` and ``scheduler``; return the number of workers (``-1``/None: all cores).

    A ``scheduler`` (a cluster address) needs the ``dask`` or ``ray`` backend: ``loky`` runs the
    seeds on this machine and would ignore it.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend: expected one of {', '.join(BACKENDS)}, got {backend!r}")
    if scheduler is not None and backend == "loky":
        raise ValueError(f"scheduler: a cluster address ({scheduler!r}) needs --backend dask or ray; the "
                         "loky backend runs the seeds on this machine and would ignore it")
    _require_backend_package(backend)
    if jobs is None or jobs == -1:
        jobs = os.cpu_count() or 1
    if isinstance(jobs, bool) or int(jobs) != jobs or jobs < 1:
        raise ValueError(f"jobs: expected a positive integer or -1, got {jobs!r}")
    return int(jobs)


def check_run_folder(plan: _Plan) -> None:
    """Check a locked run folder before any seed runs: its ``config.json`` (written if absent) records
    this configuration, and the files replaced at the end are not pipes or devices.

    Raises
    ------
    ConfigMismatch
        ``config.json`` records another configuration.
    OutputError
        ``config.json``, ``metrics.json`` or ``warnings.log`` is not a regular file.
    """
    _io.check_config_record(plan.run_dir, plan.name, plan.config_json, plan.config_hash)
    for kept in ("metrics.json", "warnings.log"):  # replaced at the end: refuse a pipe or device now
        _io.check_not_special(plan.run_dir / kept)


def run_plan(plan: _Plan, *, jobs: int | None = None, backend: str = "loky", scheduler: str | None = None,
             processes: bool = True, resume: bool = True, progress: bool = True, plot: bool = True,
             echo: Callable[[str], None] | None = print, lock: bool = True) -> RunReport:
    """Run a planned experiment (see :func:`run_experiment`).

    ``lock=False`` when the caller already holds the folder's
    :class:`~corrpriors.runner._io.RunLock`.
    """
    t_start = time.perf_counter()
    n_jobs = check_backend(backend, jobs, scheduler)
    _io.check_not_inside_run(plan.run_dir)
    seed_dir = _io.prepare_run_dir(plan.run_dir)
    held = _io.RunLock(plan.run_dir).acquire() if lock else None
    try:
        check_run_folder(plan)
        return _run_locked(plan, seed_dir, n_jobs, backend, scheduler, processes, resume, progress,
                           plot, echo or (lambda _msg: None), t_start)
    finally:
        if held is not None:
            held.release()


def _run_locked(plan: _Plan, seed_dir: pathlib.Path, jobs: int, backend: str, scheduler, processes: bool,
                resume: bool, progress: bool, plot: bool, say: Callable[[str], None], t_start: float) -> RunReport:
    exp, name = plan.experiment, plan.name
    n_x = len(list(exp.x_values(plan.config)))
    stored: dict[int, _io.StoredSeed] = {}
    notes: list[str] = []
    on_disk = 0
    for s in plan.seeds:
        found = _io.load_seed(seed_dir, s, experiment=name, config_json=plan.config_json,
                              check=_seed_check(exp, n_x, s), notes=notes if resume else None)
        on_disk += found is not None
        if found is not None and resume:
            stored[s] = found
    skipped = [s for s in plan.seeds if s in stored]
    pending = [s for s in plan.seeds if s not in stored]
    jobs = max(1, min(jobs, len(pending) or 1))
    for line in wrap(f"{name}: {exp.DESCRIPTION}", "", "  "):
        say(line)
    n = len(plan.seeds)
    disk = f"{on_disk} on disk" + (" (not reused: --no-resume)" if on_disk and not resume else "")
    say(f"  {_seeds(n)}: {disk}, {len(pending)} to run ({backend}, {_workers(jobs)}) -> {plan.run_dir}")
    for note in notes:
        for line in wrap(f"note: {note}", "  ", "    "):
            say(line)
    renamed = _migration_note(name, stored)
    if renamed:
        say(f"  note: {renamed}")
    measured = _measured_costs(seed_dir, name, plan.config_json)
    if pending and measured:
        estimate = RunEstimate(len(pending), jobs, measured, "the seeds on disk")
        if estimate.wall > ESTIMATE_ABOVE:
            for line in estimate.lines():
                say(line)
    prior = model_estimate(exp, plan.config, len(pending), jobs) if pending and not measured else None
    if prior is not None:
        _LOG.info("%s: %s", name, prior.text())
        if prior.wall > ESTIMATE_ABOVE:
            for line in prior.lines():
                say(line)
    n_x = len(list(exp.x_values(plan.config)))
    computed: list[int] = []
    try:
        if pending:
            _compute(plan, seed_dir, pending, len(skipped), n_x, jobs, backend, scheduler, processes,
                     progress, computed, say if not measured else None)
    except KeyboardInterrupt:
        raise RunInterrupted(name, len(skipped) + len(computed), len(plan.seeds), plan.run_dir) from None
    except (_io.OutputError, _io.ConfigMismatch):
        raise
    except OSError as exc:
        raise _io.OutputError(exc.filename or plan.run_dir, _io._reason(exc)) from None
    except Exception as exc:
        raise RunFailed(name, len(skipped) + len(computed), len(plan.seeds), plan.run_dir, exc) from exc

    try:
        return _finish(plan, seed_dir, computed, skipped, plot, say, t_start, jobs, backend,
                       None if prior is None else prior.record())
    except KeyboardInterrupt:
        raise RunInterrupted(name, len(plan.seeds), len(plan.seeds), plan.run_dir) from None
    except (_io.OutputError, _io.ConfigMismatch):
        raise
    except OSError as exc:
        raise _io.OutputError(exc.filename or plan.run_dir, _io._reason(exc)) from None
    except Exception as exc:
        raise RunFailed(name, len(plan.seeds), len(plan.seeds), plan.run_dir, exc) from exc


def _compute(plan: _Plan, seed_dir: pathlib.Path, pending: list[int], done: int, n_x: int, jobs: int,
             backend: str, scheduler, processes: bool, progress: bool, computed: list[int],
             estimate_to: Callable[[str], None] | None = None) -> None:
    """Run the pending seeds, saving each as it finishes.

    With ``estimate_to`` (no seed of this configuration measured before), the first finished
    seed's cost gives the estimate of the whole run, said there when it exceeds
    :data:`ESTIMATE_ABOVE` seconds.
    """
    from tqdm.auto import tqdm

    tasks: list[Task] = [(plan.experiment.run_seed, plan.config, plan.name, s) for s in pending]
    results = _iter_results(tasks, backend, jobs, scheduler, processes)
    with tqdm(total=len(plan.seeds), initial=done, desc=plan.name, unit="seed", disable=not progress,
              file=sys.stderr, ncols=min(WIDTH, shutil.get_terminal_size((WIDTH, 20)).columns),
              leave=False) as bar:
        try:
            for seed, result, (elapsed, cpu), caught in results:
                check_seed_result(plan.experiment, n_x, seed, result)
                _io.save_seed(seed_dir, seed, result, experiment=plan.name, config_json=plan.config_json,
                              elapsed=elapsed, cpu=cpu, warnings=caught)
                computed.append(seed)
                if estimate_to is not None and len(computed) == 1 and len(pending) > 1:
                    estimate = RunEstimate(len(pending), jobs, [(elapsed, cpu)], f"seed {seed}")
                    if estimate.wall > ESTIMATE_ABOVE:
                        with tqdm.external_write_mode(file=sys.stderr):
                            for line in estimate.lines():
                                estimate_to(line)
                bar.set_postfix_str(f"seed {seed}: {elapsed:.0f} s")
                bar.update(1)
        finally:
            close = getattr(results, "close", None)
            if close is not None:
                close()


def _seed_check(experiment: Any, n_x: int, seed: int) -> Callable[[SeedResult], Any]:
    """What a stored seed must satisfy to be reused: every metric's curves of length ``n_x``."""
    return lambda result: check_seed_result(experiment, n_x, seed, result)


def _finish(plan: _Plan, seed_dir: pathlib.Path, computed: list[int], skipped: list[int], plot: bool,
            say: Callable[[str], None], t_start: float, jobs: int = 1, backend: str = "loky",
            estimate: dict | None = None) -> RunReport:
    exp, name = plan.experiment, plan.name
    stored: dict[int, _io.StoredSeed] = {}
    n_x = len(list(exp.x_values(plan.config)))
    for s in plan.seeds:
        loaded = _io.load_seed(seed_dir, s, experiment=name, config_json=plan.config_json,
                               check=_seed_check(exp, n_x, s))
        if loaded is None:  # pragma: no cover - only if the disk changes under our feet
            raise RuntimeError(f"{name}: seed {s} vanished or was corrupted after it was written")
        stored[s] = loaded
    results = {s: st.result for s, st in stored.items()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = summarise(exp, plan.config, results)
        summary["extra"] = _io.to_jsonable(summary.get("extra", {}))
        specs: list[FigureSpec] = []
        if plot:
            figures_fn = getattr(exp, "figures", None)
            specs = (figures_fn(plan.config, results, summary) if figures_fn is not None
                     else default_figures(exp, summary))
    status = claims_status(exp, plan.settings, len(plan.seeds))
    _mark_figures(specs, status, plan.settings, len(plan.seeds))
    all_warnings = [w for st in stored.values() for w in st.meta.get("warnings", [])] + _collect(caught)
    by_category: dict[str, int] = {}
    for w in all_warnings:
        by_category[w["category"]] = by_category.get(w["category"], 0) + int(w["count"])
    log_path = plan.run_dir / "warnings.log"
    summary["run"] = {
        "settings": plan.settings,
        "config_hash": plan.config_hash,
        "folder": plan.run_dir.name,
        "overrides": _io.to_jsonable(plan.overrides),
        "resolved": _resolved(plan.config_json, summary["config"]),
        "claims": status,
        "warnings": {"count": int(sum(by_category.values())), "by_category": by_category, "log": log_path.name},
        "figures": [{"files": [f"{spec.name}.png", f"{spec.name}.pdf"], "caption": spec.caption} for spec in specs],
    }
    cpu = run_cpu_seconds(stored, computed)
    if estimate is not None:   # the cost model's prior estimate against what the seeds measured
        summary["run"]["estimate"] = dict(estimate, measured_cpu_seconds=cpu if computed else None)
    metrics_path = plan.run_dir / "metrics.json"
    replaced = _replaced_seeds_note(metrics_path, plan.seeds)
    saved, files = _figure_files(specs, plan.run_dir)
    files[metrics_path] = _io.json_bytes(summary)
    files[log_path] = _warnings_log_bytes(plan, all_warnings)
    # the record, its log and its figures replace the previous ones together; figures of an
    # earlier run that this one does not draw (--no-plot) go in the same change
    atomic_write_many(files, remove=stale_figures(plan.run_dir, name, files))
    for line in wrap(replaced, "  ", "    ") if replaced is not None else ():
        say(line)
    figure_paths = tuple(p for sf in saved for p in sf.paths)
    say(format_table(summary))
    elapsed = time.perf_counter() - t_start
    say(f"  done in {duration(elapsed)} wall; " + (
        f"{_seeds(len(computed))} computed, {duration(cpu)} CPU"
        if computed else "every seed read from disk"))
    return RunReport(
        name=name, out_dir=plan.run_dir, metrics_path=metrics_path, figures=figure_paths,
        computed_seeds=tuple(sorted(computed)), skipped_seeds=tuple(skipped), elapsed=elapsed,
        summary=summary, saved_figures=tuple(saved), warnings=by_category, warnings_log=log_path,
        cpu_seconds=cpu, in_process=plan_in_process(len(computed), jobs, backend),
    )


def seed_text(seeds: Iterable[int]) -> str:
    """``seeds`` as :func:`parse_seeds` reads them, runs joined: ``[0, 1, 2, 5]`` -> ``"0-2,5"``."""
    parts: list[str] = []
    ordered = sorted(int(s) for s in seeds)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def _replaced_seeds_note(metrics_path: pathlib.Path, seeds: Sequence[int]) -> str | None:
    """One ``note:`` line when ``metrics.json`` (and the figures) summarised other seeds of this
    configuration than the run about to replace it (None otherwise, or if it cannot be read).

    The seed files of both runs stay in ``seeds/``; the note says how to summarise them together.
    """
    try:
        old = json.loads(read_regular(metrics_path, _io.MAX_JSON_BYTES))["seeds"]
        before = sorted({int(s) for s in old})
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None
    if before == sorted(int(s) for s in seeds):
        return None
    return (f"note: metrics.json and the figures summarised seeds {seed_text(before)}; they now summarise "
            f"seeds {seed_text(seeds)} (the seed files of both stay in seeds/: --seeds "
            f"{seed_text(set(before) | {int(s) for s in seeds})} summarises all of them, reading them from disk)")


def plan_in_process(n_seeds: int, jobs: int, backend: str) -> bool:
    """Whether ``n_seeds`` seeds on ``jobs`` workers of ``backend`` run in this process (see ``_iter_loky``)."""
    return backend == "loky" and (jobs == 1 or n_seeds <= 1)


def run_cpu_seconds(stored: Mapping[int, Any], computed: Sequence[int]) -> float:
    """CPU seconds the seeds ``computed`` in this call took (as recorded in their seed files)."""
    return float(sum(float(stored[s].meta.get("cpu_seconds") or 0.0) for s in computed if s in stored))


def _resolved(requested: dict, used: dict) -> dict:
    """Fields whose recorded value differs from the requested one (a sentinel replaced)."""
    return {k: {"given": requested[k], "used": used[k]} for k in requested if k in used and used[k] != requested[k]}


def _warnings_log_bytes(plan: _Plan, entries: list[dict]) -> bytes:
    """The text of a run's ``warnings.log``: every warning, merged by category, message and place."""
    total = sum(int(w["count"]) for w in entries)
    lines = [f"# warnings of {plan.name}, configuration {plan.run_dir.name}, seeds {plan.seeds[:10]}"
             f"{' ...' if len(plan.seeds) > 10 else ''}: {total} in total", ""]
    merged: dict[tuple[str, str, str], int] = {}
    for w in entries:
        key = (w["category"], w["message"], w["where"])
        merged[key] = merged.get(key, 0) + int(w["count"])
    for (category, message, where), count in sorted(merged.items(), key=lambda kv: (kv[0][0], -kv[1])):
        lines.append(f"{count:6d} x {category} at {where}:")
        lines += [f"         {line}" for line in message.splitlines() or [""]]
        if category in WARNING_NOTES:
            lines.append(f"         ({WARNING_NOTES[category]})")
    return ("\n".join(lines) + "\n").encode()


__all__ = [
    "BACKENDS",
    "WARNING_NOTES",
    "MAX_SEED",
    "MAX_SEEDS",
    "RunFailed",
    "RunInterrupted",
    "RunReport",
    "claims_status",
    "format_table",
    "check_run_folder",
    "parse_seeds",
    "check_backend",
    "plan_run",
    "run_experiment",
    "run_plan",
    "seed_generator",
    "summarise",
]
