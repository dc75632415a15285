r"""Blocked Gibbs sampler of the Polya-Gamma augmented correlated multinomial model.

Model (Linderman, Johnson & Adams 2015; the paper's eq. 2 and its augmentation):

.. math::

    \psi_{\cdot k} \sim \mathcal N(\mu_k, \Sigma), \qquad
    x_{ck} \mid \psi \sim \mathrm{Bin}(b_{ck}, \sigma(\psi_{ck})), \qquad
    \omega_{ck} \mid \psi \sim PG(b_{ck}, \psi_{ck}),

with ``b_ck = N_c - sum_{j<k} x_cj`` and ``kappa_ck = x_ck - b_ck / 2``. The two blocks are

* ``omega | psi``: independent ``PG(b_ck, psi_ck)`` draws (:func:`sample_omega`);
* ``psi_{.k} | omega``: ``N(V_k (kappa_k + Sigma^-1 mu_k), V_k)`` with
  ``V_k = (Sigma^-1 + diag omega_k)^-1``, independently over sticks (:func:`sample_psi`).

The Gaussian step never forms ``Sigma^-1`` or ``V_k``: it is the prior's joint posterior
sampler (:meth:`corrpriors.core.priors.GaussianPrior.sample_posterior`, shared with the VI
sampler) with sites ``omega`` and pseudo-observations ``kappa / omega``; for a dense prior that
is Matheron's rule (pathwise conditioning) restricted to the observed covariates
``O = {c : b_ck > 0}`` (``omega_ck = 0`` exactly elsewhere, so they carry no likelihood), and a
stick with no observed covariate is an exact prior draw.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from .._random import as_generator
from .._threads import blas_threads
from .._typing import FloatArray, SeedLike
from .._validation import check_counts
from .polya_gamma import sample_pg
from .priors.base import GaussianPrior, check_prior
from .priors.dense import DenseCovariancePrior
from .stick_breaking import count_statistics, psi_to_pi


@dataclass(frozen=True)
class GibbsResult:
    """Posterior samples from :func:`run_gibbs`.

    Attributes
    ----------
    psi : ndarray of shape (M, C, K - 1)
        Retained samples of the stick-breaking parameters.
    omega_last : ndarray of shape (C, K - 1)
        Polya-Gamma variables of the last sweep.
    psi_last : ndarray of shape (C, K - 1)
        State of the chain after the last sweep (pass as ``init_psi`` to continue).
    n_samples, burn_in, thin : int
        Run settings; ``n_sweeps = burn_in + n_samples * thin``.
    jitter : float
        Diagonal jitter added to the covariance before its Cholesky factorisation.
    elapsed : float
        Wall-clock seconds of the sampling loop.
    """

    psi: FloatArray
    omega_last: FloatArray
    psi_last: FloatArray
    n_samples: int
    burn_in: int
    thin: int
    jitter: float = 0.0
    elapsed: float = field(default=0.0, compare=False)

    @property
    def n_sweeps(self) -> int:
        """Total number of Gibbs sweeps run."""
        return self.burn_in + self.n_samples * self.thin

    @cached_property
    def pi(self) -> FloatArray:
        """Ndarray of shape (M, C, K): stick-breaking images of the samples."""
        return psi_to_pi(self.psi)

    def psi_mean(self) -> FloatArray:
        """Posterior mean of psi, ndarray of shape (C, K - 1)."""
        return self.psi.mean(axis=0)

    def probs(self) -> FloatArray:
        """Monte Carlo posterior mean of the probabilities, ndarray of shape (C, K)."""
        return self.pi.mean(axis=0)

    def effective_sample_size(self) -> FloatArray:
        """Batch-means effective sample size of every psi entry, ndarray of shape (C, K - 1).

        PG Gibbs mixes slowly for entries whose data are very imbalanced (e.g. thousands of
        counts in one category and a handful elsewhere); check this before trusting a mean.
        """
        return effective_sample_size(self.psi)


# --------------------------------------------------------------------------- helpers
def effective_sample_size(samples) -> FloatArray:
    """Batch-means estimate of the effective sample size along the first axis.

    With ``M`` draws split into ``a = floor(sqrt(M))`` batches of length ``L``,
    ``ESS = M * var(draws) / (L * var(batch means))`` (capped at ``M``).

    Parameters
    ----------
    samples : array_like of shape (M, ...)

    Returns
    -------
    ess : ndarray of shape (...)
    """
    x = np.asarray(samples, dtype=np.float64)
    M = x.shape[0]
    n_batches = int(np.floor(np.sqrt(M)))
    if n_batches < 2:
        raise ValueError(f"samples: need at least 4 draws for a batch-means estimate, got {M}")
    L = M // n_batches
    batch_means = x[: n_batches * L].reshape((n_batches, L) + x.shape[1:]).mean(axis=1)
    var = x.var(axis=0, ddof=1)
    bvar = batch_means.var(axis=0, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ess = np.where(bvar > 0, M * var / (L * bvar), float(M))
    return np.minimum(ess, float(M))


# --------------------------------------------------------------------------- the two blocks
def sample_omega(psi, b, *, rng: SeedLike) -> FloatArray:
    """Draw ``omega_ck ~ PG(b_ck, psi_ck)`` for every covariate and stick.

    Parameters
    ----------
    psi : array_like of shape (C, K - 1)
    b : array_like of shape (C, K - 1)
        Trials per stick (``b = 0`` gives ``omega = 0``).
    rng : numpy.random.Generator or int

    Returns
    -------
    omega : ndarray of shape (C, K - 1)
    """
    return sample_pg(b, psi, rng=as_generator(rng))


def _as_prior(covariance: Any, n_covariates: int) -> GaussianPrior:
    if isinstance(covariance, GaussianPrior):
        return check_prior(covariance, n_covariates, "covariance")
    return DenseCovariancePrior(covariance, name="covariance", size=n_covariates)


def conditional_psi(prior: GaussianPrior, scale: float, omega: np.ndarray, kappa: np.ndarray,
                    mean: np.ndarray, observed: np.ndarray, *,
                    rng: np.random.Generator) -> FloatArray:
    """One draw of ``psi | omega`` (every stick) from the prior's joint posterior sampler.

    Returns
    -------
    ndarray of shape (C, K - 1)
    """
    site = np.where(observed, omega, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        pseudo = np.where(observed, kappa / np.where(observed, omega, 1.0), 0.0)
    return prior.sample_posterior(scale, mean, site, 1, rng=rng, pseudo=pseudo)[0]


def sample_psi(omega, kappa, mean, covariance, *, rng: SeedLike, observed=None) -> FloatArray:
    """Draw ``psi_{.k} | omega ~ N(V_k (kappa_k + Sigma^-1 mu_k), V_k)`` for every stick.

    Parameters
    ----------
    omega : array_like of shape (C, K - 1)
        Polya-Gamma variables; must be positive where ``observed``.
    kappa : array_like of shape (C, K - 1)
        ``x_ck - b_ck / 2``.
    mean : array_like of shape (C, K - 1)
        Prior means ``mu``.
    covariance : ndarray of shape (C, C) or GaussianPrior
        Prior covariance ``Sigma`` (jittered by the core's one rule), or a prior structure.
    rng : numpy.random.Generator or int
    observed : ndarray of shape (C, K - 1) of bool, optional
        Entries with a likelihood term (``b > 0``); default ``omega > 0``.

    Returns
    -------
    psi : ndarray of shape (C, K - 1)
    """
    omega = np.asarray(omega, dtype=np.float64)
    observed = omega > 0 if observed is None else np.asarray(observed, dtype=bool)
    prior = _as_prior(covariance, omega.shape[0])
    with blas_threads(1):
        return conditional_psi(prior, 1.0, omega, np.asarray(kappa, dtype=np.float64),
                               np.asarray(mean, dtype=np.float64), observed,
                               rng=as_generator(rng))


def gibbs_sweep(psi, b, kappa, mean, covariance, *, rng: SeedLike
                ) -> tuple[FloatArray, FloatArray]:
    """One full sweep: ``omega | psi`` then ``psi | omega``. A pure function on arrays.

    Parameters
    ----------
    psi : array_like of shape (C, K - 1)
        Current state.
    b, kappa : array_like of shape (C, K - 1)
        Count statistics (:func:`corrpriors.core.stick_breaking.count_statistics`).
    mean : array_like of shape (C, K - 1)
    covariance : ndarray of shape (C, C) or GaussianPrior
    rng : numpy.random.Generator or int

    Returns
    -------
    psi : ndarray of shape (C, K - 1)
        New state.
    omega : ndarray of shape (C, K - 1)
        The Polya-Gamma draws used.
    """
    gen = as_generator(rng)
    b = np.asarray(b, dtype=np.float64)
    omega = sample_omega(psi, b, rng=gen)
    return sample_psi(omega, kappa, mean, covariance, rng=gen, observed=b > 0), omega


# --------------------------------------------------------------------------- the sampler
def _check_int(value, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name}: expected an integer >= {minimum}, got {value!r}")
    return int(value)


def _broadcast_param(x, name: str, shape: tuple[int, int]) -> FloatArray:
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a real array of shape (C, K-1) = {shape}") from None
    if arr.ndim > 2 or (arr.ndim >= 1 and arr.shape[-1] != shape[1]) or (arr.ndim == 2 and arr.shape[0] != shape[0]):
        raise ValueError(f"{name}: expected shape (C, K-1) = {shape} or (K-1,) = ({shape[1]},), "
                         f"got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or infinite values")
    return np.broadcast_to(arr, shape).copy()


def run_gibbs(counts, mean, covariance, n_samples: int, burn_in: int = 200, thin: int = 1, *,
              rng: SeedLike, init_psi=None, scale: float = 1.0) -> GibbsResult:
    """Sample the posterior ``p(psi | counts)`` of the correlated multinomial model.

    Parameters
    ----------
    counts : array_like of shape (C, K)
        Non-negative integer counts ``x_ck``.
    mean : array_like of shape (C, K - 1) or (K - 1,)
        Prior means ``mu`` (a vector is shared by all covariates).
    covariance : array_like of shape (C, C) or GaussianPrior
        Prior covariance ``Sigma`` (jittered by the core's one rule,
        :func:`corrpriors.linalg.jittered_cholesky`), or a prior structure (for example a
        fitted model's ``prior_``).
    n_samples : int
        Number M of retained samples.
    burn_in : int, default=200
        Sweeps discarded first.
    thin : int, default=1
        Keep every ``thin``-th sweep after burn-in.
    rng : numpy.random.Generator, int or None
        Source of randomness (``None``: fresh OS entropy).
    init_psi : array_like of shape (C, K - 1), optional
        Initial state (default: the prior mean).
    scale : float, default=1.0
        The prior covariance is ``scale`` times ``covariance``.

    Returns
    -------
    result : GibbsResult
        ``result.psi`` (M, C, K - 1), ``result.pi`` (M, C, K), ``result.probs()`` (C, K).
    """
    gen = as_generator(rng)
    x = check_counts(counts, "counts")
    C, K = x.shape
    prior = _as_prior(covariance, C)
    mu = _broadcast_param(mean, "mean", (C, K - 1))
    n_samples = _check_int(n_samples, "n_samples", 1)
    burn_in = _check_int(burn_in, "burn_in", 0)
    thin = _check_int(thin, "thin", 1)
    psi = mu.copy() if init_psi is None else _broadcast_param(init_psi, "init_psi", (C, K - 1))

    out = np.empty((n_samples, C, K - 1))
    omega = np.zeros((C, K - 1))
    b, kappa = count_statistics(x)
    observed = b > 0
    with blas_threads(1):
        t0 = time.perf_counter()
        kept = 0
        for sweep in range(burn_in + n_samples * thin):
            omega = sample_pg(b, psi, rng=gen)
            psi = conditional_psi(prior, float(scale), omega, kappa, mu, observed, rng=gen)
            if sweep >= burn_in and (sweep - burn_in) % thin == thin - 1:
                out[kept] = psi
                kept += 1
        elapsed = time.perf_counter() - t0
    return GibbsResult(psi=out, omega_last=omega, psi_last=psi.copy(), n_samples=n_samples,
                       burn_in=burn_in, thin=thin, jitter=float(prior.jitter), elapsed=elapsed)


__all__ = [
    "GibbsResult",
    "conditional_psi",
    "effective_sample_size",
    "gibbs_sweep",
    "run_gibbs",
    "sample_omega",
    "sample_psi",
]
