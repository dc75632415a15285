r"""Transfer between related tasks (the paper's named extension; not one of its experiments).

The paper closes with "knowledge transfer between related tasks ... left for future work". This
experiment measures it on a family of windy tunnel worlds (:mod:`corrpriors.envs.task_family`):
10 x 10 grids whose moves share the form of their motion noise and differ in hidden parameters
(a heading offset, the drive and damping of the noise, a smooth wind field), with a
``relatedness`` :math:`r \in [0, 1]` that sets how close the source tasks' parameters are to the
target's (:math:`r = 1`: the same task; :math:`r = 0`: parameters drawn independently, so
negative transfer is measured -- the sources still share the grid's edges, the goal's jump and
the form of the motion noise; ``relabel_sources=True`` permutes every source's cells, so the
sources share nothing with the target at all). ``family="lake"`` measures it on a second family
of another kind: slippery FrozenLake-like lakes whose hidden parameters are the slip, the
directions the actions move in and a layout of holes that differs cell by cell
(:func:`~corrpriors.envs.lake_task_family`), where neighbouring states do not share dynamics.

Panel 1 (``hellinger``): ``n_sources`` source tasks with ``source_transitions`` transitions each
and the target with a growing budget of transitions; every transition is an independent draw at
a uniformly random state and action (a simulator that can be reset anywhere: the walk of the
system-identification experiment can stay in a wind-trapped corner). The error is the Hellinger
distance between the target's true and estimated :math:`P(s' \mid s, a)`, averaged over states
and actions. Methods (names are part of the ``metrics.json`` contract):

``pg_transfer``
    :class:`~corrpriors.applications.MultiTaskTransitionModel`: the target's prior is centred on
    a model of the sources' pooled data by a similarity :math:`\rho` chosen by the target's
    leave-one-out predictive probability and a prior probability ``prior_related`` that the
    tasks are related -- the best similarity if it beats :math:`\rho = 0` by more than one
    standard error of their difference, else 0 (``similarity_rule="best"``: the best;
    ``similarity_criterion="cv"``: by two-fold cross-validation, the rule before round 15;
    ``"evidence"``: by the collapsed bound).
``pg``
    The single-task model on the target's data only
    (:meth:`~corrpriors.applications.CorrelatedTransitionModel.for_mdp`: relative moves with
    "stay" boundaries, squared-exponential kernel of length scale ``lengthscale``, scale by the
    collapsed bound).
``pg_pooled``
    The same model on the sources' and the target's data summed, as if they were one task.
``dirichlet_sparse``
    Independent Dirichlet(``alpha_sparse``) per (state, action) on the target's data.

Panel 2 (PSRL over a sequence of tasks, in ``extras``): ``psrl_tasks`` tasks of a second family
draw met one after the other; on each the agent starts from the start cell and runs
``psrl_transitions`` transitions of PSRL (``psrl_variant``, replanning every ``replan_every``);
``pg_transfer`` keeps one multi-task belief over the sequence (each task borrows from the ones
before), ``pg_pooled`` one belief fed with every task's data, ``pg`` and ``dirichlet_sparse`` a
fresh belief per task. Every method meets a task with the same random stream (common random
numbers): on the first task, where nothing can be borrowed, ``pg_transfer``, ``pg_pooled`` and
``pg`` hold the same belief and get the same returns, and on later tasks the differences between
methods are their beliefs', not their streams'. Reported: the normalised return (expected
discounted return of the greedy policy averaged over start states, divided by the optimal one)
after the first ``psrl_eval`` transitions of every task, and its mean over the task's run.
"""

from __future__ import annotations

import dataclasses
import numbers
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..applications.multitask import MAX_CV_FOLDS
from ..runner._ranges import (
    CONCENTRATION,
    ITERATIONS,
    MAX_SAMPLES,
    MAX_STEPS,
    NUMBER_TEXT,
    Boolean,
    Each,
    Interval,
    Options,
    OptionsOrNumber,
    check_ranges,
)
from ..runner._ranges import (
    TOLERANCE as FIT_TOLERANCE,
)
from ..runner.protocol import Claim, FigureSpec, SeedResult, std_over_seeds

NAME = "transfer"
DESCRIPTION = ("transfer between related windy tunnel worlds (or slippery lakes): target-task Hellinger "
               "error against target transitions; PSRL over a sequence of tasks")
X_NAME = "target_transitions"
METRICS = {"hellinger": "lower"}
PAPER_SEEDS = 20
QUICK_SEEDS = 2
DEFAULT_LABEL = "default"
ENVIRONMENT = "Transfer between related grid worlds (windy tunnel worlds or slippery lakes)"
#: The figures' title per task family.
FAMILY_NAMES = {"windy": "windy tunnel worlds", "lake": "slippery lakes"}
X_LABEL = "transitions observed in the target task"
METRIC_LABELS = {"hellinger": "Hellinger distance to the target's true P(s' | s, a)\n"
                              "(mean over states and actions)"}
METHODS = ("pg_transfer", "pg", "pg_pooled", "dirichlet_sparse")
#: Relative tolerance of the "no worse than pg" claims (the issue's 5 %).
TOLERANCE = 0.05


@dataclasses.dataclass(frozen=True)
class Config:
    r"""Settings of the transfer experiment.

    Attributes
    ----------
    relatedness : float
        :math:`r \in [0, 1]` of the task family.
    family : {"windy", "lake"}
        The task family: windy tunnel worlds (:func:`~corrpriors.envs.windy_task_family`) or
        slippery lakes with holes (:func:`~corrpriors.envs.lake_task_family`).
    relabel_sources : bool
        Relabel every source task's cells by a random permutation (panel 1 only): sources that
        share nothing with the target, not even the grid's edges, the goal or the form of the
        motion noise (:mod:`corrpriors.envs.task_family`); with ``relatedness=0`` the family
        in which the learned similarity must go to zero.
    n_sources : int
        Source tasks of panel 1.
    source_transitions : int
        Transitions observed in every source task.
    budgets : tuple of int
        Target transitions (the x grid), increasing and positive.
    shape : tuple of int
        Grid of every task.
    wind_amplitude, wind_lengthscale : float
        Standard deviation (cells) and length scale (cells) of the wind fields (``"windy"``).
    hole_density : float
        Probability that a cell is a hole (``"lake"``).
    layer : bool
        Give every PG model (``pg_transfer``, ``pg``, ``pg_pooled``) the per-(state, action)
        Dirichlet layer of :meth:`~corrpriors.applications.CorrelatedTransitionModel.for_mdp` at
        its defaults (round 13); off (the default): the plain correlated model, the paper's.
    lengthscale : float
        Length scale (cells) of the squared-exponential kernel of every PG model.
    scale_step : float
        Spacing (decades) of the scale lattices of every PG model.
    prior_related : float
        Prior probability that the target is related to the sources (``pg_transfer``); 0 stands
        for a uniform prior over the similarity lattice.
    similarity_criterion : {"loo", "cv", "evidence"}
        How ``pg_transfer`` compares similarities (leave-one-out or two-fold cross-validated
        predictive probability, or the collapsed bound;
        :class:`~corrpriors.applications.TransferSearch`).
    similarity_rule : {"one_se", "best", "average"}
        How the scores pick the similarity: the best one if it beats
        :math:`\rho = 0` by more than one standard error of their difference (else 0), the
        best (:class:`~corrpriors.applications.TransferSearch`), or no choice: the mixture over
        the similarities evaluated, weighted by their scores
        (:func:`~corrpriors.applications.multitask.average_weights`; not with ``layer``).
    similarity : str
        ``"learned"`` (the default): ``pg_transfer`` chooses its similarity; or a value of the
        lattice :data:`~corrpriors.applications.multitask.SIMILARITY_GRID` (written as a
        number): ``pg_transfer`` keeps it (no search; ``prior_related``,
        ``similarity_criterion`` and ``similarity_rule`` unused, so refused unless at their
        defaults; recorded as the lattice value's text, ``"-0.0"`` as ``"0"``) -- the error
        mapped against
        :math:`\rho` (``benchmarks/transfer_oracle.py``).
    cv_folds : int
        Folds of ``pg_transfer``'s cross-validation (``similarity_criterion="cv"``).
    cv_scale : {"conditional", "climb"}
        With ``similarity_criterion="cv"``, the scale of the cross-validation's fits: the joint
        model's conditional scale (one fit per fold, action and similarity; round 7) or every
        fold's own climb (the rule before; :data:`~corrpriors.applications.multitask.CV_SCALES`).
    source_impute_rounds : int
        Rounds of imputing the censored counts in the fits of ``pg_transfer``'s sources (1 since
        round 7; 3, the beliefs' own, before).
    full_scale : {"conditional", "climb"}
        The scale of ``pg_transfer``'s full-data fits at a similarity above 0: the joint model's
        conditional scale (since round 12) or the collapsed bound's climb (the rule before;
        :data:`~corrpriors.applications.multitask.FULL_SCALES`).
    alpha_sparse : float
        Concentration of ``dirichlet_sparse``.
    max_iter, tol : int, float
        CAVI settings of every PG fit.
    psrl_tasks : int
        Tasks in the PSRL sequence of panel 2 (0: no panel 2; else at least 2). Every method meets
        task j with the same random stream (common random numbers).
    psrl_transitions : int
        Transitions of PSRL on every task of the sequence.
    psrl_eval : int
        The return is scored after this many transitions of every task (a multiple of
        ``replan_every``).
    replan_every : int
        Transitions between two replans of the PSRL agents.
    psrl_variant : {"mean", "sampling"}
        PSRL variant: greedy on the optimal Q of the posterior-mean model, or on the average
        optimal Q of ``psrl_samples`` posterior draws (named in the panel's title, the notes and
        ``metrics.json``'s ``psrl_sequence`` block).
    psrl_samples : int
        Posterior draws per replan of the ``"sampling"`` variant (unused by ``"mean"``).
    """

    relatedness: float = 0.8
    family: str = "windy"
    relabel_sources: bool = False
    n_sources: int = 3
    source_transitions: int = 2000
    budgets: tuple = (25, 50, 100, 200, 400, 800)
    shape: tuple = (10, 10)
    wind_amplitude: float = 0.5
    wind_lengthscale: float = 3.0
    hole_density: float = 0.1
    layer: bool = False
    lengthscale: float = 2.0
    scale_step: float = 0.25
    prior_related: float = 0.5
    similarity_criterion: str = "loo"
    similarity_rule: str = "one_se"
    similarity: str = "learned"
    cv_folds: int = 2
    cv_scale: str = "conditional"
    source_impute_rounds: int = 1
    full_scale: str = "conditional"
    alpha_sparse: float = 1e-3
    max_iter: int = 300
    tol: float = 1e-6
    psrl_tasks: int = 4
    psrl_transitions: int = 300
    psrl_eval: int = 100
    replan_every: int = 50
    psrl_variant: str = "mean"
    psrl_samples: int = 5

    def __post_init__(self) -> None:
        # a fixed similarity is recorded and hashed as its lattice value's text: "0", "0.0" and
        # "-0.0" are one setting (one folder, one label)
        object.__setattr__(self, "similarity", _canonical_similarity(self.similarity))


def _canonical_similarity(value: Any) -> Any:
    """``value`` as the text of its lattice value (``"-0.0"`` -> ``"0"``, ``0.5`` -> ``"0.5"``),
    if it is a number of :data:`~corrpriors.applications.multitask.SIMILARITY_GRID` (a number or
    ASCII text); else unchanged (``"learned"``, or a value :func:`check_config` refuses).
    """
    from .._methods import setting_text
    from ..applications.multitask import SIMILARITY_GRID

    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str) and NUMBER_TEXT.fullmatch(value):
        number = float(value)
    else:
        return value
    if number not in SIMILARITY_GRID:
        return value
    return setting_text(SIMILARITY_GRID[SIMILARITY_GRID.index(number)])



#: Raised when the code changes a configuration's numbers (``runner._config.results_revision``):
#: 1 (round 17) -- common random numbers in the PSRL panel, and ``scale_step`` reaching the
#: transfer search (the ``--quick`` numbers).
RESULTS_REVISION = 1


#: The valid range of every setting (checked before any work; ``--list-settings`` shows it).
RANGES = {
    "relatedness": Interval(float, 0.0, 1.0),
    "family": Options("windy", "lake"),
    "relabel_sources": Boolean(),
    "n_sources": Interval(int, 1, 20, note="the sources' data are pooled into one source model per task"),
    "source_transitions": Interval(int, 1, MAX_STEPS),
    "budgets": Each(Interval(int, 1, MAX_STEPS), min_len=1, increasing=True),
    "shape": Each(Interval(int, 3, 40, note="a dense S x S prior per task, S = rows x cols; a 40x40 "
                                            "seed needs about 19 GiB (checked)"), min_len=2, max_len=2),
    "wind_amplitude": Interval(float, 0.0, 100.0, note="cells"),
    "wind_lengthscale": Interval(float, 0.0, 1e6, closed="right", note="cells"),
    "hole_density": Interval(float, 0.0, 0.3, note="lake: holes are redrawn until start and goal are joined"),
    "layer": Boolean(),
    "lengthscale": Interval(float, 0.0, 1e6, closed="right", note="cells"),
    "scale_step": Interval(float, 0.0, 10.0, closed="right", note="decades"),
    "prior_related": Interval(float, 0.0, 1.0, closed="left", note="0 = a uniform prior over the similarities"),
    "similarity_criterion": Options("loo", "cv", "evidence"),
    "similarity_rule": Options("one_se", "best", "average"),
    "similarity": OptionsOrNumber(("learned",), Interval(float, 0.0, 1.0, closed="left",
                                                         note="a value of the similarity lattice")),
    "cv_folds": Interval(int, 2, MAX_CV_FOLDS,
                         note="each fold adds a fit (cv_scale=climb: a climb) per action and similarity"),
    "cv_scale": Options("conditional", "climb"),
    "source_impute_rounds": Interval(int, 1, 100),
    "full_scale": Options("conditional", "climb"),
    "alpha_sparse": CONCENTRATION,
    "max_iter": ITERATIONS,
    "tol": FIT_TOLERANCE,
    "psrl_tasks": Interval(int, 0, 100, note="0 = no PSRL panel, else at least 2"),
    "psrl_transitions": Interval(int, 1, MAX_STEPS),
    "psrl_eval": Interval(int, 1, MAX_STEPS),
    "replan_every": Interval(int, 1, MAX_STEPS),
    "psrl_variant": Options("mean", "sampling"),
    "psrl_samples": Interval(int, 1, MAX_SAMPLES),
}

def quick_config() -> Config:
    """Small settings: a 6 x 6 grid, fewer data, a short PSRL sequence (seconds per seed)."""
    return Config(shape=(6, 6), n_sources=2, source_transitions=600, budgets=(20, 80, 320),
                  scale_step=0.5, psrl_tasks=2, psrl_transitions=100, psrl_eval=50,
                  replan_every=50, max_iter=100)


def x_values(config: Config) -> list[float]:
    """Return the target budgets."""
    return [float(t) for t in config.budgets]


#: Peak memory of one seed per entry of a dense (S, S) matrix, in units of 8 bytes, with a
#: scale lattice finer than half a decade and coarser (the experiment's default 0.25 and
#: ``--quick``'s 0.5): every fit a transfer search visits -- per similarity, scale and action --
#: is cached with its dense factors. Measured (round 17, peak RSS of ``run_seed``, one BLAS
#: thread, windy and lakes): 641-652 at 576-900 states with 0.25, 279-337 at 900-1,600 with 0.5.
SEED_SS_ENTRIES = {"fine": 700, "coarse": 350}


def seed_memory(config: Config) -> float:
    """Estimated peak bytes of one seed of ``config`` (:data:`SEED_SS_ENTRIES`; the PSRL
    sequence holds a transfer belief per task, each with its cache: measured peaks of 1.3 and
    1.8 times panel 1's with 4 and 8 tasks, so 0.35 per task).
    """
    n_states = int(config.shape[0]) * int(config.shape[1])
    per_entry = SEED_SS_ENTRIES["fine" if config.scale_step < 0.5 else "coarse"]
    sequence = max(1.0, 0.35 * config.psrl_tasks)
    data = 24.0 * (max(config.budgets) + config.n_sources * config.source_transitions)
    return 250 * 2**20 + 8.0 * per_entry * n_states**2 * sequence + data


def check_config(config: Config) -> None:
    """Raise ``ValueError`` naming the field of an invalid ``config`` (:data:`RANGES`, then the
    settings that constrain each other, then :func:`seed_memory` against the memory this process
    may use).
    """
    from types import SimpleNamespace

    from .._memory import check_memory
    from .._methods import setting_text
    from ..applications.multitask import SIMILARITY_GRID, _check_fixed_similarity

    check_ranges(SimpleNamespace(RANGES=RANGES), config)   # (number text in ASCII digits only)
    if config.similarity != "learned":   # (a number, or one written as text: RANGES checked it)
        _check_fixed_similarity(float(config.similarity), SIMILARITY_GRID, "similarity", "'learned'")
        default = Config()   # the settings of the search a fixed similarity skips: unused, so not recorded
        unused = [name for name in ("similarity_rule", "similarity_criterion", "prior_related")
                  if getattr(config, name) != getattr(default, name)]
        if unused:
            raise ValueError(f"similarity, {', '.join(unused)}: a fixed similarity is not chosen, so "
                             + ", ".join(f"{n}={setting_text(getattr(config, n))}" for n in unused)
                             + " would be unused (and recorded as if it mattered); leave "
                             + ", ".join(f"{n}={setting_text(getattr(default, n))}" for n in unused)
                             + " or set similarity=learned")
    if config.similarity_criterion != "cv":   # the cross-validation's settings, without it
        unused = [name for name in ("cv_folds", "cv_scale") if getattr(config, name) != getattr(Config(), name)]
        if unused:
            raise ValueError(f"{', '.join(unused)}: only used with similarity_criterion=cv, so "
                             + ", ".join(f"{n}={setting_text(getattr(config, n))}" for n in unused)
                             + f" would be unused with similarity_criterion={config.similarity_criterion} "
                             "(and recorded as if it mattered); leave "
                             + ", ".join(f"{n}={setting_text(getattr(Config(), n))}" for n in unused)
                             + " or set similarity_criterion=cv")
    if config.layer and config.similarity_rule == "average":
        raise ValueError("similarity_rule, layer: 'average' mixes transfer fits without the per-pair "
                         "layer; set layer=false or similarity_rule=one_se")
    if config.psrl_tasks:
        if config.psrl_tasks == 1:
            raise ValueError("psrl_tasks: expected 0 (no PSRL panel) or at least 2 (the first task of "
                             "the sequence has nothing to borrow from), got 1")
        if config.psrl_transitions % config.replan_every or config.psrl_eval % config.replan_every:
            raise ValueError(f"psrl_transitions, psrl_eval: expected multiples of replan_every = "
                             f"{config.replan_every}, got {config.psrl_transitions} and {config.psrl_eval}")
        if config.psrl_eval > config.psrl_transitions:
            raise ValueError(f"psrl_eval: expected at most psrl_transitions = {config.psrl_transitions}, "
                             f"got {config.psrl_eval}")
    _check_lattice(config)
    rows, cols = config.shape
    check_memory(seed_memory(config), f"shape: a seed of transfer on {rows}x{cols} grids ({rows * cols:,} "
                 f"states, scale_step {config.scale_step:g}, psrl_tasks {config.psrl_tasks})",
                 "use a smaller shape, a coarser scale_step or fewer psrl_tasks (every parallel job "
                 "holds one seed)")


def _check_lattice(config: Config) -> None:
    """Refuse a ``scale_step`` whose lattice over the models' scale range (their default, which
    :func:`_belief_options` leaves) is longer than a :class:`~corrpriors.core.selection.ScaleSearch`
    takes, before any seed starts (the search itself would refuse it inside every seed).
    """
    import inspect

    from ..applications import CorrelatedTransitionModel, MultiTaskTransitionModel
    from ..core.selection import check_lattice_points

    for model in (CorrelatedTransitionModel, MultiTaskTransitionModel):
        lo, hi = inspect.signature(model).parameters["scale_range"].default
        check_lattice_points(lo, hi, float(config.scale_step), step_name="scale_step",
                             range_name=f"the models' scale range [{lo:g}, {hi:g}]")


def resolve_config(config: Config) -> Config:
    """Return ``config`` (it has no sentinels)."""
    return config


# ----------------------------------------------------------------------------- helpers
def _family(config: Config, n_sources: int, rng: np.random.Generator, relabel: bool = False) -> list:
    from ..envs import lake_task_family, windy_task_family

    if config.family == "lake":
        mdps, _ = lake_task_family(config.relatedness, n_sources, rng=rng, shape=tuple(config.shape),
                                   hole_density=config.hole_density, relabel_sources=relabel)
    else:
        mdps, _ = windy_task_family(config.relatedness, n_sources, rng=rng, shape=tuple(config.shape),
                                    wind_amplitude=config.wind_amplitude,
                                    wind_lengthscale=config.wind_lengthscale, relabel_sources=relabel)
    return mdps


def _similarity_how(config: Config) -> str:
    r"""How ``pg_transfer``'s reported similarity came about: ``"learned"`` (chosen from the data),
    ``"fixed"`` (``similarity=<ρ>``) or ``"averaged"`` (``similarity_rule="average"``: the mean
    :math:`\rho` of the mixture's weights).
    """
    if config.similarity != "learned":
        return "fixed"
    return "averaged" if config.similarity_rule == "average" else "learned"


def _similarity_words(config: Config) -> str:
    """What the notes and the figure's caption call ``pg_transfer``'s reported similarity."""
    from .._methods import setting_text

    return {"learned": "learned similarity of pg_transfer",
            "fixed": f"similarity of pg_transfer, fixed at {setting_text(config.similarity)} (not learned)",
            "averaged": "mean similarity of pg_transfer's mixture over the similarities (weights learned "
                        "from the data)"}[_similarity_how(config)]


def _psrl_policy(config: Config) -> str:
    """What panel 2's PSRL agents act on at every replan (``psrl_variant``, ``psrl_samples``).

    ``"greedy on the optimal Q of the posterior-mean model"`` or ``"greedy on the average optimal
    Q of 5 posterior draws"`` (:class:`~corrpriors.applications.PSRLAgent`).
    """
    from .._methods import VARIANTS

    if config.psrl_variant == "mean":
        return VARIANTS["mean"].description
    n = int(config.psrl_samples)
    return f"greedy on the average optimal Q of {n} posterior draw{'s' if n != 1 else ''}"


def _title(config: Config) -> str:
    rows, cols = config.shape
    layer = ", per-pair layer" if config.layer else ""
    return f"Transfer, {rows}x{cols} {FAMILY_NAMES[config.family]}{layer}, relatedness {config.relatedness:g}"


#: Entries of the next-state CDFs :func:`uniform_transitions` holds at once (8 MiB of them).
_CHUNK_ENTRIES = 2**20


def uniform_transitions(mdp: Any, n: int, *, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """``n`` transitions from uniformly random states and actions (memory O(n + S) per chunk
    of the next-state CDFs, not O(n S)).

    Returns
    -------
    (states, actions, next_states) : ndarrays of shape (n,)
    """
    from .._random import inverse_cdf

    P = np.asarray(mdp.transitions)
    s = rng.integers(P.shape[0], size=n)
    a = rng.integers(P.shape[1], size=n)
    u = rng.random(n)
    s2 = np.empty(n, dtype=np.int64)
    chunk = max(1, _CHUNK_ENTRIES // P.shape[2])   # the rows' CDFs, (chunk, S) at a time
    for i in range(0, n, chunk):
        sl = slice(i, i + chunk)
        s2[sl] = inverse_cdf(np.cumsum(P[s[sl], a[sl]], axis=1), u[sl])
    return s, a, s2


def _belief_options(config: Config) -> dict:
    options = dict(lengthscale=config.lengthscale, prior="dense", scale_step=config.scale_step,
                   max_iter=config.max_iter, tol=config.tol)
    if not config.layer:   # the plain correlated model (no per-pair Dirichlet layer)
        options.update(concentration=None, contamination_prior=None, distinct_prior=None)
    return options


def _transfer_model(config: Config, mdps: list, **options: Any) -> Any:
    """``pg_transfer``'s model of ``mdps`` (``options``: more beliefs' options, e.g. ``draw_method``)."""
    from ..applications import MultiTaskTransitionModel

    prior = None if config.prior_related == 0 else config.prior_related
    fixed = None if config.similarity == "learned" else float(config.similarity)
    return MultiTaskTransitionModel.for_mdps(mdps, prior_related=prior, fixed_similarity=fixed,
                                             similarity_criterion=config.similarity_criterion,
                                             similarity_rule=config.similarity_rule,
                                             cv_folds=config.cv_folds, cv_scale=config.cv_scale,
                                             source_impute_rounds=config.source_impute_rounds,
                                             full_scale=config.full_scale,
                                             **_belief_options(config), **options)


def _single_model(config: Config, mdp: Any) -> Any:
    from ..applications import CorrelatedTransitionModel

    return CorrelatedTransitionModel.for_mdp(mdp, **_belief_options(config))


# ----------------------------------------------------------------------------- panel 1
def _identification(config: Config, mdps: list, rng: np.random.Generator) -> tuple[dict, dict]:
    """Hellinger error of every method at every budget; per-method extras."""
    from ..applications import DirichletTransitionModel
    from ..mdp import mean_hellinger, transition_counts

    target = mdps[-1]
    P = np.asarray(target.transitions)
    S, A = target.n_states, target.n_actions
    src_rng, tgt_rng = rng.spawn(2)
    src_counts = [transition_counts(uniform_transitions(m, config.source_transitions, rng=g), S, A)
                  for m, g in zip(mdps[:-1], src_rng.spawn(len(mdps) - 1))]
    s, a, s2 = uniform_transitions(target, int(config.budgets[-1]), rng=tgt_rng)
    hell = {m: np.empty(len(config.budgets)) for m in METHODS}
    cpu = {m: np.empty(len(config.budgets)) for m in METHODS}
    similarity = np.empty(len(config.budgets))
    pair_weight = np.empty(len(config.budgets))
    transfer = _transfer_model(config, mdps)
    pg, pooled = _single_model(config, target), _single_model(config, target)
    dirichlet = DirichletTransitionModel(S, A, alpha=config.alpha_sparse)
    tic = time.process_time()
    for u, c in enumerate(src_counts):
        transfer.set_counts(u, c)
    setup = time.process_time() - tic
    for i, budget in enumerate(int(b) for b in config.budgets):
        x = transition_counts((s[:budget], a[:budget], s2[:budget]), S, A)
        for method, belief, counts in (("pg_transfer", transfer.task(len(mdps) - 1), x), ("pg", pg, x),
                                       ("pg_pooled", pooled, sum(src_counts) + x),
                                       ("dirichlet_sparse", dirichlet, x)):
            tic = time.process_time()
            estimate = belief.set_counts(counts).mean()
            cpu[method][i] = time.process_time() - tic
            hell[method][i] = mean_hellinger(P, estimate)
        cpu["pg_transfer"][i] += setup if i == 0 else 0.0
        similarity[i] = transfer.similarity_[-1]
        pair_weight[i] = transfer.pair_weight_[-1]
    extras = {"similarity": {"pg_transfer": similarity}, "pair_weight": {"pg_transfer": pair_weight},
              "cpu_seconds": cpu}
    gap = np.array([mean_hellinger(P, np.asarray(m.transitions)) for m in mdps[:-1]])
    return hell, {"method_extras": extras, "source_gap": gap}


# ----------------------------------------------------------------------------- panel 2
def _psrl_sequence(config: Config, mdps: list, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Normalised returns of every method on every task of the sequence, shape (tasks, evals)."""
    from ..applications import DirichletTransitionModel, PSRLAgent, run_psrl

    start = 0   # cell (0, 0), the start of both families' worlds
    out: dict[str, np.ndarray] = {}
    # Common random numbers: every method meets task j with the same stream, so methods that
    # hold the same belief act alike (task 1: pg_transfer, pg and pg_pooled have nothing to
    # borrow yet) and their differences are the beliefs', not the streams'.
    tasks = np.random.SeedSequence(int(rng.integers(2**63))).spawn(len(mdps))
    for method in METHODS:
        transfer = _transfer_model(config, mdps) if method == "pg_transfer" else None
        pooled = _single_model(config, mdps[0]) if method == "pg_pooled" else None
        returns = []
        for j, (mdp, g) in enumerate(zip(mdps, map(np.random.default_rng, tasks))):
            belief: Any
            if transfer is not None:
                belief = transfer.task(j)
            elif pooled is not None:
                belief = pooled
            elif method == "pg":
                belief = _single_model(config, mdp)
            else:
                belief = DirichletTransitionModel(mdp.n_states, mdp.n_actions, alpha=config.alpha_sparse)
            agent = PSRLAgent(belief, mdp.reward_matrix, mdp.discount, variant=config.psrl_variant,
                              n_samples=config.psrl_samples, replan_every=config.replan_every)
            res = run_psrl(mdp.transitions, agent, config.psrl_transitions, start, rng=g,
                           eval_every=config.replan_every)
            returns.append(np.asarray(res["expected_return"]) / float(res["optimal_return"]))
        out[method] = np.stack(returns)
        if transfer is not None:
            out["similarity"] = np.asarray(transfer.similarity_, dtype=float)
    return out


def run_seed(config: Config, *, rng: np.random.Generator) -> SeedResult:
    """Both panels for one draw of the task families.

    Returns the curves ``hellinger[method]`` of shape (len(budgets),), the per-method extras
    ``similarity`` (``pg_transfer``'s similarity at every budget: learned, fixed, or its mixture's
    mean with ``similarity_rule="average"``), ``pair_weight`` (the
    weight of the sources' pair counts in its per-pair layer; 0 without one) and ``cpu_seconds``
    (CPU seconds of every method's fit at every budget; ``pg_transfer``'s first includes the
    sources' fits), and the extras ``source_gap`` (Hellinger distance between the target's and
    each source's true model), ``psrl_<method>`` (normalised returns, shape (psrl_tasks,
    psrl_transitions / replan_every + 1)) and ``psrl_similarity`` (shape (psrl_tasks,)).
    """
    check_config(config)
    family_rng, data_rng, psrl_family_rng, psrl_rng = rng.spawn(4)
    mdps = _family(config, config.n_sources, family_rng, relabel=config.relabel_sources)
    hell, info = _identification(config, mdps, data_rng)
    extras: dict[str, np.ndarray] = {"source_gap": info["source_gap"]}
    if config.psrl_tasks:
        seq = _family(config, config.psrl_tasks - 1, psrl_family_rng)
        psrl = _psrl_sequence(config, seq, psrl_rng)
        extras.update({f"psrl_{k}": v for k, v in psrl.items()})
    return SeedResult(curves={"hellinger": hell}, extras=extras, method_extras=info["method_extras"])


# ----------------------------------------------------------------------------- summaries
def _stack(results: Mapping[int, SeedResult], key: str) -> np.ndarray | None:
    rows = [np.asarray(r.extras[key], dtype=float) for r in results.values() if key in r.extras]
    return np.stack(rows) if rows else None


def _psrl_summary(config: Config, results: Mapping[int, SeedResult]) -> dict | None:
    if not config.psrl_tasks:
        return None
    k = config.psrl_eval // config.replan_every
    block: dict[str, Any] = {"eval_after_transitions": config.psrl_eval, "variant": config.psrl_variant,
                             "policy": _psrl_policy(config), "replan_every": config.replan_every,
                             "methods": {}}
    for method in METHODS:
        arr = _stack(results, f"psrl_{method}")
        if arr is None:
            continue
        at = arr[:, :, k]                                   # (seeds, tasks)
        block["methods"][method] = {
            "return_after_eval_mean": at.mean(axis=0).tolist(),
            "return_after_eval_std": std_over_seeds(at).tolist(),   # as the record's other "± std"
            "return_over_run_mean": arr.mean(axis=2).mean(axis=0).tolist(),
        }
    sim = _stack(results, "psrl_similarity")
    if sim is not None:
        block["similarity_median"] = np.median(sim, axis=0).tolist()
    return block


def _claims(config: Config, x: np.ndarray, mean: dict, paired: dict, sim_median: np.ndarray,
            unchecked: list[str]) -> list:
    """The claims on the mean curves ``mean``; a claim left unchecked (a method missing) is said in ``unchecked``."""
    claims: list[Claim] = []
    t, p = mean.get("pg_transfer"), mean.get("pg")
    if t is None or p is None:
        missing = " and ".join(m for m in ("pg_transfer", "pg") if m not in mean)
        unchecked.append(f"claims not checked: no {missing} method in the results")
        return claims
    ratio = t / p
    detail_ratio = ", ".join(f"T={int(v)}: {r:.3f}" for v, r in zip(x, ratio))
    r = float(config.relatedness)
    if r > 0 and not config.relabel_sources:
        claims.append(Claim(
            f"related tasks (r={r:g}): pg_transfer below pg at the smallest target budget",
            bool(t[0] < p[0]),
            f"T={int(x[0])}: {t[0]:.4f} vs {p[0]:.4f} (mean over seeds; transfer lower in "
            f"{paired['below_pg'][0]:.0%} of the seeds); ratio transfer/pg along T: {detail_ratio}"))
        claims.append(Claim(
            f"related tasks (r={r:g}): pg_transfer no worse than pg (within {TOLERANCE:.0%}) at "
            f"the largest budget",
            bool(t[-1] <= (1 + TOLERANCE) * p[-1]),
            f"T={int(x[-1])}: {t[-1]:.4f} vs {p[-1]:.4f} (ratio {ratio[-1]:.3f})"))
        q = mean.get("pg_pooled")
        if q is None and r < 1:
            unchecked.append("pg_pooled claim not checked: no pg_pooled method in the results")
        if q is not None and r < 1:
            below = t < q
            claims.append(Claim(
                f"tasks that differ (r={r:g} < 1): pg_transfer below pg_pooled at every budget",
                bool(below.all()),
                "transfer/pooled along T: " + ", ".join(
                    f"T={int(v)}: {a:.4f}/{b:.4f}" for v, a, b in zip(x, t, q))))
    else:
        what = "relabelled sources" if config.relabel_sources else "r=0"
        claims.append(Claim(
            f"unrelated tasks ({what}): pg_transfer within {TOLERANCE:.0%} of pg at every budget",
            bool(np.all(ratio <= 1 + TOLERANCE)),
            f"ratio transfer/pg along T: {detail_ratio}"))
        how = _similarity_how(config)
        if how != "fixed":   # a fixed similarity is the setting, not a finding
            which = "learned similarity" if how == "learned" else "mean similarity of pg_transfer's mixture"
            claims.append(Claim(
                f"unrelated tasks ({what}): the {which} is about zero (median over seeds "
                "<= 0.25 at every budget)",
                bool(np.all(sim_median <= 0.25)),
                "median similarity along T: " + ", ".join(f"{v:.3g}" for v in sim_median)))
    return claims


def summarise_extra(config: Config, results: Mapping[int, SeedResult], metrics: dict) -> dict:
    """Learned similarities, paired comparisons, costs, the PSRL panel and the claims."""
    x = np.asarray(config.budgets, dtype=float)
    methods = metrics["hellinger"]["methods"]
    mean = {m: np.asarray(methods[m]["mean"], dtype=float) for m in methods}
    curves = {m: np.stack([np.asarray(r.curves["hellinger"][m]) for r in results.values()])
              for m in methods}
    paired = {}
    if "pg_transfer" in curves:
        for other in ("pg", "pg_pooled"):
            if other in curves:
                paired[f"below_{other}"] = (curves["pg_transfer"] < curves[other]).mean(axis=0)
                paired[f"ratio_to_{other}_median"] = np.median(curves["pg_transfer"] / curves[other], axis=0)
                paired[f"ratio_to_{other}_max"] = np.max(curves["pg_transfer"] / curves[other], axis=0)
    sims = np.stack([np.asarray(r.method_extras["similarity"]["pg_transfer"], dtype=float)
                     for r in results.values()])
    sim_median = np.median(sims, axis=0)
    cpu = {m: np.mean([np.asarray(r.method_extras["cpu_seconds"][m], dtype=float) for r in results.values()],
                      axis=0).tolist() for m in METHODS if all(m in r.method_extras.get("cpu_seconds", {})
                                                              for r in results.values())}
    gap = _stack(results, "source_gap")
    extra: dict[str, Any] = {
        "similarity": {"median": sim_median.tolist(), "min": sims.min(axis=0).tolist(),
                       "max": sims.max(axis=0).tolist()},
        "paired": {k: v.tolist() for k, v in paired.items()},
        "cpu_seconds_mean": cpu,
        "source_target_hellinger_mean": None if gap is None else float(gap.mean()),
    }
    if config.layer:
        eta = np.stack([np.asarray(r.method_extras["pair_weight"]["pg_transfer"], dtype=float)
                        for r in results.values()])
        extra["pair_weight"] = {"median": np.median(eta, axis=0).tolist(), "max": eta.max(axis=0).tolist()}
    psrl = _psrl_summary(config, results)
    if psrl is not None:
        extra["psrl_sequence"] = psrl
    unchecked: list[str] = []
    extra["claims"] = _claims(config, x, mean, paired, sim_median, unchecked)
    notes = [
        _similarity_words(config) if _similarity_how(config) == "fixed" else
        f"{_similarity_words(config)} (median over seeds) along T: " + ", ".join(f"{v:.3g}" for v in sim_median),
        "true distance between target and sources (Hellinger, mean): "
        + ("n/a" if gap is None else f"{gap.mean():.3f}"),
    ]
    if "pair_weight" in extra:
        notes.append("weight of the sources' pair counts in pg_transfer's layer (median, max) along T: "
                     + ", ".join(f"{a:.3g} ({b:.3g})" for a, b in zip(extra["pair_weight"]["median"],
                                                                       extra["pair_weight"]["max"])))
    if "pg" in mean and "pg_transfer" in mean:
        notes.append("pg_transfer / pg (mean curves) along T: "
                     + ", ".join(f"{a / b:.3f}" for a, b in zip(mean["pg_transfer"], mean["pg"])))
        if "ratio_to_pg_max" in paired:
            notes.append("pg_transfer / pg, worst seed along T: "
                         + ", ".join(f"{v:.3f}" for v in paired["ratio_to_pg_max"]))
    if cpu:
        notes.append("CPU seconds per fit (mean over T and seeds): " + ", ".join(
            f"{m} {np.mean(v):.2f}" for m, v in cpu.items()))
    if psrl is not None:
        notes.append(f"PSRL sequence (variant {psrl['variant']}: {psrl['policy']}, replanned every "
                     f"{psrl['replan_every']} transitions), return after {config.psrl_eval} transitions "
                     "per task: " + "; ".join(
            f"{m} " + ", ".join(f"{v:.2f}" for v in b["return_after_eval_mean"])
            for m, b in psrl["methods"].items()))
    extra["notes"] = notes + unchecked
    return extra


def figures(config: Config, results: Mapping[int, SeedResult], summary: dict) -> list[FigureSpec]:
    """The error curves (linear and log x) and the PSRL task sequence with the similarities."""
    from .._methods import record_labels
    from ..plotting._curves import curves_figure, panels_note
    from ..plotting._transfer import transfer_figure

    figs = [FigureSpec(f"{NAME}-hellinger",
                       curves_figure(summary, "hellinger", x_label=X_LABEL,
                                     y_label=METRIC_LABELS["hellinger"],
                                     environment=_title(config),
                                     log_panel=True),
                       "target-task error of the estimated transition model against the target's "
                       f"transitions, four methods, mean ± std over seeds ({panels_note(x_values(config))})")]
    extra = summary.get("extra", summary)
    psrl = extra.get("psrl_sequence")
    how = _similarity_how(config)
    fig = transfer_figure(x_values(config), extra.get("similarity", {}), psrl, labels=record_labels(summary, METHODS),
                          x_label=X_LABEL, environment=_title(config),
                          criterion=config.similarity_criterion,
                          fixed_similarity=float(config.similarity) if how == "fixed" else None,
                          average=how == "averaged")
    figs.append(FigureSpec(f"{NAME}-similarity-psrl", fig,
                           "left: " + ("pg_transfer's learned similarity" if how == "learned" else
                                       f"the {_similarity_words(config)}") + " against the target's transitions "
                           "(median and range over seeds)"
                           + (f"; right: PSRL over a sequence of tasks (variant {config.psrl_variant}: "
                              f"{_psrl_policy(config)}), normalised return after the first transitions of "
                              "every task" if psrl else "")))   # psrl_tasks=0: no PSRL panel
    return figs


__all__ = ["Config", "METHODS", "quick_config", "run_seed", "uniform_transitions", "x_values"]
