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

The Gaussian step never forms ``Sigma^-1`` or ``V_k``. It uses Matheron's rule
(pathwise conditioning) restricted to the observed covariates ``O = {c : b_ck > 0}``
(``omega_ck = 0`` exactly elsewhere, so they carry no likelihood):

.. math::

    f \sim \mathcal N(\mu_k, \Sigma), \quad \varepsilon \sim \mathcal N(0, D^{-1}), \quad
    \psi_{\cdot k} = f + \Sigma_{:O} (\Sigma_{OO} + D^{-1})^{-1}
                     (\kappa_O / \omega_O - f_O - \varepsilon),

``D = diag(omega_O)``, in the well-conditioned form of Rasmussen & Williams (alg. 3.2):
``(Sigma_OO + D^-1)^-1 = D^1/2 B^-1 D^1/2`` with ``B = I + D^1/2 Sigma_OO D^1/2``
(eigenvalues >= 1, so its Cholesky factor is always safe, even for tiny or huge omega).
One Cholesky of ``Sigma`` is computed per run; per sweep, sticks that share the same
observed set are batched into one stacked Cholesky of their ``B`` matrices, and a stick
with no observed covariate is an exact prior draw.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from scipy.linalg.lapack import dpotrf as _potrf
from scipy.linalg.lapack import dpotrs as _potrs

from .._random import as_generator
from .._typing import FloatArray, SeedLike
from .._validation import check_counts, check_covariance
from ..exceptions import JitterWarning
from .polya_gamma import sample_pg
from .stick_breaking import count_statistics, psi_to_pi

try:  # performance only: see _one_blas_thread
    from threadpoolctl import threadpool_limits as _threadpool_limits
except ImportError:  # pragma: no cover
    _threadpool_limits = None


def _one_blas_thread():
    """Limit BLAS to one thread while sampling.

    The sweep factorises many small and medium matrices one after the other; threaded
    OpenBLAS gains nothing there and, on a busy machine, spin-waiting threads made one
    400 x 400 Cholesky 600x slower (1.3 s instead of 2 ms, measured on 2 shared cores).
    """
    if _threadpool_limits is None:
        return contextlib.nullcontext()
    return _threadpool_limits(limits=1, user_api="blas")


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
        """ndarray of shape (M, C, K): stick-breaking images of the samples."""
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


def cholesky_with_jitter(covariance: FloatArray, name: str = "covariance",
                         max_tries: int = 8) -> tuple[np.ndarray, float]:
    """Lower Cholesky factor of ``covariance``, adding escalating diagonal jitter if needed.

    Jitter starts at ``1e-10`` times the mean diagonal and grows tenfold per attempt; a
    :class:`~corrpriors.exceptions.JitterWarning` reports any jitter used.

    Parameters
    ----------
    covariance : ndarray of shape (C, C)
    name : str
        Argument name for messages.
    max_tries : int
        Number of jitter levels tried after the plain factorisation.

    Returns
    -------
    chol : ndarray of shape (C, C)
        Lower-triangular factor of ``covariance + jitter * I``.
    jitter : float
    """
    try:
        return np.linalg.cholesky(covariance), 0.0
    except np.linalg.LinAlgError:
        pass
    base = float(np.mean(np.diag(covariance)))
    base = base if base > 0 else 1.0
    eye = np.eye(covariance.shape[0])
    for i in range(max_tries):
        jitter = base * 10.0 ** (-10 + i)
        try:
            chol = np.linalg.cholesky(covariance + jitter * eye)
        except np.linalg.LinAlgError:
            continue
        warnings.warn(f"{name}: not numerically positive definite; added jitter {jitter:.3g} "
                      "to the diagonal", JitterWarning, stacklevel=3)
        return chol, jitter
    raise ValueError(f"{name}: could not be factorised even with jitter {jitter:.3g}; "
                     "is it positive semi-definite?")


def _solve_spd_stack(B: FloatArray, v: FloatArray) -> FloatArray:
    """Solve ``B[j] u[j] = v[j]`` for a stack of SPD matrices via LAPACK Cholesky.

    ``B`` (g, m, m) is overwritten. A direct ``potrf`` / ``potrs`` loop has far less
    per-call overhead than the batched SciPy wrappers for the many small systems here.
    """
    u = np.empty_like(v)
    for j in range(B.shape[0]):
        c, info = _potrf(B[j], lower=1, clean=0, overwrite_a=1)
        if info != 0:
            raise np.linalg.LinAlgError(f"Cholesky of I + D^1/2 Sigma D^1/2 failed (info={info})")
        u[j], info = _potrs(c, v[j], lower=1)
    return u


@dataclass(frozen=True)
class _StickGroup:
    obs: np.ndarray      # (m,) observed covariate indices
    sticks: np.ndarray   # (g,) stick indices sharing this observed set


def _plan(observed: np.ndarray) -> tuple[_StickGroup, ...]:
    """Group sticks by their set of observed covariates (computed once per run).

    Covariance blocks are sliced per sweep rather than stored: O(m^2) copies are cheap next
    to the O(m^3) factorisations, and storing them would take O(K C^2) memory.
    """
    groups: dict[bytes, list[int]] = {}
    for k in np.flatnonzero(observed.any(axis=0)):
        groups.setdefault(observed[:, k].tobytes(), []).append(int(k))
    out = []
    for ks in groups.values():
        obs = np.flatnonzero(observed[:, ks[0]])
        out.append(_StickGroup(obs, np.array(ks)))
    return tuple(out)


# --------------------------------------------------------------------------- the two blocks
def sample_omega(psi, b, rng: SeedLike) -> FloatArray:
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
    return sample_pg(b, psi, as_generator(rng))


def sample_psi(omega, kappa, mean, covariance, rng: SeedLike, *, chol=None, observed=None,
               _groups=None) -> FloatArray:
    """Draw ``psi_{.k} | omega ~ N(V_k (kappa_k + Sigma^-1 mu_k), V_k)`` for every stick.

    Exact draw by Matheron's rule restricted to the observed covariates (module docstring).

    Parameters
    ----------
    omega : array_like of shape (C, K - 1)
        Polya-Gamma variables; must be positive where ``observed``.
    kappa : array_like of shape (C, K - 1)
        ``x_ck - b_ck / 2``.
    mean : array_like of shape (C, K - 1)
        Prior means ``mu``.
    covariance : ndarray of shape (C, C)
        Prior covariance ``Sigma`` (the jittered one when ``chol`` is given).
    rng : numpy.random.Generator or int
    chol : ndarray of shape (C, C), optional
        Lower Cholesky factor of ``covariance`` (computed when omitted).
    observed : ndarray of shape (C, K - 1) of bool, optional
        Entries with a likelihood term (``b > 0``); default ``omega > 0``.

    Returns
    -------
    psi : ndarray of shape (C, K - 1)
    """
    gen = as_generator(rng)
    omega = np.asarray(omega, dtype=np.float64)
    kappa = np.asarray(kappa, dtype=np.float64)
    mean = np.asarray(mean, dtype=np.float64)
    covariance = np.asarray(covariance, dtype=np.float64)
    if chol is None:
        chol, _ = cholesky_with_jitter(covariance)
    if observed is None:
        observed = omega > 0
    groups = _plan(observed) if _groups is None else _groups

    C, n_sticks = kappa.shape
    f = mean + chol @ gen.standard_normal((C, n_sticks))   # prior path draws
    z = gen.standard_normal((C, n_sticks))                  # sqrt(omega) * eps
    psi = f.copy()
    sqrt_w = np.sqrt(np.where(observed, omega, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        rhs = np.where(observed, kappa / sqrt_w - sqrt_w * f - z, 0.0)  # D^1/2 (kappa/w - f - eps)
    for g in groups:
        ix = np.ix_(g.obs, g.sticks)
        sw = sqrt_w[ix].T                                   # (g, m)
        B = covariance[np.ix_(g.obs, g.obs)][None, :, :] * sw[:, :, None] * sw[:, None, :]
        B[:, np.arange(g.obs.size), np.arange(g.obs.size)] += 1.0
        u = _solve_spd_stack(B, rhs[ix].T)
        psi[:, g.sticks] += covariance[:, g.obs] @ (sw * u).T
    return psi


def gibbs_sweep(psi, b, kappa, mean, covariance, rng: SeedLike, *, chol=None
                ) -> tuple[FloatArray, FloatArray]:
    """One full sweep: ``omega | psi`` then ``psi | omega``. A pure function on arrays.

    Parameters
    ----------
    psi : array_like of shape (C, K - 1)
        Current state.
    b, kappa : array_like of shape (C, K - 1)
        Count statistics (:func:`corrpriors.core.stick_breaking.count_statistics`).
    mean : array_like of shape (C, K - 1)
    covariance : ndarray of shape (C, C)
    rng : numpy.random.Generator or int
    chol : ndarray of shape (C, C), optional
        Lower Cholesky factor of ``covariance``.

    Returns
    -------
    psi : ndarray of shape (C, K - 1)
        New state.
    omega : ndarray of shape (C, K - 1)
        The Polya-Gamma draws used.
    """
    gen = as_generator(rng)
    b = np.asarray(b, dtype=np.float64)
    omega = sample_omega(psi, b, gen)
    return sample_psi(omega, kappa, mean, covariance, gen, chol=chol, observed=b > 0), omega


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


def run_gibbs(counts, mean, covariance, n_samples: int, burn_in: int = 200, thin: int = 1,
              rng: SeedLike = None, init_psi=None) -> GibbsResult:
    """Sample the posterior ``p(psi | counts)`` of the correlated multinomial model.

    Parameters
    ----------
    counts : array_like of shape (C, K)
        Non-negative integer counts ``x_ck``.
    mean : array_like of shape (C, K - 1) or (K - 1,)
        Prior means ``mu`` (a vector is shared by all covariates).
    covariance : array_like of shape (C, C)
        Prior covariance ``Sigma`` (already jittered; escalating jitter with a
        :class:`~corrpriors.exceptions.JitterWarning` is added if it still fails to factorise).
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

    Returns
    -------
    result : GibbsResult
        ``result.psi`` (M, C, K - 1), ``result.pi`` (M, C, K), ``result.probs()`` (C, K).
    """
    gen = as_generator(rng)
    x = check_counts(counts, "counts")
    C, K = x.shape
    cov = check_covariance(covariance, "covariance", size=C)
    mu = _broadcast_param(mean, "mean", (C, K - 1))
    n_samples = _check_int(n_samples, "n_samples", 1)
    burn_in = _check_int(burn_in, "burn_in", 0)
    thin = _check_int(thin, "thin", 1)
    psi = mu.copy() if init_psi is None else _broadcast_param(init_psi, "init_psi", (C, K - 1))

    out = np.empty((n_samples, C, K - 1))
    omega = np.zeros((C, K - 1))
    with _one_blas_thread():
        chol, jitter = cholesky_with_jitter(cov)
        if jitter:
            cov = cov + jitter * np.eye(C)
        b, kappa = count_statistics(x)
        observed = b > 0
        groups = _plan(observed)
        t0 = time.perf_counter()
        kept = 0
        for sweep in range(burn_in + n_samples * thin):
            omega = sample_pg(b, psi, gen)
            psi = sample_psi(omega, kappa, mu, cov, gen, chol=chol, observed=observed, _groups=groups)
            if sweep >= burn_in and (sweep - burn_in) % thin == thin - 1:
                out[kept] = psi
                kept += 1
        elapsed = time.perf_counter() - t0
    return GibbsResult(psi=out, omega_last=omega, psi_last=psi.copy(), n_samples=n_samples,
                       burn_in=burn_in, thin=thin, jitter=jitter, elapsed=elapsed)


__all__ = [
    "GibbsResult",
    "cholesky_with_jitter",
    "effective_sample_size",
    "gibbs_sweep",
    "run_gibbs",
    "sample_omega",
    "sample_psi",
]
