"""How close does the learned similarity get to the best one in hindsight?

The transfer experiment's panel 1 (``corrpriors reproduce transfer``, its seeds and data) run
once per similarity of the lattice with ``--set similarity=<rho>`` (``pg_transfer`` keeps that
:math:`\\rho`, :class:`~corrpriors.applications.MultiTaskTransitionModel`'s
``fixed_similarity``) and once with the learned one, side by side per seed. Per budget it
prints, as ratios of the mean Hellinger error (mean over seeds of the numerator over the mean
of the denominator):

``learned``
    ``pg_transfer`` as the experiment runs it (the similarity chosen from the data).
``oracle``
    Per seed, the best fixed similarity in hindsight (knows the truth: a bound on what choosing
    :math:`\\rho` can reach, not a method).
``best fixed``
    The one similarity best on average over the seeds (and which).
``pooled``
    ``pg_pooled`` (every task's data as one).

each against ``pg`` (the target's data only) and against ``pg_pooled``; and the learned and
the oracle similarity's median. So a ratio above 1 to ``pg_pooled`` splits into what the
choice of :math:`\\rho` loses (learned / oracle) and what no similarity can win (oracle /
pooled). Writes ``benchmarks/out/transfer_oracle_<settings>_seeds<seeds>.json``, ``<settings>``
the experiment's results-folder name of the configuration (its label and hash), so runs of
other settings or seeds do not overwrite each other.

Run from the repository root::

    python benchmarks/transfer_oracle.py             # windy, r = 0.8, 8 seeds, about 3 min on 1 core
    python benchmarks/transfer_oracle.py --family lake --relatedness 0.5 --seeds 1600-1615
    python benchmarks/transfer_oracle.py --set layer=true --jobs 2
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def run_seed(seed: int, config, similarities: tuple) -> dict:
    """``pg_transfer``'s error at every similarity (and learned), ``pg``'s and ``pg_pooled``'s."""
    from corrpriors.experiments import transfer
    from corrpriors.runner import seed_generator

    warnings.simplefilter("ignore")
    out: dict = {}
    for rho in ("learned", *similarities):
        cfg = dataclasses.replace(config, similarity=rho if rho == "learned" else repr(float(rho)))
        res = transfer.run_seed(cfg, rng=seed_generator("transfer", seed))
        gc.collect()   # (a multi-task model is a reference cycle; the runner collects per seed too)
        hell = res.curves["hellinger"]
        out[str(rho)] = np.asarray(hell["pg_transfer"]).tolist()
        if rho == "learned":
            out["pg"], out["pg_pooled"] = (np.asarray(hell[m]).tolist() for m in ("pg", "pg_pooled"))
            out["similarity"] = np.asarray(res.method_extras["similarity"]["pg_transfer"]).tolist()
    return out


def summarise(runs: list[dict], similarities: tuple, budgets: list[int]) -> dict:
    """The ratios the module docstring lists, per budget."""
    fixed = np.array([[r[str(rho)] for rho in similarities] for r in runs])   # (seeds, rho, budgets)
    err = {m: np.array([r[m] for r in runs]) for m in ("learned", "pg", "pg_pooled")}
    best = fixed.mean(0).argmin(0)                                            # (budgets,)
    err["oracle"] = fixed.min(1)
    err["best fixed"] = fixed[:, best, np.arange(len(budgets))]
    oracle_rho = np.asarray(similarities)[fixed.argmin(1)]                    # (seeds, budgets)
    out = {name: {ref: (err[name].mean(0) / err[ref].mean(0)).tolist() for ref in ("pg", "pg_pooled")}
           for name in ("learned", "oracle", "best fixed", "pg_pooled")}
    out["best fixed rho"] = [float(similarities[i]) for i in best]
    out["median similarity"] = {"learned": np.median([r["similarity"] for r in runs], 0).tolist(),
                                "oracle": np.median(oracle_rho, 0).tolist()}
    return out


def main(argv=None) -> dict:
    from corrpriors._fileio import atomic_write_bytes
    from corrpriors.applications.multitask import SIMILARITY_GRID
    from corrpriors.experiments import transfer

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--family", choices=("windy", "lake"), default="windy")
    parser.add_argument("--relatedness", type=float, default=0.8)
    parser.add_argument("--seeds", default="1200-1207", help="seeds as for corrpriors reproduce, e.g. 1200-1215")
    parser.add_argument("--budgets", default=None,
                        help="target budgets, e.g. 25,50,100 (default: the experiment's; the target's "
                             "transitions are drawn for the largest, so other budgets see other data)")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="another experiment setting (e.g. layer=true)")
    args = parser.parse_args(argv)
    from corrpriors.runner._config import apply_overrides, parse_assignments, run_folder_name
    from corrpriors.runner._run import parse_seeds

    try:
        changes = parse_assignments(args.set)
        changes.update(family=args.family, relatedness=str(args.relatedness), psrl_tasks="0")
        if args.budgets:
            changes["budgets"] = args.budgets
        config, _ = apply_overrides(transfer, transfer.Config(), changes)
        transfer.check_config(config)
        seeds = parse_seeds(args.seeds)
    except ValueError as exc:
        parser.error(str(exc))
    budgets = [int(b) for b in config.budgets]
    from joblib import Parallel, delayed

    runs = Parallel(n_jobs=args.jobs)(delayed(run_seed)(s, config, SIMILARITY_GRID) for s in seeds)
    summary = summarise(runs, SIMILARITY_GRID, budgets)
    print(f"{args.family}, relatedness {args.relatedness:g}, {len(seeds)} seeds ({args.seeds})"
          + (f", {' '.join(args.set)}" if args.set else ""))
    print(f"{'budget:':24s}" + "".join(f"{b:>10d}" for b in budgets))
    for name in ("learned", "oracle", "best fixed", "pg_pooled"):
        for ref in ("pg", "pg_pooled"):
            if name != ref:
                print(f"{name + ' / ' + ref:24s}" + "".join(f"{v:10.3f}" for v in summary[name][ref]))
    print(f"{'best fixed rho':24s}" + "".join(f"{v:10.4g}" for v in summary["best fixed rho"]))
    for k, v in summary["median similarity"].items():
        print(f"{'median rho, ' + k:24s}" + "".join(f"{x:10.4g}" for x in v))
    out = {"family": args.family, "relatedness": args.relatedness, "seeds": seeds, "budgets": budgets,
           "settings": args.set, "summary": summary, "runs": runs}
    name = f"transfer_oracle_{run_folder_name(transfer, config)}_seeds{args.seeds}.json"
    atomic_write_bytes(ROOT / "benchmarks" / "out" / name, json.dumps(out, indent=2).encode())
    return out


if __name__ == "__main__":
    main()
