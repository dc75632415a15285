"""Input validation at the public boundary.

Every check raises :class:`ValueError` (or :class:`TypeError`) whose message names the
argument, what was expected and what arrived.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import scipy.sparse as sp

from ._repr import short_repr


def holds_bool(x: Any, arr: np.ndarray) -> bool:
    """Whether ``x`` (whose ``np.asarray`` is ``arr``) holds a boolean anywhere.

    A boolean array, an object array holding one, or nested lists and tuples in which numpy turned
    a boolean into a number (``np.asarray([1.0, True])`` is ``[1.0, 1.0]``, so the array's dtype
    alone cannot tell).
    """
    if arr.dtype.kind == "b":
        return True
    if arr.dtype.kind == "O":
        return any(isinstance(v, (bool, np.bool_)) for v in arr.ravel())
    if not isinstance(x, (list, tuple)):
        return False
    stack: list[Any] = [x]
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, (bool, np.bool_)) or (isinstance(item, np.ndarray) and item.dtype.kind == "b"):
            return True
    return False


def as_real_array(x: Any, name: str, *, allow_bool: bool = True, expected: str = "real numbers") -> np.ndarray:
    """``np.asarray(x)`` of real numbers, with the argument named in every failure.

    The one conversion behind every array check here: a masked array with masked cells, complex
    numbers, strings and other non-numbers raise :class:`TypeError` (complex input is never
    silently cut to its real part); ragged nested sequences raise :class:`ValueError`. Booleans
    pass unless ``allow_bool`` is false. The dtype is kept (integers stay integers).
    """
    if isinstance(x, np.ma.MaskedArray):
        if np.ma.getmaskarray(x).any():
            raise TypeError(f"{name}: masked arrays are not supported (the mask would be "
                            f"ignored); fill or drop the masked cells first, e.g. "
                            f"{name}.filled(0) to count them as zero")
        x = np.ma.getdata(x)
    try:
        arr = np.asarray(x)
    except ValueError as exc:  # ragged nested sequences
        raise ValueError(f"{name}: expected a rectangular array; the nested sequences have "
                         f"different lengths ({exc})") from None
    kind = arr.dtype.kind
    if not allow_bool and holds_bool(x, arr):   # also [1, True], which numpy made [1, 1]
        if kind == "b":
            raise TypeError(f"{name}: expected {expected}, got a boolean array; convert it "
                            f"explicitly (e.g. {name}.astype(int)) if True means 1")
        raise TypeError(f"{name}: expected {expected}, got a sequence holding a boolean (True is "
                        f"not 1); convert it explicitly if that is meant")
    if kind == "c":
        raise TypeError(f"{name}: expected {expected}, got complex dtype {arr.dtype} (the "
                        f"imaginary part would be lost)")
    if kind == "O":
        flat = arr.ravel()
        bad = [v for v in flat if not isinstance(v, (numbers.Real, np.bool_))][:1]   # (booleans: above)
        if bad or flat.size == 0:
            held = type(bad[0]).__name__ if bad else "nothing"
            raise TypeError(f"{name}: expected a numeric array, got dtype object holding {held}")
        return arr
    if kind not in "biuf":
        raise TypeError(f"{name}: expected a numeric array, got dtype {arr.dtype}")
    return arr


def check_array(x: Any, name: str, ndim: int | None = None, dtype=float) -> np.ndarray:
    """Convert ``x`` to an array of ``dtype``; check its dimension and finiteness."""
    arr = as_real_array(x, name)
    try:
        arr = arr.astype(dtype, copy=False)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"{name}: expected values representable as {np.dtype(dtype).name} ({exc})") from None
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name}: expected a {ndim}-D array, got shape {arr.shape}")
    if np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or infinite values")
    return arr


def check_shape(x: np.ndarray, shape: tuple, name: str) -> None:
    """Check ``x.shape == shape``; ``None`` entries in ``shape`` match any size."""
    if len(x.shape) != len(shape) or any(s is not None and s != t for s, t in zip(shape, x.shape)):
        want = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ")"
        raise ValueError(f"{name}: expected shape {want}, got {x.shape}")


def check_points(x: Any, name: str = "X", n_dims: int | None = None,
                 n_points: int | None = None, what: str = "points", symbol: str = "N") -> np.ndarray:
    """Validate an (N, D) array of finite coordinates or features; return it as float64.

    The one check of covariate coordinates, prediction points and state features: real numbers
    (complex and non-numeric input raise :class:`TypeError`), two axes, at least one row and one
    column, finite; ``n_dims`` fixes D and ``n_points`` fixes the rows (``what`` and ``symbol`` name
    them in that message, e.g. "states" and "S").
    """
    arr = as_real_array(x, name).astype(np.float64)
    if arr.ndim != 2:
        hint = " (use X.reshape(-1, 1) for one-dimensional covariates)" if arr.ndim == 1 else ""
        raise ValueError(f"{name}: expected a 2-D array of shape (N, D), got shape {arr.shape}{hint}")
    if arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(f"{name}: expected at least one point and one dimension, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or infinite values")
    if n_dims is not None and arr.shape[1] != n_dims:
        raise ValueError(f"{name}: expected D={n_dims} columns to match the other coordinates, "
                         f"got shape {arr.shape}")
    if n_points is not None and arr.shape[0] != n_points:
        raise ValueError(f"{name}: expected shape ({symbol}, D) with {symbol} = {n_points} {what}, "
                         f"got {arr.shape}")
    return arr


#: The largest count accepted: float64 holds every integer exactly only up to 2**53.
MAX_EXACT_COUNT = 2 ** 53
#: Transitions, steps, episodes of one run (an experiment's seed or :func:`run_psrl
#: <corrpriors.applications.run_psrl>`): the per-step arrays grow linearly (8 bytes each).
MAX_STEPS = 10_000_000
#: Posterior draws per replan (PSRL's ``n_samples``): each holds a dense (S, A, S) model.
MAX_SAMPLES = 10_000


def _counts_as_array(counts: Any, name: str) -> np.ndarray:
    """:func:`as_real_array` without booleans, with integers above 2**53 refused exactly."""
    arr = as_real_array(counts, name, allow_bool=False, expected="real integer counts")
    if arr.dtype.kind == "O":
        flat = arr.ravel()
        if all(isinstance(v, numbers.Integral) for v in flat):
            big = max((int(v) for v in flat), default=0)
            if big > MAX_EXACT_COUNT:
                raise ValueError(_too_large(name, big))
        return arr.astype(np.float64)
    if arr.dtype.kind in "iu" and arr.size and arr.max() > MAX_EXACT_COUNT:
        raise ValueError(_too_large(name, int(arr.max())))
    return arr


def _too_large(name: str, value: float) -> str:
    return (f"{name}: counts must be at most 2**53 = {MAX_EXACT_COUNT} (float64 holds integers "
            f"exactly only up to there), found {value:.17g}")


def _check_row_totals(arr: np.ndarray, name: str) -> None:
    """Every total over the last (category) axis must be at most 2**53, exactly."""
    k = arr.shape[-1]
    if arr.size == 0 or float(arr.max()) * k <= MAX_EXACT_COUNT:
        return
    if float(arr.max()) * k < 2.0 ** 62:
        totals = arr.astype(np.int64).sum(axis=-1)
    else:
        totals = np.array([sum(int(v) for v in row) for row in arr.reshape(-1, k)],
                          dtype=object).reshape(arr.shape[:-1])
    over = np.argwhere(totals > MAX_EXACT_COUNT)
    if over.size:
        where = tuple(int(i) for i in over[0])
        raise ValueError(f"{name}: every row total must be at most 2**53 = {MAX_EXACT_COUNT} "
                         f"(float64 holds integers exactly only up to there); row "
                         f"{where[0] if len(where) == 1 else where} sums to {totals[where]}")


def check_counts(counts: Any, name: str = "counts", min_categories: int = 2,
                 ndim: int = 2) -> np.ndarray:
    """Validate an array of non-negative integer counts, categories on the last axis;
    return it as float64.

    Integer-valued floats are accepted. Counts and totals over the last axis must be at most
    ``2**53`` (:data:`MAX_EXACT_COUNT`), where float64 stops holding every integer. A
    ``numpy.ma.MaskedArray`` is accepted only if nothing is masked (a mask is not silently
    dropped; fill it first). Booleans, complex numbers, strings and other non-numbers raise
    :class:`TypeError`; everything else :class:`ValueError`. Returns a float array so that
    downstream arithmetic never truncates.

    Parameters
    ----------
    counts : array_like of shape (C, K), or ``ndim`` axes
    name : str
        The argument's name, used in messages.
    min_categories : int
        Minimum size of the last axis.
    ndim : int
        Required number of axes (2: rows are covariates, columns categories).

    Returns
    -------
    ndarray of shape counts.shape, dtype float64
    """
    arr = _counts_as_array(counts, name).astype(np.float64)
    if arr.ndim != ndim:
        want = "a 2-D array of shape (C, K)" if ndim == 2 else f"a {ndim}-D array"
        raise ValueError(f"{name}: expected {want}, got shape {arr.shape}")
    if arr.shape[-1] < min_categories:
        raise ValueError(
            f"{name}: expected at least K={min_categories} categories (columns), got K={arr.shape[-1]}"
        )
    if arr.shape[0] < 1:
        raise ValueError(f"{name}: expected at least one covariate (row), got shape {arr.shape}")
    if np.isnan(arr).any():
        raise ValueError(f"{name}: contains NaN")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains infinite values")
    if (arr < 0).any():
        raise ValueError(f"{name}: counts must be non-negative, found minimum {arr.min():g}")
    if not np.all(arr == np.round(arr)):
        raise ValueError(f"{name}: counts must be integers, found fractional values")
    if arr.size and arr.max() > MAX_EXACT_COUNT:
        raise ValueError(_too_large(name, float(arr.max())))
    _check_row_totals(arr, name)
    return arr


def check_positive(x: Any, name: str, strict: bool = True) -> float:
    """Check that a scalar is (strictly) positive and finite; return it as float (bools refused:
    ``True`` is not 1.0; strings too, never converted, as in :func:`check_real`: ``"1"`` is not
    1.0). Every failure is a :class:`ValueError`, as callers expect.
    """
    if isinstance(x, (bool, np.bool_)):
        kind = "positive" if strict else "non-negative"
        raise ValueError(f"{name}: expected a finite {kind} number, got {x!r} (a bool)")
    if isinstance(x, (str, bytes, np.str_, np.bytes_)):
        raise ValueError(f"{name}: expected a positive number, got {short_repr(x)} (a string; "
                         f"convert it with float() first if a number is meant)")
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a positive number, got {x!r}") from None
    if not np.isfinite(v) or (v <= 0 if strict else v < 0):
        kind = "positive" if strict else "non-negative"
        raise ValueError(f"{name}: expected a finite {kind} number, got {x!r}")
    return v


def check_int(x: Any, name: str, low: int, high: int | None = None) -> int:
    """``x`` as an int in ``[low, high]``, or a ``ValueError`` naming ``name`` (bools, floats with a
    fractional part and non-numbers refused).
    """
    ok = not isinstance(x, bool) and isinstance(x, (int, np.integer, float, np.floating))
    finite = ok and (isinstance(x, (int, np.integer)) or bool(np.isfinite(x)))   # ints of any size
    if not finite or int(x) != x or x < low or (high is not None and x > high):
        span = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name}: expected an integer {span}, got {short_repr(x)}")
    return int(x)


def check_bool(x: Any, name: str) -> bool:
    """``x`` as a bool if it is ``True`` or ``False`` (numpy's too), else a :class:`TypeError`
    naming ``name`` (never truth-tested: ``"no"`` and ``1`` are not flags).
    """
    if not isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{name}: expected True or False, got {x!r}")
    return bool(x)


def check_real(x: Any, name: str, low: float = -np.inf, high: float = np.inf, *,
               closed: str = "both", expected: str | None = None) -> float:
    """``x`` as a finite float between ``low`` and ``high``, or an error naming ``name``.

    ``closed`` says which ends belong to the interval (``"both"``, ``"left"``, ``"right"`` or
    ``"neither"``). Booleans, strings and other non-numbers raise :class:`TypeError` (never
    converted: ``'0.5'`` is not 0.5 and ``True`` is not 1); NaN, infinities and values outside
    raise :class:`ValueError`. ``expected`` replaces "a real number in [low, high]" in the message.
    """
    left, right = closed in ("both", "left"), closed in ("both", "right")
    want = expected or f"a real number in {'[' if left else '('}{low:g}, {high:g}{']' if right else ')'}"
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer, float, np.floating)):
        raise TypeError(f"{name}: expected {want}, got {x!r}")
    v = float(x)
    if not (np.isfinite(v) and (v >= low if left else v > low) and (v <= high if right else v < high)):
        raise ValueError(f"{name}: expected {want}, got {x!r}")
    return v


def check_index_array(x: Any, name: str, n: int, symbol: str) -> np.ndarray:
    """``x`` as an int64 array of indices in ``[0, n)`` (``symbol`` names ``n`` in the message,
    e.g. ``"S"``), or an error naming ``name``: booleans and floats are refused, never
    truncated (1.5 is not state 1; True is not state 1), and so are strings (TypeError).
    """
    arr = as_real_array(x, name, expected="integer indices")
    if arr.dtype.kind in "bO" or (arr.dtype.kind == "f" and arr.size):
        raise ValueError(f"{name}: expected integer indices, got dtype {arr.dtype}")
    if arr.size and (arr.min() < 0 or arr.max() >= n):
        raise ValueError(f"{name}: expected indices in [0, {symbol}) = [0, {n}), got values in "
                         f"[{arr.min()}, {arr.max()}]")
    return arr.astype(np.int64)


def check_simplex(p: Any, name: str, axis: int = -1, atol: float = 1e-8) -> np.ndarray:
    """Check that ``p`` is non-negative and sums to one along ``axis``."""
    arr = check_array(p, name)
    if (arr < -atol).any():
        raise ValueError(f"{name}: probabilities must be non-negative, found {arr.min():g}")
    s = arr.sum(axis=axis)
    if not np.allclose(s, 1.0, atol=max(atol, 1e-6)):
        worst = float(np.max(np.abs(s - 1.0)))
        raise ValueError(f"{name}: rows must sum to one along axis {axis}; worst deviation {worst:.3g}")
    return arr


#: Largest accepted max |A - A^T| relative to max |A| for a matrix that must be symmetric
#: (covariances, precisions, the matrices the linear algebra factorises).
SYMMETRY_RTOL = 1e-10


def check_symmetric_square(matrix: Any, name: str, size: int | None = None) -> np.ndarray:
    """``matrix`` as a finite, symmetric (C, C) float64 array, or an error naming ``name``.

    Symmetric to :data:`SYMMETRY_RTOL` relative to its largest entry; ``size`` fixes C. Complex
    and non-numeric input raise :class:`TypeError` (:func:`as_real_array`), the rest
    :class:`ValueError`.
    """
    arr = as_real_array(matrix, name).astype(np.float64)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise ValueError(f"{name}: expected a square 2-D array, got shape {arr.shape}")
    if size is not None and arr.shape[0] != size:
        raise ValueError(f"{name}: expected shape ({size}, {size}) to match the {size} covariates "
                         f"(rows of counts), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or infinite values")
    big = float(np.max(np.abs(arr), initial=0.0))
    gap = float(np.max(np.abs(arr - arr.T), initial=0.0))
    if gap > SYMMETRY_RTOL * max(big, 1e-300):
        raise ValueError(f"{name}: must be symmetric, got max |A - A^T| = {gap:.3g} (max |A| = {big:.3g})")
    return arr


def check_covariance(cov: Any, name: str = "covariance", size: int | None = None,
                     rtol: float = 1e-8) -> np.ndarray:
    """Validate a symmetric positive semi-definite (C, C) matrix.

    Raises for NaN, a wrong shape, asymmetry (:func:`check_symmetric_square`) or a clearly
    negative eigenvalue (below ``-1e-8`` times the largest). Rank-deficient PSD matrices pass;
    jitter is added later, where the matrix is factorised.
    """
    arr = check_symmetric_square(cov, name, size)
    eig = np.linalg.eigvalsh(arr)
    if eig[-1] <= 0:
        raise ValueError(f"{name}: must be positive semi-definite with a positive eigenvalue; "
                         f"largest eigenvalue is {eig[-1]:g}")
    if eig[0] < -rtol * eig[-1] * max(1.0, arr.shape[0] / 100):
        raise ValueError(f"{name}: must be positive semi-definite, found eigenvalue {eig[0]:g}")
    return arr


def check_precision(precision: Any, name: str = "precision",
                    size: int | None = None, symmetry_rtol: float = SYMMETRY_RTOL) -> sp.csr_array:
    r"""Validate a symmetric (C, C) precision (scipy.sparse or dense), C >= 1; return canonical CSR.

    Symmetric means :math:`|Q - Q^\top|` at most ``symmetry_rtol`` times the largest
    :math:`|Q_{ij}|`.
    """
    if sp.issparse(precision):
        as_real_array(precision.data, name)
        q = sp.csr_array(precision, dtype=np.float64)
    else:
        if isinstance(precision, (str, bytes)):
            raise TypeError(f"{name}: expected a scipy.sparse matrix or a numeric (C, C) array, got "
                            f"{type(precision).__name__}")
        arr = as_real_array(precision, name).astype(np.float64)
        if arr.ndim != 2:
            raise ValueError(f"{name}: expected a square 2-D matrix, got shape {arr.shape}")
        q = sp.csr_array(arr)
    if q.shape[0] != q.shape[1] or q.shape[0] == 0:
        raise ValueError(f"{name}: expected a square 2-D matrix with at least one row, got shape {q.shape}")
    if size is not None and q.shape[0] != size:
        raise ValueError(f"{name}: expected shape (C, C) = ({size}, {size}) to match the {size} "
                         f"covariates (rows of counts), got {q.shape}")
    q.sum_duplicates()
    q.sort_indices()
    if not np.all(np.isfinite(q.data)):
        raise ValueError(f"{name}: contains NaN or infinite values")
    scale = float(np.max(np.abs(q.data), initial=0.0))
    if scale == 0.0:
        raise ValueError(f"{name}: is zero; expected a positive-definite matrix")
    asym = abs(q - q.T)
    if asym.nnz and float(asym.max()) > symmetry_rtol * scale:
        raise ValueError(f"{name}: must be symmetric (largest |Q - Q^T| is "
                         f"{float(asym.max()):.3g}, relative {float(asym.max()) / scale:.3g})")
    return q



__all__ = ["MAX_EXACT_COUNT", "MAX_SAMPLES", "MAX_STEPS", "as_real_array", "check_array", "check_bool",
           "check_counts", "check_covariance", "check_index_array", "check_int", "check_points", "check_positive",
           "check_precision", "check_real", "check_shape", "check_simplex"]
