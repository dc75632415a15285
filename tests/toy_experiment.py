"""A tiny experiment following the protocol, for the runner, CLI, figure and report tests.

``run_seed`` leaves one marker file per call in ``Config.log_dir`` (``call-<seed>-<pid>-<uuid>``)
so tests can count which seeds were computed, and by which process, even in worker processes.
``Config.sleep`` makes a seed slow (for Ctrl-C / SIGKILL tests), ``Config.n_warnings`` makes it
warn. ``Config.lengthscale = 0`` is a sentinel ("the number of points") that ``resolve_config``
replaces.

Run it from a subprocess with ``python tests/toy_experiment.py reproduce toy-runner ...``.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import sys
import time
import uuid
import warnings

import numpy as np

from corrpriors.runner import Claim, SeedResult

NAME = "toy-runner"
DESCRIPTION = "toy experiment for the runner tests"
X_NAME = "steps"
METRICS = {"error": "lower", "score": "higher"}
PAPER_SEEDS = 4
QUICK_SEEDS = 2
ENVIRONMENT = "Toy world"
X_LABEL = "steps taken"
METRIC_LABELS = {"error": "error (arbitrary units)", "score": "score (points)"}


@dataclasses.dataclass(frozen=True)
class Config:
    n_points: int = 5
    noise: float = 0.1
    log_dir: str = ""
    grid: tuple = (1, 2)
    sleep: float = 0.0
    n_warnings: int = 0
    lengthscale: float = 0.0
    flag: bool = False
    label: str = "x"


def quick_config() -> Config:
    return Config(n_points=3)


def x_values(config: Config) -> list[float]:
    return [float(10 * i) for i in range(config.n_points)]


def check_config(config: Config) -> None:
    if config.n_points < 1:
        raise ValueError(f"n_points: expected a positive integer, got {config.n_points}")


def resolve_config(config: Config) -> Config:
    if config.lengthscale > 0:
        return config
    return dataclasses.replace(config, lengthscale=float(config.n_points))


def run_seed(config: Config, *, rng: np.random.Generator) -> SeedResult:
    seed = int(rng.bit_generator.seed_seq.entropy[0])
    if config.log_dir:
        (pathlib.Path(config.log_dir) / f"call-{seed}-{os.getpid()}-{uuid.uuid4().hex}").touch()
    end = time.monotonic() + config.sleep
    while time.monotonic() < end:
        time.sleep(0.02)
    for k in range(config.n_warnings):
        warnings.warn(f"toy warning number {k % 2}", UserWarning, stacklevel=1)
    x = np.asarray(x_values(config))
    noise = config.noise * rng.standard_normal((2, x.size))
    return SeedResult(
        curves={"error": {"a": 1.0 / (1.0 + x) + noise[0], "b": 2.0 / (1.0 + x) + noise[1]},
                "score": {"a": x + noise[0]}},
        extras={"seed": np.array([seed])},
        method_extras={"offset": {"a": noise[0], "b": noise[1]}},
    )


def summarise_extra(config, results, metrics):
    a = np.mean(metrics["error"]["methods"]["a"]["mean"])
    b = np.mean(metrics["error"]["methods"]["b"]["mean"])
    return {
        "n_seed_results": len(results),
        "claims": [Claim("a beats b", bool(a < b), f"{a:.3f} vs {b:.3f}")],
        "notes": ["a toy note"],
    }


if __name__ == "__main__":  # a `corrpriors` command line that knows the toy experiment
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import toy_experiment
    from corrpriors.cli import main
    from corrpriors.runner import register

    register(NAME, toy_experiment)
    sys.exit(main(sys.argv[1:]))
