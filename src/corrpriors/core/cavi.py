r"""Coordinate-ascent variational inference (CAVI) for the correlated multinomial model.

Pure functions on arrays. Per stick :math:`k`, :math:`\psi_{\cdot k} \sim N(\mu_k, \Sigma)`,
:math:`x_{ck} \sim Bin(b_{ck}, \sigma(\psi_{ck}))`, :math:`\kappa = x - b/2`, and the mean-field
family :math:`q(\psi_{\cdot k}) = N(\lambda_k, V_k)`, :math:`q(\omega_{ck}) = PG(b_{ck}, w_{ck})`.

**omega step.** :math:`w_{ck} = \sqrt{(V_k)_{cc} + \lambda_{ck}^2}`,
:math:`E[\omega_{ck}] = b_{ck}\tanh(w_{ck}/2)/(2w_{ck})`.

**psi step (fast form).** The paper's update
:math:`V_k = (\Sigma^{-1} + diag E[\omega_k])^{-1}`,
:math:`\lambda_k = V_k(\kappa_k + \Sigma^{-1}\mu_k)` costs :math:`O(C^3)` per stick with
explicit inverses. Here only the observed set
:math:`O_k = \{c: b_{ck} > 0\}` enters (elsewhere :math:`E[\omega_{ck}] = 0`). With
:math:`D = diag E[\omega_k]_O` and :math:`B = I + D^{1/2}\Sigma_{OO}D^{1/2} = LL^\top`
(eigenvalues :math:`\ge 1`, always well conditioned),

.. math::

    \alpha = D^{1/2}B^{-1}(D^{-1/2}\kappa_O - D^{1/2}\mu_O), \qquad
    \lambda_k = \mu_k + \Sigma_{\cdot O}\alpha, \qquad
    diag\,V_k = diag\,\Sigma - colsumsq(L^{-1}D^{1/2}\Sigma_{O\cdot}).

Inside the loop only the observed entries of :math:`diag\,V_k` are needed (for :math:`w`), and
:math:`V_{OO} = D^{-1/2}(I - B^{-1})D^{-1/2}` gives them from :math:`diag(B^{-1}) =
colsumsq(L^{-1})` at :math:`|O|^3/3` flops; the ELBO's :math:`tr(DV_k) = |O| - tr(B^{-1})`
comes from the same numbers. The full diagonal (all C covariates) is computed once at the end
with the :math:`colsumsq` form.

A stick with empty :math:`O_k` is exactly the prior. Sticks are grouped by :math:`|O_k|` and
padded (padded rows have :math:`D = 0`, so their rows of :math:`B` are the identity); each group
is factorised with one batched Cholesky; the triangular inverses/solves loop over the group's
matrices (scipy's batched ``solve_triangular`` is an order of magnitude slower than the 2-D
call). BLAS runs single-threaded during the fit (:func:`blas_threads_for`).
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from dataclasses import dataclass, replace

import numpy as np
from scipy.linalg import lapack, solve_triangular

from .._typing import FloatArray
from ..exceptions import JitterWarning
from . import hyper_em
from .elbo import elbo_value, log_binomial_coefficients
from .polya_gamma import _tanh_over_x
from .results import VIResult
from .stick_breaking import count_statistics

try:  # performance only: multi-threaded BLAS on many small matrices is slow (and pathological
    # under CPU contention, measured 30x); fall back silently if threadpoolctl is missing.
    from threadpoolctl import ThreadpoolController as _ThreadpoolController
except ImportError:  # pragma: no cover
    _ThreadpoolController = None

_potrf = lapack.dpotrf
_trtri = lapack.dtrtri

#: Factorisations below this size run with single-threaded BLAS. Measured on 2 cores with
#: OpenBLAS 0.3.31: potrf + trtri of a 900 x 900 matrix took 0.036 s with one thread and
#: 0.07-1.8 s with two under CPU contention (busy-waiting threads), and multi-threading never
#: paid off for the per-stick factorisations, so by default the fit is always single-threaded.
SINGLE_THREAD_BELOW = 2 ** 62


@functools.lru_cache(maxsize=1)
def _controller():
    """One ThreadpoolController per process: discovering the BLAS libraries costs ~1.5 ms, more
    than a small fit's psi step, so it is done once and reused."""
    return _ThreadpoolController()


def blas_threads_for(size: int):
    """Context manager limiting BLAS to one thread for matrices smaller than
    :data:`SINGLE_THREAD_BELOW` (by default: always)."""
    if _ThreadpoolController is None or size >= SINGLE_THREAD_BELOW:
        return contextlib.nullcontext()
    return _controller().limit(limits=1, user_api="blas")


# ----------------------------------------------------------------------------------------------
# Polya-Gamma mean and the omega step
# ----------------------------------------------------------------------------------------------


def pg_expectation(b: np.ndarray, w: np.ndarray) -> FloatArray:
    r""":math:`E[\omega]` for :math:`\omega \sim PG(b, w)`: ``b tanh(w/2) / (2 w)``.

    The unvalidated hot-path twin of :func:`corrpriors.core.polya_gamma.pg_mean` (same stable
    ``tanh(x)/x``, a series near 0; finite for huge ``w``).

    Parameters
    ----------
    b : ndarray of shape (...)
    w : ndarray of shape (...)

    Returns
    -------
    ndarray of shape (...)
    """
    return 0.25 * np.asarray(b, dtype=float) * _tanh_over_x(0.5 * np.asarray(w, dtype=float))


def omega_step(b: np.ndarray, psi_mean: np.ndarray, psi_var: np.ndarray,
               observed: np.ndarray) -> tuple[FloatArray, FloatArray]:
    """Update of :math:`q(\\omega)` given :math:`q(\\psi)`.

    Parameters
    ----------
    b : ndarray of shape (C, K - 1)
    psi_mean, psi_var : ndarray of shape (C, K - 1)
        Valid at least on ``observed``.
    observed : ndarray of shape (C, K - 1), bool
        ``b > 0``.

    Returns
    -------
    w : ndarray of shape (C, K - 1)
        Tilts (zero outside ``observed``).
    omega_mean : ndarray of shape (C, K - 1)
        :math:`E[\\omega]` (zero outside ``observed``).
    """
    w = np.where(observed, np.sqrt(np.maximum(psi_var, 0.0) + psi_mean ** 2), 0.0)
    return w, np.where(observed, pg_expectation(b, w), 0.0)


# ----------------------------------------------------------------------------------------------
# Jitter
# ----------------------------------------------------------------------------------------------


def jittered_covariance(cov: np.ndarray, min_eigenvalue: float | None = None,
                        name: str = "covariance",
                        stacklevel: int = 2) -> tuple[FloatArray, float]:
    """Add the smallest escalating diagonal jitter that makes ``cov`` Cholesky-factorisable.

    ``eps`` starts at ``1e-10 * mean(diag)`` and grows by x10. A :class:`JitterWarning` is
    issued when ``eps > 1e-8 * mean(diag)`` or when the matrix is numerically rank deficient
    (smallest eigenvalue below ``100 * eps``, so the jitter materially changes it).

    Parameters
    ----------
    cov : ndarray of shape (C, C)
        Symmetric PSD (validated by the caller).
    min_eigenvalue : float, optional
        Smallest eigenvalue of ``cov`` if known.

    Returns
    -------
    cov_jittered : ndarray of shape (C, C)
        ``cov + eps * I``: use this matrix everywhere.
    eps : float
    """
    c = cov.shape[0]
    mean_diag = float(np.mean(np.diag(cov)))
    if mean_diag <= 0:
        raise ValueError(f"{name}: diagonal must be positive, mean diagonal is {mean_diag:g}")
    eps = 1e-10 * mean_diag
    eye = np.eye(c)
    for _ in range(14):
        try:
            np.linalg.cholesky(cov + eps * eye)
            break
        except np.linalg.LinAlgError:
            eps *= 10.0
    else:  # pragma: no cover - validated PSD matrices never get here
        raise ValueError(f"{name}: could not be factorised even with jitter {eps:g}")
    if eps > 1e-8 * mean_diag or (min_eigenvalue is not None and min_eigenvalue < 100.0 * eps):
        warnings.warn(
            f"{name} is (numerically) rank deficient; added diagonal jitter {eps:.3g} "
            f"({eps / mean_diag:.3g} x mean diagonal). The fit uses the jittered matrix.",
            JitterWarning, stacklevel=stacklevel + 1)
    return cov + eps * eye, eps


# ----------------------------------------------------------------------------------------------
# Layout of the observed sets and the psi step
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StickGroup:
    """Sticks factorised together in one batch.

    Attributes
    ----------
    sticks : ndarray of shape (G,)
        Stick indices (0-based, into the K - 1 sticks).
    index : ndarray of shape (G, n)
        Covariates of each stick's observed set, padded with 0.
    mask : ndarray of shape (G, n), bool
        True on real (non-padded) entries.
    """

    sticks: np.ndarray
    index: np.ndarray
    mask: np.ndarray

    @property
    def sizes(self) -> np.ndarray:
        """ndarray of shape (G,): ``|O_k|`` of each stick."""
        return self.mask.sum(axis=1)

    # Index arrays used by every psi step, computed once per layout (cached_property writes
    # to the instance dict, which a frozen dataclass allows).
    @functools.cached_property
    def size_list(self) -> tuple:
        """tuple of int: ``|O_k|`` of each stick."""
        return tuple(int(m) for m in self.sizes)

    @functools.cached_property
    def cols(self) -> np.ndarray:
        """ndarray of shape (G, n): the stick index of every entry."""
        return np.ascontiguousarray(np.broadcast_to(self.sticks[:, None], self.index.shape))

    @functools.cached_property
    def real(self) -> tuple:
        """(rows, cols, positions) of the real entries: covariate and stick indices, and flat
        positions in the padded (G, n) arrays."""
        return self.index[self.mask], self.cols[self.mask], np.flatnonzero(self.mask)


@dataclass(frozen=True)
class StickLayout:
    """Grouping of the non-empty sticks by the size of their observed sets.

    Attributes
    ----------
    observed : ndarray of shape (C, K - 1), bool
        ``b > 0``.
    groups : tuple of StickGroup
    """

    observed: np.ndarray
    groups: tuple


def build_layout(observed: np.ndarray, max_waste: float = 0.8,
                 max_elements: int = 2 ** 21) -> StickLayout:
    """Group sticks with similar ``|O_k|`` (sizes within ``max_waste`` of the group's largest).

    Parameters
    ----------
    observed : ndarray of shape (C, K - 1), bool
    max_waste : float
        A stick joins a group if its size is at least ``max_waste`` times the group's size.
    max_elements : int
        Cap on ``G * n * n`` per group (memory of one batched array).

    Returns
    -------
    StickLayout
    """
    observed = np.asarray(observed, dtype=bool)
    sizes = observed.sum(axis=0)
    order = [int(k) for k in np.argsort(-sizes, kind="stable") if sizes[k] > 0]
    groups = []
    i = 0
    while i < len(order):
        n = int(sizes[order[i]])
        j = i + 1
        while (j < len(order) and sizes[order[j]] >= max_waste * n
               and (j - i + 1) * n * n <= max_elements):
            j += 1
        sticks = np.array(order[i:j], dtype=np.intp)
        index = np.zeros((len(sticks), n), dtype=np.intp)
        mask = np.zeros((len(sticks), n), dtype=bool)
        for g, k in enumerate(sticks):
            rows = np.flatnonzero(observed[:, k])
            index[g, :len(rows)] = rows
            mask[g, :len(rows)] = True
        groups.append(StickGroup(sticks, index, mask))
        i = j
    return StickLayout(observed, tuple(groups))


@dataclass(frozen=True)
class PsiStep:
    """Output of :func:`psi_step`.

    Attributes
    ----------
    psi_mean : ndarray of shape (C, K - 1)
        :math:`\\lambda`.
    psi_var : ndarray of shape (C, K - 1)
        :math:`diag V_k`; exact on the observed entries, and everywhere if ``full=True``
        (otherwise the prior variance off the observed sets).
    alpha : ndarray of shape (C, K - 1)
        :math:`\\Sigma^{-1}(\\lambda_k - \\mu_k)` (zero off the observed sets).
    trace_dv : ndarray of shape (K - 1,)
        :math:`tr(D_k V_k) = C - tr(\\Sigma^{-1}V_k)`.
    quad : ndarray of shape (K - 1,)
        :math:`(\\lambda_k-\\mu_k)^\\top\\Sigma^{-1}(\\lambda_k-\\mu_k)`.
    logdet_b : ndarray of shape (K - 1,)
        :math:`\\log|B_k| = \\log|\\Sigma| - \\log|V_k|`.
    reduction : ndarray of shape (C, C) or None
        With ``full=True``: :math:`\\sum_k (\\Sigma - V_k)`.
    linvs : list of ndarray of shape (G, n, n), or None
        Without ``full``: every group's :math:`L^{-1}` (padded), for
        :func:`_fill_unobserved_var`. They may live in the caller's workspace, so they are
        valid only until the next psi step with that workspace.
    """

    psi_mean: np.ndarray
    psi_var: np.ndarray
    alpha: np.ndarray
    trace_dv: np.ndarray
    quad: np.ndarray
    logdet_b: np.ndarray
    reduction: np.ndarray | None
    linvs: list | None = None


def gather_blocks(layout: StickLayout, base: np.ndarray,
                  max_bytes: float = 256e6) -> list[np.ndarray] | None:
    r"""Pre-gather every group's :math:`\tilde\Sigma_{OO}` blocks (reused while the base is fixed).

    Parameters
    ----------
    layout : StickLayout
    base : ndarray of shape (C, C)
    max_bytes : float
        Return ``None`` (gather on the fly) when the blocks would need more memory.

    Returns
    -------
    list of ndarray of shape (G, n, n), or None
    """
    total = sum(grp.index.size * grp.index.shape[1] for grp in layout.groups) * 8
    if total > max_bytes:
        return None
    return [base[grp.index[:, :, None], grp.index[:, None, :]] for grp in layout.groups]


def psi_step(layout: StickLayout, sigma: np.ndarray, mu: np.ndarray, kappa: np.ndarray,
             omega_mean: np.ndarray, full: bool = False, need_reduction: bool = False,
             blocks: list[np.ndarray] | None = None, block_scale: float = 1.0,
             workspace: list[np.ndarray] | None = None) -> PsiStep:
    r"""Update of :math:`q(\psi)` given :math:`q(\omega)`, in the fast form.

    Parameters
    ----------
    layout : StickLayout
    sigma : ndarray of shape (C, C)
        Prior covariance (jittered, scaled).
    mu : ndarray of shape (C, K - 1)
        Prior means.
    kappa : ndarray of shape (C, K - 1)
    omega_mean : ndarray of shape (C, K - 1)
        :math:`E[\omega]`, positive on the observed entries.
    full : bool
        Also compute the marginal variances of every covariate (not only the observed ones);
        cost :math:`O(|O_k|^2 C)` per stick.
    need_reduction : bool
        With ``full``: also accumulate :math:`\sum_k(\Sigma - V_k)` (:math:`O(|O_k| C^2)`
        per stick), needed by the kernel M-step.
    blocks : list of ndarray or None
        :func:`gather_blocks` of the base covariance, with ``sigma = block_scale * base``.
    block_scale : float
    workspace : list of ndarray or None
        Scratch arrays shaped like ``blocks`` (reused across iterations to avoid allocations).

    Returns
    -------
    PsiStep
    """
    c, km1 = mu.shape
    diag_sigma = np.diag(sigma).copy()
    alpha = np.zeros((c, km1))
    var = np.repeat(diag_sigma[:, None], km1, axis=1)
    trace_dv = np.zeros(km1)
    logdet_b = np.zeros(km1)
    reduction = np.zeros((c, c)) if (full and need_reduction) else None
    linvs = None if full else []
    for j, grp in enumerate(layout.groups):
        sticks, index, mask = grp.sticks, grp.index, grp.mask
        g, n = index.shape
        cols = grp.cols
        e = omega_mean[index, cols]
        e[~mask] = 0.0
        d = np.sqrt(e)
        if full:
            if blocks is not None:
                ds = d * np.sqrt(block_scale)
                bmat = blocks[j] * ds[:, :, None]
            else:
                ds = d
                bmat = sigma[index[:, :, None], index[:, None, :]] * ds[:, :, None]
            bmat *= ds[:, None, :]
            bmat.reshape(g, -1)[:, ::n + 1] += 1.0
            chol = np.linalg.cholesky(bmat)
            logdet_b[sticks] = 2.0 * np.sum(np.log(np.diagonal(chol, axis1=1, axis2=2)), axis=1)
        else:
            if blocks is not None:
                work = workspace[j] if workspace is not None else np.empty_like(blocks[j])
                ds = d * np.sqrt(block_scale)
                np.multiply(blocks[j], ds[:, :, None], out=work)
                work *= ds[:, None, :]
            else:
                work = sigma[index[:, :, None], index[:, None, :]]
                work *= d[:, :, None]
                work *= d[:, None, :]
            work.reshape(g, -1)[:, ::n + 1] += 1.0
            # B is symmetric, so work[i].T (F-contiguous) is B_i for LAPACK: potrf leaves the
            # upper factor U = L^T (other triangle zeroed), trtri overwrites it with
            # U^-1 = L^-T; afterwards work[i] (C order) holds L^-1. No allocations.
            # Padded rows/columns are already the identity, so only the leading
            # |O_k| x |O_k| block is factorised (no flops wasted on padding).
            wt = work.transpose(0, 2, 1)
            for i, m in enumerate(grp.size_list):
                if m == n:
                    _, info = _potrf(wt[i], lower=0, clean=1, overwrite_a=1)
                    _trtri(wt[i], lower=0, overwrite_c=1)
                else:
                    fac, info = _potrf(wt[i][:m, :m], lower=0, clean=1)
                    wt[i][:m, :m] = _trtri(fac, lower=0, overwrite_c=1)[0]
                if info != 0:  # pragma: no cover - B has eigenvalues >= 1
                    raise np.linalg.LinAlgError(f"Cholesky of B failed (info={info})")
            linv = work
            logdet_b[sticks] = -2.0 * np.sum(np.log(np.diagonal(linv, axis1=1, axis2=2)), axis=1)
        d_safe = np.where(mask, d, 1.0)
        rhs = np.where(mask, kappa[index, cols] / d_safe - d * mu[index, cols], 0.0)
        if full:
            u = np.empty((g, n))
            v_obs = np.empty((g, n))
            for i in range(g):
                li = chol[i]
                z = solve_triangular(li, rhs[i], lower=True, check_finite=False)
                u[i] = solve_triangular(li, z, lower=True, trans="T", check_finite=False)
                h = solve_triangular(li, d[i][:, None] * sigma[index[i], :], lower=True,
                                     check_finite=False)
                vfull = diag_sigma - np.einsum("ij,ij->j", h, h)
                var[:, sticks[i]] = vfull
                v_obs[i] = vfull[index[i]]
                if reduction is not None:
                    reduction += h.T @ h
            one_minus = e * v_obs
        else:
            # diag(B^-1) = colsumsq(L^-1) and V_OO = D^-1/2 (I - B^-1) D^-1/2 give the
            # observed entries of diag V_k (absolute error ~1e-14 / E[omega]); the others
            # come from _fill_unobserved_var with the same factors.
            # batched gemv (BLAS) instead of einsum: u = L^-T (L^-1 rhs)
            z = np.matmul(linv, rhs[:, :, None])
            u = np.matmul(linv.transpose(0, 2, 1), z)[:, :, 0]
            one_minus = 1.0 - np.einsum("gij,gij->gj", linv, linv)
            v_obs = np.maximum(one_minus, 0.0) / np.where(mask, e, 1.0)
            linvs.append(linv)
        a = d * u
        trace_dv[sticks] = np.sum(np.where(mask, one_minus, 0.0), axis=1)
        rows, cc, pos = grp.real
        alpha[rows, cc] = a.ravel()[pos]
        var[rows, cc] = v_obs.ravel()[pos]
    delta = sigma @ alpha
    psi_mean = mu + delta
    quad = np.sum(alpha * delta, axis=0)
    return PsiStep(psi_mean, np.maximum(var, 0.0), alpha, trace_dv, quad, logdet_b, reduction,
                   linvs)


def _fill_unobserved_var(layout: StickLayout, sigma: np.ndarray, omega_mean: np.ndarray,
                         linvs: list[np.ndarray], psi_var: np.ndarray) -> FloatArray:
    """Marginal variances off the observed sets from the factors of the last psi step.

    ``linvs`` are the per-group :math:`L^{-1}` of that psi step (:attr:`PsiStep.linvs`, for the
    same ``layout``, ``sigma`` and ``omega_mean``); the observed entries of ``psi_var`` are
    kept. :math:`diag\\,V_k = diag\\,\\Sigma - colsumsq(L^{-1}D^{1/2}\\Sigma_{O U})` on each
    stick's unobserved covariates :math:`U_k` only (:math:`O(|O_k|^2 |U_k|)` per stick; the
    observed sets of grid data are large, so :math:`U_k` is small).
    """
    var = psi_var.copy()
    diag_sigma = np.diag(sigma)
    observed = layout.observed
    for grp, linv in zip(layout.groups, linvs):
        for i, (k, m) in enumerate(zip(grp.sticks, grp.size_list)):
            unobs = np.flatnonzero(~observed[:, k])
            if unobs.size == 0:
                continue
            rows = grp.index[i, :m]
            d = np.sqrt(omega_mean[rows, k])
            h = linv[i, :m, :m] @ (d[:, None] * sigma[np.ix_(rows, unobs)])
            var[unobs, k] = np.maximum(diag_sigma[unobs] - np.einsum("ij,ij->j", h, h), 0.0)
    return var


# ----------------------------------------------------------------------------------------------
# The driver: CAVI with optional (MAP-)EM over scale, constant means and kernel parameters
# ----------------------------------------------------------------------------------------------


def run_cavi(counts: np.ndarray, base_covariance: np.ndarray, mean: np.ndarray,
             **kwargs) -> VIResult:
    """Run CAVI with optional (MAP-)EM; see :func:`_run_cavi` for the parameters.

    Uses single-threaded BLAS while the observed sets are small (many small factorisations
    parallelise badly).
    """
    b, _ = count_statistics(np.asarray(counts, dtype=float))
    largest = int((b > 0).sum(axis=0).max()) if b.size else 0
    with blas_threads_for(largest):
        return _run_cavi(counts, base_covariance, mean, **kwargs)


@dataclass
class _Evaluation:
    """One CAVI sweep from a point (tilts, scale, means): the psi step, the omega step and the
    objective at the resulting :math:`q`."""

    step: PsiStep
    site_precision: np.ndarray  # E[omega] that defined q(psi), (C, K - 1)
    theta: float
    mu: np.ndarray  # (C, K - 1)
    w: np.ndarray  # optimal tilts for q(psi), (C, K - 1)
    elbo: float
    objective: float


class _Anderson:
    """Anderson acceleration (type II, memory ``m``) of a fixed-point map :math:`x \\mapsto F(x)`.

    ``propose(x, fx)`` returns :math:`x + g - (\\Delta X + \\Delta G)\\gamma` with
    :math:`g = F(x) - x` and :math:`\\gamma` the least-squares fit of :math:`g` by the recent
    residual differences :math:`\\Delta G` (Walker & Ni 2011); with no history it is ``fx``.
    """

    def __init__(self, memory: int):
        self.memory = int(memory)
        self.xs: list[np.ndarray] = []
        self.gs: list[np.ndarray] = []

    def reset(self) -> None:
        self.xs.clear()
        self.gs.clear()

    def propose(self, x: np.ndarray, fx: np.ndarray) -> np.ndarray:
        g = fx - x
        self.xs.append(x)
        self.gs.append(g)
        if len(self.xs) > self.memory + 1:
            self.xs.pop(0)
            self.gs.pop(0)
        if len(self.xs) < 2:
            return fx
        dx = np.diff(np.asarray(self.xs), axis=0).T  # (n, m)
        dg = np.diff(np.asarray(self.gs), axis=0).T
        gamma = np.linalg.lstsq(dg, g, rcond=1e-10)[0]
        out = x + g - (dx + dg) @ gamma
        return out if np.all(np.isfinite(out)) else fx


def _run_cavi(counts: np.ndarray, base_covariance: np.ndarray, mean: np.ndarray, *,
              jitter: float = 0.0, scale: float = 1.0, learn_scale: bool = False,
              learn_mean: str | None = None, scale_prior: tuple[float, float] | None = None,
              mean_prior_mean: np.ndarray | None = None, mean_prior_std: float | None = None,
              bound_kernel=None, learn_kernel: bool = False, max_iter: int = 1000,
              tol: float = 1e-8, init: VIResult | None = None, verbose: bool = False,
              callback=None, acceleration: str | None = "anderson",
              anderson_memory: int = 5) -> VIResult:
    """Run CAVI (psi step, omega step, objective, M-step) until the objective stalls.

    One plain iteration is the map :math:`F`: from tilts :math:`w` (equivalently
    :math:`E[\\omega]`), scale :math:`\\theta` and prior means :math:`\\mu`, the psi step
    gives :math:`q(\\psi)`, the omega step the optimal tilts for it, then the M-step the new
    hyper-parameters. Every quantity is a coordinate-wise maximiser, so the objective (ELBO
    plus log hyper-prior) never decreases along the plain iteration, and its fixed points are
    the stationary points of the paper's updates.

    With ``acceleration="anderson"`` the same map is iterated with Anderson acceleration on
    :math:`x = (w_{observed}, \\log\\theta, \\mu_{constant})` (the learned parts only). An
    accelerated point is a legitimate variational point too (any tilts define a
    :math:`q(\\omega)`, any :math:`\\theta > 0` a prior), so its objective is exact; a point
    whose objective is below the last accepted one is rejected and the plain step taken
    instead (which cannot decrease it). So the recorded trace stays monotone and the fit
    converges to the same fixed point in fewer psi steps (about half on grid transition data).
    Kernel learning (``learn_kernel``) and ``learn_mean="full"`` always use the plain map.

    Parameters
    ----------
    counts : ndarray of shape (C, K)
        Validated counts.
    base_covariance : ndarray of shape (C, C)
        The jittered base covariance :math:`\\tilde\\Sigma + \\epsilon I`; the prior covariance
        is ``scale * base_covariance``.
    mean : ndarray of shape (C, K - 1)
        Initial prior means.
    jitter : float
        :math:`\\epsilon` (recorded, and re-added when a kernel M-step rebuilds the Gram matrix).
    scale : float
        Initial :math:`\\theta`.
    learn_scale : bool
    learn_mean : {None, "constant", "full"}
    scale_prior : (shape, rate) or None
    mean_prior_mean : ndarray of shape (K - 1,) or None
    mean_prior_std : float or None
    bound_kernel : BoundKernel or None
        Needed with ``learn_kernel``.
    learn_kernel : bool
    max_iter : int
        Maximum number of psi steps (rejected accelerated steps included).
    tol : float
        Stop when the relative change of the objective between accepted iterations is at
        most ``tol``.
    init : VIResult or None
        Warm start: the previous tilts ``w``, scale and means.
    verbose : bool
    callback : callable or None
        Called as ``callback(iteration, objective)`` after every accepted iteration.
    acceleration : {"anderson", None}
    anderson_memory : int
        Number of past differences used by Anderson acceleration.

    Returns
    -------
    VIResult
    """
    if acceleration not in (None, "anderson"):
        raise ValueError(f"acceleration: expected 'anderson' or None, got {acceleration!r}")
    if not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise ValueError(f"max_iter: expected a positive integer, got {max_iter!r}")
    counts = np.asarray(counts, dtype=float)
    c, k = counts.shape
    km1 = k - 1
    b, kappa = count_statistics(counts)
    observed = b > 0
    layout = build_layout(observed)
    log_binom = log_binomial_coefficients(b, counts[:, :-1])
    base = np.asarray(base_covariance, dtype=float)
    mu = np.array(mean, dtype=float, copy=True)
    theta = float(scale)
    if init is not None:
        if learn_scale:
            theta = float(init.scale)
        if learn_mean is not None:
            mu = np.array(init.mean, dtype=float, copy=True)
        if learn_kernel and init.kernel_theta is not None and bound_kernel is not None:
            bound_kernel = bound_kernel.with_theta(np.asarray(init.kernel_theta))
            base = bound_kernel.gram() + jitter * np.eye(c)
        w = np.where(observed, init.w, 0.0)
    else:
        w = np.where(observed, np.sqrt(theta * np.diag(base)[:, None] + mu ** 2), 0.0)

    ones_solve = np.zeros(c)  # Sigma_tilde^-1 1, for the constant-mean update

    def _ones_solve(base_mat):
        ch = np.linalg.cholesky(base_mat)
        z = solve_triangular(ch, np.ones(c), lower=True, check_finite=False)
        return solve_triangular(ch, z, lower=True, trans="T", check_finite=False)

    if learn_mean == "constant":
        ones_solve = _ones_solve(base)
        mu = np.repeat(mu.mean(axis=0)[None, :], c, axis=0)

    def _log_hyper(th, mu_):
        out = 0.0
        if learn_scale and scale_prior is not None:
            out += hyper_em.log_gamma_density(th, scale_prior)
        if learn_mean == "constant" and mean_prior_std is not None:
            out += hyper_em.log_normal_density(mu_[0], mean_prior_mean, mean_prior_std)
        return out

    blocks = None if learn_kernel else gather_blocks(layout, base)
    workspace = None if blocks is None else [np.empty_like(x) for x in blocks]

    def evaluate(w_in, theta_in, mu_in) -> _Evaluation:
        site = np.where(observed, pg_expectation(b, w_in), 0.0)
        st = psi_step(layout, theta_in * base, mu_in, kappa, site, full=learn_kernel,
                      need_reduction=learn_kernel, blocks=blocks, block_scale=theta_in,
                      workspace=workspace)
        w_out, _ = omega_step(b, st.psi_mean, st.psi_var, observed)
        elbo = elbo_value(b, kappa, st.psi_mean, w_out, log_binom, st.trace_dv, st.quad,
                          st.logdet_b)
        return _Evaluation(st, site, theta_in, mu_in, w_out, elbo,
                           elbo + _log_hyper(theta_in, mu_in))

    def m_step(ev: _Evaluation):
        """Hyper-parameters maximising the objective for the q of ``ev``."""
        nonlocal bound_kernel, base, ones_solve
        th, mu_ = ev.theta, ev.mu
        st = ev.step
        if learn_scale:
            stat = hyper_em.scale_statistic(th, c, st.trace_dv, st.quad)
            th = hyper_em.update_scale(stat, c, km1, scale_prior)
        if learn_kernel and bound_kernel is not None:
            dmu = mu_ - st.psi_mean
            m_stat = km1 * ev.theta * base - st.reduction + dmu @ dmu.T
            bound_kernel, _, _ = hyper_em.optimise_kernel(bound_kernel, th, jitter, m_stat, km1)
            base = bound_kernel.gram() + jitter * np.eye(c)
            if learn_mean == "constant":
                ones_solve = _ones_solve(base)
        if learn_mean == "constant":
            m_new = hyper_em.update_constant_mean(ones_solve / th, st.psi_mean,
                                                  mean_prior_mean, mean_prior_std)
            mu_ = np.repeat(m_new[None, :], c, axis=0)
        elif learn_mean == "full":
            mu_ = st.psi_mean.copy()
        return th, mu_

    accelerate = (acceleration == "anderson" and not learn_kernel and learn_mean != "full")

    def pack(w_, th, mu_):
        parts = [w_[observed]]
        if learn_scale:
            parts.append([np.log(th)])
        if learn_mean == "constant":
            parts.append(mu_[0])
        return np.concatenate(parts)

    n_obs = int(observed.sum())

    def unpack(x):
        w_ = np.zeros((c, km1))
        w_[observed] = x[:n_obs]
        pos = n_obs
        th = theta
        if learn_scale:
            th = float(np.exp(np.clip(x[pos], -700.0, 700.0)))
            pos += 1
        mu_ = mu
        if learn_mean == "constant":
            mu_ = np.repeat(x[pos:pos + km1][None, :], c, axis=0)
        return w_, th, mu_

    anderson = _Anderson(anderson_memory) if accelerate else None
    elbos, objectives = [], []
    converged = False
    cur = evaluate(w, theta, mu)
    n_steps = 1
    last_eval = cur  # the evaluation whose factors sit in the workspace
    while True:
        elbos.append(cur.elbo)
        objectives.append(cur.objective)
        it = len(objectives) - 1
        if verbose:
            print(f"iter {it + 1:5d}  elbo {cur.elbo:.10g}  objective {cur.objective:.10g}  "
                  f"scale {cur.theta:.4g}")
        if callback is not None:
            callback(it, cur.objective)
        if it > 0 and abs(cur.objective - objectives[-2]) <= tol * abs(cur.objective):
            converged = True
            break
        if n_steps >= max_iter:
            break
        th_next, mu_next = m_step(cur)
        if anderson is None:
            cur = last_eval = evaluate(cur.w, th_next, mu_next)
            n_steps += 1
            continue
        prop = anderson.propose(pack(w, cur.theta, cur.mu), pack(cur.w, th_next, mu_next))
        w_prop, th_prop, mu_prop = unpack(prop)
        trial = last_eval = evaluate(w_prop, th_prop, mu_prop)
        n_steps += 1
        if trial.objective >= cur.objective:
            w, cur = w_prop, trial
            continue
        if n_steps >= max_iter:  # out of budget on a rejected step: keep cur
            break
        anderson.reset()
        w = cur.w
        cur = last_eval = evaluate(cur.w, th_next, mu_next)
        n_steps += 1

    theta, mu = cur.theta, cur.mu
    step = cur.step
    # Final full marginal variances (same inputs as the accepted psi step, so the same q).
    sigma = theta * base
    if not learn_kernel:  # (with learn_kernel the full psi step already has every variance)
        if last_eval is not cur:  # a rejected step has overwritten the workspace: redo it
            step = psi_step(layout, sigma, mu, kappa, cur.site_precision, blocks=blocks,
                            block_scale=theta, workspace=workspace)
        step = replace(
            step, psi_var=_fill_unobserved_var(layout, sigma, cur.site_precision, step.linvs,
                                               step.psi_var))
    w_full = np.sqrt(step.psi_var + step.psi_mean ** 2)
    omega_final = np.where(observed, pg_expectation(b, w_full), 0.0)
    kernel_theta = None if bound_kernel is None else np.asarray(bound_kernel.theta, dtype=float)
    return VIResult(
        psi_mean=step.psi_mean, psi_var=step.psi_var, w=w_full, omega_mean=omega_final,
        site_precision=cur.site_precision,
        mean=mu, covariance=base, scale=theta, kernel_theta=kernel_theta,
        elbo=float(elbos[-1]), objective=float(objectives[-1]),
        elbo_trace=np.asarray(elbos), objective_trace=np.asarray(objectives),
        n_iter=len(elbos), converged=converged, jitter=float(jitter), n_psi_steps=n_steps)


# ----------------------------------------------------------------------------------------------
# Joint draws from q(psi)
# ----------------------------------------------------------------------------------------------


def sample_q_psi(sigma: np.ndarray, psi_mean: np.ndarray, site_precision: np.ndarray,
                 n_samples: int, *, rng: np.random.Generator) -> FloatArray:
    r"""Joint draws of every stick :math:`\psi_{\cdot k} \sim N(\lambda_k, V_k)` across covariates.

    Matheron's rule (pathwise conditioning) on the pseudo-observation form of :math:`q`:
    with :math:`f \sim N(0, \Sigma)` and :math:`\varepsilon \sim N(0, I_{|O|})`,

    .. math::

        \psi_{\cdot k} = \lambda_k + f - \Sigma_{\cdot O}D^{1/2}B^{-1}(D^{1/2}f_O + \varepsilon)

    has covariance exactly :math:`V_k = (\Sigma^{-1} + D)^{-1}`. Cost: one Cholesky of
    :math:`\Sigma` (:math:`C^3/3`), then per stick :math:`O(|O_k|^3 + C|O_k|M + C^2 M)` for
    ``M = n_samples``; :math:`V_k` itself is never formed.

    Parameters
    ----------
    sigma : ndarray of shape (C, C)
        Prior covariance (jittered, scaled), positive definite.
    psi_mean : ndarray of shape (C, K - 1)
    site_precision : ndarray of shape (C, K - 1)
        :math:`E[\omega]` defining :math:`V_k` (zero off the observed sets).
    n_samples : int
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of shape (M, C, K - 1)
    """
    c, km1 = psi_mean.shape
    with blas_threads_for(c):
        return _sample_q_psi(sigma, psi_mean, site_precision, n_samples, rng)


def _sample_q_psi(sigma, psi_mean, site_precision, n_samples, rng):
    c, km1 = psi_mean.shape
    chol_s = np.linalg.cholesky(sigma)
    out = np.empty((n_samples, c, km1))
    observed = site_precision > 0
    for k in range(km1):
        f = chol_s @ rng.standard_normal((c, n_samples))  # (C, M)
        obs = np.flatnonzero(observed[:, k])
        if obs.size:
            d = np.sqrt(site_precision[obs, k])
            bmat = d[:, None] * sigma[np.ix_(obs, obs)] * d[None, :]
            bmat[np.diag_indices_from(bmat)] += 1.0
            lb = np.linalg.cholesky(bmat)
            rhs = d[:, None] * f[obs] + rng.standard_normal((obs.size, n_samples))
            z = solve_triangular(lb, rhs, lower=True, check_finite=False)
            z = solve_triangular(lb, z, lower=True, trans="T", check_finite=False)
            f = f - sigma[:, obs] @ (d[:, None] * z)
        out[:, :, k] = (psi_mean[:, k][:, None] + f).T
    return out


__all__ = ["sample_q_psi", "pg_expectation", "omega_step", "jittered_covariance", "StickGroup",
           "StickLayout", "build_layout", "gather_blocks", "PsiStep", "psi_step", "run_cavi"]
