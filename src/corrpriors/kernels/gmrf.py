r"""Gaussian Markov random field precisions: Matern-like priors with sparse precision.

The SPDE link (Lindgren, Rue & Lindstrom 2011): a Gaussian field solving
:math:`(\kappa^2 - \Delta)^{\alpha/2} x = \mathcal{W}/\sqrt{\tau}` has a Matern covariance
with smoothness :math:`\nu = \alpha - d/2` and range :math:`\rho = \sqrt{8\nu}/\kappa` (the
distance at which the correlation is about 0.14). Replacing :math:`-\Delta` by the
Laplacian :math:`L` of a grid or of a graph gives the sparse precision

.. math::  Q = \tau\,(\kappa^2 I + L)^{\alpha},\qquad \alpha \in \{1, 2\},

with :math:`2D + 1` non-zeros per interior row of a D-dimensional grid for
:math:`\alpha = 1` and :math:`2D^2 + 2D + 1` (13 in 2-D) for :math:`\alpha = 2`.

**Units.** On a grid, :math:`L` is the finite-difference Laplacian with weight
:math:`1/h_a^2` between neighbours along axis ``a`` (``spacing`` :math:`h`), so
:math:`\kappa` and the length scale are in the units of ``spacing`` (cells by default).
On a graph, :math:`L = \operatorname{diag}(W\mathbf{1}) - W` for the weighted adjacency
:math:`W`; with unit weights lengths are in hops, with :func:`knn_adjacency`'s default
weights in the coordinates' units (approximately).

**Length scale.** ``length_scale`` :math:`\rho` sets :math:`\kappa = \sqrt{8\nu}/\rho` with
:math:`\nu = \alpha - d/2` (``d`` the grid's dimension, or ``dim`` for a graph). When
:math:`\nu \le 0` (:math:`\alpha = 1` in two or more dimensions) the continuum field does
not exist (its variance diverges with the resolution) and there is no Matern range to
match: ``length_scale`` is refused and ``kappa`` must be given; the lattice field's
correlation then decays like :math:`e^{-\kappa r}` at distances :math:`r \gg 1/\kappa`.

**Normalisation.** With ``normalize=True`` (default) :math:`\tau` is chosen so that the
geometric mean of the marginal variances :math:`\operatorname{diag}(Q^{-1})` is one (R-INLA's
``scale.model``), computed exactly by selected inversion; the prior scale :math:`\theta` of
:math:`\Sigma = \theta Q^{-1}` then keeps its meaning of a typical marginal variance.
Variances are not constant: they are larger near the boundary (free/Neumann boundary) and
in sparsely connected parts of a graph.

:math:`\kappa = 0` gives an intrinsic (improper) field with singular :math:`Q` and is refused.
A disconnected graph (e.g. walls that cut the grid) is fine with :math:`\kappa > 0`: its
components are independent.

Examples
--------
>>> from corrpriors.kernels import grid_precision
>>> Q = grid_precision((30, 30), length_scale=5.0)        # alpha = 2, normalised
>>> Q.shape, int(Q[:, [465]].count_nonzero())              # an interior cell: 13 neighbours
((900, 900), 13)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._memory import check_memory
from .._validation import as_real_array, check_bool, check_int, check_real

__all__ = ["graph_precision", "grid_adjacency", "grid_precision", "knn_adjacency",
           "lattice_adjacency", "matern_kappa"]


def matern_kappa(length_scale: float, *, alpha: int = 2, dim: int) -> float:
    r"""SPDE scale :math:`\kappa = \sqrt{8\nu}/\rho` for a Matern range, :math:`\nu = \alpha - d/2`.

    Parameters
    ----------
    length_scale : float
        Range :math:`\rho > 0` (correlation about 0.14 at that distance).
    alpha : {1, 2}, default=2
    dim : int
        Dimension ``d`` of the space.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If :math:`\nu \le 0`: no continuum Matern range exists; give ``kappa`` instead.
    """
    rho = _positive(length_scale, "length_scale")
    alpha = _alpha(alpha)
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 1:
        raise ValueError(f"dim: expected a positive integer, got {dim!r}")
    nu = alpha - dim / 2
    if nu <= 0:
        raise ValueError(f"length_scale: needs smoothness nu = alpha - dim/2 > 0, got nu = "
                         f"{nu:g} (alpha = {alpha}, dim = {dim}); "
                         + ("use alpha = 2 or give " if alpha == 1 and dim < 4 else "give ")
                         + "kappa (the correlation then decays like exp(-kappa r))")
    return float(np.sqrt(8 * nu) / rho)


def _positive(x: Any, name: str) -> float:
    # bools and strings raise TypeError: True is not 1 and '1' is not 1
    return check_real(x, name, 0.0, np.inf, closed="neither", expected="a finite positive number")


def _alpha(alpha: Any) -> int:
    # (a 0-d check first: ``np.array([2]) in (1, 2)`` raised numpy's ambiguous-truth TypeError)
    if isinstance(alpha, (bool, np.bool_)) or np.ndim(alpha) != 0 or alpha not in (1, 2):
        raise ValueError(f"alpha: expected 1 or 2, got {alpha!r}")
    return int(alpha)


def _kappa(kappa: Any, length_scale: Any, alpha: int, dim: int | None) -> float:
    if (kappa is None) == (length_scale is None):
        raise ValueError("give exactly one of kappa and length_scale, got "
                         f"kappa={kappa!r}, length_scale={length_scale!r}")
    if dim is not None:   # (checked also where kappa makes it unused: dim='abc' passed silently)
        dim = check_int(dim, "dim", 1)
    if kappa is not None:
        if isinstance(kappa, (int, float, np.number)) and kappa == 0:
            raise ValueError("kappa: expected a finite positive number, got 0 (kappa = 0 "
                             "is an intrinsic GMRF whose precision is singular)")
        return _positive(kappa, "kappa")
    if dim is None:
        raise ValueError("dim: needed with length_scale on a graph (nu = alpha - dim/2); "
                         "give dim (e.g. 2 for a planar graph) or kappa")
    return matern_kappa(length_scale, alpha=alpha, dim=dim)


def _check_adjacency(adjacency: Any) -> sp.csr_array:
    if sp.issparse(adjacency):
        as_real_array(adjacency.data, "adjacency")   # complex and strings: TypeError
        w = sp.csr_array(adjacency, dtype=np.float64, copy=True)
    else:
        if isinstance(adjacency, (str, bytes)):
            raise TypeError("adjacency: expected a scipy.sparse matrix or a numeric (C, C) "
                            f"array, got {type(adjacency).__name__}")
        arr = as_real_array(adjacency, "adjacency").astype(np.float64)
        if arr.ndim != 2:
            raise ValueError(f"adjacency: expected a square (C, C) matrix with C >= 1, got "
                             f"shape {arr.shape}")
        w = sp.csr_array(arr)
    if w.ndim != 2 or w.shape[0] != w.shape[1] or w.shape[0] == 0:
        raise ValueError(f"adjacency: expected a square (C, C) matrix with C >= 1, got "
                         f"shape {tuple(w.shape)}")
    w.sum_duplicates()
    if not np.all(np.isfinite(w.data)):
        raise ValueError("adjacency: contains NaN or infinite values")
    if np.any(w.data < 0):
        raise ValueError("adjacency: edge weights must be non-negative (zero means no edge)")
    coo = w.tocoo()
    off = (coo.row != coo.col) & (coo.data != 0)
    w = sp.csr_array((coo.data[off], (coo.row[off], coo.col[off])), shape=w.shape)
    gap = abs(w - w.T)
    if gap.nnz and gap.max() > 1e-12 * w.max():   # relative: tiny weights are weights too
        raise ValueError(f"adjacency: expected a symmetric matrix (an undirected graph), got max "
                         f"|W - W^T| = {gap.max():.3g} (max W = {w.max():.3g}); for a directed "
                         f"graph pass A.maximum(A.T) or (A + A.T) / 2")
    return w


def graph_precision(adjacency: Any, *, kappa: float | None = None,
                    length_scale: float | None = None, alpha: int = 2,
                    tau: float | None = None, dim: int | None = None,
                    normalize: bool = True) -> sp.csr_array:
    r"""Matern-like GMRF precision :math:`Q = \tau(\kappa^2 I + L)^\alpha` on a graph.

    Parameters
    ----------
    adjacency : scipy.sparse matrix or ndarray of shape (C, C)
        Symmetric, non-negative edge weights (zero: no edge; the diagonal is ignored).
        :math:`L = \operatorname{diag}(W\mathbf{1}) - W`.
    kappa : float, optional
        :math:`\kappa > 0` (inverse length, in the units of the weights).
    length_scale : float, optional
        Matern range :math:`\rho`; sets :math:`\kappa = \sqrt{8\nu}/\rho`,
        :math:`\nu = \alpha - \mathrm{dim}/2` (needs ``dim`` and :math:`\nu > 0`). Exactly one
        of ``kappa`` and ``length_scale``.
    alpha : {1, 2}, default=2
        Smoothness exponent.
    tau : float, optional
        Precision scale; not allowed with ``normalize=True``. Default 1.
    dim : int, optional
        Dimension of the space the graph discretises (for ``length_scale``).
    normalize : bool, default=True
        Choose :math:`\tau` so that the geometric mean of the marginal variances is 1.

    Returns
    -------
    scipy.sparse.csr_array of shape (C, C)
        Symmetric positive definite, sorted indices.

    Raises
    ------
    ValueError
        Bad parameters or adjacency (asymmetric, negative, NaN, not square).
    """
    return _graph_precision(_check_adjacency(adjacency), kappa=kappa, length_scale=length_scale,
                            alpha=alpha, tau=tau, dim=dim, normalize=normalize)


def _graph_precision(w: sp.csr_array, *, kappa: Any, length_scale: Any, alpha: Any, tau: Any,
                     dim: Any, normalize: Any, grid: tuple[int, ...] | None = None) -> sp.csr_array:
    """:func:`graph_precision` of a checked adjacency; ``grid`` (the grid's shape) names it in
    the memory check and gives the normalisation's factor estimate of a grid.
    """
    alpha = _alpha(alpha)
    k = _kappa(kappa, length_scale, alpha, dim)
    normalize = check_bool(normalize, "normalize")
    n = w.shape[0]
    lap = sp.diags_array(np.asarray(w.sum(axis=1)).ravel()) - w
    _check_kappa_scale(k, alpha, float(lap.diagonal().max(initial=0.0)),
                       "kappa" if kappa is not None else "length_scale")
    if normalize and tau is not None:
        raise ValueError(f"tau: must be None with normalize=True (the normalisation sets "
                         f"tau), got {tau!r}")
    m = sp.csr_array(k * k * sp.eye_array(n) + lap)
    m.sort_indices()
    _check_precision_memory(m, alpha, normalize, grid)
    q = sp.csr_array(m @ m) if alpha == 2 else m
    q = sp.csr_array(0.5 * (q + q.T))
    q.eliminate_zeros()
    q.sort_indices()
    if normalize:
        return _normalised(q)
    if tau is None:
        return q
    with np.errstate(over="ignore"):   # an overflow is refused below, naming tau, not warned of
        scaled = q * _positive(tau, "tau")
    if not np.all(np.isfinite(scaled.data)):   # tau = 1e308 overflowed Q to inf
        raise ValueError(f"tau: {tau!r} times the precision's entries (up to {abs(q.data).max():.3g}) "
                         f"overflows the floating-point range")
    return scaled


#: Bytes traced per stored entry of Q at the peak of building it from ``kappa^2 I + L``
#: (tracemalloc, grids of 2,000 to 160,000 cells in 1 to 3 dimensions: 84 to 126; the product,
#: its transpose and the symmetrised sum).
_BUILD_BYTES_PER_ENTRY = 130

#: Bytes per cell of the normalisation's sparse Cholesky factor and selected inverse on a grid
#: (``SparseCholesky.memory_bytes``, the package's nested dissection), by dimension and alpha,
#: in units of s(C) = 1 (1-D), log2(C) (2-D), C**((D - 2) / D) (D >= 3). The lower envelope of
#: measurements on grids of 10**3 to 1.6 * 10**5 cells (1-D 620 / 840; 2-D 178-198 / 434-509;
#: 3-D 506-666 / 1506-2381; 4-D and 5-D 224-359 / 715-1297), so a refusal never hits a grid
#: the factorisation's own check would have let through.
_GRID_FACTOR_BYTES = {1: (600.0, 800.0), 2: (170.0, 420.0), 3: (450.0, 1500.0)}
_GRID_FACTOR_BYTES_HIGH = (220.0, 700.0)


def _precision_nnz(m: sp.csr_array, alpha: int) -> int:
    """Stored entries of ``m ** alpha`` (structural), counted without forming the product."""
    n = m.shape[0]
    if alpha == 1:
        return int(m.nnz)
    try:   # scipy's own first pass of the sparse product: exact, O(n) memory
        from scipy.sparse._sparsetools import csr_matmat_maxnnz

        ip, ix = m.indptr.astype(np.int64), m.indices.astype(np.int64)
        return int(csr_matmat_maxnnz(n, n, ip, ix, ip, ix))
    except (ImportError, AttributeError, TypeError, ValueError):   # pragma: no cover - old scipy
        degree = np.diff(m.indptr).astype(np.float64)              # paths of length two: a bound
        return int(min(float(n) * n, float(np.sum(degree * degree))))


def _grid_factor_bytes(n: int, ndim: int, alpha: int) -> float:
    """Estimated bytes of the normalisation's factor and selected inverse on a grid of C cells."""
    per = _GRID_FACTOR_BYTES.get(ndim, _GRID_FACTOR_BYTES_HIGH)[alpha - 1]
    scale = 1.0 if ndim == 1 else (math.log2(max(n, 2)) if ndim == 2 else n ** ((ndim - 2) / ndim))
    return per * n * scale


def _check_precision_memory(m: sp.csr_array, alpha: int, normalize: bool,
                            grid: tuple[int, ...] | None) -> None:
    """Refuse, before ``m @ m`` and the normalisation, a precision that cannot fit in memory.

    Building Q peaks at :data:`_BUILD_BYTES_PER_ENTRY` per stored entry; the normalisation then
    keeps Q (12 bytes an entry) and factorises it: its factor and selected inverse need at least
    13 words per entry of Q and 9 per node (``corrpriors.linalg`` ``memory_bytes`` with the
    factor no denser than Q) and, on a grid, about :func:`_grid_factor_bytes`.
    """
    _refuse_precision(m.shape[0], _precision_nnz(m, alpha), alpha, normalize, grid)


def _refuse_precision(n: int, nnz: int, alpha: int, normalize: bool,
                      grid: tuple[int, ...] | None, at_least: bool = False) -> None:
    """The check of :func:`_check_precision_memory`, for C = ``n`` nodes and ``nnz`` entries
    (``at_least``: a lower bound of them, before the grid is built).
    """
    needed = float(_BUILD_BYTES_PER_ENTRY) * nnz
    if normalize:
        factor = 8.0 * (13.0 * nnz + 9.0 * n)
        if grid is not None:
            factor = max(factor, _grid_factor_bytes(n, len(grid), alpha))
        needed = max(needed, 12.0 * nnz + factor)
    name = f"shape: a grid of shape {grid}" if grid is not None else "adjacency: a graph"
    check_memory(needed, f"{name} ({n:,} nodes): the alpha = {alpha} GMRF precision ({'at least ' if at_least else ''}"
                 f"{nnz:,} stored entries)" + (" and the sparse Cholesky factor its normalisation (normalize=True) "
                                "needs" if normalize else ""),
                 "use a smaller or coarser grid (a larger spacing), alpha = 1"
                 + (", or normalize=False with a fixed tau" if normalize else ""))


def _check_kappa_scale(k: float, alpha: int, degree: float, name: str) -> None:
    r"""Refuse a :math:`\kappa` whose :math:`\kappa^{2\alpha}` overflows, underflows or is lost
    against the largest weighted degree (:math:`Q` would then hold infinities or be singular in
    float64: the Laplacian alone has a null space).
    """
    with np.errstate(over="ignore", under="ignore"):
        k2 = np.float64(k) * np.float64(k)
        top = (k2 + degree) ** alpha            # the largest diagonal entry of Q (up to ~2**alpha)
        floor = k2 ** alpha                     # the smallest eigenvalue of Q / tau
    source = f"kappa = {k:g}" + ("" if name == "kappa" else " (from length_scale)")
    if not np.isfinite(top * 2.0 ** alpha):
        raise ValueError(f"{name}: {source} is too large, kappa**{2 * alpha} overflows float64; "
                         f"use a smaller kappa (a larger length_scale)")
    if floor < np.finfo(np.float64).tiny or floor <= 16 * np.finfo(np.float64).eps * top:
        raise ValueError(f"{name}: {source} is too small, kappa**{2 * alpha} = {floor:.3g} is "
                         f"negligible against the graph's largest degree {degree:g} (the "
                         f"precision would be singular); use a larger kappa (a smaller "
                         f"length_scale)")


def _normalised(q: sp.csr_array) -> sp.csr_array:
    """``q`` scaled so that the geometric mean of diag(q^-1) is one (exact, sparse)."""
    from ..linalg import analysis_for

    variances = analysis_for(q).factorize(q).inverse_diagonal()
    return q * float(np.exp(np.mean(np.log(variances))))


def _grid_shape(shape: Any) -> tuple[int, ...]:
    given = shape
    if isinstance(shape, np.ndarray):   # (an array's items as Python numbers: np.array(10) is 10)
        shape = shape.tolist() if shape.ndim <= 1 else ()
    dims = (shape,) if np.ndim(shape) == 0 else tuple(shape) if np.ndim(shape) == 1 else ()
    if not dims or any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1
                       for s in dims):
        raise ValueError(f"shape: expected a tuple of positive integers, got {given!r}")
    return tuple(int(s) for s in dims)


def _spacing(spacing: Any, ndim: int) -> np.ndarray:
    values = [spacing] * ndim if np.ndim(spacing) == 0 else list(np.asarray(spacing, dtype=object).ravel())
    if np.ndim(spacing) > 1 or any(isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.number))
                                   for v in values):   # True is not 1 and '1' is not 1
        raise TypeError(f"spacing: expected a positive number or {ndim} positive numbers "
                        f"(one per axis), got {spacing!r}")
    h = np.asarray(values, dtype=np.float64)
    if h.shape != (ndim,) or not np.all(np.isfinite(h)) or np.any(h <= 0):
        raise ValueError(f"spacing: expected a positive number or {ndim} positive numbers "
                         f"(one per axis), got {spacing!r}")
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        weight = 1.0 / h ** 2
    if not np.all(np.isfinite(weight)):
        raise ValueError(f"spacing: {spacing!r} is too small, the edge weight 1 / spacing**2 "
                         f"overflows float64; measure lengths in a larger unit")
    return h


def _walls(walls: Any, shape: tuple[int, ...]) -> np.ndarray:
    """Blocked edges as sorted pairs of flat (row-major) cell indices, validated."""
    arr = np.asarray(walls)
    ndim, size = len(shape), int(np.prod(shape))
    if arr.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"walls: expected integer cell indices, got dtype {arr.dtype}")
    if arr.ndim == 3 and arr.shape[1:] == (2, ndim):
        if np.any(arr < 0) or np.any(arr >= np.asarray(shape)):
            raise ValueError(f"walls: cell coordinates outside the grid of shape {shape}")
        flat = np.ravel_multi_index(tuple(np.moveaxis(arr, -1, 0)), shape)
    elif arr.ndim == 2 and arr.shape[1] == 2:
        if np.any(arr < 0) or np.any(arr >= size):
            raise ValueError(f"walls: flat cell indices must lie in [0, {size}), got "
                             f"{arr.min()}..{arr.max()}")
        flat = arr
    else:
        raise ValueError(f"walls: expected shape (W, 2) of flat cell indices or (W, 2, D) = "
                         f"(W, 2, {ndim}) of cell coordinates, got {arr.shape}")
    a, b = np.unravel_index(flat[:, 0], shape), np.unravel_index(flat[:, 1], shape)
    steps = np.abs(np.stack(a) - np.stack(b)).sum(axis=0)
    if np.any(steps != 1):
        k = int(np.flatnonzero(steps != 1)[0])
        raise ValueError(f"walls: each pair must be neighbouring cells (one step along one "
                         f"axis); pair {k} = {flat[k].tolist()} is not")
    return np.sort(flat, axis=1).astype(np.int64)


#: Bytes per cell and axis at the peak of :func:`grid_adjacency` (index arrays, edge lists,
#: their concatenated copies and the CSR matrix, about 14 int64/float64 per edge; generous).
_GRID_BYTES_PER_CELL = 160


def grid_adjacency(shape: Any, *, mask: Any = None, walls: Any = None,
                   spacing: Any = 1.0) -> sp.csr_array:
    r"""Weighted adjacency of a regular grid (any dimension), with missing cells and walls.

    Parameters
    ----------
    shape : int or tuple of int
        Grid shape :math:`(n_1, \dots, n_D)`.
    mask : ndarray of bool of the grid's shape, optional
        Cells that exist (True). The result is indexed by the existing cells in row-major
        (C) order: ``C = mask.sum()``.
    walls : array_like of int, optional
        Blocked edges between neighbouring cells: shape (W, 2) of flat row-major indices in
        the full grid, or (W, 2, D) of cell coordinates.
    spacing : float or sequence of float, default=1.0
        Cell size :math:`h_a` per axis; neighbours along axis ``a`` get weight
        :math:`1/h_a^2` (so the graph Laplacian is the finite-difference :math:`-\Delta`).

    Returns
    -------
    scipy.sparse.csr_array of shape (C, C)
    """
    dims = _grid_shape(shape)
    h = _spacing(spacing, len(dims))
    size = math.prod(dims)   # Python ints: no overflow
    check_memory(float(size) * _GRID_BYTES_PER_CELL * len(dims),
                 f"shape: a grid of shape {dims} ({size:,} cells, {len(dims)} axes)",
                 "use a smaller grid")
    keep = np.ones(size, dtype=bool)
    if mask is not None:
        m = np.asarray(mask)
        if m.shape != dims or m.dtype != bool:
            raise ValueError(f"mask: expected a boolean array of shape {dims}, got "
                             f"{m.dtype} array of shape {m.shape}")
        if not m.any():
            raise ValueError("mask: no cell is kept (all False)")
        keep = m.ravel()
    blocked = _walls(walls, dims) if walls is not None else np.zeros((0, 2), np.int64)
    index = np.arange(size).reshape(dims)
    rows, cols, vals = [], [], []
    for axis, n_axis in enumerate(dims):
        lo = np.take(index, np.arange(n_axis - 1), axis=axis).ravel()
        hi = np.take(index, np.arange(1, n_axis), axis=axis).ravel()
        rows.append(lo)
        cols.append(hi)
        vals.append(np.full(lo.size, 1.0 / h[axis] ** 2))
    lo, hi, w = (np.concatenate(x) for x in (rows, cols, vals))
    ok = keep[lo] & keep[hi]
    if blocked.size:
        ok &= ~np.isin(lo * size + hi, blocked[:, 0] * size + blocked[:, 1])
    new = np.cumsum(keep) - 1
    lo, hi, w = new[lo[ok]], new[hi[ok]], w[ok]
    c = int(keep.sum())
    adj = sp.csr_array((np.concatenate([w, w]), (np.concatenate([lo, hi]),
                                                 np.concatenate([hi, lo]))), shape=(c, c))
    adj.sort_indices()
    return adj


def grid_precision(shape: Any, *, kappa: float | None = None,
                   length_scale: float | None = None, alpha: int = 2,
                   tau: float | None = None, normalize: bool = True, spacing: Any = 1.0,
                   mask: Any = None, walls: Any = None) -> sp.csr_array:
    r"""Matern-like GMRF precision :math:`Q = \tau(\kappa^2 I + L)^\alpha` on a regular grid.

    Parameters
    ----------
    shape : int or tuple of int
        Grid shape; the dimension ``d = len(shape)`` enters :math:`\nu = \alpha - d/2`.
    kappa, length_scale : float, optional
        Exactly one: :math:`\kappa`, or the Matern range :math:`\rho` (units of
        ``spacing``), :math:`\kappa = \sqrt{8\nu}/\rho`.
    alpha : {1, 2}, default=2
    tau : float, optional
        Precision scale (only with ``normalize=False``; default 1).
    normalize : bool, default=True
        Geometric mean of the marginal variances equal to 1.
    spacing, mask, walls
        As in :func:`grid_adjacency`.

    Returns
    -------
    scipy.sparse.csr_array of shape (C, C)
        Indexed by the kept cells in row-major order (``C = prod(shape)`` without a mask).
    """
    dims = _grid_shape(shape)
    alpha = _alpha(alpha)
    _kappa(kappa, length_scale, alpha, len(dims))   # its errors before the grid is built
    if check_bool(normalize, "normalize") and mask is None:   # a hopeless grid before it is built
        _refuse_precision(math.prod(dims), math.prod(dims), alpha, True, dims, at_least=True)
    adj = grid_adjacency(dims, mask=mask, walls=walls, spacing=spacing)
    return _graph_precision(adj, kappa=kappa, length_scale=length_scale, dim=len(dims),
                            alpha=alpha, tau=tau, normalize=normalize, grid=dims)


def lattice_adjacency(coords: Any) -> sp.csr_array:
    """Unit-weight adjacency of integer points that differ by one in exactly one coordinate.

    The grid graph of the occupied cells of a lattice in any dimension (a grid world's cells,
    Taxi's (row, column, passenger, destination) states): no bounding box is built, so sparse
    occupancy in high dimensions costs nothing.

    Parameters
    ----------
    coords : array_like of shape (C, D)
        Integer coordinates, all distinct.

    Returns
    -------
    scipy.sparse.csr_array of shape (C, C)
        Symmetric 0/1 adjacency.
    """
    x = as_real_array(coords, "coords")              # complex and strings: TypeError
    if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 1:
        raise ValueError(f"coords: expected an array of shape (C, D) with C, D >= 1, got {x.shape}")
    if x.dtype.kind in "iu":   # compared as integers: float64 merges those above 2**53
        lo = x.min(axis=0)
        if np.any((x.max(axis=0).astype(object) - lo.astype(object)) >= 2 ** 62):
            raise ValueError("coords: the lattice is too large to index (extent >= 2**62)")
        xi = (x.astype(np.int64) - lo.astype(np.int64)) if x.dtype.kind == "i" else \
            (x - lo).astype(np.int64)
    else:
        xf = np.asarray(x, dtype=np.float64)
        if not np.all(np.isfinite(xf)) or not np.all(xf == np.round(xf)):
            raise ValueError("coords: expected integer coordinates")
        xi = (xf - xf.min(axis=0)).astype(np.int64)
    extent = xi.max(axis=0) + 2                       # room for the +1 neighbour
    if float(np.prod(extent.astype(np.float64))) >= 2.0 ** 62:
        raise ValueError("coords: the lattice is too large to index (extent product >= 2**62)")
    strides = np.concatenate([np.cumprod(extent[::-1])[::-1][1:], [1]]).astype(np.int64)
    keys = xi @ strides
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    if np.any(np.diff(sorted_keys) == 0):
        raise ValueError("coords: expected distinct points, found a duplicate")
    rows, cols = [], []
    for stride in strides:
        target = keys + stride
        pos = np.minimum(np.searchsorted(sorted_keys, target), keys.size - 1)
        hit = sorted_keys[pos] == target
        rows.append(np.flatnonzero(hit))
        cols.append(order[pos[hit]])
    r, c = np.concatenate(rows), np.concatenate(cols)
    n = x.shape[0]
    w = sp.coo_array((np.ones(2 * r.size), (np.concatenate([r, c]), np.concatenate([c, r]))),
                     shape=(n, n))
    return sp.csr_array(w)


def knn_adjacency(coords: Any, n_neighbors: int, *, weights: str = "spacing"
                  ) -> sp.csr_array:
    r"""Symmetrised k-nearest-neighbour adjacency of points.

    Parameters
    ----------
    coords : ndarray of shape (C, D)
    n_neighbors : int
        Neighbours per point (``1 <= n_neighbors < C``); the graph is symmetrised (an edge
        if either point is among the other's neighbours).
    weights : {"spacing", "unit"}, default="spacing"
        ``"spacing"``: :math:`w_{ij} = 2D / (\bar k\, h_i h_j)` with :math:`h_i` the mean
        distance from point ``i`` to its ``n_neighbors`` nearest points (the local spacing)
        and :math:`\bar k` the mean degree, so that the graph Laplacian approximates
        :math:`-\Delta` in the coordinates' units. On a regular grid with
        ``n_neighbors = 2 D`` it is the finite-difference Laplacian up to the factor
        :math:`2D / \bar k`: the mean degree counts the boundary, whose symmetrised
        neighbour lists are longer (on a 12 x 12 grid, interior weights 0.923 instead of
        1; the factor tends to 1 as the grid grows). Unlike :math:`1/d_{ij}^2` weights it
        stays well conditioned when two points nearly coincide. ``"unit"``: all ones (lengths in hops).

    Returns
    -------
    scipy.sparse.csr_array of shape (C, C)
    """
    from scipy.spatial import cKDTree

    x = np.asarray(coords, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f"coords: expected shape (C, D) with C >= 2, got {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("coords: contains NaN or infinite values")
    n, d = x.shape
    if isinstance(n_neighbors, bool) or not isinstance(n_neighbors, (int, np.integer)) \
            or not 1 <= n_neighbors < n:
        raise ValueError(f"n_neighbors: expected an integer in [1, {n - 1}], got "
                         f"{n_neighbors!r}")
    if weights not in ("spacing", "unit"):
        raise ValueError(f"weights: expected 'spacing' or 'unit', got {weights!r}")
    check_memory(8.0 * n * (int(n_neighbors) + 1) * 8,
                 f"coords, n_neighbors: the {n_neighbors:,}-nearest-neighbour graph of {n:,} points "
                 f"(about 8 float64/int64 arrays of C x (n_neighbors + 1))",
                 "use fewer neighbours or fewer points")
    dist, nb = cKDTree(x).query(x, k=int(n_neighbors) + 1)
    rows = np.repeat(np.arange(n), n_neighbors)
    cols = nb[:, 1:].ravel()
    adj = sp.csr_array((np.ones(cols.size), (rows, cols)), shape=(n, n))
    adj = sp.csr_array(adj.maximum(adj.T))
    if weights == "spacing":
        h = dist[:, 1:].mean(axis=1)
        if np.any(h == 0):
            raise ValueError(f"coords: contains duplicate points (point {int(np.argmin(h))} "
                             "coincides with all its neighbours: zero local spacing)")
        coo = adj.tocoo()
        val = 2.0 * d / (adj.nnz / n) / (h[coo.row] * h[coo.col])
        adj = sp.csr_array((val, (coo.row, coo.col)), shape=(n, n))
    adj.sort_indices()
    return adj
