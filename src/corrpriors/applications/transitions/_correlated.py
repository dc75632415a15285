r"""The paper's belief: one correlated multinomial per action over the states."""

from __future__ import annotations

import dataclasses
from collections.abc import Generator
from typing import Any

import numpy as np

from ..._random import as_generator
from ..._typing import FloatArray, SeedLike
from ..._validation import check_array, check_index_array, check_int, check_positive, check_shape
from ...core.stick_breaking import psi_to_pi
from ...mdp.tabular import check_boundary
from ._beliefs import DRAWS_ADVICE, _check_n, _resolve_sparse, _TransitionBelief, check_dense_memory
from ._categories import (
    CategoryMap,
    TruncatedCategoryMap,
    _nearest_first,
    displacement_category_map,
    identity_category_map,
    integer_coordinates,
)
from ._hellinger import (
    FIRST_DRAWS,
    HELLINGER_DRAWS,
    HELLINGER_RTOL,
    _required,
    average_sqrt_draws,
    chunk_draws,
    from_sqrt_mean,
)
from ._layer import _Layer
from ._parallel import run_generators
from ._window import (
    WindowCategoryMap,
    aggregate_pairs,
    far_destinations_pairs,
    impute_pairs,
    next_state_tables,
    window_category_map,
)

__all__ = ["BACKENDS", "DRAW_METHODS", "GMRF_FROM_STATES", "GMRF_MAX_CATEGORIES", "CorrelatedTransitionModel"]


def _covariance_candidates(covariance: Any, n_states: int, many: bool) -> list[tuple[Any, Any]]:
    """``[(name, covariance)]``: one entry, or (with ``many``) a dict / sequence of candidates."""
    if many and isinstance(covariance, dict):
        items = list(covariance.items())
    elif many and isinstance(covariance, (list, tuple)):
        items = list(enumerate(covariance))
    else:
        items = [(0, covariance)]
    if not items:
        raise ValueError("covariance: expected at least one candidate covariance")
    out = []
    for name, cov in items:
        if not hasattr(cov, "gram"):
            cov = check_array(cov, "covariance", ndim=2)
            check_shape(cov, (n_states, n_states), "covariance")
        out.append((name, cov))
    return out


def _precision_candidates(precision: Any, n_states: int, many: bool) -> list[tuple[Any, Any]]:
    """``[(name, SparsePrecisionPrior)]`` from one precision or (with ``many``) candidates."""
    from ...core.priors import GaussianPrior, SparsePrecisionPrior

    if many and isinstance(precision, dict):
        items = list(precision.items())
    elif many and isinstance(precision, (list, tuple)):
        items = list(enumerate(precision))
    else:
        items = [(0, precision)]
    if not items:
        raise ValueError("precision: expected at least one candidate precision")
    return [(name, q if isinstance(q, GaussianPrior)
             else SparsePrecisionPrior(q, size=n_states)) for name, q in items]




#: From this many states on, :meth:`CorrelatedTransitionModel.for_mdp` uses the sparse GMRF
#: prior by default (``prior="auto"``), if there are at most :data:`GMRF_MAX_CATEGORIES`
#: categories. Measured on 2-D grid worlds (relative encoding, 10 categories, 4 actions,
#: 10 S random-walk transitions, all actions at a fixed scale), dense / GMRF fit time:
#: 0.35x at S = 100, 0.52x at 225, 0.85x at 400, 3.9x at 900. The sparse path factorises the
#: whole state space once per observed stick, the dense one each stick's observed set, so with
#: many categories (Taxi's 82 in 4-D: dense 11 s, GMRF 358 s for one fit of 6 actions) dense
#: stays cheaper.
GMRF_FROM_STATES = 500
#: Most categories for which ``prior="auto"`` chooses the GMRF prior for speed; with more, it
#: chooses it only where the dense prior cannot fit in memory (:func:`_auto_prior`).
GMRF_MAX_CATEGORIES = 30


def _auto_prior(n_states: int, n_categories: int) -> str:
    """The prior ``prior="auto"`` of :meth:`CorrelatedTransitionModel.for_mdp` chooses.

    ``"gmrf"`` from :data:`GMRF_FROM_STATES` states on with at most :data:`GMRF_MAX_CATEGORIES`
    categories (where it is faster); ``"dense"`` otherwise, unless its S x S matrices would not
    fit in the memory this process may use (:func:`~corrpriors.kernels.base.check_dense_memory`,
    the check :meth:`~corrpriors.kernels.Kernel.bind` makes), where only the GMRF can run.
    """
    from ..._memory import MemoryEstimateError
    from ...kernels.base import check_dense_memory

    if n_states >= GMRF_FROM_STATES and n_categories <= GMRF_MAX_CATEGORIES:
        return "gmrf"
    try:
        check_dense_memory(n_states)
    except MemoryEstimateError:
        return "gmrf"
    return "dense"


def _gmrf_precisions(coords: np.ndarray, integral: bool, scales: list[float]) -> dict:
    """One normalised GMRF precision per length scale on the states' graph."""
    from ...kernels import graph_precision, knn_adjacency, lattice_adjacency

    if integral:
        adjacency = lattice_adjacency(coords.astype(np.int64))
    else:
        adjacency = knn_adjacency(coords, n_neighbors=min(2 * coords.shape[1] + 2,
                                                          coords.shape[0] - 1))
    return {v: graph_precision(adjacency, kappa=np.sqrt(8.0) / v, alpha=2) for v in scales}




def _scale_selection(selection: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Constructor arguments of a ``selection`` rule of :meth:`CorrelatedTransitionModel.for_mdp`."""
    if selection in ("collapsed", "elbo"):
        return {"selection": selection}
    if selection == "em":
        return {"learn_scale": True}
    if selection == "fixed":
        return {"learn_scale": False, "scale_prior": None, "scale": kwargs.get("scale", 1.0)}
    raise ValueError(f"selection: expected 'collapsed', 'elbo', 'em' or 'fixed', got "
                     f"{selection!r}")


class _LayerDefault(str):
    """``for_mdp``'s default ``"auto"`` concentration: dropped (no layer) on sparse storage."""


class _BetaDefault(tuple):
    """``for_mdp``'s default Beta priors of the layer: dropped on sparse storage."""


class _SupportDefault(float):
    """``for_mdp``'s default ``support_prior``: dropped on sparse storage and without a layer."""


_AUTO = _LayerDefault("auto")
_FLAT = _BetaDefault((1.0, 1.0))
_EVEN = _SupportDefault(0.5)


BACKENDS = ("threads", "loky", "dask")
"""Where :meth:`CorrelatedTransitionModel.refit` runs the actions' fits with ``n_jobs``."""

#: What :meth:`CorrelatedTransitionModel.sample_many` draws the correlated part from
#: (``draw_method``).
DRAW_METHODS = ("vi", "calibrated")


@dataclasses.dataclass
class _ActionTask:
    """Everything one action's refit needs (its fits' jobs run on threads, processes or Dask)."""

    action: int
    counts: FloatArray            # category counts, uncensored reading (S, K)
    cmap: Any                     # censored maps only: to impute
    raw: Any                      # censored maps only: the observed next states
    impute_rounds: int
    model: Any                    # the action's current model (warm start)
    searches: list | None         # [(name, ScaleSearch)] with a selection criterion


@dataclasses.dataclass
class _ActionResult:
    model: Any
    searches: list | None
    selected: dict | None
    n_fits: int
    seconds: float


@dataclasses.dataclass
class _PlainFit:
    """An action's fit without scale selection (EM or a fixed scale): a picklable job."""

    model: Any
    counts: FloatArray

    def __call__(self) -> Any:
        return self.model.fit(self.counts, warm_start=True)


def _impute(task: _ActionTask, q: Any) -> FloatArray:
    if isinstance(task.raw, tuple):   # observed pairs (sparse storage)
        s, s2, n = task.raw
        return impute_pairs(task.cmap, s, s2, n, q)
    return task.cmap.impute(task.raw, q)


def _fit_counts(task: _ActionTask, counts: FloatArray, state: dict) -> Generator[Any, Any, Any]:
    """One fit (or selection) of the task's model to category counts, as steps (jobs); the
    model.
    """
    if task.searches is None:
        state["n_fits"] += 1
        state["model"] = yield _PlainFit(state["model"], counts)
        return state["model"]
    best: tuple[float, Any, Any] | None = None
    for name, search in task.searches:
        before = search.n_fits_
        sel = yield from search.climb(counts)
        state["n_fits"] += search.n_fits_ - before
        if best is None or sel.value > best[0]:
            best = (sel.value, name, sel)
    assert best is not None   # at least one candidate per action
    value, name, sel = best
    state["model"] = sel.model
    state["selected"] = {"candidate": name, "scale": sel.scale, "value": value}
    return sel.model


def _action_steps(task: _ActionTask) -> Generator[Any, Any, _ActionResult]:
    """Fit (or select) one action's model, as a generator of fit jobs
    (:func:`._parallel.run_generators`). With a censored category map this is EM: impute from
    the current fit, refit, repeat while the imputation changes (at most ``impute_rounds`` fits
    or selections, each warm-started).
    """
    state: dict[str, Any] = {"model": task.model, "n_fits": 0, "selected": None}
    if task.cmap is None:
        model = yield from _fit_counts(task, task.counts, state)
    else:
        current = task.model
        x = _impute(task, current.probs() if hasattr(current, "result_") else None)
        for _ in range(task.impute_rounds):
            model = yield from _fit_counts(task, x, state)
            x_new = _impute(task, model.probs())
            if np.array_equal(x_new, x):
                break
            x = x_new
    return _ActionResult(model, task.searches, state["selected"], state["n_fits"], 0.0)


#: (S, K) float arrays a fit of the correlated belief holds per action at its peak (measured,
#: round 17: 19 on 20 x 20 and 30 x 30 grids with windows of 1,521 and 3,481 categories; the
#: psi moments, the Polya-Gamma expectations, the censored counts' imputation, the draws).
MODEL_ARRAYS_PER_ACTION = 24


def _check_model_memory(n_states: int, n_actions: int, n_categories: int, radius: int | None) -> None:
    """Refuse a belief whose per-action (S, K) arrays (:data:`MODEL_ARRAYS_PER_ACTION`) cannot fit."""
    from ..._memory import check_memory

    check_memory(8.0 * MODEL_ARRAYS_PER_ACTION * n_actions * n_states * n_categories,
                 f"the transition model ({n_states:,} states x {n_actions} actions x {n_categories:,} "
                 f"categories)", "use a smaller radius" if radius is not None and radius > 1
                 else "use fewer categories (the relative encoding with a small radius)")


def _check_n_jobs(n_jobs: Any) -> int:
    """``n_jobs`` as an int: a positive one, -1 (one per action) or None (1)."""
    if n_jobs is None:
        return 1
    try:
        n = check_int(n_jobs, "n_jobs", -1)
    except ValueError:
        n = 0
    if n == 0:
        raise ValueError(f"n_jobs: expected a positive int, -1 (one per action) or None, "
                         f"got {n_jobs!r}")
    return n


def _check_actions(actions: Any, n_actions: int) -> list[int]:
    """``actions`` (a sequence of action indices) as a list of ints in [0, A)."""
    arr = check_index_array(actions, "actions", n_actions, "A")
    if arr.ndim > 1:
        raise ValueError(f"actions: expected a sequence of action indices, got shape {arr.shape}")
    return [int(a) for a in np.atleast_1d(arr)]


class CorrelatedTransitionModel(_TransitionBelief):
    r"""The paper's correlated belief: one correlated multinomial per action over the states.

    For every action ``a`` the category counts ``X^{(a)}[s, k]`` (next states of ``s`` under
    ``a``, mapped to categories by ``category_map``) follow
    :class:`corrpriors.core.model.CorrelatedMultinomial` with the states as covariates:

    .. math:: \psi^{(a)}_{\cdot k} \sim N(\mu_k, \theta_a \tilde\Sigma), \qquad
              q^{(a)}_s = \Pi_{SB}(\psi^{(a)}_{s \cdot}), \qquad
              X^{(a)}_{s \cdot} \sim Mult(N_{sa}, q^{(a)}_s),

    and next-state probabilities follow from ``q`` through the category map (see the
    module docstring). Refits are *lazy* -- an action's model is refitted only when its
    counts changed since its last fit -- and *warm-started* from that fit.

    Parameters
    ----------
    n_states : int
        S.
    n_actions : int
        A.
    covariance : ndarray of shape (S, S) or BoundKernel
        :math:`\tilde\Sigma` over the states (e.g. a squared-exponential kernel on the
        state coordinates), shared by all actions.
    category_map : CategoryMap, optional
        Default :func:`identity_category_map` (absolute encoding).
    learn_scale : bool, default=True
        Learn :math:`\theta_a` by (MAP-)EM at every fit.
    learn_mean : {None, "constant", "full"}, default="constant"
        Learn one prior mean per stick (and action); ``None`` keeps the uniform logits;
        ``"full"`` is the paper's (coupling-destroying) choice, see the core model.
    scale_prior : (shape, rate) or None, default=(2.0, 1.0)
        Gamma hyper-prior on :math:`\theta_a` (MAP-EM); keeps the scale positive while the
        data are scarce, but cannot stop EM from shrinking it (see
        :class:`~corrpriors.core.model.CorrelatedMultinomial`); with ``learn_scale=False``
        and a fixed ``scale`` the scale can instead be chosen by the models'
        ``collapsed_bound()``, as the system-identification experiment does.
    probs_method : {"plugin", "mc"}, default="plugin"
        How :meth:`mean` turns :math:`q(\psi)` into probabilities: ``"plugin"``
        :math:`\Pi_{SB}(\lambda)` (the paper's, deterministic) or a Monte-Carlo posterior
        mean drawn from ``mc_rng``.
    max_iter : int, default=100
        CAVI iteration cap per refit (warm starts need few).
    tol : float, default=1e-6
        Relative objective change that stops a refit.
    impute_rounds : int, default=3
        With a :class:`TruncatedCategoryMap` (censored observations at the boundary): at
        most this many impute-then-fit rounds per refit (EM; it stops early when the
        imputed counts no longer change, and refits continue it across new data).
    selection : {None, "collapsed", "elbo"}, default=None
        ``None``: the scale is learned by (MAP-)EM (``learn_scale``) or fixed. Otherwise, at
        every refit and for every action, the scale :math:`\theta_a` (and, if ``covariance``
        lists several candidates, the covariance) maximising this criterion is chosen by a
        warm-started climb over a log lattice of scales
        (:class:`~corrpriors.core.selection.ScaleSearch`); ``"collapsed"`` (the collapsed
        bound) does not shrink :math:`\theta` on scarce data the way EM on the ELBO does.
        ``learn_scale`` and ``scale_prior`` are then ignored.
    scale_range : (float, float), default=(1e-2, 1e4)
        Range of the scale lattice (with ``selection``).
    scale_step : float, default=0.25
        Lattice spacing in decades (with ``selection``).
    sparse : bool or None, default=None
        Store the counts sparsely, compute categories for the observed transitions only and
        return :meth:`mean` and :meth:`sample_many` as
        :class:`~corrpriors.applications.transitions.BackgroundTransitions` tables (memory
        O(S A K + T) instead of O(S^2 A)); ``None``: from
        :data:`~corrpriors.applications.transitions.SPARSE_FROM_STATES` states on. Small
        models keep dense (S, A, S) arrays.
    n_jobs : int or None, default=None
        Run this many fits at a time (``None`` or 1: one after the other; -1: one per action).
        A refit is scheduled fit by fit, not action by action: every action's refit is a
        sequence of fits (the lattice points of its scale climb, its imputation rounds, its
        candidates; each decides the next), whenever a fit ends the next fit of that action
        joins one queue of all actions' fits, and a free worker takes the fit of the action
        that has run least so far (:func:`._parallel.run_generators`; the actions that took
        longest in the previous refit start first). The fits are independent given their inputs, so the numbers are
        the serial ones in any case.
    backend : {"threads", "loky", "dask"} or dask.distributed.Client, default="loky"
        Where parallel fits run. ``"loky"``: this process runs one lane of fits (a thread)
        and ``n_jobs - 1`` joblib worker processes the others; models travel there and back
        by pickle (a sparse prior as its precision: each worker restores it once, about 1 s
        at 100 x 100, and returned models share this process's prior). Measured on the
        100 x 100 tunnel grid, 4 actions, collapsed scale selection (17 fits of 1.6-5.4 CPU
        s), on 2 otherwise idle cores: ``n_jobs=2`` took 0.58x the serial wall time over six
        alternated repeats (0.50-0.71x each, median 0.565x; the spread is the machine's: two
        fits at once sometimes cost 20 % more CPU); scheduled action by action it was 0.64x. ``"threads"``: threads of
        this process only (the supernodal kernels hold the GIL between BLAS calls, so threads
        are slower than one after the other: 1.28x, measured action by action). A Dask cluster
        (a ``Client``, or ``"dask"`` for the current default client): e.g. to fit the
        actions of a large model on several machines, ``n_jobs`` fits at a time. The
        granularity is one fit: with fewer actions than workers, or one action whose climb
        is most of the work, the extra workers idle. BLAS is limited to one thread per
        process while fitting, so give Dask workers one thread each (several threads in one
        worker process may see the limit lifted by another's exit: the numbers then differ
        in the last digits).
    concentration : None, "auto" or float, default=None
        The per-(state, action) layer (:mod:`._layer`): every pair's next-state distribution
        is :math:`\mathrm{Dir}(c_a B_{sa})` around the correlated prediction :math:`B_{sa}`,
        the correlated model is fitted to the table counts, and posterior means and draws are
        those of the layer. ``None``: no layer (the paper's model, :math:`c = \infty`);
        ``"auto"``: :math:`c_a` has a posterior on the lattice
        :data:`~corrpriors.applications.transitions._layer.CONCENTRATIONS` (from its
        Dirichlet-multinomial evidence; draws draw it); a number: fixed.
    contamination_prior : (float, float) or None, default=None
        With a Beta prior :math:`(a_0, b_0)`, the base is
        :math:`B = (1 - \varepsilon) Q + \varepsilon U`: with probability :math:`\varepsilon`
        a pair's next state is not predicted by its neighbours (uniform over the states, the
        sparse Dirichlet's base); :math:`\varepsilon = 0` has prior probability 1/2 and its
        Bayes factor from the table counts, otherwise :math:`\varepsilon` has a Beta posterior;
        it is drawn with every posterior draw. ``None``: :math:`\varepsilon = 0`.
    distinct_prior : (float, float) or None, default=None
        With a Beta prior :math:`(a_0, b_0)` (and a concentration): with probability
        :math:`\delta` the actions of a state draw distinct outcomes (an untried action is
        unlikely to do what another action of its state is known or drawn to do); :math:`\delta`
        has a grid posterior from the states with two or more tried actions (distinct outcomes
        count as far as the base expected them to coincide). Acts on the per-pair part of the
        layer only.
    layer_rounds : int, default=2
        With a layer: at most this many table-then-fit rounds per refit (they stop when the
        tables no longer change; refits continue them across new data).
        The layer needs dense storage: with ``sparse`` storage a ``concentration`` or a
        ``contamination_prior`` raises :class:`ValueError`.
    support_prior : float or None, default=None
        With a layer (a concentration): the prior probability, per action, that the pairs
        follow the sparse-support prior (:mod:`._support`: every pair moves to a few states,
        a uniformly drawn support whose size prior and Dirichlet concentration are learned
        from all pairs) instead of the layer around the neighbours' prediction. The actions'
        hypotheses are exchangeable (a Beta prior of mean ``support_prior`` on their common
        probability): their posterior weights come from every action's evidence
        (:func:`~._layer.support_weights`), so an action with few data follows the others;
        means mix the two, every draw of an action picks one. ``None``: no such hypothesis.
    draw_method : {"vi", "calibrated"}, default="vi"
        What :meth:`sample_many` draws the correlated part from
        (:meth:`~corrpriors.core.model.CorrelatedMultinomial.sample_psi`'s ``method``):
        ``"vi"``, the mean-field :math:`q(\psi)` at the chosen scales; ``"calibrated"``, the
        expectation-propagation posterior integrated over the scale (a grid weighted by its
        evidence), wider where the data leave the scale open. Neither covers at its level on
        the grid worlds measured (user guide, "How far to trust the draws"); ``"calibrated"``
        comes closer with few data, at an EP fit per scale point and action after every refit.
    mc_rng : None, int, numpy.random.SeedSequence or numpy.random.Generator, default=None
        Randomness of ``probs_method="mc"`` (unused by ``"plugin"``). An int or SeedSequence
        makes every Monte-Carlo mean reproducible (each call restarts from it: common random
        numbers across refits); a Generator is advanced by every call; ``None`` draws fresh
        OS entropy.
    **model_kwargs
        Passed on to :class:`~corrpriors.core.model.CorrelatedMultinomial` (for example
        ``mean_prior_std`` -- default 3.0 here, a weak normal hyper-prior on the constant
        means -- ``learn_kernel``, ``scale``).

    Attributes
    ----------
    models_ : list of CorrelatedMultinomial
        One per action (fitted lazily).
    n_fits_ : int
        Number of per-action model fits performed so far.
    fit_seconds_ : float
        Wall-clock seconds spent in those fits (summed over the fits: with ``n_jobs`` more
        than the refits' wall time).
    fit_log_ : list of dict
        One entry per fit of the last :meth:`refit`: ``action``, ``cpu`` (thread CPU
        seconds), ``start`` and ``end`` (``time.perf_counter``), ``pid``, ``thread`` and
        ``process_cpu`` (see :func:`._parallel.run_generators`) -- what a schedule did.
    n_unconverged_ : int
        Fits that stopped at ``max_iter`` (expected with small caps; their
        :class:`~corrpriors.exceptions.ConvergenceWarning` is suppressed and counted here).
    selected_ : list of dict or None
        With ``selection``: per action, the chosen ``candidate`` (index or name of the
        covariance), ``scale`` and criterion ``value`` at the last refit (``None`` before).
    concentration_weights_ : ndarray of shape (A, L) or None
        With a layer: the posterior weights of the concentrations ``concentrations_`` of
        every action.
    concentrations_ : ndarray of shape (L,) or None
        With a layer: the lattice of concentrations (``inf``: no layer).
    contamination_ : (float, float) or None
        With ``contamination_prior``: the Beta posterior of :math:`\varepsilon` given
        :math:`\varepsilon > 0`.
    contamination_absent_ : float or None
        With ``contamination_prior``: the posterior probability of :math:`\varepsilon = 0`.
    distinct_ : (float, float) or None
        With ``distinct_prior``: the Beta distribution with the mean and variance of the grid
        posterior of :math:`\delta` (:func:`~._layer.distinct_posterior`).
    hellinger_draws_ : int or None
        Posterior draws the last :meth:`hellinger_estimate` averaged (``None`` before one).
    """

    def __init__(self, n_states: int, n_actions: int, covariance: Any = None,
                 category_map: CategoryMap | WindowCategoryMap | None = None, learn_scale: bool = True,
                 learn_mean: str | None = "constant",
                 scale_prior: tuple[float, float] | None = (2.0, 1.0),
                 probs_method: str = "plugin", max_iter: int = 100, tol: float = 1e-6,
                 selection: str | None = None, scale_range: tuple[float, float] = (1e-2, 1e4),
                 scale_step: float = 0.25, precision: Any = None, impute_rounds: int = 3,
                 concentration: Any = None,
                 contamination_prior: tuple[float, float] | None = None,
                 distinct_prior: tuple[float, float] | None = None,
                 layer_rounds: int = 2, *,
                 mc_rng: SeedLike = None, sparse: bool | None = None, n_jobs: int | None = None,
                 backend: Any = "loky", support_prior: float | None = None,
                 draw_method: str = "vi", **model_kwargs: Any) -> None:
        super().__init__(n_states, n_actions, sparse)
        self.n_jobs = _check_n_jobs(n_jobs)
        if isinstance(backend, str) and backend not in BACKENDS:
            raise ValueError(f"backend: expected one of {', '.join(BACKENDS)} or a "
                             f"dask.distributed.Client, got {backend!r}")
        if not isinstance(backend, str) and not hasattr(backend, "map"):
            raise TypeError(f"backend: expected a string or a dask.distributed.Client, got "
                            f"{type(backend).__name__}")
        self.backend = backend
        from ...core.model import CorrelatedMultinomial
        from ...core.selection import ScaleSearch, check_criterion

        if category_map is None:   # the model's (S, S) arrays first: they bound the map's
            _check_model_memory(self.n_states, self.n_actions, self.n_states, None)
            category_map = identity_category_map(self.n_states)
        cmap = category_map
        if not isinstance(cmap, (CategoryMap, WindowCategoryMap)):
            raise TypeError(f"category_map: expected a CategoryMap or WindowCategoryMap, got "
                            f"{type(cmap).__name__}")
        _check_model_memory(self.n_states, self.n_actions, cmap.n_categories, None)
        if isinstance(cmap, WindowCategoryMap) and not self.sparse:
            cmap = cmap.to_dense()
        if cmap.n_states != self.n_states:
            raise ValueError(f"category_map: expected a map over S = {self.n_states} states, "
                             f"got {cmap.n_states}")
        if probs_method not in ("plugin", "mc"):
            raise ValueError(f"probs_method: expected 'plugin' or 'mc', got {probs_method!r}")
        if draw_method not in DRAW_METHODS:
            raise ValueError(f"draw_method: expected one of {DRAW_METHODS}, got {draw_method!r}")
        self.draw_method = draw_method
        if learn_mean not in (None, "constant", "full"):
            raise ValueError(f"learn_mean: expected None, 'constant' or 'full', got {learn_mean!r}")
        self.impute_rounds = check_int(impute_rounds, "impute_rounds", 1)
        if selection is not None:
            check_criterion(selection)
        if (covariance is None) == (precision is None):
            raise ValueError("covariance, precision: expected exactly one of them, got "
                             + ("neither" if covariance is None else "both"))
        if precision is None:
            key = "covariance"
            candidates = _covariance_candidates(covariance, self.n_states,
                                                many=selection is not None)
        else:  # one sparse-precision prior per candidate, shared by every action and scale
            key = "precision"
            candidates = _precision_candidates(precision, self.n_states,
                                               many=selection is not None)
        self.covariance = covariance if selection is not None or covariance is None \
            else candidates[0][1]
        self.precision = precision
        self.category_map = cmap
        self.probs_method = probs_method
        as_generator(mc_rng, name="mc_rng")  # validates the seed now, not at the first mean()
        self.mc_rng = mc_rng
        self.selection = selection
        kwargs: dict[str, Any] = {"mean_prior_std": 3.0}
        kwargs.update(model_kwargs)
        templates = [
            (name, CorrelatedMultinomial(**{key: cov}, learn_mean=learn_mean,
                                         learn_scale=learn_scale, max_iter=max_iter, tol=tol,
                                         scale_prior=scale_prior, warm_start=True, **kwargs))
            for name, cov in candidates]
        self.models_ = [templates[0][1]] + [
            CorrelatedMultinomial(**{key: candidates[0][1]}, learn_mean=learn_mean,
                                  learn_scale=learn_scale, max_iter=max_iter, tol=tol,
                                  scale_prior=scale_prior, warm_start=True, **kwargs)
            for _ in range(self.n_actions - 1)]
        self._searches: list[list[tuple[Any, Any]]] | None = None
        self.selected_: list[dict | None] | None = None
        self.hellinger_draws_: int | None = None
        if selection is not None:
            lo, hi = (float(v) for v in scale_range)
            self._searches = [
                [(name, ScaleSearch(t, criterion=selection, low=lo, high=hi, step=scale_step))
                 for name, t in templates]
                for _ in range(self.n_actions)]
            self.selected_ = [None] * self.n_actions
        self.n_fits_ = 0
        self.fit_seconds_ = 0.0
        self.fit_log_: list[dict] = []
        self._action_seconds = np.zeros(self.n_actions)   # of each action's last refit
        self.n_unconverged_ = 0
        self._fitted_versions = np.full(self.n_actions, -1, dtype=np.int64)   # data of each fit
        self._cache: dict[str, Any] = {}
        self._far = np.zeros(self.n_states)   # far jumps observed into each state (pooling)
        self._layer = _Layer.build(concentration, contamination_prior, layer_rounds,
                                   self.n_states, self.n_actions, distinct_prior, support_prior)
        if self._layer is not None and self.sparse:
            raise ValueError("concentration, contamination_prior: the per-(state, action) layer "
                             "needs dense storage; with sparse storage (sparse=True, or from "
                             "SPARSE_FROM_STATES states on) pass concentration=None and "
                             "contamination_prior=None")
        self.concentration = concentration
        self.contamination_prior = contamination_prior
        self.distinct_prior = distinct_prior
        self.layer_rounds = int(layer_rounds)
        self.support_prior = support_prior

    @classmethod
    def for_mdp(cls, mdp: Any, *, encoding: str | None = None, lengthscale: Any = 2.0,
                radius: int = 1, selection: str = "collapsed", prior: str = "auto",
                category_order: str = "nearest", boundary: str | None = None,
                other_pooling: float = 1.0, concentration: Any = _AUTO,
                contamination_prior: tuple[float, float] | None = _FLAT,
                distinct_prior: tuple[float, float] | None = _FLAT,
                support_prior: float | None = _EVEN,
                **kwargs: Any) -> CorrelatedTransitionModel:
        r"""The correlated belief for an MDP's states in one call.

        A squared-exponential kernel on the state coordinates,
        :math:`\tilde\Sigma_{ij} = \exp(-\lVert x_i - x_j\rVert^2 / \ell^2)` (the paper's
        form, :class:`~corrpriors.kernels.SquaredExponential`), with
        either category encoding.

        Parameters
        ----------
        mdp : TabularMDP or EnvInfo
            Anything with ``n_states``, ``n_actions`` and ``coordinates`` (ndarray of shape
            (S, D)); only these are used (never the transitions).
        encoding : {"relative", "absolute"}, optional
            ``"relative"``: category = displacement ``coords[s'] - coords[s]`` within
            ``radius`` (:func:`displacement_category_map`), so that "the same move" is shared
            between states -- the default when the coordinates are integers. ``"absolute"``:
            category = next state (the paper's encoding, ``pg_absolute`` in the experiments)
            -- the default otherwise.
        lengthscale : float or sequence of float, default=2.0
            :math:`\ell`, in coordinate units; with several values and a criterion
            ``selection``, every action picks the best one at every refit.
        radius : int, default=1
            Window half-width of the relative encoding (moves beyond it share one "other"
            category per state).
        selection : {"collapsed", "elbo", "em", "fixed"}, default="collapsed"
            How the prior scale :math:`\theta_a` (and the length scale, among several) is
            chosen at every refit: ``"collapsed"`` -- the maximiser of the collapsed bound on
            a log lattice of scales (:class:`~corrpriors.core.selection.ScaleSearch`, warm
            started from the previous choice); ``"elbo"`` -- the same with the ELBO;
            ``"em"`` -- MAP-EM (Gamma(2, 1) hyper-prior; one fit per refit, the cheapest, but
            EM shrinks the scale on scarce data); ``"fixed"`` -- kept at ``scale`` (a keyword
            argument, default 1).
        category_order : {"nearest", "lexicographic"}, default="nearest"
            Order of the relative encoding's window categories along the stick-breaking
            construction. ``"nearest"``: by the length of the move (staying first, then the
            unit moves, ...), so that the frequent moves come first and the later sticks are
            observed only where a rare move was seen -- the same model family, and far
            cheaper when the window is large (Taxi, 82 categories: one fit of all actions
            11.2 s -> 1.7 s). ``"lexicographic"``: :func:`displacement_category_map`'s order
            (the paper experiments').
        boundary : {"exclude", "clip", "stay"}, optional
            What a move of the relative encoding that would leave the state space means
            (:func:`displacement_category_map`): ``"exclude"`` -- a structural zero, so a
            move into a wall is observed as "stay in place" and the kernel carries that to
            the neighbouring states, where the move works; ``"stay"`` -- the categories are
            the *intended* moves and one that does not land on a state keeps the agent in
            place (a grid's edges and walls; boundary observations are censored and imputed
            by EM, see :class:`TruncatedCategoryMap`); ``"clip"`` -- clipped to the
            coordinates' box (a queue's finite buffer; DeepSea's columns). Default: the
            MDP's own ``mdp.boundary`` when it declares one (:class:`~corrpriors.mdp.TabularMDP`;
            corrpriors' DeepSea declares ``"clip"``), else ``"stay"`` when the states
            are the cells of a grid (``mdp.shape`` is set: FrozenLake, CliffWalking,
            corrpriors' grid worlds), else ``"exclude"`` (Taxi, features). Measured with
            ``corrpriors sysid`` / ``psrl`` (docs: "Your own environment"): on FrozenLake
            8 x 8 "stay" lowers the Hellinger error by a quarter to three quarters and lets
            the CliffWalking PSRL policies find the optimum sooner, at 0.7-2.2x the CPU time;
            on Taxi's 4-D coordinates it helps below 1,000 transitions, is worse from 3,000
            on and costs 1.8x. Only the relative encoding has moves; with
            ``encoding="absolute"`` it must be ``None`` or ``"exclude"``.
        other_pooling : float, default=1.0
            Relative encoding: weight (pseudo-counts) of the destinations of all far jumps
            observed so far in the prior of where an unobserved far jump of a state leads
            (:class:`CategoryMap`); 0 spreads it uniformly over the states outside the
            window. Measured (docs: "Your own environment"): on CliffWalking a fall from one
            cliff cell then tells every other cliff cell that falling leads back to the start;
            the PSRL policies are optimal at step 500 in 7 and 8 of 10 seeds against 1 and 3
            without, and on CliffWalkingSlippery reach the goal after 500 steps with
            probability .51 / .45 against .06 / .07.
        concentration : "auto", float or None, default="auto"
            The per-(state, action) layer (see the constructor and :mod:`._layer`): how far
            every pair may differ from what its neighbours predict, learned from the data
            (``"auto"``); ``None`` is the paper's model (every pair is its prediction).
            The layer needs dense storage: when the belief stores its counts sparsely
            (``sparse=True``, or ``None`` from
            :data:`~corrpriors.applications.transitions.SPARSE_FROM_STATES` states on) the
            defaults of ``concentration``, ``contamination_prior`` and ``distinct_prior`` turn
            the layer off, and a value given explicitly raises :class:`ValueError`.
        contamination_prior : (float, float) or None, default=(1.0, 1.0)
            Beta prior of the probability that a pair's next state is not predicted by its
            neighbours at all (see the constructor); ``None``: no such component.
        distinct_prior : (float, float) or None, default=(1.0, 1.0)
            Beta prior of the probability that the actions of a state do distinct things (see
            the constructor); ``None``: they are independent. Ignored without a concentration.
        support_prior : float or None, default=0.5
            Prior probability, per action, of the sparse-support hypothesis beside the layer
            (see the constructor and :mod:`._support`; exchangeable over the actions): the pairs
            ignore their neighbours and each moves to a few states, sizes learned from all
            pairs; ``None``: no such hypothesis. The default is dropped with
            ``concentration=None`` and on sparse storage.
        prior : {"auto", "dense", "gmrf"}, default="auto"
            ``"dense"``: the squared-exponential kernel above (cost per fit about
            :math:`\sum_k |O_k|^3`, cubic in S). ``"gmrf"``: a Matern-like Gaussian Markov random
            field on the states' graph -- the lattice of integer coordinates
            (:func:`~corrpriors.kernels.lattice_adjacency`) or a k-nearest-neighbour graph of
            real features -- :math:`Q = \tau(\kappa^2 I + L)^2` with :math:`\kappa = \sqrt8/\ell`
            (the 2-D Matern range) and unit geometric-mean variance
            (:func:`~corrpriors.kernels.graph_precision`), fitted exactly by sparse Cholesky
            factorisations (cost about :math:`S^{1.5}` on grids). ``"auto"``: ``"gmrf"`` from
            :data:`GMRF_FROM_STATES` states on with at most :data:`GMRF_MAX_CATEGORIES`
            categories (where it is faster, measured), else ``"dense"`` -- unless the dense
            prior's S x S matrices would not fit in the memory this process may use (the check
            of :meth:`~corrpriors.kernels.Kernel.bind`: ``ulimit -v``, the physical memory,
            ``CORRPRIORS_MEMORY_LIMIT``; from about 19,000 states with 16 GiB), where it is
            ``"gmrf"`` whatever the number of categories: slower with many categories (one
            sparse factorisation of the whole state space per observed stick; a 316 x 317 grid,
            radius 3, 50 categories, 2,000 transitions: one fit of 4 actions in 139 s, 3.6 GB
            resident), but it runs.
        **kwargs
            Passed on to the constructor (``max_iter``, ``tol``, ``learn_mean``, ``scale``,
            ...).

        Returns
        -------
        CorrelatedTransitionModel

        Examples
        --------
        >>> import gymnasium
        >>> from corrpriors.envs import from_gymnasium
        >>> mdp = from_gymnasium(gymnasium.make("FrozenLake-v1", map_name="4x4"))
        >>> belief = CorrelatedTransitionModel.for_mdp(mdp)
        >>> belief.n_categories            # the 3 x 3 window of moves and one "other" (jumps)
        10
        """
        from ...kernels import SquaredExponential

        if not (hasattr(mdp, "n_states") and hasattr(mdp, "n_actions")):
            raise TypeError(f"mdp: expected a TabularMDP or EnvInfo, got {type(mdp).__name__}")
        S, A = int(mdp.n_states), int(mdp.n_actions)
        coords = getattr(mdp, "coordinates", None)
        if coords is None:
            raise ValueError(f"mdp: {getattr(mdp, 'name', 'the MDP')} has no state coordinates; "
                             "give features (corrpriors.envs.from_gymnasium(env, features=...)) "
                             "or use a DirichletTransitionModel")
        coords = check_array(coords, "mdp.coordinates", ndim=2)
        integral = bool(np.all(coords == np.round(coords)))
        check_boundary(boundary, "boundary")
        if encoding is None:
            encoding = "relative" if integral else "absolute"
        if encoding == "relative":
            if not integral:
                raise ValueError("mdp.coordinates: expected integer coordinates for the relative "
                                 "encoding (displacements between states); use "
                                 "encoding='absolute' for real-valued features")
            if boundary is None:
                boundary = getattr(mdp, "boundary", None)
            if boundary is None:
                boundary = "stay" if getattr(mdp, "shape", None) is not None else "exclude"
            if category_order not in ("nearest", "lexicographic"):
                raise ValueError(f"category_order: expected 'nearest' or 'lexicographic', got "
                                 f"{category_order!r}")
            icoords = integer_coordinates(coords, "mdp.coordinates")
            cmap: CategoryMap | WindowCategoryMap
            if _resolve_sparse(kwargs.get("sparse"), S):   # no (S, S) arrays
                cmap = window_category_map(icoords, radius, boundary=boundary,
                                           other_pooling=other_pooling, order=category_order)
            else:
                cmap = displacement_category_map(icoords, radius,
                                                 boundary=boundary, other_pooling=other_pooling)
                if category_order == "nearest":
                    assert isinstance(cmap, CategoryMap)
                    cmap = _nearest_first(cmap, coords.shape[1], radius)
        elif encoding == "absolute":
            if boundary not in (None, "exclude"):
                raise ValueError(f"boundary: the absolute encoding has no moves to truncate; "
                                 f"expected None or 'exclude', got {boundary!r}")
            _check_model_memory(S, A, S, None)   # before the map's (S, S) arrays
            cmap = identity_category_map(S)
        else:
            raise ValueError(f"encoding: expected 'relative' or 'absolute', got {encoding!r}")
        _check_model_memory(S, A, cmap.n_categories, radius if encoding == "relative" else None)
        scales = [check_positive(v, "lengthscale") for v in np.atleast_1d(lengthscale)]
        kwargs.update(_scale_selection(selection, kwargs))
        if len(scales) > 1 and "selection" not in kwargs:
            raise ValueError(f"lengthscale: several candidates need selection='collapsed' or "
                             f"'elbo', got selection={selection!r}")
        if prior == "auto":
            prior = _auto_prior(S, cmap.n_categories)
        if prior == "dense":
            priors = {v: SquaredExponential(lengthscale=float(v)).bind(coords=coords)
                      for v in scales}
        elif prior == "gmrf":
            priors = _gmrf_precisions(coords, integral, scales)
        else:
            raise ValueError(f"prior: expected 'auto', 'dense' or 'gmrf', got {prior!r}")
        chosen: Any = priors if "selection" in kwargs else priors[scales[0]]
        key = "covariance" if prior == "dense" else "precision"
        if _resolve_sparse(kwargs.get("sparse"), S):   # the layer's defaults: off (dense only)
            concentration = None if concentration is _AUTO else concentration
            contamination_prior = None if contamination_prior is _FLAT else contamination_prior
            distinct_prior = None if distinct_prior is _FLAT else distinct_prior
            support_prior = None if support_prior is _EVEN else support_prior
        if concentration is None and support_prior is _EVEN:
            support_prior = None
        return cls(S, A, category_map=cmap, **{key: chosen}, concentration=concentration,
                   contamination_prior=contamination_prior,
                   distinct_prior=None if concentration is None else distinct_prior,
                   support_prior=support_prior, **kwargs)

    @property
    def n_categories(self) -> int:
        """K, the number of categories per state."""
        return self.category_map.n_categories

    @property
    def scale_(self) -> FloatArray:
        r"""Learned scales :math:`\theta_a`, ndarray of shape (A,)."""
        self.refit()
        return np.array([m.scale_ for m in self.models_])

    def refit(self, actions: Any = None) -> CorrelatedTransitionModel:
        """Fit every action's model whose counts changed since its last fit (lazy, warm).

        The actions' fits are independent; with ``n_jobs`` they run in parallel on
        ``backend``, scheduled fit by fit, and give the same numbers as one after the other. With a layer
        (``concentration`` or ``contamination_prior``) every refit is the layer's (all actions).

        Parameters
        ----------
        actions : sequence of int, optional
            Only these actions (default: all).

        Returns
        -------
        self
        """
        which = range(self.n_actions) if actions is None else _check_actions(actions, self.n_actions)
        if self._cache.get("version") == self._version:
            return self
        self.fit_log_ = []
        if self._layer is not None:
            self._layer.refit(self)
            self._cache = {"version": self._version}
            return self
        todo = [a for a in which if self._fitted_versions[a] != self._action_versions[a]]
        self._fit_actions(dict.fromkeys(todo))
        for a in todo:
            self._fitted_versions[a] = self._action_versions[a]
        if actions is None:
            self._cache = {"version": self._version}
        return self

    def _fit_actions(self, tables: dict[int, FloatArray | None]) -> None:
        """Fit (or select) the models of the actions ``tables`` names (on ``backend``).

        ``tables[a]``: the next-state counts of action ``a`` to fit, ndarray of shape (S, S)
        (the layer's table counts), or ``None`` for its observed counts.
        """
        import warnings

        from ...exceptions import ConvergenceWarning

        cmap = self.category_map
        censored = isinstance(cmap, TruncatedCategoryMap) or getattr(cmap, "censored", False)
        if not self.sparse and any(v is None for v in tables.values()):
            assert isinstance(cmap, CategoryMap)   # dense storage has a dense map
            cat_counts = cmap.aggregate(self._counts.transpose(1, 0, 2))   # (A, S, K)
        tasks = []
        for a, table in tables.items():
            raw: Any
            if table is not None:
                assert isinstance(cmap, CategoryMap)   # the layer needs dense storage
                counts, raw = cmap.aggregate(table), table
            elif self.sparse:
                pairs = self._action_pairs(a)
                counts, raw = aggregate_pairs(cmap, *pairs), pairs
            else:
                counts, raw = cat_counts[a], self._counts[:, a, :]
            tasks.append(_ActionTask(a, counts, cmap if censored else None,
                                     raw if censored else None, self.impute_rounds,
                                     self.models_[a],
                                     None if self._searches is None else self._searches[a]))
        # the longest actions of the last refit first (the rest is scheduled fit by fit)
        tasks.sort(key=lambda t: -self._action_seconds[t.action])
        log: list[dict] = []
        with warnings.catch_warnings():   # (threads share the filters: set them here)
            warnings.simplefilter("ignore", ConvergenceWarning)
            results = run_generators([_action_steps(t) for t in tasks], self.n_jobs,
                                     self.backend, log)
        for entry in log:
            unit = entry.pop("unit")
            entry["action"] = tasks[unit].action
            results[unit].seconds += entry["end"] - entry["start"]
        self.fit_log_.extend(log)
        for task, res in zip(tasks, results):
            a = task.action
            self.models_[a] = res.model
            if self._searches is not None and self.selected_ is not None:
                assert res.searches is not None
                self._searches[a] = res.searches
                self.selected_[a] = res.selected
            self.n_fits_ += res.n_fits
            self.fit_seconds_ += res.seconds
            self._action_seconds[a] = res.seconds
            self.n_unconverged_ += int(not res.model.converged_)

    def action_mean(self, action: int) -> Any:
        """Posterior-mean next-state probabilities of one action, ndarray of shape (S, S)
        (sparse storage: a :class:`BackgroundTransitions` with one action).

        Refits only that action's model (if its counts changed; with a layer: all actions).
        """
        a = check_int(action, "action", 0, self.n_actions - 1)
        if self._layer is not None:
            return self.mean()[:, a, :]
        self.refit([a])
        q = self.models_[a].probs(method=self.probs_method, rng=self.mc_rng)
        if self.sparse:
            return self._tables(q[None], [a])
        return self._to_next_states(q, a)

    def _to_next_states(self, q: FloatArray, a: int) -> FloatArray:
        """Category probabilities (..., S, K) of action ``a`` -> next-state ones (..., S, S).

        With a per-pair layer (a finite concentration) the far jumps are spread by the pooled
        destinations only: the pair's own observations enter through the layer, not twice.
        """
        cmap = self.category_map
        assert isinstance(cmap, CategoryMap)   # dense storage
        if cmap.is_identity:
            return q
        return cmap.next_state_probs(q, cmap.other_weights(*self._far_evidence(a)))

    def _layer_counts(self) -> FloatArray:
        """The counts (S, A, S) every pair's Dirichlet of the per-pair layer conditions on (and
        its hyper-parameters' posterior): the observed counts (a transfer belief adds the other
        tasks' counts as a power prior).
        """
        return self._counts

    def _far_evidence(self, a: int) -> tuple[FloatArray, FloatArray]:
        """What spreads action ``a``'s "other" mass over the far states: the pair's own counts
        (S, S) (zero with a per-pair layer) and the far jumps into each state (S,), pooled.
        """
        per_pair = self._layer is not None and bool(np.isfinite(self._layer.lattice).any())
        own = np.zeros((self.n_states, self.n_states)) if per_pair else self._counts[:, a, :]
        return own, self._far

    def _tables(self, q: FloatArray, actions: list[int]) -> Any:
        """Category probabilities ``q`` (len(actions), S, K) to a sparse table."""
        return next_state_tables(self.category_map, q,
                                 [self._action_pairs(a) for a in actions], self._far)

    def update(self, states: Any, actions: Any, next_states: Any) -> CorrelatedTransitionModel:
        """Accumulate observed transitions ``(states[t], actions[t]) -> next_states[t]``.

        Parameters
        ----------
        states, actions, next_states : array_like of shape (T,) or scalars
            Integer indices.

        Returns
        -------
        self
        """
        super().update(states, actions, next_states)   # validates
        s = np.atleast_1d(np.asarray(states)).astype(np.int64)      # validated above
        s2 = np.atleast_1d(np.asarray(next_states)).astype(np.int64)
        if self.sparse:   # where far jumps led (pooling)
            self._far += far_destinations_pairs(self.category_map, s, s2, np.ones(s.size))
            return self
        assert isinstance(self.category_map, CategoryMap)   # dense storage has a dense map
        far = self.category_map.outside[s, s2]
        self._far += np.bincount(s2[far], minlength=self.n_states)
        return self

    def set_counts(self, counts: Any) -> CorrelatedTransitionModel:
        """Replace the data by a count array.

        Parameters
        ----------
        counts : array_like of shape (S, A, S)
            Non-negative integer counts.

        Returns
        -------
        self
        """
        super().set_counts(counts)
        if self.sparse:
            pairs = [self._action_pairs(a) for a in range(self.n_actions)]
            self._far = np.zeros(self.n_states)
            for p in pairs:
                self._far += far_destinations_pairs(self.category_map, *p)
            return self
        assert isinstance(self.category_map, CategoryMap)
        self._far = self.category_map.far_destinations(np.moveaxis(self._counts, 1, 0))
        return self

    def category_probs(self) -> FloatArray:
        """Posterior category probabilities per action, ndarray of shape (A, S, K)."""
        self.refit()
        return self._current_category_probs()

    def _current_category_probs(self) -> FloatArray:
        """:meth:`category_probs` of the current fits (no refit), ndarray of shape (A, S, K)."""
        return np.stack([m.probs(method=self.probs_method, rng=self.mc_rng) for m in self.models_])

    def mean(self) -> Any:
        """Posterior-mean (``probs_method``) transition model, ndarray of shape (S, A, S)
        (sparse storage: a :class:`BackgroundTransitions`).
        """
        self.refit()
        if "mean" not in self._cache:
            q = self.category_probs()
            if self.sparse:
                self._cache["mean"] = self._tables(q, list(range(self.n_actions)))
            else:
                base = np.stack([self._to_next_states(q[a], a) for a in range(self.n_actions)],
                                axis=1)
                self._cache["mean"] = base if self._layer is None else \
                    self._layer.mean(self._layer_counts(), base)
        return self._cache["mean"] if self.sparse else self._cache["mean"].copy()

    def sample_many(self, n: int, *, rng: SeedLike) -> Any:
        r"""``n`` joint draws from :math:`q(\psi)` mapped to models, shape (n, S, A, S)
        (sparse storage: a list of ``n`` :class:`BackgroundTransitions`, drawn with the same
        random numbers as the dense path).
        """
        n = _check_n(n)
        gen = as_generator(rng)
        self.refit()
        if self.sparse:
            q = np.stack([model.sample_probs(n, rng=gen, method=self.draw_method)
                          for model in self.models_], axis=1)
            actions = list(range(self.n_actions))
            return [self._tables(q[m], actions) for m in range(n)]
        out = self._base_draws(n, gen)
        if self._layer is not None:
            out = self._layer.draws(self._layer_counts(), out, rng=gen)
        return out

    def _base_draws(self, n: int, gen: np.random.Generator, *, mirrored: bool = False) -> FloatArray:
        r"""``n`` draws of the correlated model itself (before any layer), (n, S, A, S).

        With ``mirrored``, ``2 n`` draws (2n, S, A, S): the ``n`` joint draws :math:`\psi` of
        every action's sticks, then their mirror images :math:`2 \bar\psi - \psi` about the
        posterior mean (draws of the same Gaussian :math:`q(\psi)`: antithetic pairs, draw ``i``
        and ``n + i``; with ``draw_method="calibrated"``, a mixture over scales, ``2 n``
        independent draws).
        """
        m, S, A = (2 if mirrored else 1) * n, self.n_states, self.n_actions
        # the draws, one action's sticks, probabilities and next-state arrays (3 of each), and
        # the layer's draws on them (measured: 1.3 more per draw)
        per_draw = 1.0 + 3.0 * (self.n_categories + S) / (A * S) + (2.0 if self._layer is not None else 0.0)
        check_dense_memory(m * per_draw, S, A, f"{m:,} posterior draws", DRAWS_ADVICE)
        out = np.empty((m, S, A, S))
        for a, model in enumerate(self.models_):
            if self.draw_method != "vi":   # (a mixture over scales: independent pairs)
                out[:, :, a, :] = self._to_next_states(psi_to_pi(model.sample_psi(
                    out.shape[0], rng=gen, method=self.draw_method)), a)
                continue
            psi = model.sample_psi(n, rng=gen)
            if mirrored:
                psi = np.concatenate([psi, 2.0 * model.result_.psi_mean[None] - psi])
            out[:, :, a, :] = self._to_next_states(psi_to_pi(psi), a)
        return out

    def _sqrt_values(self, n: int, gen: np.random.Generator) -> FloatArray:
        r"""``n`` independent values whose mean estimates :math:`E[\sqrt P]`, (n, S, A, S), each
        from two posterior draws: the average of an antithetic pair (:meth:`_base_draws`)
        of :math:`\sqrt P`, or with the per-pair layer of its Rao-Blackwellised values
        (:meth:`._layer._Layer.sqrt_draws`). The base's posterior uncertainty is most of the
        draws' variance, and its part odd in :math:`\psi - \bar\psi` cancels in a pair.
        """
        base = self._base_draws(n, gen, mirrored=True)
        x = np.sqrt(base) if self._layer is None else \
            self._layer.sqrt_draws(self._layer_counts(), base, rng=gen)
        return 0.5 * (x[:n] + x[n:])

    def hellinger_estimate(self, n_draws: int = HELLINGER_DRAWS, *, rtol: float = HELLINGER_RTOL,
                           rng: SeedLike = None) -> FloatArray:
        r"""The Bayes estimate under the squared Hellinger loss, ndarray of shape (S, A, S).

        Minimising :math:`E[\sum_j (\sqrt{q_j} - \sqrt{P_j})^2 \mid \text{data}]` over the
        simplex gives :math:`q_j \propto E[\sqrt{P_j}]^2` (:mod:`._hellinger`). The paper's
        model has no closed form for :math:`E[\sqrt{P_j}]` (logistic-normal sticks, then the
        category map's renormalisation and far-jump spread), so it is the average of
        :math:`\sqrt P` over posterior draws, taken in antithetic pairs (a draw of the sticks and
        its mirror image about their posterior mean, :meth:`_sqrt_values`). With the per-pair
        layer the draws are Rao-Blackwellised: every draw of the correlated base contributes
        the closed-form :math:`E[\sqrt P]` of the layer's Dirichlet given it, mixed over the
        concentrations, and the sparse-support hypothesis its closed form with its posterior
        weight (:meth:`._layer._Layer.sqrt_draws`): the mixing happens inside the expectation,
        before squaring. The pairs stop once their noise is small against the estimate's
        expected loss (:func:`~._hellinger.average_sqrt_draws`); :attr:`hellinger_draws_` is
        how many draws were taken.

        Parameters
        ----------
        n_draws : int, default=:data:`~._hellinger.HELLINGER_DRAWS`
            The most posterior draws (rounded up to an even number, whole pairs).
        rtol : float, default=:data:`~._hellinger.HELLINGER_RTOL`
            Stop once the Monte-Carlo noise costs at most this fraction of the expected squared
            Hellinger loss (summed over the rows); 0 takes every one of ``n_draws``.
        rng : numpy.random.Generator or seed
            Required (a ``ValueError`` names it when missing).

        Returns
        -------
        ndarray of shape (S, A, S)
            Rows on the simplex.
        """
        gen = as_generator(_required(rng))
        if self.sparse:
            raise ValueError("hellinger_estimate: not available with sparse storage "
                             "(sparse=True, or from SPARSE_FROM_STATES states on)")
        pairs = -(-check_int(n_draws, "n_draws", low=1) // 2)
        self.refit()
        size = 2 * self.n_states * self.n_actions * self.n_states      # floats of one pair
        r, done = average_sqrt_draws(lambda m: self._sqrt_values(m, gen), pairs, rtol=rtol,
                                     chunk=chunk_draws(size), first=FIRST_DRAWS // 2)
        self.hellinger_draws_ = 2 * done
        return from_sqrt_mean(r)

    @property
    def concentration_weights_(self) -> FloatArray | None:
        """Posterior weights of the concentrations per action, (A, L) (None without a layer)."""
        if self._layer is None:
            return None
        self.refit()
        return self._layer.weights.copy()

    @property
    def concentrations_(self) -> FloatArray | None:
        """The lattice of concentrations, (L,) (None without a layer)."""
        return None if self._layer is None else self._layer.lattice.copy()

    @property
    def distinct_(self) -> tuple[float, float] | None:
        """Beta fit (mean, variance) of the distinctness' grid posterior (None without ``distinct_prior``)."""
        if self._layer is None or self._layer.distinct is None:
            return None
        self.refit()
        return self._layer.delta_beta

    @property
    def contamination_(self) -> tuple[float, float] | None:
        """Beta posterior of the contamination given that there is some.

        None without ``contamination_prior``; :attr:`contamination_absent_` is the probability
        that there is none.
        """
        if self._layer is None or self._layer.prior is None:
            return None
        self.refit()
        return self._layer.beta

    @property
    def support_weights_(self) -> FloatArray | None:
        """Posterior probability of the sparse-support hypothesis per action, (A,) (None without
        ``support_prior``).
        """
        if self._layer is None or self._layer.support is None:
            return None
        self.refit()
        return self._layer.support_weights.copy()

    @property
    def contamination_absent_(self) -> float | None:
        """Posterior probability of no contamination (None without ``contamination_prior``)."""
        if self._layer is None or self._layer.prior is None:
            return None
        self.refit()
        return self._layer.absent
