r"""A generic, safeguarded fixed-point maximiser: coordinate ascent / EM with Anderson acceleration.

The driver knows nothing of the model. The model supplies

* ``evaluate(x) -> ev``: the point ``x`` (a flat float vector) turned into an evaluation holding
  ``ev.objective`` (a float) and, optionally, ``ev.point``: the point as the model represents it
  (e.g. after a round trip through a log transform), which the driver then uses in place of
  ``x``;
* ``update(ev) -> x'``: the plain map :math:`F` (a coordinate-ascent / EM step), which must not
  decrease the objective: ``evaluate(update(ev)).objective >= ev.objective`` up to round-off;
* optionally ``advance(ev) -> (x', ev')``: the plain step evaluated directly from the model's own
  representation (no round trip through the flat ``x``, which may be lossy, e.g. a scale stored
  as its logarithm), so the plain iteration is exactly the model's coordinate ascent.

With ``acceleration="anderson"`` the driver iterates :math:`F` with Anderson acceleration (type
II, Walker & Ni 2011) on ``x``; an extrapolated point whose objective is below the last accepted
one (or not finite) is rejected, the history is cleared and the plain step is taken instead, so
the recorded objective trace never decreases and the fixed point is that of :math:`F`.

Safety: a non-finite objective from a plain step raises :class:`FloatingPointError` at once
(never a NaN result); a plain step that lowers the objective by more than round-off means the
arithmetic broke down, so the run is recorded as not converged (``monotone=False``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

#: Relative decrease of the objective accepted as round-off in a plain step. The CAVI objective
#: sums terms far larger than itself (log-determinants and quadratic forms of ill-conditioned
#: kernel matrices), so its evaluation noise reaches ~1e-9 relative near convergence (measured:
#: decreases of 2e-7 on an objective of -200 with a squared-exponential kernel of condition 1e12
#: at scale 1e8-1e10); breakdowns of the arithmetic show up as far larger drops.
ROUNDOFF = 1e-8


@dataclass(frozen=True)
class FixedPointOptions:
    """Options of :func:`maximise`.

    Attributes
    ----------
    max_iter : int
        Maximum number of evaluations (rejected accelerated ones included).
    tol : float
        Stop when the relative change of the objective between accepted iterations is at most
        ``tol`` and the gains are shrinking fast enough that the rest of the climb (Aitken's
        estimate from the last gains) is at most ``tol`` relative too: small but steady gains
        are a slow climb, not convergence.
    acceleration : {"anderson", None}
    memory : int
        Number of past differences used by Anderson acceleration.
    """

    max_iter: int = 1000
    tol: float = 1e-8
    acceleration: str | None = "anderson"
    memory: int = 5

    def __post_init__(self) -> None:
        if self.acceleration not in (None, "anderson"):
            raise ValueError(f"acceleration: expected 'anderson' or None, got "
                             f"{self.acceleration!r}")
        if (isinstance(self.max_iter, bool) or not isinstance(self.max_iter, (int, np.integer))
                or self.max_iter < 1):
            raise ValueError(f"max_iter: expected a positive integer, got {self.max_iter!r}")
        if not (isinstance(self.tol, (int, float, np.floating)) and math.isfinite(self.tol)):
            raise ValueError(f"tol: expected a finite number, got {self.tol!r}")
        if not isinstance(self.memory, (int, np.integer)) or self.memory < 1:
            raise ValueError(f"memory: expected a positive integer, got {self.memory!r}")


@dataclass
class FixedPointTrace:
    """What :func:`maximise` did.

    Attributes
    ----------
    best : Any
        The last accepted evaluation (the highest objective).
    last : Any
        The last evaluation computed (``best`` unless a rejected step came last).
    objectives : list of float
        Objective of every accepted iteration (non-decreasing).
    evaluations : list of Any
        The accepted evaluations, in order (kept only with ``keep_history``).
    n_evaluations : int
        Evaluations computed (the cost).
    converged : bool
        The tolerance was met and every plain step was monotone.
    monotone : bool
        No plain step lowered the objective by more than round-off.
    """

    best: Any
    last: Any
    objectives: list = field(default_factory=list)
    evaluations: list = field(default_factory=list)
    n_evaluations: int = 0
    converged: bool = False
    monotone: bool = True


class Anderson:
    r"""Anderson acceleration (type II, memory ``m``) of a fixed-point map :math:`x \mapsto F(x)`.

    ``propose(x, fx)`` returns :math:`x + g - (\Delta X + \Delta G)\gamma` with
    :math:`g = F(x) - x` and :math:`\gamma` the least-squares fit of :math:`g` by the recent
    residual differences :math:`\Delta G`; with no history it is ``fx``.
    """

    def __init__(self, memory: int):
        self.memory = int(memory)
        self.last: tuple | None = None  # previous (x, g)
        self.dxs: list[np.ndarray] = []  # recent differences of x and of g
        self.dgs: list[np.ndarray] = []

    def reset(self) -> None:
        """Forget the history."""
        self.last = None
        self.dxs.clear()
        self.dgs.clear()

    def propose(self, x: np.ndarray, fx: np.ndarray) -> np.ndarray:
        """The accelerated point from ``x`` and its image ``fx``."""
        g = fx - x
        if self.last is not None:
            self.dxs.append(x - self.last[0])
            self.dgs.append(g - self.last[1])
            if len(self.dxs) > self.memory:
                self.dxs.pop(0)
                self.dgs.pop(0)
        self.last = (x, g)
        if not self.dxs:
            return fx
        dx, dg = np.stack(self.dxs), np.stack(self.dgs)  # (m, n)
        # least squares min ||g - dg^T gamma|| by the (m x m) normal equations, pseudo-inverted
        # by eigenvalues (directions below 1e-14 of the largest are dropped): a tall lstsq
        # costs more than a small psi step, and a poor gamma is rejected anyway.
        evals, evecs = np.linalg.eigh(dg @ dg.T)
        keep = evals > 1e-14 * max(evals[-1], 0.0)
        if not keep.any():
            return fx
        gamma = evecs[:, keep] @ ((evecs[:, keep].T @ (dg @ g)) / evals[keep])
        out = x + g - gamma @ (dx + dg)
        return out if np.all(np.isfinite(out)) else fx


def _objective(ev: Any) -> float:
    return float(ev.objective)


def _point(ev: Any, x: np.ndarray) -> np.ndarray:
    point = getattr(ev, "point", None)
    return x if point is None else np.asarray(point, dtype=float)


def _stalled(trace: FixedPointTrace, tol: float) -> bool:
    """Update ``trace.monotone``; True (and ``trace.converged``) once the objective stalls."""
    if len(trace.objectives) < 2:
        return False
    prev, now = trace.objectives[-2], trace.objectives[-1]
    if now < prev - ROUNDOFF * max(abs(prev), 1.0):
        trace.monotone = False
    gain, bound = now - prev, tol * abs(now)
    if abs(gain) > bound:
        return False
    if gain > 0.0 and not _gains_shrink(trace.objectives, bound):
        return False   # a small gain that is not shrinking: a slow climb, not a stall
    trace.converged = trace.monotone
    return True


def _gains_shrink(objectives: list, bound: float) -> bool:
    r"""Whether the last gain of ``objectives`` is small because the climb is ending.

    A small change of the objective alone does not mean convergence: a map that is nearly the
    identity along some direction (in CAVI, the tilt of an entry with all or none of its trials
    a success under a wide prior: the map moves it by ~1e-8 of itself per sweep) climbs a long
    gentle slope by small, steady gains. Aitken's estimate of the rest of a linearly converging
    climb (Böhning et al. 1994; McNicholas et al. 2010) is :math:`g_n\rho/(1-\rho)` with
    :math:`\rho = g_n/g_{n-1}` the ratio of the last two gains; the climb has ended when that
    is at most ``bound`` too (a non-shrinking gain, :math:`\rho \ge 1`, never has). A single
    gain has no ratio: the run goes on for one more. After a gain that was not positive the climb
    is down to round-off (the map is monotone): ended.
    """
    if len(objectives) < 3:
        return False
    gains = np.diff(np.asarray(objectives[-4:], dtype=float))
    if not np.all(gains[:-1] > 0):
        return True    # an earlier gain was not positive: the climb is down to round-off
    rho = float(np.max(gains[1:] / gains[:-1]))
    return rho < 1.0 and gains[-1] * rho <= bound * (1.0 - rho)


def iterate(evaluate: Callable[[np.ndarray], Any], update: Callable[[Any], np.ndarray],
            x0: np.ndarray, options: FixedPointOptions, *,
            advance: Callable[[Any], tuple[np.ndarray, Any]] | None = None,
            initial: Any = None, keep_history: bool = False) -> Iterator[FixedPointTrace]:
    """:func:`maximise` one accepted iteration at a time.

    A generator: it yields the (same, updated) :class:`FixedPointTrace` after every accepted
    iteration, ``trace.best`` being that iteration's evaluation, and stops where
    :func:`maximise` stops (the trace is then final). Several problems can so be iterated in
    lockstep (e.g. independent blocks of one objective, each to its own tolerance).

    Parameters
    ----------
    evaluate, update, x0, options, advance, initial, keep_history
        As for :func:`maximise`.

    Yields
    ------
    FixedPointTrace

    Raises
    ------
    FloatingPointError
        If the objective at the start or after a plain step is not finite.
    """
    def checked(ev: Any, what: str) -> Any:
        trace.n_evaluations += 1
        if not math.isfinite(_objective(ev)):
            raise FloatingPointError(
                f"the objective is not finite ({_objective(ev)!r}) at {what} "
                f"(iteration {len(trace.objectives) + 1}); the inputs overflow the arithmetic")
        return ev

    def plain(ev: Any, fx: np.ndarray | None = None) -> tuple[np.ndarray, Any]:
        if advance is not None:
            fx, new = advance(ev)
        else:
            fx = np.asarray(update(ev), dtype=float) if fx is None else fx
            new = evaluate(fx)
        return np.asarray(fx, dtype=float), checked(new, "a coordinate-ascent step")

    trace = FixedPointTrace(best=None, last=None)
    x = np.asarray(x0, dtype=float)
    cur = trace.last = checked(evaluate(x) if initial is None else initial,
                               "the starting point")
    anderson = Anderson(options.memory) if options.acceleration == "anderson" else None
    while True:
        trace.objectives.append(_objective(cur))
        trace.best = cur
        if keep_history:
            trace.evaluations.append(cur)
        yield trace
        if _stalled(trace, options.tol) or trace.n_evaluations >= options.max_iter:
            break
        if anderson is None:
            x, cur = plain(cur)
            trace.last = cur
            continue
        fx = np.asarray(update(cur), dtype=float)
        prop = anderson.propose(x, fx)
        trial = trace.last = evaluate(prop)
        trace.n_evaluations += 1
        if math.isfinite(_objective(trial)) and _objective(trial) >= _objective(cur):
            x, cur = _point(trial, prop), trial
            continue
        if trace.n_evaluations >= options.max_iter:  # out of budget on a rejected step
            break
        anderson.reset()
        x, cur = plain(cur, fx)
        trace.last = cur


def maximise(evaluate: Callable[[np.ndarray], Any], update: Callable[[Any], np.ndarray],
             x0: np.ndarray, options: FixedPointOptions, *,
             advance: Callable[[Any], tuple[np.ndarray, Any]] | None = None,
             initial: Any = None,
             callback: Callable[[int, Any], None] | None = None,
             keep_history: bool = False) -> FixedPointTrace:
    """Iterate ``x <- update(evaluate(x))`` (optionally accelerated) until the objective stalls.

    Parameters
    ----------
    evaluate : callable
        ``evaluate(x) -> ev`` with a float ``ev.objective``.
    update : callable
        ``update(ev) -> x'``, the plain (monotone) map.
    advance : callable, optional
        ``advance(ev) -> (x', ev')``, the plain step and its evaluation in one (default
        ``x' = update(ev)``, ``ev' = evaluate(x')``).
    initial : evaluation, optional
        The evaluation at ``x0``, when the model has it in its own representation (default
        ``evaluate(x0)``).
    x0 : ndarray of shape (n,)
        Starting point.
    options : FixedPointOptions
    callback : callable, optional
        ``callback(iteration, ev)`` after every accepted iteration.
    keep_history : bool
        Keep every accepted evaluation in ``trace.evaluations``.

    Returns
    -------
    FixedPointTrace

    Raises
    ------
    FloatingPointError
        If the objective at the start or after a plain step is not finite.
    """
    trace = None
    for trace in iterate(evaluate, update, x0, options, advance=advance, initial=initial,
                         keep_history=keep_history):
        if callback is not None:
            callback(len(trace.objectives) - 1, trace.best)
    assert trace is not None   # the generator yields at least the starting point
    return trace


def stall_forecast(objectives: Any, tol: float, window: int = 20) -> tuple[float, int | None]:
    """How far a run that stopped at its cap was from the tolerance.

    Parameters
    ----------
    objectives : array_like of shape (n,)
        The accepted objectives (non-decreasing).
    tol : float
        The relative tolerance of :func:`maximise`.
    window : int
        Recent iterations used to estimate the rate.

    Returns
    -------
    last : float
        Relative change of the objective in the last iteration.
    more : int or None
        Iterations still needed at the recent rate, if the changes shrink geometrically
        (a least-squares line through the logarithms of the last ``window`` changes), else
        ``None``.
    """
    obj = np.asarray(objectives, dtype=float)
    if obj.size < 2:
        return float("nan"), None
    rel = np.abs(np.diff(obj)) / np.maximum(np.abs(obj[1:]), 1e-300)
    last = float(rel[-1])
    recent = rel[-window:]
    if recent.size < 5 or np.any(recent <= 0) or last <= tol or not tol > 0:
        return last, None
    slope = float(np.polyfit(np.arange(recent.size), np.log(recent), 1)[0])
    if not slope < -1e-6:
        return last, None
    return last, int(math.ceil(math.log(tol / last) / slope))


class StallAdvice(NamedTuple):
    """What to retry a fit stopped at its cap with (:func:`stall_advice`)."""

    #: Relative change of the objective in the last iteration (NaN after one objective).
    last: float
    #: Iterations the recent rate still needs, or ``None`` if it cannot tell.
    more: int | None
    #: The iteration cap to try: ``max_iter + more``, else ten times ``max_iter``.
    max_iter: int
    #: A looser tolerance worth trying when the fit was close (last change < 1e-5), else None.
    tol: float | None

    def how_far(self, tol_name: str) -> str:
        """``": the objective still changed by ... (relative) in the last iteration; at its
        recent rate about N more iterations would reach <tol_name>"`` (empty after a single
        objective, whose change is unknown).
        """
        if not np.isfinite(self.last):
            return ""
        rate = (f"; at its recent rate about {self.more:,} more iterations would reach "
                f"{tol_name}" if self.more is not None else "")
        return (f": the objective still changed by {self.last:.2g} (relative) in the last "
                f"iteration{rate}")


def stall_advice(objectives: Any, tol: float, max_iter: int) -> StallAdvice:
    """The retry settings for a run that stopped at ``max_iter`` (see :func:`stall_forecast`).

    Parameters
    ----------
    objectives : array_like of shape (n,)
        The accepted objectives.
    tol : float
    max_iter : int

    Returns
    -------
    StallAdvice
    """
    last, more = stall_forecast(objectives, tol)
    close = bool(np.isfinite(last) and last < 1e-5)
    return StallAdvice(last, more, max_iter + more if more is not None else 10 * max_iter,
                       10 * last if close else None)


__all__ = ["Anderson", "FixedPointOptions", "FixedPointTrace", "ROUNDOFF", "iterate", "maximise",
           "StallAdvice", "stall_advice", "stall_forecast"]
