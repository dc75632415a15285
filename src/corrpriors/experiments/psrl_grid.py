"""PSRL on the tunnel world (paper section 4.3.2, Fig. 3b).

Per seed and per policy: the agent starts in cell (0, 0) of ``corrpriors.envs.tunnel_world()``
(10 x 10, +1 in the far corner, from which every action jumps back to the start corner),
knows the rewards, learns the transitions and acts for 2,000 transitions, folding the data
into its belief and replanning every 50 transitions. Eight policies (model x variant):

- models: ``pg`` (correlated model, relative categories = grid displacements within
  ``|d|_inf <= radius`` plus an "other" category for the tunnel's jump, constant prior mean
  per stick learned), ``pg_absolute`` (correlated model, absolute next-state categories --
  the paper's encoding), ``dirichlet_uniform`` (alpha = 1), ``dirichlet_sparse``
  (alpha = 1e-3);
- variants: ``sampling`` (greedy on the average optimal Q of ``n_samples`` posterior draws)
  and ``mean`` (greedy on the optimal Q of the posterior-mean model).

The correlated models use a squared-exponential kernel on the Euclidean distances between
grid cells (length scale: ``lengthscale`` cells; 0 = the largest distance, the paper's
system-identification choice), one ``CorrelatedMultinomial`` per action, scale learned by
(MAP-)EM with a Gamma(2, 1) hyper-prior, constant prior means per stick with a weak
N(uniform logits, 3^2) hyper-prior (both encodings), refitted lazily (only after new data) and
warm-started, at most ``max_iter`` CAVI iterations per refit. The relative window
(``radius`` = 3) holds all but 1.3% of the true next-state mass on average (1% of it is the
tunnel's jump from the goal). Q-value ties (e.g. the prior's policy) are broken at random.
The environment's discount (0.9) is used.

Timing: about 9 CPU seconds per seed for all eight policies; the paper's 50 seeds took
4.0 minutes on two idle cores (``benchmarks/bench_psrl.py`` shows where the time goes).

Metric ``normalized_return`` (higher is better): the exact expected discounted return of the
agent's current greedy policy under the true model, averaged uniformly over all start states,
divided by the optimal policy's; ``x`` = transitions so far (0, 50, ..., 2,000).
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
import time
import warnings
from typing import Any

import numpy as np

from ..exceptions import JitterWarning

NAME = "psrl-grid"
DESCRIPTION = "PSRL on the 10x10 tunnel world: PG vs Dirichlet transition beliefs (Fig. 3b)"
X_NAME = "transitions"
METRICS = {"normalized_return": "higher"}
MODELS = ("pg", "pg_absolute", "dirichlet_uniform", "dirichlet_sparse")
VARIANTS = ("sampling", "mean")
METHODS = tuple(f"{m}_{v}" for m in MODELS for v in VARIANTS)
PAPER_SEEDS = 50
QUICK_SEEDS = 2


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of the tunnel-world PSRL experiment (defaults: the paper's).

    Attributes
    ----------
    n_transitions : int
        Transitions per run (T).
    replan_every : int
        Transitions between two posterior updates / replans (and evaluations).
    n_samples : int
        Posterior draws per replan of the ``sampling`` variant.
    start : tuple of int
        Start cell (row, col).
    methods : tuple of str
        Policies to run (subset of :data:`METHODS`).
    alpha_uniform, alpha_sparse : float
        Concentrations of the two Dirichlet baselines.
    lengthscale : float
        Kernel length scale in cells; 0 = the largest distance between two cells.
    radius : int
        Displacement window of the relative encoding (``pg``).
    boundary : {"exclude", "stay", "clip"}
        What a displacement that leaves the grid means to the relative encoding
        (:func:`corrpriors.applications.transitions.displacement_category_map`); the grid
        keeps the agent in place ("stay"), the default keeps the earlier structural zeros.
    learn_scale : bool
        Learn the kernel scale theta by (MAP-)EM at every refit.
    max_iter, tol : int, float
        Variational fit settings per refit. Refits are warm-started, so the cap makes the
        variational EM an anytime optimisation that continues across refits (cold fits
        would need hundreds of iterations; see ``benchmarks/bench_psrl.py``).
    discount : float
        Discount of the return the agent plans for and is scored on; 0 = the environment's.
    """

    n_transitions: int = 2000
    replan_every: int = 50
    n_samples: int = 10
    start: tuple = (0, 0)
    methods: tuple = METHODS
    alpha_uniform: float = 1.0
    alpha_sparse: float = 1e-3
    lengthscale: float = 0.0
    radius: int = 3
    boundary: str = "exclude"
    learn_scale: bool = True
    max_iter: int = 20
    tol: float = 1e-4
    discount: float = 0.0


def quick_config() -> Config:
    """A few hundred transitions, fewer posterior draws (about a minute for two seeds)."""
    return Config(n_transitions=400, n_samples=4)


def x_values(config: Config) -> list[float]:
    """Transitions so far at each evaluation: 0, replan_every, ..., n_transitions."""
    return [float(t) for t in range(0, config.n_transitions + 1, config.replan_every)]


# ----------------------------------------------------------------------------- shared
def split_method(method: str) -> tuple[str, str]:
    """``"pg_absolute_sampling"`` -> ``("pg_absolute", "sampling")``."""
    for variant in VARIANTS:
        if method.endswith("_" + variant):
            model = method[: -len(variant) - 1]
            if model in MODELS:
                return model, variant
    raise ValueError(f"method: expected one of {', '.join(METHODS)}, got {method!r}")


def se_covariance(coords: np.ndarray, lengthscale: float) -> np.ndarray:
    """Squared-exponential Gram matrix on Euclidean distances, via ``corrpriors.kernels``."""
    from ..kernels import SquaredExponential

    return SquaredExponential(lengthscale).bind(coords=np.asarray(coords, float)).gram()


def make_belief(model: str, mdp: Any, covariance: np.ndarray | None, category_map: Any,
                config: Any) -> Any:
    """The transition belief of ``model`` for the environment ``mdp``."""
    from ..applications.transitions import (
        CorrelatedTransitionModel,
        DirichletTransitionModel,
        identity_category_map,
    )

    S, A = mdp.n_states, mdp.n_actions
    if model == "dirichlet_uniform":
        return DirichletTransitionModel(S, A, alpha=config.alpha_uniform)
    if model == "dirichlet_sparse":
        return DirichletTransitionModel(S, A, alpha=config.alpha_sparse)
    cmap = category_map if model == "pg" else identity_category_map(S)
    return CorrelatedTransitionModel(S, A, covariance, category_map=cmap,
                                     learn_scale=config.learn_scale, learn_mean="constant",
                                     max_iter=config.max_iter, tol=config.tol)


def run_methods(mdp: Any, config: Any, rng: np.random.Generator, start_state: int,
                covariance: np.ndarray | None, category_map: Any, metric: str,
                n_steps: int, normalise: bool) -> dict[str, np.ndarray]:
    """Run every configured policy on ``mdp`` (one independent stream per policy)."""
    from ..applications.psrl import PSRLAgent, run_psrl

    discount = config.discount if config.discount > 0 else mdp.discount
    cpu0 = time.process_time()
    out: dict[str, np.ndarray] = {}
    streams = rng.spawn(len(config.methods))
    for method, stream in zip(config.methods, streams):
        model, variant = split_method(method)
        belief = make_belief(model, mdp, covariance, category_map, config)
        agent = PSRLAgent(belief, mdp.reward_matrix, discount, variant=variant,
                          n_samples=config.n_samples, replan_every=config.replan_every)
        tic, cpu = time.perf_counter(), time.process_time()
        with warnings.catch_warnings():
            # a smooth kernel's Gram matrix is numerically singular; the model adds (and
            # records) a tiny jitter -- expected here, so not repeated for every action's model
            warnings.simplefilter("ignore", JitterWarning)
            res = run_psrl(mdp.transitions, agent, n_steps, start_state, rng=stream,
                           eval_every=config.replan_every)
        seconds = time.perf_counter() - tic
        out[f"extra__cpu_seconds__{method}"] = np.array([time.process_time() - cpu])
        optimal = float(res["optimal_return"])
        values = res["expected_return"]
        out[f"{metric}__{method}"] = values / optimal if normalise else values
        out[f"extra__expected_return__{method}"] = values
        out[f"extra__seconds__{method}"] = np.array([seconds])
        out[f"extra__fit_seconds__{method}"] = np.array([getattr(belief, "fit_seconds_", 0.0)])
        out[f"extra__n_fits__{method}"] = np.array([getattr(belief, "n_fits_", 0)], dtype=float)
        out["extra__optimal_return"] = np.array([optimal])
        if hasattr(belief, "models_"):
            out[f"extra__scale__{method}"] = np.array([m.scale_ for m in belief.models_])
            out[f"extra__jitter__{method}"] = np.array([max(m.jitter_ for m in belief.models_)])
            out[f"extra__n_unconverged__{method}"] = np.array([float(belief.n_unconverged_)])
    out["extra__cpu_seconds"] = np.array([time.process_time() - cpu0])
    return out


def _mean_or_none(values: list) -> float | None:
    """Mean of the finite values (None if there is none; older seed files lack some keys)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return float(v.mean()) if v.size else None


def _mean_over_x(x: list[float], curve: np.ndarray) -> float:
    """Trapezoidal average of ``curve`` over the x range."""
    xs = np.asarray(x, dtype=float)
    c = np.asarray(curve, dtype=float)
    if len(xs) < 2:
        return float(c[0])
    return float(np.sum(0.5 * (c[1:] + c[:-1]) * np.diff(xs)) / (xs[-1] - xs[0]))


def first_reach(x: list[float], curve: np.ndarray, level: float) -> float | None:
    """First x at which ``curve`` reaches ``level`` and stays there (None if never)."""
    curve = np.asarray(curve, dtype=float)
    below = np.flatnonzero(curve < level)
    if below.size == 0:
        return float(x[0])
    if below[-1] == len(curve) - 1:
        return None
    return float(x[below[-1] + 1])


def efficiency_summary(x: list[float], seed_results: dict, metric: str, methods: tuple,
                       level_fraction: float, low: float, high: float, x_name: str) -> dict:
    """Per method: x to reach ``low + level_fraction * (high - low)`` (mean curve and per seed)."""
    level = low + level_fraction * (high - low)
    seeds = sorted(seed_results)
    table = {}
    for method in methods:
        curves = np.stack([np.asarray(seed_results[s][f"{metric}__{method}"], float) for s in seeds])
        per_seed = [first_reach(x, c, level) for c in curves]
        reached = [v for v in per_seed if v is not None]
        table[method] = {
            f"{x_name}_to_level_mean_curve": first_reach(x, curves.mean(0), level),
            f"{x_name}_to_level_median_seed": (float(np.median(reached))
                                               if len(reached) > len(per_seed) / 2 else None),
            "fraction_of_seeds_reaching": len(reached) / len(per_seed),
            "area_under_curve": _mean_over_x(x, curves.mean(0)),
            "final_mean": float(curves[:, -1].mean()),
        }
    return {"level": level, "level_fraction": level_fraction, "methods": table}


def cost_summary(seed_results: dict, methods: tuple) -> dict:
    """Mean wall / CPU seconds and belief refits per seed and method (from the seed files)."""
    seeds = sorted(seed_results)
    timing = {m: float(np.mean([seed_results[s][f"extra__seconds__{m}"][0] for s in seeds]))
              for m in methods}
    cpu = {m: _mean_or_none([seed_results[s].get(f"extra__cpu_seconds__{m}", [np.nan])[0]
                             for s in seeds]) for m in methods}
    fits = {m: float(np.mean([seed_results[s][f"extra__n_fits__{m}"][0] for s in seeds]))
            for m in methods}
    return {
        "seconds_per_seed_per_method": timing,
        "cpu_seconds_per_seed_per_method": cpu,
        "seconds_per_seed": float(sum(timing.values())),
        "cpu_seconds_per_seed": float(np.mean([seed_results[s]["extra__cpu_seconds"][0]
                                               for s in seeds])),
        "n_fits_per_seed": fits,
    }


def claims_check(eff: dict, methods: tuple, x_name: str, domain: str, x_max: float) -> list[dict]:
    """The paper's claim: PG policies reach good returns with markedly fewer data than Dirichlet.

    Holds when the best policy of a PG model reaches the level of ``eff`` on the mean curve
    at most half as late as the best Dirichlet policy (or the Dirichlet ones never do).
    The detail also gives the curves' means over the x range.
    """
    key = f"{x_name}_to_level_mean_curve"
    groups = {
        "PG (relative)": lambda m: m.startswith("pg_") and not m.startswith("pg_absolute"),
        "PG (absolute, the paper's)": lambda m: m.startswith("pg_absolute"),
        "Dirichlet": lambda m: m.startswith("dirichlet"),
    }

    def first(group):
        cand = [(m, eff["methods"][m][key]) for m in methods if groups[group](m)]
        cand = [(m, math.inf if v is None else v) for m, v in cand]
        return min(cand, key=lambda t: t[1]) if cand else (None, math.inf)

    def best_auc(group):
        cand = [(m, eff["methods"][m]["area_under_curve"]) for m in methods if groups[group](m)]
        return max(cand, key=lambda t: t[1]) if cand else (None, math.nan)

    def where(label, method, v):
        if math.isinf(v):
            return f"no {label} policy within {x_max:g} {x_name}"
        return f"best {label} {method} at {v:g} {x_name}"

    dir_m, dir_x = first("Dirichlet")
    dir_auc = best_auc("Dirichlet")
    claims = []
    for label in ("PG (relative)", "PG (absolute, the paper's)"):
        m, v = first(label)
        if m is None or dir_m is None:
            continue
        pg_auc = best_auc(label)
        holds = v < math.inf and (math.isinf(dir_x) or v <= 0.5 * dir_x)
        claims.append({
            "claim": f"{domain}: {label} needs markedly fewer {x_name} than Dirichlet to reach "
                     f"{eff['level_fraction']:.0%} of the way to the optimum",
            "holds": bool(holds),
            "detail": f"level {eff['level']:.4g}: {where(label, m, v)}, {where('Dirichlet', dir_m, dir_x)} "
                      f"(mean curves; 'markedly' = at most half); "
                      f"curve mean over the x range: {label} {pg_auc[1]:.4g} ({pg_auc[0]}), "
                      f"Dirichlet {dir_auc[1]:.4g} ({dir_auc[0]})",
        })
    return claims


# ----------------------------------------------------------------------------- protocol
def _environment():
    from ..envs import tunnel_world

    return tunnel_world()


def _start_state(mdp: Any, start: tuple) -> int:
    cells = np.asarray(mdp.cells if getattr(mdp, "cells", None) is not None else mdp.coordinates)
    hit = np.flatnonzero((cells == np.asarray(start)).all(axis=1))
    if hit.size != 1:
        raise ValueError(f"start: cell {start} is not a state of the environment")
    return int(hit[0])


def run_seed(config: Config, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Run all configured policies for one seed; curves of shape (len(x_values),)."""
    from ..applications.transitions import displacement_category_map

    for m in config.methods:
        split_method(m)
    mdp = _environment()
    coords = np.asarray(mdp.coordinates, dtype=float)
    dist = np.sqrt(((coords[:, None] - coords[None]) ** 2).sum(-1))
    ell = config.lengthscale if config.lengthscale > 0 else float(dist.max())
    needs_pg = any(split_method(m)[0].startswith("pg") for m in config.methods)
    cov = se_covariance(coords, ell) if needs_pg else None
    cells = np.asarray(mdp.cells if getattr(mdp, "cells", None) is not None else coords)
    cmap = displacement_category_map(np.round(cells).astype(int), config.radius,
                                     boundary=config.boundary)
    out = run_methods(mdp, config, rng, _start_state(mdp, config.start), cov, cmap,
                      "normalized_return", config.n_transitions, normalise=True)
    out["extra__lengthscale"] = np.array([ell])
    return out


def summarise_extra(config: Config, seed_results: dict, metrics: dict) -> dict:
    """Transitions to reach 90% (and 50%) of the optimal return per policy, timings, claims."""
    x = x_values(config)
    seeds = sorted(seed_results)
    first = seed_results[seeds[0]]
    eff = efficiency_summary(x, seed_results, "normalized_return", config.methods,
                             level_fraction=0.9, low=0.0, high=1.0, x_name="transitions")
    eff50 = efficiency_summary(x, seed_results, "normalized_return", config.methods,
                               level_fraction=0.5, low=0.0, high=1.0, x_name="transitions")
    return {
        "optimal_return": float(np.asarray(first["extra__optimal_return"])[0]),
        "lengthscale": float(np.asarray(first["extra__lengthscale"])[0]),
        "efficiency_90pct": eff,
        "efficiency_50pct": eff50,
        **cost_summary(seed_results, config.methods),
        "claims": (claims_check(eff, config.methods, "transitions", "tunnel world",
                                float(config.n_transitions))
                   + claims_check(eff50, config.methods, "transitions", "tunnel world",
                                  float(config.n_transitions))),
    }


def plot(config: Config, seed_results: dict, summary: dict, out_dir: pathlib.Path) -> list[pathlib.Path]:
    """Fig. 3b: normalised return against transitions, one panel per PSRL variant."""
    from ..plotting._psrl import plot_psrl_curves

    return plot_psrl_curves(summary, "normalized_return", pathlib.Path(out_dir) / "psrl_grid",
                            reference=1.0, reference_label="optimal policy")
