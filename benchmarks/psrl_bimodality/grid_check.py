"""Does the boundary treatment matter on the tunnel world too? ``psrl-grid`` with the relative
encoding's ``boundary`` = "exclude" (the experiment's default) vs "stay" (the grid's walls).

Runs ``corrpriors.experiments.psrl_grid.run_seed`` (the experiment's own streams) for
``pg_sampling`` and ``pg_mean`` and prints, per boundary, the mean +- s.e. of the normalised
return averaged over the run (the curve mean) and at the end, and the fraction of seeds whose
final policy reaches 90 % of the optimal return.

Usage (from the repository root)::

    PYTHONPATH=src OPENBLAS_NUM_THREADS=1 nice -n 10 python benchmarks/psrl_bimodality/grid_check.py \
        --seeds 1000-1019
"""

from __future__ import annotations

import argparse
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


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", default="1000-1019")
    p.add_argument("--boundaries", nargs="+", default=["exclude", "stay"])
    args = p.parse_args(argv)
    seeds = parse_seeds(args.seeds)
    for boundary in args.boundaries:
        folder = OUT / f"grid_{boundary}"
        config = psrl_grid.Config(methods=METHODS, boundary=boundary)
        for seed in seeds:
            path = folder / f"seed-{seed}.npz"
            if path.exists():
                continue
            rng = np.random.default_rng([seed, zlib.crc32(psrl_grid.NAME.encode())])
            out = psrl_grid.run_seed(config, rng=rng)
            buf = io.BytesIO()
            np.savez_compressed(buf, **out)
            atomic_write_bytes(path, buf.getvalue())
            print(f"grid {boundary} seed {seed}: " + ", ".join(
                f"{m} {out['normalized_return__' + m][-1]:.3f}" for m in METHODS), flush=True)
    print("| boundary | method | seeds | curve mean | final (mean ± s.e.) | final >= 0.9 |")
    print("|---|---|---:|---:|---:|---:|")
    for boundary in args.boundaries:
        files = [OUT / f"grid_{boundary}" / f"seed-{s}.npz" for s in seeds]
        files = [f for f in files if f.exists()]
        for m in METHODS:
            curves = np.array([np.load(f)[f"normalized_return__{m}"] for f in files])
            fin = curves[:, -1]
            print(f"| {boundary} | {m} | {len(files)} | {curves.mean():.3f} | {fin.mean():.3f} ± "
                  f"{fin.std(ddof=1) / np.sqrt(len(fin)):.3f} | {np.mean(fin >= 0.9):.0%} |")


if __name__ == "__main__":
    main()
