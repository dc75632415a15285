r"""PSRL on the two-server batch queueing network (paper section 4.3.3, Fig. 4).

Per seed and per policy: ``corrpriors.envs.queueing_network()`` (B1 = B2 = 10, S = 121
queue states (b1, b2), two actions: serve queue 1 / serve queue 2, reward -(b1 + b2), known
to the agent). 100 learning episodes of 20 transitions, each continuing where the previous
one ended (the first from the empty network). After every episode the agent folds the
episode into its belief, replans and then acts greedily. The same eight policies as
:mod:`corrpriors.experiments.psrl_grid`; the relative encoding (``pg``) uses the changes of
the two queue lengths within ``|d|_inf <= radius`` plus an "other" category. The changes are
the *intended* moves ``(q1 - q2, q2 - q3)``, truncated at the buffers like the network's
:math:`(\cdot)_0^B` (``boundary="clip"``), so one move distribution can describe every state
and a transition observed at a boundary is censored (its move is imputed by EM). The earlier
treatment (``boundary="exclude"``: moves that leave the buffers are structural zeros,
boundary transitions counted as the truncated move they show) cannot represent the network;
its fit carried the empty queue's truncated moves into the interior and made PSRL bimodal
(issue 16, ``benchmarks/psrl_bimodality/REPORT.md``).

Kernel: squared exponential on the Euclidean distances between the queue states (b1, b2)
normalised to [0, 1] (divided by the buffer sizes), length scale sqrt(0.5).

The window ``radius`` = 5 leaves 2.9% of the true next-state mass outside on average
(radius 4: 7.9%; in a 3-seed check radius 4 gave clearly worse PG policies). The other
model settings are those of :mod:`corrpriors.experiments.psrl_grid`.

Timing: about 16 CPU seconds per seed for all eight policies; the paper's 100 seeds took
14 minutes on two idle cores.

Metric ``expected_return`` (higher is better): the exact expected discounted return of the
current greedy policy under the true model, averaged over all start states (the paper
estimated it with 1,000-step rollouts from every state); the optimal policy's value is
reported as a reference line. ``x`` = episodes (0 = the prior's policy, ..., 100). The claims'
levels are 90% and 50% of the way from the uniformly random policy's return (-96.2,
``extra.uniform_return``) to the optimal one (-75.8): -77.9 and -86.0.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import numpy as np

from ..runner._ranges import LENGTHSCALE, MAX_SAMPLES, MAX_STEPS, Interval
from ..runner.protocol import FigureSpec, SeedResult
from ._psrl import (  # noqa: F401  (re-exported: the PSRL names of this experiment)
    GOAL_OF_GAP,
    METHODS,
    check_methods,
    check_psrl_config,
    psrl_extra,
    psrl_ranges,
    resolved_selection,
    run_methods,
    split_method,
)
from ._shared import se_covariance

NAME = "psrl-queueing"
DESCRIPTION = "PSRL on the 2-server batch queueing network: PG vs Dirichlet beliefs (Fig. 4)"
X_NAME = "episodes"
METRICS = {"expected_return": "higher"}
PAPER_SEEDS = 100
#: Raised when the code changes a configuration's numbers (``runner._config.results_revision``):
#: 1 (round 19) -- each method's random stream from its name (``_shared.method_stream``), not
#: its position in ``methods``, so that a subset of the methods gives the same numbers.
RESULTS_REVISION = 1
QUICK_SEEDS = 2
ENVIRONMENT = "PSRL, 2-server batch queueing network"
X_LABEL = "learning episodes (20 transitions each)"
METRIC_LABELS = {"expected_return": "expected discounted return\n(mean over start states)"}


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of the queueing PSRL experiment (defaults: the paper's).

    Attributes
    ----------
    n_episodes : int
        Learning episodes.
    episode_length : int
        Transitions per episode (one posterior update and replan after each).
    n_samples : int
        Posterior draws per replan of the ``sampling`` variant.
    methods : tuple of str
        Policies to run (subset of ``psrl_grid.METHODS``).
    alpha_uniform, alpha_sparse : float
        Concentrations of the two Dirichlet baselines.
    lengthscale : float
        Kernel length scale on the normalised queue states.
    radius : int
        Window of queue-length changes of the relative encoding (``pg``).
    boundary : {"clip", "exclude", "stay"}
        What a change that leaves the buffers means to the relative encoding
        (:func:`corrpriors.applications.transitions.displacement_category_map`); "clip" is
        the network's truncation.
    learn_scale : bool
        Learn the kernel scale theta by (MAP-)EM at every refit (without ``selection``).
    selection : {"", "map-em", "fixed", "collapsed", "elbo"}
        "" (default): theta by MAP-EM ("map-em") with ``learn_scale``, else fixed ("fixed"); the
        value used is recorded in ``metrics.json``. "collapsed": theta per action by the collapsed bound over
        a log lattice (0.25 decades in [1e-2, 1e4]), warm-started from the previous refit's
        choice -- the selection of the system-identification experiment.
    max_iter, tol : int, float
        Variational fit settings per refit. Refits are warm-started, so the cap makes the
        variational EM an anytime optimisation that continues across refits.
    discount : float
        Discount of the return; 0 = the environment's.
    """

    n_episodes: int = 100
    episode_length: int = 20
    n_samples: int = 10
    methods: tuple = METHODS
    alpha_uniform: float = 1.0
    alpha_sparse: float = 1e-3
    lengthscale: float = math.sqrt(0.5)
    radius: int = 5
    boundary: str = "clip"
    learn_scale: bool = True
    selection: str = ""
    max_iter: int = 20
    tol: float = 1e-4
    discount: float = 0.0

    @property
    def replan_every(self) -> int:
        """Transitions between replans (= the episode length)."""
        return self.episode_length


#: The valid range of every setting (checked before any work; ``--list-settings`` shows it).
RANGES = {
    "n_episodes": Interval(int, 1, 100_000),
    "episode_length": Interval(int, 1, MAX_STEPS),
    "n_samples": Interval(int, 1, MAX_SAMPLES),
    **psrl_ranges(radius=Interval(int, 1, 10, note="the buffers hold 0 to 10 jobs"), lengthscale=LENGTHSCALE),
}


def quick_config() -> Config:
    """Twenty episodes, fewer posterior draws (about a minute for two seeds)."""
    return Config(n_episodes=20, n_samples=4)


def x_values(config: Config) -> list[float]:
    """Episodes so far at each evaluation: 0, 1, ..., n_episodes."""
    return [float(e) for e in range(config.n_episodes + 1)]


def _environment():
    from ..envs import queueing_network

    return queueing_network()


def check_config(config: Config) -> None:
    """Raise ``ValueError`` naming the field of an invalid ``config``."""
    check_psrl_config(config, ("n_episodes", "episode_length", "n_samples", "radius", "max_iter"))


def resolve_config(config: Config) -> Config:
    """``config`` with a discount of 0 replaced by the environment's and selection "" by "map-em" or "fixed"."""
    discount = config.discount if config.discount > 0 else float(_environment().discount)
    return dataclasses.replace(config, discount=discount,
                               selection=config.selection or resolved_selection(config.learn_scale))


def category_map(mdp, config: Config):
    """Build the relative encoding of the ``pg`` beliefs (queue-length changes in the window)."""
    from ..applications.transitions import displacement_category_map

    coords = np.round(np.asarray(mdp.coordinates)).astype(int)
    return displacement_category_map(coords, config.radius, boundary=config.boundary)


def run_seed(config: Config, *, rng: np.random.Generator) -> SeedResult:
    """Run all configured policies for one seed; curves of shape (n_episodes + 1,)."""
    check_methods(config.methods)
    mdp = _environment()
    coords = np.asarray(mdp.coordinates, dtype=float)
    span = coords.max(axis=0) - coords.min(axis=0)
    normalised = (coords - coords.min(axis=0)) / np.where(span > 0, span, 1.0)
    needs_pg = any(split_method(m)[0].startswith("pg") for m in config.methods)
    cov = se_covariance(normalised, config.lengthscale) if needs_pg else None
    cmap = category_map(mdp, config)
    empty = int(np.flatnonzero((coords == coords.min(axis=0)).all(axis=1))[0])
    return run_methods(mdp, config, rng, empty, cov, cmap, "expected_return",
                       config.n_episodes * config.episode_length, normalise=False)


def uniform_return(config: Config) -> float:
    """The expected return of the uniformly random policy on the true network, as the curves score policies.

    Averaged over all start states with the discount ``config.discount`` (0: the environment's),
    like :func:`~corrpriors.experiments._psrl.run_methods` scores the greedy policies.
    """
    from ..mdp import TabularMDP
    from ..mdp.metrics import return_range

    mdp = _environment()
    discount = config.discount if config.discount > 0 else mdp.discount
    return return_range(TabularMDP(mdp.transitions, mdp.reward_matrix, discount))[0]


def summarise_extra(config: Config, results: Mapping[int, SeedResult], metrics: dict) -> dict:
    """Optimal value, episodes to close 90% (and 50%) of the gap to it per policy, timings, claims.

    The gap is measured from the uniformly random policy's return (:func:`uniform_return`), a
    property of the network alone: the levels and the verdicts do not depend on which other
    methods ran (they did when the gap started at the worst method's return at episode 0).
    """
    optimal = float(np.asarray(results[min(results)].extras["optimal_return"])[0])
    uniform = uniform_return(config)
    return {
        "optimal_return": optimal,
        "uniform_return": uniform,
        **psrl_extra(x_values(config), results, "expected_return", tuple(config.methods), low=uniform,
                     high=optimal, x_name="episodes", domain="queueing network", x_max=float(config.n_episodes),
                     goal=GOAL_OF_GAP, low_name="the uniform random policy's return"),
    }


def figures(config: Config, results: Mapping[int, SeedResult], summary: dict) -> list[FigureSpec]:
    """Fig. 4: expected return against episodes, one panel per PSRL variant, optimum marked."""
    from ..plotting._psrl import psrl_curves_figure

    optimal = summary.get("extra", {}).get("optimal_return")
    fig = psrl_curves_figure(summary, "expected_return", environment=ENVIRONMENT, x_label=X_LABEL,
                             y_label=METRIC_LABELS["expected_return"], reference=optimal,
                             reference_label="optimal policy", integer_x=True)
    return [FigureSpec(f"{NAME}-return", fig,
                       "paper Fig. 4: expected discounted return (reward = minus the queue lengths) of the greedy "
                       "policy against learning episodes, four beliefs x two PSRL variants, mean ± std over "
                       "seeds (bands clipped at the optimal return, which no policy exceeds); dashed black: "
                       "the optimal policy")]
