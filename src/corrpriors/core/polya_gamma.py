r"""Polya-Gamma moments and a guarded, vectorised sampler.

A Polya-Gamma variable :math:`\omega \sim PG(b, c)` with shape :math:`b > 0` and tilt
:math:`c \in \mathbb{R}` is the infinite convolution

.. math::

    \omega = \frac{1}{2\pi^2} \sum_{k=1}^{\infty}
             \frac{g_k}{(k - 1/2)^2 + c^2 / (4\pi^2)}, \qquad g_k \sim \mathrm{Gamma}(b, 1),

with mean :math:`\frac{b}{2c}\tanh(c/2)` and variance
:math:`\frac{b}{4c^3}(\sinh c - c)\,\mathrm{sech}^2(c/2)` (Polson, Scott & Windle 2013).

Draws come from the ``polyagamma`` package (Bleki), whose version 2.0.2 is wrong in some
regimes (measured for this module, 4,000 draws per cell): ``b = 0`` raises, a NaN tilt
hangs, ``b = 1`` with ``c >= 180`` has a mean ~57x too large (also with
``method="devroye"``), ``b = 10..50`` with ``c >= 50`` is ~175 % too large, and ``b >= 100``
with ``c = 1000`` gives NaN; the ``alternate`` method is ~0.7 % too large for small
``|c|`` (upstream issue zoj613/polyagamma#133, also for ``b < 1``). :func:`sample_pg`
therefore routes every element to a regime that was verified against the exact moments:

==========================  ====================================================
``b == 0``                  exactly 0 (the point mass PG(0, c))
``b >= normal_threshold``   moment-matched normal (exact mean and variance;
                            the CLT error is far below Monte Carlo error),
                            clipped at a tiny positive value
``|c| > 5``                 ``method="alternate"`` (exact there, any real b)
``|c| <= 5``, integer ``b``  ``method="devroye"`` (sum of b exact PG(1, c) draws)
``|c| <= 5``, fractional b  integer part by ``devroye`` plus the fractional part
                            by the truncated gamma series above (200 terms),
                            whose omitted tail is replaced by its exact mean
==========================  ====================================================

The moment test in ``tests/test_polya_gamma.py`` covers every regime, so an upgrade of
``polyagamma`` cannot silently bring a bias back.
"""

from __future__ import annotations

import numpy as np
from polyagamma import random_polyagamma

from .._random import as_generator
from .._typing import FloatArray, SeedLike

#: Elements with ``|c|`` above this use the ``alternate`` sampler.
_ALTERNATE_MIN_TILT = 5.0
#: Number of gamma terms of the series used for fractional shapes at small tilt.
_SERIES_TERMS = 200
#: Smallest value a moment-matched normal draw is clipped to (relative to its mean).
_NORMAL_FLOOR = 1e-12


def _as_float(x, name: str) -> np.ndarray:
    try:
        return np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a real array, got {type(x).__name__}") from None


def _check_b(b: np.ndarray) -> None:
    if np.isnan(b).any():
        raise ValueError("b: contains NaN; Polya-Gamma shapes must be finite and >= 0")
    if not np.all(np.isfinite(b)):
        raise ValueError("b: contains infinite values; Polya-Gamma shapes must be finite and >= 0")
    if (b < 0).any():
        raise ValueError(f"b: Polya-Gamma shapes must be >= 0, found minimum {b.min():g}")


def _check_c(c: np.ndarray) -> None:
    if np.isnan(c).any():
        raise ValueError("c: contains NaN; Polya-Gamma tilts must be finite")
    if not np.all(np.isfinite(c)):
        raise ValueError("c: contains infinite values; Polya-Gamma tilts must be finite")


def _sech(x: np.ndarray) -> np.ndarray:
    """``1 / cosh(x)`` without overflow."""
    e = np.exp(-np.abs(x))
    return 2.0 * e / (1.0 + e * e)


def _tanh_over_x(x: np.ndarray) -> np.ndarray:
    """``tanh(x) / x``, equal to 1 at 0; series below 1e-4 (error < 1e-17)."""
    small = np.abs(x) < 1e-4
    safe = np.where(small, 1.0, x)
    x2 = x * x
    return np.where(small, 1.0 - x2 / 3.0, np.tanh(safe) / safe)


def pg_mean(b, c) -> FloatArray:
    r"""Mean of :math:`PG(b, c)`: :math:`\frac{b}{2c}\tanh(c/2)`.

    Stable at and near ``c = 0`` (where it equals ``b / 4``; the series is
    ``b/4 - b c^2/48 + ...``) and for huge ``|c|`` (where it tends to ``b / (2|c|)``).
    Even in ``c``.

    Parameters
    ----------
    b : array_like
        Shapes, ``b >= 0``.
    c : array_like
        Tilts; broadcast against ``b``.

    Returns
    -------
    mean : ndarray of shape broadcast(b, c)
    """
    b = _as_float(b, "b")
    c = _as_float(c, "c")
    _check_b(b)
    _check_c(c)
    return pg_mean_unchecked(b, c)


def pg_mean_unchecked(b: np.ndarray, c: np.ndarray) -> FloatArray:
    """:func:`pg_mean` without input validation, for the inner loops of the fit.

    Parameters
    ----------
    b, c : ndarray of shape (...)
        Finite float arrays, ``b >= 0``.

    Returns
    -------
    ndarray of shape (...)
    """
    return 0.25 * b * _tanh_over_x(0.5 * c)


def pg_var(b, c) -> FloatArray:
    r"""Variance of :math:`PG(b, c)`: :math:`\frac{b}{4c^3}(\sinh c - c)\,\mathrm{sech}^2(c/2)`.

    Equals ``b / 24`` at ``c = 0``. For ``|c| < 1`` the cancelling difference
    ``sinh c - c`` is summed as its power series; above, the equivalent form
    ``(2 tanh(c/2) - c sech^2(c/2)) / c^3`` is used, which never overflows. Even in ``c``.

    Parameters
    ----------
    b : array_like
        Shapes, ``b >= 0``.
    c : array_like
        Tilts; broadcast against ``b``.

    Returns
    -------
    var : ndarray of shape broadcast(b, c)
    """
    b = _as_float(b, "b")
    c = _as_float(c, "c")
    _check_b(b)
    _check_c(c)
    a = np.abs(c)
    small = a < 1.0
    # (sinh c - c) / c^3 = sum_j c^{2j} / (2j + 3)!   (12 terms: error < 1e-30 for |c| < 1)
    c2 = np.where(small, a * a, 0.0)
    series = np.zeros_like(c2)
    term = np.full_like(c2, 1.0 / 6.0)
    for j in range(12):
        series = series + term
        term = term * c2 / ((2 * j + 4) * (2 * j + 5))
    sech_half = _sech(0.5 * a)
    small_val = series * sech_half**2
    safe = np.where(small, 1.0, a)
    large_val = (2.0 * np.tanh(0.5 * safe) - safe * _sech(0.5 * safe) ** 2) / safe**3
    return 0.25 * b * np.where(small, small_val, large_val)


def _series_tail_mean(b: np.ndarray, c: np.ndarray, n_terms: int) -> np.ndarray:
    r"""Exact mean of the terms ``k > n_terms`` of the gamma series.

    ``E[tail] = b / (2 pi^2) * sum_{k > n} 1 / ((k - 1/2)^2 + z^2)`` with ``z = c / (2 pi)``;
    the full sum is known in closed form (``pg_mean``), so the tail is the full mean minus the
    first ``n`` terms.
    """
    k = np.arange(1, n_terms + 1, dtype=float) - 0.5
    z2 = (c / (2.0 * np.pi)) ** 2
    head = np.sum(1.0 / (k[None, :] ** 2 + z2[:, None]), axis=1) / (2.0 * np.pi**2)
    return np.maximum(pg_mean(1.0, c) - head, 0.0) * b


def _sample_series(b: np.ndarray, c: np.ndarray, rng: np.random.Generator,
                   n_terms: int = _SERIES_TERMS) -> np.ndarray:
    """Draw PG(b, c) from the first ``n_terms`` gamma terms plus the tail's exact mean."""
    if b.size == 0:
        return np.zeros(0)
    k = np.arange(1, n_terms + 1, dtype=float) - 0.5
    z2 = (c / (2.0 * np.pi)) ** 2
    denom = k[None, :] ** 2 + z2[:, None]
    g = rng.standard_gamma(np.broadcast_to(b[:, None], denom.shape))
    return np.sum(g / denom, axis=1) / (2.0 * np.pi**2) + _series_tail_mean(b, c, n_terms)


def sample_pg(b, c, *, rng: SeedLike, normal_threshold: float = 200.0) -> FloatArray:
    """Draw ``omega ~ PG(b, c)`` element-wise, routed around known upstream bugs.

    Parameters
    ----------
    b : array_like
        Shapes, real and ``>= 0`` (``b = 0`` gives exactly 0).
    c : array_like
        Tilts, finite; broadcast against ``b``.
    rng : numpy.random.Generator or int or None
        Source of randomness (normalised with :func:`corrpriors._random.as_generator`).
        The same Generator state reproduces the same draws.
    normal_threshold : float, default=200.0
        Shapes at or above this use a moment-matched normal draw (exact mean and
        variance). ``numpy.inf`` disables the approximation.

    Returns
    -------
    omega : ndarray of shape broadcast(b, c)
        Non-negative draws (strictly positive where ``b > 0``).

    Raises
    ------
    ValueError
        If ``b`` is negative or not finite, or ``c`` is NaN or infinite (``polyagamma``
        would hang on a NaN tilt).

    Notes
    -----
    See the module docstring for the routing table and the measurements behind it.
    """
    gen = as_generator(rng)
    b = _as_float(b, "b")
    c = _as_float(c, "c")
    _check_b(b)
    _check_c(c)
    if not normal_threshold > 0:
        raise ValueError(f"normal_threshold: expected a positive number, got {normal_threshold!r}")
    b, c = np.broadcast_arrays(b, c)
    shape = b.shape
    bf = b.ravel()
    cf = np.abs(c.ravel())
    out = np.zeros(bf.shape, dtype=np.float64)

    positive = bf > 0
    normal = positive & (bf >= normal_threshold)
    alternate = positive & ~normal & (cf > _ALTERNATE_MIN_TILT)
    small = positive & ~normal & ~alternate
    integer_part = np.floor(bf)
    fraction = bf - integer_part
    devroye = small & (integer_part >= 1)
    series = small & (fraction > 0)

    # Fixed order of the calls below keeps the draws reproducible for a given Generator.
    if normal.any():
        mean = pg_mean(bf[normal], cf[normal])
        sd = np.sqrt(pg_var(bf[normal], cf[normal]))
        draw = mean + sd * gen.standard_normal(mean.shape)
        out[normal] = np.maximum(draw, _NORMAL_FLOOR * mean)
    if alternate.any():
        out[alternate] = random_polyagamma(bf[alternate], cf[alternate], method="alternate",
                                           random_state=gen)
    if devroye.any():
        out[devroye] = random_polyagamma(integer_part[devroye], cf[devroye], method="devroye",
                                         random_state=gen)
    if series.any():
        out[series] += _sample_series(fraction[series], cf[series], gen)
    return out.reshape(shape)


__all__ = ["pg_mean", "pg_mean_unchecked", "pg_var", "sample_pg"]
