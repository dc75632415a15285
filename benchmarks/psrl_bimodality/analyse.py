"""Tables for the bimodality study: one row per (ablation, method) from ``study.py``'s npz files.

Usage (from the repository root)::

    PYTHONPATH=src python benchmarks/psrl_bimodality/analyse.py [--seeds 1000-1039] [ablation ...]

Columns: seeds, fraction of seeds near the optimum (final expected return >= optimal - 4.2,
i.e. >= -80 on the paper's network; the two modes of the baseline are separated by a gap
from -78.6 to -90.6, so any threshold in it gives the same split), fraction whose final policy
serves queue 2 at the corner b = (10, 0) (the optimal policy serves queue 1 there), mean +-
standard error of the final return, median final theta per action, fraction of unconverged
refits.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from study import ABLATIONS, OUT, parse_seeds  # noqa: E402

NEAR = 4.2   # distance to the optimum that counts as "near" (the baseline's -80 split)


CORNER = 10 * 11 + 0   # state index of b = (10, 0)


def corner_locked(states: np.ndarray) -> bool:
    """The run ends sitting at the full-queue-1 / empty-queue-2 corner (10, 0)."""
    b1, b2 = np.divmod(states[-500:].astype(int), 11)
    return bool(b1.mean() >= 9.5 and b2.mean() <= 0.5)


def serves_2_at_corner(policies: np.ndarray) -> bool:
    """The final policy serves queue 2 at b = (10, 0), where the optimal policy serves queue 1."""
    return bool(policies[-1][CORNER] == 1)


def row(ablation: str, method: str, seeds: list[int] | None) -> dict | None:
    folder = OUT / ablation
    files = sorted(folder.glob(f"seed-*-{method}.npz"))
    if seeds is not None:
        keep = {f"seed-{s}-{method}.npz" for s in seeds}
        files = [f for f in files if f.name in keep]
    if not files:
        return None
    final, near, locked, theta, unconv = [], [], [], [], []
    for f in files:
        z = np.load(f)
        v = float(z["expected_return"][-1])
        opt = float(z["optimal_return"])
        final.append(v)
        near.append(v >= opt - NEAR)
        locked.append(serves_2_at_corner(z["policies"]))
        if "scales" in z:
            theta.append(z["scales"][-1])
            unconv.append(float(z["n_unconverged"][-1]) / max(float(z["n_fits"][0]), 1.0))
    final = np.array(final)
    return {
        "ablation": ablation, "method": method, "n": len(files),
        "near": float(np.mean(near)), "locked": float(np.mean(locked)),
        "mean": float(final.mean()),
        "se": float(final.std(ddof=1) / np.sqrt(len(final))) if len(final) > 1 else float("nan"),
        "theta": np.median(np.array(theta), axis=0) if theta else None,
        "unconv": float(np.mean(unconv)) if unconv else float("nan"),
        "opt": opt,
    }


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("ablations", nargs="*")
    p.add_argument("--seeds", default=None)
    p.add_argument("--methods", nargs="+", default=["pg_sampling", "pg_mean"])
    args = p.parse_args(argv)
    seeds = parse_seeds(args.seeds) if args.seeds else None
    ablations = args.ablations or [a for a in ABLATIONS if (OUT / a).is_dir()]
    print("| ablation | method | seeds | near optimum | serves 2 at (10, 0) | final return (mean ± s.e.)"
          " | median θ (a0, a1) | unconverged refits |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for a in ablations:
        for m in args.methods:
            r = row(a, m, seeds)
            if r is None:
                continue
            th = "—" if r["theta"] is None else ", ".join(f"{t:.2g}" for t in r["theta"])
            print(f"| {a} | {m} | {r['n']} | {r['near']:.0%} | {r['locked']:.0%} | "
                  f"{r['mean']:.1f} ± {r['se']:.1f} | {th} | {r['unconv']:.0%} |")


if __name__ == "__main__":
    main()
