"""Input validation at the public boundary.

Every check raises :class:`ValueError` (or :class:`TypeError`) whose message names the
argument, what was expected and what arrived.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def check_array(x: Any, name: str, ndim: int | None = None, dtype=float) -> np.ndarray:
    """Convert ``x`` to an array of ``dtype``; check its dimension and finiteness."""
    try:
        arr = np.asarray(x, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: expected a numeric array, got {type(x).__name__} ({exc})") from None
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


def check_counts(counts: Any, name: str = "counts", min_categories: int = 2) -> np.ndarray:
    """Validate a (C, K) matrix of non-negative integer counts; return it as float64.

    Integer-valued floats are accepted. Returns a float array so that downstream
    arithmetic never truncates.
    """
    arr = np.asarray(counts)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise ValueError(f"{name}: expected a numeric array, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if arr.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D array of shape (C, K), got shape {arr.shape}")
    if arr.shape[1] < min_categories:
        raise ValueError(
            f"{name}: expected at least K={min_categories} categories (columns), got K={arr.shape[1]}"
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
    return arr


def check_positive(x: Any, name: str, strict: bool = True) -> float:
    """Check that a scalar is (strictly) positive and finite; return it as float."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a positive number, got {x!r}") from None
    if not np.isfinite(v) or (v <= 0 if strict else v < 0):
        kind = "positive" if strict else "non-negative"
        raise ValueError(f"{name}: expected a finite {kind} number, got {x!r}")
    return v


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


def check_covariance(cov: Any, name: str = "covariance", size: int | None = None,
                     rtol: float = 1e-8) -> np.ndarray:
    """Validate a symmetric positive semi-definite (C, C) matrix.

    Raises for NaN, a wrong shape, asymmetry or a clearly negative eigenvalue
    (below ``-1e-8`` times the largest). Rank-deficient PSD matrices pass; jitter is
    added later, where the matrix is factorised.
    """
    arr = np.asarray(cov, dtype=np.float64) if not isinstance(cov, np.ndarray) else cov.astype(np.float64)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise ValueError(f"{name}: expected a square 2-D array, got shape {arr.shape}")
    if size is not None and arr.shape[0] != size:
        raise ValueError(f"{name}: expected shape ({size}, {size}) to match the {size} covariates "
                         f"(rows of counts), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or infinite values")
    scale = max(float(np.max(np.abs(arr))), 1e-300)
    if not np.allclose(arr, arr.T, rtol=0, atol=1e-10 * scale):
        raise ValueError(f"{name}: must be symmetric")
    eig = np.linalg.eigvalsh(arr)
    if eig[-1] <= 0:
        raise ValueError(f"{name}: must be positive semi-definite with a positive eigenvalue; "
                         f"largest eigenvalue is {eig[-1]:g}")
    if eig[0] < -rtol * eig[-1] * max(1.0, arr.shape[0] / 100):
        raise ValueError(f"{name}: must be positive semi-definite, found eigenvalue {eig[0]:g}")
    return arr


__all__ = ["check_array", "check_shape", "check_counts", "check_positive", "check_simplex",
           "check_covariance"]
