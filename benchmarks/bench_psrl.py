"""Where the time of a PSRL run goes: refits (lazy + warm vs cold), posterior draws, planning, scoring.

Replays one recorded PSRL trajectory per domain (the data stream of a ``pg_sampling`` agent),
block by block (50 transitions on the tunnel world, one 20-transition episode on the queueing
network), and times every stage a replan performs:

* ``refit warm``  -- the lazy, warm-started refit of :class:`CorrelatedTransitionModel`
  (only actions whose counts changed are refitted, each from its previous solution);
* ``refit cold``  -- a fresh model fitted to the same counts (same ``max_iter`` / ``tol``);
* ``draw``        -- ``sample_many(n_samples)`` (joint draws of q(psi) mapped to models);
* ``plan mean`` / ``plan sampling`` -- policy iteration on the mean model / on the M draws;
* ``evaluate``    -- exact policy evaluation under the true model (the metric);
* the Dirichlet baselines' draw + plan for comparison.

It also reports the CAVI iterations and the ELBO reached by warm and cold refits.

Usage::

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_psrl.py [--domain grid|queue|both]
        [--encoding relative|absolute] [--blocks N]

Times are CPU seconds of this process (``time.process_time``), which are robust to other
load on the machine; run with one BLAS thread, as the experiment runner's workers do.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
import warnings

import numpy as np

from corrpriors.applications.psrl import PSRLAgent, run_psrl
from corrpriors.applications.transitions import (
    CorrelatedTransitionModel,
    DirichletTransitionModel,
    displacement_category_map,
    identity_category_map,
)
from corrpriors.exceptions import ConvergenceWarning, JitterWarning
from corrpriors.experiments import psrl_grid, psrl_queueing
from corrpriors.mdp import policy_evaluation, policy_iteration


def setup(domain: str, encoding: str):
    if domain == "grid":
        cfg = psrl_grid.Config()
        mdp = psrl_grid._environment()
        coords = np.asarray(mdp.coordinates, float)
        dist = np.sqrt(((coords[:, None] - coords[None]) ** 2).sum(-1))
        cov = psrl_grid.se_covariance(coords, cfg.lengthscale or float(dist.max()))
        start = psrl_grid._start_state(mdp, cfg.start)
        block, n_steps = cfg.replan_every, cfg.n_transitions
    else:
        cfg = psrl_queueing.Config()
        mdp = psrl_queueing._environment()
        coords = np.asarray(mdp.coordinates, float)
        span = coords.max(0) - coords.min(0)
        cov = psrl_grid.se_covariance((coords - coords.min(0)) / span, cfg.lengthscale)
        start = 0
        block, n_steps = cfg.episode_length, cfg.n_episodes * cfg.episode_length
    cmap = (displacement_category_map(np.round(coords).astype(int), cfg.radius)
            if encoding == "relative" else identity_category_map(mdp.n_states))
    return cfg, mdp, cov, cmap, start, block, n_steps


def timed(fn, *args, **kwargs):
    tic = time.process_time()
    out = fn(*args, **kwargs)
    return out, time.process_time() - tic


def bench(domain: str, encoding: str, max_blocks: int | None) -> None:
    cfg, mdp, cov, cmap, start, block, n_steps = setup(domain, encoding)
    S, A = mdp.n_states, mdp.n_actions

    def new_model():
        return CorrelatedTransitionModel(S, A, cov, category_map=cmap, learn_scale=cfg.learn_scale,
                                         max_iter=cfg.max_iter, tol=cfg.tol)

    # 1. record the data stream of one pg_sampling run (and time it end to end)
    rng = np.random.default_rng(0)
    belief = new_model()
    agent = PSRLAgent(belief, mdp.reward_matrix, mdp.discount, variant="sampling",
                      n_samples=cfg.n_samples, replan_every=block)
    out, total = timed(run_psrl, mdp.transitions, agent, n_steps, start, rng=rng)
    print(f"\n== {domain} / {encoding} (S={S}, A={A}, K={cmap.n_categories}, blocks of {block}) ==")
    print(f"end-to-end pg_sampling run: {total:.2f} s CPU, {belief.n_fits_} fits "
          f"({belief.fit_seconds_:.2f} s in fits, {belief.n_unconverged_} at max_iter={cfg.max_iter})")

    # 2. replay it block by block, timing every stage
    states, actions = out["states"], out["actions"]
    warm = new_model()
    dirichlet = DirichletTransitionModel(S, A, alpha=1.0)
    plan_mdp = agent.planning_mdp
    t = {k: 0.0 for k in ("refit warm", "refit cold", "draw", "plan mean", "plan sampling",
                          "evaluate", "dirichlet draw", "dirichlet plan sampling")}
    iters = {"warm": [], "cold": []}
    elbo_gap = []
    n_blocks = n_steps // block if max_blocks is None else min(max_blocks, n_steps // block)
    for i in range(n_blocks):
        sl = slice(i * block, (i + 1) * block)
        s, a, s2 = states[sl], actions[sl], states[i * block + 1:(i + 1) * block + 1]
        warm.update(s, a, s2)
        dirichlet.update(s, a, s2)
        _, dt = timed(warm.refit)
        t["refit warm"] += dt
        changed = np.unique(a)                 # the actions whose counts changed
        cold = new_model().set_counts(warm.counts)
        _, dt = timed(cold.refit)
        t["refit cold"] += dt
        for m in changed:
            iters["warm"].append(warm.models_[m].n_iter_)
            iters["cold"].append(cold.models_[m].n_iter_)
            elbo_gap.append(warm.models_[m].objective_ - cold.models_[m].objective_)
        models, dt = timed(warm.sample_many, cfg.n_samples, rng=rng)
        t["draw"] += dt
        res, dt = timed(policy_iteration, plan_mdp, warm.mean())
        t["plan mean"] += dt
        _, dt = timed(policy_iteration, plan_mdp, models)
        t["plan sampling"] += dt
        true_mdp = dataclasses.replace(plan_mdp, transitions=mdp.transitions)
        _, dt = timed(policy_evaluation, true_mdp, res.q_values.argmax(-1))
        t["evaluate"] += dt
        dmodels, dt = timed(dirichlet.sample_many, cfg.n_samples, rng=rng)
        t["dirichlet draw"] += dt
        _, dt = timed(policy_iteration, plan_mdp, dmodels)
        t["dirichlet plan sampling"] += dt
    print(f"replayed {n_blocks} blocks; CPU seconds per stage (total, per block):")
    for k, v in t.items():
        print(f"  {k:26s} {v:8.2f}  {v / max(n_blocks, 1) * 1e3:8.1f} ms")
    if iters["warm"]:
        w, c = np.asarray(iters["warm"]), np.asarray(iters["cold"])
        g = np.asarray(elbo_gap)
        print(f"  CAVI iterations per action fit: warm median {np.median(w):.0f} (max {w.max()}), "
              f"cold median {np.median(c):.0f} (max {c.max()})")
        print(f"  objective(warm) - objective(cold): median {np.median(g):+.3g}, "
              f"min {g.min():+.3g}, max {g.max():+.3g}")
    print(f"  speed-up of the warm refit over the cold one: "
          f"{t['refit cold'] / max(t['refit warm'], 1e-12):.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--domain", choices=("grid", "queue", "both"), default="both")
    parser.add_argument("--encoding", choices=("relative", "absolute"), default="relative")
    parser.add_argument("--blocks", type=int, default=None, help="replay only the first N blocks")
    args = parser.parse_args()
    warnings.simplefilter("ignore", ConvergenceWarning)
    warnings.simplefilter("ignore", JitterWarning)
    for domain in (("grid", "queue") if args.domain == "both" else (args.domain,)):
        bench(domain, args.encoding, args.blocks)


if __name__ == "__main__":
    main()
