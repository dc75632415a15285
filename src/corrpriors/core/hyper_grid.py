r"""Integration over hyper-parameters on a grid (the INLA "grid" strategy), model-agnostic.

A plug-in hyper-parameter hides its own uncertainty: with the prior scale :math:`\theta` chosen
from the data, intervals of :math:`\pi` are too narrow exactly where the data say little about
:math:`\theta`. Here the posterior is the mixture

.. math::

    p(\psi \mid X) \approx \sum_g w_g\, q_g(\psi), \qquad
    w_g \propto \exp\big(\ell(\eta_g)\big), \qquad \ell(\eta) = \log Z(\eta) + \log p(\eta),

over points :math:`\eta_g` (log hyper-parameters) where :math:`\log Z` is an evidence
approximation (EP's, :mod:`corrpriors.core.ep`) and :math:`p(\eta)` a hyper-prior. As in INLA
(Rue, Martino & Chopin 2009): find the mode of :math:`\ell` (a climb on a lattice of spacing
``search_step``, then one Newton step from finite differences), take its Hessian :math:`H`,
and place the points on the integer lattice of the standardised coordinates
:math:`\eta = \hat\eta + step\cdot V\Lambda^{-1/2}z` (:math:`-H = V\Lambda V^\top`), flooding out
from :math:`z = 0` while :math:`\ell` stays within ``drop`` of its maximum; equal cells, so the
weights are the normalised :math:`\exp\ell`. Where :math:`\ell` has no curvature (the data say
nothing about a hyper-parameter) the lattice of the climb is flooded instead, within the bounds.

The driver knows nothing of the model: it calls ``evaluate(eta)`` for :math:`\ell` and an
opaque payload (the EP result at :math:`\eta`), passing the payload of the nearest point
evaluated so far for a warm start.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._typing import FloatArray
from ..exceptions import ConvergenceWarning


@dataclass(frozen=True)
class GridOptions:
    r"""Where the grid puts its points.

    Attributes
    ----------
    step : float
        Spacing of the grid in posterior standard deviations (INLA's :math:`\delta_z`).
    drop : float
        Points are added while :math:`\ell` is within ``drop`` of its maximum (INLA's
        :math:`\delta_\pi`).
    search_step : float
        Lattice spacing (log units) of the mode search and of the fallback lattice.
    max_points : int
        Cap on the points evaluated (mode search included).
    """

    step: float = 1.0
    drop: float = 3.0
    search_step: float = 0.5
    max_points: int = 80

    def __post_init__(self) -> None:
        for name in ("step", "drop", "search_step"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value > 0):
                raise ValueError(f"{name}: expected a positive number, got {value!r}")
        if isinstance(self.max_points, bool) or not isinstance(self.max_points, (int, np.integer)) \
                or self.max_points < 1:
            raise ValueError(f"max_points: expected a positive integer, got {self.max_points!r}")


@dataclass(frozen=True)
class HyperGrid:
    r"""The integration points and their weights.

    Attributes
    ----------
    points : ndarray of shape (G, P)
        :math:`\eta_g` (log hyper-parameters).
    log_post : ndarray of shape (G,)
        :math:`\ell(\eta_g)`.
    weights : ndarray of shape (G,)
        Normalised :math:`\exp\ell` (sum 1).
    payloads : tuple
        What ``evaluate`` returned with each point.
    mode : ndarray of shape (P,)
    n_evaluations : int
        Points evaluated, mode search included.
    """

    points: np.ndarray
    log_post: np.ndarray
    weights: np.ndarray
    payloads: tuple
    mode: np.ndarray
    n_evaluations: int


class _Evaluator:
    """Memoised ``evaluate`` on points within bounds, with warm-start payloads."""

    def __init__(self, evaluate: Callable[[np.ndarray, Any], tuple[float, Any]],
                 bounds: np.ndarray, max_points: int):
        self.evaluate, self.bounds, self.max_points = evaluate, bounds, max_points
        self.points: list[np.ndarray] = []
        self.values: list[float] = []
        self.payloads: list[Any] = []

    def inside(self, eta: np.ndarray) -> bool:
        return bool(np.all(eta >= self.bounds[:, 0] - 1e-12)
                    and np.all(eta <= self.bounds[:, 1] + 1e-12))

    def __call__(self, eta: np.ndarray) -> float:
        eta = np.asarray(eta, float)
        for p, v in zip(self.points, self.values):
            if np.allclose(p, eta, rtol=0, atol=1e-12):
                return v
        if not self.inside(eta):
            return -np.inf
        if len(self.points) >= self.max_points:
            raise _Budget
        near = None
        if self.points:
            d = [float(np.sum((p - eta) ** 2)) for p in self.points]
            near = self.payloads[int(np.argmin(d))]
        value, payload = self.evaluate(eta, near)
        value = float(value)
        if np.isnan(value) or value == np.inf:
            raise ValueError(f"the log posterior of the hyper-parameters is not finite at "
                             f"eta={np.array2string(eta, precision=6)}: {value} (expected a "
                             f"finite number, or -inf where the posterior is zero)")
        self.points.append(eta.copy())
        self.values.append(value)
        self.payloads.append(payload)
        return value


class _Budget(Exception):
    """The evaluation budget is spent."""


def _climb(f: _Evaluator, start: np.ndarray, h: float) -> np.ndarray:
    """Axis-neighbour hill climb on the lattice ``start + h Z^P``; returns its best point."""
    x = start.copy()
    fx = f(x)
    while True:
        best, fbest = x, fx
        for i in range(x.size):
            for sgn in (-1.0, 1.0):
                y = x.copy()
                y[i] += sgn * h
                fy = f(y)
                if fy > fbest:
                    best, fbest = y, fy
        if best is x:
            return x
        x, fx = best, fbest


def _curvature(f: _Evaluator, x: np.ndarray, h: float) -> tuple[FloatArray, FloatArray]:
    """Gradient and Hessian of ``f`` at ``x`` by central differences of spacing ``h``
    (``-inf`` neighbours outside the bounds give a non-finite Hessian).
    """
    p = x.size
    f0 = f(x)
    grad, hess = np.zeros(p), np.zeros((p, p))
    e = np.eye(p) * h
    plus = [f(x + e[i]) for i in range(p)]
    minus = [f(x - e[i]) for i in range(p)]
    for i in range(p):
        grad[i] = (plus[i] - minus[i]) / (2 * h)
        hess[i, i] = (plus[i] - 2 * f0 + minus[i]) / h ** 2
        for j in range(i):
            fpp = f(x + e[i] + e[j])
            hess[i, j] = hess[j, i] = (fpp - plus[i] - plus[j] + f0) / h ** 2
    return grad, hess


def _flood(f: _Evaluator, to_eta: Callable[[np.ndarray], np.ndarray], drop: float,
           p: int, visited: list) -> None:
    """Evaluate the integer lattice ``z`` outwards from 0 while ``f`` is within ``drop`` of the
    best value seen; append every lattice point's ``eta`` to ``visited``.
    """
    seen = {tuple([0] * p)}
    frontier = [np.zeros(p, dtype=int)]
    while frontier:
        z = frontier.pop(0)
        eta = to_eta(z)
        value = f(eta)
        visited.append(eta)
        if not np.isfinite(value) or value < max(f.values) - drop:
            continue
        for i in range(p):
            for sgn in (-1, 1):
                y = z.copy()
                y[i] += sgn
                if tuple(y) not in seen:
                    seen.add(tuple(y))
                    frontier.append(y)


def integrate(evaluate: Callable[[np.ndarray, Any], tuple[float, Any]], start: np.ndarray,
              bounds: np.ndarray, options: GridOptions = GridOptions()) -> HyperGrid:
    r"""The grid of the module docstring.

    Parameters
    ----------
    evaluate : callable
        ``evaluate(eta, warm) -> (log_post, payload)`` with ``eta`` of shape (P,) and ``warm``
        the payload of the nearest point evaluated so far (``None`` at first).
    start : ndarray of shape (P,)
        Where the mode search starts (inside ``bounds``).
    bounds : ndarray of shape (P, 2)
        Log-space box of the hyper-parameters (the hyper-prior's support).
    options : GridOptions

    Returns
    -------
    HyperGrid

    Raises
    ------
    ValueError
        If ``start`` is not finite, ``bounds`` is not of shape (P, 2) with finite
        ``low <= high``, ``evaluate`` returns NaN or ``+inf``, or ``-inf`` at every point
        evaluated (points where it returns ``-inf`` get weight 0 and the grid does not grow past
        them).
    """
    start = np.asarray(start, float)
    bounds = np.asarray(bounds, float)
    if start.ndim != 1 or not np.all(np.isfinite(start)):
        raise ValueError(f"start: expected a finite vector, got {start!r}")
    if bounds.shape != (start.size, 2) or not np.all(np.isfinite(bounds)) \
            or np.any(bounds[:, 0] > bounds[:, 1]):
        raise ValueError(f"bounds: expected shape ({start.size}, 2) with finite low <= high in "
                         f"every row, got {bounds.tolist()!r}")
    start = np.clip(start, bounds[:, 0], bounds[:, 1])
    p = start.size
    f = _Evaluator(evaluate, bounds, options.max_points)
    h = options.search_step
    mode = start
    lattice: list = []
    try:
        x = _climb(f, start, h)
        grad, hess = _curvature(f, x, h)
        mode, to_eta = x, (lambda z: x + h * z)
        if np.all(np.isfinite(hess)) and np.all(np.linalg.eigvalsh(-hess) > 0):
            newton = x + np.linalg.solve(-hess, grad)
            if np.all(np.abs(newton - x) <= h) and f(newton) >= f(x):
                mode = newton
            lam, vec = np.linalg.eigh(-hess)
            axes = vec / np.sqrt(lam)[None, :] * options.step

            def to_eta(z: np.ndarray) -> np.ndarray:
                return mode + axes @ z
        _flood(f, to_eta, options.drop, p, lattice)
    except _Budget:
        warnings.warn(f"hyper-parameter grid: stopped at max_points={options.max_points} "
                      f"evaluations before covering the posterior (its weights are those of the "
                      f"points evaluated)", ConvergenceWarning, stacklevel=2)
    if not lattice:  # the budget ran out before the grid began: the best point alone
        lattice = [f.points[int(np.argmax(f.values))]]
    index = [next(i for i, q in enumerate(f.points) if np.allclose(q, eta, rtol=0, atol=1e-12))
             for eta in lattice if f.inside(eta) and any(
                 np.allclose(q, eta, rtol=0, atol=1e-12) for q in f.points)]
    values = np.array([f.values[i] for i in index])
    if not np.any(np.isfinite(values)):   # the start and its neighbours: nowhere to climb
        raise ValueError(f"the log posterior of the hyper-parameters is -inf at every point "
                         f"evaluated ({len(f.points)} points from eta="
                         f"{np.array2string(start, precision=6)}); start where it is finite")
    w = np.exp(values - values.max())
    return HyperGrid(np.array([f.points[i] for i in index]), values, w / w.sum(),
                     tuple(f.payloads[i] for i in index), np.asarray(mode), len(f.points))


__all__ = ["GridOptions", "HyperGrid", "integrate"]
