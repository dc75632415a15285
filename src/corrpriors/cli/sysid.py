"""``corrpriors sysid ENV_ID``: the command line of :mod:`corrpriors.experiments.gym_sysid`."""

from __future__ import annotations

import argparse

from ..experiments.gym_sysid import (
    DEFAULT_SEEDS,
    DEFAULT_TRANSITIONS,
    KIND,
    METHODS,
    QUICK_SEEDS,
    QUICK_TRANSITIONS,
    SysIdExperiment,
)
from .gym import add_run_arguments, run_command


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``sysid`` arguments to ``parser``."""
    parser.description = (
        "System identification on any discrete Gymnasium environment that publishes its model "
        "(env.unwrapped.P): uniformly random actions with restarts, then the Hellinger distance between the "
        "true and the learned P(s' | s, a), mean over reachable non-terminal states and actions (lower is "
        "better), at every T. Every method is scored by its Bayes estimate under the squared Hellinger loss "
        "where all have one (below 2,000 states with pg), else by its posterior mean; --set "
        f"point_estimate=mean scores the means. Methods: {', '.join(METHODS)}. "
        "Results: OUT/sysid-<ENV_ID>/<settings>-<hash>/ "
        "(metrics.json, seeds/, a PNG and PDF figure); a re-run resumes."
    )
    add_run_arguments(parser, kind=KIND, seeds=DEFAULT_SEEDS, quick_seeds=QUICK_SEEDS)
    parser.add_argument("--transitions", default=None, metavar="T1,T2,...",
                        help="the T grid, increasing (default: " + ",".join(map(str, DEFAULT_TRANSITIONS))
                             + "; --quick: " + ",".join(map(str, QUICK_TRANSITIONS)) + ")")
    parser.add_argument("--methods", default=None, metavar="M1,M2,...",
                        help=f"some of {', '.join(METHODS)} (default: all)")


def run(args: argparse.Namespace) -> int:
    """Run ``corrpriors sysid``; return the exit code (0 ok, 1 a seed failed, 2 bad arguments)."""
    options = {"transitions": args.transitions, "methods": args.methods, "features": args.features}
    return run_command(SysIdExperiment, args, options)


__all__ = ["configure", "run"]
