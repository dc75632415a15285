r"""Kernel base class, hyper-parameter metadata and kernels bound to covariates.

Conventions (as in scikit-learn's ``gaussian_process.kernels``):

* The hyper-parameters a kernel may learn form one flat vector ``theta`` holding the
  **logarithms** of the free (not fixed) parameters, in a fixed order given by
  ``hyperparameter_names``; ``bounds`` (P, 2) are in log space too.
* ``gradient`` returns the derivative of the Gram matrix with respect to ``theta``
  (i.e. with respect to the log parameters) with a trailing hyper-parameter axis,
  shape (N, N, P).
* Kernels are immutable: ``with_theta`` returns a new kernel.
* ``k1 + k2``, ``k1 * k2`` and ``2.0 * k`` build :class:`~corrpriors.kernels.Sum`,
  :class:`~corrpriors.kernels.Product` and :class:`~corrpriors.kernels.Scaled` kernels.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._memory import check_memory
from .._typing import FloatArray
from .._validation import as_real_array, check_real, holds_bool
from .distances import check_coords, check_distances, euclidean_distances

#: Tolerance (in log space) for ``theta`` slightly outside its bounds after round-off.
_BOUNDS_TOL = 1e-8

#: C x C float64 matrices alive at the peak of building a dense prior from a bound kernel
#: (tracemalloc, C = 1,500: binding holds the distances and briefly their private copy; the
#: prior adds the Gram matrix, its validated copy, the jittered copy and its Cholesky factor,
#: 6 at the peak). A fit then peaks at about 10 (17 with a learned scale), so a refusal on this
#: count is never a problem that would have fitted.
DENSE_PRIOR_MATRICES = 6


def check_dense_memory(n_covariates: int) -> None:
    """Refuse, before any C x C array exists, a dense prior that cannot fit in memory.

    Compares :data:`DENSE_PRIOR_MATRICES` C x C float64 matrices with
    :func:`corrpriors._memory.memory_budget` (``ulimit -v``, the physical memory,
    ``CORRPRIORS_MEMORY_LIMIT``).

    Parameters
    ----------
    n_covariates : int
        C.

    Raises
    ------
    corrpriors._memory.MemoryEstimateError
        A ``ValueError`` naming C, the estimate and the sparse-precision alternative.
    """
    c = int(n_covariates)
    check_memory(8.0 * DENSE_PRIOR_MATRICES * c * c,
                 f"a dense kernel prior on C = {c:,} covariates ({DENSE_PRIOR_MATRICES} C x C "
                 f"float64 matrices: the distances, the Gram matrix, its Cholesky factor and "
                 f"their copies)",
                 "use a sparse precision instead (a GMRF, memory about linear in C: "
                 "CorrelatedMultinomial(precision=corrpriors.kernels.graph_precision(...)); "
                 "corrpriors fit --prior gmrf) or fewer covariates")


@dataclass(frozen=True)
class Hyperparameter:
    """Metadata of one kernel hyper-parameter.

    Attributes
    ----------
    name : str
        Name, prefixed by the path inside combined kernels (``"k1__lengthscale"``).
    value : float
        Current (positive) value.
    bounds : tuple of float or None
        ``(low, high)`` on the natural scale, or ``None`` when the parameter is fixed.
    """

    name: str
    value: float
    bounds: tuple[float, float] | None

    @property
    def fixed(self) -> bool:
        """Whether the parameter is excluded from ``theta``."""
        return self.bounds is None


def parse_bounds(bounds: Any, name: str) -> tuple[float, float] | None:
    """Validate a bounds specification: ``"fixed"`` or ``(low, high)`` with finite ``0 < low <= high``.

    The value itself is not checked against the bounds here: bounds constrain learning only, so
    a kernel whose length scale is not learned may lie outside them (see :attr:`Kernel.bounds`).
    """
    if isinstance(bounds, str):
        if bounds != "fixed":
            raise ValueError(f"{name}_bounds: expected 'fixed' or a pair (low, high), got {bounds!r}")
        return None
    try:
        pair = tuple(bounds)
    except TypeError:
        pair = ()
    if len(pair) != 2:
        raise ValueError(f"{name}_bounds: expected 'fixed' or a pair (low, high), got {bounds!r}")
    if any(isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real) for v in pair):
        # True is not 1 and '2' is not 2: never converted
        raise TypeError(f"{name}_bounds: expected 'fixed' or a pair of real numbers (low, high), "
                        f"got {bounds!r}")
    lo, hi = float(pair[0]), float(pair[1])
    if not (np.isfinite(lo) and np.isfinite(hi) and lo > 0 and hi >= lo):
        # (an infinite high let learning reach exp(theta) = inf: a kernel with an overflowed
        # length scale or variance)
        raise ValueError(f"{name}_bounds: expected finite 0 < low <= high, got ({lo:g}, {hi:g})")
    return (lo, hi)


def parse_positive(value: Any, name: str) -> float:
    """Validate a strictly positive, finite scalar hyper-parameter.

    Booleans, strings and other non-numbers raise :class:`TypeError` (``True`` is not 1 and
    ``'1'`` is not 1); zero, negative and non-finite values raise :class:`ValueError`.
    """
    return check_real(value, name, 0.0, np.inf, closed="neither", expected="a finite positive number")


class Kernel:
    """Base class of covariance functions ``k(x, x')`` on covariates.

    Subclasses implement ``hyperparameters``, ``_with_free_values``, ``is_stationary``,
    ``_k_dist`` and ``_grad_dist`` (stationary kernels work on distance matrices; a
    non-stationary kernel would override ``__call__`` and ``gradient``).
    """

    # ------------------------------------------------------------------ metadata
    @property
    def hyperparameters(self) -> tuple[Hyperparameter, ...]:
        """All hyper-parameters, fixed ones included, in ``theta`` order."""
        raise NotImplementedError

    @property
    def is_stationary(self) -> bool:
        """Whether the kernel depends on the covariates only through their distance."""
        raise NotImplementedError

    @property
    def _free(self) -> tuple[Hyperparameter, ...]:
        return tuple(h for h in self.hyperparameters if not h.fixed)

    @property
    def n_params(self) -> int:
        """Number P of free hyper-parameters (the length of ``theta``)."""
        return len(self._free)

    @property
    def hyperparameter_names(self) -> list[str]:
        """Names of the free hyper-parameters, in ``theta`` order."""
        return [h.name for h in self._free]

    @property
    def theta(self) -> FloatArray:
        """Ndarray of shape (P,): log values of the free hyper-parameters."""
        return np.log(np.array([h.value for h in self._free], dtype=np.float64))

    @property
    def bounds(self) -> FloatArray:
        """Ndarray of shape (P, 2): log-space bounds of the free hyper-parameters.

        Bounds constrain learning only. A kernel may be built with a value outside them (and
        evaluated: nothing is learned then); asking for the bounds, which every optimiser of
        ``theta`` does, raises ``ValueError`` for such a value.
        """
        for h in self._free:
            assert h.bounds is not None   # free = not fixed
            lo, hi = h.bounds
            if not lo <= h.value <= hi:
                leaf = h.name.rsplit("__", 1)[-1]
                raise ValueError(f"{h.name}: value {h.value:g} lies outside its bounds "
                                 f"({lo:g}, {hi:g}), which apply when it is learned; pass "
                                 f"{leaf}_bounds to widen them or {leaf}_bounds='fixed'")
        return self._log_bounds()

    def _log_bounds(self) -> FloatArray:
        if not self._free:
            return np.zeros((0, 2))
        with np.errstate(divide="ignore"):
            return np.log(np.array([h.bounds for h in self._free], dtype=np.float64))

    def _with_free_values(self, values: FloatArray) -> Kernel:
        raise NotImplementedError

    def with_theta(self, theta) -> Kernel:
        """Return a copy with the free hyper-parameters set to ``exp(theta)``.

        Parameters
        ----------
        theta : array_like of shape (P,)
            Log values, within ``bounds`` (up to round-off, which is clipped). An entry equal to
            the current one is kept as it is (its exact value, not ``exp(log(value))``), even
            outside its bounds (it was not learned); a changed one is set to ``exp(theta)``
            clipped into its bounds on the natural scale, so that a value left on a bound by an
            optimiser passes the check of :attr:`bounds`.

        Returns
        -------
        kernel : Kernel
        """
        raw = as_real_array(theta, "theta")
        if holds_bool(theta, raw):
            raise TypeError("theta: expected log hyper-parameters (real numbers), got booleans")
        t = raw.astype(np.float64).reshape(-1)
        if t.shape != (self.n_params,):
            raise ValueError(f"theta: expected shape (P,) = ({self.n_params},) for "
                             f"{self.hyperparameter_names}, got {np.shape(theta)}")
        if not np.all(np.isfinite(t)):
            raise ValueError("theta: contains NaN or infinite values")
        b = self._log_bounds()
        moved = t != self.theta
        out = moved & ((t < b[:, 0] - _BOUNDS_TOL) | (t > b[:, 1] + _BOUNDS_TOL))
        if out.any():
            i = int(np.flatnonzero(out)[0])
            raise ValueError(f"theta: {self.hyperparameter_names[i]} = {np.exp(t[i]):g} "
                             f"lies outside its bounds ({np.exp(b[i, 0]):g}, {np.exp(b[i, 1]):g})")
        # exp(log(v)) is often one ulp off v (exp(log(0.1)) > 0.1, likewise 5, 10, 100): an
        # entry left as it was keeps its exact value, and a moved one is clipped into its bounds
        # on the natural scale too, so a value the optimiser left on a bound lies within it
        # (``bounds`` checks that)
        current = np.array([h.value for h in self._free], dtype=np.float64)
        natural = np.array([h.bounds for h in self._free], dtype=np.float64).reshape(-1, 2)
        with np.errstate(over="ignore"):
            moved_values = np.clip(np.exp(np.clip(t, b[:, 0], b[:, 1])), natural[:, 0], natural[:, 1])
        return self._with_free_values(np.where(moved, moved_values, current))

    # ---------------------------------------------------------------- evaluation
    def _k_dist(self, D: FloatArray) -> FloatArray:
        raise NotImplementedError

    def _grad_dist(self, D: FloatArray) -> FloatArray:
        raise NotImplementedError

    def _require_stationary(self, what: str) -> None:
        if not self.is_stationary:
            raise TypeError(f"{type(self).__name__} is not stationary: {what} needs coordinates")

    def __call__(self, X, Y=None) -> FloatArray:
        """Gram matrix between coordinates.

        Parameters
        ----------
        X : array_like of shape (N, D)
        Y : array_like of shape (M, D), optional
            ``X`` when omitted.

        Returns
        -------
        K : ndarray of shape (N, M)
        """
        return self._k_dist(euclidean_distances(X, Y))

    def diag(self, X) -> FloatArray:
        """Diagonal of ``self(X)`` without building the matrix.

        Parameters
        ----------
        X : array_like of shape (N, D)

        Returns
        -------
        diag : ndarray of shape (N,)
        """
        X = check_coords(X, "X")
        return np.diag(self._k_dist(np.zeros((1, 1))))[0] * np.ones(X.shape[0])

    def from_distances(self, distances) -> FloatArray:
        """Gram matrix of a stationary kernel from a distance matrix.

        Parameters
        ----------
        distances : array_like of shape (N, M)
            Non-negative distances; ``+inf`` gives zero covariance.

        Returns
        -------
        K : ndarray of shape (N, M)
        """
        self._require_stationary("from_distances")
        return self._k_dist(check_distances(distances, square=False))

    def gradient(self, X=None, distances=None) -> FloatArray:
        """Derivative of the Gram matrix with respect to ``theta`` (log parameters).

        Exactly one of ``X`` and ``distances`` must be given.

        Parameters
        ----------
        X : array_like of shape (N, D), optional
        distances : array_like of shape (N, M), optional

        Returns
        -------
        grad : ndarray of shape (N, M, P)
            ``grad[..., p] = dK / dtheta_p``.
        """
        if (X is None) == (distances is None):
            raise ValueError("gradient: pass exactly one of X and distances")
        if X is not None:
            D = euclidean_distances(X)
        else:
            self._require_stationary("gradient(distances=...)")
            D = check_distances(distances, square=False)
        return self._grad_dist(D)

    def bind(self, coords=None, distances=None) -> BoundKernel:
        """Freeze the kernel on a set of covariates.

        Parameters
        ----------
        coords : array_like of shape (C, D), optional
            Covariate coordinates.
        distances : array_like of shape (C, C), optional
            Square, symmetric, non-negative distances with a zero diagonal (``+inf``
            allowed off the diagonal).

        Returns
        -------
        bound : BoundKernel

        Raises
        ------
        corrpriors._memory.MemoryEstimateError
            The dense prior of C covariates (:data:`DENSE_PRIOR_MATRICES` C x C matrices) would
            not fit in the memory this process may use; raised before any C x C array exists.
        """
        if (coords is None) == (distances is None):
            raise ValueError("bind: pass exactly one of coords and distances")
        if coords is not None:
            X = check_coords(coords, "coords")
            check_dense_memory(X.shape[0])
            D = euclidean_distances(X)
            return BoundKernel._from_checked(self, D, X)
        self._require_stationary("bind(distances=...)")
        if np.ndim(distances) == 2:  # the caller's matrix: refuse before validated copies
            check_dense_memory(np.shape(distances)[0])
        return BoundKernel._from_checked(self, check_distances(distances, "distances"), None)

    # ---------------------------------------------------------------- algebra
    def __add__(self, other):
        from .combination import Sum

        if isinstance(other, Kernel):
            return Sum(self, other)
        return NotImplemented

    def __radd__(self, other):
        if isinstance(other, (int, float)) and other == 0:  # sum([k1, k2])
            return self
        return NotImplemented

    def __mul__(self, other):
        from .combination import Product, Scaled

        if isinstance(other, Kernel):
            return Product(self, other)
        if isinstance(other, (int, float, np.floating, np.integer)) and not isinstance(other, bool):
            return Scaled(self, float(other))
        return NotImplemented

    __rmul__ = __mul__


@dataclass(frozen=True, eq=False)
class BoundKernel:
    """A kernel frozen on C covariates (coordinates or a distance matrix).

    Create with :meth:`Kernel.bind`. This is what a model receives as its covariance:
    ``gram()`` is the (C, C) prior covariance and ``gram_gradient()`` its derivative with
    respect to ``theta``.

    Attributes
    ----------
    kernel : Kernel
        The underlying kernel.
    distances : ndarray of shape (C, C)
        Validated pairwise distances.
    coords : ndarray of shape (C, D) or None
        Coordinates, when bound with ``coords=``.
    """

    kernel: Kernel
    distances: FloatArray
    coords: FloatArray | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.kernel, Kernel):
            raise TypeError(f"kernel: expected a corrpriors.kernels.Kernel, got {type(self.kernel).__name__}")
        if np.ndim(self.distances) == 2:  # (a wrong shape is the validation's to report)
            check_dense_memory(np.shape(self.distances)[0])
        # check_distances returns a fresh array: the private copy
        D = check_distances(self.distances, "distances")
        X = None
        if self.coords is not None:
            X = check_coords(self.coords, "coords")
            if X.shape[0] != D.shape[0]:
                raise ValueError(f"coords: expected one row per covariate, C = {D.shape[0]}, got "
                                 f"shape {X.shape}")
        elif not self.kernel.is_stationary:
            raise ValueError(f"coords: {type(self.kernel).__name__} is not stationary and needs "
                             f"the coordinates, got None")
        self._set(D, X)

    def _set(self, distances: FloatArray, coords: FloatArray | None) -> None:
        # private read-only arrays: a frozen object must not change under its user's feet
        distances.setflags(write=False)
        object.__setattr__(self, "distances", distances)
        if coords is not None:
            coords = np.array(coords, dtype=np.float64)
            coords.setflags(write=False)
        object.__setattr__(self, "coords", coords)

    @classmethod
    def _from_checked(cls, kernel: Kernel, distances: FloatArray, coords: FloatArray | None) -> BoundKernel:
        """Without the O(C^2) checks of ``__post_init__``, for callers that own ``distances``
        (a fresh, validated float64 array that nothing else will write, or an already read-only
        one): :meth:`Kernel.bind` and :meth:`with_theta`.
        """
        bound = object.__new__(cls)
        object.__setattr__(bound, "kernel", kernel)
        bound._set(distances, coords)
        return bound

    @property
    def n_covariates(self) -> int:
        """Number C of covariates."""
        return int(self.distances.shape[0])

    @property
    def theta(self) -> FloatArray:
        """Ndarray of shape (P,): ``kernel.theta``."""
        return self.kernel.theta

    @property
    def bounds(self) -> FloatArray:
        """Ndarray of shape (P, 2): ``kernel.bounds``."""
        return self.kernel.bounds

    @property
    def hyperparameter_names(self) -> list[str]:
        """Names of the free hyper-parameters."""
        return self.kernel.hyperparameter_names

    @property
    def n_params(self) -> int:
        """Number P of free hyper-parameters."""
        return self.kernel.n_params

    def gram(self) -> FloatArray:
        """Prior covariance of the bound covariates.

        Returns
        -------
        K : ndarray of shape (C, C)
            A fresh array (safe to modify).
        """
        if self.kernel.is_stationary:
            K = self.kernel._k_dist(self.distances)
        else:
            K = self.kernel(self.coords)
        return 0.5 * K + 0.5 * K.T   # (halved first: K + K.T overflows beyond 9e307; same bits)

    def gram_gradient(self) -> FloatArray:
        """Derivative of ``gram()`` with respect to ``theta``.

        Returns
        -------
        grad : ndarray of shape (C, C, P)
        """
        if self.kernel.is_stationary:
            G = self.kernel._grad_dist(self.distances)
        else:
            G = self.kernel.gradient(X=self.coords)
        return 0.5 * (G + G.transpose(1, 0, 2))

    def with_theta(self, theta) -> BoundKernel:
        """Same covariates, kernel ``kernel.with_theta(theta)``.

        Parameters
        ----------
        theta : array_like of shape (P,)

        Returns
        -------
        bound : BoundKernel
        """
        return BoundKernel._from_checked(self.kernel.with_theta(theta), self.distances, self.coords)

    def __repr__(self) -> str:
        return f"BoundKernel({self.kernel!r}, n_covariates={self.n_covariates})"


__all__ = ["BoundKernel", "Hyperparameter", "Kernel"]
