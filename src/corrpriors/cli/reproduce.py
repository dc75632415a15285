"""``corrpriors reproduce [NAME|all] [options]``: run the paper's experiments.

Parses the options, plans one run per experiment (:mod:`corrpriors.runner`) and executes them. Exit
codes: 0 all ran, 1 an experiment failed (its finished seeds are kept), 2 bad arguments or an
output location that cannot be used (nothing ran), 130 stopped by Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys
import time

from ..runner import _config
from ..runner._run import check_backend, parse_seeds, plan_run
from ..runner._session import ExecutionOptions, execute_plans
from ..runner.protocol import ExperimentUnavailable
from ..runner.registry import available_experiments, experiment_names, get_experiment, unknown_name_hint
from ._common import add_execution_arguments, error, integer, out_dir

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
                        help="small settings: about 30 CPU seconds in all (claim checks are then indicative)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="set a Config field of the experiment (repeatable; needs NAME), e.g. "
                             "--set scale=10 or --set transitions=0,100,1000; checked against the field's type "
                             "and recorded in metrics.json")
    seeds = parser.add_mutually_exclusive_group()
    seeds.add_argument("--seeds", type=str, default=None,
                       help="seed indices, e.g. 0,1,2 or 0-9 (at most 100,000)")
    seeds.add_argument("--n-seeds", type=integer, default=None,
                       help="run seeds 0..N-1 (default: the paper's count, or the quick count)")
    parser.add_argument("--out", type=out_dir, default="results", help="output directory DIR (default: ./results)")
    add_execution_arguments(parser)
    parser.add_argument("--list", action="store_true", help="list the experiments and whether they are available")
    parser.add_argument("--list-settings", action="store_true",
                        help="print every setting of experiment NAME (--set KEY=VALUE) with its default (the "
                             "quick value with --quick) and valid range, and exit")


def _list() -> int:
    for name, entry in available_experiments().items():
        if isinstance(entry, str):
            print(f"{name:15s} unavailable: {entry}")
        else:
            print(f"{name:15s} {entry.DESCRIPTION} (paper seeds {entry.PAPER_SEEDS}, quick seeds {entry.QUICK_SEEDS})")
    return 0


def _list_settings(args: argparse.Namespace) -> int:
    from ..runner._ranges import describe_ranges

    if args.name == "all" or args.name not in experiment_names():
        error(PROG, f"--list-settings needs one experiment NAME: {', '.join(experiment_names())}")
        return 2
    try:
        experiment = get_experiment(args.name)
    except ExperimentUnavailable as exc:
        error(PROG, f"{args.name}: unavailable ({exc})")
        return 1
    print("\n".join(describe_ranges(experiment, experiment.quick_config() if args.quick else None)))
    return 0


def _names(args: argparse.Namespace) -> list[str] | None:
    if args.name == "all":
        return experiment_names(include_extra=False)
    if args.name in experiment_names():
        return [args.name]
    hint = unknown_name_hint(args.name)
    error(PROG, f"unknown experiment {args.name!r}{hint}; expected one of "
                f"{', '.join(experiment_names())} or all")
    return None


def run(args: argparse.Namespace) -> int:
    """Run the experiments named in ``args``; return the exit code (see the module docstring)."""
    if args.list:
        return _list()
    if args.list_settings:
        return _list_settings(args)
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
        check_backend(args.backend, args.jobs, args.scheduler)
    except ValueError as exc:
        error(PROG, str(exc))
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
            error(PROG, f"{name}: {'--set ' if overrides else ''}{exc}")
            return 2
    if not plans:
        if status == 0:
            print(f"{PROG}: no experiment is available yet", file=sys.stderr)
        return 1
    return execute_plans(plans, ExecutionOptions.from_namespace(args), status, t_start)


__all__ = ["configure", "run"]
