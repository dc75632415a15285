"""Explicit randomness: seeds to Generators, stream splitting, and the library's draws.

Library code never touches numpy's global random state, and every random draw of a kind
has one implementation here:

- :func:`sample_categorical` / :func:`inverse_cdf` -- categorical draws by the inverse CDF
  (one uniform per draw, so a loop that draws its uniforms itself, such as a Gym ``step``,
  consumes the generator exactly like a vectorised call);
- :func:`sample_dirichlet` -- Dirichlet draws that stay valid for tiny concentrations
  (log-space Gamma draws).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._typing import FloatArray, IntArray, SeedLike


def as_generator(seed: SeedLike, *, name: str = "rng") -> np.random.Generator:
    """Return a :class:`numpy.random.Generator` for ``seed``.

    Parameters
    ----------
    seed : None, int, numpy.random.SeedSequence or numpy.random.Generator
        A Generator is returned unchanged (the caller's stream is shared);
        anything else goes through :func:`numpy.random.default_rng`.
    name : str, default="rng"
        The argument's name in error messages.
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, np.random.RandomState):
        raise TypeError(
            f"{name}: legacy numpy.random.RandomState is not supported; "
            "pass a numpy.random.Generator (numpy.random.default_rng(seed))"
        )
    if seed is not None and not isinstance(seed, (int, np.integer, np.random.SeedSequence)):
        raise TypeError(
            f"{name}: expected None, an int, a SeedSequence or a Generator, got {type(seed).__name__}"
        )
    if isinstance(seed, (bool, np.bool_)):
        raise TypeError(f"{name}: expected None, an int, a SeedSequence or a Generator, got bool")
    if isinstance(seed, (int, np.integer)) and seed < 0:
        raise ValueError(f"{name}: an integer seed must be non-negative, got {int(seed)}")
    return np.random.default_rng(seed)


def required_rng(rng: SeedLike, why: str, *, name: str = "rng") -> SeedLike:
    """``rng`` itself; a :class:`ValueError` naming it when it is None.

    For a result that is random as a whole (a Monte-Carlo average, a sampler's output): without
    a seed two identical calls differ, so None (fresh OS entropy) must be asked for explicitly,
    as ``numpy.random.default_rng()``.

    Parameters
    ----------
    rng : None, int, numpy.random.SeedSequence or numpy.random.Generator
    why : str
        Why it is needed, e.g. ``"the estimate is a Monte-Carlo average"``.
    name : str, default="rng"
        The argument's name in the message.
    """
    if rng is None:
        raise ValueError(f"{name}: {why}; pass a numpy Generator or a seed")
    return rng


def spawn(rng: np.random.Generator, n: int) -> list[np.random.Generator]:
    """Split ``rng`` into ``n`` independent child generators (one stream per sub-task)."""
    return list(as_generator(rng).spawn(n))


def inverse_cdf(cdf: Any, u: Any) -> IntArray:
    """Categories of uniforms ``u`` under the cumulative sums ``cdf`` (the last axis).

    Category ``k`` is returned when ``cdf[k-1] <= u * cdf[-1] < cdf[k]`` (``cdf[-1] = 0``):
    ``u`` is scaled by the row total, so rows need not sum to one exactly and rounding in
    the cumulative sum never selects a trailing zero-probability category; the index is
    clipped to the last category.

    Parameters
    ----------
    cdf : array_like of shape (..., K)
        Non-decreasing cumulative sums of non-negative weights (``numpy.cumsum(p, -1)``),
        with a positive total.
    u : array_like of shape (...)
        Uniforms in [0, 1); with a 1-d ``cdf`` any shape (one row shared by all).

    Returns
    -------
    ndarray of shape (...)
        int64 categories in [0, K).
    """
    cdf = np.asarray(cdf, dtype=np.float64)
    u = np.asarray(u, dtype=np.float64)
    if cdf.ndim == 1:   # one row: binary search
        idx = np.searchsorted(cdf, u * cdf[-1], side="right")
    else:
        idx = (cdf <= (u * cdf[..., -1])[..., None]).sum(axis=-1)
    return np.minimum(idx, cdf.shape[-1] - 1).astype(np.int64)


def sample_categorical(probs: Any, *, rng: SeedLike) -> IntArray:
    """Draw one category per row of ``probs`` (inverse CDF, vectorised over rows).

    Uses one uniform per row, ``rng.random(probs.shape[:-1])``.

    Parameters
    ----------
    probs : array_like of shape (..., K)
        Non-negative weights per row (normalised here; rows need not sum to one).
    rng : None, int, numpy.random.SeedSequence or numpy.random.Generator
        Randomness source.

    Returns
    -------
    draws : ndarray of shape (...)
        int64 categories in [0, K).
    """
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim < 1 or p.shape[-1] < 1:
        raise ValueError(f"probs: expected an array of shape (..., K) with K >= 1, got shape {p.shape}")
    if not np.isfinite(p).all() or (p < 0).any():
        raise ValueError("probs: expected finite non-negative weights")
    if (p.sum(axis=-1) <= 0).any():
        raise ValueError("probs: every row needs a positive total")
    gen = as_generator(rng)
    return inverse_cdf(np.cumsum(p, axis=-1), gen.random(p.shape[:-1]))


def sample_dirichlet(alpha: Any, n: int, *, rng: SeedLike) -> FloatArray:
    r"""``n`` draws from :math:`\mathrm{Dir}(\alpha)` along the last axis, valid for tiny shapes.

    With every concentration :math:`\ge 1`, plain Gamma draws normalised; otherwise
    :math:`\log G = \log \mathrm{Gamma}(\alpha + 1) + \log(U) / \alpha` (the identity
    :math:`G \overset{d}{=} G_{\alpha+1} U^{1/\alpha}`), normalised in log space, so
    concentrations like 1e-3 (whose Gamma draws underflow to zero) still give points on
    the simplex. Generator use: ``n * alpha.size`` Gamma draws, then (tiny shapes only) as
    many uniforms.

    Parameters
    ----------
    alpha : array_like of shape (..., K)
        Positive concentrations (each row an independent Dirichlet).
    n : int
        Number of draws.
    rng : None, int, numpy.random.SeedSequence or numpy.random.Generator
        Randomness source.

    Returns
    -------
    draws : ndarray of shape (n, ..., K)
        Each ``draws[m, ...]`` row lies on the simplex.
    """
    a = np.asarray(alpha, dtype=np.float64)
    if a.ndim < 1 or a.size == 0:
        raise ValueError(f"alpha: expected a non-empty array of shape (..., K), got shape {a.shape}")
    if not np.isfinite(a).all() or (a <= 0).any():
        raise ValueError("alpha: expected finite positive concentrations")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n: expected an integer >= 1, got {n!r}")
    gen = as_generator(rng)
    shape = (int(n),) + a.shape
    if a.min() >= 1.0:      # no underflow risk: plain Gamma draws
        g = gen.standard_gamma(np.broadcast_to(a, shape))
        return g / g.sum(axis=-1, keepdims=True)
    log_g = np.log(gen.standard_gamma(np.broadcast_to(a + 1.0, shape)))
    with np.errstate(divide="ignore"):   # U = 0 (probability 2**-53): G = 0, log G = -inf
        log_g += np.log(gen.random(shape)) / a
    log_g -= log_g.max(axis=-1, keepdims=True)
    g = np.exp(log_g)
    return g / g.sum(axis=-1, keepdims=True)


__all__ = ["as_generator", "inverse_cdf", "required_rng", "sample_categorical", "sample_dirichlet", "spawn"]
