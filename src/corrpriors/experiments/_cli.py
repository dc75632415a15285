"""``corrpriors reproduce [NAME|all] [options]``: run the paper's experiments.

Dispatched to from :mod:`corrpriors.cli` through :func:`configure` and :func:`run`. Exit
codes: 0 all ran, 1 an experiment failed (its finished seeds are kept), 2 bad arguments or an
output location that cannot be used (nothing ran), 130 stopped by Ctrl-C.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time
import traceback

from . import _config, _io
from ._protocol import ExperimentUnavailable
from ._registry import available_experiments, experiment_names, get_experiment
from ._runner import (
    BACKENDS,
    WARNING_NOTES,
    RunFailed,
    RunInterrupted,
    RunReport,
    check_backend,
    parse_seeds,
    plan_run,
    run_plan,
)

PROG = "corrpriors reproduce"


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``reproduce`` arguments to ``parser``."""
    parser.description = (
        "Run the paper's experiments: every seed is saved to DIR/NAME/<settings>-<config hash>/seeds "
        "as it finishes (a re-run resumes; another configuration gets another folder), then "
        "metrics.json, the figures (.png, .pdf), warnings.log and a table. Without NAME (or with "
        "'all') every available experiment runs. See everything at once with: corrpriors report DIR."
    )
    parser.add_argument(
        "name", nargs="?", default="all", metavar="NAME",
        help=f"experiment: {', '.join(experiment_names(include_extra=False))} or all (default: all)",
    )
    parser.add_argument("--quick", action="store_true",
                        help="small settings that finish in about a minute (claim checks are then indicative)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="set a Config field of the experiment (repeatable; needs NAME), e.g. "
                             "--set scale=10 or --set transitions=0,100,1000; checked against the field's type "
                             "and recorded in metrics.json")
    seeds = parser.add_mutually_exclusive_group()
    seeds.add_argument("--seeds", type=str, default=None,
                       help="seed indices, e.g. 0,1,2 or 0-9 (at most 100,000)")
    seeds.add_argument("--n-seeds", type=int, default=None,
                       help="run seeds 0..N-1 (default: the paper's count, or the quick count)")
    parser.add_argument("--out", default="results", help="output directory DIR (default: ./results)")
    add_execution_arguments(parser)
    parser.add_argument("--list", action="store_true", help="list the experiments and whether they are available")


def add_execution_arguments(parser: argparse.ArgumentParser) -> None:
    """Add how seeds are run and what is kept: --jobs, --backend, --scheduler, --resume, --progress, --plot."""
    parser.add_argument("--jobs", "-j", type=int, default=-1,
                        help="parallel workers, one seed each (default -1: all cores)")
    parser.add_argument("--backend", choices=BACKENDS, default="loky",
                        help="loky (joblib, default), dask or ray (optional extras: pip install 'corrpriors[dist]')")
    parser.add_argument("--scheduler", default=None,
                        help="cluster address: tcp://host:8786 for dask (default: a local cluster), "
                             "ray://host:10001 or auto for ray")
    parser.add_argument("--resume", action=argparse.BooleanOptionalAction, default=True,
                        help="skip seeds already on disk with the same configuration (default: on)")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                        help="show a progress bar (default: on)")
    parser.add_argument("--plot", action=argparse.BooleanOptionalAction, default=True,
                        help="draw the figures (default: on; --no-plot writes metrics.json only)")


def _list() -> int:
    for name, entry in available_experiments().items():
        if isinstance(entry, str):
            print(f"{name:15s} unavailable: {entry}")
        else:
            print(f"{name:15s} {entry.DESCRIPTION} (paper seeds {entry.PAPER_SEEDS}, quick seeds {entry.QUICK_SEEDS})")
    return 0


def _error(message: str, prog: str = PROG) -> None:
    print(f"{prog}: error: {message}", file=sys.stderr)


def _names(args: argparse.Namespace) -> list[str] | None:
    if args.name == "all":
        return experiment_names(include_extra=False)
    if args.name in experiment_names():
        return [args.name]
    _error(f"unknown experiment {args.name!r}; expected one of {', '.join(experiment_names())} or all")
    return None


def run(args: argparse.Namespace) -> int:
    """Run the experiments named in ``args``; return the exit code (see the module docstring)."""
    if args.list:
        return _list()
    try:
        return _run(args)
    except KeyboardInterrupt:  # outside a seed loop (planning, imports): nothing was half-written
        print("stopped; no seed was running; nothing to resume", file=sys.stderr)
        return 130


def _run(args: argparse.Namespace) -> int:
    t_start = time.perf_counter()
    names = _names(args)
    if names is None:
        return 2
    try:
        seeds = parse_seeds(args.seeds) if args.seeds is not None else None
        overrides = _config.parse_assignments(args.overrides)
        if overrides and args.name == "all":
            raise ValueError("--set needs one experiment NAME (the fields differ between experiments)")
        check_backend(args.backend, args.jobs)
    except ValueError as exc:
        _error(str(exc))
        return 2
    status = 0
    plans = []
    for name in names:
        try:
            experiment = get_experiment(name)
        except ExperimentUnavailable as exc:
            print(f"{name}: unavailable, skipped ({exc})", file=sys.stderr)
            status = 1 if args.name != "all" else status
            continue
        try:
            plans.append(plan_run(experiment, quick=args.quick, overrides=overrides, seeds=seeds,
                                  n_seeds=args.n_seeds, out=args.out))
        except ValueError as exc:
            _error(f"{name}: {'--set ' if overrides else ''}{exc}")
            return 2
    if not plans:
        if status == 0:
            print(f"{PROG}: no experiment is available yet", file=sys.stderr)
        return 1
    return execute_plans(plans, args, status, t_start)


def execute_plans(plans: list, args: argparse.Namespace, status: int = 0, t_start: float | None = None,
                  prog: str = PROG) -> int:
    """Lock every plan's folder, run the plans, print the closing summary; return the exit code.

    ``args`` carries the run options of ``reproduce`` (``jobs``, ``backend``, ``scheduler``,
    ``resume``, ``progress``, ``plot``, ``out``); also used by ``corrpriors sysid`` / ``psrl``
    (``prog`` names the command in error messages).
    """
    t_start = time.perf_counter() if t_start is None else t_start
    locks = []
    try:
        try:  # every folder checked and locked before any seed runs
            for plan in plans:
                _io.prepare_run_dir(plan.run_dir)
                locks.append(_io.RunLock(plan.run_dir).acquire())
        except _io.OutputError as exc:
            _error(str(exc), prog)
            return 2
        reports, status = _run_plans(plans, args, status, prog)
    finally:
        for held in locks:
            held.release()
    if status == 130:
        return status
    if reports:
        print(closing_summary(reports, args.out, time.perf_counter() - t_start))
    return status


def _run_plans(plans: list, args: argparse.Namespace, status: int,
               prog: str = PROG) -> tuple[list[RunReport], int]:
    reports: list[RunReport] = []
    for plan in plans:
        try:
            reports.append(run_plan(plan, jobs=args.jobs, backend=args.backend, scheduler=args.scheduler,
                                    resume=args.resume, progress=args.progress, plot=args.plot, lock=False))
        except RunInterrupted as exc:
            print(str(exc), file=sys.stderr)
            return reports, 130
        except ImportError as exc:  # a missing optional backend: say how to install it
            _error(str(exc), prog)
            return reports, 1
        except (_io.OutputError, _io.ConfigMismatch) as exc:
            _error(f"{plan.name}: {exc}", prog)
            return reports, 2
        except RunFailed as exc:  # one broken experiment must not stop `reproduce all`
            log = _write_error_log(plan.run_dir, exc)
            kept = (f"{exc.saved} of {exc.total} seeds saved under {exc.run_dir} (kept; run again to resume)"
                    if exc.saved else "no seed was saved")
            print(f"{prog}: {plan.name} failed: {exc}; {kept}" + (f"; traceback in {log}" if log else ""),
                  file=sys.stderr)
            status = 1
    return reports, status


def _write_error_log(run_dir: pathlib.Path, exc: RunFailed) -> pathlib.Path | None:
    text = "".join(traceback.format_exception(type(exc.cause), exc.cause, exc.cause.__traceback__))
    path = pathlib.Path(run_dir) / "error.log"
    try:
        _io.atomic_write_bytes(path, text.encode())
    except OSError:
        return None
    return path


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def closing_summary(reports: list[RunReport], out: str | pathlib.Path, elapsed: float) -> str:
    """Say what ran, where its results and figures are, what each figure shows, and the warnings."""
    lines = ["", f"Summary: {_plural(len(reports), 'experiment')} in {elapsed:.1f} s; results under {out}"]
    for r in reports:
        run = r.summary.get("run", {})
        n = len(r.summary.get("seeds", []))
        lines.append(f"  {r.name}: {r.out_dir}/ ({_plural(n, 'seed')}, {run.get('settings', '?')} settings)")
        entries = [("metrics.json", "the numbers above, the claim checks and the configuration used")]
        for fig in r.saved_figures:
            stem = fig.paths[0].with_suffix("").name if fig.paths else "?"
            entries.append((f"{stem}.png/.pdf", fig.caption))
        width = max(len(e[0]) for e in entries)
        lines += [f"    {f.ljust(width)}  {what}" for f, what in entries]
    statuses = {r.summary.get("run", {}).get("claims", "paper-scale") for r in reports
                if r.summary.get("extra", {}).get("claims")}
    indicative = sorted(s for s in statuses if s != "paper-scale")
    if indicative:
        lines.append(f"  claim checks: {indicative[0] if len(indicative) == 1 else 'indicative (see each table)'}")
    total: dict[str, int] = {}
    for r in reports:
        for cat, n in r.warnings.items():
            total[cat] = total.get(cat, 0) + n
    if total:
        parts = [f"{n:,} {cat}" + (f" ({WARNING_NOTES[cat]})" if cat in WARNING_NOTES else "")
                 for cat, n in sorted(total.items(), key=lambda kv: -kv[1])]
        lines.append(f"  warnings: {_plural(sum(total.values()), 'warning')} collected, not shown: " + "; ".join(parts))
        lines.append("    full text: warnings.log in each results folder")
    else:
        lines.append("  warnings: none")
    lines.append(f"  everything on one page: corrpriors report {out}")
    return "\n".join(lines)


__all__ = ["closing_summary", "configure", "execute_plans", "run"]
