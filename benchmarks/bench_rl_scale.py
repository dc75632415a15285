"""Benchmark: system identification and PSRL at 10^4-10^5 states (issue 25), in one run.

Problem: ``bench_scale.TunnelGrid`` (side x side, 4 actions, random walk), the correlated
belief ``CorrelatedTransitionModel.for_mdp(info, prior="gmrf")`` (relative encoding, 10
categories, collapsed-bound scale selection), T = 10 S transitions. Every measurement runs in a
fresh process (CPU seconds of that process, peak resident memory VmHWM):

* ``sysid``  -- build (belief + counts) and refit of all actions at each ``--sides``; growth
  exponents in the number of states. With ``--baseline SRC`` the same child runs on another
  checkout's ``src`` (e.g. a worktree of 54b191b) at the sides it can hold (``--baseline-sides``).
* ``fit``    -- one ``CorrelatedMultinomial(precision=Q).fit`` (``bench_scale.grid_problem``,
  K = 5) at ``--fit-side``, this checkout and ``--baseline`` alternated ``--repeats`` times.
* ``psrl``   -- after the refit at ``--psrl-side``: one posterior draw and one planning step of
  the PSRL agent (discount 0.95, reward 1 at the goal corner).
* ``frozenlake`` -- Gymnasium FrozenLake on a random ``--psrl-side`` map: random-walk system
  identification (10 S transitions) and PSRL (20 side steps, one draw per episode), from Python
  (the library side of ``corrpriors sysid`` / ``psrl`` at scale).
* ``jobs``   -- refit of all actions at ``--jobs-side`` with ``n_jobs=1`` and ``n_jobs=2``
  (``--backend``, default loky; ``dask``: a local cluster of 2 one-thread worker processes),
  alternated ``--repeats`` times: the wall-clock ratio (the machine's load is printed), the
  same-scales check, peak memory of the process and its workers, and a load-independent ratio:
  the parallel run's schedule replayed with its fits' CPU seconds on 2 idle workers, over the
  serial run's fit CPU seconds (``_schedule_summary``).

Run from the repository root::

    python benchmarks/bench_rl_scale.py --quick
    python benchmarks/bench_rl_scale.py --sections sysid --sides 100,316 \
        --baseline /path/to/54b191b/src --baseline-sides 100

Writes ``benchmarks/out/bench_rl_scale.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from _proc import output_name, peak_mb

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent


def _belief(side: int, n_jobs: int = 1, backend: str = "threads", selection: str = "collapsed",
            max_iter: int = 100):
    from types import SimpleNamespace

    from bench_scale import TunnelGrid

    from corrpriors.applications import CorrelatedTransitionModel

    world = TunnelGrid(side)
    info = SimpleNamespace(n_states=world.n_states, n_actions=4, coordinates=world.coordinates)
    kw = {} if n_jobs == 1 else {"n_jobs": n_jobs, "backend": backend}
    if selection != "collapsed":
        kw["selection"] = selection
    if max_iter != 100:
        kw["max_iter"] = max_iter
    return world, CorrelatedTransitionModel.for_mdp(info, prior="gmrf", **kw)


def child_sysid(side: int, n_jobs: int = 1, psrl: bool = False,
                backend: str = "threads", selection: str = "collapsed", max_iter: int = 100) -> dict:
    world, _ = _belief(2)   # imports outside the timings
    world = None
    from bench_scale import TunnelGrid

    world = TunnelGrid(side)
    s, a, s2 = world.random_walk(10 * side * side, rng=np.random.default_rng(0))
    c0, w0 = time.process_time(), time.perf_counter()
    _, belief = _belief(side, n_jobs, backend, selection, max_iter)
    belief.update(s, a, s2)
    build = time.process_time() - c0
    cluster = _dask_client() if backend == "dask" and n_jobs != 1 else None
    c1, w1 = time.process_time(), time.perf_counter()
    belief.refit()
    out = {"side": side, "S": side * side, "T": 10 * side * side, "n_jobs": n_jobs,
           "selection": selection, "max_iter": max_iter,
           "build_cpu": build, "build_wall": w1 - w0, "refit_cpu": time.process_time() - c1,
           "refit_wall": time.perf_counter() - w1, "fits": belief.n_fits_,
           "scales": [float(m.scale_) for m in belief.models_]}
    local = sum(e["cpu"] for e in belief.fit_log_ if e["pid"] == os.getpid())
    out.update(_schedule_summary(belief.fit_log_, max(n_jobs, 1),
                                 max(out["refit_cpu"] - local, 0.0)))
    out["worker_peak_mb"] = _worker_peaks_mb()
    if cluster is not None:
        for obj in cluster:
            obj.close()
    if psrl:
        from corrpriors.applications import PSRLAgent

        rewards = np.zeros(world.n_states)
        rewards[world.goal] = 1.0
        agent = PSRLAgent(belief, rewards, 0.95, n_samples=1)
        c2, w2 = time.process_time(), time.perf_counter()
        agent.plan(rng=np.random.default_rng(1))
        out.update(psrl_cpu=time.process_time() - c2, psrl_wall=time.perf_counter() - w2)
    out["peak_mb"] = peak_mb()
    return out


def _dask_client():
    from dask.distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=None)
    return Client(cluster), cluster


def _worker_peaks_mb() -> list[float]:
    """Peak resident memory (VmHWM) of this process's worker processes (loky, Dask)."""
    import psutil

    peaks = []
    for proc in psutil.Process().children(recursive=True):
        try:
            text = Path(f"/proc/{proc.pid}/status").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("VmHWM:"):
                peaks.append(float(line.split()[1]) / 1024.0)
    return peaks


def _schedule_summary(log: list[dict], workers: int, glue_cpu: float) -> dict:
    """Load-independent view of a refit's schedule from its per-fit log (``fit_log_``).

    ``units``: the fits (action, thread CPU s, wall s); ``busy_cpu``: their CPU sum (the
    serial cost of the same fits); ``startup_cpu``: per worker process, its CPU seconds when
    its first fit started (start-up, imports, restoring the prior); ``sim_makespan``: the
    scheduler's rule (``_parallel.run_generators``: least attained service first) replayed on
    these fits on ``workers`` idle lanes (each action's fits in order; ties in the order the
    actions' first fits started; a worker process's lane opens
    after its start-up, this process's at once) with the measured CPU seconds as durations,
    plus ``glue_cpu`` (this process's CPU outside the fits: imputation, climb steps,
    pickling) -- what the schedule gives on an idle machine; ``span_wall``: first start to
    last end of the fits as run.
    """
    entries = sorted(log, key=lambda e: e["start"])
    order = list(dict.fromkeys(e["action"] for e in entries))   # the given order (first fits)
    chains: dict = {}
    for e in entries:
        chains.setdefault(e["action"], []).append(e["cpu"])
    startup = {}
    for e in entries:
        if e["pid"] != os.getpid():
            startup.setdefault(e["pid"], e["process_cpu"])
    free = sorted(list(startup.values()) + [0.0] * (workers - len(startup)))[:workers]
    ready, running, t, makespan = [(a, 0) for a in chains], [], 0.0, 0.0
    spent = dict.fromkeys(chains, 0.0)
    while ready or running:
        while ready and free and free[0] <= t:   # lanes open at their start-up
            # the scheduler's rule: least attained service first (ties: the given order)
            a, i = ready.pop(min(range(len(ready)), key=lambda r: (spent[ready[r][0]],
                                                                   order.index(ready[r][0]))))
            free.pop(0)
            running.append((t + chains[a][i], a, i))
        running.sort()
        if running and (not free or not ready or running[0][0] <= free[0]):
            t, a, i = running.pop(0)
            spent[a] += chains[a][i]
            free = sorted(free + [t])
            makespan = max(makespan, t)
            if i + 1 < len(chains[a]):
                ready.append((a, i + 1))
        else:
            t = free[0]
    busy = float(sum(e["cpu"] for e in entries))
    return {"units": [[e["action"], round(e["cpu"], 3), round(e["end"] - e["start"], 3)]
                      for e in entries],
            "busy_cpu": busy, "startup_cpu": list(startup.values()), "glue_cpu": glue_cpu,
            "sim_makespan": makespan + glue_cpu,
            "span_wall": (entries[-1]["end"] - entries[0]["start"]) if entries else 0.0}


def child_frozenlake(side: int, n_transitions: int, n_steps: int) -> dict:
    """Gymnasium FrozenLake on a random side x side map (slippery): system identification from
    a random walk, then PSRL (one draw per episode) -- nothing of size S^2 is formed."""
    import gymnasium
    from gymnasium.envs.toy_text.frozen_lake import generate_random_map

    from corrpriors.applications import CorrelatedTransitionModel, PSRLAgent, run_psrl
    from corrpriors.envs import env_info, random_exploration

    c0 = time.process_time()
    env = gymnasium.make("FrozenLake-v1", desc=generate_random_map(size=side, p=0.9, seed=0),
                         max_episode_steps=4 * side)
    info = env_info(env)
    desc = np.asarray(env.unwrapped.desc).ravel()
    c1 = time.process_time()
    walk = random_exploration(env, n_transitions, rng=0)
    c2 = time.process_time()
    belief = CorrelatedTransitionModel.for_mdp(info)
    belief.update(walk.states, walk.actions, walk.next_states)
    belief.refit()
    c3 = time.process_time()
    import scipy.sparse as sp

    goal = int(np.flatnonzero(desc == b"G")[0])
    S, A = info.n_states, info.n_actions
    rows = np.arange(S * A)                       # reward 1 on arriving at the goal
    rewards = sp.csr_array((np.ones(S * A), (rows, np.full(S * A, goal))), shape=(S * A, S))
    terminal = (desc == b"G") | (desc == b"H")
    if not belief.sparse:
        rewards = rewards.toarray().reshape(S, A, S)
    agent = PSRLAgent(belief, rewards, 0.99, n_samples=1, replan_every="episode",
                      terminal=terminal)
    out = run_psrl(env, agent, n_steps, rng=1)
    c4 = time.process_time()
    return {"side": side, "S": info.n_states, "sparse": bool(belief.sparse),
            "env_cpu": c1 - c0, "walk_cpu": c2 - c1, "sysid_cpu": c3 - c2,
            "psrl_cpu": c4 - c3, "psrl_steps": n_steps, "n_plans": agent.n_plans_,
            "episodes": int(out["episode_returns"].size),
            "return_sum": float(out["episode_returns"].sum()), "peak_mb": peak_mb()}


def child_fit(side: int) -> dict:
    import bench_scale

    q, counts = bench_scale.grid_problem(side)
    c0 = time.process_time()
    model = bench_scale.fit_sparse(q, counts)
    return {"side": side, "cpu": time.process_time() - c0, "psi_steps": model.n_psi_steps_,
            "elbo": float(model.elbo_), "peak_mb": peak_mb()}


def _run(args: list[str], src: str | None = None, bench: str | None = None) -> dict:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    if src is not None:
        env["PYTHONPATH"] = src
    cmd = [sys.executable, __file__, "--child", *args]
    if bench is not None:
        cmd += ["--bench-dir", bench]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _exponents(rows: list[dict], key: str) -> None:
    for a, b in zip(rows, rows[1:]):
        b[f"{key}_exponent"] = float(np.log(b[key] / a[key]) / np.log(b["S"] / a["S"]))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sections", default="sysid,fit,psrl,jobs")
    parser.add_argument("--sides", default="100,316")
    parser.add_argument("--baseline", help="src directory of a baseline checkout")
    parser.add_argument("--baseline-sides", default="100")
    parser.add_argument("--fit-side", type=int, default=316)
    parser.add_argument("--psrl-side", type=int, default=316)
    parser.add_argument("--jobs-side", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--psrl-selection", default="collapsed", choices=["collapsed", "fixed"],
                        help="scale selection of the belief fitted before the PSRL step")
    parser.add_argument("--psrl-max-iter", type=int, default=100,
                        help="CAVI cap of the belief fitted before the PSRL step (the step's cost "
                             "does not depend on it; a small cap times the step sooner)")
    parser.add_argument("--backend", default="loky", choices=["threads", "loky", "dask"],
                        help="backend of the n_jobs=2 refit (jobs section)")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--bench-dir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    if args.child:
        sys.path.insert(0, args.bench_dir or str(HERE))
        kind, side, *rest = args.child
        if kind == "sysid":
            res = child_sysid(int(side), int(rest[0]) if rest else 1, psrl="psrl" in rest,
                              backend=next((b for b in ("loky", "dask") if b in rest),
                                           "threads"),
                              selection="fixed" if "fixed" in rest else "collapsed",
                              max_iter=int(rest[-1][4:]) if rest and rest[-1].startswith("iter") else 100)
        elif kind == "frozenlake":
            res = child_frozenlake(int(side), int(rest[0]), int(rest[1]))
        else:
            res = child_fit(int(side))
        print(json.dumps(res))
        return 0
    if args.quick:
        args.sides, args.baseline_sides = "20,40", "20"
        args.fit_side = args.psrl_side = args.jobs_side = 30
    report: dict = {"load_average": os.getloadavg()}
    sections = args.sections.split(",")
    base_bench = None if args.baseline is None else str(Path(args.baseline).parent / "benchmarks")
    if "sysid" in sections:
        rows = [_run(["sysid", s]) for s in args.sides.split(",")]
        _exponents(rows, "refit_cpu")
        _exponents(rows, "build_cpu")
        report["sysid"] = rows
        for r in rows:
            print(f"sysid {r['side']}x{r['side']} (S={r['S']:,}, T={r['T']:,}): build "
                  f"{r['build_cpu']:.1f} CPU s, refit {r['refit_cpu']:.1f} CPU s "
                  f"({r['fits']} fits), peak {r['peak_mb']:.0f} MB", flush=True)
        if args.baseline:
            base = [_run(["sysid", s], args.baseline, base_bench)
                    for s in args.baseline_sides.split(",")]
            report["sysid_baseline"] = base
            for r in base:
                print(f"  baseline {r['side']}x{r['side']}: build {r['build_cpu']:.1f} CPU s, "
                      f"refit {r['refit_cpu']:.1f} CPU s, peak {r['peak_mb']:.0f} MB", flush=True)
    if "fit" in sections:
        rows = []
        for _ in range(args.repeats):
            rows.append({"new": _run(["fit", str(args.fit_side)])})
            if args.baseline:
                rows[-1]["baseline"] = _run(["fit", str(args.fit_side)], args.baseline, base_bench)
            print("fit " + ", ".join(f"{k} {v['cpu']:.1f} CPU s ({v['peak_mb']:.0f} MB)"
                                     for k, v in rows[-1].items()), flush=True)
        report["fit"] = rows
    if "psrl" in sections:
        r = _run(["sysid", str(args.psrl_side), "1", "psrl", args.psrl_selection,
                  f"iter{args.psrl_max_iter}"])
        report["psrl"] = r
        print(f"psrl {r['side']}x{r['side']} (selection {r['selection']}): build "
              f"{r['build_cpu']:.1f} CPU s, refit {r['refit_cpu']:.1f} CPU s ({r['fits']} fits), "
              f"one draw + plan {r['psrl_cpu']:.1f} CPU s ({r['psrl_wall']:.1f} s wall), peak "
              f"{r['peak_mb']:.0f} MB", flush=True)
    if "jobs" in sections:
        rows = []
        for _ in range(args.repeats):
            pair = {str(j): _run(["sysid", str(args.jobs_side), str(j), args.backend])
                    for j in (1, 2)}
            one, two = pair["1"], pair["2"]
            pair["ratio_wall"] = two["refit_wall"] / one["refit_wall"]
            # load-independent: the parallel run's schedule replayed with its fits' CPU seconds
            pair["ratio_simulated"] = two["sim_makespan"] / one["refit_cpu"]
            # the same over the parallel run's own fits (no run-to-run CPU noise)
            pair["ratio_simulated_same_run"] = two["sim_makespan"] / (two["busy_cpu"]
                                                                      + two["glue_cpu"])
            pair["same_scales"] = one["scales"] == two["scales"]
            pair["load_average"] = os.getloadavg()
            rows.append(pair)
            print(f"jobs {args.jobs_side} ({args.backend}): serial {one['refit_wall']:.1f} s, "
                  f"n_jobs=2 {two['refit_wall']:.1f} s wall -> {pair['ratio_wall']:.2f}x; "
                  f"simulated on idle cores {two['sim_makespan']:.1f} / {one['refit_cpu']:.1f} "
                  f"CPU s -> {pair['ratio_simulated']:.2f}x (over its own fits' CPU "
                  f"{pair['ratio_simulated_same_run']:.2f}x; worker start-up "
                  f"{', '.join(f'{c:.1f}' for c in two['startup_cpu'])} CPU s); "
                  f"{two['fits']} fits, same scales "
                  f"{pair['same_scales']}, peaks {one['peak_mb']:.0f} MB serial, "
                  f"{two['peak_mb']:.0f} MB + workers "
                  f"{', '.join(f'{m:.0f}' for m in two['worker_peak_mb'])} MB "
                  f"(load {pair['load_average'][0]:.1f})", flush=True)
        report["jobs"] = rows
    if "frozenlake" in sections:
        side = 20 if args.quick else args.psrl_side
        r = _run(["frozenlake", str(side), str(10 * side * side), str(20 * side)])
        report["frozenlake"] = r
        print(f"frozenlake {side}x{side} (S={r['S']:,}): walk {r['walk_cpu']:.1f}, sysid "
              f"{r['sysid_cpu']:.1f}, PSRL {r['psrl_steps']} steps / {r['n_plans']} plans "
              f"{r['psrl_cpu']:.1f} CPU s, peak {r['peak_mb']:.0f} MB", flush=True)
    out = ROOT / "benchmarks" / "out" / output_name("bench_rl_scale", args, parser)
    from corrpriors._fileio import atomic_write_bytes

    atomic_write_bytes(out, (json.dumps(report, indent=2) + "\n").encode())
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
