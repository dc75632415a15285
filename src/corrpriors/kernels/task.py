r"""Kernels over (task, state) pairs: a learned task correlation times a state kernel.

Several related tasks (MDPs that share their motion noise but differ in wind, slip or layout)
give the correlated multinomial model covariates that are (task, state) pairs. The prior
covariance of the stick logits is the product of a kernel over tasks and one over states,

.. math::

    \operatorname{Cov}[\psi_{(t, s)k}, \psi_{(u, s')k}] = \theta\, B_{tu}\, k(x_s, x_{s'}),

so that, on a shared state set, the Gram matrix is the Kronecker product :math:`B \otimes K`
(task-major order). :math:`B` is a **correlation matrix** (unit diagonal: the overall scale is
the model's :math:`\theta`); :math:`B_{tu} = 0` makes tasks ``t`` and ``u`` independent,
:math:`B_{tu} \to 1` makes them one task. Two task kernels:

* :class:`TaskCorrelation` -- a free-form correlation matrix over a few tasks, learned like any
  kernel hyper-parameter (log-space ``theta``, bounds, gradients);
* any kernel over task *descriptors* (e.g. a :class:`~corrpriors.kernels.SquaredExponential` on
  a known wind strength), when the tasks have them.

:class:`MultiTaskKernel` multiplies a task kernel on the first ``n_task_dims`` coordinate
columns with a state kernel on the remaining ones; :func:`task_coordinates` stacks the
coordinates. For the sparse path, :func:`kronecker_precision` builds the precision
:math:`B^{-1} \otimes Q` of the same prior from a task correlation and a sparse state precision
(a GMRF), which is again a sparse precision.

Parametrisation of :class:`TaskCorrelation`
-------------------------------------------
:math:`B = LL^\top` with :math:`L` lower triangular and unit-norm rows (so :math:`B` has a unit
diagonal and is positive semi-definite for every parameter value). Row :math:`i \ge 1` is a
point on the unit sphere in :math:`\mathbb R^{i+1}` in spherical coordinates (Pinheiro & Bates
1996; Rapisarda et al. 2007), with angles :math:`\phi_{i0}, \dots, \phi_{i,i-1} \in (0, \pi)`:

.. math::

    L_{ij} = \cos\phi_{ij}\prod_{m<j}\sin\phi_{im} \;(j < i), \qquad
    L_{ii} = \prod_{m<i}\sin\phi_{im}.

Hence :math:`B_{i0} = \cos\phi_{i0}`: an angle of :math:`\pi/2` is no correlation, a small angle a
strong positive one, an angle near :math:`\pi` a strong negative one. The angles are positive,
so they fit the kernels' convention of a log-space ``theta`` with bounds; the default bounds
:math:`(0.05, \pi - 0.05)` keep :math:`|B_{i0}| \le 0.99875` (a singular :math:`B` would make the
Gram matrix singular). Bounds ``(0.05, pi / 2)`` restrict the correlations to be non-negative
(then every entry of :math:`L` is non-negative).

Examples
--------
>>> import numpy as np
>>> from corrpriors.kernels import MultiTaskKernel, SquaredExponential, TaskCorrelation
>>> from corrpriors.kernels import task_coordinates
>>> B = np.array([[1.0, 0.8], [0.8, 1.0]])
>>> kernel = MultiTaskKernel(TaskCorrelation.from_correlation(B),
...                          SquaredExponential(lengthscale=2.0))
>>> X = task_coordinates([np.array([[0.0], [1.0], [2.0]])] * 2)   # 2 tasks x 3 states
>>> K = kernel(X)
>>> bool(np.allclose(K, np.kron(B, SquaredExponential(lengthscale=2.0)(X[:3, 1:]))))
True
>>> kernel.hyperparameter_names
['task__angle_1_0', 'state__lengthscale']
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.linalg import cho_factor, cho_solve

from .._memory import check_memory
from .._typing import FloatArray
from .._validation import as_real_array, check_precision
from .base import Hyperparameter, Kernel, parse_bounds
from .distances import check_coords

#: Default bounds of the spherical angles: correlations within +-cos(0.05) = +-0.99875.
ANGLE_BOUNDS = (0.05, np.pi - 0.05)


def _check_n_tasks(n_tasks: Any) -> int:
    if isinstance(n_tasks, bool) or not isinstance(n_tasks, (int, np.integer)) or n_tasks < 1:
        raise ValueError(f"n_tasks: expected a positive int, got {n_tasks!r}")
    return int(n_tasks)


def n_angles(n_tasks: int) -> int:
    """Number T (T - 1) / 2 of angles of a T x T correlation matrix."""
    return n_tasks * (n_tasks - 1) // 2


#: Most tasks :func:`kronecker_precision` inverts densely. The T x T Cholesky factorisation and
#: inverse cost about (7/3) T^3 flops: 3e11 at this bound (seconds to a minute on a laptop core),
#: 2e13 at T = 20,000 (an apparent hang of tens of minutes), for a prior whose Kronecker
#: product would anyway hold T^2 times the non-zeros of the state precision.
MAX_DENSE_TASKS = 5_000


def _check_task_memory(T: int, per_entry: float, what: str, name: str = "n_tasks") -> None:
    check_memory(float(T) * T * per_entry, f"{name}: {what} of T = {T:,} tasks",
                 "use fewer tasks (group them, or fit them separately)")


def _factor_rows(angles: FloatArray, n_tasks: int
                 ) -> Iterator[tuple[int, int, FloatArray, FloatArray, FloatArray]]:
    r"""Per row :math:`i \ge 1` of the factor: ``i``, the row's first angle index ``p0``,
    :math:`\sin\phi`, :math:`\cos\phi` of its angles and ``prefix[j]`` =
    :math:`\prod_{m<j} \sin\phi_m`, j = 0..i.
    """
    p0 = 0
    for i in range(1, n_tasks):
        phi = angles[p0:p0 + i]
        s, c = np.sin(phi), np.cos(phi)
        yield i, p0, s, c, np.concatenate([[1.0], np.cumprod(s)])
        p0 += i


def _cholesky_factor(angles: FloatArray, n_tasks: int) -> FloatArray:
    r"""The factor :math:`L`, ndarray of shape (T, T)."""
    T = n_tasks
    _check_task_memory(T, 8.0 * 3, "the T x T correlation and its factor")
    L = np.zeros((T, T))
    L[0, 0] = 1.0
    for i, _, _, c, prefix in _factor_rows(angles, T):
        L[i, :i] = c * prefix[:i]
        L[i, i] = prefix[i]
    return L


def _cholesky_gradient(angles: FloatArray, n_tasks: int) -> FloatArray:
    r"""The derivative of :math:`L` with respect to each angle, ndarray of shape (T, T, P)."""
    T = n_tasks
    P = n_angles(T)
    _check_task_memory(T, 8.0 * (1 + 3 * P), "the (T, T, P) derivative of the correlation")
    dL = np.zeros((T, T, P))
    for i, p0, s, c, prefix in _factor_rows(angles, T):
        for m in range(i):                                        # d / d phi_m
            d = dL[i, :, p0 + m]
            d[m] = -s[m] * prefix[m]
            # later entries hold sin(phi_m) as a factor: replace it by cos(phi_m)
            d[m + 1:i + 1] = np.concatenate([c[m + 1:], [1.0]]) * prefix[m + 1:] / s[m] * c[m]
    return dL


def _check_angles(angles: Any, n_tasks: int, *, closed: bool) -> FloatArray:
    """``angles`` as a float array of shape (T (T - 1) / 2,) with finite values in (0, pi), or in
    [0, pi] with ``closed``; else an error naming ``angles`` (booleans and strings are refused,
    not converted: True is not 1 radian).
    """
    arr = as_real_array(angles, "angles", allow_bool=False,
                        expected="angles in radians (real numbers)")
    a = arr.astype(np.float64).reshape(-1)
    if a.shape != (n_angles(n_tasks),):
        raise ValueError(f"angles: expected shape (T (T - 1) / 2,) = ({n_angles(n_tasks)},), got {a.shape}")
    inside = (a >= 0) & (a <= np.pi) if closed else (a > 0) & (a < np.pi)
    if not np.all(inside):   # (NaN is never inside)
        bad = a[~inside][0]
        raise ValueError(f"angles: expected values in {'[0, pi]' if closed else '(0, pi)'} (finite), "
                         f"got {float(bad)!r} at position {int(np.flatnonzero(~inside)[0])}")
    return a


def correlation_from_angles(angles: Any, n_tasks: int) -> FloatArray:
    r"""The correlation matrix of spherical angles (see the module docstring).

    Parameters
    ----------
    angles : array_like of shape (T (T - 1) / 2,)
        Row by row: :math:`\phi_{10}, \phi_{20}, \phi_{21}, \phi_{30}, \dots`, finite numbers
        in [0, pi] (the ends: a singular matrix, as :func:`angles_from_correlation` gives it);
        others -- NaN, or an angle such as 4 whose cosine is that of another angle -- are refused.
    n_tasks : int
        T.

    Returns
    -------
    B : ndarray of shape (T, T)
    """
    T = _check_n_tasks(n_tasks)
    a = _check_angles(angles, T, closed=True)
    L = _cholesky_factor(a, T)
    B = L @ L.T
    np.fill_diagonal(B, 1.0)
    return B


def angles_from_correlation(correlation: Any) -> FloatArray:
    """Spherical angles of a correlation matrix (inverse of :func:`correlation_from_angles`).

    Parameters
    ----------
    correlation : array_like of shape (T, T)
        Symmetric, unit diagonal, positive semi-definite (a singular matrix gets the angles of
        its limit, some of them 0 or pi).

    Returns
    -------
    angles : ndarray of shape (T (T - 1) / 2,)
    """
    C = np.asarray(correlation, dtype=np.float64)
    if C.ndim != 2 or C.shape[0] != C.shape[1] or C.shape[0] < 1:
        raise ValueError(f"correlation: expected a square (T, T) matrix, got shape {C.shape}")
    if not np.all(np.isfinite(C)):
        raise ValueError("correlation: contains NaN or infinite values")
    if not np.allclose(C, C.T, atol=1e-12) or not np.allclose(np.diag(C), 1.0, atol=1e-12):
        raise ValueError("correlation: expected a symmetric matrix with a unit diagonal")
    T = C.shape[0]
    eig = np.linalg.eigvalsh(C)
    if eig[0] < -1e-10:
        raise ValueError(f"correlation: not positive semi-definite (smallest eigenvalue {eig[0]:.3g})")
    L = np.linalg.cholesky(C + 1e-13 * np.eye(T))
    L /= np.linalg.norm(L, axis=1, keepdims=True)
    out = []
    for i in range(1, T):
        rest = 1.0
        for j in range(i):
            c = np.clip(L[i, j] / rest, -1.0, 1.0) if rest > 1e-300 else 1.0
            phi = float(np.arccos(c))
            out.append(phi)
            rest *= np.sin(phi)
    return np.array(out)


def _task_index(X: Any, n_tasks: int, name: str) -> np.ndarray:
    arr = check_coords(X, name)
    if arr.shape[1] != 1:
        raise ValueError(f"{name}: expected one column of task indices, shape (N, 1), got {arr.shape}")
    t = arr[:, 0]
    if np.any(t != np.round(t)) or t.min() < 0 or t.max() >= n_tasks:
        raise ValueError(f"{name}: expected integer task indices in [0, {n_tasks}), got values in "
                         f"[{t.min():g}, {t.max():g}]")
    return t.astype(np.int64)


@dataclass(frozen=True)
class TaskCorrelation(Kernel):
    r"""A free-form correlation matrix :math:`B` over T tasks, a kernel on task indices.

    Evaluated on coordinates of shape (N, 1) holding integer task indices:
    ``k(t, u) = B[t, u]``. Parametrised by T (T - 1) / 2 spherical angles of the rows of its
    Cholesky factor (module docstring), which form ``theta`` in log space (names
    ``angle_i_j``); every value of ``theta`` gives a valid correlation matrix.

    Parameters
    ----------
    n_tasks : int
        T.
    angles : sequence of float, optional
        Initial angles in (0, pi), row by row; default pi / 2 (independent tasks). See
        :meth:`from_correlation` to start from a matrix.
    angle_bounds : (float, float) or "fixed", default=(0.05, pi - 0.05)
        Bounds of every angle (natural scale, within (0, pi)); ``"fixed"`` keeps :math:`B`.
        As for every kernel (:func:`~corrpriors.kernels.base.parse_bounds`), the bounds
        constrain learning only: initial ``angles`` outside them are accepted.

    Attributes
    ----------
    correlation : ndarray of shape (T, T)
        :math:`B`.

    Examples
    --------
    >>> import numpy as np
    >>> k = TaskCorrelation.from_correlation(np.array([[1.0, 0.5], [0.5, 1.0]]))
    >>> k(np.array([[0.0], [1.0], [1.0]])).round(3)
    array([[1. , 0.5, 0.5],
           [0.5, 1. , 1. ],
           [0.5, 1. , 1. ]])
    """

    n_tasks: int
    angles: Any = None
    angle_bounds: Any = field(default=ANGLE_BOUNDS)

    def __post_init__(self) -> None:
        T = _check_n_tasks(self.n_tasks)
        # the T (T - 1) / 2 angles as an array and a tuple of floats (8 + 8 + 24 bytes each)
        _check_task_memory(T, 20.0, "the T (T - 1) / 2 correlation angles")
        object.__setattr__(self, "n_tasks", T)
        if self.angles is None:
            a = np.full(n_angles(T), np.pi / 2)
        else:
            a = _check_angles(self.angles, T, closed=False)
        object.__setattr__(self, "angles", tuple(float(v) for v in a))
        b = parse_bounds(self.angle_bounds, "angle")
        if b is not None and b[1] >= np.pi:
            raise ValueError(f"angle_bounds: expected 0 < low <= high < pi, got {self.angle_bounds!r}")
        object.__setattr__(self, "angle_bounds", "fixed" if b is None else b)

    @classmethod
    def from_correlation(cls, correlation: Any, *, angle_bounds: Any = ANGLE_BOUNDS) -> TaskCorrelation:
        """The kernel of a given correlation matrix (angles clipped into ``angle_bounds``).

        Parameters
        ----------
        correlation : array_like of shape (T, T)
        angle_bounds : (float, float) or "fixed"

        Returns
        -------
        TaskCorrelation

        Warns
        -----
        UserWarning
            When clipping an angle into ``angle_bounds`` changes the matrix (a correlation beyond
            +-cos(low) with the default bounds, e.g. 0.9999 becomes 0.99875, or a
            negative one under bounds ``(low, pi / 2)``, which becomes 0): the kernel's
            :attr:`correlation` is then not ``correlation``. Pass ``angle_bounds="fixed"`` to keep
            the matrix exactly (a singular one is moved by at most 1e-12 radians).
        """
        a = angles_from_correlation(correlation)
        b = parse_bounds(angle_bounds, "angle")
        lo, hi = (1e-12, np.pi - 1e-12) if b is None else b
        clipped = np.clip(a, lo, hi)
        if b is not None and np.any(np.abs(clipped - a) > 1e-9):
            k = int(np.argmax(np.abs(clipped - a)))
            warnings.warn(f"correlation: {int(np.sum(np.abs(clipped - a) > 1e-9))} of {a.size} angles lie "
                          f"outside angle_bounds = ({lo:.4g}, {hi:.4g}) and were clipped into them (angle "
                          f"{k}: {a[k]:.4g} -> {clipped[k]:.4g} radians), so the kernel's correlation is not "
                          "the matrix given; pass angle_bounds='fixed' (or wider bounds) to keep it",
                          UserWarning, stacklevel=2)
        return cls(int(np.shape(correlation)[0]), tuple(clipped), angle_bounds)

    @property
    def correlation(self) -> FloatArray:
        """Ndarray of shape (T, T): the correlation matrix :math:`B`."""
        return correlation_from_angles(self.angles, self.n_tasks)

    @property
    def hyperparameters(self) -> tuple[Hyperparameter, ...]:
        """One ``angle_i_j`` per entry below the diagonal of the factor, row by row."""
        b = None if self.angle_bounds == "fixed" else self.angle_bounds
        names = [f"angle_{i}_{j}" for i in range(1, self.n_tasks) for j in range(i)]
        return tuple(Hyperparameter(n, v, b) for n, v in zip(names, self.angles))

    @property
    def is_stationary(self) -> bool:
        """Always ``False`` (a kernel on task indices)."""
        return False

    def _with_free_values(self, values: FloatArray) -> Kernel:
        if self.angle_bounds == "fixed":
            return self
        return replace(self, angles=tuple(float(v) for v in values))

    def correlation_gradient(self) -> FloatArray:
        """Derivative of :math:`B` with respect to ``theta`` (log angles).

        Returns
        -------
        ndarray of shape (T, T, P)
        """
        a = np.asarray(self.angles)
        L, dL = _cholesky_factor(a, self.n_tasks), _cholesky_gradient(a, self.n_tasks)
        dB = np.einsum("ijp,kj->ikp", dL, L)
        dB = (dB + dB.transpose(1, 0, 2)) * a          # chain rule to log angles
        if self.angle_bounds == "fixed":
            return dB[..., :0]
        return dB

    def __call__(self, X, Y=None) -> FloatArray:
        """Gram matrix ``B[t_i, u_j]`` of shape (N, M) between task indices (N, 1), (M, 1)."""
        t = _task_index(X, self.n_tasks, "X")
        u = t if Y is None else _task_index(Y, self.n_tasks, "Y")
        return self.correlation[np.ix_(t, u)]

    def diag(self, X) -> FloatArray:
        """Ones, ndarray of shape (N,)."""
        return np.ones(_task_index(X, self.n_tasks, "X").size)

    def gradient(self, X=None, distances=None) -> FloatArray:
        """Derivative of ``self(X)`` with respect to ``theta``, ndarray of shape (N, N, P)."""
        if X is None or distances is not None:
            raise TypeError("TaskCorrelation is not stationary: gradient needs X (task indices)")
        t = _task_index(X, self.n_tasks, "X")
        return self.correlation_gradient()[np.ix_(t, t)]


@dataclass(frozen=True)
class MultiTaskKernel(Kernel):
    r"""``task_kernel(task part) * state_kernel(state part)`` on (task, state) coordinates.

    Coordinates have ``n_task_dims`` leading columns for the task (its index for a
    :class:`TaskCorrelation`, or its descriptors for any other kernel) followed by the
    state's coordinates (:func:`task_coordinates` builds them). The product of two PSD kernels
    is PSD (Schur); on a shared state set in task-major order the Gram matrix is
    :math:`B \otimes K`.

    Parameters
    ----------
    task_kernel : Kernel
        Kernel over tasks; its values on the diagonal should be 1 (a correlation) so that the
        model's scale keeps its meaning, which :class:`TaskCorrelation` and stationary kernels
        with unit variance satisfy.
    state_kernel : Kernel
        Kernel over states (e.g. the squared exponential of the single-task model).
    n_task_dims : int, default=1
        Number of leading coordinate columns that describe the task.

    Notes
    -----
    ``theta`` is the task kernel's then the state kernel's (names ``task__...``,
    ``state__...``); the gradient with respect to it has shape (N, N, P), as for every kernel.
    """

    task_kernel: Kernel
    state_kernel: Kernel
    n_task_dims: int = 1

    def __post_init__(self) -> None:
        for name in ("task_kernel", "state_kernel"):
            if not isinstance(getattr(self, name), Kernel):
                raise TypeError(f"{name}: expected a Kernel, got {type(getattr(self, name)).__name__}")
        m = self.n_task_dims
        if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
            raise ValueError(f"n_task_dims: expected a positive int, got {m!r}")
        object.__setattr__(self, "n_task_dims", int(m))

    @property
    def n_tasks(self) -> int | None:
        """T of a :class:`TaskCorrelation` task kernel, else ``None``."""
        return getattr(self.task_kernel, "n_tasks", None)

    @property
    def hyperparameters(self) -> tuple[Hyperparameter, ...]:
        """The task kernel's (prefixed ``task__``) then the state kernel's (``state__``)."""
        def pre(p: str, hps: tuple[Hyperparameter, ...]) -> tuple[Hyperparameter, ...]:
            return tuple(replace(h, name=f"{p}__{h.name}") for h in hps)

        return pre("task", self.task_kernel.hyperparameters) + pre("state", self.state_kernel.hyperparameters)

    @property
    def is_stationary(self) -> bool:
        """Always ``False`` (the task and state parts are evaluated separately)."""
        return False

    def _with_free_values(self, values: FloatArray) -> Kernel:
        p = self.task_kernel.n_params
        return replace(self, task_kernel=self.task_kernel._with_free_values(values[:p]),
                       state_kernel=self.state_kernel._with_free_values(values[p:]))

    def _split(self, X: Any, name: str) -> tuple[FloatArray, FloatArray]:
        arr = check_coords(X, name)
        m = self.n_task_dims
        if arr.shape[1] <= m:
            raise ValueError(f"{name}: expected {m} task column(s) and at least one state column, "
                             f"got shape {arr.shape}")
        return arr[:, :m], arr[:, m:]

    def __call__(self, X, Y=None) -> FloatArray:
        """Gram matrix of shape (N, M)."""
        xt, xs = self._split(X, "X")
        if Y is None:
            return self.task_kernel(xt) * self.state_kernel(xs)
        yt, ys = self._split(Y, "Y")
        return self.task_kernel(xt, yt) * self.state_kernel(xs, ys)

    def diag(self, X) -> FloatArray:
        """Diagonal, ndarray of shape (N,)."""
        xt, xs = self._split(X, "X")
        return self.task_kernel.diag(xt) * self.state_kernel.diag(xs)

    def gradient(self, X=None, distances=None) -> FloatArray:
        """Derivative of ``self(X)`` with respect to ``theta``, ndarray of shape (N, N, P)."""
        if X is None or distances is not None:
            raise TypeError("MultiTaskKernel is not stationary: gradient needs X")
        xt, xs = self._split(X, "X")
        kt, ks = self.task_kernel(xt), self.state_kernel(xs)
        parts = []
        if self.task_kernel.n_params:
            parts.append(self.task_kernel.gradient(X=xt) * ks[..., None])
        if self.state_kernel.n_params:
            parts.append(kt[..., None] * self.state_kernel.gradient(X=xs))
        n = kt.shape[0]
        return np.concatenate(parts, axis=-1) if parts else np.zeros((n, n, 0))

    def task_correlation(self) -> FloatArray | None:
        """The task correlation matrix of a :class:`TaskCorrelation` task kernel, else ``None``."""
        corr = getattr(self.task_kernel, "correlation", None)
        return None if corr is None else np.asarray(corr)


def task_coordinates(state_coords: Any, task_descriptors: Any = None) -> FloatArray:
    """Stack per-task state coordinates into (task, state) coordinates, task-major.

    Parameters
    ----------
    state_coords : sequence of array_like of shape (S_t, D)
        The states of every task (the same array T times for a shared state set).
    task_descriptors : array_like of shape (T, D_task), optional
        Descriptors of the tasks; default the task index (one column).

    Returns
    -------
    coords : ndarray of shape (sum_t S_t, D_task + D)
        Row ``r`` of task ``t``: ``[descriptor_t..., state_coords[t][r]...]``.
    """
    if isinstance(state_coords, np.ndarray) or not hasattr(state_coords, "__len__") or not len(state_coords):
        raise ValueError("state_coords: expected a non-empty sequence of (S_t, D) arrays, one per task")
    blocks = [check_coords(x, f"state_coords[{t}]") for t, x in enumerate(state_coords)]
    d = blocks[0].shape[1]
    for t, b in enumerate(blocks):
        if b.shape[1] != d:
            raise ValueError(f"state_coords[{t}]: expected D = {d} columns like task 0, got {b.shape}")
    T = len(blocks)
    if task_descriptors is None:
        desc = np.arange(T, dtype=np.float64)[:, None]
    else:
        desc = check_coords(task_descriptors, "task_descriptors")
        if desc.shape[0] != T:
            raise ValueError(f"task_descriptors: expected one row per task, shape ({T}, D_task), "
                             f"got {desc.shape}")
    return np.concatenate([np.hstack([np.repeat(desc[t:t + 1], b.shape[0], axis=0), b])
                           for t, b in enumerate(blocks)])


def kronecker_precision(task_correlation: Any, state_precision: Any) -> sp.csr_array:
    r"""Precision :math:`B^{-1} \otimes Q` of the prior :math:`B \otimes Q^{-1}` (task-major).

    The sparse path of the multi-task prior: with a sparse state precision :math:`Q` (e.g.
    :func:`~corrpriors.kernels.grid_precision`) the Kronecker product with the dense
    :math:`T \times T` task precision is sparse again (T^2 times the non-zeros of :math:`Q`), so
    the sparse Cholesky machinery of the single-task model applies unchanged; the marginal
    variances are those of :math:`Q^{-1}` in every task (unit diagonal of :math:`B`).

    Parameters
    ----------
    task_correlation : array_like of shape (T, T)
        A correlation matrix, T >= 1: symmetric positive definite with a unit diagonal (to
        1e-8; e.g. :attr:`TaskCorrelation.correlation`). Another diagonal would scale task
        t's prior variance by :math:`B_{tt}` behind the model's scale; it is refused.
    state_precision : scipy.sparse matrix or ndarray of shape (S, S)
        Symmetric positive definite (checked here: finite, symmetric, positive diagonal; the
        model's Cholesky factorisation refuses the rest).

    Returns
    -------
    scipy.sparse.csr_array of shape (T S, T S)

    Raises
    ------
    ValueError
        T above :data:`MAX_DENSE_TASKS` (the dense T x T inverse would take minutes), or a
        :class:`~corrpriors._memory.MemoryEstimateError` when the T x T arrays or the product
        would not fit in memory; both before allocating.
    """
    T = np.shape(task_correlation)[0] if np.ndim(task_correlation) == 2 else 0
    if T > MAX_DENSE_TASKS:
        raise ValueError(f"task_correlation: T = {T:,} tasks is more than MAX_DENSE_TASKS = "
                         f"{MAX_DENSE_TASKS:,}: the dense T x T Cholesky factorisation and inverse "
                         f"would take about {7 / 3 * float(T) ** 3:.1e} flops; use fewer tasks")
    _check_task_memory(T, 8.0 * 4, "the dense T x T factor, identity and inverse", "task_correlation")
    B = as_real_array(task_correlation, "task_correlation", allow_bool=False,
                      expected="a correlation matrix of real numbers").astype(np.float64)
    if B.ndim != 2 or B.shape[0] != B.shape[1] or B.shape[0] < 1:
        raise ValueError(f"task_correlation: expected a square (T, T) matrix with T >= 1, got shape {B.shape}")
    if not np.all(np.isfinite(B)):
        raise ValueError("task_correlation: contains NaN or infinite values")
    if not np.allclose(B, B.T, atol=1e-12):
        raise ValueError("task_correlation: must be symmetric")
    off = np.abs(np.diag(B) - 1.0)
    if np.any(off > 1e-8):
        t = int(np.argmax(off))
        raise ValueError(f"task_correlation: expected a correlation matrix (unit diagonal), got "
                         f"B[{t}, {t}] = {B[t, t]:.6g}; divide by sqrt(diag) on both sides, or put the "
                         "variance in the model's scale")
    try:
        factor = cho_factor(B, lower=True)
    except np.linalg.LinAlgError:
        raise ValueError("task_correlation: must be positive definite (a singular B has no "
                         "precision; keep correlations below 1)") from None
    task_prec = cho_solve(factor, np.eye(B.shape[0]))            # the precision itself (T is small)
    task_prec = 0.5 * (task_prec + task_prec.T)
    Q = check_precision(state_precision, "state_precision", symmetry_rtol=1e-12)
    diag = Q.diagonal()
    if not np.all(diag > 0):
        bad = int(np.flatnonzero(~(diag > 0))[0])
        raise ValueError(f"state_precision: must be positive definite, got diagonal entry {diag[bad]:g} "
                         f"at state {bad}")
    B_sparse = sp.csr_array(task_prec)
    nnz = float(B_sparse.nnz) * Q.nnz
    check_memory(nnz * 48.0, f"task_correlation, state_precision: the Kronecker product of T = {T:,} "
                 f"tasks and S = {Q.shape[0]:,} states ({nnz:.3g} non-zeros, about 6 int64/float64 each "
                 f"while built)", "use fewer tasks or states")
    out = sp.csr_array(sp.kron(B_sparse, Q, format="csr"))
    out.sum_duplicates()
    out.sort_indices()
    return out


__all__ = ["ANGLE_BOUNDS", "MAX_DENSE_TASKS", "MultiTaskKernel", "TaskCorrelation", "angles_from_correlation",
           "correlation_from_angles", "kronecker_precision", "n_angles", "task_coordinates"]
