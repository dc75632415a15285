"""Benchmark: the correlated belief's Hellinger-Bayes estimate, its draws and its cost (issue 27).

What ``corrpriors sysid`` scores by default since round 8 is every method's Bayes estimate under
the squared Hellinger loss; for the correlated belief (``pg``, the layer and the sparse-support
hypothesis of ``CorrelatedTransitionModel.for_mdp``) an average of Rao-Blackwellised values over
posterior draws. Per environment: a uniformly random walk of ``--transitions`` steps (as
``corrpriors sysid``), the belief fitted to it, then side by side in this process (CPU seconds,
``time.process_time``, one BLAS thread):

* ``fit``         -- the refit and the posterior mean: the baseline of every ratio;
* ``independent`` -- 256 independent posterior draws (round 7's estimate);
* ``fixed``       -- 256 draws in 128 antithetic pairs (``hellinger_estimate(256, rtol=0)``);
* ``default``     -- the default: antithetic pairs until the Monte-Carlo noise costs at most 1 %
  of the expected loss (``hellinger_estimate()``; ``draws`` says how many).

Every row also gives the Hellinger error against the true model (mean over reachable
non-terminal states and actions, as ``corrpriors sysid``) and ``noise``: the estimated
Monte-Carlo cost of the estimate in expected squared Hellinger loss, relative to the expected
loss (``_hellinger._noise_cost`` of the values averaged; the default stops below 0.01).

Run from the repository root::

    python benchmarks/bench_hellinger.py                 # FrozenLake 8x8, 16x16, 24x24 slippery
    python benchmarks/bench_hellinger.py --quick         # 8x8 only
    python benchmarks/bench_hellinger.py --taxi          # ... and Taxi-v4 (500 states, minutes)

Writes ``benchmarks/out/bench_hellinger.json``; a run with other settings writes a file whose
name lists them (``bench_hellinger-quick-taxi-transitions500.json``), so it never overwrites
another configuration's results.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
from _proc import output_name

from corrpriors._fileio import atomic_write_bytes
from corrpriors._threads import blas_threads
from corrpriors.applications.transitions import CorrelatedTransitionModel
from corrpriors.applications.transitions._hellinger import (
    _noise_cost,
    average_sqrt_draws,
    chunk_draws,
    from_sqrt_mean,
)
from corrpriors.envs import from_gymnasium, random_exploration, reachable_states
from corrpriors.exceptions import ConvergenceWarning, JitterWarning
from corrpriors.mdp import hellinger

ROOT = Path(__file__).resolve().parents[1]


def _frozen_lake(n: int) -> tuple[Any, Any]:
    from gymnasium.envs.toy_text.frozen_lake import generate_random_map

    env = gymnasium.make("FrozenLake-v1", desc=generate_random_map(n, seed=n), is_slippery=True)
    return env, from_gymnasium(env)


def _taxi() -> tuple[Any, Any]:
    env = gymnasium.make("Taxi-v4")
    return env, from_gymnasium(env)


def _independent(belief: Any, n: int, gen: np.random.Generator) -> np.ndarray:
    """Round 7's estimate: ``n`` independent draws, Rao-Blackwellised through the layer."""
    size = belief.n_states * belief.n_actions * belief.n_states

    def values(m: int) -> np.ndarray:
        return belief._layer.sqrt_draws(belief._counts, belief._base_draws(m, gen), rng=gen)

    r, _ = average_sqrt_draws(values, n, rtol=0.0, chunk=chunk_draws(size))
    return from_sqrt_mean(r)


def _noise(belief: Any, n_pairs: int, gen: np.random.Generator) -> float:
    """Estimated relative Monte-Carlo cost of ``n_pairs`` antithetic pairs (from 32 pairs)."""
    x = belief._sqrt_values(32, gen)
    return _noise_cost(x.sum(0), np.square(x).sum(0), 32) * 32 / n_pairs


def one(name: str, env: Any, mdp: Any, transitions: int) -> dict:
    data = random_exploration(env, transitions, rng=np.random.default_rng(0))
    live = np.ones(mdp.n_states, bool) if mdp.terminal is None else ~np.asarray(mdp.terminal)
    rows = np.flatnonzero(reachable_states(mdp) & live)

    def error(P: np.ndarray) -> float:
        return float(hellinger(mdp.transitions, P)[rows].mean())

    belief = CorrelatedTransitionModel.for_mdp(mdp)
    t0 = time.process_time()
    belief.update(data.states, data.actions, data.next_states)
    mean = belief.mean()
    fit = time.process_time() - t0
    out: dict[str, Any] = {"env": name, "states": mdp.n_states, "transitions": transitions,
                           "fit": {"cpu": fit, "error": error(mean)}}
    runs = {"independent": lambda g: _independent(belief, 256, g),
            "fixed": lambda g: belief.hellinger_estimate(256, rtol=0, rng=g),
            "default": lambda g: belief.hellinger_estimate(rng=g)}
    for label, run in runs.items():
        gen = np.random.default_rng(1)
        t0 = time.process_time()
        est = run(gen)
        cpu = time.process_time() - t0
        draws = belief.hellinger_draws_ if label == "default" else 256
        row = {"cpu": cpu, "ratio_to_fit": cpu / fit, "error": error(est), "draws": draws}
        if label != "independent":
            row["noise"] = _noise(belief, draws // 2, np.random.default_rng(2))
        out[label] = row
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="FrozenLake 8x8 only")
    parser.add_argument("--taxi", action="store_true", help="also Taxi-v4 (500 states)")
    parser.add_argument("--transitions", type=int, default=2000)
    args = parser.parse_args()
    cases = [(f"FrozenLake {n}x{n}", *_frozen_lake(n)) for n in ((8,) if args.quick else (8, 16, 24))]
    if args.taxi:
        cases.append(("Taxi-v4", *_taxi()))
    results = []
    print(f"{'environment':16s} {'S':>5s} {'fit s':>7s} | {'estimate':11s} {'draws':>5s} {'CPU s':>7s} "
          f"{'x fit':>6s} {'error':>7s} {'noise':>7s}   (mean's error)")
    with warnings.catch_warnings(), blas_threads(1):
        warnings.simplefilter("ignore", (ConvergenceWarning, JitterWarning))
        for name, env, mdp in cases:
            res = one(name, env, mdp, args.transitions)
            results.append(res)
            for label in ("independent", "fixed", "default"):
                r = res[label]
                noise = f"{r['noise']:.4f}" if "noise" in r else "      -"
                print(f"{name:16s} {res['states']:5d} {res['fit']['cpu']:7.2f} | {label:11s} "
                      f"{r['draws']:5d} {r['cpu']:7.2f} {r['ratio_to_fit']:6.2f} {r['error']:7.4f} "
                      f"{noise}   ({res['fit']['error']:.4f})", flush=True)
    path = ROOT / "benchmarks" / "out" / output_name("bench_hellinger", args, parser)
    atomic_write_bytes(path, json.dumps(results, indent=2).encode())
    print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
