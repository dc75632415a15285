"""The command line shared by ``corrpriors sysid ENV_ID`` and ``corrpriors psrl ENV_ID``.

Both build one experiment object for the environment
(:class:`corrpriors.experiments._gym.GymExperiment`), turn their options into ``--set``
overrides of its ``Config`` and hand the plan to the runner of ``corrpriors reproduce``
(progress bar, resume, locks, ``metrics.json``, figures, closing summary). Exit codes: 0
done, 1 a seed failed (finished seeds are kept), 2 bad arguments or an
unusable output folder (one line on stderr; nothing ran), 130 Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from ._common import add_execution_arguments, integer, out_dir


def add_run_arguments(parser: argparse.ArgumentParser, *, kind: str, seeds: int | None = None,
                      quick_seeds: int | None = None) -> None:
    """Add ENV_ID, --env-kwargs and the runner's options (seeds, --quick, --out, --resume, ...)."""
    parser.add_argument("env_id", metavar="ENV_ID",
                        help="a registered Gymnasium id with Discrete spaces and a published model, e.g. "
                             "FrozenLake-v1, CliffWalking-v1, CliffWalkingSlippery-v1, Taxi-v4, "
                             "corrpriors/TunnelWorld-v0 (module:Id-v0 imports the module first)")
    parser.add_argument("--env-kwargs", default=None, metavar="JSON",
                        help="keyword arguments of gymnasium.make as a JSON object, e.g. "
                             "'{\"map_name\": \"8x8\", \"is_slippery\": true}' or a custom map "
                             "'{\"desc\": [\"SFFF\", \"FHFH\", \"FFFH\", \"HFFG\"]}' "
                             "(part of the results' identity)")
    parser.add_argument("--features", default=None, metavar="MODULE:FUNCTION",
                        help="state coordinates for the correlated beliefs: FUNCTION(env) returns an array of "
                             "shape (S, D) (default: what the environment publishes as "
                             "env.unwrapped.state_coordinates, or knows for FrozenLake, CliffWalking, Taxi, "
                             "Tuple observations; part of the results' identity)")
    parser.add_argument("--quick", action="store_true",
                        help="small settings for a first look (fewer transitions/steps and seeds)")
    group = parser.add_mutually_exclusive_group()
    seed_text = f"{seeds} seeds, --quick {quick_seeds}" if seeds is not None else "see above"
    group.add_argument("--seeds", default=None, metavar="LIST",
                       help=f"seed indices, e.g. 0-19 or 0,4,7 (default: 0..N-1, N = {seed_text})")
    group.add_argument("--n-seeds", type=integer, default=None, metavar="N", help="run seeds 0..N-1")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="set any other setting, e.g. --set lengthscale=3 or --set alpha_sparse=0.01 "
                             "(repeatable; checked against the setting's type; recorded in metrics.json)")
    parser.add_argument("--list-settings", action="store_true",
                        help="print every setting of the environment's experiment (--set KEY=VALUE) with its "
                             "default and valid range, and exit")
    parser.add_argument("--out", type=out_dir, default="results", metavar="DIR",
                        help=f"output directory (default: ./results); results go to "
                             f"DIR/{kind}-<ENV_ID>/<settings>-<hash>/")
    add_execution_arguments(parser)


def run_command(experiment_class: Any, args: argparse.Namespace, options: dict[str, Any]) -> int:
    """Build the environment's experiment, apply ``options`` (field -> value or None) and run it."""
    from ..runner import _config
    from ..runner._run import check_backend, parse_seeds, plan_run
    from ..runner._session import ExecutionOptions, execute_plans

    t_start = time.perf_counter()
    prog = f"corrpriors {experiment_class.KIND}"
    try:
        experiment = _make_experiment(experiment_class, args, prog)
        if args.list_settings:
            from ..runner._ranges import describe_ranges

            print("\n".join(describe_ranges(experiment, experiment.quick_config() if args.quick else None)))
            return 0
        seeds = parse_seeds(args.seeds) if args.seeds is not None else None
        overrides: dict[str, Any] = _config.parse_assignments(args.overrides)
        for key, value in options.items():
            if value is None:
                continue
            if key in overrides:
                raise ValueError(f"--{key.replace('_', '-')} and --set {key}=...: give only one of them")
            overrides[key] = value
        check_backend(args.backend, args.jobs, args.scheduler)
        plan = plan_run(experiment, quick=args.quick, overrides=overrides, seeds=seeds, n_seeds=args.n_seeds,
                        out=args.out)
    except (ValueError, TypeError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("stopped; no seed was running; nothing to resume", file=sys.stderr)
        return 130
    return execute_plans([plan], ExecutionOptions.from_namespace(args), 0, t_start, prog=prog)


def _make_experiment(experiment_class: Any, args: argparse.Namespace, prog: str) -> Any:
    """Build the environment's experiment; its warnings (a keyword argument of an unexpected type) go to stderr."""
    import warnings

    from ..exceptions import EnvironmentWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", EnvironmentWarning)
        experiment = experiment_class(args.env_id, args.env_kwargs)
    for w in caught:
        if issubclass(w.category, EnvironmentWarning):
            print(f"{prog}: warning: {w.message}", file=sys.stderr)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return experiment


__all__ = ["add_run_arguments", "run_command"]
