"""``corrpriors psrl ENV_ID``: the command line of :mod:`corrpriors.experiments.gym_psrl`."""

from __future__ import annotations

import argparse

from ..experiments.gym_psrl import (
    ALL_METHODS,
    DEFAULT_SEEDS,
    DEFAULT_STEPS,
    KIND,
    METHODS,
    QUICK_SEEDS,
    QUICK_STEPS,
    PSRLExperiment,
)
from .gym import add_run_arguments, run_command


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``psrl`` arguments to ``parser``."""
    parser.description = (
        "Posterior-sampling RL on any discrete Gymnasium environment that publishes its model "
        "(env.unwrapped.P), on the real reset/step loop: terminal states are absorbing (read from the "
        "table or learned when reached), restarts are not data, rewards r(s, a, s') known (default) or "
        "learned. Every E steps and at the last step the greedy policy is scored exactly under the true model: "
        "normalized_return (0 = uniformly random, 1 = optimal; higher is better), the probability of "
        "reaching the goal and the expected return within the horizon. "
        "Results: OUT/psrl-<ENV_ID>/<settings>-<hash>/ (metrics.json, seeds/, PNG and PDF figures); a "
        "re-run resumes."
    )
    add_run_arguments(parser, kind=KIND, seeds=DEFAULT_SEEDS, quick_seeds=QUICK_SEEDS)
    parser.add_argument("--steps", default=None, metavar="N",
                        help=f"environment steps per run (default: {DEFAULT_STEPS}; --quick: {QUICK_STEPS})")
    parser.add_argument("--eval-every", default=None, metavar="E",
                        help="steps between two scorings of the greedy policy (default: 50); the last step is "
                             "scored too")
    parser.add_argument("--replan-every", default=None, metavar="R",
                        help="steps between two posterior updates and replans (default: 50; the longest "
                             "interval with --replan-on-revisit or --replan-on-doubling)")
    parser.add_argument("--replan-on-doubling", default=None, action=argparse.BooleanOptionalAction,
                        help="also replan as soon as a state-action pair's visits have doubled since the last "
                             "replan, its first visit included (TSDE; default: off -- up to a replan per new pair)")
    parser.add_argument("--replan-on-revisit", default=None, action=argparse.BooleanOptionalAction,
                        help="also replan as soon as a state-action pair visited since the last replan comes back "
                             "with its visits doubled: the doubling rule without the first visits, so that a plan "
                             "caught in a cycle (a wall it keeps bumping into) is not followed on (default: on)")
    parser.add_argument("--samples", default=None, metavar="M",
                        help="posterior draws per replan of the sampling variants (default: 10)")
    parser.add_argument("--discount", default=None, metavar="GAMMA",
                        help="discount of planning and of normalized_return (default: 0.99)")
    parser.add_argument("--horizon", default=None, metavar="H",
                        help="steps of the goal probability and of the horizon return (default: 100)")
    parser.add_argument("--learn-rewards", action="store_true",
                        help="learn the rewards (Normal-Gamma posterior per state and action) instead of "
                             "using the environment's r(s, a, s')")
    parser.add_argument("--rewards", default=None, choices=("transition", "expected"),
                        help="known rewards: the environment's r(s, a, s') (transition, the default) or R(s, a) "
                             "averaged under the true transitions (expected: the easier known-R(s, a) setting, "
                             "which reveals what each action earns on average)")
    parser.add_argument("--terminals", default=None, choices=("known", "observed"),
                        help="terminal states read from the environment's table with the rewards (known, the "
                             "default) or learned when a step reports terminated (observed)")
    parser.add_argument("--methods", default=None, metavar="M1,M2,...",
                        help=f"some of {', '.join(ALL_METHODS)}, comma-separated (default: {', '.join(METHODS)})")


def run(args: argparse.Namespace) -> int:
    """Run ``corrpriors psrl``; return the exit code (0 ok, 1 a seed failed, 2 bad arguments)."""
    options = {"steps": args.steps, "eval_every": args.eval_every, "replan_every": args.replan_every,
               "replan_on_doubling": args.replan_on_doubling,
               "replan_on_revisit": args.replan_on_revisit,
               "n_samples": args.samples, "discount": args.discount, "horizon": args.horizon,
               "learn_rewards": True if args.learn_rewards else None, "rewards": args.rewards,
               "terminals": args.terminals, "features": args.features,
               "methods": args.methods}
    return run_command(PSRLExperiment, args, options)


__all__ = ["configure", "run"]
