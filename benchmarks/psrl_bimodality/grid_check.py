"""Does the boundary treatment matter on the tunnel world too? ``psrl-grid`` with the relative
encoding's ``boundary`` = "exclude" (the experiment's default) vs "stay" (the grid's walls).

Runs ``corrpriors.experiments.psrl_grid.run_seed`` (the experiment's own streams) for
``pg_sampling`` and ``pg_mean`` and prints, per boundary, the mean +- s.e. of the normalised
return averaged over the run (the curve mean) and at the end, and the fraction of seeds whose
final policy reaches 90 % of the optimal return.

Usage (from the repository root)::

    PYTHONPATH=src OPENBLAS_NUM_THREADS=1 nice -n 10 python benchmarks/psrl_bimodality/grid_check.py \
        --seeds 1000-1019

Every seed is saved as ``<out>/grid_<boundary>[_quick]/seed-<k>.npz`` (the curves as
``<metric>__<method>``, the extras as ``extra__<name>``, the per-method extras as
``method_extra__<name>__<method>``) and reused by a later run of the same setting; ``--quick``
runs the experiment's ``quick_config`` (a few hundred transitions) into its own folders.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import pathlib
import sys
import zlib

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from study import OUT, parse_seeds  # noqa: E402

from corrpriors._fileio import atomic_write_bytes  # noqa: E402
from corrpriors.experiments import psrl_grid  # noqa: E402

METHODS = ("pg_sampling", "pg_mean")


def flatten(result) -> dict[str, np.ndarray]:
    """The arrays of a :class:`~corrpriors.runner.SeedResult` under flat, file-safe keys."""
    arrays: dict[str, np.ndarray] = {}
    for metric, by_method in result.curves.items():
        for method, arr in by_method.items():
            arrays[f"{metric}__{method}"] = np.asarray(arr)
    for name, arr in result.extras.items():
        arrays[f"extra__{name}"] = np.asarray(arr)
    for name, by_method in result.method_extras.items():
        for method, arr in by_method.items():
            arrays[f"method_extra__{name}__{method}"] = np.asarray(arr)
    return arrays


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", default="1000-1019")
    p.add_argument("--boundaries", nargs="+", default=["exclude", "stay"])
    p.add_argument("--quick", action="store_true",
                   help="the experiment's quick_config (a few hundred transitions), own folders")
    p.add_argument("--out", type=pathlib.Path, default=OUT,
                   help=f"folder of the per-seed files (default {OUT})")
    args = p.parse_args(argv)
    seeds = parse_seeds(args.seeds)
    suffix = "_quick" if args.quick else ""
    base = psrl_grid.quick_config() if args.quick else psrl_grid.Config()
    for boundary in args.boundaries:
        folder = args.out / f"grid_{boundary}{suffix}"
        config = dataclasses.replace(base, methods=METHODS, boundary=boundary)
        for seed in seeds:
            path = folder / f"seed-{seed}.npz"
            if path.exists():
                continue
            rng = np.random.default_rng([seed, zlib.crc32(psrl_grid.NAME.encode())])
            out = flatten(psrl_grid.run_seed(config, rng=rng))
            buf = io.BytesIO()
            np.savez_compressed(buf, **out)  # type: ignore[arg-type]
            atomic_write_bytes(path, buf.getvalue())
            print(f"grid {boundary} seed {seed}: " + ", ".join(
                f"{m} {out['normalized_return__' + m][-1]:.3f}" for m in METHODS), flush=True)
    print("| boundary | method | seeds | curve mean | final (mean ± s.e.) | final >= 0.9 |")
    print("|---|---|---:|---:|---:|---:|")
    for boundary in args.boundaries:
        files = [args.out / f"grid_{boundary}{suffix}" / f"seed-{s}.npz" for s in seeds]
        files = [f for f in files if f.exists()]
        for m in METHODS:
            curves = np.array([np.load(f)[f"normalized_return__{m}"] for f in files])
            if not files:
                print(f"| {boundary} | {m} | 0 | — | — | — |")
                continue
            fin = curves[:, -1]
            se = f"{fin.std(ddof=1) / np.sqrt(len(fin)):.3f}" if len(fin) > 1 else "—"
            print(f"| {boundary} | {m} | {len(files)} | {curves.mean():.3f} | {fin.mean():.3f} ± "
                  f"{se} | {np.mean(fin >= 0.9):.0%} |")


if __name__ == "__main__":
    main()
