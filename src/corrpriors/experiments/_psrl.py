"""What the two PSRL experiments share: the eight policies, running them, summaries and claims.

Policies are ``<model>_<variant>``: models ``pg`` (correlated, relative categories),
``pg_absolute`` (correlated, absolute next states), ``dirichlet_uniform`` (alpha = 1),
``dirichlet_sparse`` (alpha = 1e-3); variants ``sampling`` (greedy on the average optimal Q of
posterior draws) and ``mean`` (greedy on the posterior-mean model).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._format import num
from ..applications.transitions import BOUNDARY_RULES
from ..core.selection import CRITERIA
from ..runner._ranges import (
    CONCENTRATION,
    DISCOUNT_OR_ENV,
    ITERATIONS,
    LENGTHSCALE_OR_AUTO,
    TOLERANCE,
    Boolean,
    Each,
    Interval,
    Options,
)
from ..runner.protocol import Claim, SeedResult
from ._shared import curve_stack, finite_claim, method_stream

MODELS = ("pg", "pg_absolute", "dirichlet_uniform", "dirichlet_sparse")
VARIANTS = ("sampling", "mean")
METHODS = tuple(f"{m}_{v}" for m in MODELS for v in VARIANTS)


#: Names of "no lattice selection" recorded in metrics.json for selection "": the scale learned by
#: MAP-EM (learn_scale) or kept fixed.
NO_SELECTION = ("map-em", "fixed")


def resolved_selection(learn_scale: bool) -> str:
    """What ``selection=""`` does: ``"map-em"`` with ``learn_scale``, else ``"fixed"``."""
    return "map-em" if learn_scale else "fixed"


def split_method(method: str) -> tuple[str, str]:
    """``"pg_absolute_sampling"`` -> ``("pg_absolute", "sampling")``."""
    for variant in VARIANTS:
        if method.endswith("_" + variant):
            model = method[: -len(variant) - 1]
            if model in MODELS:
                return model, variant
    raise ValueError(f"method: expected one of {', '.join(METHODS)}, got {method!r}")


def psrl_ranges(radius: Interval, lengthscale: Interval = LENGTHSCALE_OR_AUTO) -> dict:
    """The ranges of the settings both PSRL experiments share (``radius``, ``lengthscale``: per environment)."""
    return {
        "methods": Each(Options(*METHODS), min_len=1, max_len=len(METHODS), distinct=True),
        "alpha_uniform": CONCENTRATION,
        "alpha_sparse": CONCENTRATION,
        "lengthscale": lengthscale,
        "radius": radius,
        "boundary": Options(*BOUNDARY_RULES),
        "learn_scale": Boolean(),
        "selection": Options("", *NO_SELECTION, *CRITERIA),
        "max_iter": ITERATIONS,
        "tol": TOLERANCE,
        "discount": DISCOUNT_OR_ENV,
    }


def check_methods(methods: Any) -> None:
    """Raise ``ValueError`` unless ``methods`` is a non-empty tuple of known policies."""
    if not isinstance(methods, (tuple, list)) or not methods:
        raise ValueError(f"methods: expected a non-empty list of {', '.join(METHODS)}, got {methods!r}")
    for m in methods:
        split_method(m)


def check_psrl_config(config: Any, counts: tuple[str, ...]) -> None:
    """Raise ``ValueError`` naming the field of an invalid PSRL config.

    Unknown methods, a field of ``counts`` that is not a positive integer, a discount outside
    [0, 1) (0 = the environment's) or an unknown ``boundary`` rule of the relative encoding.
    """
    check_methods(config.methods)
    for field in counts:
        value = getattr(config, field)
        if isinstance(value, bool) or int(value) != value or value < 1:
            raise ValueError(f"{field}: expected a positive integer, got {value!r}")
    if not 0 <= config.discount < 1:
        raise ValueError(f"discount: expected 0 (the environment's) or a value in (0, 1), got {config.discount}")
    if config.selection not in ("", *NO_SELECTION, *CRITERIA):
        raise ValueError(f"selection: expected '' (MAP-EM, or the fixed scale without learn_scale), "
                         f"{', '.join(NO_SELECTION)} or one of {', '.join(CRITERIA)}, got {config.selection!r}")
    if config.selection in NO_SELECTION and config.selection != resolved_selection(config.learn_scale):
        raise ValueError(f"selection: {config.selection!r} contradicts learn_scale={config.learn_scale} "
                         f"(use '' or {resolved_selection(config.learn_scale)!r})")
    if config.boundary not in BOUNDARY_RULES:
        raise ValueError(f"boundary: expected one of {', '.join(BOUNDARY_RULES)}, got {config.boundary!r}")


def make_belief(model: str, mdp: Any, covariance: np.ndarray | None, category_map: Any,
                config: Any) -> Any:
    """Build the transition belief of ``model`` for the environment ``mdp``."""
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
                                     max_iter=config.max_iter, tol=config.tol,
                                     selection=None if config.selection in ("", *NO_SELECTION)
                                     else config.selection)


def run_methods(mdp: Any, config: Any, rng: np.random.Generator, start_state: int,
                covariance: np.ndarray | None, category_map: Any, metric: str,
                n_steps: int, normalise: bool) -> SeedResult:
    """Run every configured policy on ``mdp`` (one independent stream per policy).

    The curves ``metric[method]`` are the expected return of the greedy policy after every
    replan (divided by the optimal one if ``normalise``); per-method extras hold the raw
    returns, timings, refits and learned scales.
    """
    from ..applications.psrl import PSRLAgent, run_psrl

    discount = config.discount if config.discount > 0 else mdp.discount
    cpu0 = time.process_time()
    curves: dict[str, np.ndarray] = {}
    per: dict[str, dict[str, np.ndarray]] = {k: {} for k in (
        "cpu_seconds", "expected_return", "seconds", "fit_seconds", "n_fits", "scale", "jitter", "n_unconverged")}
    optimal = math.nan
    streams = method_stream(rng, tuple(config.methods))   # subsets of methods agree
    for method, stream in streams.items():
        model, variant = split_method(method)
        belief = make_belief(model, mdp, covariance, category_map, config)
        agent = PSRLAgent(belief, mdp.reward_matrix, discount, variant=variant,
                          n_samples=config.n_samples, replan_every=config.replan_every)
        tic, cpu = time.perf_counter(), time.process_time()
        res = run_psrl(mdp.transitions, agent, n_steps, start_state, rng=stream, eval_every=config.replan_every)
        seconds = time.perf_counter() - tic
        per["cpu_seconds"][method] = np.array([time.process_time() - cpu])
        optimal = float(res["optimal_return"])
        values = res["expected_return"]
        curves[method] = values / optimal if normalise else values
        per["expected_return"][method] = values
        per["seconds"][method] = np.array([seconds])
        per["fit_seconds"][method] = np.array([getattr(belief, "fit_seconds_", 0.0)])
        per["n_fits"][method] = np.array([getattr(belief, "n_fits_", 0)], dtype=float)
        if hasattr(belief, "models_"):
            per["scale"][method] = np.array([m.scale_ for m in belief.models_])
            per["jitter"][method] = np.array([max(m.jitter_ for m in belief.models_)])
            per["n_unconverged"][method] = np.array([float(belief.n_unconverged_)])
    extras = {"optimal_return": np.array([optimal]), "cpu_seconds": np.array([time.process_time() - cpu0])}
    return SeedResult(curves={metric: curves}, extras=extras, method_extras={k: v for k, v in per.items() if v})


def _mean_over_x(x: list[float], curve: np.ndarray) -> float:
    """Trapezoidal average of ``curve`` over the x range."""
    xs = np.asarray(x, dtype=float)
    c = np.asarray(curve, dtype=float)
    if len(xs) < 2:
        return float(c[0])
    return float(np.sum(0.5 * (c[1:] + c[:-1]) * np.diff(xs)) / (xs[-1] - xs[0]))


def first_reach(x: list[float], curve: np.ndarray, level: float) -> float | None:
    """First x at which ``curve`` reaches ``level`` and stays there (None if never).

    A value that is not finite (NaN: a failed fit) never reaches the level.
    """
    curve = np.asarray(curve, dtype=float)
    below = np.flatnonzero(~(np.isfinite(curve) & (curve >= level)))
    if below.size == 0:
        return float(x[0])
    if below[-1] == len(curve) - 1:
        return None
    return float(x[below[-1] + 1])


def efficiency_summary(x: list[float], results: Mapping[int, SeedResult], metric: str, methods: tuple,
                       level_fraction: float, low: float, high: float, x_name: str) -> dict:
    """Per method: x to reach ``low + level_fraction * (high - low)`` (mean curve and per seed)."""
    level = low + level_fraction * (high - low)
    table = {}
    for method in methods:
        curves = curve_stack(results, metric, method)
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
    return {"level": level, "level_fraction": level_fraction, "low": float(low), "high": float(high),
            "methods": table}


def cost_summary(results: Mapping[int, SeedResult], methods: tuple) -> dict:
    """Mean wall / CPU seconds and belief refits per seed and method (from the seed files)."""
    seeds = sorted(results)

    def mean_of(name: str, method: str) -> float:
        return float(np.mean([results[s].method_extras[name][method][0] for s in seeds]))

    timing = {m: mean_of("seconds", m) for m in methods}
    return {
        "seconds_per_seed_per_method": timing,
        "cpu_seconds_per_seed_per_method": {m: mean_of("cpu_seconds", m) for m in methods},
        "seconds_per_seed": float(sum(timing.values())),
        "cpu_seconds_per_seed": float(np.mean([results[s].extras["cpu_seconds"][0] for s in seeds])),
        "n_fits_per_seed": {m: mean_of("n_fits", m) for m in methods},
    }


def _half_as_late(v: float, dir_x: float, x_first: float, x_max: float) -> tuple[bool, str]:
    """Whether a crossing at ``v`` is at most half Dirichlet's ``dir_x`` (inf: beyond ``x_max``), and why not.

    A censored Dirichlet crossing is only a lower bound, ``dir_x > x_max``: at most half of it
    is shown only by ``v <= x_max / 2``. Crossings at the same first evaluation show no advantage.
    """
    if math.isinf(v):
        return False, ""
    if math.isinf(dir_x):
        half = 0.5 * x_max
        return v <= half, ("" if v <= half else f"Dirichlet's crossing is only known to be beyond {num(x_max)}, "
                                                f"so at most half of it is shown only by {num(half)}")
    if v == dir_x == x_first:
        return False, "undetermined: both reach it at the first evaluation"
    return v < dir_x and v <= 0.5 * dir_x, ""


#: The claims' target when the level is a fraction of the optimal return (``low`` = 0, ``high`` = 1).
GOAL_OF_OPTIMUM = "of the optimal return"
#: The claims' target when the level is a fraction of the way from a reference return to the optimum.
GOAL_OF_GAP = "of the random-to-optimal gap"


def claims_check(eff: dict, methods: tuple, x_name: str, domain: str, x_max: float,
                 cited: list | None = None, notes: list | None = None, x_first: float = 0.0,
                 goal: str = GOAL_OF_OPTIMUM, low_name: str = "") -> list[Claim]:
    """Check the paper's claim: PG policies reach good returns with markedly fewer data than Dirichlet.

    Holds when the best policy of a PG model reaches the level of ``eff`` on the mean curve
    at most half as late as the best Dirichlet policy, strictly earlier (:func:`_half_as_late`;
    if no Dirichlet policy reaches it by ``x_max``, by ``x_max / 2``). Not met when a compared
    mean curve or the level is not finite. The detail also gives the curves' means over the x
    range. The x values the claims cite are appended to ``cited`` (the terminal table shows
    them), and a claim left unchecked (no Dirichlet or no PG method) is said in ``notes``.
    ``goal`` says in the claim what the level is a fraction of; with ``low_name`` (what
    ``eff["low"]`` is, e.g. "the uniform random policy's return") the detail also says how the
    level was computed from ``eff["low"]`` and ``eff["high"]``.
    """
    key = f"{x_name}_to_level_mean_curve"
    groups = {
        "pg": lambda m: split_method(m)[0] == "pg",
        "pg_absolute": lambda m: split_method(m)[0] == "pg_absolute",
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
            return f"no {label} policy within {num(x_max)} {x_name}"
        if cited is not None:
            cited.append(float(v))
        return f"best {label} policy {method} at {num(v)} {x_name}"

    def unchecked(what):
        if notes is not None:
            notes.append(f"{what} claims not checked: no {what} method in methods")

    dir_m, dir_x = first("Dirichlet")
    if dir_m is None:
        unchecked("Dirichlet")
        return []
    dir_auc = best_auc("Dirichlet")
    level = f"level {num(eff['level'])}"
    if low_name:
        level += (f" ({eff['level_fraction']:.0%} of the way from {low_name} {num(eff['low'])} "
                  f"to the optimum {num(eff['high'])})")
    claims = []
    for label in ("pg", "pg_absolute"):
        m, v = first(label)
        if m is None:
            unchecked(label)
            continue
        pg_auc = best_auc(label)
        holds, why = _half_as_late(v, dir_x, x_first, x_max)
        numbers = {"the level": eff["level"], **{
            f"{c}'s mean curve": eff["methods"][c]["area_under_curve"]
            for c in methods if groups[label](c) or groups["Dirichlet"](c)}}
        claims.append(finite_claim(
            f"{label}: {eff['level_fraction']:.0%} {goal} in at most half "
            f"Dirichlet's {x_name}",   # the paper's "markedly fewer", made exact; fits 100 columns
            holds,
            f"{domain}, {level}: {where(label, m, v)}, {where('Dirichlet', dir_m, dir_x)} "
            f"(mean curves){'; ' + why if why else ''}; "
            f"curve mean over the x range: {label} {num(pg_auc[1])} ({pg_auc[0]}), "
            f"Dirichlet {num(dir_auc[1])} ({dir_auc[0]})", numbers))
    return claims


def psrl_extra(x: list[float], results: Mapping[int, SeedResult], metric: str, methods: tuple, *,
               low: float, high: float, x_name: str, domain: str, x_max: float,
               goal: str = GOAL_OF_OPTIMUM, low_name: str = "") -> dict:
    """Efficiency to 90% and 50% of the way from ``low`` to ``high``, timings and the claims.

    ``goal`` and ``low_name`` word the claims (:func:`claims_check`).
    """
    eff = efficiency_summary(x, results, metric, methods, level_fraction=0.9, low=low, high=high, x_name=x_name)
    eff50 = efficiency_summary(x, results, metric, methods, level_fraction=0.5, low=low, high=high, x_name=x_name)
    cited: list[float] = []
    notes: list[str] = []
    claims = [c for e in (eff, eff50) for c in claims_check(e, methods, x_name, domain, x_max, cited, notes,
                                                           x_first=float(x[0]), goal=goal, low_name=low_name)]
    return {
        "efficiency_90pct": eff,
        "efficiency_50pct": eff50,
        **cost_summary(results, methods),
        "claims": claims,
        "notes": list(dict.fromkeys(notes)),
        "table_x": sorted(set(cited)),
    }


__all__ = [
    "GOAL_OF_GAP",
    "GOAL_OF_OPTIMUM",
    "METHODS",
    "MODELS",
    "VARIANTS",
    "check_methods",
    "check_psrl_config",
    "claims_check",
    "cost_summary",
    "efficiency_summary",
    "first_reach",
    "make_belief",
    "psrl_extra",
    "resolved_selection",
    "run_methods",
    "split_method",
]
