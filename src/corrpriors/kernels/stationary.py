r"""Stationary kernels ``k(d) = variance * f(d / lengthscale)``.

All four are isotropic functions of the distance ``d`` between two covariates, so they
can be evaluated on coordinates or directly on a distance matrix (e.g. graph
shortest-path distances). With ``r = d / l``:

=====================  =============================================
``SquaredExponential``  ``exp(-r^2)``  (the paper's form, no 1/2)
``Exponential``         ``exp(-r)``
``Matern32``            ``(1 + sqrt(3) r) exp(-sqrt(3) r)``
``Matern52``            ``(1 + sqrt(5) r + 5 r^2 / 3) exp(-sqrt(5) r)``
=====================  =============================================

The variance is fixed by default because the correlated multinomial model learns its own
scale ``theta`` in closed form; the length scale is free (bounds ``(1e-2, 1e3)``, which constrain
learning only: an unlearned length scale may lie outside them).
``theta`` order: ``[log lengthscale, log variance]``, fixed ones omitted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._typing import FloatArray
from .base import Hyperparameter, Kernel, parse_bounds, parse_positive

_SQRT3 = np.sqrt(3.0)
_SQRT5 = np.sqrt(5.0)

#: Scaled distances beyond this are evaluated at it: every profile and its log-derivative is
#: exactly 0.0 in float64 there (the slowest, exp(-r), underflows from r = 746), so the result
#: is unchanged, and a length scale far below the distances (d / l = 1e300) cannot overflow
#: into inf * 0 = NaN.
_R_MAX = 1e3


@dataclass(frozen=True)
class _Stationary(Kernel):
    """Shared machinery: ``variance * f(d / lengthscale)`` and its log-parameter gradient."""

    lengthscale: float = 1.0
    variance: float = 1.0
    lengthscale_bounds: Any = (1e-2, 1e3)
    variance_bounds: Any = field(default="fixed")

    def __post_init__(self) -> None:
        ls = parse_positive(self.lengthscale, "lengthscale")
        var = parse_positive(self.variance, "variance")
        object.__setattr__(self, "lengthscale", ls)
        object.__setattr__(self, "variance", var)
        lb = parse_bounds(self.lengthscale_bounds, "lengthscale")
        vb = parse_bounds(self.variance_bounds, "variance")
        object.__setattr__(self, "lengthscale_bounds", "fixed" if lb is None else lb)
        object.__setattr__(self, "variance_bounds", "fixed" if vb is None else vb)

    # profile f(r) and g(r) = -r f'(r) = d f(d / l) / d log l
    @staticmethod
    def _profile(r: FloatArray) -> FloatArray:
        raise NotImplementedError

    @staticmethod
    def _profile_dlog(r: FloatArray) -> FloatArray:
        raise NotImplementedError

    @property
    def hyperparameters(self) -> tuple[Hyperparameter, ...]:
        """``(lengthscale, variance)`` with their bounds (``None`` when fixed)."""
        lb = None if self.lengthscale_bounds == "fixed" else self.lengthscale_bounds
        vb = None if self.variance_bounds == "fixed" else self.variance_bounds
        return (Hyperparameter("lengthscale", self.lengthscale, lb),
                Hyperparameter("variance", self.variance, vb))

    @property
    def is_stationary(self) -> bool:
        """Always ``True``."""
        return True

    def _with_free_values(self, values: FloatArray) -> Kernel:
        vals = iter(values)
        ls = float(next(vals)) if self.lengthscale_bounds != "fixed" else self.lengthscale
        var = float(next(vals)) if self.variance_bounds != "fixed" else self.variance
        return type(self)(lengthscale=ls, variance=var, lengthscale_bounds=self.lengthscale_bounds,
                          variance_bounds=self.variance_bounds)

    def _scaled_distance(self, D: FloatArray) -> tuple[FloatArray, FloatArray]:
        inf = np.isinf(D)
        with np.errstate(over="ignore"):
            r = np.minimum(np.where(inf, 0.0, D) / self.lengthscale, _R_MAX)
        return r, inf

    def _k_dist(self, D: FloatArray) -> FloatArray:
        r, inf = self._scaled_distance(D)
        K = self.variance * self._profile(r)
        if inf.any():
            K[inf] = 0.0
        return K

    def _grad_dist(self, D: FloatArray) -> FloatArray:
        r, inf = self._scaled_distance(D)
        f = self._profile(r)
        parts = []
        if self.lengthscale_bounds != "fixed":
            parts.append(self.variance * self._profile_dlog(r))
        if self.variance_bounds != "fixed":
            parts.append(self.variance * f)
        G = np.stack(parts, axis=-1) if parts else np.zeros(D.shape + (0,))
        if inf.any():
            G[inf] = 0.0
        return G


@dataclass(frozen=True)
class SquaredExponential(_Stationary):
    r"""Squared exponential kernel in the paper's form, ``variance * exp(-d^2 / l^2)``.

    Note: there is **no factor 1/2** in the exponent (unlike scikit-learn's ``RBF`` and
    GPflow's ``SquaredExponential``, which use ``exp(-d^2 / (2 l^2))``); a length scale
    ``l`` here equals ``l / sqrt(2)`` there.

    Parameters
    ----------
    lengthscale : float, default=1.0
        Length scale ``l > 0``, in the units of the distances.
    variance : float, default=1.0
        Marginal variance ``k(0)``.
    lengthscale_bounds : (float, float) or "fixed", default=(1e-2, 1e3)
        Bounds on ``l`` (natural scale); ``"fixed"`` removes it from ``theta``.
    variance_bounds : (float, float) or "fixed", default="fixed"
        Bounds on the variance.

    Examples
    --------
    >>> import numpy as np
    >>> from corrpriors.kernels import SquaredExponential
    >>> k = SquaredExponential(lengthscale=2.0)
    >>> K = k(np.array([[0.0], [2.0]]))
    >>> bool(np.isclose(K[0, 1], np.exp(-1.0)))
    True
    """

    @staticmethod
    def _profile(r):
        return np.exp(-r * r)

    @staticmethod
    def _profile_dlog(r):
        return 2.0 * r * r * np.exp(-r * r)


@dataclass(frozen=True)
class Exponential(_Stationary):
    r"""Exponential (Matern 1/2, Ornstein-Uhlenbeck) kernel ``variance * exp(-d / l)``.

    Positive definite for Euclidean distances in any dimension. Parameters as in
    :class:`SquaredExponential`.
    """

    @staticmethod
    def _profile(r):
        return np.exp(-r)

    @staticmethod
    def _profile_dlog(r):
        return r * np.exp(-r)


@dataclass(frozen=True)
class Matern32(_Stationary):
    r"""Matern 3/2 kernel ``variance * (1 + sqrt(3) r) exp(-sqrt(3) r)``, ``r = d / l``.

    Parameters as in :class:`SquaredExponential`.
    """

    @staticmethod
    def _profile(r):
        s = _SQRT3 * r
        return (1.0 + s) * np.exp(-s)

    @staticmethod
    def _profile_dlog(r):
        s = _SQRT3 * r
        return s * s * np.exp(-s)


@dataclass(frozen=True)
class Matern52(_Stationary):
    r"""Matern 5/2 kernel ``variance * (1 + sqrt(5) r + 5 r^2 / 3) exp(-sqrt(5) r)``.

    Parameters as in :class:`SquaredExponential`.
    """

    @staticmethod
    def _profile(r):
        s = _SQRT5 * r
        return (1.0 + s + s * s / 3.0) * np.exp(-s)

    @staticmethod
    def _profile_dlog(r):
        s = _SQRT5 * r
        return s * s * (1.0 + s) / 3.0 * np.exp(-s)


__all__ = ["Exponential", "Matern32", "Matern52", "SquaredExponential"]
