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

``--cli`` runs the case of issue 22 (finding 6) through the command line instead:
``corrpriors fit --learn-scale --learn-lengthscale`` (``--max-iter`` 1000) on 30 tables of
30 x 3 counts on a 5 x 6 grid (six each of ``sparse`` Poisson(0.6), ``walk`` random-walk
moves, ``smooth``, ``iid`` 0..9, ``dense`` 0..29) and on the shipped example, each fit in a
separate process; with ``--baseline SRC`` the same fits by the package at ``SRC`` (another
checkout's ``src``), alternated in chunks of four with this one.

Run from the repository root::

    python benchmarks/bench_kernel_learning.py            # 80 tables, max_iter 1000
    python benchmarks/bench_kernel_learning.py --quick    # 12 tables
    python benchmarks/bench_kernel_learning.py --cli --baseline BASE/src

Writes ``benchmarks/out/bench_kernel_learning.json`` (``..._cli.json`` with ``--cli``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from _proc import output_name

from corrpriors import kernels
from corrpriors._fileio import atomic_write_bytes
from corrpriors.core.model import CorrelatedMultinomial

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("sparse", "dense", "smooth", "iid")
CLI_KINDS = ("sparse", "walk", "smooth", "iid", "dense")


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


def issue_table(kind: str, seed: int) -> np.ndarray:
    """A (30, 3) table of counts on the 5 x 6 grid :func:`grid56` (issue 22, finding 6)."""
    rng = np.random.default_rng(1000 + seed)
    xy = grid56()
    if kind == "sparse":
        return rng.poisson(0.6, size=(30, 3))
    if kind == "iid":
        return rng.integers(0, 10, size=(30, 3))
    if kind == "dense":
        return rng.integers(0, 30, size=(30, 3))
    if kind == "smooth":
        ell = rng.uniform(0.7, 3)
        cov = np.exp(-((xy[:, None] - xy[None]) ** 2).sum(-1) / ell ** 2) + 1e-8 * np.eye(30)
        p = np.exp(np.linalg.cholesky(cov) @ rng.standard_normal((30, 3)) * 1.5)
        p /= p.sum(1, keepdims=True)
        n = rng.integers(0, 15, size=30)
        return np.array([rng.multinomial(n[i], p[i]) for i in range(30)])
    # walk: categories stay (bumped into the wall), moved along x, moved along y; in the last
    # column the wind pushes along y half of the time
    counts = np.zeros((30, 3), dtype=int)
    x, y = 2, 3
    for _ in range(int(rng.integers(100, 800))):
        a = int(rng.integers(0, 4))
        if x == 4 and rng.random() < 0.5:
            a = 2
        dx, dy = [(1, 0), (-1, 0), (0, 1), (0, -1)][a]
        if 0 <= x + dx < 5 and 0 <= y + dy < 6:
            counts[x * 6 + y, 1 if dx else 2] += 1
            x, y = x + dx, y + dy
        else:
            counts[x * 6 + y, 0] += 1
    return counts


def grid56() -> np.ndarray:
    """The (30, 2) cell coordinates of the 5 x 6 grid."""
    return np.array([(i, j) for i in range(5) for j in range(6)], dtype=float)


def run_cli(src: str, folder: str, names: list[str]) -> None:
    """Fit each named table of ``folder`` with ``corrpriors fit`` from the package at ``src``
    (``example``: the shipped example); print one JSON line per fit."""
    sys.path.insert(0, src)
    import corrpriors
    from corrpriors.cli import main as cli_main

    assert Path(corrpriors.__file__).resolve().is_relative_to(Path(src).resolve())
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            argv = ["fit", "--learn-scale", "--learn-lengthscale", "--max-iter", "1000",
                    "--out", tmp]
            if name != "example":
                argv += ["--counts", f"{folder}/{name}.counts.csv",
                         "--coords", f"{folder}/{name}.coords.csv"]
            err = io.StringIO()
            start = time.process_time()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                code = cli_main(argv)
            cpu = time.process_time() - start
            summary = json.loads((Path(tmp) / "summary.json").read_text())
        print(json.dumps({"case": name, "exit": code, "n_iter": summary["n_iter"],
                          "converged": summary["converged"], "cpu": cpu,
                          "elbo": summary["elbo"], "stderr": err.getvalue().strip()}),
              flush=True)


def cli_battery(baseline: str | None) -> list[dict]:
    """The issue's tables and the example through ``corrpriors fit``, this checkout and the
    baseline alternated in chunks of four; one row per table."""
    sides = {"this": str(ROOT / "src")}
    if baseline is not None:
        sides["baseline"] = baseline
    rows: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as folder:
        names = ["example"]
        for kind in CLI_KINDS:
            for seed in range(6):
                name = f"{kind}-{seed}"
                np.savetxt(f"{folder}/{name}.counts.csv", issue_table(kind, seed), fmt="%d",
                           delimiter=",")
                np.savetxt(f"{folder}/{name}.coords.csv", grid56(), fmt="%g", delimiter=",")
                names.append(name)
        for i in range(0, len(names), 4):
            order = list(sides) if i % 8 == 0 else list(sides)[::-1]
            for side in order:
                res = subprocess.run(
                    [sys.executable, __file__, "--run-cli", sides[side], folder,
                     *names[i:i + 4]], capture_output=True, text=True, check=True,
                    env={**os.environ, "PYTHONPATH": ""})
                for line in res.stdout.splitlines():
                    fit_ = json.loads(line)
                    rows.setdefault(fit_["case"], {"case": fit_["case"]})[side] = fit_
                    print(side, fit_["case"], fit_["n_iter"], fit_["converged"],
                          f"{fit_['cpu']:.2f}", flush=True)
    return list(rows.values())


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
    parser.add_argument("--cli", action="store_true",
                        help="the issue's 30 x 3 tables on a 5 x 6 grid via corrpriors fit")
    parser.add_argument("--baseline", metavar="SRC",
                        help="with --cli: also the package at SRC (a checkout's src)")
    parser.add_argument("--run-cli", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run_cli:
        run_cli(args.run_cli[0], args.run_cli[1], args.run_cli[2:])
        return
    if args.cli:
        report_cli(cli_battery(args.baseline),
                   output_name("bench_kernel_learning_cli", args, parser,
                               ignore=("cli", "quick", "cases", "first", "max_iter")))
        return
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
    name = output_name("bench_kernel_learning", args, parser, ignore=("baseline",))
    atomic_write_bytes(ROOT / "benchmarks" / "out" / name,
                       json.dumps({"max_iter": args.max_iter, "first": args.first, "rows": rows,
                                   "summary": table}, indent=1).encode())


def report_cli(rows: list[dict], name: str = "bench_kernel_learning_cli.json") -> None:
    """Print and save the command-line battery's table (by kind of table)."""
    sides = [side for side in ("baseline", "this") if side in rows[0]]
    print(f"\n{'tables':<9}" + "".join(f"{s + ' conv':>15}{'median/max it':>15}{'CPU s':>8}"
                                        for s in sides))
    for kind in ("example", *CLI_KINDS):
        group = [r for r in rows if r["case"].split("-")[0] == kind]
        line = f"{kind:<9}"
        for side in sides:
            its = [r[side]["n_iter"] for r in group]
            conv = sum(r[side]["converged"] for r in group)
            cpu = np.median([r[side]["cpu"] for r in group])
            line += (f"{conv:>10} / {len(group):<2}{np.median(its):>10.0f} / {max(its):<4}"
                     f"{cpu:>8.2f}")
        print(line)
    atomic_write_bytes(ROOT / "benchmarks" / "out" / name, json.dumps({"rows": rows}, indent=1).encode())


if __name__ == "__main__":
    main()
