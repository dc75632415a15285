"""``corrpriors reproduce [NAME|all] [options]``: run the paper's experiments.

Dispatched to from :mod:`corrpriors.cli` through :func:`configure` and :func:`run`.
"""

from __future__ import annotations

import argparse
import sys
import traceback

from ._registry import ExperimentUnavailable, available_experiments, experiment_names, get_experiment
from ._runner import BACKENDS, parse_seeds, run_experiment


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``reproduce`` arguments to ``parser``."""
    parser.description = (
        "Run the paper's experiments: every seed is saved to DIR/NAME/seeds as it finishes "
        "(a re-run resumes), then DIR/NAME/metrics.json, the figures (.png, .pdf) and a table. "
        "Without NAME (or with 'all') every available experiment runs."
    )
    parser.add_argument(
        "name", nargs="?", default="all", metavar="NAME",
        help=f"experiment: {', '.join(experiment_names(include_extra=False))} or all (default: all)",
    )
    parser.add_argument("--quick", action="store_true", help="small settings that finish in about a minute")
    seeds = parser.add_mutually_exclusive_group()
    seeds.add_argument("--seeds", type=str, default=None, help="seed indices, e.g. 0,1,2 or 0-9")
    seeds.add_argument("--n-seeds", type=int, default=None, help="run seeds 0..N-1 (default: the paper's count, or the quick count)")
    parser.add_argument("--jobs", "-j", type=int, default=-1, help="parallel workers (default -1: all cores)")
    parser.add_argument("--backend", choices=BACKENDS, default="loky",
                        help="loky (joblib, default), dask or ray (optional extras: pip install 'corrpriors[dist]')")
    parser.add_argument("--scheduler", default=None,
                        help="cluster address: tcp://host:8786 for dask (default: a local cluster), "
                             "ray://host:10001 or auto for ray")
    parser.add_argument("--out", default="results", help="output directory (default: ./results)")
    parser.add_argument("--resume", action=argparse.BooleanOptionalAction, default=True,
                        help="skip seeds already on disk with the same config (default: on)")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                        help="show a progress bar (default: on)")
    parser.add_argument("--list", action="store_true", help="list the experiments and whether they are available")


def _list() -> int:
    for name, entry in available_experiments().items():
        if isinstance(entry, str):
            print(f"{name:15s} unavailable: {entry}")
        else:
            print(f"{name:15s} {entry.DESCRIPTION} (paper seeds {entry.PAPER_SEEDS}, quick seeds {entry.QUICK_SEEDS})")
    return 0


def run(args: argparse.Namespace) -> int:
    """Run the experiments named in ``args``; return the exit code (0: all ran)."""
    if args.list:
        return _list()
    try:
        seeds = parse_seeds(args.seeds) if args.seeds is not None else None
    except ValueError as exc:
        print(f"corrpriors reproduce: error: {exc}", file=sys.stderr)
        return 2
    run_all = args.name == "all"
    if run_all:
        names = experiment_names(include_extra=False)
    elif args.name in experiment_names():
        names = [args.name]
    else:
        print(
            f"corrpriors reproduce: error: unknown experiment {args.name!r}; "
            f"expected one of {', '.join(experiment_names())} or all",
            file=sys.stderr,
        )
        return 2
    status = 0
    ran = 0
    for name in names:
        try:
            module = get_experiment(name)
        except ExperimentUnavailable as exc:
            print(f"{name}: unavailable, skipped ({exc})", file=sys.stderr)
            if not run_all:
                status = 1
            continue
        try:
            run_experiment(
                module, quick=args.quick, seeds=seeds, n_seeds=args.n_seeds, jobs=args.jobs,
                backend=args.backend, scheduler=args.scheduler, out=args.out, resume=args.resume,
                progress=args.progress,
            )
            ran += 1
        except ImportError as exc:  # a missing optional backend: say how to install it
            print(f"corrpriors reproduce: error: {exc}", file=sys.stderr)
            return 1
        except ValueError as exc:
            print(f"corrpriors reproduce: error: {name}: {exc}", file=sys.stderr)
            status = 1
        except Exception:  # one broken experiment must not stop `reproduce all`
            print(f"corrpriors reproduce: {name} failed (finished seeds are kept on disk):", file=sys.stderr)
            traceback.print_exc()
            status = 1
    if ran == 0 and status == 0:
        print("corrpriors reproduce: no experiment is available yet", file=sys.stderr)
        status = 1
    return status


__all__ = ["configure", "run"]
