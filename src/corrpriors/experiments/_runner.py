"""The seed-sweep runner behind ``corrpriors reproduce``.

:func:`run_experiment` runs an experiment module's ``run_seed`` for every requested seed
(in parallel with joblib/loky, on a Dask cluster or on Ray), writes each finished seed
to disk at once, skips seeds already on disk with the same config (``resume``), then
writes ``metrics.json``, draws the figures and prints a short table.

Seed ``k`` of experiment ``NAME`` always gets the generator
``numpy.random.default_rng([k, zlib.crc32(NAME.encode())])``, whatever the backend, the
number of workers or the order in which seeds finish, so every backend gives the same
numbers.

Seeds are the unit of parallelism: inside a seed, BLAS runs single-threaded (through
threadpoolctl in-process and on Dask/Ray workers; joblib's loky does the same for its
workers), because the experiments' small matrices gain nothing from BLAS threads and a
busy machine loses a lot to oversubscription.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import sys
import time
import types
import zlib
from typing import Any, Callable, Iterator, Sequence, Union

import numpy as np

from . import _io
from ._registry import get_experiment, validate_module

BACKENDS = ("loky", "dask", "ray")

_DIST_HINT = "install the optional extra: pip install 'corrpriors[dist]'"


@dataclasses.dataclass(frozen=True)
class RunReport:
    """What one :func:`run_experiment` call did.

    Attributes
    ----------
    name : str
        The experiment's name.
    out_dir : pathlib.Path
        ``DIR/NAME``.
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
    """

    name: str
    out_dir: pathlib.Path
    metrics_path: pathlib.Path
    figures: tuple
    computed_seeds: tuple
    skipped_seeds: tuple
    elapsed: float
    summary: dict


def seed_generator(name: str, seed: int) -> np.random.Generator:
    """Return the generator of seed ``seed`` of experiment ``name``.

    ``numpy.random.default_rng([seed, zlib.crc32(name.encode())])``: distinct
    experiments never share a stream, and the stream does not depend on the backend.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed: expected a non-negative integer, got {seed!r}")
    return np.random.default_rng([int(seed), zlib.crc32(name.encode())])


def _execute_seed(
    run_seed: Callable, config: Any, name: str, seed: int, blas_threads: int | None = None
) -> tuple[int, dict, tuple[float, float]]:
    """Run one seed (on whatever worker); return ``(seed, arrays, (wall seconds, CPU seconds))``.

    ``blas_threads`` caps the BLAS/OpenMP threads of the worker (through threadpoolctl,
    when installed) so that parallel seeds do not oversubscribe the cores.
    """
    start, cpu_start = time.perf_counter(), time.process_time()
    limiter = None
    if blas_threads is not None:
        try:
            from threadpoolctl import threadpool_limits

            limiter = threadpool_limits(limits=int(blas_threads))
        except ImportError:  # pragma: no cover - threadpoolctl ships with most installs
            limiter = None
    try:
        result = run_seed(config, seed_generator(name, seed))
    finally:
        if limiter is not None:
            limiter.restore_original_limits()
    if not isinstance(result, dict):
        raise TypeError(f"{name}.run_seed must return a dict of arrays, got {type(result).__name__}")
    arrays = {str(k): np.asarray(v) for k, v in result.items()}
    return int(seed), arrays, (time.perf_counter() - start, time.process_time() - cpu_start)


def _check_seed_result(module: types.ModuleType, n_x: int, seed: int, result: dict) -> None:
    """Raise ValueError if ``result`` does not have every metric curve with the right shape."""
    for key, value in result.items():
        if value.dtype == object:
            raise ValueError(f"{module.NAME}: seed {seed}: {key!r} is an object array (plain arrays only)")
    for metric in module.METRICS:
        keys = [k for k in result if k.startswith(metric + "__")]
        if not keys:
            raise ValueError(
                f"{module.NAME}: seed {seed}: no '{metric}__<method>' arrays in the result "
                f"(got keys {sorted(result)})"
            )
        for key in keys:
            if result[key].shape != (n_x,):
                raise ValueError(
                    f"{module.NAME}: seed {seed}: {key!r} must have shape (len(x_values),) = ({n_x},), "
                    f"got {result[key].shape}"
                )


# ----------------------------------------------------------------------------- backends


def _iter_loky(tasks: list, jobs: int) -> Iterator[tuple[int, dict, tuple[float, float]]]:
    if jobs == 1 or len(tasks) == 1:
        for task in tasks:
            yield _execute_seed(*task, 1)
        return
    from joblib import Parallel, delayed

    parallel = Parallel(n_jobs=jobs, backend="loky", return_as="generator_unordered")
    yield from parallel(delayed(_execute_seed)(*task) for task in tasks)


def _iter_dask(
    tasks: list, jobs: int, scheduler: str | None, processes: bool
) -> Iterator[tuple[int, dict, tuple[float, float]]]:
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


def _iter_ray(tasks: list, jobs: int, scheduler: str | None) -> Iterator[tuple[int, dict, tuple[float, float]]]:
    try:
        import ray  # type: ignore[import-not-found]
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


def _iter_results(
    tasks: list, backend: str, jobs: int, scheduler: str | None, processes: bool
) -> Iterator[tuple[int, dict, tuple[float, float]]]:
    if backend == "loky":
        return _iter_loky(tasks, jobs)
    if backend == "dask":
        return _iter_dask(tasks, jobs, scheduler, processes)
    return _iter_ray(tasks, jobs, scheduler)


# ----------------------------------------------------------------------------- summary


def _methods(module: types.ModuleType, metric: str, result: dict) -> list[str]:
    prefix = metric + "__"
    return [k[len(prefix):] for k in result if k.startswith(prefix)]


def summarise(
    module: types.ModuleType, config: Any, seed_results: dict[int, dict[str, np.ndarray]]
) -> dict:
    """Build the ``metrics.json`` record from the per-seed arrays.

    ``mean`` and ``std`` are taken over seeds for every x value; ``std`` is the sample
    standard deviation (``ddof=1``) and 0 when there is a single seed. Methods keep the
    order of the first seed's keys; a method missing in some seed is an error.
    """
    seeds = sorted(seed_results)
    if not seeds:
        raise ValueError("seed_results: expected at least one seed")
    first = seed_results[seeds[0]]
    metrics: dict[str, dict] = {}
    for metric, better in module.METRICS.items():
        methods: dict[str, dict] = {}
        for method in _methods(module, metric, first):
            key = f"{metric}__{method}"
            missing = [s for s in seeds if key not in seed_results[s]]
            if missing:
                raise ValueError(f"{module.NAME}: {key!r} is missing in seeds {missing}")
            values = np.stack([np.asarray(seed_results[s][key], dtype=float) for s in seeds])
            mean = values.mean(axis=0)
            std = values.std(axis=0, ddof=1) if len(seeds) > 1 else np.zeros_like(mean)
            methods[method] = {"mean": mean.tolist(), "std": std.tolist()}
        metrics[metric] = {"better": better, "methods": methods}
    summary = {
        "experiment": module.NAME,
        "x": {"name": module.X_NAME, "values": [float(x) for x in module.x_values(config)]},
        "seeds": [int(s) for s in seeds],
        "config": _io.config_to_json(config),
        "metrics": metrics,
        "extra": {},
    }
    extra_fn = getattr(module, "summarise_extra", None)
    if extra_fn is not None:
        extra = extra_fn(config, seed_results, _io.to_jsonable(metrics))
        summary["extra"] = _io.to_jsonable(extra or {})
    return _io.to_jsonable(summary)


def _format_x(x: float) -> str:
    return f"{x:g}" if abs(x) < 1e6 else f"{x:.3g}"


def format_table(summary: dict, max_columns: int = 6) -> str:
    """A short plain-text table: mean ± std of every method at a few x values, then the
    experiment's ``extra["notes"]`` (strings) and ``extra["claims"]``."""
    xs = summary["x"]["values"]
    if len(xs) <= max_columns:
        cols = list(range(len(xs)))
    else:
        cols = sorted(set(np.linspace(0, len(xs) - 1, max_columns).round().astype(int).tolist()))
    lines = [f"{summary['experiment']}: {len(summary['seeds'])} seed(s)"]
    for metric, block in summary["metrics"].items():
        methods = block["methods"]
        width = max([len(m) for m in methods] + [len(summary["x"]["name"])])
        head = f"  {metric} ({block['better']} is better)"
        lines.append(head)
        lines.append(
            "    " + summary["x"]["name"].ljust(width) + "".join(_format_x(xs[c]).rjust(16) for c in cols)
        )
        for method, stats in methods.items():
            cells = []
            for c in cols:
                m, s = stats["mean"][c], stats["std"][c]
                cells.append(("nan" if m is None else f"{m:.3f}±{0.0 if s is None else s:.3f}").rjust(16))
            lines.append("    " + method.ljust(width) + "".join(cells))
    extra = summary.get("extra") if isinstance(summary.get("extra"), dict) else {}
    for note in extra.get("notes", []):
        lines.append(f"  {note}")
    for claim in extra.get("claims", []):
        mark = "holds" if claim.get("holds") else "DOES NOT HOLD"
        lines.append(f"  [{mark}] {claim.get('claim', '')}: {claim.get('detail', '')}")
    return "\n".join(lines)


def _default_plot(summary: dict, out_dir: pathlib.Path) -> list[pathlib.Path]:
    from ..plotting._curves import plot_metric_curves, save_png_pdf

    paths: list[pathlib.Path] = []
    for metric in summary["metrics"]:
        fig, _ = plot_metric_curves(summary, metric)
        paths += save_png_pdf(fig, out_dir / f"{summary['experiment']}-{metric}")
    return paths


# ----------------------------------------------------------------------------- the runner


def _resolve_seeds(module: types.ModuleType, quick: bool, seeds, n_seeds) -> list[int]:
    if seeds is not None and n_seeds is not None:
        raise ValueError("seeds, n_seeds: give at most one of them")
    if seeds is not None:
        out = [int(s) for s in seeds]
        if not out or any(s < 0 for s in out) or len(set(out)) != len(out):
            raise ValueError(f"seeds: expected distinct non-negative integers, got {list(seeds)}")
        return out
    if n_seeds is None:
        n_seeds = module.QUICK_SEEDS if quick else module.PAPER_SEEDS
    if isinstance(n_seeds, bool) or int(n_seeds) != n_seeds or n_seeds < 1:
        raise ValueError(f"n_seeds: expected a positive integer, got {n_seeds!r}")
    return list(range(int(n_seeds)))


def run_experiment(
    experiment: Union[str, types.ModuleType],
    *,
    quick: bool = False,
    config: Any = None,
    seeds: Sequence[int] | None = None,
    n_seeds: int | None = None,
    jobs: int | None = None,
    backend: str = "loky",
    scheduler: str | None = None,
    processes: bool = True,
    out: Union[str, os.PathLike] = "results",
    resume: bool = True,
    progress: bool = True,
    plot: bool = True,
    echo: Callable[[str], None] | None = print,
) -> RunReport:
    """Run an experiment's seeds, save them, summarise, plot and print a table.

    Parameters
    ----------
    experiment : str or module
        A registered name (``"system-id"``, ...) or an experiment module.
    quick : bool, default False
        Use ``quick_config()`` and ``QUICK_SEEDS`` instead of ``Config()`` and ``PAPER_SEEDS``.
    config : Config, optional
        An explicit config (overrides ``quick`` for the settings, not for the seed count).
    seeds : sequence of int, optional
        The seed indices to run. Default ``range(n_seeds)``.
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
        Cluster address (``tcp://host:8786`` for Dask, ``ray://host:10001`` or ``auto`` for Ray).
    processes : bool, default True
        Dask ``LocalCluster`` only: worker processes (True) or threads in this process.
    out : path, default "results"
        Output directory ``DIR``; results go to ``DIR/NAME``.
    resume : bool, default True
        Skip seeds already on disk with the same config (corrupt or partial files
        are recomputed). ``False`` recomputes every seed.
    progress : bool, default True
        Show a tqdm progress bar (seeds done, time left) on stderr.
    plot : bool, default True
        Draw the figures after writing ``metrics.json``.
    echo : callable or None, default print
        Where the table and messages go; ``None`` silences them.

    Returns
    -------
    RunReport
    """
    t_start = time.perf_counter()
    module = get_experiment(experiment) if isinstance(experiment, str) else experiment
    if not isinstance(module, types.ModuleType):
        raise TypeError(f"experiment: expected a name or a module, got {type(experiment).__name__}")
    validate_module(module)
    name = module.NAME
    if backend not in BACKENDS:
        raise ValueError(f"backend: expected one of {', '.join(BACKENDS)}, got {backend!r}")
    if config is None:
        config = module.quick_config() if quick else module.Config()
    seed_list = _resolve_seeds(module, quick, seeds, n_seeds)
    config_json = _io.config_to_json(config)
    n_x = len(list(module.x_values(config)))
    say = echo or (lambda _msg: None)

    out_dir = pathlib.Path(out) / name
    seed_dir = out_dir / "seeds"
    seed_dir.mkdir(parents=True, exist_ok=True)

    skipped: list[int] = []
    pending: list[int] = []
    for s in seed_list:
        if resume and _io.load_seed(seed_dir, s, experiment=name, config_json=config_json) is not None:
            skipped.append(s)
        else:
            pending.append(s)

    if jobs is None or jobs == -1:
        jobs = os.cpu_count() or 1
    if isinstance(jobs, bool) or int(jobs) != jobs or jobs < 1:
        raise ValueError(f"jobs: expected a positive integer or -1, got {jobs!r}")
    jobs = max(1, min(int(jobs), len(pending) or 1))

    say(
        f"{name}: {module.DESCRIPTION}\n"
        f"  {len(seed_list)} seed(s), {len(skipped)} already on disk, {len(pending)} to run "
        f"({backend}, {jobs} worker(s)) -> {out_dir}"
    )
    computed: list[int] = []
    if pending:
        from tqdm.auto import tqdm

        tasks = [(module.run_seed, config, name, s) for s in pending]
        with tqdm(
            total=len(seed_list), initial=len(skipped), desc=name, unit="seed",
            disable=not progress, file=sys.stderr, dynamic_ncols=True,
        ) as bar:
            for seed, arrays, (elapsed, cpu) in _iter_results(tasks, backend, jobs, scheduler, processes):
                _check_seed_result(module, n_x, seed, arrays)
                _io.save_seed(
                    seed_dir, seed, arrays, experiment=name, config_json=config_json, elapsed=elapsed, cpu=cpu
                )
                computed.append(seed)
                bar.set_postfix_str(f"seed {seed}: {elapsed:.1f}s")
                bar.update(1)

    seed_results: dict[int, dict[str, np.ndarray]] = {}
    for s in seed_list:
        loaded = _io.load_seed(seed_dir, s, experiment=name, config_json=config_json)
        if loaded is None:  # pragma: no cover - only if the disk changes under our feet
            raise RuntimeError(f"{name}: seed {s} vanished or was corrupted after it was written")
        seed_results[s] = loaded

    summary = summarise(module, config, seed_results)
    metrics_path = out_dir / "metrics.json"
    _io.write_json(metrics_path, summary)

    figures: list[pathlib.Path] = []
    if plot:
        plot_fn = getattr(module, "plot", None)
        if plot_fn is None:
            figures = _default_plot(summary, out_dir)
        else:
            figures = [pathlib.Path(p) for p in (plot_fn(config, seed_results, summary, out_dir) or [])]
    say(format_table(summary))
    elapsed = time.perf_counter() - t_start
    say(f"  metrics: {metrics_path}" + (f"; figures: {', '.join(p.name for p in figures)}" if figures else ""))
    say(f"  done in {elapsed:.1f}s")
    return RunReport(
        name=name,
        out_dir=out_dir,
        metrics_path=metrics_path,
        figures=tuple(figures),
        computed_seeds=tuple(sorted(computed)),
        skipped_seeds=tuple(skipped),
        elapsed=elapsed,
        summary=summary,
    )


def parse_seeds(text: str) -> list[int]:
    """Parse ``"0,1,2"`` or ranges ``"0-4,7"`` into a list of seeds."""
    out: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if not part:
                continue
            if "-" in part:
                lo, hi = part.split("-", 1)
                out.extend(range(int(lo), int(hi) + 1))
            else:
                out.append(int(part))
    except ValueError:
        raise ValueError(f"seeds: expected comma-separated integers or ranges like 0-4, got {text!r}") from None
    if not out:
        raise ValueError(f"seeds: no seed given in {text!r}")
    return out


__all__ = ["BACKENDS", "RunReport", "format_table", "parse_seeds", "run_experiment", "seed_generator", "summarise"]
