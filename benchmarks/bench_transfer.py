"""Benchmark: the cost of transfer between tasks (issue 26).

Problem: a family of the transfer experiment (``--family``: windy tunnel worlds, the default, or
slippery lakes; ``--relatedness``, default 0.8), T tasks of n x n states, every source with
``--source`` transitions, the target with ``--target`` transitions, uniformly random states and
actions. Every fit starts from a fresh belief (no warm
start) and fits all four actions; CPU time (``time.process_time``), the two methods alternated
``--repeat`` times in one process, the minimum kept.

Rows (per grid size):

* ``single``        -- one single-task fit (``CorrelatedTransitionModel.for_mdp``, what ``pg``
  uses; with ``--layer`` at its defaults, the per-(state, action) layer on) of one task with
  ``--source`` transitions: the baseline;
* ``single_target`` -- the same on the target's ``--target`` transitions (``pg``);
* ``transfer``      -- a :class:`~corrpriors.applications.MultiTaskTransitionModel` over the T
  tasks asked for the target's posterior mean: the pooled source fit plus the target's
  (similarity, scale) search;
* ``transfer_all``  -- the same model asked for every task's posterior mean (every task is then
  the target once: T pooled fits and T searches).

What ``transfer_all`` measures, exactly: from a fresh :class:`MultiTaskTransitionModel` with every
task's counts set, the CPU time until every task's transfer belief is fitted -- for each task
the fit of its source (the single-task model on the other tasks' pooled counts, with its scale
selection and one censored-count round), the choice of its similarity (``--criterion loo``,
the default: the leave-one-out score of the full-data fit at every similarity searched, each
at the joint model's conditional scale, with its EP cavities; ``cv``: the two-fold
cross-validation, every fold fitted once at that scale; then the one-standard-error rule) and
the kept fits at the chosen similarity (the censored-count rounds), or the task's single-task
fit when the similarity chosen is 0. The ``fits`` column counts the CAVI fits of all of that (sources and searches).

``--kron SIDE`` also fits the joint model of ``--kron-tasks`` tasks (default 2) on a SIDE x SIDE
grid through the sparse Kronecker precision (``kronecker_precision``: tasks x SIDE^2 covariates,
K = 3, fixed task correlations 0.8 and scale; the first task has data in half its states), in
a fresh child process, and reports its CPU time and that process's peak resident memory
(``VmHWM`` of ``/proc/self/status``; ``ru_maxrss`` is not used, Linux keeps it across fork and
exec, so it could report the parent's peak), also above the child's peak after its imports.

Run from the repository root::

    python benchmarks/bench_transfer.py                  # sizes 8, 10, 12; 4 tasks
    python benchmarks/bench_transfer.py --quick          # size 6, seconds
    python benchmarks/bench_transfer.py --family lake    # the slippery lakes
    python benchmarks/bench_transfer.py --layer          # every belief with the per-pair layer
    python benchmarks/bench_transfer.py --criterion cv   # the two-fold cross-validation (before round 15)
    python benchmarks/bench_transfer.py --kron 100       # + the 2 x 10^4-state Kronecker fit
    python benchmarks/bench_transfer.py --quick --kron 100 --kron-tasks 4   # 4 x 10^4 states

Writes ``<out>/bench_transfer.json`` (``--out``, default ``benchmarks/out``) for the defaults;
every other configuration has its own file, named after the settings that differ from the
defaults (``bench_transfer_lake.json``, ``..._layer.json``, ``..._cv.json``,
``..._quick_kron100x4.json``, ``..._sizes10_repeat1.json``, ...), so no run overwrites
another configuration's output.
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
from _proc import peak_mb

ROOT = Path(__file__).resolve().parents[1]


def problem(side: int, n_tasks: int, n_source: int, n_target: int, seed: int = 0,
            family: str = "windy", relatedness: float = 0.8):
    """``(mdps, counts)``: a family draw and every task's counts (target last)."""
    from corrpriors.envs import lake_task_family, windy_task_family
    from corrpriors.experiments.transfer import uniform_transitions
    from corrpriors.mdp import transition_counts

    rng = np.random.default_rng(seed)
    draw = {"windy": windy_task_family, "lake": lake_task_family}[family]
    mdps, _ = draw(relatedness, n_tasks - 1, rng=rng, shape=(side, side))
    S, A = mdps[0].n_states, mdps[0].n_actions
    counts = [transition_counts(uniform_transitions(m, n_source if i < n_tasks - 1 else n_target, rng=rng), S, A)
              for i, m in enumerate(mdps)]
    return mdps, counts


def _opts(layer: bool = False) -> dict:
    """The beliefs' options: the plain model (the transfer experiment's), or with ``layer``
    ``for_mdp``'s per-(state, action) layer at its defaults (for the single-task fits and the
    transfer beliefs alike)."""
    if layer:
        return dict(lengthscale=2.0, prior="dense")
    return dict(lengthscale=2.0, prior="dense", concentration=None, contamination_prior=None,
                distinct_prior=None, support_prior=None)


def _transfer_opts(layer: bool, criterion: str = "loo") -> dict:
    """The transfer beliefs' options: :func:`_opts` and how the similarity is compared."""
    return dict(_opts(layer), similarity_criterion=criterion)


def time_single(mdp, counts, layer: bool = False) -> float:
    from corrpriors.applications import CorrelatedTransitionModel

    tic = time.process_time()
    CorrelatedTransitionModel.for_mdp(mdp, **_opts(layer)).set_counts(counts).mean()
    return time.process_time() - tic


def time_transfer(mdps, counts, every_task: bool, layer: bool = False,
                  criterion: str = "loo") -> tuple[float, float, int, list]:
    from corrpriors.applications import MultiTaskTransitionModel

    tic = time.process_time()
    model = MultiTaskTransitionModel.for_mdps(mdps, **_transfer_opts(layer, criterion))
    for t, c in enumerate(counts):
        model.set_counts(t, c)
    for t in (range(len(mdps)) if every_task else [len(mdps) - 1]):
        model.mean(t)
    cpu = time.process_time() - tic
    fits = sum(b.n_fits_ for b in model.tasks_) + sum(b.n_fits_ for b in model.pooled_) + sum(
        b.n_fits_ for b in model.independent_)
    return cpu, float(model.similarity_[-1]), fits, model.similarity_.tolist()


def bench_size(side: int, n_tasks: int, n_source: int, n_target: int, repeat: int,
               family: str = "windy", relatedness: float = 0.8, layer: bool = False,
               criterion: str = "loo") -> dict:
    mdps, counts = problem(side, n_tasks, n_source, n_target, family=family, relatedness=relatedness)
    times: dict[str, list[float]] = {k: [] for k in ("single", "single_target", "transfer", "transfer_all")}
    sim = float("nan")
    fits: dict[str, int] = {}
    sims: list = []
    for _ in range(repeat):           # alternated, so slow phases of a shared machine hit all rows
        times["single"].append(time_single(mdps[0], counts[0], layer))
        t, sim, fits["transfer"], _ = time_transfer(mdps, counts, every_task=False, layer=layer,
                                                    criterion=criterion)
        times["transfer"].append(t)
        times["single_target"].append(time_single(mdps[-1], counts[-1], layer))
        t, _, fits["transfer_all"], sims = time_transfer(mdps, counts, every_task=True, layer=layer,
                                                         criterion=criterion)
        times["transfer_all"].append(t)
    best = {k: min(v) for k, v in times.items()}
    return {"family": family, "relatedness": relatedness, "layer": layer, "criterion": criterion,
            "side": side, "states": side * side,
            "tasks": n_tasks, "source_transitions": n_source,
            "target_transitions": n_target, "cpu_seconds": best,
            "ratio_to_single": {k: v / best["single"] for k, v in best.items()},
            "ratio_to_single_target": {k: v / best["single_target"] for k, v in best.items()},
            "target_similarity": sim, "fits": fits, "similarities_all": sims}


def bench_kron(side: int, n_tasks: int = 2) -> dict:
    """The Kronecker joint fit (:func:`kron_fit`) in a fresh child process: its CPU time and peak memory."""
    proc = subprocess.run([sys.executable, __file__, "--kron-child", str(side), str(n_tasks)],
                          capture_output=True, text=True, env=dict(os.environ), check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def kron_fit(side: int, n_tasks: int = 2) -> dict:
    """The joint fit of ``n_tasks`` tasks on a side x side grid through the Kronecker precision.

    Meant for a fresh process (``--kron-child``): ``peak_rss_mb`` is the process's VmHWM after
    the fit, ``baseline_peak_mb`` its VmHWM after the imports, before the problem is built.
    """
    from corrpriors.core import CorrelatedMultinomial
    from corrpriors.kernels import grid_precision, kronecker_precision

    baseline = peak_mb()
    rng = np.random.default_rng(1)
    Q = grid_precision((side, side), length_scale=5.0)
    B = 0.2 * np.eye(n_tasks) + 0.8                      # every pair of tasks correlated 0.8
    S = side * side
    n = n_tasks * S
    counts = rng.multinomial(2, [0.5, 0.3, 0.2], size=n)
    counts[:S][rng.random(S) < 0.5] = 0                  # the first task has data in half its states
    tic = time.process_time()
    precision = kronecker_precision(B, Q)
    model = CorrelatedMultinomial(precision=precision, scale=1.0).fit(counts)
    cpu = time.process_time() - tic
    peak = peak_mb()
    return {"side": side, "tasks": n_tasks, "covariates": n, "precision_nnz": int(precision.nnz),
            "cpu_seconds": cpu, "peak_rss_mb": peak, "baseline_peak_mb": baseline,
            "peak_above_baseline_mb": peak - baseline, "n_iter": int(model.n_iter_),
            "converged": bool(model.converged_), "measured_in": "fresh process, VmHWM"}


def output_name(args: argparse.Namespace, parser: argparse.ArgumentParser) -> str:
    """The output file's stem: ``bench_transfer`` plus every setting that differs from the defaults."""
    parts = ["bench_transfer"]
    if args.family != "windy":
        parts.append(args.family)
    if args.layer:
        parts.append("layer")
    if args.criterion != "loo":
        parts.append(args.criterion)
    if args.quick:
        parts.append("quick")                        # (sets the sizes and the repeats)
    for opt in ("sizes", "repeat") if not args.quick else ():
        if getattr(args, opt) != parser.get_default(opt):
            parts.append(f"{opt}{str(getattr(args, opt)).replace(',', '-')}")
    for opt in ("tasks", "source", "target", "relatedness"):
        if getattr(args, opt) != parser.get_default(opt):
            parts.append(f"{opt}{getattr(args, opt):g}")
    if args.kron:
        parts.append(f"kron{args.kron}x{args.kron_tasks}")
    return "_".join(parts)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sizes", default="8,10,12")
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--source", type=int, default=2000)
    parser.add_argument("--target", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--family", choices=("windy", "lake"), default="windy")
    parser.add_argument("--relatedness", type=float, default=0.8)
    parser.add_argument("--layer", action="store_true",
                        help="every belief with for_mdp's per-(state, action) layer (its defaults)")
    parser.add_argument("--criterion", choices=("loo", "cv"), default="loo",
                        help="how the transfer beliefs compare similarities (similarity_criterion; "
                             "loo, the default, or the two-fold cv)")
    parser.add_argument("--kron", type=int, default=0, help="side of the Kronecker joint fit (0: skip)")
    parser.add_argument("--kron-tasks", type=int, default=2, help="tasks of the Kronecker joint fit")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out",
                        help="output folder (default benchmarks/out)")
    parser.add_argument("--kron-child", type=int, nargs=2, metavar=("SIDE", "TASKS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.kron_child:                                 # the fresh process of bench_kron
        warnings.simplefilter("ignore")
        result = kron_fit(*args.kron_child)
        print(json.dumps(result))
        return result
    sizes = [6] if args.quick else [int(v) for v in args.sizes.split(",")]
    repeat = 1 if args.quick else args.repeat
    warnings.simplefilter("ignore")
    out: dict = {"sizes": []}
    print(f"{'S':>5} {'single':>8} {'pg tgt':>8} {'transfer':>9} {'all T':>8}   ratios to single "
          f"(transfer, all)   to pg target (transfer, all)   rho")
    for side in sizes:
        row = bench_size(side, args.tasks, args.source, args.target, repeat, args.family,
                         args.relatedness, args.layer, args.criterion)
        out["sizes"].append(row)
        c, r, q = row["cpu_seconds"], row["ratio_to_single"], row["ratio_to_single_target"]
        print(f"{row['states']:5d} {c['single']:8.2f} {c['single_target']:8.2f} {c['transfer']:9.2f} "
              f"{c['transfer_all']:8.2f}   {r['transfer']:6.2f} {r['transfer_all']:6.2f}"
              f"                  {q['transfer']:6.2f} {q['transfer_all']:6.2f}"
              f"                 {row['target_similarity']:.3f}")
        print(f"      fits: transfer {row['fits']['transfer']}, all T {row['fits']['transfer_all']}; "
              f"similarities of all T: {[round(v, 4) for v in row['similarities_all']]}")
    if len(out["sizes"]) > 1:
        s = np.log([row["states"] for row in out["sizes"]])
        for key in ("single", "transfer"):
            t = np.log([row["cpu_seconds"][key] for row in out["sizes"]])
            out[f"growth_exponent_{key}"] = float(np.polyfit(s, t, 1)[0])
            print(f"growth with S ({key}): S^{out[f'growth_exponent_{key}']:.2f}")
    if args.kron:
        out["kronecker"] = bench_kron(args.kron, args.kron_tasks)
        k = out["kronecker"]
        print(f"Kronecker joint fit, {args.kron_tasks} tasks x {args.kron}^2 states = {k['covariates']} covariates: "
              f"{k['cpu_seconds']:.1f} CPU s, peak {k['peak_rss_mb']:.0f} MB (fresh process, VmHWM; "
              f"{k['peak_above_baseline_mb']:.0f} MB above its {k['baseline_peak_mb']:.0f} MB after the imports), "
              f"{k['n_iter']} iterations, "
              f"converged {k['converged']}")
    # one file per configuration (every setting that differs from the defaults is in the name)
    path = args.out / f"{output_name(args, parser)}.json"
    from corrpriors._fileio import atomic_write_bytes

    atomic_write_bytes(path, json.dumps(out, indent=2).encode())
    return out


if __name__ == "__main__":
    main()
