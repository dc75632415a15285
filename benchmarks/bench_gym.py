"""Gymnasium toy-text environments against the floors of issue 13 (system id and PSRL).

Everything goes through the public API: ``corrpriors.envs.from_gymnasium`` (the exact model,
used only to score), ``random_exploration``, ``CorrelatedTransitionModel.for_mdp`` (relative
encoding, collapsed-bound scale selection -- the defaults), ``DirichletTransitionModel`` and
``run_psrl`` on the real ``reset``/``step`` loop.

Parts
-----
``sysid``
    FrozenLake 8x8 slippery, uniformly random exploration with restarts; mean Hellinger distance
    over the non-terminal (s, a) rows at T = 100 / 300 / 1,000 / 3,000 for the relative and the
    absolute correlated prior and the Dirichlet baselines (alpha = 1e-3 and 1).
``psrl``
    PSRL with known rewards r(s, a, s'), gamma = 0.99, a replan every 50 steps, 10 posterior
    draws, on FrozenLake 8x8 slippery (5,000 steps), CliffWalking-v1 (3,000) and
    CliffWalkingSlippery-v1 (5,000). The greedy policy is scored every 50 steps: the probability
    of reaching the goal within 100 steps from the start (exact, under the true model), the
    expected undiscounted return over those 100 steps and the normalised discounted return.
``taxi``
    Taxi-v4: PSRL (1,000 steps) with the relative correlated prior and the sparse Dirichlet;
    seconds per fit of one action's model.

Usage::

    nice -n 10 python benchmarks/bench_gym.py [--part sysid|psrl|taxi|all] [--seeds N]
        [--taxi-seeds N] [--log benchmarks/out/bench_gym.log]

Progress goes to the log file; the summary table is printed at the end and the raw numbers are
written to ``benchmarks/out/bench_gym_<part>.json`` (gitignored).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time
import warnings

import gymnasium
import numpy as np
from _proc import output_name

from corrpriors._fileio import atomic_write_bytes
from corrpriors.applications import (
    CorrelatedTransitionModel,
    DirichletTransitionModel,
    PSRLAgent,
    run_psrl,
)
from corrpriors.envs import from_gymnasium, random_exploration
from corrpriors.exceptions import JitterWarning
from corrpriors.mdp import hellinger, policy_iteration

OUT = pathlib.Path(__file__).resolve().parent / "out"
T_GRID = (100, 300, 1000, 3000)
LAKE = {"id": "FrozenLake-v1", "map_name": "8x8", "is_slippery": True}
PSRL_ENVS = {
    "FrozenLake8x8": (LAKE, 5000, (500, 5000)),
    "CliffWalking": ({"id": "CliffWalking-v1"}, 3000, (500, 1000, 3000)),
    "CliffWalkingSlippery": ({"id": "CliffWalkingSlippery-v1"}, 5000, (500, 5000)),
}
HORIZON = 100


class Log:
    """Progress lines to a file (flushed), with the elapsed time."""

    def __init__(self, path: pathlib.Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(path, "a", buffering=1)
        self.t0 = time.perf_counter()

    def __call__(self, msg: str) -> None:
        self.file.write(f"[{time.perf_counter() - self.t0:8.1f} s] {msg}\n")


def goal_states(env, mdp) -> np.ndarray:
    """The success states: FrozenLake's G cell, otherwise the terminal states."""
    desc = getattr(env.unwrapped, "desc", None)
    if desc is not None and hasattr(env.unwrapped, "nrow"):
        return np.flatnonzero(np.asarray(desc).ravel() == b"G")
    return np.flatnonzero(mdp.terminal)


def horizon_stats(mdp, policy, goals, horizon=HORIZON) -> tuple[float, float]:
    """P(goal reached within ``horizon`` steps) and the expected undiscounted return over them.

    Exact: the state distribution from the start distribution pushed through P_pi, terminal
    states absorbing and paying nothing (the adapter's model).
    """
    S = mdp.n_states
    P_pi = mdp.transitions[np.arange(S), policy]
    r_pi = mdp.reward_matrix[np.arange(S), policy] * ~mdp.terminal
    d, total = np.asarray(mdp.initial_distribution, dtype=float), 0.0
    for _ in range(horizon):
        total += float(d @ r_pi)
        d = d @ P_pi
    return float(d[goals].sum()), total


def summary(values) -> dict:
    v = np.asarray(values, dtype=float)
    se = float(v.std(ddof=1) / np.sqrt(v.size)) if v.size > 1 else float("nan")
    return {"mean": float(v.mean()), "se": se, "values": v.tolist()}


# ------------------------------------------------------------------------------ system id
def sysid(seeds: int, log: Log) -> dict:
    env = gymnasium.make(**LAKE)
    mdp = from_gymnasium(env)
    live = ~mdp.terminal
    methods = {
        "pg (relative)": lambda: CorrelatedTransitionModel.for_mdp(mdp),
        "pg_absolute": lambda: CorrelatedTransitionModel.for_mdp(mdp, encoding="absolute"),
        "dirichlet_sparse (1e-3)": lambda: DirichletTransitionModel(64, 4, alpha=1e-3),
        "dirichlet_uniform (1)": lambda: DirichletTransitionModel(64, 4, alpha=1.0),
    }
    curves = {m: [] for m in methods}
    seconds = {m: [] for m in methods}
    for seed in range(seeds):
        data = random_exploration(env, T_GRID[-1], rng=seed)
        for name, make in methods.items():
            belief, done, row = make(), 0, []
            tic = time.process_time()
            for T in T_GRID:
                belief.update(data.states[done:T], data.actions[done:T], data.next_states[done:T])
                done = T
                row.append(float(hellinger(mdp.transitions[live], belief.mean()[live]).mean()))
            seconds[name].append(time.process_time() - tic)
            curves[name].append(row)
            log(f"sysid seed {seed} {name}: {np.round(row, 3).tolist()} "
                f"({seconds[name][-1]:.1f} s)")
    return {name: {"T": list(T_GRID),
                   "hellinger": [summary(np.asarray(c)[:, i]) for i in range(len(T_GRID))],
                   "cpu_seconds": summary(seconds[name])}
            for name, c in curves.items()}


# ------------------------------------------------------------------------------ PSRL
def psrl_run(env, mdp, make_belief, n_steps, seed, goals) -> dict:
    belief = make_belief()
    agent = PSRLAgent(belief, mdp.rewards, 0.99, variant="sampling", n_samples=10,
                      replan_every=50)
    tic = time.process_time()
    out = run_psrl(env, agent, n_steps, rng=seed, eval_every=50, true_mdp=mdp)
    cpu = time.process_time() - tic
    stats = np.array([horizon_stats(mdp, pi, goals) for pi in out["policies"]])
    fits = getattr(belief, "n_fits_", 0)
    return {"steps": out["steps"].tolist(), "success": stats[:, 0].tolist(),
            "return100": stats[:, 1].tolist(),
            "normalized_return": out["normalized_return"].tolist(),
            "cpu_seconds": cpu, "n_fits": fits,
            "seconds_per_fit": getattr(belief, "fit_seconds_", 0.0) / fits if fits else 0.0}


def psrl(seeds: int, log: Log, envs=PSRL_ENVS) -> dict:
    results = {}
    for env_name, (kwargs, n_steps, marks) in envs.items():
        env = gymnasium.make(**kwargs)
        mdp = from_gymnasium(env)
        goals = goal_states(env, mdp)
        optimal = horizon_stats(mdp, np.argmax(policy_iteration(mdp).q_values, axis=1), goals)
        methods = {"pg_sampling": lambda: CorrelatedTransitionModel.for_mdp(mdp),
                   "dirichlet_sparse_sampling": lambda: DirichletTransitionModel(
                       mdp.n_states, mdp.n_actions, alpha=1e-3)}
        results[env_name] = {"optimal": {"success": optimal[0], "return100": optimal[1]}}
        for name, make in methods.items():
            runs = []
            for seed in range(seeds):
                run = psrl_run(env, mdp, make, n_steps, seed, goals)
                runs.append(run)
                at = [run["steps"].index(m) for m in marks]
                log(f"psrl {env_name} {name} seed {seed}: success "
                    f"{[round(run['success'][i], 3) for i in at]} return100 "
                    f"{[round(run['return100'][i], 1) for i in at]} at {list(marks)} "
                    f"({run['cpu_seconds']:.1f} s)")
            idx = [runs[0]["steps"].index(m) for m in marks]
            results[env_name][name] = {
                "steps": list(marks),
                "success": [summary([r["success"][i] for r in runs]) for i in idx],
                "return100": [summary([r["return100"][i] for r in runs]) for i in idx],
                "normalized_return": [summary([r["normalized_return"][i] for r in runs])
                                      for i in idx],
                "cpu_seconds": summary([r["cpu_seconds"] for r in runs]),
                "seconds_per_fit": summary([r["seconds_per_fit"] for r in runs]),
            }
    return results


def taxi(seeds: int, log: Log) -> dict:
    return psrl(seeds, log, {"Taxi": ({"id": "Taxi-v4"}, 1000, (500, 1000))})


# ------------------------------------------------------------------------------ report
def fmt(s: dict, digits: int = 3) -> str:
    return f"{s['mean']:.{digits}f} ± {s['se']:.{digits}f}"


def report(res: dict, seeds: int) -> str:
    lines = []
    if "sysid" in res:
        lines.append(f"\nFrozenLake 8x8 slippery, mean Hellinger over non-terminal (s, a) "
                     f"({seeds} seeds, mean ± s.e.)")
        lines.append("method".ljust(26) + "".join(f"T={t}".rjust(16) for t in T_GRID))
        for name, r in res["sysid"].items():
            lines.append(name.ljust(26) + "".join(fmt(h).rjust(16) for h in r["hellinger"]))
    for part in ("psrl", "taxi"):
        for env_name, r in res.get(part, {}).items():
            opt = r["optimal"]
            lines.append(f"\n{env_name}: greedy policy every 50 steps; optimal success "
                         f"{opt['success']:.3f}, return over 100 steps {opt['return100']:.1f}")
            for name, m in r.items():
                if name == "optimal":
                    continue
                for i, step in enumerate(m["steps"]):
                    lines.append(f"  {name:<27} step {step:>5}: success {fmt(m['success'][i])}"
                                 f"  return100 {fmt(m['return100'][i], 1)}  normalized "
                                 f"{fmt(m['normalized_return'][i])}")
                lines.append(f"  {name:<27} cpu {fmt(m['cpu_seconds'], 1)} s per run, "
                             f"{fmt(m['seconds_per_fit'], 2)} s per fit")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--part", choices=("sysid", "psrl", "taxi", "all"), default="all")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--sysid-seeds", type=int, default=10)
    p.add_argument("--taxi-seeds", type=int, default=2)
    p.add_argument("--log", type=pathlib.Path, default=OUT / "bench_gym.log")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore", JitterWarning)
    log = Log(args.log)
    log(f"start {vars(args)}")
    res: dict = {}
    if args.part in ("sysid", "all"):
        res["sysid"] = sysid(args.sysid_seeds, log)
    if args.part in ("psrl", "all"):
        res["psrl"] = psrl(args.seeds, log)
    if args.part in ("taxi", "all"):
        res["taxi"] = taxi(args.taxi_seeds, log)
    OUT.mkdir(exist_ok=True)
    atomic_write_bytes(OUT / output_name(f"bench_gym_{args.part}", args, p, ignore=("part", "log")),
                       json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, **res},
                                  indent=1).encode())
    text = report(res, args.sysid_seeds)
    log(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
