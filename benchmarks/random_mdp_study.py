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
    :math:`\\hat P_j \\propto E[\\sqrt{P_j}]^2` (closed form for the Dirichlet and support beliefs).

Every row prints the errors at T = ``--transitions`` and their ratio to the better of the two
Dirichlet means (the floor's reference), with the CPU seconds per seed (``time.process_time``).

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
from scipy.special import gammaln

from corrpriors.applications.transitions import CorrelatedTransitionModel, DirichletTransitionModel
from corrpriors.applications.transitions._support import (
    SupportTransitionModel,
    support_hellinger_estimate,
    support_mean,
)
from corrpriors.envs import RandomMDPEnv, random_exploration
from corrpriors.exceptions import ConvergenceWarning, JitterWarning
from corrpriors.mdp import TabularMDP, hellinger

METHODS = ("dirichlet_sparse", "dirichlet", "pg", "pg_nosupport", "pg_support", "support",
           "oracle", "dirichlet_sparse_hell", "support_hell", "oracle_hell")


def _dirichlet_hell(counts: np.ndarray, alpha: float) -> np.ndarray:
    r = np.exp(gammaln(counts + alpha + 0.5) - gammaln(counts + alpha)) ** 2
    return r / r.sum(axis=-1, keepdims=True)


def _estimates(method: str, mdp: TabularMDP, k: int) -> Any:
    """A function of the data (s, a, s') -> the (S, A, S) estimate, keeping its belief."""
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

    def estimate(s: np.ndarray, a: np.ndarray, s2: np.ndarray) -> np.ndarray:
        belief.update(s, a, s2)
        if method == "dirichlet_sparse_hell":
            return _dirichlet_hell(belief.counts, 1e-3)
        if method == "oracle":
            return support_mean(belief.counts, pi, 1.0)
        if method == "oracle_hell":
            return support_hellinger_estimate(belief.counts, pi, 1.0)
        if method == "support_hell":
            belief.mean()
            return support_hellinger_estimate(belief.counts, belief.fit_.pi, belief.fit_.beta)
        return belief.mean()

    return estimate


def study(args: argparse.Namespace) -> None:
    ts = [int(t) for t in args.transitions.split(",")]
    methods = args.methods.split(",")
    for mdp_seed in _range(args.mdp_seeds):
        env = RandomMDPEnv(args.states, args.actions, args.successors, mdp_seed=mdp_seed)
        truth = env.mdp
        mdp = TabularMDP(truth.transitions, truth.rewards, truth.discount,
                         coordinates=np.arange(args.states, dtype=float)[:, None])
        err = {m: [] for m in methods}
        cpu = dict.fromkeys(methods, 0.0)
        for seed in _range(args.seeds):
            data = random_exploration(env, ts[-1], rng=np.random.default_rng(seed))
            for m in methods:
                est, done, row = _estimates(m, mdp, args.successors), 0, []
                t0 = time.process_time()
                for T in ts:
                    P = est(data.states[done:T], data.actions[done:T], data.next_states[done:T])
                    done = T
                    row.append(float(np.mean(hellinger(truth.transitions, P))))
                cpu[m] += time.process_time() - t0
                err[m].append(row)
        means = {m: np.mean(err[m], axis=0) for m in methods}
        ref = np.minimum(*(means.get(m, np.full(len(ts), np.inf))
                           for m in ("dirichlet_sparse", "dirichlet")))
        print(f"S={args.states} A={args.actions} {args.successors} successors, mdp_seed "
              f"{mdp_seed}, seeds {args.seeds}: Hellinger at T = {ts} (x: / best Dirichlet mean)")
        for m in methods:
            print(f"  {m:22s}" + " ".join(f"{v:.3f}" for v in means[m]) + "   x "
                  + " ".join(f"{v:.2f}" for v in means[m] / ref)
                  + f"   CPU {cpu[m] / len(_range(args.seeds)):.2f} s/seed", flush=True)


def _range(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
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
