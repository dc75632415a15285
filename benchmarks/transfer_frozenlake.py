"""Transfer between Gymnasium FrozenLake maps: a task family this project did not build.

Four slippery 8 x 8 FrozenLake maps (``gymnasium``'s ``generate_random_map``, frozen with
probability ``--frozen``): three sources with ``--source`` transitions each and a target with a
growing budget, every transition at a uniformly random state and action. Two scenarios per
draw: ``same`` (every map the target's: the tasks are identical) and ``other`` (three other
maps: the slip and the actions are shared, the holes and the goal are not; FrozenLake's holes
and goal are absorbing). Side by side in one run:

``transfer``
    :class:`~corrpriors.applications.MultiTaskTransitionModel` at its defaults: every task's
    belief is ``for_mdp``'s, the per-(state, action) layer on (round 13).
``transfer_plain``
    The same without the layer (``concentration=None``, ...): the transfer experiment's model.
``pg``
    The target's single-task belief at ``for_mdp``'s defaults (the per-pair layer on).
``pg_plain``
    The same without the layer (the transfer experiment's ``pg``).
``pooled``
    ``pg`` fitted to every task's counts summed (the transfer experiment's ``pg_pooled``, with
    the layer).

Prints the Hellinger error's ratios (mean and worst draw) per scenario and budget -- each
transfer belief to its like (``transfer`` / ``pg``, ``transfer_plain`` / ``pg_plain``), to the
other single-task belief and to ``pooled`` -- and the learned similarities; writes
``benchmarks/out/transfer_frozenlake.json``.

Run from the repository root::

    python benchmarks/transfer_frozenlake.py               # 6 draws, about a minute per draw
    python benchmarks/transfer_frozenlake.py --draws 2
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

import numpy as np
from _proc import output_name

ROOT = Path(__file__).resolve().parents[1]
METHODS = ("transfer", "transfer_plain", "pg", "pg_plain", "pooled")
PLAIN = dict(concentration=None, contamination_prior=None, distinct_prior=None, support_prior=None)


def _lake(map_seed: int, frozen: float):
    import gymnasium as gym
    from gymnasium.envs.toy_text.frozen_lake import generate_random_map

    from corrpriors.envs import from_gymnasium

    desc = generate_random_map(size=8, p=frozen, seed=int(map_seed))
    return from_gymnasium(gym.make("FrozenLake-v1", desc=desc, is_slippery=True))


def run_draw(draw: int, scenario: str, budgets: list[int], n_source: int, frozen: float) -> dict:
    """Errors of every method at every budget, and the transfer beliefs' similarities."""
    from corrpriors.applications import CorrelatedTransitionModel, MultiTaskTransitionModel
    from corrpriors.experiments.transfer import uniform_transitions
    from corrpriors.mdp import mean_hellinger, transition_counts

    rng = np.random.default_rng([draw, 0 if scenario == "same" else 1])
    base = 100 + 10 * draw
    maps = [base] * 4 if scenario == "same" else [base + 1, base + 2, base + 3, base]
    mdps = [_lake(m, frozen) for m in maps]
    S, A = mdps[0].n_states, mdps[0].n_actions
    P = np.asarray(mdps[-1].transitions)
    src = [transition_counts(uniform_transitions(m, n_source, rng=rng), S, A) for m in mdps[:-1]]
    s, a, s2 = uniform_transitions(mdps[-1], max(budgets), rng=rng)
    transfer = {"transfer": MultiTaskTransitionModel.for_mdps(mdps),
                "transfer_plain": MultiTaskTransitionModel.for_mdps(mdps, **PLAIN)}
    for model in transfer.values():
        for u, c in enumerate(src):
            model.set_counts(u, c)
    errors: dict[str, list[float]] = {m: [] for m in METHODS}
    similarity: dict[str, list[float]] = {k: [] for k in transfer}
    single = {"pg": CorrelatedTransitionModel.for_mdp(mdps[-1]),
              "pg_plain": CorrelatedTransitionModel.for_mdp(mdps[-1], **PLAIN),
              "pooled": CorrelatedTransitionModel.for_mdp(mdps[-1])}
    for T in budgets:
        x = transition_counts((s[:T], a[:T], s2[:T]), S, A)
        for name, model in transfer.items():
            errors[name].append(mean_hellinger(P, model.set_counts(3, x).mean(3)))
            similarity[name].append(float(model.similarity_[3]))
        for name, belief in single.items():
            counts = sum(src) + x if name == "pooled" else x
            errors[name].append(mean_hellinger(P, belief.set_counts(counts).mean()))
    return {"errors": errors, "similarity": similarity}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--draws", type=int, default=6)
    parser.add_argument("--budgets", default="25,100,400")
    parser.add_argument("--source", type=int, default=2000)
    parser.add_argument("--frozen", type=float, default=0.8)
    args = parser.parse_args(argv)
    budgets = [int(v) for v in args.budgets.split(",")]
    warnings.simplefilter("ignore")
    out: dict = {"budgets": budgets, "draws": args.draws, "scenarios": {}}
    for scenario in ("same", "other"):
        runs = [run_draw(d, scenario, budgets, args.source, args.frozen) for d in range(args.draws)]
        err = {m: np.array([r["errors"][m] for r in runs]) for m in METHODS}   # (draws, budgets)
        out["scenarios"][scenario] = {"runs": runs}
        print(f"{scenario}: Hellinger error ratio, mean over {args.draws} draws (worst draw)")
        for m, refs in (("transfer", ("pg", "pg_plain", "pooled")),
                        ("transfer_plain", ("pg_plain", "pg", "pooled"))):
            for ref in refs:
                ratio = err[m] / err[ref]
                print(f"  {m:15s} / {ref:8s} " + "  ".join(
                    f"T={T}: {ratio[:, i].mean():.3f} ({ratio[:, i].max():.3f})" for i, T in enumerate(budgets)))
        ratio = err["pg"] / err["pg_plain"]
        print(f"  {'pg':15s} / {'pg_plain':8s} " + "  ".join(
            f"T={T}: {ratio[:, i].mean():.3f}" for i, T in enumerate(budgets)))
        for name in ("transfer", "transfer_plain"):
            sims = np.array([r["similarity"][name] for r in runs])
            print(f"  similarity ({name}), median: " + ", ".join(f"{v:.3g}" for v in np.median(sims, axis=0)))
    from corrpriors._fileio import atomic_write_bytes

    atomic_write_bytes(ROOT / "benchmarks" / "out" / output_name("transfer_frozenlake", args, parser),
                       json.dumps(out, indent=2).encode())
    return out


if __name__ == "__main__":
    main()
