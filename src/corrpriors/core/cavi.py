r"""Coordinate-ascent variational inference (CAVI) for the correlated multinomial model.

Per stick :math:`k`, :math:`\psi_{\cdot k} \sim N(\mu_k, \theta\tilde\Sigma)`,
:math:`x_{ck} \sim Bin(b_{ck}, \sigma(\psi_{ck}))`, :math:`\kappa = x - b/2`, and the mean-field
family :math:`q(\psi_{\cdot k}) = N(\lambda_k, V_k)`, :math:`q(\omega_{ck}) = PG(b_{ck}, w_{ck})`.
One *sweep* (:func:`sweep`, a pure function) goes from tilts :math:`w` and hyper-parameters
:math:`h = (\theta, \mu, \tilde\Sigma)` to

1. the psi step: :math:`q(\psi)` given :math:`E[\omega_{ck}] = b_{ck}\tanh(w_{ck}/2)/(2w_{ck})`
   (asked of the prior, :class:`~corrpriors.core.priors.GaussianPrior`);
2. the omega step: the optimal tilts :math:`w_{ck} = \sqrt{(V_k)_{cc} + \lambda_{ck}^2}`;
3. the exact ELBO (:mod:`corrpriors.core.elbo`) and the objective (ELBO plus log hyper-priors).

The M-steps (:func:`corrpriors.core.hyper_em.m_step`) map a sweep's statistics to new
hyper-parameters. Every step maximises the objective in its own block, so the plain map
:math:`x \mapsto F(x)` on the point :math:`x = (w_O, \log\theta, m)` (the learned parts only)
never lowers it; :func:`run_cavi` iterates it with the model-agnostic safeguarded Anderson driver
(:func:`corrpriors.core.fixed_point.maximise`). An accelerated point is a legitimate variational
point too (any tilts define a :math:`q(\omega)`, any :math:`\theta > 0` a prior), so its objective
is exact, and a worse one is rejected.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .._threads import blas_threads
from .._typing import FloatArray
from . import hyper_em
from .elbo import elbo_value, log_binomial_coefficients, optimal_tilts
from .fixed_point import FixedPointOptions, FixedPointTrace, iterate
from .polya_gamma import pg_mean_unchecked
from .priors.base import GaussianPrior, PsiStep, StickLayout, build_layout, check_prior_scale, check_scale_prior
from .results import VIResult
from .stick_breaking import count_statistics

_LEARN_MEAN = (None, "constant", "full")


@dataclass(frozen=True)
class CAVIOptions:
    r"""What a fit learns and how it iterates (validated once, here).

    Attributes
    ----------
    learn_scale : bool
        EM for :math:`\theta`.
    learn_mean : {None, "constant", "full"}
    scale_prior : (shape, rate) or None
        Gamma hyper-prior on :math:`\theta` (MAP-EM).
    mean_prior_mean : ndarray of shape (K - 1,) or None
    mean_prior_std : float or None
        Normal hyper-prior on constant means.
    learn_kernel : bool
        Kernel M-step (needs a prior that supports it).
    mean_update : {"joint", "em"}
        How ``learn_mean="constant"`` updates the means: ``"joint"`` (default) maximises the
        ELBO over :math:`(q(\psi), m)` together in the psi step (the generalised-least-squares
        mean of the pseudo-observations, :func:`~corrpriors.core.priors.joint_constant_mean`), which
        converges in a few iterations; ``"em"`` is the separate M-step after the psi step (the
        paper's scheme: the same fixed points, reached much more slowly when the prior couples many
        covariates).
    kernel_update : {"joint", "em"}
        How ``learn_kernel`` updates the kernel (and, with ``learn_scale``, the scale):
        ``"joint"`` (default) maximises the ELBO over :math:`(q(\psi), \theta, \eta)` together
        with :math:`q(\omega)` fixed (:func:`~corrpriors.core.hyper_em.marginal_m_step`, L-BFGS-B
        on the log marginal likelihood of the pseudo-observations), which converges in tens of
        iterations; ``"em"`` is the EM M-step with :math:`q(\psi)` fixed (the closed-form scale,
        then L-BFGS-B on the kernel; the paper's scheme), which can need thousands on small
        tables. ``learn_mean="full"`` and ``mean_update="em"`` always use ``"em"``.
    iteration : FixedPointOptions
        ``max_iter``, ``tol``, ``acceleration``, ``memory``. Kernel learning and
        ``learn_mean="full"`` always iterate plainly.
    """

    learn_scale: bool = False
    learn_mean: str | None = None
    scale_prior: tuple[float, float] | None = None
    mean_prior_mean: np.ndarray | None = None
    mean_prior_std: float | None = None
    learn_kernel: bool = False
    mean_update: str = "joint"
    kernel_update: str = "joint"
    iteration: FixedPointOptions = FixedPointOptions()

    def __post_init__(self) -> None:
        if self.learn_mean not in _LEARN_MEAN:
            raise ValueError(f"learn_mean: expected one of {_LEARN_MEAN}, got {self.learn_mean!r}")
        if self.mean_update not in ("joint", "em"):
            raise ValueError(f"mean_update: expected 'joint' or 'em', got {self.mean_update!r}")
        if self.kernel_update not in ("joint", "em"):
            raise ValueError(f"kernel_update: expected 'joint' or 'em', got "
                             f"{self.kernel_update!r}")
        if not isinstance(self.iteration, FixedPointOptions):
            raise TypeError("iteration: expected a FixedPointOptions")

    @property
    def joint_mean(self) -> bool:
        r"""Whether constant means are chosen jointly with :math:`q(\psi)` in the psi step."""
        return self.learn_mean == "constant" and self.mean_update == "joint"

    @property
    def joint_kernel(self) -> bool:
        r"""Whether the kernel (and scale) M-step is the joint step with :math:`q(\psi)`."""
        return (self.learn_kernel and self.kernel_update == "joint"
                and (self.learn_mean is None or self.joint_mean))

    @property
    def constant_mean(self) -> tuple[np.ndarray, float] | None:
        """``(m0, 1 / tau^2)`` for the joint psi step, or ``None``."""
        if not self.joint_mean:
            return None
        if self.mean_prior_std is None or self.mean_prior_mean is None:
            return np.zeros(0), 0.0
        return np.asarray(self.mean_prior_mean, dtype=float), 1.0 / self.mean_prior_std ** 2

    @property
    def accelerated(self) -> bool:
        """Whether the Anderson driver may extrapolate."""
        return (self.iteration.acceleration == "anderson" and not self.learn_kernel
                and self.learn_mean != "full")


@dataclass(frozen=True)
class CountData:
    r"""The count statistics of a fit, restricted once to the observed entries.

    Attributes
    ----------
    counts : ndarray of shape (C, K)
    b, kappa : ndarray of shape (C, K - 1)
        Trials and :math:`\kappa = x - b/2` per stick.
    layout : StickLayout
        The observed entries ``b > 0``.
    b_obs, kappa_obs, x_obs : ndarray of shape (E,)
        The same on the observed entries.
    log_binom : float
        :math:`\sum\log\binom{b}{x}`.
    """

    counts: np.ndarray
    b: np.ndarray
    kappa: np.ndarray
    layout: StickLayout
    b_obs: np.ndarray
    kappa_obs: np.ndarray
    x_obs: np.ndarray
    log_binom: float

    @classmethod
    def from_counts(cls, counts: np.ndarray) -> CountData:
        """Statistics of a validated (C, K) count matrix."""
        counts = np.asarray(counts, dtype=float)
        b, kappa = count_statistics(counts)
        layout = build_layout(b > 0)
        b_obs, kappa_obs = layout.gather(b), layout.gather(kappa)
        x_obs = layout.gather(counts[:, :-1])
        return cls(counts, b, kappa, layout, b_obs, kappa_obs, x_obs,
                   log_binomial_coefficients(b_obs, x_obs))

    def restrict(self, sticks: np.ndarray) -> CountData:
        """The statistics of some sticks only (ascending indices): an independent part of the
        fit when nothing couples the sticks (``counts`` stays the whole matrix).
        """
        b, kappa = self.b[:, sticks], self.kappa[:, sticks]
        layout = build_layout(b > 0)
        b_obs, kappa_obs = layout.gather(b), layout.gather(kappa)
        x_obs = layout.gather(self.counts[:, :-1][:, sticks])
        return CountData(self.counts, b, kappa, layout, b_obs, kappa_obs, x_obs,
                         log_binomial_coefficients(b_obs, x_obs))


@dataclass(frozen=True)
class Hyper:
    r"""Hyper-parameters: scale :math:`\theta`, means (C, K - 1) and the prior structure."""

    scale: float
    mean: np.ndarray
    prior: GaussianPrior


@dataclass(frozen=True)
class Evaluation:
    r"""One sweep from (tilts, hyper-parameters).

    Attributes
    ----------
    step : PsiStep
    site : ndarray of shape (E,)
        :math:`E[\omega]` on the observed entries that defined :math:`q(\psi)`.
    hyper : Hyper
    tilts : ndarray of shape (E,)
        Optimal tilts for :math:`q(\psi)`.
    elbo, objective : float
    point : ndarray of shape (n,) or None
        The driver's point of the sweep's inputs (:func:`pack`).
    """

    step: PsiStep
    site: np.ndarray
    hyper: Hyper
    tilts: np.ndarray
    elbo: float
    objective: float
    point: np.ndarray | None = None


def log_hyper_prior(hyper: Hyper, options: CAVIOptions) -> float:
    """Log densities of the hyper-priors at ``hyper`` (0 without hyper-priors)."""
    out = 0.0
    if options.learn_scale and options.scale_prior is not None:
        out += hyper_em.log_gamma_density(hyper.scale, options.scale_prior)
    if (options.learn_mean == "constant" and options.mean_prior_std is not None
            and options.mean_prior_mean is not None):
        out += hyper_em.log_normal_density(hyper.mean[0], options.mean_prior_mean,
                                           options.mean_prior_std)
    return out


def sweep(data: CountData, hyper: Hyper, tilts: np.ndarray, options: CAVIOptions) -> Evaluation:
    """Psi step, omega step and objective from tilts (shape (E,)) and hyper-parameters."""
    site = pg_mean_unchecked(data.b_obs, tilts)
    kernel = options.learn_kernel and not options.joint_kernel  # the EM step needs every V_k
    step = hyper.prior.psi_step(data.layout, hyper.scale, hyper.mean, data.kappa, site,
                                full=kernel, reduction=kernel,
                                constant_mean=options.constant_mean)
    if step.mean is not None:
        hyper = Hyper(hyper.scale, step.mean, hyper.prior)
    mean_obs = data.layout.gather(step.psi_mean)
    var_obs = data.layout.gather(step.psi_var)
    tilts_out = optimal_tilts(mean_obs, var_obs)
    elbo = elbo_value(data.b_obs, data.kappa_obs, mean_obs, tilts_out, data.log_binom,
                      step.trace_dv, step.quad, step.logdet_b, psi_var=var_obs)
    return Evaluation(step, site, hyper, tilts_out, elbo, elbo + log_hyper_prior(hyper, options))


def pack(tilts: np.ndarray, hyper: Hyper, options: CAVIOptions) -> FloatArray:
    """The point ``x = (tilts, log scale, constant means)`` (learned parts only)."""
    parts = [tilts]
    if options.learn_scale:
        parts.append(np.array([np.log(hyper.scale)]))
    if options.learn_mean == "constant" and not options.joint_mean:
        parts.append(hyper.mean[0])
    return np.concatenate(parts)


def unpack(x: np.ndarray, like: Hyper, n_obs: int,
           options: CAVIOptions) -> tuple[np.ndarray, Hyper]:
    """Inverse of :func:`pack`; the parts not learned come from ``like``."""
    pos = n_obs
    scale, mean = like.scale, like.mean
    if options.learn_scale:
        scale = float(np.exp(np.clip(x[pos], -700.0, 700.0)))
        pos += 1
    if options.learn_mean == "constant" and not options.joint_mean:
        mean = np.repeat(x[pos:pos + mean.shape[1]][None, :], mean.shape[0], axis=0)
    return x[:n_obs], Hyper(scale, mean, like.prior)


def initial_state(data: CountData, hyper: Hyper, options: CAVIOptions,
                  init: VIResult | None) -> tuple[np.ndarray, Hyper]:
    """Starting tilts (shape (E,)) and hyper-parameters: the prior's, or a warm start."""
    scale, mean, prior = hyper.scale, hyper.mean, hyper.prior
    if init is not None:
        if options.learn_scale:
            scale = float(init.scale)
        if options.learn_mean is not None:
            mean = np.array(init.mean, dtype=float, copy=True)
        if options.learn_kernel and init.kernel_theta is not None:
            prior = prior.with_kernel_theta(np.asarray(init.kernel_theta))  # type: ignore
        tilts = data.layout.gather(init.w)
    else:
        var = scale * prior.prior_variance()[:, None]
        tilts = data.layout.gather(np.sqrt(var + mean ** 2))
    if options.learn_mean == "constant":
        mean = np.repeat(mean.mean(axis=0)[None, :], mean.shape[0], axis=0)
    return tilts, Hyper(scale, mean, prior)


def separable(prior: GaussianPrior, options: CAVIOptions) -> bool:
    r"""Whether :func:`run_cavi` iterates the sticks separately.

    At a fixed scale, with fixed means or constant means chosen jointly in the psi step, nothing
    couples the sticks: the objective is a sum of one term per stick, each a function of that
    stick's tilts only. A prior that asks for it (``prior.split_sticks``, the sparse-precision
    prior: every stick update is a sparse factorisation) then gets one driver per observed stick
    (and one for the unobserved ones), each stopped by its own tolerance, so a stick that
    converges early costs no further factorisations.
    """
    return bool(getattr(prior, "split_sticks", False) and not options.learn_scale
                and not options.learn_kernel
                and (options.learn_mean is None or options.joint_mean))


def _iterations(data: CountData, hyper0: Hyper, tilts0: np.ndarray, options: CAVIOptions,
                iteration: FixedPointOptions) -> Iterator[Any]:
    """The CAVI/EM iterations of one (part of a) fit: :func:`~.fixed_point.iterate`."""
    n_obs = tilts0.size

    def evaluate(x: np.ndarray) -> Evaluation:
        tilts, hyper = unpack(x, current[0], n_obs, options)
        ev = sweep(data, hyper, tilts, options)
        return replace(ev, point=pack(tilts, hyper, options))

    def update(ev: Evaluation) -> np.ndarray:
        if memo[0] is not ev:  # the driver may ask twice (after a rejected extrapolation)
            if options.joint_kernel:
                site = pg_mean_unchecked(data.b_obs, ev.tilts)
                hyper = hyper_em.marginal_m_step(data.layout, data.kappa, site, ev.hyper,
                                                 options)
            else:
                hyper = hyper_em.m_step(ev.step, ev.hyper, options)
            memo[:] = [ev, pack(ev.tilts, hyper, options), hyper]
        current[0] = memo[2]  # the prior (a kernel M-step changes it) travels with the point
        return memo[1]

    def advance(ev: Evaluation) -> tuple[np.ndarray, Evaluation]:
        x = update(ev)  # evaluated at the M-step's exact hyper-parameters, not exp(log(scale))
        return x, replace(sweep(data, current[0], ev.tilts, options), point=x)

    current = [hyper0]
    memo: list[Any] = [None, None, None]
    x0 = pack(tilts0, hyper0, options)
    start = replace(sweep(data, hyper0, tilts0, options), point=x0)
    return iterate(evaluate, update, x0, iteration, advance=advance, initial=start)


def run_cavi(counts: np.ndarray, prior: GaussianPrior, mean: np.ndarray,
             options: CAVIOptions = CAVIOptions(), *, scale: float = 1.0,
             init: VIResult | None = None,
             callback: Callable[[int, Evaluation], None] | None = None,
             verbose: bool = False) -> VIResult:
    r"""Fit :math:`q` (and the learned hyper-parameters) by CAVI with variational (MAP-)EM.

    When the sticks are independent and the prior asks for it (:func:`separable`), each
    observed stick is iterated by its own driver and stops when the relative change of its own
    objective is at most ``tol`` (the sticks' objectives are all negative, so the change of the
    total is then at most ``tol`` relative too); the traces are those of the combined iterate,
    whose converged sticks stay put.

    Parameters
    ----------
    counts : ndarray of shape (C, K)
        Validated counts.
    prior : GaussianPrior
        The prior structure :math:`\tilde\Sigma`.
    mean : ndarray of shape (C, K - 1)
        Initial prior means.
    options : CAVIOptions
    scale : float
        Initial :math:`\theta`.
    init : VIResult, optional
        Warm start: its tilts, and its scale, means and kernel where those are learned.
    callback : callable, optional
        ``callback(iteration, evaluation)`` after every accepted iteration.
    verbose : bool
        Print one line per accepted iteration.

    Returns
    -------
    VIResult
    """
    data = CountData.from_counts(counts)
    if options.learn_kernel and not hasattr(prior, "kernel_m_step"):
        raise ValueError(f"learn_kernel: {type(prior).__name__} does not support kernel "
                         "learning; compare kernels with select_kernel instead")
    check_prior_scale(float(scale), prior)
    if options.learn_scale:
        check_scale_prior(options.scale_prior, prior)
    tilts0, hyper0 = initial_state(data, Hyper(float(scale), np.asarray(mean, float), prior),
                                   options, init)

    def report(it: int, ev: Evaluation) -> None:
        elbos.append(ev.elbo)
        if verbose:
            print(f"iter {it + 1:5d}  elbo {ev.elbo:.10g}  objective {ev.objective:.10g}  "
                  f"scale {ev.hyper.scale:.4g}")
        if callback is not None:
            callback(it, ev)

    elbos: list[float] = []
    iteration = options.iteration
    if not options.accelerated and iteration.acceleration is not None:
        iteration = FixedPointOptions(iteration.max_iter, iteration.tol, None, iteration.memory)
    with blas_threads(1):  # many small factorisations: threads only cost (see corrpriors._threads)
        groups = _stick_groups(data) if separable(prior, options) else []
        if len(groups) > 1:
            trace, n_stick_steps = _run_separately(data, hyper0, tilts0, options, iteration,
                                                   groups, report)
        else:
            trace = None
            for trace in _iterations(data, hyper0, tilts0, options, iteration):
                report(len(trace.objectives) - 1, trace.best)
            assert trace is not None
            n_stick_steps = trace.n_evaluations * int(data.layout.sticks.size)
        best = trace.best
        var = best.hyper.prior.complete_variances(data.layout, best.hyper.scale, best.site,
                                                  best.step)
    return _result(data, best, var, trace, elbos, n_stick_steps)


def _stick_groups(data: CountData) -> list[np.ndarray]:
    """One group per observed stick, and one for the unobserved sticks (if any)."""
    observed = data.layout.observed.any(axis=0)
    groups = [np.array([k]) for k in np.flatnonzero(observed)]
    if not observed.all():
        groups.append(np.flatnonzero(~observed))
    return groups


def _part(values: np.ndarray, data: CountData, sticks: np.ndarray) -> np.ndarray:
    """The entries (shape (E,), on ``data.layout``) of some sticks, in their own layout's order."""
    return values[np.isin(data.layout.entry_cols, sticks)]


def _run_separately(data: CountData, hyper0: Hyper, tilts0: np.ndarray, options: CAVIOptions,
                    iteration: FixedPointOptions, groups: list[np.ndarray],
                    report: Callable[[int, Evaluation], None]) -> tuple[Any, int]:
    """Iterate the stick groups in lockstep, each to its own tolerance (see :func:`separable`).

    Returns the combined trace (its ``best`` the combined evaluation) and the stick updates.
    """
    m0 = options.mean_prior_mean
    parts = [data.restrict(g) for g in groups]
    runs = [_iterations(part, Hyper(hyper0.scale, hyper0.mean[:, g], hyper0.prior),
                        _part(tilts0, data, g),
                        replace(options, mean_prior_mean=None if m0 is None else m0[g]),
                        iteration)
            for g, part in zip(groups, parts)]
    traces: list[Any] = [None] * len(groups)
    active = list(range(len(groups)))
    combined = FixedPointTrace(best=None, last=None)
    while True:
        for i in list(active):
            try:
                traces[i] = next(runs[i])
            except StopIteration:
                active.remove(i)
        if not active:
            break
        ev = _combine(data, hyper0, groups, parts, [t.best for t in traces])
        combined.objectives.append(ev.objective)
        combined.best = combined.last = ev
        report(len(combined.objectives) - 1, ev)
    combined.n_evaluations = max(t.n_evaluations for t in traces)
    combined.converged = all(t.converged for t in traces)
    combined.monotone = all(t.monotone for t in traces)
    n_stick_steps = sum(t.n_evaluations * int(p.layout.sticks.size)
                        for t, p in zip(traces, parts))
    return combined, n_stick_steps


def _combine(data: CountData, hyper0: Hyper, groups: list[np.ndarray], parts: list[CountData],
             evs: list[Evaluation]) -> Evaluation:
    """One evaluation of the whole fit from the groups' current evaluations."""
    c, km1 = data.b.shape
    fields = {name: np.zeros((c, km1)) for name in ("psi_mean", "psi_var", "alpha")}
    numbers = {name: np.zeros(km1) for name in ("trace_dv", "quad", "logdet_b")}
    mean = hyper0.mean.copy()
    site, tilts = np.zeros((c, km1)), np.zeros((c, km1))
    for g, part, ev in zip(groups, parts, evs):
        for name, arr in fields.items():
            arr[:, g] = getattr(ev.step, name)
        for name, vec in numbers.items():
            vec[g] = getattr(ev.step, name)
        mean[:, g] = ev.hyper.mean
        site[:, g] = part.layout.scatter(ev.site)
        tilts[:, g] = part.layout.scatter(ev.tilts)
    joint_mean = any(ev.step.mean is not None for ev in evs)
    step = PsiStep(**fields, **numbers, reduction=None,
                   complete=all(ev.step.complete for ev in evs),
                   mean=mean if joint_mean else None)
    return Evaluation(step, data.layout.gather(site), Hyper(hyper0.scale, mean, hyper0.prior),
                      data.layout.gather(tilts), float(sum(ev.elbo for ev in evs)),
                      float(sum(ev.objective for ev in evs)))


def _result(data: CountData, best: Evaluation, var: np.ndarray, trace: Any,
            elbos: list[float], n_stick_steps: int) -> VIResult:
    step, hyper = best.step, best.hyper
    w_full = optimal_tilts(step.psi_mean, var)
    omega = np.where(data.layout.observed, pg_mean_unchecked(data.b, w_full), 0.0)
    kernel = getattr(hyper.prior, "kernel", None)
    kernel_theta = None if kernel is None else np.asarray(kernel.theta, dtype=float)
    return VIResult(
        psi_mean=step.psi_mean, psi_var=var, w=w_full, omega_mean=omega,
        site_precision=data.layout.scatter(best.site), mean=hyper.mean, prior=hyper.prior,
        scale=hyper.scale, kernel_theta=kernel_theta, elbo=float(best.elbo),
        objective=float(best.objective),
        elbo_trace=np.asarray(elbos, dtype=float),
        objective_trace=np.asarray(trace.objectives, dtype=float),
        n_iter=len(trace.objectives), converged=trace.converged, jitter=float(hyper.prior.jitter),
        n_psi_steps=trace.n_evaluations, monotone=trace.monotone, n_stick_steps=n_stick_steps)


__all__ = ["CAVIOptions", "CountData", "Evaluation", "Hyper", "initial_state", "pack",
           "run_cavi", "separable", "sweep", "unpack"]
