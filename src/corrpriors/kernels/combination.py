"""Kernel algebra: sums, products and scaled kernels.

Sums and products of positive semi-definite kernels are positive semi-definite (Schur
product theorem), so they are valid covariance functions for the correlated multinomial
model. ``theta`` of a combination concatenates the parts' ``theta`` (names prefixed
``k1__``, ``k2__`` or ``kernel__``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .._typing import FloatArray
from .base import Hyperparameter, Kernel, parse_bounds, parse_positive


def _prefixed(prefix: str, hps: tuple[Hyperparameter, ...]) -> tuple[Hyperparameter, ...]:
    return tuple(replace(h, name=f"{prefix}__{h.name}") for h in hps)


def _coordinates_only(kernel: Kernel, X: Any, distances: Any) -> None:
    """A combination with a non-stationary part has a gradient on coordinates only."""
    if X is None or distances is not None:
        raise TypeError(f"{type(kernel).__name__} has a non-stationary part: gradient needs X "
                        "(coordinates), not distances")


def _check_kernel(k: Any, name: str) -> Kernel:
    if not isinstance(k, Kernel):
        raise TypeError(f"{name}: expected a Kernel, got {type(k).__name__}")
    return k


@dataclass(frozen=True)
class _Binary(Kernel):
    k1: Kernel
    k2: Kernel

    def __post_init__(self) -> None:
        _check_kernel(self.k1, "k1")
        _check_kernel(self.k2, "k2")
        with np.errstate(over="ignore"):
            peak = self._combine(_peak(self.k1), _peak(self.k2))
        if not np.isfinite(peak):   # as Scaled refuses a scale that overflows
            raise ValueError(f"k1, k2: their amplitudes {_peak(self.k1):g} and {_peak(self.k2):g} "
                             f"combine to an overflow (the Gram matrix would be infinite); use "
                             f"smaller variances")

    @staticmethod
    def _combine(a: float, b: float) -> float:
        raise NotImplementedError

    @property
    def hyperparameters(self) -> tuple[Hyperparameter, ...]:
        """Hyper-parameters of ``k1`` then ``k2``, prefixed ``k1__`` / ``k2__``."""
        return _prefixed("k1", self.k1.hyperparameters) + _prefixed("k2", self.k2.hyperparameters)

    @property
    def is_stationary(self) -> bool:
        """Whether both parts are stationary."""
        return self.k1.is_stationary and self.k2.is_stationary

    def _with_free_values(self, values: FloatArray) -> Kernel:
        p = self.k1.n_params
        return type(self)(self.k1._with_free_values(values[:p]), self.k2._with_free_values(values[p:]))


@dataclass(frozen=True)
class Sum(_Binary):
    """Sum ``k1(x, x') + k2(x, x')`` of two kernels (also ``k1 + k2``).

    Parameters
    ----------
    k1, k2 : Kernel
    """

    @staticmethod
    def _combine(a: float, b: float) -> float:
        return a + b

    def _k_dist(self, D):
        return self.k1._k_dist(D) + self.k2._k_dist(D)

    def _grad_dist(self, D):
        return np.concatenate([self.k1._grad_dist(D), self.k2._grad_dist(D)], axis=-1)

    def __call__(self, X, Y=None):
        """Gram matrix ``k1(X, Y) + k2(X, Y)`` of shape (N, M)."""
        return self.k1(X, Y) + self.k2(X, Y)

    def diag(self, X):
        """Diagonal, ndarray of shape (N,)."""
        return self.k1.diag(X) + self.k2.diag(X)

    def gradient(self, X=None, distances=None):
        """Derivative of the Gram matrix with respect to ``theta``, shape (N, N, P)."""
        if self.is_stationary:
            return super().gradient(X=X, distances=distances)
        _coordinates_only(self, X, distances)
        return np.concatenate([self.k1.gradient(X=X), self.k2.gradient(X=X)], axis=-1)


@dataclass(frozen=True)
class Product(_Binary):
    """Element-wise product ``k1(x, x') * k2(x, x')`` of two kernels (also ``k1 * k2``).

    Parameters
    ----------
    k1, k2 : Kernel
    """

    @staticmethod
    def _combine(a: float, b: float) -> float:
        return a * b

    def _k_dist(self, D):
        return self.k1._k_dist(D) * self.k2._k_dist(D)

    def _grad_dist(self, D):
        K1, K2 = self.k1._k_dist(D), self.k2._k_dist(D)
        return np.concatenate([self.k1._grad_dist(D) * K2[..., None],
                               K1[..., None] * self.k2._grad_dist(D)], axis=-1)

    def __call__(self, X, Y=None):
        """Gram matrix ``k1(X, Y) * k2(X, Y)`` of shape (N, M)."""
        return self.k1(X, Y) * self.k2(X, Y)

    def diag(self, X):
        """Diagonal, ndarray of shape (N,)."""
        return self.k1.diag(X) * self.k2.diag(X)

    def gradient(self, X=None, distances=None):
        """Derivative of the Gram matrix with respect to ``theta``, shape (N, N, P)."""
        if self.is_stationary:
            return super().gradient(X=X, distances=distances)
        _coordinates_only(self, X, distances)
        K1, K2 = self.k1(X), self.k2(X)
        return np.concatenate([self.k1.gradient(X=X) * K2[..., None],
                               K1[..., None] * self.k2.gradient(X=X)], axis=-1)


def _peak(kernel: Kernel) -> float:
    """``k(x, x)`` of a stationary kernel (scales of nested :class:`Scaled` multiplied), else 1."""
    if isinstance(kernel, Scaled):
        with np.errstate(over="ignore"):
            return kernel.scale * _peak(kernel.kernel)
    if kernel.is_stationary:
        with np.errstate(over="ignore"):
            return float(kernel._k_dist(np.zeros((1, 1)))[0, 0])
    return 1.0


@dataclass(frozen=True)
class Scaled(Kernel):
    """``scale * kernel(x, x')`` (also ``scale * kernel``).

    Parameters
    ----------
    kernel : Kernel
    scale : float, default=1.0
        Positive multiplier.
    scale_bounds : (float, float) or "fixed", default="fixed"
        Bounds on ``scale``; fixed by default because the correlated multinomial model
        learns the overall scale in closed form.
    """

    kernel: Kernel
    scale: float = 1.0
    scale_bounds: Any = field(default="fixed")

    def __post_init__(self) -> None:
        _check_kernel(self.kernel, "kernel")
        s = parse_positive(self.scale, "scale")
        with np.errstate(over="ignore"):
            peak = s * _peak(self.kernel)
        if not np.isfinite(peak):
            raise ValueError(f"scale: {s:g} times the kernel's own amplitude overflows (the "
                             f"Gram matrix would be infinite); use a smaller scale or variance")
        object.__setattr__(self, "scale", s)
        b = parse_bounds(self.scale_bounds, "scale")
        object.__setattr__(self, "scale_bounds", "fixed" if b is None else b)

    @property
    def hyperparameters(self) -> tuple[Hyperparameter, ...]:
        """``scale`` then the kernel's hyper-parameters (prefixed ``kernel__``)."""
        b = None if self.scale_bounds == "fixed" else self.scale_bounds
        return (Hyperparameter("scale", self.scale, b),) + _prefixed("kernel", self.kernel.hyperparameters)

    @property
    def is_stationary(self) -> bool:
        """Whether the wrapped kernel is stationary."""
        return self.kernel.is_stationary

    def _with_free_values(self, values: FloatArray) -> Kernel:
        free_scale = self.scale_bounds != "fixed"
        s = float(values[0]) if free_scale else self.scale
        inner = self.kernel._with_free_values(values[1:] if free_scale else values)
        return Scaled(inner, s, self.scale_bounds)

    def _k_dist(self, D):
        return self.scale * self.kernel._k_dist(D)

    def _grad_dist(self, D):
        G = self.scale * self.kernel._grad_dist(D)
        if self.scale_bounds != "fixed":
            G = np.concatenate([self.scale * self.kernel._k_dist(D)[..., None], G], axis=-1)
        return G

    def __call__(self, X, Y=None):
        """Gram matrix ``scale * kernel(X, Y)`` of shape (N, M)."""
        return self.scale * self.kernel(X, Y)

    def diag(self, X):
        """Diagonal, ndarray of shape (N,)."""
        return self.scale * self.kernel.diag(X)

    def gradient(self, X=None, distances=None):
        """Derivative of the Gram matrix with respect to ``theta``, shape (N, N, P)."""
        if self.is_stationary:
            return super().gradient(X=X, distances=distances)
        _coordinates_only(self, X, distances)
        G = self.scale * self.kernel.gradient(X=X)
        if self.scale_bounds != "fixed":
            G = np.concatenate([self.scale * self.kernel(X)[..., None], G], axis=-1)
        return G


__all__ = ["Product", "Scaled", "Sum"]
