r"""System identification on the tunnel world (the paper's section 4.3.1, Fig. 3a).

An agent performs a random walk on the 10 x 10 tunnel world (S = 100, A = 4): it starts
in the corner cell (0, 0) and picks every action uniformly at random; the walk goes on
through the tunnel (from the goal cell every action jumps back to the start). For every
T on a grid, the transition model :math:`P(s' \mid s, a)` is estimated from the first
T transitions (the count tensor :math:`X_{s a s'}`), and the error is the Hellinger
distance between the true and the estimated next-state distributions, averaged over
all states and actions.

Methods (names from the one method vocabulary, :mod:`corrpriors._methods`):

``pg``
    The correlated prior with relative categories: a next state is encoded by its
    displacement from the current cell within a window of half-width ``Config.offset_radius``
    (:func:`corrpriors.applications.transitions.displacement_category_map`), plus an
    "other" category for the tunnel's jump; a constant prior mean per stick is learned
    (MAP-EM). One correlated multinomial per action, covariates = states,
    squared-exponential kernel on the Euclidean distances between the grid cells. The
    hyper-parameters are chosen per action and per T by the collapsed bound
    :math:`E_q[\log p(X \mid \psi)] - KL(q \| p)`
    (:meth:`~corrpriors.core.model.CorrelatedMultinomial.collapsed_bound`): for every
    candidate length scale in ``Config.lengthscales`` (0 stands for the paper's choice, the
    largest distance between two cells) the scale :math:`\theta` climbs a log lattice
    (``Config.scale_step`` decades, within ``Config.scale_range``) from the previous T's
    choice to a local maximum of the bound; the best (length scale, scale) pair is kept
    and reported.
``pg_absolute``
    The paper's model: the same with categories = next states in index order (absolute
    encoding) and the fixed uniform prior mean. ``Config.selection = "elbo-em"`` instead
    learns the scale by variational (MAP-)EM on the ELBO and picks the length scale by the
    ELBO: with absolute categories and scarce data that drives the scale towards 0 (the
    ELBO's mean-field gap grows with the scale; measured at T = 526: ELBO -515 at
    :math:`\theta \to 0` vs -638 at :math:`\theta = 1`, while an importance-sampled
    :math:`\log p(X)` is -515 vs -472), so the fit returns its prior.
``dirichlet_uniform``, ``dirichlet_sparse``
    Independent Dirichlet models with :math:`\alpha = 1` and :math:`\alpha = 10^{-3}`.

Results written before corrpriors 0.3 called ``pg_absolute`` ``pg`` and ``pg`` ``pg_offset``;
they are read under the new names (:data:`corrpriors._methods.LEGACY_NAMES`).

All models are fitted along the T grid in increasing order, each correlated model
warm-started from its fit at the previous T. The paper's length scale (the largest
distance, 9 sqrt(2) cells) makes the squared-exponential Gram matrix numerically
rank deficient; the core then adds a relative diagonal jitter of about 1e-10 and
fits the jittered matrix exactly, with a :class:`~corrpriors.exceptions.JitterWarning`
that the runner counts in the run's ``warnings.log``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._format import num
from ..runner._ranges import (
    CONCENTRATION,
    ITERATIONS,
    LENGTHSCALE_OR_AUTO,
    MAX_STEPS,
    TOLERANCE,
    Boolean,
    Each,
    Interval,
    Options,
)
from ..runner.protocol import Claim, FigureSpec, SeedResult
from ._shared import largest_distance, method_stream

NAME = "system-id"
DESCRIPTION = "system identification on the tunnel world, Hellinger error vs transitions (paper Fig. 3a)"
X_NAME = "transitions"
METRICS = {"hellinger": "lower"}
PAPER_SEEDS = 20
QUICK_SEEDS = 2
ENVIRONMENT = "System identification, 10x10 tunnel world"
X_LABEL = "transitions observed (T, random walk)"
METRIC_LABELS = {"hellinger": "Hellinger distance to the true P(s' | s, a)\n(mean over states and actions)"}
METHODS = ("pg", "pg_absolute", "dirichlet_uniform", "dirichlet_sparse")
#: The correlated methods (fitted with a kernel; the others are the Dirichlet baselines).
CORRELATED = ("pg", "pg_absolute")


def _paper_grid() -> tuple[int, ...]:
    return tuple(int(round(t)) for t in np.linspace(0, 10_000, 20))


@dataclasses.dataclass(frozen=True)
class Config:
    r"""Settings of the system-identification experiment (defaults: the paper's).

    Attributes
    ----------
    transitions : tuple of int
        The T grid (20 points from 0 to 10,000 in the paper), increasing.
    alpha_uniform, alpha_sparse : float
        Concentrations of the two Dirichlet baselines.
    lengthscales : tuple of float
        Candidate length scales (in cells) of the squared-exponential kernel. ``0``
        means the paper's choice, the largest distance between two cells.
    scale_range : (float, float)
        Smallest and largest scale :math:`\theta` considered (``selection="collapsed"``).
    scale_step : float
        Lattice step of the scale search, in decades (0.25: factors of 1.78); the search
        starts at :math:`\theta = 1` at the first T.
    selection : {"collapsed", "elbo-em"}
        ``"collapsed"``: for every action and T the (length scale, scale) pair at a local
        maximum of the collapsed bound. ``"elbo-em"``: the scale by (MAP-)EM on the ELBO,
        the length scale by the ELBO (the paper's calibration; collapses, see above).
    learn_lengthscale : bool
        Also learn the length scale of every candidate by the kernel M-step
        (L-BFGS-B on the ELBO), starting from the candidate.
    pg_learn_mean : {"none", "constant"}
        Prior mean of ``pg_absolute``: the fixed uniform logits (the paper's) or a learned
        constant per stick. ``pg`` always learns a constant mean per stick. (The field keeps
        its name from before the 0.3 vocabulary, so results folders keep their names.)
    scale_prior_shape, scale_prior_rate : float
        With ``selection="elbo-em"``: Gamma(shape, rate) hyper-prior on the scale
        :math:`\theta` (MAP-EM); shape 0 disables it. It does not stop the collapse of
        the absolute encoding (its log density is swamped by the (K-1)C prior terms).
    offset_radius : int
        Half-width of the displacement window of ``pg`` (in cells). The tunnel
        world's moves (a Gaussian with std 1 centred one cell away) put about 3 % of
        their mass beyond 2 cells and about 0.1 % beyond 3; what falls outside goes to
        the "other" category, which is not shared between states. Radius 3 (7 x 7
        window, K = 50) measured Hellinger 0.188 / 0.119 at T = 1,000 / 10,000 against
        0.242 / 0.177 for radius 2 (one walk, length scale 2).
    max_iter : int
        Iteration cap of each variational-EM fit.
    tol : float
        Relative ELBO tolerance of each fit.
    point_estimate : {"mean", "hellinger"}
        The estimate scored, for every method alike: the posterior mean (the paper's metric) or
        the Bayes estimate under the squared Hellinger loss, P_j proportional to E[sqrt(P_j)]^2
        (the beliefs' ``hellinger_estimate``: closed form for the Dirichlet rows, the average
        of 16 to 256 posterior draws for the correlated ones, until their noise costs at most
        1 % of the expected loss, seeded per method after the walk).
    """

    transitions: tuple = _paper_grid()
    alpha_uniform: float = 1.0
    alpha_sparse: float = 1e-3
    lengthscales: tuple = (2.0, 0.0)
    scale_range: tuple = (0.01, 10_000.0)
    scale_step: float = 0.25
    selection: str = "collapsed"
    learn_lengthscale: bool = False
    pg_learn_mean: str = "none"
    scale_prior_shape: float = 2.0
    scale_prior_rate: float = 1.0
    offset_radius: int = 3
    max_iter: int = 300
    tol: float = 1e-6
    point_estimate: str = "mean"


#: The valid range of every setting (checked before any work; ``--list-settings`` shows it).
RANGES = {
    "transitions": Each(Interval(int, 0, MAX_STEPS), min_len=1, increasing=True),
    "alpha_uniform": CONCENTRATION,
    "alpha_sparse": CONCENTRATION,
    "lengthscales": Each(LENGTHSCALE_OR_AUTO, min_len=1, max_len=20),
    "scale_range": Each(Interval(float, 0.0, 1e12, closed="right"), min_len=2, max_len=2, increasing=True),
    "scale_step": Interval(float, 0.0, 10.0, closed="right", note="decades"),
    "selection": Options("collapsed", "elbo-em"),
    "learn_lengthscale": Boolean(),
    "pg_learn_mean": Options("none", "constant"),
    "scale_prior_shape": Interval(float, 0.0, 1e6, note="0 = no hyper-prior"),
    "scale_prior_rate": Interval(float, 0.0, 1e6, closed="right"),
    "offset_radius": Interval(int, 1, 9, note="the tunnel world is 10 x 10"),
    "max_iter": ITERATIONS,
    "tol": TOLERANCE,
    "point_estimate": Options("mean", "hellinger"),
}


def quick_config() -> Config:
    """About a minute on 2 cores for :data:`QUICK_SEEDS` seeds."""
    return Config(transitions=(0, 100, 300, 1000, 3000), lengthscales=(2.0,), scale_step=0.5,
                  max_iter=100)


def x_values(config: Config) -> list[float]:
    """Return the T grid."""
    return [float(t) for t in config.transitions]


def check_config(config: Config) -> None:
    """Raise ``ValueError`` naming the field of an invalid ``config``."""
    ts = np.asarray(config.transitions)
    if ts.ndim != 1 or ts.size < 1 or np.any(ts < 0) or np.any(np.diff(ts) <= 0) or np.any(ts != np.round(ts)):
        raise ValueError(f"transitions: expected increasing non-negative integers, got {config.transitions}")
    if not config.lengthscales or any(float(ell) < 0 for ell in config.lengthscales):
        raise ValueError(f"lengthscales: expected non-negative numbers, got {config.lengthscales}")
    if config.selection not in ("collapsed", "elbo-em"):
        raise ValueError(f"selection: expected 'collapsed' or 'elbo-em', got {config.selection!r}")
    lo, hi = (float(v) for v in config.scale_range)
    if config.selection == "collapsed" and not 0 < lo <= 1.0 <= hi:
        raise ValueError(f"scale_range: expected 0 < low <= 1 <= high, got {config.scale_range}")
    if config.selection == "collapsed" and not float(config.scale_step) > 0:
        raise ValueError(f"scale_step: expected a positive number of decades, got {config.scale_step}")
    if config.selection == "collapsed":   # the ScaleSearch's own limit, before any seed starts
        from ..core.selection import check_lattice_points

        check_lattice_points(lo, hi, float(config.scale_step), step_name="scale_step",
                             range_name="the ends of scale_range", names="scale_step, scale_range")
    if int(config.offset_radius) != config.offset_radius or config.offset_radius < 1:
        raise ValueError(f"offset_radius: expected an int >= 1, got {config.offset_radius}")
    if config.alpha_uniform <= 0 or config.alpha_sparse <= 0:
        raise ValueError("alpha_uniform, alpha_sparse: expected positive concentrations")
    if config.point_estimate not in ("mean", "hellinger"):
        raise ValueError(f"point_estimate: expected 'mean' or 'hellinger', got {config.point_estimate!r}")


def random_walk(mdp, n_steps: int, rng: np.random.Generator):
    """Walk ``n_steps`` transitions uniformly at random from cell (0, 0).

    Returns
    -------
    (states, actions, next_states) : ndarrays of shape (T,)
    """
    from ..mdp import sample_trajectories

    coords = np.asarray(mdp.coordinates)
    start = int(np.flatnonzero(np.all(coords == coords.min(axis=0), axis=1))[0])
    uniform = np.full((mdp.n_states, mdp.n_actions), 1.0 / mdp.n_actions)
    traj = sample_trajectories(mdp, uniform, max(int(n_steps), 1), rng=rng, start=start)
    return traj.states[0, :n_steps], traj.actions[0, :n_steps], traj.next_states[0, :n_steps]


def _cumulative_counts(S: int, A: int, states, actions, next_states, ts) -> list[np.ndarray]:
    """Count the first T transitions into (S, A, S) tensors, for every T in ``ts``."""
    from ..mdp import transition_counts

    out, counts, done = [], np.zeros((S, A, S), dtype=np.int64), 0
    for t in ts:
        if t > done:
            counts = counts + transition_counts((states[done:t], actions[done:t], next_states[done:t]), S, A)
            done = t
        out.append(counts.copy())
    return out


def _lengthscale_candidates(config: Config, coords: np.ndarray) -> list[float]:
    d_max = largest_distance(coords)
    return sorted({float(ell) if ell > 0 else d_max for ell in config.lengthscales})


def resolve_config(config: Config) -> Config:
    """``config`` with a length scale of 0 replaced by the largest distance between two cells."""
    from ..envs import tunnel_world

    if not any(float(ell) == 0 for ell in config.lengthscales):
        return config
    d_max = largest_distance(np.asarray(tunnel_world().coordinates, dtype=float))
    lengthscales = tuple(float(ell) if ell > 0 else d_max for ell in config.lengthscales)
    return dataclasses.replace(config, lengthscales=lengthscales)


def _belief_options(config: Config, mdp, method: str) -> dict:
    """Category map and mean learning of a correlated method (relative ``pg`` or ``pg_absolute``)."""
    from ..applications.transitions import displacement_category_map

    coords = np.asarray(mdp.coordinates, dtype=float)
    if method == "pg_absolute":
        return dict(category_map=None,
                    learn_mean=None if config.pg_learn_mean == "none" else config.pg_learn_mean)
    return dict(category_map=displacement_category_map(coords, config.offset_radius),
                learn_mean="constant")


def _kernels(mdp, lengthscales: list[float]) -> list:
    from ..kernels import SquaredExponential

    coords = np.asarray(mdp.coordinates, dtype=float)
    return [SquaredExponential(lengthscale=ell).bind(coords=coords) for ell in lengthscales]


def _correlated_models(config: Config, mdp, method: str, lengthscales: list[float]) -> list:
    """Build one :class:`CorrelatedTransitionModel` per candidate length scale (``selection="elbo-em"``).

    The scale is learned by MAP-EM on the ELBO.
    """
    from ..applications.transitions import CorrelatedTransitionModel

    shape, rate = config.scale_prior_shape, config.scale_prior_rate
    return [
        CorrelatedTransitionModel(
            mdp.n_states, mdp.n_actions, covariance=kernel, max_iter=config.max_iter,
            tol=config.tol, learn_kernel=config.learn_lengthscale, learn_scale=True,
            scale_prior=(shape, rate) if shape > 0 else None,
            **_belief_options(config, mdp, method))
        for kernel in _kernels(mdp, lengthscales)
    ]


def _selecting_model(config: Config, mdp, method: str, lengthscales: list[float]):
    """Build the selecting :class:`CorrelatedTransitionModel` of ``selection="collapsed"``.

    Per action and at every T it chooses the length scale and the scale that maximise the
    collapsed bound (a warm-started climb over a log lattice of scales from the previous T's
    choice, :class:`corrpriors.core.ScaleSearch`).
    """
    from ..applications.transitions import CorrelatedTransitionModel

    return CorrelatedTransitionModel(
        mdp.n_states, mdp.n_actions, covariance=_kernels(mdp, lengthscales),
        max_iter=config.max_iter, tol=config.tol, learn_kernel=config.learn_lengthscale,
        selection="collapsed", scale_range=tuple(config.scale_range),
        scale_step=config.scale_step, **_belief_options(config, mdp, method))


def _lengthscale_of(model) -> float:
    """Return the (possibly learned) length scale of a fitted CorrelatedMultinomial."""
    kernel = getattr(model, "kernel_", None)
    kernel = getattr(kernel, "kernel", kernel)
    return float(getattr(kernel, "lengthscale", np.nan))


def run_seed(config: Config, *, rng: np.random.Generator) -> SeedResult:
    """Hellinger error of every method at every T for one random walk.

    Returns the curves ``hellinger[method]`` of shape (len(transitions),) and, for the
    correlated methods, the per-method extras ``lengthscale`` (the selected length scale,
    averaged over actions), ``scale`` (the selected or learned scale, geometric mean over
    actions), ``elbo`` (the ELBO, summed over actions) and ``bound`` (the collapsed bound,
    summed over actions) at every T.
    """
    check_config(config)
    from ..applications.transitions import DirichletTransitionModel
    from ..applications.transitions._hellinger import point_estimate
    from ..envs import tunnel_world
    from ..mdp import mean_hellinger

    mdp = tunnel_world()
    P = np.asarray(mdp.transitions)
    S, A = mdp.n_states, mdp.n_actions
    ts = [int(t) for t in config.transitions]
    states, actions, next_states = random_walk(mdp, ts[-1], rng)
    counts = _cumulative_counts(S, A, states, actions, next_states, ts)
    kind = config.point_estimate
    # the estimates' own streams, drawn after the walk (the default "mean" draws nothing more)
    streams = method_stream(rng, METHODS) if kind != "mean" else {}

    hell: dict[str, np.ndarray] = {m: np.empty(len(ts)) for m in METHODS}
    per_method: dict[str, dict[str, np.ndarray]] = {"lengthscale": {}, "scale": {}, "elbo": {}, "bound": {}}
    lengthscales = _lengthscale_candidates(config, np.asarray(mdp.coordinates, dtype=float))
    for method in CORRELATED:
        if config.selection == "collapsed":
            search = _selecting_model(config, mdp, method, lengthscales)
        else:
            models = _correlated_models(config, mdp, method, lengthscales)
        chosen, scale, elbo, bound = (np.empty(len(ts)) for _ in range(4))
        for i, X in enumerate(counts):
            if config.selection == "collapsed":
                est = point_estimate(search.set_counts(X), kind, rng=streams.get(method))
                fits = search.models_
                chosen[i] = float(np.mean([_lengthscale_of(m) for m in fits]))
                scale[i] = float(np.exp(np.mean([np.log(m.scale_) for m in fits])))
                elbo[i] = float(sum(m.elbo_ for m in fits))
                bound[i] = float(sum(sel["value"] for sel in search.selected_))
            else:
                best = None
                for model in models:
                    model.set_counts(X)
                    mean = model.mean()  # lazy refit, warm-started from the previous T
                    value = float(sum(m.elbo_ for m in model.models_))
                    if best is None or value > best[0]:
                        ls = float(np.mean([_lengthscale_of(m) for m in model.models_]))
                        bnd = float(sum(m.collapsed_bound() for m in model.models_))
                        best = (value, ls, mean, float(np.exp(np.mean(np.log(model.scale_)))), bnd,
                                model)
                assert best is not None  # at least one length scale candidate (check_config)
                elbo[i], chosen[i], est, scale[i], bound[i], picked = best
                if kind != "mean":
                    est = point_estimate(picked, kind, rng=streams.get(method))
            hell[method][i] = mean_hellinger(P, est)
        per_method["lengthscale"][method] = chosen
        per_method["scale"][method] = scale
        per_method["elbo"][method] = elbo
        per_method["bound"][method] = bound
    for method, alpha in (("dirichlet_uniform", config.alpha_uniform), ("dirichlet_sparse", config.alpha_sparse)):
        model = DirichletTransitionModel(S, A, alpha=alpha)
        for i, X in enumerate(counts):
            hell[method][i] = mean_hellinger(P, point_estimate(model.set_counts(X), kind))
    return SeedResult(curves={"hellinger": hell}, method_extras=per_method)


def _interp_crossing(ts: np.ndarray, curve: np.ndarray, level: float) -> float | None:
    """First T at which the (linearly interpolated) ``curve`` reaches ``level`` or goes below."""
    below = np.flatnonzero(curve <= level)
    if below.size == 0:
        return None
    i = int(below[0])
    if i == 0:
        return float(ts[0])
    t0, t1, c0, c1 = ts[i - 1], ts[i], curve[i - 1], curve[i]
    return float(t0 + (t1 - t0) * (c0 - level) / (c0 - c1))


def below_note(x: list[float], pg_absolute: np.ndarray, dirichlet_sparse: np.ndarray) -> str:
    """From which T on ``pg_absolute``'s mean error stays below ``dirichlet_sparse``'s (and where it first is).

    "From T" means below there and at every later T of the grid (a NaN is not below), like the
    PSRL experiments' :func:`~corrpriors.experiments._psrl.first_reach`; the first T below is
    given too when it is earlier.
    """
    from ._psrl import first_reach

    lead = np.asarray(dirichlet_sparse, dtype=float) - np.asarray(pg_absolute, dtype=float)   # > 0: below
    below = np.flatnonzero(lead > 0)
    stays = first_reach(x, lead, float(np.nextafter(0.0, 1.0)))    # >= the least positive float: > 0
    if not below.size:
        return "pg_absolute is never below dirichlet_sparse (on this grid)"
    first = num(float(x[below[0]]))
    if stays is None:
        return (f"pg_absolute is below dirichlet_sparse at some T (first at T={first}) "
                f"but not at the last, T={num(float(x[-1]))}")
    return (f"pg_absolute is below dirichlet_sparse from T={num(stays)} on"
            + ("" if stays == float(x[below[0]]) else f" (first below at T={first})"))


def summarise_extra(config: Config, results: Mapping[int, SeedResult], metrics: dict) -> dict:
    """Chosen length scales, the data-efficiency ratio and the claims check."""
    ts = np.asarray(config.transitions, dtype=float)
    methods = metrics["hellinger"]["methods"]
    mean = {m: np.asarray(methods[m]["mean"], dtype=float) for m in methods}
    std = {m: np.asarray(methods[m]["std"], dtype=float) for m in methods}
    extra: dict[str, Any] = {}

    # length scales and scales chosen along T (by the collapsed bound, or EM and the ELBO)
    chosen: dict[str, Any] = {}
    scales: dict[str, Any] = {}
    for method in CORRELATED:
        rows = [r.method_extras["lengthscale"][method] for r in results.values()
                if method in r.method_extras.get("lengthscale", {})]
        if rows:
            arr = np.round(np.stack(rows), 6)
            cands = sorted(set(arr.ravel().tolist()))
            frac = {f"{c:g}": np.mean(arr == c, axis=0).tolist() for c in cands}
            mode = [cands[int(np.argmax([np.sum(arr[:, j] == c) for c in cands]))] for j in range(arr.shape[1])]
            chosen[method] = {"mode": mode, "fraction": frac}
        rows = [r.method_extras["scale"][method] for r in results.values()
                if method in r.method_extras.get("scale", {})]
        if rows:
            arr = np.stack(rows)
            scales[method] = {"median": np.median(arr, axis=0).tolist(), "min": arr.min(axis=0).tolist(),
                              "max": arr.max(axis=0).tolist()}
    if chosen:
        extra["chosen_lengthscale"] = chosen
    if scales:
        extra["learned_scale"] = scales

    # data efficiency: the T at which each Dirichlet model first reaches pg's error at T_ref
    claims = []
    t_ref = 1000.0
    cited = []
    if "pg" in mean and ts[0] <= t_ref <= ts[-1]:
        level = float(np.interp(t_ref, ts, mean["pg"]))
        eff = {"reference": f"pg mean error at T={t_ref:g}", "level": level}
        cited.append(t_ref)
        for d in ("dirichlet_uniform", "dirichlet_sparse"):
            if d in mean:
                t_hit = _interp_crossing(ts, mean[d], level)
                eff[d] = (
                    {"T": t_hit, "ratio": t_hit / t_ref}
                    if t_hit is not None
                    else {"T": None, "ratio": None, "note": f"not reached by T={ts[-1]:g} (ratio > {ts[-1] / t_ref:g})"}
                )
        extra["data_efficiency"] = eff

    # the paper's claims, checked on the mean curves (T > 0 only: at T = 0 every model is its prior)
    pos = ts > 0
    dirs = [d for d in ("dirichlet_uniform", "dirichlet_sparse") if d in mean]
    unchecked = [] if dirs else ["claims not checked: no Dirichlet method in the results"]
    if dirs and not pos.any():
        unchecked.append("claims not checked: no T > 0 in transitions (at T = 0 every model is its prior)")
    if pos.any() and dirs:
        stack = np.stack([mean[d] for d in dirs])
        which = stack.argmin(axis=0)
        cols = np.arange(ts.size)
        best_dir = stack[which, cols]
        best_dir_std = np.stack([std[d] for d in dirs])[which, cols]
        ends = ts[pos][[0, -1]]
        cited += [float(t) for t in ends]
        for method in CORRELATED:
            if method not in mean:
                unchecked.append(f"{method} claims not checked: no {method} method in the results")
                continue
            gap = best_dir - mean[method]
            band = std[method] + best_dir_std
            clearly = bool(np.all(gap[pos] > band[pos]))
            ratio = mean[method][pos] / best_dir[pos]
            detail = (
                f"error of {method} vs the better Dirichlet at T={', '.join(f'{t:g}' for t in ends)}: "
                f"{num(mean[method][pos][0])} vs {num(best_dir[pos][0])} and "
                f"{num(mean[method][pos][-1])} vs {num(best_dir[pos][-1])}; "
                f"gap > (std sum) at {int(np.sum(gap[pos] > band[pos]))}/{int(pos.sum())} positive T; "
                f"error ratio {num(ratio.min())}..{num(ratio.max())}"
            )
            claims.append(Claim(
                f"{method} error clearly below both Dirichlet models at every T > 0",
                clearly, detail))
            n = int(pos.sum())
            third = max(1, n // 3)
            g = gap[pos]
            small, large = float(np.mean(g[:third])), float(np.mean(g[-third:]))
            claims.append(Claim(
                f"{method}'s advantage is largest for small T", bool(small > large and small > 0),
                f"mean gap to the better Dirichlet over the first third of T>0: {num(small)}, "
                f"over the last third: {num(large)}"))
    extra["claims"] = claims
    extra["table_x"] = sorted(set(cited))
    notes = []
    if "data_efficiency" in extra:
        eff = extra["data_efficiency"]
        parts = []
        for d in ("dirichlet_uniform", "dirichlet_sparse"):
            if d in eff:
                e = eff[d]
                parts.append(f"{d} reaches it at T={num(e['T'])} ({num(e['ratio'])}x)" if e["T"] is not None
                             else f"{d} not by T={num(float(ts[-1]))}")
        notes.append(f"pg's error at T={num(t_ref)} ({num(eff['level'])}): " + "; ".join(parts))
    if "pg_absolute" in mean and "dirichlet_sparse" in mean:
        notes.append(below_note(ts[pos].tolist(), mean["pg_absolute"][pos], mean["dirichlet_sparse"][pos]))
    extra["notes"] = notes + unchecked
    return extra


def figures(config: Config, results: Mapping[int, SeedResult], summary: dict) -> list[FigureSpec]:
    """Fig. 3a: Hellinger error against T with ±std bands (linear and log x)."""
    from ..plotting._curves import curves_figure, panels_note
    from ._shared import ESTIMATE_NAMES, estimate_title

    kind = str(config.point_estimate)
    fig = curves_figure(summary, "hellinger", x_label=X_LABEL, y_label=METRIC_LABELS["hellinger"],
                        environment=estimate_title(ENVIRONMENT, kind), log_panel=True)
    return [FigureSpec(f"{NAME}-hellinger", fig,
                       f"paper Fig. 3a: error of the estimated transition model ({ESTIMATE_NAMES[kind]}) "
                       "against the number of observed transitions, four models, mean ± std over seeds "
                       f"({panels_note(summary['x']['values'])})")]
