"""How often the transition beliefs' posterior draws cover the true dynamics.

A PSRL agent plans on posterior draws (``sample_many``), and a user may read intervals off them:
this measures whether their central 50 % and 90 % intervals of every :math:`P(s' \\mid s, a)`
contain the truth as often as they say. The truth is a task of the transfer experiment's
families (:func:`~corrpriors.envs.windy_task_family`, :func:`~corrpriors.envs.lake_task_family`
at ``--relatedness``), not a draw from the belief's prior: the coverage measured here includes
what the model gets wrong about the world (its smoothness, its encoding), not only the
approximation of its posterior (``benchmarks/calibration.py`` measures that, on draws from the
prior).

Per seed: a family (three sources with ``--source`` transitions each, the target), the target's
transitions at uniformly random states and actions, and at every ``--budgets`` value the
beliefs' ``--draws`` posterior draws. Reported per method and budget: the coverage of the 50 %
and 90 % central intervals over the entries with a true probability above 0.02 (the moves that
happen; the mean over seeds and its standard error across seeds) and the mean width of the 90 %
intervals there.

Methods:

``pg`` / ``pg-calibrated``
    The transfer experiment's single-task belief (the plain correlated model, the scale chosen
    by the collapsed bound), drawing from the mean-field :math:`q` (``draw_method="vi"``, the
    default) or from the calibrated posterior integrated over the scale
    (``draw_method="calibrated"``).
``layered`` / ``layered-calibrated``
    :meth:`~corrpriors.applications.CorrelatedTransitionModel.for_mdp` at its defaults (the
    per-(state, action) layer on), the same two ways.
``transfer`` / ``transfer-calibrated``
    The experiment's ``pg_transfer`` (:class:`~corrpriors.applications.MultiTaskTransitionModel`,
    the plain model), the same two ways.
``pooled``
    The experiment's ``pg_pooled``: ``pg`` fitted to every task's counts.

``--psrl N`` instead runs PSRL (:class:`~corrpriors.applications.PSRLAgent`, posterior
sampling, a replan every 50 transitions, 600 transitions from cell 0, scored every 50) on the
family's target task for N seeds with the plain and the layered belief, each with
``draw_method="vi"`` and ``"calibrated"``, and reports the paired difference of the mean
expected return over the run (calibrated minus vi) and the CPU time: whether wider draws change
what the agent does.

Run from the repository root::

    python benchmarks/transition_coverage.py                     # windy, 6 seeds, a few minutes
    python benchmarks/transition_coverage.py --family lake --seeds 6
    python benchmarks/transition_coverage.py --psrl 20 [--family lake]

Writes ``benchmarks/out/transition_coverage-<family>.json`` (``..._psrl-<family>.json``).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
from _proc import output_name

ROOT = Path(__file__).resolve().parents[1]
METHODS = ("pg", "pg-calibrated", "layered", "layered-calibrated", "transfer", "transfer-calibrated", "pooled")
LEVELS = (0.5, 0.9)
MOVES = 0.02   # entries with a true probability above this are scored


def _beliefs(config, mdps):
    from corrpriors.applications import CorrelatedTransitionModel
    from corrpriors.experiments import transfer as T

    target = mdps[-1]
    return {"pg": T._single_model(config, target),
            "pg-calibrated": CorrelatedTransitionModel.for_mdp(target, draw_method="calibrated",
                                                               **T._belief_options(config)),
            "layered": CorrelatedTransitionModel.for_mdp(target),
            "layered-calibrated": CorrelatedTransitionModel.for_mdp(target, draw_method="calibrated"),
            "transfer": T._transfer_model(config, mdps),
            "transfer-calibrated": T._transfer_model(config, mdps, draw_method="calibrated"),
            "pooled": T._single_model(config, target)}


def run_seed(seed: int, config, budgets: list[int], n_draws: int) -> dict:
    """Per method and budget: coverage at each level, mean 90 % width, CPU seconds of the draws."""
    from corrpriors.experiments import transfer as T
    from corrpriors.mdp import transition_counts

    rng = np.random.default_rng([seed, 2026])
    mdps = T._family(config, config.n_sources, rng)
    S, A = mdps[0].n_states, mdps[0].n_actions
    P = np.asarray(mdps[-1].transitions)
    moves = P > MOVES
    sources = [transition_counts(T.uniform_transitions(m, config.source_transitions, rng=rng), S, A)
               for m in mdps[:-1]]
    s, a, s2 = T.uniform_transitions(mdps[-1], max(budgets), rng=rng)
    beliefs = _beliefs(config, mdps)
    for u, c in enumerate(sources):
        for name in ("transfer", "transfer-calibrated"):
            beliefs[name].set_counts(u, c)
    out: dict = {m: {"coverage": {str(q): [] for q in LEVELS}, "width90": [], "cpu": []} for m in METHODS}
    for T_ in budgets:
        x = transition_counts((s[:T_], a[:T_], s2[:T_]), S, A)
        for name, belief in beliefs.items():
            if name.startswith("transfer"):
                belief.set_counts(len(mdps) - 1, x)
                belief.mean(len(mdps) - 1)
            else:
                belief.set_counts(sum(sources) + x if name == "pooled" else x)
                belief.mean()
            tic = time.process_time()
            draws = (belief.sample_many(n_draws, task=len(mdps) - 1, rng=seed) if name.startswith("transfer")
                     else belief.sample_many(n_draws, rng=seed))
            out[name]["cpu"].append(time.process_time() - tic)
            for q in LEVELS:
                lo, hi = np.quantile(draws, [(1 - q) / 2, (1 + q) / 2], axis=0)
                inside = (P >= lo - 1e-12) & (P <= hi + 1e-12)
                out[name]["coverage"][str(q)].append(float(inside[moves].mean()))
                if q == 0.9:
                    out[name]["width90"].append(float((hi - lo)[moves].mean()))
    return out


def psrl_seed(seed: int, family: str, belief: str, draw_method: str) -> tuple[np.ndarray, float]:
    """Expected return of the greedy policy every 50 transitions of a PSRL run, and its CPU s."""
    from corrpriors.applications import CorrelatedTransitionModel, PSRLAgent, run_psrl
    from corrpriors.envs import lake_task_family, windy_task_family

    draw = windy_task_family if family == "windy" else lake_task_family
    mdp = draw(0.0, 0, rng=seed)[0][-1]   # the family's target task
    plain = dict(concentration=None, contamination_prior=None, distinct_prior=None, support_prior=None)
    model = CorrelatedTransitionModel.for_mdp(mdp, draw_method=draw_method,
                                              **(plain if belief == "plain" else {}))
    agent = PSRLAgent(model, mdp.reward_matrix, mdp.discount, replan_every=50)
    tic = time.process_time()
    out = run_psrl(mdp.transitions, agent, 600, start_state=0, rng=seed, eval_every=50, true_mdp=mdp)
    return np.ravel(out["expected_return"]), time.process_time() - tic


def psrl_main(n_seeds: int, family: str) -> dict:
    """Paired (calibrated - vi) differences of PSRL's mean expected return over the run."""
    result: dict = {"family": family, "seeds": n_seeds, "beliefs": {}}
    print(f"PSRL on the {family} target task, {n_seeds} seeds, 600 transitions: mean expected return "
          "over the run (after step 0)")
    for belief in ("plain", "layered"):
        runs = {m: [psrl_seed(s, family, belief, m) for s in range(n_seeds)] for m in ("vi", "calibrated")}
        mean = {m: np.array([r[0][1:].mean() for r in runs[m]]) for m in runs}
        diff = mean["calibrated"] - mean["vi"]
        se = float(diff.std(ddof=1) / np.sqrt(diff.size)) if diff.size > 1 else float("nan")
        cpu = {m: float(np.mean([r[1] for r in runs[m]])) for m in runs}
        result["beliefs"][belief] = {"vi": float(mean["vi"].mean()), "calibrated": float(mean["calibrated"].mean()),
                                     "difference": float(diff.mean()), "se": se, "cpu_s": cpu}
        print(f"  {belief:8s} vi {mean['vi'].mean():.4f}  calibrated {mean['calibrated'].mean():.4f}  "
              f"difference {diff.mean():+.4f} (standard error {se:.4f})  CPU s per run {cpu['vi']:.2f} / "
              f"{cpu['calibrated']:.2f}")
    return result


def main(argv=None) -> dict:
    from corrpriors.experiments import transfer as T

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--family", choices=("windy", "lake"), default="windy")
    parser.add_argument("--relatedness", type=float, default=0.8)
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--budgets", default="25,100,400,1600")
    parser.add_argument("--draws", type=int, default=400)
    parser.add_argument("--psrl", type=int, default=0, metavar="N",
                        help="run PSRL with vi and calibrated draws on N seeds instead")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    from corrpriors._fileio import atomic_write_bytes

    if args.psrl > 0:
        res = psrl_main(args.psrl, args.family)
        name = output_name(f"transition_coverage_psrl-{args.family}", args, parser,
                           ignore=("family", "relatedness", "seeds", "budgets", "draws"))
        atomic_write_bytes(ROOT / "benchmarks" / "out" / name,
                           json.dumps(res, indent=2).encode())
        return res
    budgets = [int(v) for v in args.budgets.split(",")]
    config = T.resolve_config(T.Config(relatedness=args.relatedness, family=args.family, psrl_tasks=0))
    runs = [run_seed(seed, config, budgets, args.draws) for seed in range(args.seeds)]
    table: dict = {}
    print(f"{args.family}, relatedness {args.relatedness}, {args.seeds} seeds: coverage of the central "
          f"intervals of P(s'|s,a) over the true moves (P > {MOVES}); mean (standard error across seeds)")
    print(f"  {'method':20s} " + "  ".join(f"{'T=' + str(b):>26s}" for b in budgets))
    for m in METHODS:
        row = {}
        cells = []
        for i, b in enumerate(budgets):
            c = {q: np.array([r[m]["coverage"][str(q)][i] for r in runs]) for q in LEVELS}
            width = float(np.mean([r[m]["width90"][i] for r in runs]))
            cpu = float(np.mean([r[m]["cpu"][i] for r in runs]))
            se = {q: float(v.std(ddof=1) / np.sqrt(v.size)) if v.size > 1 else float("nan") for q, v in c.items()}
            row[str(b)] = {"coverage50": float(c[0.5].mean()), "coverage90": float(c[0.9].mean()),
                           "se50": se[0.5], "se90": se[0.9], "width90": width, "draw_cpu_s": cpu}
            cells.append(f"{c[0.5].mean():.2f}/{c[0.9].mean():.2f} ({se[0.9]:.2f}) w{width:.3f}")
        table[m] = row
        print(f"  {m:20s} " + "  ".join(f"{cell:>26s}" for cell in cells))
    print("  (each cell: 50 % / 90 % coverage, the 90 % one's standard error, the mean 90 % width)")
    out = {"family": args.family, "relatedness": args.relatedness, "seeds": args.seeds,
           "budgets": budgets, "draws": args.draws, "table": table}
    atomic_write_bytes(ROOT / "benchmarks" / "out" / output_name(f"transition_coverage-{args.family}", args, parser,
                                                                 ignore=("family",)),
                       json.dumps(out, indent=2).encode())
    return out


if __name__ == "__main__":
    main()
