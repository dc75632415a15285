"""Benchmark: learning the scale and the length scale on small tables, joint step vs EM.

Issue 22 (item 5): ``corrpriors fit --learn-scale --learn-lengthscale`` stopped at
``--max-iter`` on small tables. This battery fits random tables on grids of 3 x 3 to 8 x 8
cells with K = 2..5 categories, of four kinds (cycled by seed):

* ``sparse``: Poisson(0.4) counts per cell and category (most cells empty or nearly);
* ``dense``: uniform integer counts 0..19;
* ``smooth``: counts of a latent field drawn from the squared-exponential prior
  (length scale uniform in 0.5..3, scale 1.5^2), 0..9 draws per cell;
* ``iid``: uniform integer counts 0..5 (no spatial structure).

Each table is fitted with ``learn_scale=True, learn_kernel=True`` (squared exponential, start
l = 1, bounds 0.01..1000, tol 1e-8) twice in the same process, alternating: with the joint
M-step (``kernel_update="joint"``, the default) and with EM (``kernel_update="em"``, the
algorithm before issue 22). Reports how many converge within ``--max-iter``, their iterations
and CPU seconds (``time.process_time``) and the ELBO difference.

Run from the repository root::

    python benchmarks/bench_kernel_learning.py            # 80 tables, max_iter 1000
    python benchmarks/bench_kernel_learning.py --quick    # 12 tables

Writes ``benchmarks/out/bench_kernel_learning.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
import warnings
from pathlib import Path

import numpy as np

from corrpriors import kernels
from corrpriors.core.model import CorrelatedMultinomial

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("sparse", "dense", "smooth", "iid")


def make_case(seed: int) -> dict:
    """The random table of ``seed`` (grid, K and kind drawn from the seed's generator)."""
    rng = np.random.default_rng(seed)
    nx, ny = (int(v) for v in rng.integers(3, 9, size=2))
    k = int(rng.integers(2, 6))
    xy = np.array([(i, j) for i in range(nx) for j in range(ny)], dtype=float)
    kind = KINDS[seed % 4]
    c = len(xy)
    if kind == "sparse":
        counts = rng.poisson(0.4, size=(c, k))
    elif kind == "dense":
        counts = rng.integers(0, 20, size=(c, k))
    elif kind == "smooth":
        ell = rng.uniform(0.5, 3)
        cov = np.exp(-((xy[:, None] - xy[None]) ** 2).sum(-1) / ell ** 2) + 1e-8 * np.eye(c)
        f = np.linalg.cholesky(cov) @ rng.standard_normal((c, k)) * 1.5
        p = np.exp(f)
        p /= p.sum(1, keepdims=True)
        n = rng.integers(0, 10, size=c)
        counts = np.array([rng.multinomial(n[i], p[i]) for i in range(c)])
    else:
        counts = rng.integers(0, 6, size=(c, k))
    return {"seed": seed, "grid": f"{nx}x{ny}", "K": k, "kind": kind, "xy": xy,
            "counts": counts}


def fit(case: dict, kernel_update: str, max_iter: int) -> dict:
    """One fit; its convergence, iterations, CPU seconds, ELBO and hyper-parameters."""
    bound = kernels.SquaredExponential(lengthscale=1.0, lengthscale_bounds=(1e-2, 1e3))
    model = CorrelatedMultinomial(covariance=bound.bind(coords=case["xy"]), learn_scale=True,
                                  learn_kernel=True, max_iter=max_iter, tol=1e-8)
    options = dataclasses.replace(model._options(case["counts"].shape[1]),
                                  kernel_update=kernel_update)
    model._options = lambda k: options  # type: ignore[method-assign]
    start = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(case["counts"])
    return {"converged": bool(model.converged_), "n_iter": int(model.n_iter_),
            "cpu": time.process_time() - start, "elbo": float(model.elbo_),
            "scale": float(model.scale_),
            "lengthscale": float(np.exp(model.kernel_.theta[0]))}


def summarise(rows: list[dict], method: str) -> dict:
    """Converged count and the median / max iterations and CPU seconds of ``method``."""
    done = [r[method] for r in rows]
    conv = [d for d in done if d["converged"]]
    its = np.array([d["n_iter"] for d in conv]) if conv else np.array([np.nan])
    cpu = np.array([d["cpu"] for d in done])
    return {"converged": len(conv), "of": len(done), "median_iter": float(np.median(its)),
            "max_iter": float(np.max(its)), "median_cpu": float(np.median(cpu)),
            "total_cpu": float(cpu.sum())}


def main() -> None:
    """Run the battery and print and save the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="12 tables")
    parser.add_argument("--cases", type=int, default=80)
    parser.add_argument("--first", type=int, default=0, help="first seed (default 0)")
    parser.add_argument("--max-iter", type=int, default=1000)
    args = parser.parse_args()
    n = 12 if args.quick else args.cases
    rows = []
    for seed in range(args.first, args.first + n):
        case = make_case(seed)
        row = {key: case[key] for key in ("seed", "grid", "K", "kind")}
        order = ("em", "joint") if seed % 2 == 0 else ("joint", "em")
        for method in order:
            row[method] = fit(case, method, args.max_iter)
        row["elbo_gain"] = row["joint"]["elbo"] - row["em"]["elbo"]
        print(json.dumps(row), flush=True)
        rows.append(row)
    table = {m: summarise(rows, m) for m in ("em", "joint")}
    gains = np.array([r["elbo_gain"] for r in rows])
    print(f"\n{'method':<7}{'converged':>12}{'median it':>11}{'max it':>8}"
          f"{'median CPU s':>14}{'total CPU s':>13}")
    for m, s in table.items():
        print(f"{m:<7}{s['converged']:>7} / {s['of']:<3}{s['median_iter']:>11.0f}"
              f"{s['max_iter']:>8.0f}{s['median_cpu']:>14.3f}{s['total_cpu']:>13.1f}")
    print(f"ELBO(joint) - ELBO(em): min {gains.min():.2e}, median {np.median(gains):.2e}, "
          f"max {gains.max():.2e}")
    out = ROOT / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_kernel_learning.json").write_text(
        json.dumps({"max_iter": args.max_iter, "first": args.first, "rows": rows,
                    "summary": table}, indent=1))


if __name__ == "__main__":
    main()
