"""Benchmark: fast CAVI vs the naive dense transcription on grid transition learning.

Problem: an n x n gridworld (C = K = n^2 states), four actions (up, down, left, right) that
succeed with probability 0.8 and otherwise slip to one of the other three directions; walls
keep the agent in place. A uniformly random policy walks ``20 * n^2`` steps (2,000 on the
10 x 10 grid); the model is fitted to the next-state count matrix of the action "right"
(C x K = n^2 x n^2), with the squared exponential kernel ``exp(-d^2 / l^2)`` (l = 1) on grid
distances and the uniform prior mean. Both implementations start from the same
initialisation, use the same jittered covariance, the same tolerance (relative ELBO
change 1e-8) and the same BLAS threading policy (single-threaded), and are
timed in the same process.

Run from the repository root::

    python benchmarks/bench_core.py            # 10x10 (with naive), 20x20, 30x30
    python benchmarks/bench_core.py --quick    # 10x10 only
    python benchmarks/bench_core.py --quick --repeat 5   # minimum of 5 timings each

Writes ``benchmarks/out/bench_core.json``; a run with other settings writes a file whose name
lists them (``bench_core-quick-repeat5.json``), so it never overwrites another configuration's
results. ``--out FILE`` writes exactly ``FILE``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the naive reference lives with the tests

from _proc import output_name  # noqa: E402

from corrpriors._fileio import atomic_write_bytes  # noqa: E402
from corrpriors._threads import blas_threads  # noqa: E402
from corrpriors.core.cavi import CAVIOptions  # noqa: E402
from corrpriors.core.cavi import run_cavi as _run_cavi  # noqa: E402
from corrpriors.core.fixed_point import FixedPointOptions  # noqa: E402
from corrpriors.core.priors.dense import DenseCovariancePrior  # noqa: E402
from corrpriors.core.stick_breaking import uniform_psi  # noqa: E402
from reference import naive_cavi  # noqa: E402


def jittered_covariance(cov):
    """The dense prior structure (jittered by the core's rule) and its jitter."""
    prior = DenseCovariancePrior(cov)
    return prior, prior.jitter


def run_cavi(counts, prior, mean, *, tol, max_iter, acceleration="anderson"):
    """The core's CAVI driver with the benchmark's options."""
    iteration = FixedPointOptions(max_iter=max_iter, tol=tol, acceleration=acceleration)
    return _run_cavi(counts, prior, mean, CAVIOptions(iteration=iteration))


MOVES = np.array([(-1, 0), (1, 0), (0, -1), (0, 1)])  # up, down, left, right (row, col)


def random_walk_counts(side: int, n_steps: int, action: int = 3, slip: float = 0.2,
                       seed: int = 0) -> np.ndarray:
    """Next-state counts (S, S) of ``action`` along a random-policy walk on a side x side grid."""
    rng = np.random.default_rng(seed)
    s_count = side * side
    counts = np.zeros((s_count, s_count), dtype=np.int64)
    r, c = side // 2, side // 2
    actions = rng.integers(0, 4, size=n_steps)
    slips = rng.random(n_steps) < slip
    others = rng.integers(0, 3, size=n_steps)
    for t in range(n_steps):
        a = int(actions[t])
        move = a if not slips[t] else [m for m in range(4) if m != a][others[t]]
        nr, nc = r + MOVES[move, 0], c + MOVES[move, 1]
        if not (0 <= nr < side and 0 <= nc < side):
            nr, nc = r, c
        if a == action:
            counts[r * side + c, nr * side + nc] += 1
        r, c = nr, nc
    return counts


def grid_se_covariance(side: int, lengthscale: float = 1.0) -> np.ndarray:
    """Squared exponential kernel exp(-d^2 / l^2) on the grid's Euclidean distances."""
    g = np.stack(np.meshgrid(np.arange(side), np.arange(side), indexing="ij"), -1)
    g = g.reshape(-1, 2).astype(float)
    d2 = ((g[:, None, :] - g[None, :, :]) ** 2).sum(-1)
    return np.exp(-d2 / lengthscale ** 2)


def _timed(fn, repeat: int):
    """Run ``fn`` ``repeat`` times; return its last result, the minimum wall and CPU times."""
    best_wall, best_cpu, out = float("inf"), float("inf"), None
    for _ in range(max(int(repeat), 1)):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        best_wall = min(best_wall, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return out, best_wall, best_cpu


def bench(side: int, run_naive: str, tol: float = 1e-8, naive_iters: int = 2,
          repeat: int = 1) -> dict:
    """Time one grid size; ``run_naive`` is "full", "per-iter" or "no".

    With ``repeat > 1`` every timed run is repeated and the minimum wall and CPU times are
    kept (for the fast path and the naive path alike), which damps the noise of a shared
    machine.
    """
    s = side * side
    counts = random_walk_counts(side, 20 * s)
    cov = grid_se_covariance(side)
    base, eps = jittered_covariance(cov)
    mean = np.repeat(uniform_psi(s)[None, :], s, axis=0)
    fast, t_fast, c_fast = _timed(
        lambda: run_cavi(counts, base, mean, tol=tol, max_iter=1000), repeat)
    row = {"grid": f"{side}x{side}", "C": s, "K": s, "steps": 20 * s, "repeat": repeat,
           "transitions_fitted": int(counts.sum()), "fast_seconds": t_fast,
           "fast_cpu_seconds": c_fast,
           "fast_iterations": fast.n_iter, "fast_psi_steps": fast.n_psi_steps,
           "fast_seconds_per_iter": t_fast / fast.n_psi_steps,
           "converged": fast.converged, "elbo": fast.elbo, "jitter": eps}
    if run_naive == "full":
        def _naive():
            with blas_threads(1):  # the same BLAS threading policy as the fast path
                return naive_cavi(counts, base.base, mean, tol=tol, max_iter=1000)

        naive, t_naive, c_naive = _timed(_naive, repeat)
        row.update({
            "naive_seconds": t_naive, "naive_cpu_seconds": c_naive,
            "naive_iterations": naive["n_iter"],
            "speedup": t_naive / t_fast, "speedup_cpu": c_naive / c_fast,
            "max_abs_diff_psi_mean": float(np.abs(naive["psi_mean"] - fast.psi_mean).max()),
            "max_abs_diff_psi_var": float(np.abs(naive["psi_var"] - fast.psi_var).max()),
            "abs_diff_elbo": float(abs(naive["elbo_trace"][-1] - fast.elbo)),
        })
    elif run_naive == "per-iter":
        # the naive path is the plain iteration: count its iterations with the fast plain path
        # (same path as the naive one, to 1e-14) and time two naive iterations
        plain, t_plain, c_plain = _timed(
            lambda: run_cavi(counts, base, mean, tol=tol, max_iter=1000,
                             acceleration=None), 1)
        t0, c0 = time.perf_counter(), time.process_time()
        with blas_threads(1):
            naive = naive_cavi(counts, base.base, mean, tol=-1.0, max_iter=naive_iters)
        per_iter = (time.perf_counter() - t0) / naive_iters
        per_iter_cpu = (time.process_time() - c0) / naive_iters
        row.update({
            "plain_iterations": plain.n_iter, "plain_seconds": t_plain,
            "naive_seconds_per_iter": per_iter,
            "naive_seconds_extrapolated": per_iter * plain.n_iter,
            "speedup": per_iter * plain.n_iter / t_fast,
            "speedup_cpu": per_iter_cpu * plain.n_iter / c_fast,
            "speedup_per_iter": per_iter / row["fast_seconds_per_iter"],
        })
    return row


def bench_accuracy(side: int = 10, tols=(1e-8, 1e-10, 1e-12, 1e-13, 1e-14), target: float = 1e-6,
                   repeat: int = 1) -> dict:
    r"""Time fast and naive CAVI to the same *accuracy* rather than the same tolerance.

    Both stop on the relative change of the ELBO, but the accelerated fast path and the plain
    naive iteration follow different paths, so at equal ``tol`` they stop at different
    distances from the fixed point. Here the fixed point :math:`\lambda^*` is computed once
    by the naive transcription (60 plain iterations, untimed; the plain map contracts by about
    0.4 per iteration, so that is converged to rounding); every tolerance in ``tols`` is timed for both, with
    the distance ``max |lambda - lambda*|``; the "same answer" ratio compares the cheapest run
    of each that lands within ``target`` of the fixed point.
    """
    s = side * side
    counts = random_walk_counts(side, 20 * s)
    base, eps = jittered_covariance(grid_se_covariance(side))
    mean = np.repeat(uniform_psi(s)[None, :], s, axis=0)
    with blas_threads(1):
        ref = naive_cavi(counts, base.base, mean, tol=-1.0, max_iter=60)
    ref_mean = ref["psi_mean"]
    rows = []
    for tol in tols:
        fast, t_fast, c_fast = _timed(
            lambda: run_cavi(counts, base, mean, tol=tol, max_iter=5000), repeat)

        def _naive():
            with blas_threads(1):
                return naive_cavi(counts, base.base, mean, tol=tol, max_iter=5000)

        naive, t_naive, c_naive = _timed(_naive, repeat)
        rows.append({
            "tol": tol, "fast_seconds": t_fast, "fast_cpu_seconds": c_fast,
            "fast_psi_steps": fast.n_psi_steps,
            "fast_error": float(np.abs(fast.psi_mean - ref_mean).max()),
            "naive_seconds": t_naive, "naive_cpu_seconds": c_naive,
            "naive_iterations": naive["n_iter"],
            "naive_error": float(np.abs(naive["psi_mean"] - ref_mean).max()),
        })
        print(json.dumps(rows[-1]), flush=True)
    out = {"grid": f"{side}x{side}", "target": target, "rows": rows}
    ok_fast = [r for r in rows if r["fast_error"] <= target]
    ok_naive = [r for r in rows if r["naive_error"] <= target]
    if ok_fast and ok_naive:
        f = min(ok_fast, key=lambda r: r["fast_cpu_seconds"])
        n = min(ok_naive, key=lambda r: r["naive_cpu_seconds"])
        out.update({"fast_tol": f["tol"], "naive_tol": n["tol"],
                    "speedup": n["naive_seconds"] / f["fast_seconds"],
                    "speedup_cpu": n["naive_cpu_seconds"] / f["fast_cpu_seconds"]})
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print a table and write JSON."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="10x10 only")
    p.add_argument("--sizes", type=int, nargs="*", default=None,
                   help="grid sides to run (default 10 20 30); naive in full only for 10")
    p.add_argument("--repeat", type=int, default=1,
                   help="repeat each timed run and keep the minimum wall/CPU time (default 1)")
    p.add_argument("--accuracy", action="store_true",
                   help="also time both paths to the same distance (1e-6) from the fixed point")
    p.add_argument("--out", type=Path, default=None,
                   help="output file (default benchmarks/out/bench_core[-<settings>].json)")
    args = p.parse_args(argv)
    if args.out is None:
        args.out = ROOT / "benchmarks" / "out" / output_name("bench_core", args, p)
    plan = [(10, "full")] if args.quick else [(10, "full"), (20, "per-iter"), (30, "no")]
    if args.sizes:
        modes = {10: "full", 20: "per-iter"}
        plan = [(n, modes.get(n, "no")) for n in args.sizes]
    rows = []
    for side, naive in plan:
        row = bench(side, naive, repeat=args.repeat)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print()
    print(f"{'grid':>6} {'C=K':>5} {'steps':>6} {'fast [s]':>9} {'fast/step':>10} "
          f"{'naive [s]':>10} {'speedup':>8} {'cpu-spdup':>9} {'max|dpsi|':>10} {'|dELBO|':>9}")
    for r in rows:
        naive_s = r.get("naive_seconds", r.get("naive_seconds_extrapolated", float("nan")))
        speed = r.get("speedup", float("nan"))
        speed_cpu = r.get("speedup_cpu", float("nan"))
        mark = "" if "naive_seconds" in r else ("*" if "naive_seconds_extrapolated" in r else "")
        print(f"{r['grid']:>6} {r['C']:>5} {r['fast_psi_steps']:>6} {r['fast_seconds']:>9.3f} "
              f"{r['fast_seconds_per_iter']:>10.4f} {naive_s:>9.2f}{mark:1} {speed:>8.1f} "
              f"{speed_cpu:>9.1f} "
              f"{r.get('max_abs_diff_psi_mean', float('nan')):>10.2e} "
              f"{r.get('abs_diff_elbo', float('nan')):>9.2e}")
    print("* naive time extrapolated: its per-iteration time x the plain iteration's count")
    print("speedup = wall-clock ratio; cpu-spdup = ratio of process CPU time (robust to a "
          "loaded machine)")
    result = {"rows": rows}
    if args.accuracy:
        acc = bench_accuracy(repeat=args.repeat)
        result["same_accuracy"] = acc
        print()
        print(f"same answer (max |lambda - lambda*| <= {acc['target']:g}) on {acc['grid']}:")
        print(f"{'tol':>8} {'fast steps':>10} {'fast err':>9} {'fast [s]':>9} "
              f"{'naive it':>9} {'naive err':>9} {'naive [s]':>9}")
        for r in acc["rows"]:
            print(f"{r['tol']:>8.0e} {r['fast_psi_steps']:>10} {r['fast_error']:>9.1e} "
                  f"{r['fast_seconds']:>9.3f} {r['naive_iterations']:>9} {r['naive_error']:>9.1e} "
                  f"{r['naive_seconds']:>9.2f}")
        if "speedup" in acc:
            print(f"fast at tol {acc['fast_tol']:g} vs naive at tol {acc['naive_tol']:g}: "
                  f"speedup {acc['speedup']:.1f}x wall, {acc['speedup_cpu']:.1f}x CPU")
        else:
            print("no tolerance brought both within the target")
    atomic_write_bytes(args.out, (json.dumps(result, indent=2) + "\n").encode())
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
