"""``corrpriors fit``: fit a correlated multinomial model to a count matrix from CSV files.

Writes ``probs.csv`` (posterior mean probabilities, C x K), ``psi.npz`` (``psi_mean``,
``psi_var``, C x (K - 1)) and ``summary.json`` to ``--out``. Without ``--counts`` the shipped
example (a 5x5 grid random walk) is used together with its coordinates.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np

KERNELS = ("se", "exp", "matern32", "matern52")


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``fit`` sub-command's arguments."""
    parser.add_argument("--counts", type=Path, default=None,
                        help="CSV of non-negative integer counts, one row per covariate "
                             "(C x K, optional header). Default: the shipped example.")
    loc = parser.add_mutually_exclusive_group()
    loc.add_argument("--coords", type=Path, default=None,
                     help="CSV of covariate coordinates (C x D). Default with the example: "
                          "its grid coordinates.")
    loc.add_argument("--distances", type=Path, default=None,
                     help="CSV of pairwise covariate distances (C x C).")
    parser.add_argument("--kernel", choices=KERNELS, default="se",
                        help="covariance function (se = exp(-d^2/l^2), the paper's). Default: se")
    parser.add_argument("--lengthscale", type=float, default=1.0,
                        help="kernel length scale l (initial value with --learn-lengthscale)")
    parser.add_argument("--learn-scale", action="store_true",
                        help="learn the covariance scale theta by variational EM")
    parser.add_argument("--scale-prior", type=float, nargs=2, metavar=("SHAPE", "RATE"),
                        default=None, help="Gamma hyper-prior on theta (MAP-EM)")
    parser.add_argument("--learn-lengthscale", action="store_true",
                        help="learn the kernel length scale (L-BFGS-B M-step on the ELBO)")
    parser.add_argument("--learn-mean", choices=("none", "constant"), default="none",
                        help="learn one prior mean per stick (constant) or keep the uniform one")
    parser.add_argument("--max-iter", type=int, default=1000, help="CAVI iteration cap")
    parser.add_argument("--tol", type=float, default=1e-8, help="relative ELBO tolerance")
    parser.add_argument("--out", type=Path, required=True, help="output directory")


def _read_csv(path: Path, name: str) -> tuple[np.ndarray, list[str] | None]:
    """Read a numeric CSV with an optional header row."""
    if not path.is_file():
        raise ValueError(f"{name}: file not found: {path}")
    lines = [ln.strip() for ln in path.read_text().splitlines() if ln.strip()]
    if not lines:
        raise ValueError(f"{name}: file is empty: {path}")
    header = None
    first = [f.strip() for f in lines[0].split(",")]
    try:
        [float(f) for f in first]
    except ValueError:
        header = first
        lines = lines[1:]
    rows = []
    for i, ln in enumerate(lines):
        try:
            rows.append([float(f) for f in ln.split(",")])
        except ValueError:
            raise ValueError(f"{name}: non-numeric value on data row {i + 1} of {path}") from None
    if not rows:
        raise ValueError(f"{name}: no data rows in {path}")
    if len({len(r) for r in rows}) != 1:
        raise ValueError(f"{name}: rows of {path} have different numbers of columns")
    return np.asarray(rows, dtype=float), header


def _make_kernel(name: str, lengthscale: float):
    from . import kernels

    cls = {"se": kernels.SquaredExponential, "exp": kernels.Exponential,
           "matern32": kernels.Matern32, "matern52": kernels.Matern52}[name]
    return cls(lengthscale=lengthscale)


def run(args: argparse.Namespace) -> int:
    """Run the fit; return 0 on success and 2 on bad input (message on stderr)."""
    try:
        return _run(args)
    except ValueError as exc:
        print(f"corrpriors fit: error: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    from .data import example_path
    from .core.model import CorrelatedMultinomial

    counts_path = args.counts
    coords_path, dist_path = args.coords, args.distances
    if counts_path is None:
        counts_path = Path(str(example_path("counts.csv")))
        if coords_path is None and dist_path is None:
            coords_path = Path(str(example_path("coords.csv")))
    elif coords_path is None and dist_path is None:
        raise ValueError("--coords or --distances is required with --counts "
                         "(the covariance is a kernel of covariate locations)")
    counts, header = _read_csv(counts_path, "--counts")
    c, k = counts.shape
    if k < 2:
        raise ValueError(f"--counts: expected at least K=2 columns, got {k}")
    if args.lengthscale <= 0 or not np.isfinite(args.lengthscale):
        raise ValueError(f"--lengthscale: expected a positive number, got {args.lengthscale}")
    kernel = _make_kernel(args.kernel, args.lengthscale)
    if coords_path is not None:
        coords, _ = _read_csv(coords_path, "--coords")
        if coords.shape[0] != c:
            raise ValueError(f"--coords: expected {c} rows (one per row of --counts), "
                             f"got {coords.shape[0]}")
        bound = kernel.bind(coords=coords)
    else:
        dist, _ = _read_csv(dist_path, "--distances")
        if dist.shape != (c, c):
            raise ValueError(f"--distances: expected shape ({c}, {c}) to match --counts, "
                             f"got {dist.shape}")
        bound = kernel.bind(distances=dist)

    model = CorrelatedMultinomial(
        covariance=bound, learn_scale=args.learn_scale,
        learn_mean=None if args.learn_mean == "none" else args.learn_mean,
        scale_prior=None if args.scale_prior is None else tuple(args.scale_prior),
        learn_kernel=args.learn_lengthscale, max_iter=args.max_iter, tol=args.tol)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(counts)
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    probs = model.probs(method="plugin")
    names = header if header is not None and len(header) == k else [f"p{j + 1}" for j in range(k)]
    np.savetxt(out / "probs.csv", probs, delimiter=",", fmt="%.10g", header=",".join(names),
               comments="")
    np.savez(out / "psi.npz", psi_mean=model.psi_mean_, psi_var=model.psi_var_)
    hp = dict(zip(model.kernel_.hyperparameter_names, np.exp(model.kernel_.theta).tolist(),
                  strict=True))
    summary = {
        "counts": str(counts_path),
        "n_covariates": int(c),
        "n_categories": int(k),
        "kernel": args.kernel,
        "elbo": float(model.elbo_),
        "objective": float(model.objective_),
        "n_iter": int(model.n_iter_),
        "converged": bool(model.converged_),
        "scale": float(model.scale_),
        "lengthscale": float(hp.get("lengthscale", args.lengthscale)),
        "kernel_hyperparameters": hp,
        "jitter": float(model.jitter_),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"fitted C={c} covariates, K={k} categories in {model.n_iter_} iterations "
          f"(converged={model.converged_}); ELBO {model.elbo_:.4f}; wrote {out}/probs.csv, "
          f"psi.npz, summary.json")
    return 0


__all__ = ["configure", "run"]
