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
divided by the optimal policy's (J / J*, the paper's; 0 is not the random policy's score, unlike
:func:`corrpriors.mdp.normalized_return` and the Gymnasium ``normalized_return`` of
``corrpriors psrl``, (J - J_uniform) / (J* - J_uniform)); ``x`` = transitions so far
(0, 50, ..., 2,000). The claims' levels are 90% and 50% of the optimal return.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..runner._ranges import MAX_SAMPLES, MAX_STEPS, Each, Interval
from ..runner.protocol import FigureSpec, SeedResult
from ._psrl import (  # noqa: F401  (re-exported: the PSRL names of this experiment)
    GOAL_OF_OPTIMUM,
    METHODS,
    MODELS,
    VARIANTS,
    check_methods,
    check_psrl_config,
    claims_check,
    cost_summary,
    efficiency_summary,
    first_reach,
    make_belief,
    psrl_extra,
    psrl_ranges,
    resolved_selection,
    run_methods,
    split_method,
)
from ._shared import largest_distance, se_covariance  # noqa: F401  (se_covariance: benchmarks)

NAME = "psrl-grid"
DESCRIPTION = "PSRL on the 10x10 tunnel world: PG vs Dirichlet transition beliefs (Fig. 3b)"
X_NAME = "transitions"
METRICS = {"normalized_return": "higher"}
PAPER_SEEDS = 50
#: Raised when the code changes a configuration's numbers (``runner._config.results_revision``):
#: 1 (round 19) -- each method's random stream from its name (``_shared.method_stream``), not
#: its position in ``methods``, so that a subset of the methods gives the same numbers.
RESULTS_REVISION = 1
QUICK_SEEDS = 2
ENVIRONMENT = "PSRL, 10x10 tunnel world"
X_LABEL = "transitions so far (T)"
METRIC_LABELS = {"normalized_return": "expected discounted return / optimal return\n(mean over start states)"}


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
        Learn the kernel scale theta by (MAP-)EM at every refit (without ``selection``).
    selection : {"", "map-em", "fixed", "collapsed", "elbo"}
        "" (default): theta by MAP-EM ("map-em") with ``learn_scale``, else fixed ("fixed"); the
        value used is recorded in ``metrics.json``. "collapsed": theta per action by the collapsed bound over
        a log lattice (0.25 decades in [1e-2, 1e4]), warm-started from the previous refit's
        choice -- the selection of the system-identification experiment.
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
    selection: str = ""
    max_iter: int = 20
    tol: float = 1e-4
    discount: float = 0.0


#: The valid range of every setting (checked before any work; ``--list-settings`` shows it).
RANGES = {
    "n_transitions": Interval(int, 1, MAX_STEPS),
    "replan_every": Interval(int, 1, MAX_STEPS),
    "n_samples": Interval(int, 1, MAX_SAMPLES),
    "start": Each(Interval(int, 0, 9, note="a cell of the 10 x 10 grid"), min_len=2, max_len=2),
    **psrl_ranges(radius=Interval(int, 1, 9, note="the tunnel world is 10 x 10")),
}


def quick_config() -> Config:
    """Return a few hundred transitions, fewer posterior draws (about a minute for two seeds)."""
    return Config(n_transitions=400, n_samples=4)


def x_values(config: Config) -> list[float]:
    """Transitions so far at each evaluation: 0, replan_every, ..., n_transitions."""
    return [float(t) for t in range(0, config.n_transitions + 1, config.replan_every)]


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


def check_config(config: Config) -> None:
    """Raise ``ValueError`` naming the field of an invalid ``config``."""
    check_psrl_config(config, ("n_transitions", "replan_every", "n_samples", "radius", "max_iter"))
    if config.n_transitions % config.replan_every:
        raise ValueError(f"n_transitions: expected a multiple of replan_every = {config.replan_every}, "
                         f"got {config.n_transitions}")


def resolve_config(config: Config) -> Config:
    """Replace the sentinels of ``config`` by the values used.

    Length scale 0 -> the largest distance between two cells, discount 0 -> the environment's,
    selection "" -> "map-em" (``learn_scale``) or "fixed".
    """
    mdp = _environment()
    lengthscale = config.lengthscale
    if lengthscale <= 0:
        lengthscale = largest_distance(np.asarray(mdp.coordinates, dtype=float))
    discount = config.discount if config.discount > 0 else float(mdp.discount)
    selection = config.selection or resolved_selection(config.learn_scale)
    return dataclasses.replace(config, lengthscale=lengthscale, discount=discount, selection=selection)


def run_seed(config: Config, *, rng: np.random.Generator) -> SeedResult:
    """Run all configured policies for one seed; curves of shape (len(x_values),)."""
    from ..applications.transitions import displacement_category_map

    check_methods(config.methods)
    mdp = _environment()
    coords = np.asarray(mdp.coordinates, dtype=float)
    ell = config.lengthscale if config.lengthscale > 0 else largest_distance(coords)
    needs_pg = any(split_method(m)[0].startswith("pg") for m in config.methods)
    cov = se_covariance(coords, ell) if needs_pg else None
    cells = np.asarray(mdp.cells if getattr(mdp, "cells", None) is not None else coords)
    cmap = displacement_category_map(np.round(cells).astype(int), config.radius,
                                     boundary=config.boundary)
    out = run_methods(mdp, config, rng, _start_state(mdp, config.start), cov, cmap,
                      "normalized_return", config.n_transitions, normalise=True)
    return dataclasses.replace(out, extras={**out.extras, "lengthscale": np.array([ell])})


def summarise_extra(config: Config, results: Mapping[int, SeedResult], metrics: dict) -> dict:
    """Transitions to reach 90% (and 50%) of the optimal return per policy, timings, claims."""
    first = results[min(results)]
    return {
        "optimal_return": float(np.asarray(first.extras["optimal_return"])[0]),
        "lengthscale": float(np.asarray(first.extras["lengthscale"])[0]),
        **psrl_extra(x_values(config), results, "normalized_return", tuple(config.methods), low=0.0, high=1.0,
                     x_name="transitions", domain="tunnel world", x_max=float(config.n_transitions),
                     goal=GOAL_OF_OPTIMUM),
    }


def figures(config: Config, results: Mapping[int, SeedResult], summary: dict) -> list[FigureSpec]:
    """Fig. 3b: normalised return against transitions, one panel per PSRL variant."""
    from ..plotting._psrl import psrl_curves_figure

    fig = psrl_curves_figure(summary, "normalized_return", environment=ENVIRONMENT, x_label=X_LABEL,
                             y_label=METRIC_LABELS["normalized_return"], reference=1.0,
                             reference_label="optimal policy")
    return [FigureSpec(f"{NAME}-return", fig,
                       "paper Fig. 3b: return of the greedy policy (relative to the optimal one) against "
                       "transitions, four beliefs x two PSRL variants, mean ± std over seeds (bands clipped "
                       "at the optimal return, which no policy exceeds)")]
