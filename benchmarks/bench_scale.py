"""Benchmark: the correlated model at 10^3-10^5 covariates with a sparse GMRF precision (issue 14).

Problem: a side x side grid, K = 5 categories, the prior a normalised Matern-like GMRF
(``grid_precision(shape, length_scale=5)``, alpha = 2: the same resolution at every size, so the
sizes are larger state spaces of one kind; ``--lengthscale-fraction f`` uses ``f * side``
instead); the "true" stick logits are one draw from that prior, every cell gets Poisson(2)
observations (about 14 % of the cells none).
One fit = ``CorrelatedMultinomial(precision=Q).fit(counts)`` at the default tolerance (1e-8),
the scale fixed at 1, from the prior (no warm start).

Sections (each printed as a table, all in one run; ``--quick`` runs a small version of each):

* ``exact``   -- 20 x 20: the sparse fit against the dense fit with Sigma = Q^-1 (max |d lambda|,
  max |d var|, relative ELBO and collapsed-bound differences, EM scale).
* ``speed``   -- 50 x 50 (C = 2,500): dense path (Sigma = Q^-1, the packed observed-set
  factorisations) vs the sparse path, same answer, side by side.
* ``growth``  -- fit time and peak memory of the sparse path at C = 2,500, 10,000, 40,000 (and
  99,856 with ``--full``), each in a fresh process; growth exponents.
* ``taxi``    -- Taxi-v4 (500 states x 6 actions), relative encoding: one fit of every action
  at a fixed scale with the dense and the GMRF prior.
* ``tunnel30``, ``sysid100`` (only when asked, ``--sections tunnel30,sysid100``) -- system
  identification on tunnel grids (:func:`system_id`), each section in a fresh process: the
  Hellinger distance, the wall and CPU seconds of every selecting refit, and the process's peak
  resident memory (VmHWM) with its value after the imports.

Run from the repository root::

    python benchmarks/bench_scale.py            # everything but the 316 x 316 grid
    python benchmarks/bench_scale.py --full     # also C = 99,856 (about 5-10 minutes)
    python benchmarks/bench_scale.py --quick    # small sizes, seconds

Writes ``<out>/bench_scale-<sections>[-full][-quick][-ls<f>].json`` (``--out``, default
``benchmarks/out``): one file per configuration.
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


#: Length scale of the benchmark's GMRF: a number of cells, or ("fraction", f) for f * side.
LENGTHSCALE: tuple = ("cells", 5.0)


def grid_problem(side: int, k: int = 5, seed: int = 0):
    """``(Q, counts)``: the GMRF precision of a side x side grid and Poisson(2) counts."""
    from corrpriors.core.priors.sparse import SparsePrecisionPrior
    from corrpriors.kernels import grid_precision

    rng = np.random.default_rng(seed)
    kind, value = LENGTHSCALE
    q = grid_precision((side, side), length_scale=value if kind == "cells" else value * side)
    prior = SparsePrecisionPrior(q)
    c = side * side
    psi = prior.sample_posterior(1.0, np.zeros((c, k - 1)), np.zeros((c, k - 1)), 1, rng=rng)[0]
    logits = np.concatenate([psi, np.zeros((c, 1))], axis=1)
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    n = rng.poisson(2.0, c)
    counts = np.stack([rng.multinomial(m, row) for m, row in zip(n, p)])
    return q, counts


def _timed(fn):
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def fit_sparse(q, counts, **kw):
    from corrpriors import CorrelatedMultinomial

    return CorrelatedMultinomial(precision=q, **kw).fit(counts)


def fit_dense(q, counts, **kw):
    from corrpriors import CorrelatedMultinomial

    cov = np.linalg.inv(q.toarray())
    return CorrelatedMultinomial(0.5 * (cov + cov.T), **kw).fit(counts)


def section_exact(side: int = 20) -> dict:
    q, counts = grid_problem(side)
    rows = {}
    for name, kw in (("fixed scale", {}), ("EM scale", {"learn_scale": True})):
        a = fit_sparse(q, counts, tol=1e-13, max_iter=3000, **kw)
        b = fit_dense(q, counts, tol=1e-13, max_iter=3000, **kw)
        rows[name] = {
            "max_abs_d_lambda": float(np.abs(a.psi_mean_ - b.psi_mean_).max()),
            "max_abs_d_var": float(np.abs(a.psi_var_ - b.psi_var_).max()),
            "rel_d_elbo": float(abs(a.elbo_ - b.elbo_) / abs(b.elbo_)),
            "rel_d_bound": float(abs(a.collapsed_bound() - b.collapsed_bound())
                                 / abs(b.collapsed_bound())),
            "rel_d_scale": float(abs(a.scale_ - b.scale_) / b.scale_),
        }
    return {"C": side * side, "rows": rows}


def section_speed(side: int = 50) -> dict:
    q, counts = grid_problem(side)
    sparse, t_s, c_s = _timed(lambda: fit_sparse(q, counts))
    dense, t_d, c_d = _timed(lambda: fit_dense(q, counts))
    return {"C": side * side, "sparse_seconds": t_s, "sparse_cpu": c_s, "dense_seconds": t_d,
            "dense_cpu": c_d, "ratio_wall": t_d / t_s, "ratio_cpu": c_d / c_s,
            "sparse_steps": sparse.n_psi_steps_, "dense_steps": dense.n_psi_steps_,
            "max_abs_d_lambda": float(np.abs(sparse.psi_mean_ - dense.psi_mean_).max()),
            "rel_d_elbo": float(abs(sparse.elbo_ - dense.elbo_) / abs(dense.elbo_))}


def child(side: int) -> None:
    """One sparse fit in this (fresh) process; prints a JSON line with time and peak memory."""
    q, counts = grid_problem(side)
    model, t, c = _timed(lambda: fit_sparse(q, counts))
    peak = peak_mb()
    print(json.dumps({"side": side, "C": side * side, "seconds": t, "cpu": c,
                      "psi_steps": model.n_psi_steps_, "converged": bool(model.converged_),
                      "peak_mb": peak}))


def section_growth(sides) -> dict:
    rows = []
    for side in sides:
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        extra = ([] if LENGTHSCALE[0] == "cells"
                 else ["--lengthscale-fraction", str(LENGTHSCALE[1])])
        out = subprocess.run([sys.executable, __file__, "--child", str(side), *extra],
                             capture_output=True, text=True, env=env, check=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(f"  C = {rows[-1]['C']:>7,}: {rows[-1]['seconds']:.2f} s, "
              f"{rows[-1]['peak_mb']:.0f} MB", flush=True)
    for a, b in zip(rows, rows[1:]):
        b["growth_from_previous"] = b["seconds"] / a["seconds"]
        b["exponent_from_previous"] = float(np.log(b["seconds"] / a["seconds"])
                                            / np.log(b["C"] / a["C"]))
    return {"rows": rows}


MOVES = np.array([(-1, 0), (1, 0), (0, -1), (0, 1)])  # up, down, left, right


class TunnelGrid:
    """A side x side "tunnel-like" grid world with sparse dynamics (no (S, A, S) tensor).

    Four actions move to the intended neighbour with probability 0.8 and to each other neighbour
    with 0.2 / 3; moves off the grid stay put; from the goal corner (side-1, side-1) every action
    jumps back to the start corner (0, 0) (the tunnel). Relative encoding, radius 1: 10
    categories (the 3 x 3 window and the jump as "other").
    """

    def __init__(self, side: int):
        self.side = side
        self.n_states, self.n_actions = side * side, 4
        rows, cols = np.divmod(np.arange(self.n_states), side)
        self.coordinates = np.stack([rows, cols], axis=1).astype(float)
        self.goal, self.start = self.n_states - 1, 0

    def rows(self, action: int):
        """Sparse true next-state distribution of every state: (state, next, prob) triples."""
        r, c = self.coordinates[:, 0].astype(int), self.coordinates[:, 1].astype(int)
        s_idx, nxt, prob = [], [], []
        for m, (dr, dc) in enumerate(MOVES):
            p = 0.8 if m == action else 0.2 / 3
            rr, cc = r + dr, c + dc
            inside = (rr >= 0) & (rr < self.side) & (cc >= 0) & (cc < self.side)
            target = np.where(inside, rr * self.side + cc, np.arange(self.n_states))
            s_idx.append(np.arange(self.n_states)), nxt.append(target)
            prob.append(np.full(self.n_states, p))
        s_idx, nxt, prob = (np.concatenate(v) for v in (s_idx, nxt, prob))
        keep = s_idx != self.goal
        s_idx = np.concatenate([s_idx[keep], [self.goal]])
        nxt = np.concatenate([nxt[keep], [self.start]])
        prob = np.concatenate([prob[keep], [1.0]])
        import scipy.sparse as sp

        return sp.csr_array((prob, (s_idx, nxt)), shape=(self.n_states, self.n_states))

    def random_walk(self, n: int, *, rng: np.random.Generator):
        """``n`` transitions of a uniformly random policy from the start corner."""
        tables = [self.rows(a) for a in range(4)]
        s, states, actions, nexts = self.start, np.empty(n, int), rng.integers(0, 4, n), np.empty(n, int)
        u = rng.random(n)
        for t in range(n):
            row = tables[actions[t]]
            lo, hi = row.indptr[s], row.indptr[s + 1]
            k = int(np.searchsorted(np.cumsum(row.data[lo:hi]), u[t] * row.data[lo:hi].sum(),
                                    side="right"))
            states[t], nexts[t] = s, row.indices[lo + min(k, hi - lo - 1)]
            s = nexts[t]
        return states, actions, nexts


def mean_hellinger(world: TunnelGrid, belief) -> float:
    """Mean Hellinger distance over (s, a) between the belief's posterior mean and the truth."""
    total = 0.0
    for a in range(world.n_actions):
        est = belief.action_mean(a)                       # (S, S), one action at a time
        if hasattr(est, "entries"):   # a BackgroundTransitions table: the truth's support suffices
            truth = world.rows(a).tocoo()
            bc = np.bincount(truth.row, weights=np.sqrt(truth.data * est.entries(truth.row, truth.col)),
                             minlength=world.n_states)
            total += float(np.sum(np.sqrt(np.maximum(1.0 - bc, 0.0))))
            continue
        truth = world.rows(a).toarray() if world.n_states <= 4000 else None
        if truth is not None:
            total += float(np.sum(np.sqrt(0.5 * np.sum((np.sqrt(est) - np.sqrt(truth)) ** 2,
                                                        axis=1))))
            continue
        rows = world.rows(a)
        for lo in range(0, world.n_states, 1000):
            hi = min(lo + 1000, world.n_states)
            block = rows[lo:hi].toarray()
            total += float(np.sum(np.sqrt(0.5 * np.sum(
                (np.sqrt(est[lo:hi]) - np.sqrt(block)) ** 2, axis=1))))
    return total / (world.n_states * world.n_actions)


def system_id(side: int, transitions, seeds, priors=("gmrf",), lengthscales=(2.0, 5.0)) -> dict:
    """Hellinger and fit time of correlated beliefs (with selection) and the sparse Dirichlet."""
    from types import SimpleNamespace

    from corrpriors.applications import CorrelatedTransitionModel, DirichletTransitionModel

    world = TunnelGrid(side)
    info = SimpleNamespace(n_states=world.n_states, n_actions=4, coordinates=world.coordinates)
    out = {p: {"hellinger": [], "seconds": [], "cpu": []} for p in (*priors, "dirichlet_sparse")}
    for seed in seeds:
        s, a, s2 = world.random_walk(max(transitions), rng=np.random.default_rng(seed))
        beliefs = {p: CorrelatedTransitionModel.for_mdp(info, prior=p, lengthscale=list(lengthscales),
                                                        selection="collapsed") for p in priors}
        rows: dict = {p: ([], [], []) for p in out}
        done = 0
        for t in transitions:
            for p, belief in beliefs.items():
                belief.update(s[done:t], a[done:t], s2[done:t])
                _, sec, cpu = _timed(belief.refit)
                rows[p][0].append(mean_hellinger(world, belief))
                rows[p][1].append(sec)
                rows[p][2].append(cpu)
            d = DirichletTransitionModel(world.n_states, 4, alpha=1e-3).update(s[:t], a[:t], s2[:t])
            rows["dirichlet_sparse"][0].append(mean_hellinger(world, _ActionMeans(d)))
            rows["dirichlet_sparse"][1].append(0.0)
            rows["dirichlet_sparse"][2].append(0.0)
            done = t
            print(f"    side {side} seed {seed} T {t}: " + ", ".join(
                f"{p} {rows[p][0][-1]:.3f} ({rows[p][1][-1]:.1f} s wall, {rows[p][2][-1]:.1f} s CPU)"
                for p in out), flush=True)
        for p in out:
            out[p]["hellinger"].append(rows[p][0])
            out[p]["seconds"].append(rows[p][1])
            out[p]["cpu"].append(rows[p][2])
    return {"side": side, "transitions": list(transitions), "seeds": list(seeds), "methods": out}


class _ActionMeans:
    """``action_mean(a)`` of a Dirichlet belief: its mean is one (S, A, S) array, or with sparse
    storage (from 2,000 states) a BackgroundTransitions table, whose action is a one-action
    table (the sysid100 section failed on it: a table is not subscriptable)."""

    def __init__(self, belief):
        self.mean = belief.mean()

    def action_mean(self, a: int):
        if hasattr(self.mean, "policy_rows"):
            return self.mean.policy_rows(np.full(self.mean.n_states, a))
        return self.mean[:, a, :]


SYSID = {  # section -> (quick, full): (side, transitions, seeds, priors, length scales)
    "tunnel30": (((10, [300, 1000], [0]), (30, [1000, 5000, 10000], [0, 1, 2])),
                 ("gmrf", "dense"), (2.0, 5.0)),
    "sysid100": (((20, [4000], [0]), (100, [100_000], [0])), ("gmrf",), (5.0,)),
}


def sysid_child(section: str, quick: bool) -> None:
    """One system-identification section in this (fresh) process; prints its JSON as the last line
    (progress goes to stderr), with ``peak_mb`` (VmHWM at the end) and ``baseline_peak_mb``
    (VmHWM after the imports)."""
    import corrpriors.applications  # noqa: F401  (the imports, before the baseline)

    sizes, priors, lengthscales = SYSID[section]
    side, ts, seeds = sizes[0] if quick else sizes[1]
    baseline = peak_mb()
    stdout, sys.stdout = sys.stdout, sys.stderr
    try:
        r = system_id(side, ts, seeds, priors=priors, lengthscales=lengthscales)
    finally:
        sys.stdout = stdout
    r.update(peak_mb=peak_mb(), baseline_peak_mb=baseline, cpu_total=time.process_time(),
             memory="VmHWM of a fresh process running this section only")
    print(json.dumps(r))


def section_sysid(section: str, quick: bool) -> dict:
    """:func:`sysid_child` in a fresh process (so that its peak memory is the section's own)."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    cmd = [sys.executable, __file__, "--sysid-child", section, *(["--quick"] if quick else [])]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env, check=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    cpu = {p: [c for seed in m["cpu"] for c in seed] for p, m in r["methods"].items() if p != "dirichlet_sparse"}
    print("  CPU s per selecting refit: " + ", ".join(f"{p} {min(c):.1f}-{max(c):.1f}" for p, c in cpu.items())
          + f"; peak memory {r['peak_mb']:.0f} MB (VmHWM, fresh process; {r['baseline_peak_mb']:.0f} MB "
          "after the imports)", flush=True)
    return r


def section_taxi() -> dict:
    import gymnasium

    from corrpriors.applications import CorrelatedTransitionModel
    from corrpriors.envs import from_gymnasium, random_exploration

    env = gymnasium.make("Taxi-v4")
    mdp = from_gymnasium(env)
    walk = random_exploration(env, 5000, rng=0)
    rows = {}
    for prior in ("dense", "gmrf"):
        belief = CorrelatedTransitionModel.for_mdp(mdp, prior=prior, selection="fixed")
        belief.update(walk.states, walk.actions, walk.next_states)
        _, t, c = _timed(belief.refit)
        rows[prior] = {"seconds": t, "cpu": c, "n_categories": belief.n_categories}
    return {"transitions": 5000, "rows": rows}


def _file_name(sections: list[str], args: argparse.Namespace) -> str:
    """``bench_scale-<sections>[-full][-quick][-ls<f>].json``: one file per configuration, so a
    run with other sections or sizes never overwrites another's results.
    """
    parts = ["bench_scale", "+".join(sections)]
    parts += ["full"] if args.full else []
    parts += ["quick"] if args.quick else []
    parts += [f"ls{args.lengthscale_fraction:g}"] if args.lengthscale_fraction is not None else []
    return "-".join(parts) + ".json"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (seconds)")
    parser.add_argument("--full", action="store_true", help="also C = 99,856")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--lengthscale-fraction", type=float, default=None,
                        help="GMRF length scale as a fraction of the side (default: 5 cells)")
    parser.add_argument("--sections", default="exact,speed,growth,taxi",
                        help="comma-separated: exact, speed, growth, taxi, tunnel30, sysid100")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out",
                        help="output folder (default benchmarks/out)")
    parser.add_argument("--sysid-child", choices=tuple(SYSID), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    global LENGTHSCALE
    if args.lengthscale_fraction is not None:
        LENGTHSCALE = ("fraction", args.lengthscale_fraction)
    if args.child:
        child(args.child)
        return 0
    if args.sysid_child:
        sysid_child(args.sysid_child, args.quick)
        return 0
    from corrpriors._threads import blas_threads

    sections = args.sections.split(",")
    report = {}
    with blas_threads(1):
        if "exact" in sections:
            report["exact"] = r = section_exact(10 if args.quick else 20)
            print(f"exact (C = {r['C']}, sparse vs dense with Sigma = Q^-1):")
            for name, row in r["rows"].items():
                print(f"  {name:12s} " + "  ".join(f"{k} {v:.1e}" for k, v in row.items()))
        if "speed" in sections:
            report["speed"] = r = section_speed(20 if args.quick else 50)
            print(f"speed (C = {r['C']:,}, same answer: max |d lambda| "
                  f"{r['max_abs_d_lambda']:.1e}): dense {r['dense_seconds']:.2f} s, sparse "
                  f"{r['sparse_seconds']:.2f} s -> {r['ratio_wall']:.1f}x wall, "
                  f"{r['ratio_cpu']:.1f}x CPU", flush=True)
        if "growth" in sections:
            sides = [20, 40] if args.quick else [50, 100, 200] + ([316] if args.full else [])
            print("growth (sparse path, fresh process per size):")
            report["growth"] = r = section_growth(sides)
            for row in r["rows"][1:]:
                print(f"  C {row['C']:,}: x{row['growth_from_previous']:.2f} "
                      f"(exponent {row['exponent_from_previous']:.2f})")
        if "tunnel30" in sections:
            side = 10 if args.quick else 30
            print(f"system identification, {side} x {side} tunnel grid, GMRF vs dense SE prior "
                  "(fresh process):", flush=True)
            report["tunnel30"] = section_sysid("tunnel30", args.quick)
        if "sysid100" in sections:
            side = 20 if args.quick else 100
            print(f"system identification at scale, {side} x {side} tunnel grid, GMRF prior "
                  "(fresh process):", flush=True)
            report["sysid100"] = section_sysid("sysid100", args.quick)
        if "taxi" in sections and not args.quick:
            report["taxi"] = r = section_taxi()
            print("taxi (500 states x 6 actions, 5,000 transitions, one fit of all actions): "
                  + ", ".join(f"{k} {v['seconds']:.2f} s" for k, v in r["rows"].items()))
    from corrpriors._fileio import atomic_write_bytes

    out = args.out / _file_name(sections, args)
    atomic_write_bytes(out, (json.dumps(report, indent=2) + "\n").encode())
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
