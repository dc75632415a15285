"""Imitation learning on a goal grid world (paper section 4.1, Fig. 1), swept over the data size.

Per seed: a ``GoalGridworld`` (10 x 10, three reward cells drawn from the seed's generator,
discount 0.9) with the paper's motion model: "each action triggers a noisy transition in one of
the four cardinal directions such that the pattern of the resulting next-state distribution
resembles a discretized Gaussian distribution centered around the targeted adjacent state"
(``motion="gaussian"``; ``Config.motion="cardinal"`` gives the 0.7/0.1 moves instead, under which
the PG advantage largely disappears -- see the project report). The expert plays
``softmax(beta * Q)`` with ``beta = 20`` on the optimal Q-values (not normalised). One sequence
of ``max(n_demonstrations)`` demonstrations is drawn (each state uniform, the action from the
expert) and every point ``D`` of the sweep uses its first ``D`` pairs (nested data sets: the
curves over ``D`` are less noisy than with fresh draws, which matters for the data-efficiency
ratio). Methods:

- ``pg``: :class:`~corrpriors.applications.imitation.PolicyEstimator` with a
  squared-exponential kernel on the Euclidean grid distances, length scale = the largest
  distance (the paper), scale learned by EM (the core's default), plug-in posterior mean;
- ``dirichlet``: independent Dirichlet posteriors with ``alpha = 1e-3`` (uniform where no data);
- ``pg_elbo`` (when ``Config.elbo_lengthscales`` is not empty): ``pg`` with the length scale
  picked by the ELBO among a few candidates per data set -- the model calibrating itself instead
  of the paper's fixed choice (an addition, not in the paper).

Metrics: mean Hellinger distance to the expert policy over states and the value loss
``||V_expert - V_estimate||_2 / ||V_expert||_2`` under the true MDP (lower is better).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._format import mean_std, num
from ..runner._ranges import (
    CONCENTRATION,
    DISCOUNT,
    ITERATIONS,
    LENGTHSCALE_OR_AUTO,
    TOLERANCE,
    Boolean,
    Each,
    Interval,
    Options,
)
from ..runner.protocol import FigureSpec, SeedResult
from ._shared import (
    boltzmann_expert,
    curve_stack,
    evaluate_policy,
    extra_stack,
    finite_claim,
    grid_extras,
    largest_distance,
)

NAME = "imitation"
DESCRIPTION = "Imitation learning on a 10x10 goal grid world: PG vs Dirichlet policy estimates (Fig. 1)"
X_NAME = "demonstrations"
METRICS = {"hellinger": "lower", "value_loss": "lower"}
METHODS = ("pg", "dirichlet")
ENVIRONMENT = "Imitation learning, 10x10 goal grid world"
X_LABEL = "demonstrations (state-action pairs, D)"
METRIC_LABELS = {
    "hellinger": "Hellinger distance to the expert policy\n(mean over states)",
    "value_loss": "value loss\n" r"$\|V_{\rm expert} - V\|_2 \,/\, \|V_{\rm expert}\|_2$",
}
#: Methods run only on request (``Config.elbo_lengthscales``).
OPTIONAL_METHODS = ("pg_elbo",)
#: 20 seeds: the paper does not state its number of repetitions; 20 is the protocol's default.
PAPER_SEEDS = 20
QUICK_SEEDS = 2


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of the imitation experiment (defaults: the paper's).

    Attributes
    ----------
    shape : tuple of int
        Grid size (rows, columns).
    motion : str
        "gaussian" (the paper's section 4.1: discretised-Gaussian moves) or "cardinal"
        (intended neighbour 0.7, the others 0.1).
    n_rewards : int
        Number of reward cells (reward 1 each), drawn per seed.
    discount : float
    beta : float
        Expert inverse temperature (softmax over the optimal Q-values).
    n_demonstrations : tuple of int
        The sweep over D.
    dirichlet_alpha : float
        Concentration of the Dirichlet baseline (near zero: uniform where there is no data).
    lengthscale : float
        Kernel length scale; 0 means the largest distance between two states (the paper).
    learn_scale : bool
        Learn the kernel scale by (MAP-)EM.
    max_iter, tol : int, float
        Variational fit settings.
    elbo_lengthscales : tuple of float
        Candidate length scales of ``pg_elbo`` (0 = the largest distance); empty: no ``pg_elbo``.
    mc_samples : int
        Draws for the Monte-Carlo posterior-mean policy (an extra diagnostic; 0 skips it).
    figure_demonstrations : int
        D of the arrow-map panels (the paper's Fig. 1 uses 50); must be in the sweep.
    """

    shape: tuple = (10, 10)
    motion: str = "gaussian"
    n_rewards: int = 3
    discount: float = 0.9
    beta: float = 20.0
    n_demonstrations: tuple = (10, 20, 50, 100, 200, 500, 1000)
    dirichlet_alpha: float = 1e-3
    lengthscale: float = 0.0
    learn_scale: bool = True
    max_iter: int = 1000
    tol: float = 1e-8
    elbo_lengthscales: tuple = (1.5, 3.0, 6.0, 0.0)
    mc_samples: int = 500
    figure_demonstrations: int = 50


#: The valid range of every setting (checked before any work; ``--list-settings`` shows it).
RANGES = {
    "shape": Each(Interval(int, 2, 50, note="a grid of at most 50 x 50: kernel and model grow with S^2"),
                  min_len=2, max_len=2),
    "motion": Options("gaussian", "cardinal"),
    "n_rewards": Interval(int, 1, 100, note="and fewer than the grid's cells"),
    "discount": DISCOUNT,
    "beta": Interval(float, 0.0, 1e6, closed="right"),
    "n_demonstrations": Each(Interval(int, 1, 100_000), min_len=1, increasing=True),
    "dirichlet_alpha": CONCENTRATION,
    "lengthscale": LENGTHSCALE_OR_AUTO,
    "learn_scale": Boolean(),
    "max_iter": ITERATIONS,
    "tol": TOLERANCE,
    "elbo_lengthscales": Each(LENGTHSCALE_OR_AUTO, max_len=20),
    "mc_samples": Interval(int, 0, 100_000, note="0 skips the Monte-Carlo policy"),
    "figure_demonstrations": Interval(int, 1, 100_000),
}


def check_config(config: Config) -> None:
    """Raise ``ValueError`` naming the field of an invalid ``config`` (beyond the ranges of ``RANGES``)."""
    cells = int(config.shape[0]) * int(config.shape[1])
    if config.n_rewards >= cells:
        raise ValueError(f"n_rewards: expected fewer than the {cells} cells of the {config.shape[0]} x "
                         f"{config.shape[1]} grid, got {config.n_rewards}")
    if config.figure_demonstrations not in config.n_demonstrations:
        sweep = ", ".join(str(d) for d in config.n_demonstrations)
        raise ValueError(f"figure_demonstrations: expected one of the sweep's n_demonstrations ({sweep}), "
                         f"got {config.figure_demonstrations}: Fig. 1 shows the policies fitted at that D; "
                         f"set figure_demonstrations to one of them or add it to n_demonstrations")


def quick_config() -> Config:
    """Return a smaller sweep (same world) that runs in seconds."""
    return Config(n_demonstrations=(10, 50, 200), max_iter=300, tol=1e-6, mc_samples=200,
                  elbo_lengthscales=())


def x_values(config: Config) -> list[float]:
    """Return the numbers of demonstrations."""
    return [float(d) for d in config.n_demonstrations]


# ----------------------------------------------------------------------------- the task


def make_world(config: Config, rng: np.random.Generator):
    """Build the seed's goal grid world (reward cells drawn from ``rng``)."""
    from ..envs import goal_gridworld

    return goal_gridworld(shape=tuple(config.shape), n_rewards=config.n_rewards,
                          discount=config.discount, motion=config.motion, rng=rng)


def expert_policy(mdp, beta: float) -> np.ndarray:
    """``softmax(beta * Q*)`` on the optimal Q-values of ``mdp``; ndarray of shape (S, A)."""
    return boltzmann_expert(mdp, beta, normalize=False)


def draw_demonstrations(policy: np.ndarray, n: int, rng: np.random.Generator):
    """``n`` pairs: states uniform over S, actions from ``policy``; two int arrays (n,)."""
    from ..applications.subgoals import sample_categorical

    n_states = policy.shape[0]
    states = rng.integers(0, n_states, size=n)
    actions = sample_categorical(policy[states], rng=rng)
    return states, actions


#: Mean Hellinger distance and value loss of an estimate (shared with the subgoal experiment).
evaluate = evaluate_policy


def resolve_config(config: Config) -> Config:
    """``config`` with length scales of 0 replaced by the largest distance between two states."""
    if config.lengthscale > 0 and all(float(v) > 0 for v in config.elbo_lengthscales):
        return config
    rows, cols = (int(n) for n in config.shape)
    d_max = largest_distance(np.argwhere(np.ones((rows, cols), dtype=bool)))
    return dataclasses.replace(
        config, lengthscale=config.lengthscale if config.lengthscale > 0 else d_max,
        elbo_lengthscales=tuple(float(v) if float(v) > 0 else d_max for v in config.elbo_lengthscales))


def run_seed(config: Config, *, rng: np.random.Generator) -> SeedResult:
    """One seed of the sweep; see the module docstring.

    The smooth kernel (the largest distance as length scale) is numerically rank deficient on
    a grid; the core adds a tiny jitter at every fit and warns (the runner counts it).
    """
    from ..applications.imitation import PolicyEstimator, demonstration_counts

    world_rng, data_rng, mc_rng = rng.spawn(3)
    mdp = make_world(config, world_rng)
    expert = expert_policy(mdp, config.beta)
    n_states, n_actions = expert.shape
    ds = [int(d) for d in config.n_demonstrations]
    states, actions = draw_demonstrations(expert, max(ds), data_rng)
    coords = np.asarray(mdp.coordinates, dtype=float)

    methods = list(METHODS) + (["pg_elbo"] if config.elbo_lengthscales else [])
    curves: dict[str, dict[str, np.ndarray]] = {m: {meth: np.full(len(ds), np.nan) for meth in methods}
                                                for m in METRICS}
    scales = np.full(len(ds), np.nan)
    mc_hell = np.full(len(ds), np.nan)
    pg = PolicyEstimator("pg", coordinates=coords,
                         lengthscale=config.lengthscale if config.lengthscale > 0 else None,
                         learn_scale=config.learn_scale, max_iter=config.max_iter, tol=config.tol)
    dirichlet = PolicyEstimator("dirichlet", alpha=config.dirichlet_alpha)
    estimators = [("pg", pg), ("dirichlet", dirichlet)]
    chosen = np.full(len(ds), np.nan)
    if config.elbo_lengthscales:
        estimators.append(("pg_elbo", PolicyEstimator(
            "pg", coordinates=coords, lengthscale=tuple(float(v) for v in config.elbo_lengthscales),
            learn_scale=config.learn_scale, max_iter=config.max_iter, tol=config.tol)))
    fig = {}
    for i, d in enumerate(ds):
        counts = demonstration_counts(states[:d], actions[:d], n_states, n_actions)
        for meth, est in estimators:
            est.fit(counts)
            for metric, value in evaluate_policy(mdp, expert, est.policy_).items():
                curves[metric][meth][i] = value
            if meth == "pg_elbo":
                chosen[i] = est.lengthscale_
        scales[i] = pg.scale_
        if config.mc_samples > 0:
            mc = pg.policy(method="mc", n_samples=config.mc_samples, rng=mc_rng)
            mc_hell[i] = evaluate_policy(mdp, expert, mc)["hellinger"]
        if d == config.figure_demonstrations:
            fig = {"counts": counts, "pg": pg.policy_, "dirichlet": dirichlet.policy_}
    lengthscales = {"pg": np.array([pg.lengthscale_])}
    if config.elbo_lengthscales:
        lengthscales["pg_elbo"] = chosen
    extras = {"expert": expert, "rewards": np.asarray(mdp.rewards, dtype=float), "coordinates": coords,
              **grid_extras(mdp)}
    method_extras = {"scale": {"pg": scales}, "lengthscale": lengthscales, "hellinger_mc": {"pg": mc_hell}}
    if fig:
        extras["figure_counts"] = fig["counts"]
        method_extras["figure_policy"] = {"pg": fig["pg"], "dirichlet": fig["dirichlet"]}
    return SeedResult(curves=curves, extras=extras, method_extras=method_extras)


# ----------------------------------------------------------------------------- summary


def matching_data_size(xs, target: float, curve) -> float:
    """Smallest D' at which the decreasing-ish ``curve`` over ``xs`` first reaches ``target``.

    Linear interpolation in log D between the two grid points that bracket the first
    crossing; ``nan`` if the curve never gets down to ``target`` on the grid, ``xs[0]`` if it
    starts below it.
    """
    xs = np.asarray(xs, dtype=float)
    curve = np.asarray(curve, dtype=float)
    below = np.nonzero(curve <= target)[0]
    if below.size == 0:
        return float("nan")
    j = int(below[0])
    if j == 0:
        return float(xs[0])
    x0, x1, y0, y1 = math.log(xs[j - 1]), math.log(xs[j]), curve[j - 1], curve[j]
    t = 0.0 if y0 == y1 else (y0 - target) / (y0 - y1)
    return float(math.exp(x0 + t * (x1 - x0)))


#: The data-efficiency row's note when Dirichlet does not reach PG's error within the sweep (a
#: lower bound of the ratio, which the order-of-magnitude claim uses).
NOT_REACHED = "not reached on the grid"


def _matching_note(target: float, dir_mean: np.ndarray, matching: float) -> str:
    """Why a row of the data-efficiency table has no ratio ("" when it has one)."""
    if not math.isfinite(target):
        return "pg's error is not finite"
    if not np.all(np.isfinite(dir_mean)):
        return "dirichlet's errors are not all finite"
    return NOT_REACHED if math.isnan(matching) else ""


def summarise_extra(config: Config, results: Mapping[int, SeedResult], metrics: dict) -> dict:
    """Data-efficiency ratios (D' at which Dirichlet matches PG at D) and the claims check."""
    xs = x_values(config)
    seeds = sorted(results)
    first = results[seeds[0]]
    extra: dict = {"seeds_used": len(seeds)}
    efficiency: dict[str, list[dict[str, Any]]] = {}
    for metric in METRICS:
        pg_mean = np.asarray(metrics[metric]["methods"]["pg"]["mean"], dtype=float)
        dir_mean = np.asarray(metrics[metric]["methods"]["dirichlet"]["mean"], dtype=float)
        rows: list[dict[str, Any]] = []
        for d, target in zip(xs, pg_mean):
            dp = matching_data_size(xs, target, dir_mean)
            rows.append({"D": d, "pg_error": float(target),
                         "dirichlet_matching_D": None if math.isnan(dp) else dp,
                         "ratio": None if math.isnan(dp) else dp / d,
                         "note": _matching_note(target, dir_mean, dp)})
        efficiency[metric] = rows
    extra["data_efficiency"] = efficiency
    scales = extra_stack(results, "scale", "pg")
    extra["pg_scale_mean"] = scales.mean(axis=0).tolist()
    extra["pg_lengthscale"] = float(np.asarray(first.method_extras["lengthscale"]["pg"])[0])
    if "pg_elbo" in first.method_extras.get("lengthscale", {}):
        ch = extra_stack(results, "lengthscale", "pg_elbo")
        extra["pg_elbo_lengthscale_choices"] = {
            f"{d:g}": {f"{v:g}": int(np.sum(ch[:, i] == v)) for v in np.unique(ch[:, i])}
            for i, d in enumerate(xs)}
    if "pg" in first.method_extras.get("hellinger_mc", {}):
        extra["pg_hellinger_mc_mean"] = extra_stack(results, "hellinger_mc", "pg").mean(axis=0).tolist()

    claims = []
    for metric in METRICS:
        diff = curve_stack(results, metric, "dirichlet") - curve_stack(results, metric, "pg")
        mean_diff = diff.mean(axis=0)
        se = diff.std(axis=0, ddof=1) / math.sqrt(len(seeds)) if len(seeds) > 1 else np.zeros_like(mean_diff)
        clearly = bool(np.all(mean_diff > 0) and np.all(mean_diff > 2 * se))
        claims.append(finite_claim(
            f"pg is clearly better than dirichlet ({metric}, every D)", clearly,
            "dirichlet minus pg per D: " + ", ".join(
                f"D={d:g}: {'+' if m >= 0 else ''}{mean_std(m, s)}" for d, m, s in zip(xs, mean_diff, se))
            + " (mean ± s.e. over seeds; 'clearly' = above 2 s.e. at every D)",
            {"dirichlet minus pg": diff}))
    pg_h = np.asarray(metrics["hellinger"]["methods"]["pg"]["mean"], dtype=float)
    dir_h = np.asarray(metrics["hellinger"]["methods"]["dirichlet"]["mean"], dtype=float)
    gap = dir_h - pg_h
    rel = gap / dir_h
    half = max(1, len(xs) // 2)
    errors = {"pg's mean hellinger": pg_h, "dirichlet's mean hellinger": dir_h}
    claims.append(finite_claim(
        "pg's advantage is largest with few demonstrations (hellinger)",
        bool(np.mean(gap[:half]) > np.mean(gap[-half:])),
        f"absolute gap largest at D={xs[int(np.argmax(gap))]:g}, relative gap largest at "
        f"D={xs[int(np.argmax(rel))]:g}; mean gap over the {half} smallest D "
        f"{num(np.mean(gap[:half]))} vs the {half} largest {num(np.mean(gap[-half:]))}", errors))
    extra["table_x"] = list(xs)  # the first two claims speak of every D
    ratios = [float(r["ratio"]) for r in efficiency["hellinger"] if r["ratio"] is not None]
    unreached = [float(r["D"]) for r in efficiency["hellinger"] if r["note"] == NOT_REACHED]
    # an unreached D gives only a lower bound D' > max(D): ratio > max(D) / D
    bounds = ratios + [xs[-1] / d for d in unreached]
    best = max(bounds) if bounds else float("nan")
    claims.append(finite_claim(
        "the correlated model does as well with an order of magnitude less data (hellinger)",
        bool(bounds and best >= 10),
        (f"largest D'/D where Dirichlet catches up on the grid: {num(max(ratios))}"
         if ratios else "Dirichlet never catches up on the grid")
        + (f"; Dirichlet never reaches PG's error at D={unreached} on the grid (ratio > "
           f"{xs[-1]:g}/D)" if unreached else ""), errors))
    extra["claims"] = claims
    return extra


def figures(config: Config, results: Mapping[int, SeedResult], summary: dict) -> list[FigureSpec]:
    """Draw Fig. 1 and the metric curves over D.

    Fig. 1: expert, Dirichlet and PG arrow maps of the first seed, metric bars over seeds.
    """
    from ..mdp import hellinger
    from ..plotting._imitation import imitation_curves_figure, imitation_policies_figure
    from ._shared import grid_layout

    specs = []
    seed = min(results)
    res = results[seed]
    xs = [float(x) for x in summary["x"]["values"]]
    d_fig = float(config.figure_demonstrations)
    if "figure_policy" in res.method_extras and d_fig in xs:
        expert = res.extras["expert"]
        estimates = {m: res.method_extras["figure_policy"][m] for m in ("dirichlet", "pg")}
        fig = imitation_policies_figure(
            grid_layout(res), expert, estimates,
            {m: float(np.mean(hellinger(expert, p))) for m, p in estimates.items()},
            data_states=np.asarray(res.extras["figure_counts"]).sum(axis=1),
            reward_states=np.asarray(res.extras["rewards"]) > 0, summary=summary, x_index=xs.index(d_fig),
            seed=seed, environment=ENVIRONMENT, metric_labels={"hellinger": "Hellinger", "value_loss": "value loss"})
        specs.append(FigureSpec(f"{NAME}-policies", fig,
                                f"paper Fig. 1: expert, Dirichlet and PG policies of seed {seed} at D = {d_fig:g} "
                                "(arrow maps) and both errors of both methods at that D (absolute, on a zoomed axis), "
                                "mean ± standard error over seeds"))
    fig = imitation_curves_figure(summary, environment=ENVIRONMENT, x_label=X_LABEL, metric_labels=METRIC_LABELS)
    specs.append(FigureSpec(f"{NAME}-curves", fig,
                            "Hellinger distance and value loss against the number of demonstrations, "
                            "mean ± standard error over seeds"))
    return specs
