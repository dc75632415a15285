"""Compare the two modes of the baseline runs (``study.py --ablation base --full``).

For every run: its mode (near the optimum / locked in the corner b = (10, 0) / other), the
states it visited, where its "serve queue 1" (action 0) data come from, the learned scales,
unconverged refits, the posterior mean against the truth in visited and unvisited rows, the
value gap of the two actions at the corner under the agent's model and under the truth, and
(``--draws``) how many posterior draws -- variational and Gibbs, at the final data and theta --
would serve queue 1 at the corner.

Usage (from the repository root)::

    PYTHONPATH=src python benchmarks/psrl_bimodality/diagnose.py [--seeds 1000-1019] [--draws]
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import sys
import warnings

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from analyse import NEAR, corner_locked  # noqa: E402
from study import OUT, build, parse_seeds  # noqa: E402

from corrpriors.applications.transitions import displacement_category_map  # noqa: E402
from corrpriors.exceptions import ConvergenceWarning, JitterWarning  # noqa: E402
from corrpriors.experiments import psrl_queueing as pq  # noqa: E402
from corrpriors.experiments.psrl_grid import se_covariance  # noqa: E402
from corrpriors.mdp.planning import policy_iteration  # noqa: E402

CORNER = 10 * 11 + 0


def hellinger_rows(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """Hellinger distance of every row, shape (S, A)."""
    return np.sqrt(0.5 * ((np.sqrt(P) - np.sqrt(np.clip(Q, 0, None))) ** 2).sum(-1))


def corner_gap(mdp, P: np.ndarray) -> float:
    """Q(corner, serve 1) - Q(corner, serve 2) of the optimal Q under model P (> 0: serve 1)."""
    from corrpriors.mdp.tabular import TabularMDP

    q = policy_iteration(TabularMDP(P, mdp.reward_matrix, mdp.discount)).q_values
    return float(q[CORNER, 0] - q[CORNER, 1])


def draw_fractions(mdp, z, n: int, rng: np.random.Generator) -> tuple[float, float, float]:
    """Refit the belief on the run's final data (to convergence, theta by EM as in PSRL) and
    return the fraction of VI draws and of Gibbs draws whose optimal action at the corner is
    "serve queue 1", and the final theta of action 0."""
    config = dataclasses.replace(pq.Config(), max_iter=2000, tol=1e-8)
    coords = np.asarray(mdp.coordinates, float)
    cov = se_covariance(coords / 10.0, config.lengthscale)
    cmap = displacement_category_map(np.round(coords).astype(int), config.radius)
    belief, _ = build("base", mdp, cov, cmap, config, "pg")
    s, a = z["states"].astype(int), z["actions"].astype(int)
    belief.update(s[:-1], a, s[1:])
    from corrpriors.mdp.tabular import TabularMDP

    plan = TabularMDP(mdp.transitions, mdp.reward_matrix, mdp.discount)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitterWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)
        vi = belief.sample_many(n, rng=rng)
        cat = cmap.aggregate(belief.counts.transpose(1, 0, 2))
        gibbs = np.empty_like(vi)
        for act, m in enumerate(belief.models_):
            res = m.fit_gibbs(cat[act], n_samples=n, burn_in=300, thin=5, rng=rng)
            gibbs[:, :, act, :] = belief._to_next_states(res.pi, act)

    def frac(draws):
        q = policy_iteration(plan, draws).q_values
        return float(np.mean(q[:, CORNER, 0] > q[:, CORNER, 1]))

    return frac(vi), frac(gibbs), float(belief.models_[0].scale_)


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", default="1000-1019")
    p.add_argument("--ablation", default="base")
    p.add_argument("--methods", nargs="+", default=["pg_sampling", "pg_mean"])
    p.add_argument("--draws", action="store_true")
    args = p.parse_args(argv)
    mdp = pq._environment()
    P = mdp.transitions
    b1, b2 = np.divmod(np.arange(mdp.n_states), 11)
    interior = (b1 >= 3) & (b1 <= 9) & (b2 >= 1) & (b2 <= 8)
    true_gap = corner_gap(mdp, P)
    d1_true = (P[:, 0, :] * b1).sum(-1) - b1
    print(f"truth: Q(corner, serve 1) - Q(corner, serve 2) = {true_gap:.2f}; "
          f"E[db1 | serve 1] interior {d1_true[interior].mean():.2f}")
    rng = np.random.default_rng(16)
    rows: list[dict] = []
    head = ("mode", "seed", "method", "final", "distinct", "a0@b1>=3 (ep<=10)", "a0@b1>=3",
            "theta", "unconv", "H vis", "H unvis", "E[db1|a0] int", "gap")
    print("| " + " | ".join(head) + (" | VI draws serve 1 | Gibbs draws serve 1 |" if args.draws else " |"))
    for seed in parse_seeds(args.seeds):
        for method in args.methods:
            f = OUT / args.ablation / f"seed-{seed}-{method}.npz"
            if not f.exists():
                continue
            z = np.load(f)
            final = float(z["expected_return"][-1])
            mode = ("near" if final >= float(z["optimal_return"]) - NEAR
                    else "corner" if corner_locked(z["states"]) else "other")
            s, a = z["states"].astype(int)[:-1], z["actions"].astype(int)
            a0_int = (a == 0) & (b1[s] >= 3)
            visited = np.bincount(s, minlength=mdp.n_states) > 0
            cells = [mode, seed, method, f"{final:.1f}", int(visited.sum()),
                     int(a0_int[:200].sum()), int(a0_int.sum()),
                     ", ".join(f"{t:.2g}" for t in z["scales"][-1]),
                     f"{z['n_unconverged'][-1] / z['n_fits'][0]:.0%}"]
            if "mean_model" in z:
                M = z["mean_model"].astype(float)
                M /= M.sum(-1, keepdims=True)
                H = hellinger_rows(P, M)
                d1 = (M[:, 0, :] * b1).sum(-1) - b1
                cells += [f"{H[visited].mean():.2f}", f"{H[~visited].mean():.2f}",
                          f"{d1[interior].mean():.2f}", f"{corner_gap(mdp, M):.1f}"]
            else:
                cells += ["", "", "", ""]
            if args.draws:
                fv, fg, _ = draw_fractions(mdp, z, 50, rng)
                cells += [f"{fv:.0%}", f"{fg:.0%}"]
            print("| " + " | ".join(str(c) for c in cells) + " |", flush=True)
            rec = {"mode": "near" if mode == "near" else "bad", "method": method,
                   "final": final, "distinct": visited.sum(), "a0_early": a0_int[:200].sum(),
                   "a0_int": a0_int.sum(), "theta0": z["scales"][-1][0], "theta1": z["scales"][-1][1],
                   "unconv": z["n_unconverged"][-1] / z["n_fits"][0],
                   "corner": corner_locked(z["states"])}
            if "mean_model" in z:
                rec.update(hvis=H[visited].mean(), hunvis=H[~visited].mean(),
                           d1=d1[interior].mean(), gap=corner_gap(mdp, M))
            rows.append(rec)
    print()
    print("| mode | method | runs | final | distinct states | serve-1 steps at b1 >= 3 (first 10 ep.) "
          "| serve-1 steps at b1 >= 3 | θ serve 1 | θ serve 2 | unconverged | sits in corner "
          "| Hellinger visited | unvisited | E[Δb1] serving 1, interior | Q gap at corner |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for method in args.methods:
        for mode in ("near", "bad"):
            grp = [r for r in rows if r["mode"] == mode and r["method"] == method]
            if not grp:
                continue

            def med(key, fmt="{:.2g}", grp=grp):
                vals = [r[key] for r in grp if key in r]
                return fmt.format(np.median(vals)) if vals else ""

            def avg(key, fmt="{:.2f}", grp=grp):
                vals = [r[key] for r in grp if key in r]
                return fmt.format(np.mean(vals)) if vals else ""

            print(f"| {mode} | {method} | {len(grp)} | {avg('final', '{:.1f}')} | {avg('distinct', '{:.0f}')} "
                  f"| {avg('a0_early', '{:.0f}')} | {avg('a0_int', '{:.0f}')} | {med('theta0')} | "
                  f"{med('theta1')} | {avg('unconv', '{:.1%}')} | {avg('corner', '{:.0%}')} | {avg('hvis')} | "
                  f"{avg('hunvis')} | {avg('d1')} | {avg('gap', '{:+.2f}')} |")
    print(f"(truth: E[Δb1] serving queue 1 in the interior {d1_true[interior].mean():.2f}, Q gap at the corner "
          f"{true_gap:+.2f}; θ: medians, the rest means)")


if __name__ == "__main__":
    main()
