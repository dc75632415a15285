"""Random MDPs: system-identification error of the correlated, Dirichlet and sparse-support beliefs.

The issue-27 floor for unstructured MDPs (``corrpriors/RandomMDP-v0``: every pair moves to
``n_successors`` random states with flat-Dirichlet probabilities, no geometry) compares the
Hellinger error of the default correlated belief with the best Dirichlet's. This study measures,
side by side on the same random walk (``random_exploration``, as ``corrpriors sysid``; the index
as the state coordinate), the error of

``dirichlet_sparse``, ``dirichlet``
    Independent Dirichlet rows, alpha = 1e-3 and 1 (posterior means): the baselines.
``pg``
    ``CorrelatedTransitionModel.for_mdp`` at its defaults (its posterior mean).
``pg_nosupport`` / ``pg_support``
    The same with ``support_prior=None`` / ``0.5`` (the sparse-support hypothesis beside the
    per-pair layer, :mod:`corrpriors.applications.transitions._support`).
``support``
    The standalone sparse-support belief (hyper-parameters by pooled evidence), posterior mean.
``oracle``
    The posterior mean under the *true generative prior* (support size ``n_successors``,
    Dir(1) on it): what no belief can beat in expected squared error -- and what the Hellinger
    error of the mean still ranks behind a near-MLE.
``*_hell``
    The Bayes estimate under the Hellinger loss of the same posterior,
    :math:`\\hat P_j \\propto E[\\sqrt{P_j}]^2` (the beliefs' ``hellinger_estimate``).

Every row prints the errors at T = ``--transitions`` and their ratio to the better of the two
Dirichlet means (the floor's reference), with the CPU seconds per seed (``time.process_time``).

``--point-estimate both`` scores every method twice on the same data, by its posterior mean and by
its Hellinger-Bayes estimate (``hellinger_estimate``, the correlated belief's by Monte Carlo with
its own seeded stream), and prints three ratio tables: (a) means against the better Dirichlet mean
(the paper's metric), (b) Hellinger estimates against the better Dirichlet Hellinger estimate (the
like-for-like comparison) and (c) Hellinger estimates against the better Dirichlet *mean* (for
information only: it changes the estimator of one side). ``hellinger`` scores by the Hellinger
estimates only.

Usage::

    python benchmarks/random_mdp_study.py --mdp-seeds 41-43 --seeds 0-1
    python benchmarks/random_mdp_study.py --mdp-seeds 51-53 --states 40 --actions 3 --successors 2
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from typing import Any

import numpy as np

from corrpriors.applications.transitions import CorrelatedTransitionModel, DirichletTransitionModel
from corrpriors.applications.transitions._hellinger import point_estimate
from corrpriors.applications.transitions._support import (
    SupportTransitionModel,
    support_hellinger_estimate,
    support_mean,
)
from corrpriors.envs import RandomMDPEnv, random_exploration
from corrpriors.exceptions import ConvergenceWarning, JitterWarning
from corrpriors.mdp import TabularMDP, hellinger
from corrpriors.runner._run import parse_seeds

METHODS = ("dirichlet_sparse", "dirichlet", "pg", "pg_nosupport", "pg_support", "support",
           "oracle", "dirichlet_sparse_hell", "support_hell", "oracle_hell")


def _estimates(method: str, mdp: TabularMDP, k: int, kinds: tuple = ("mean",), *,
               rng: np.random.Generator | None = None) -> Any:
    """A function of the data (s, a, s') -> the (S, A, S) estimates of ``kinds``, keeping its belief."""
    S, A = mdp.n_states, mdp.n_actions
    pi = np.full(S, 1e-300)
    pi[k - 1] = 1.0
    if method.startswith("dirichlet"):
        belief: Any = DirichletTransitionModel(S, A, alpha=1.0 if method == "dirichlet" else 1e-3)
    elif method.startswith("support") or method.startswith("oracle"):
        belief = SupportTransitionModel(S, A)
    else:
        kw = {"pg_nosupport": {"support_prior": None}, "pg_support": {"support_prior": 0.5}}
        belief = CorrelatedTransitionModel.for_mdp(mdp, **kw.get(method, {}))

    def one(kind: str) -> np.ndarray:
        if method.startswith("oracle"):
            hell = method == "oracle_hell" or kind == "hellinger"
            return (support_hellinger_estimate if hell else support_mean)(belief.counts, pi, 1.0)
        if method.endswith("_hell") or kind == "hellinger":
            return point_estimate(belief, "hellinger", rng=rng)
        return belief.mean()

    def estimate(s: np.ndarray, a: np.ndarray, s2: np.ndarray) -> list[np.ndarray]:
        belief.update(s, a, s2)
        return [one(kind) for kind in kinds]

    return estimate


def study(args: argparse.Namespace) -> None:
    ts = [int(t) for t in args.transitions.split(",")]
    methods = args.methods.split(",")
    seeds = parse_seeds(args.seeds)
    for mdp_seed in parse_seeds(args.mdp_seeds):
        env = RandomMDPEnv(args.states, args.actions, args.successors, mdp_seed=mdp_seed)
        truth = env.mdp
        mdp = TabularMDP(truth.transitions, truth.rewards, truth.discount,
                         coordinates=np.arange(args.states, dtype=float)[:, None])
        kinds = {"mean": ("mean",), "hellinger": ("hellinger",),
                 "both": ("mean", "hellinger")}[args.point_estimate]
        err = {(m, k): [] for m in methods for k in kinds}
        cpu = dict.fromkeys(methods, 0.0)
        for seed in seeds:
            data = random_exploration(env, ts[-1], rng=np.random.default_rng(seed))
            for m in methods:
                est = _estimates(m, mdp, args.successors, kinds,
                                 rng=np.random.default_rng([mdp_seed, seed, 1]))
                done, rows = 0, []
                t0 = time.process_time()
                for T in ts:
                    Ps = est(data.states[done:T], data.actions[done:T], data.next_states[done:T])
                    done = T
                    rows.append([float(np.mean(hellinger(truth.transitions, P))) for P in Ps])
                cpu[m] += time.process_time() - t0
                for i, k in enumerate(kinds):
                    err[(m, k)].append([r[i] for r in rows])
        means = {key: np.mean(v, axis=0) for key, v in err.items()}
        print(f"S={args.states} A={args.actions} {args.successors} successors, mdp_seed "
              f"{mdp_seed}, seeds {args.seeds}: Hellinger at T = {ts}")
        for label, k, k_ref in _tables(kinds):
            ref = np.minimum(*(means.get((m, k_ref), np.full(len(ts), np.inf))
                               for m in ("dirichlet_sparse", "dirichlet")))
            print(f" {label}")
            for m in methods:
                v = means[(m, k)]
                print(f"  {m:22s}" + " ".join(f"{x:.3f}" for x in v) + "   x "
                      + " ".join(f"{x:.2f}" for x in v / ref)
                      + f"   CPU {cpu[m] / len(seeds):.2f} s/seed", flush=True)


def _tables(kinds: tuple) -> list[tuple[str, str, str]]:
    """(title, estimate scored, the Dirichlet estimate it is divided by) of every ratio table."""
    if kinds == ("mean",):
        return [("x: / best Dirichlet mean", "mean", "mean")]
    out = [("(b) Hellinger estimates, x: / best Dirichlet Hellinger estimate (like for like)",
            "hellinger", "hellinger"),
           ("(c) Hellinger estimates, x: / best Dirichlet MEAN (information only)",
            "hellinger", "mean")]
    if "mean" in kinds:
        out.insert(0, ("(a) posterior means, x: / best Dirichlet mean (the paper's metric)",
                       "mean", "mean"))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mdp-seeds", default="41-43")
    parser.add_argument("--seeds", default="0-1", help="exploration seeds, e.g. 0-1")
    parser.add_argument("--states", type=int, default=50)
    parser.add_argument("--actions", type=int, default=4)
    parser.add_argument("--successors", type=int, default=3)
    parser.add_argument("--transitions", default="100,300,1000,3000")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--point-estimate", default="mean", choices=("mean", "hellinger", "both"),
                        help="score every method by its posterior mean (default), its "
                             "Hellinger-Bayes estimate, or both")
    args = parser.parse_args(argv)
    unknown = [m for m in args.methods.split(",") if m not in METHODS]
    if unknown:
        parser.error(f"--methods: unknown {unknown}; expected some of {list(METHODS)}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (ConvergenceWarning, JitterWarning))
        study(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
