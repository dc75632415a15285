r"""Pareto-smoothed importance sampling (PSIS) of the VI posterior, stick by stick.

A correction of the mean-field fit compared with EP in the calibration study (the user guide's
"How far to trust the intervals"): draw every stick jointly from :math:`q(\psi_{\cdot k})`, weight
each draw by :math:`p(\psi_{\cdot k} \mid X)/q(\psi_{\cdot k})`, smooth the largest weights by a
fitted generalised Pareto distribution (Vehtari, Simpson, Gelman, Yao & Gabry 2024) and resample.
Because :math:`q(\psi_{\cdot k}) \propto p(\psi_{\cdot k})\prod_{i \in O_k}\exp(\kappa_i\psi_i -
e_i\psi_i^2/2)` (Gaussian sites :math:`e = E[\omega]`, :math:`\kappa`), the log weight needs no
determinant or prior solve:

.. math::

    \log w(\psi_{\cdot k}) = \sum_{i \in O_k}\big[x_i\psi_i - b_i\log(1 + e^{\psi_i})
    - \kappa_i\psi_i + e_i\psi_i^2/2\big] + const.

The Pareto shape :math:`\hat k` of the weights' tail diagnoses the stick: above 0.7 the
estimate is unreliable, and the stick is taken from a short Gibbs run started at the VI means
instead (the sticks are independent a posteriori, so a draw combines sticks from either source).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from .._typing import FloatArray
from .._validation import as_real_array
from .cavi import CountData
from .results import VIResult

#: Above this Pareto shape a stick's importance weights are not trusted (Vehtari et al. 2024).
KHAT_LIMIT = 0.7


def gpd_fit(exceedances: np.ndarray) -> tuple[float, float]:
    r"""Shape :math:`k` and scale :math:`\sigma` of a generalised Pareto distribution.

    The empirical-Bayes estimator of Zhang & Stephens (2009) with the weakly informative prior
    on :math:`k` of Vehtari et al. (2024) (pulled towards 0.5 as if by 10 observations).

    Parameters
    ----------
    exceedances : ndarray of shape (n,)
        Positive values over the threshold, sorted ascending (n >= 5).

    Returns
    -------
    k, sigma : float
    """
    x = np.asarray(exceedances, dtype=float)
    n = x.size
    m = 30 + int(np.sqrt(n))
    b = 1.0 - np.sqrt(m / (np.arange(1, m + 1) - 0.5))
    b /= 3.0 * x[int(n / 4 + 0.5) - 1]
    b += 1.0 / x[-1]
    k = np.log1p(-b[:, None] * x[None, :]).mean(axis=1)
    profile = n * (np.log(-b / k) - k - 1.0)
    with np.errstate(over="ignore"):  # exp overflow: a negligible weight, 1 / inf = 0
        w = 1.0 / np.exp(profile[None, :] - profile[:, None]).sum(axis=1)
    keep = w >= 10 * np.finfo(float).eps
    w, b = w[keep] / w[keep].sum(), b[keep]
    b_post = float(np.sum(b * w))
    k_post = float(np.log1p(-b_post * x).mean())
    sigma = -k_post / b_post
    return (n * k_post + 10 * 0.5) / (n + 10), sigma


def _gpd_quantile(p: np.ndarray, k: float, sigma: float) -> FloatArray:
    if k == 0:
        return -sigma * np.log1p(-p)
    return sigma * np.expm1(-k * np.log1p(-p)) / k


def pareto_smooth(log_weights: np.ndarray) -> tuple[FloatArray, float]:
    r"""Pareto-smoothed, normalised log importance weights and the tail shape :math:`\hat k`.

    The largest :math:`M = \lceil\min(S/5, 3\sqrt S)\rceil` weights are replaced by the expected
    order statistics of a generalised Pareto fitted to them (capped at the largest raw weight).

    Parameters
    ----------
    log_weights : ndarray of shape (S,)
        Finite, or ``-inf`` for a draw of weight 0 (at least one entry finite). The ``-inf``
        entries are set aside: the others are smoothed as if they were the only draws, and the
        ``-inf`` entries stay ``-inf``.

    Returns
    -------
    log_weights : ndarray of shape (S,)
        Smoothed, normalised (``logsumexp`` 0).
    khat : float
        ``-inf`` when fewer than 5 weights exceed the cutoff (all but a few weights equal: no
        tail to fit, nothing smoothed).

    Raises
    ------
    ValueError
        If ``log_weights`` is not a non-empty 1-d array, holds NaN or ``+inf``, or is ``-inf``
        throughout.
    """
    raw = as_real_array(log_weights, "log_weights").astype(float)
    if raw.ndim != 1 or raw.size == 0:
        raise ValueError(f"log_weights: expected a non-empty 1-d array, got shape {raw.shape}")
    bad = np.flatnonzero(np.isnan(raw) | (raw == np.inf))
    if bad.size:
        raise ValueError(f"log_weights: expected finite numbers or -inf (weight 0), got "
                         f"{raw[bad[0]]} at index {bad[0]} ({bad.size} such entries)")
    finite = np.isfinite(raw)
    if not finite.any():
        raise ValueError(f"log_weights: every entry is -inf (all {raw.size} weights are 0), so "
                         f"they cannot be normalised")
    lw = raw[finite]
    lw = lw - lw.max()
    s = lw.size
    tail = int(np.ceil(min(0.2 * s, 3.0 * np.sqrt(s))))
    khat = -np.inf
    if s > tail:
        cutoff = max(np.sort(lw)[-tail - 1], np.log(np.finfo(float).tiny))
        idx = np.flatnonzero(lw > cutoff)
        if idx.size > 4:
            order = np.argsort(lw[idx])
            exceed = np.exp(lw[idx][order]) - np.exp(cutoff)
            khat, sigma = gpd_fit(exceed)
            if np.isfinite(khat):
                p = (np.arange(idx.size) + 0.5) / idx.size
                smooth = np.minimum(np.log(_gpd_quantile(p, khat, sigma) + np.exp(cutoff)), 0.0)
                lw[idx[order]] = smooth
    out = np.full(raw.size, -np.inf)
    out[finite] = lw - logsumexp(lw)
    return out, float(khat)


@dataclass(frozen=True)
class PSISDraws:
    """Resampled posterior draws of every stick and the diagnostics.

    Attributes
    ----------
    psi : ndarray of shape (M, C, K - 1)
        Draws; the sticks of a draw are independent (resampled separately).
    khat : ndarray of shape (K - 1,)
        Pareto shape of every stick (``nan`` for a stick without data: exact prior draws).
    fallback : ndarray of shape (K - 1,), bool
        Sticks taken from the Gibbs sampler instead.
    """

    psi: np.ndarray
    khat: np.ndarray
    fallback: np.ndarray


def psis_draws(counts: np.ndarray, result: VIResult, n: int, *, rng: np.random.Generator,
               n_proposals: int | None = None, gibbs_burn_in: int = 100) -> PSISDraws:
    r"""Posterior draws by PSIS of the VI fit, with a short Gibbs run for the sticks whose
    :math:`\hat k` exceeds :data:`KHAT_LIMIT` (module docstring).

    Parameters
    ----------
    counts : ndarray of shape (C, K)
    result : VIResult
        The fit (fixed hyper-parameters).
    n : int
        Draws returned (M).
    rng : numpy.random.Generator
    n_proposals : int, optional
        Draws from :math:`q` per stick (default ``2 n``).
    gibbs_burn_in : int
        Burn-in sweeps of the fallback chain (started at the VI means).

    Returns
    -------
    PSISDraws
    """
    from .gibbs import run_gibbs

    data = CountData.from_counts(counts)
    s = 2 * n if n_proposals is None else int(n_proposals)
    c, km1 = result.psi_mean.shape
    site = np.where(data.layout.observed, result.site_precision, 0.0)
    prop = result.prior.sample_posterior(result.scale, result.psi_mean, site, s, rng=rng)
    x = counts[:, :-1].astype(float)
    out = np.empty((n, c, km1))
    khat = np.full(km1, np.nan)
    for k in range(km1):
        obs = data.layout.observed[:, k]
        psi = prop[:, obs, k]
        lw = (x[obs, k] * psi - data.b[obs, k] * np.logaddexp(0.0, psi)
              - data.kappa[obs, k] * psi + 0.5 * site[obs, k] * psi ** 2).sum(axis=1)
        if obs.any():
            lw, khat[k] = pareto_smooth(lw)
            pick = rng.choice(s, size=n, p=np.exp(lw - logsumexp(lw)))
        else:
            pick = np.arange(n)
        out[:, :, k] = prop[pick, :, k]
    fallback = khat > KHAT_LIMIT
    if fallback.any():
        chain = run_gibbs(counts, result.mean, result.prior, n, burn_in=gibbs_burn_in, rng=rng,
                          init_psi=result.psi_mean, scale=result.scale)
        out[:, :, fallback] = chain.psi[:, :, fallback]
    return PSISDraws(out, khat, fallback)


__all__ = ["KHAT_LIMIT", "PSISDraws", "gpd_fit", "pareto_smooth", "psis_draws"]
