r"""Hyper-parameter selection by a bound on the evidence: prior scales and kernels.

Two criteria, both lower bounds of :math:`\log p(X)` and so comparable across priors:

``"collapsed"``
    :meth:`CorrelatedMultinomial.collapsed_bound`, :math:`E_q[\log p(X \mid \psi)] - KL(q \| p)`,
    the Polya-Gamma variables integrated out. Recommended.
``"elbo"``
    The mean-field ELBO of the Polya-Gamma augmented model (the paper's). Its gap to
    :math:`\log p(X)` grows with the prior scale :math:`\theta`, so on scarce data it prefers
    ever smaller scales (the "collapse" of variational EM); fine for comparing kernels at a fixed
    scale, biased for choosing :math:`\theta`.

:class:`ScaleSearch` climbs a log lattice of scales :math:`\theta_j = 10^{j\,\mathrm{step}}` in
``[low, high]`` from the previous choice (so a sequence of growing data sets, as in system
identification or PSRL, costs a few warm-started fits per data set); :func:`select_scale` is the
one-shot form and :func:`select_kernel` ranks candidate covariances, optionally each at its best
scale.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Generator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .._validation import check_positive
from .model import CorrelatedMultinomial

#: The criteria understood by every selection function.
CRITERIA = ("collapsed", "elbo")


def check_criterion(criterion: str) -> str:
    """Validate a criterion name (one of :data:`CRITERIA`)."""
    if criterion not in CRITERIA:
        raise ValueError(f"criterion: expected one of {CRITERIA}, got {criterion!r}")
    return criterion


def criterion_value(model: CorrelatedMultinomial, criterion: str) -> float:
    """The value of ``criterion`` for a fitted model (higher is better).

    Parameters
    ----------
    model : CorrelatedMultinomial
        Fitted.
    criterion : {"collapsed", "elbo"}

    Returns
    -------
    float
    """
    if check_criterion(criterion) == "elbo":
        return float(model.elbo_)
    return float(model.collapsed_bound())


def clone_estimator(estimator: CorrelatedMultinomial, **overrides: Any) -> CorrelatedMultinomial:
    """A new, unfitted estimator with the constructor parameters of ``estimator``.

    Parameters
    ----------
    estimator : CorrelatedMultinomial
    **overrides
        Constructor parameters to replace.

    Returns
    -------
    CorrelatedMultinomial
    """
    if not isinstance(estimator, CorrelatedMultinomial):
        raise TypeError(f"estimator: expected a CorrelatedMultinomial, got "
                        f"{type(estimator).__name__}")
    names = [p for p in inspect.signature(type(estimator).__init__).parameters if p != "self"]
    params = {p: getattr(estimator, p) for p in names}
    unknown = set(overrides) - set(params)
    if unknown:
        raise TypeError(f"unknown CorrelatedMultinomial parameters: {sorted(unknown)}")
    params.update(overrides)
    return type(estimator)(**params)


@dataclass(frozen=True)
class ScaleSelection:
    r"""Outcome of a scale search.

    Attributes
    ----------
    scale : float
        The chosen :math:`\theta`.
    value : float
        The criterion at the chosen scale.
    model : CorrelatedMultinomial
        The model fitted at the chosen scale (owned by the search; refitted by later
        :meth:`ScaleSearch.select` calls). Its ``scale_selected_`` is ``True``, so its
        :meth:`~CorrelatedMultinomial.credible_interval` integrates over the scale (the choice
        was made from the data) unless asked for ``hyper="fixed"``.
    values : dict of float to float
        The criterion at every scale evaluated in this call.
    """

    scale: float
    value: float
    model: CorrelatedMultinomial
    values: dict = field(repr=False)


#: The most lattice points :class:`ScaleSearch` may span (a climb visits and keeps a fit per
#: point; the default lattice has 25).
MAX_LATTICE_POINTS = 10_000


def check_lattice_points(low: float, high: float, step: float, *, step_name: str = "step",
                         range_name: str = "low and high", names: str | None = None) -> float:
    """Return the number of lattice points of step ``step`` decades in ``[low, high]``, or raise.

    Counted in log space, ``(log10 high - log10 low) / step + 1``, so that no ratio ``high / low``
    overflows. ``low``, ``high`` and ``step`` are positive (checked by the caller).

    Raises
    ------
    ValueError
        More than :data:`MAX_LATTICE_POINTS`; the message starts with ``names`` (default
        ``step_name``) and names the range ``range_name``.
    """
    decades = math.log10(high) - math.log10(low)
    points = decades / step + 1
    if not points <= MAX_LATTICE_POINTS:
        count = (f"{points:,.0f}" if points < 1e15 else f"{points:.3g}" if points < math.inf
                 else f"more than {np.finfo(float).max:.3g}")
        raise ValueError(f"{names or step_name}: expected at most {MAX_LATTICE_POINTS:,} lattice points "
                         f"between {range_name} ({decades:g} decades), got {count} with {step_name} "
                         f"{step:g}; every visited point is fitted and kept")
    return points


class ScaleSearch:
    r"""Hill climb of a criterion over a log lattice of prior scales, warm-started across calls.

    The lattice is :math:`\theta_j = 10^{j\,\mathrm{step}}` for the integers ``j`` with
    :math:`\theta_j \in [\mathrm{low}, \mathrm{high}]`. Each :meth:`select` starts at the previous
    choice (initially the lattice point nearest ``start``), evaluates its smaller neighbour and,
    only if that one is not better, its larger neighbour, and moves in the better direction while
    the criterion improves. Every visited lattice point keeps its own fixed-scale model,
    warm-started from its previous fit, so repeated calls on growing data cost a few short fits.

    The smaller scale is tried first because its fit is the cheaper one (a stronger prior: CAVI
    converges in fewer iterations; 9-15 against 18-23 psi steps on the 100 x 100 tunnel grid),
    and when it improves the criterion the larger one is not fitted at all. On a criterion that
    is unimodal along the lattice this returns the same lattice point as comparing both
    neighbours; in general, like any hill climb, it returns a local maximum.

    :meth:`climb` is the same search as a generator of fit jobs (:class:`LatticeFit`), so that
    a scheduler can run the fits of several searches at once, elsewhere
    (:func:`corrpriors.applications.transitions._parallel.run_generators`).

    Parameters
    ----------
    estimator : CorrelatedMultinomial
        Template: its prior (covariance, mean, learned means, tolerances) is used; ``scale``,
        ``learn_scale`` and ``scale_prior`` are replaced by the lattice's fixed scales.
    criterion : {"collapsed", "elbo"}
    low, high : float
        Range of scales, ``0 < low <= high``.
    step : float
        Lattice spacing in decades (default a quarter decade).
    start : float
        Where the first climb starts.

    Attributes
    ----------
    models_ : dict of int to CorrelatedMultinomial
        The fitted model of every visited lattice index ``j``.
    n_fits_ : int
        Fits performed so far.
    """

    def __init__(self, estimator: CorrelatedMultinomial, *, criterion: str = "collapsed",
                 low: float = 1e-2, high: float = 1e4, step: float = 0.25, start: float = 1.0):
        check_criterion(criterion)
        for name, value in (("low", low), ("high", high), ("step", step), ("start", start)):
            check_positive(value, name)
        if not low <= high:
            raise ValueError(f"low, high: expected low <= high, got low={low!r}, high={high!r}")
        check_lattice_points(low, high, step)
        self.estimator = clone_estimator(estimator)
        self.criterion = criterion
        self.step = float(step)
        self.j_min = math.ceil(math.log10(low) / self.step - 1e-9)
        self.j_max = math.floor(math.log10(high) / self.step + 1e-9)
        if self.j_min > self.j_max:
            raise ValueError(f"low, high: the range [{low:g}, {high:g}] holds no lattice point "
                             f"10^(j * {step:g})")
        j0 = round(math.log10(start) / self.step)
        self._start = min(max(j0, self.j_min), self.j_max)
        self.models_: dict[int, CorrelatedMultinomial] = {}
        self.n_fits_ = 0

    def scale_of(self, j: int) -> float:
        """The scale of lattice index ``j``."""
        return 10.0 ** (j * self.step)

    def _value(self, j: int, counts: np.ndarray) -> Generator[LatticeFit, Any, float]:
        """The criterion at lattice point ``j`` (steps of :meth:`climb`: the fit, if needed)."""
        model = self.models_.get(j)
        init = None
        if model is None:
            model = self.models_[j] = clone_estimator(
                self.estimator, scale=self.scale_of(j), learn_scale=False, scale_prior=None,
                warm_start=True)
            # a new lattice point starts from the nearest one already fitted to these counts
            # (the same q up to the scale), not from the prior
            near = [i for i, m in self.models_.items()
                    if i != j and hasattr(m, "counts_") and np.array_equal(m.counts_, counts)]
            if near:
                init = _extrapolated_start(j, {i: self.models_[i].result_ for i in near})
        if hasattr(model, "counts_") and np.array_equal(model.counts_, counts):
            return criterion_value(model, self.criterion)
        fitted, value = yield LatticeFit(model, counts, init, self.criterion)
        self.models_[j] = fitted   # (a copy, if the fit ran in another process)
        self.n_fits_ += 1
        return value

    def select(self, counts: Any) -> ScaleSelection:
        """Climb from the previous choice and return the best lattice scale for ``counts``.

        Parameters
        ----------
        counts : array_like of shape (C, K)

        Returns
        -------
        ScaleSelection
        """
        return run_steps(self.climb(counts))

    def climb(self, counts: Any) -> Generator[LatticeFit, Any, ScaleSelection]:
        """:meth:`select` as a sequence of steps, for a scheduler that runs the fits elsewhere.

        A generator: it yields one :class:`LatticeFit` per fit the climb needs (each decides
        the next), expects the job's outcome sent back, and returns the
        :class:`ScaleSelection`. :func:`run_steps` runs it in place (this is :meth:`select`);
        a scheduler may instead run the jobs of several climbs at once, on threads, processes
        or a cluster -- the numbers are the same, as every job is a pure function of its
        inputs.

        Parameters
        ----------
        counts : array_like of shape (C, K)

        Returns
        -------
        generator of LatticeFit, returning ScaleSelection
        """
        x = np.asarray(counts)
        points = _climb_points(self._start, self.j_min, self.j_max)
        try:
            j = next(points)
            while True:
                j = points.send((yield from self._value(j, x)))
        except StopIteration as stop:
            j, values = stop.value
        self._start = j
        return ScaleSelection(scale=self.scale_of(j), value=values[j], model=self.models_[j],
                              values={self.scale_of(i): v for i, v in sorted(values.items())})


def lattice_climb(value: Any, start: int, j_min: int, j_max: int) -> tuple[int, dict]:
    """Hill climb of ``value`` over the integers ``j_min..j_max`` from ``start``, smaller first.

    Evaluates ``start``, its smaller neighbour and, only if that one is not better, its larger
    neighbour, then moves in the better direction while the value improves (see
    :class:`ScaleSearch`: the smaller scale's fit is the cheaper one). On a function that is
    unimodal along the lattice it returns the lattice maximum; in general a local maximum.

    Parameters
    ----------
    value : callable
        ``value(j) -> float`` for an int ``j`` (called once per point).
    start : int
        Where the climb starts (within ``[j_min, j_max]``).
    j_min, j_max : int
        The lattice's ends.

    Returns
    -------
    best : int
    values : dict of int to float
        Every point evaluated.
    """
    steps = _climb_points(int(start), j_min, j_max)
    try:
        j = next(steps)
        while True:
            j = steps.send(value(j))
    except StopIteration as stop:
        return stop.value


def _climb_points(start: int, j_min: int, j_max: int) -> Generator[int, float, tuple[int, dict]]:
    """:func:`lattice_climb` as a generator: yields the points to evaluate, receives their
    values, returns ``(best, values)`` (the one copy of the climb; :meth:`ScaleSearch.climb`
    drives it with fit jobs).
    """
    j = start
    values = {j: (yield j)}
    direction = 0
    for nb in (j - 1, j + 1):   # the smaller scale first: see ScaleSearch's notes
        if j_min <= nb <= j_max:
            values[nb] = yield nb
            if values[nb] > values[j]:
                direction = nb - j
                break
    while direction:
        j += direction
        nxt = j + direction
        if not j_min <= nxt <= j_max:
            break
        values[nxt] = yield nxt
        if not values[nxt] > values[j]:
            break
    return j, values


@dataclass
class LatticeFit:
    """One fixed-scale fit of a :class:`ScaleSearch` lattice point: a picklable job.

    Calling it fits ``model`` to ``counts`` from ``init`` (in place) and returns
    ``(model, value)``, the fitted model and its ``criterion``.

    Attributes
    ----------
    model : CorrelatedMultinomial
        The lattice point's estimator (fixed scale, warm start from its previous fit).
    counts : ndarray of shape (C, K)
    init : VIResult or None
        Start (:func:`_extrapolated_start` from the points already fitted to ``counts``).
    criterion : {"collapsed", "elbo"}
    """

    model: CorrelatedMultinomial
    counts: np.ndarray
    init: Any
    criterion: str

    def __call__(self) -> tuple[CorrelatedMultinomial, float]:
        """Fit; ``(model, criterion value)``."""
        self.model.fit(self.counts, init=self.init)
        self.model.scale_selected_ = True  # chosen from the data: credible_interval integrates it
        return self.model, criterion_value(self.model, self.criterion)


def run_steps(steps: Generator[Any, Any, Any]) -> Any:
    """Run a generator of jobs in place: call each yielded job and send its outcome back.

    Parameters
    ----------
    steps : generator
        Yields callables (jobs, e.g. :class:`LatticeFit`), receives their return values.

    Returns
    -------
    The generator's return value.
    """
    try:
        job = next(steps)
        while True:
            job = steps.send(job())
    except StopIteration as stop:
        return stop.value


def _extrapolated_start(j: int, fitted: dict[int, Any]) -> Any:
    r"""Warm start of lattice point ``j`` from the fits ``fitted`` (lattice index -> VIResult).

    The nearest fit's (:math:`i_1`) result; when another fit :math:`i_2` lies beyond it (on the
    side away from ``j``, as in a climb), the tilts are extrapolated log-linearly in the lattice
    index, :math:`\log w_j = \log w_{i_1} + (\log w_{i_1} - \log w_{i_2})(j - i_1)/(i_1 - i_2)`
    (positive, as tilts are; the change capped at a factor :math:`e^5`), which follows the
    fixed point's drift with the scale and starts CAVI closer to it (on the 100 x 100 tunnel
    grid, 3 fewer stick updates per extrapolated fit, of 23-24). Only the start changes: the
    fit iterates to its tolerance as before.
    """
    order = sorted(fitted, key=lambda i: abs(i - j))
    i1 = order[0]
    start = fitted[i1]
    same_side = [i for i in order[1:] if (i - i1) * (i1 - j) > 0]
    if not same_side:
        return start
    i2 = same_side[0]
    w1, w2 = np.asarray(start.w, dtype=float), np.asarray(fitted[i2].w, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_ratio = np.log(w1) - np.log(w2)
    t = (j - i1) / (i1 - i2)
    ok = (w1 > 0) & (w2 > 0) & np.isfinite(log_ratio)
    w = np.where(ok, w1 * np.exp(np.clip(t * np.where(ok, log_ratio, 0.0), -5.0, 5.0)), w1)
    return replace(start, w=w)


def select_scale(estimator: CorrelatedMultinomial, counts: Any, *, criterion: str = "collapsed",
                 low: float = 1e-2, high: float = 1e4, step: float = 0.25,
                 start: float = 1.0) -> ScaleSelection:
    r"""Choose the prior scale :math:`\theta` of ``estimator`` by a criterion on ``counts``.

    A one-shot :class:`ScaleSearch` (see there for the lattice and the climb). Unlike EM on the
    ELBO (``learn_scale=True``), the default ``criterion="collapsed"`` does not drive
    :math:`\theta` to zero on scarce data.

    Parameters
    ----------
    estimator : CorrelatedMultinomial
        Template for the prior (it is not modified).
    counts : array_like of shape (C, K)
    criterion : {"collapsed", "elbo"}
    low, high, step, start : float
        Lattice range, spacing (decades) and starting point.

    Returns
    -------
    ScaleSelection

    Examples
    --------
    >>> import numpy as np
    >>> from corrpriors import CorrelatedMultinomial, select_scale
    >>> cov = np.exp(-np.subtract.outer(np.arange(6.0), np.arange(6.0)) ** 2 / 4)
    >>> counts = np.array([[5, 1], [4, 2], [0, 0], [1, 4], [0, 6], [1, 5]])
    >>> sel = select_scale(CorrelatedMultinomial(covariance=cov), counts)
    >>> 1e-2 <= sel.scale <= 1e4
    True
    """
    return ScaleSearch(estimator, criterion=criterion, low=low, high=high, step=step,
                       start=start).select(counts)


#: The keys :func:`select_kernel` accepts in ``scale_search`` (:func:`select_scale` arguments).
SCALE_SEARCH_KEYS = ("low", "high", "step", "start")


def select_kernel(counts: Any, candidates: Any, criterion: str = "elbo", *,
                  scale_search: dict | None = None,
                  **kwargs: Any) -> list[tuple[Any, CorrelatedMultinomial]]:
    r"""Fit one model per candidate covariance and rank them by a bound on the evidence.

    Both criteria bound the log evidence :math:`\log p(X)` of each prior, so they are
    comparable across kernels. ``"collapsed"`` (:meth:`CorrelatedMultinomial.collapsed_bound`)
    is the tighter one and does not favour small prior scales the way the mean-field ELBO
    does; ``"elbo"`` is the paper's.

    Parameters
    ----------
    counts : array_like of shape (C, K)
    candidates : dict of name -> covariance, or a sequence of covariances
        Arrays of shape (C, C) or bound kernels.
    criterion : {"elbo", "collapsed"}
    scale_search : dict, optional
        If given, each candidate is compared at its best scale, chosen by :func:`select_scale`
        with the same criterion and these keyword arguments (``low``, ``high``, ``step``,
        ``start``; ``{}`` for the defaults).
    **kwargs
        Passed to :class:`CorrelatedMultinomial`.

    Returns
    -------
    list of (name, fitted model)
        Sorted by the criterion, best first (names are indices for a sequence).
    """
    check_criterion(criterion)
    if scale_search is not None:
        if not isinstance(scale_search, dict):
            raise TypeError(f"scale_search: expected a dict of select_scale arguments or None, "
                            f"got {type(scale_search).__name__}")
        unknown = sorted(map(repr, set(scale_search) - set(SCALE_SEARCH_KEYS)))
        if unknown:
            raise ValueError(f"scale_search: expected keys among {SCALE_SEARCH_KEYS}, got "
                             f"{', '.join(unknown)} (the criterion is select_kernel's own)")
    items = list(candidates.items() if isinstance(candidates, dict) else enumerate(candidates))
    if not items:
        raise ValueError("candidates: expected at least one covariance")
    scored = []
    for name, cov in items:
        model = CorrelatedMultinomial(covariance=cov, **kwargs)
        if scale_search is None:
            model.fit(counts)
            scored.append((criterion_value(model, criterion), name, model))
        else:
            sel = select_scale(model, counts, criterion=criterion, **scale_search)
            scored.append((sel.value, name, sel.model))
    order = sorted(range(len(scored)), key=lambda i: -scored[i][0])
    return [(scored[i][1], scored[i][2]) for i in order]


__all__ = ["CRITERIA", "LatticeFit", "SCALE_SEARCH_KEYS", "ScaleSearch", "ScaleSelection", "check_criterion",
           "check_lattice_points", "clone_estimator", "criterion_value", "lattice_climb", "run_steps", "select_kernel",
           "select_scale"]
