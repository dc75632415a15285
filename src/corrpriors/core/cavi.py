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
:math:`O_k = \{c: b_{ck} > 0\}` enters (elsewhere :math:`E[\omega_{ck}] = 0`): with
:math:`D = diag E[\omega_k]_O`, the update is GP regression of the pseudo-observations
:math:`y = D^{-1}\kappa_O - \mu_O` with noise variances :math:`D^{-1}`. With
:math:`B' = \Sigma_{OO} + D^{-1} = LL^\top`,

.. math::

    \alpha = B'^{-1}y, \qquad
    \lambda_k = \mu_k + \Sigma_{\cdot O}\alpha, \qquad
    diag\,V_k = diag\,\Sigma - colsumsq(L^{-1}\Sigma_{O\cdot}).

Inside the loop only the observed entries of :math:`diag\,V_k` are needed (for :math:`w`), and
:math:`V_{OO} = D^{-1} - D^{-1}B'^{-1}D^{-1}` gives them from :math:`diag(B'^{-1}) =
colsumsq(L^{-1})` at :math:`|O|^3/3` flops; the ELBO's :math:`tr(DV_k)` and
:math:`\log|B_k| = \log|I + D^{1/2}\Sigma_{OO}D^{1/2}| = \log|B'| + \sum\log E[\omega]` come
from the same numbers. The full diagonal (all C covariates) is computed once at the end with
the :math:`colsumsq` form. :math:`B'` is the diagonal scaling :math:`D^{-1/2}BD^{-1/2}` of
:math:`B = I + D^{1/2}\Sigma_{OO}D^{1/2}` (eigenvalues :math:`\ge 1`); Cholesky factorisation
and triangular inversion are invariant under diagonal scaling up to rounding (their error
bounds are componentwise, van der Sluis), so :math:`B'` is as accurate to factorise as
:math:`B` and needs no scaling pass.

A stick with empty :math:`O_k` is exactly the prior. The non-empty sticks' blocks are packed
column-major into one flat buffer (:class:`StickLayout`, :class:`FactorWorkspace`), so every
LAPACK call (``potrf``, ``potrs``, ``trtri``) works in place on its exact
:math:`|O_k| \times |O_k|` block, and everything per entry (gathers, column sums of squares,
per-stick sums) is one vectorised call over all sticks. BLAS runs single-threaded during the fit
(:func:`blas_threads_for`).
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
from .elbo import elbo_value, log_binomial_coefficients, optimal_tilts
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
_potrs = lapack.dpotrs

#: Blocks with ``_BLOCKED_FROM <= |O_k| < _BLOCKED_BELOW`` rows are factorised and inverted by
#: one 2 x 2 block step (:func:`_chol_inv_blocked`: half-size potrf/trtri plus three matrix
#: products, which run at level-3 BLAS speed). Measured with OpenBLAS 0.3.31 on one core
#: (potrf + solve + trtri vs the block step): 1.12x faster at 96 rows, 1.15x at 99, 1.3x at
#: 200, 1.2x at 400, slower from about 500 rows on (LAPACK's own blocking takes over) and below
#: 96 (call overhead). The answer is the same to rounding (tested).
_BLOCKED_FROM, _BLOCKED_BELOW = 96, 512

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


@dataclass(frozen=True, eq=False)
class StickLayout:
    """The observed sets of the non-empty sticks, packed stick after stick.

    Every non-empty stick ``k = sticks[s]`` owns the entries
    ``entry_start[s]:entry_start[s + 1]`` (its observed covariates, ascending) and the
    ``|O_k| x |O_k|`` column-major block ``block_start[s]:block_start[s + 1]`` of a flat buffer
    (:class:`FactorWorkspace`).

    Attributes
    ----------
    observed : ndarray of shape (C, K - 1), bool
        ``b > 0``.
    sticks : ndarray of shape (S,)
        The non-empty sticks, ascending.
    sizes : ndarray of shape (S,)
        ``|O_k|`` of each of them.
    entry_rows, entry_cols : ndarray of shape (E,)
        Covariate and stick of every observed entry (``E = sizes.sum()``).
    entry_start : ndarray of shape (S + 1,)
    block_start : ndarray of shape (S + 1,)
    diag_pos : ndarray of shape (E,)
        Position of each entry's diagonal element in the flat buffer.
    col_start : ndarray of shape (E,)
        Position where each entry's column of its block starts in the flat buffer.
    entry_flat : ndarray of shape (E,)
        ``entry_rows * (K - 1) + entry_cols``: positions in a C-ordered (C, K - 1) array.
    """

    observed: np.ndarray
    sticks: np.ndarray
    sizes: np.ndarray
    entry_rows: np.ndarray
    entry_cols: np.ndarray
    entry_start: np.ndarray
    block_start: np.ndarray
    diag_pos: np.ndarray
    col_start: np.ndarray
    entry_flat: np.ndarray

    @functools.cached_property
    def entry_bounds(self) -> list:
        """list of int: ``entry_start`` as Python integers (cheap slicing in loops)."""
        return [int(i) for i in self.entry_start]

    def rows(self, s: int) -> np.ndarray:
        """ndarray of shape (sizes[s],): the observed covariates of the ``s``-th stick."""
        return self.entry_rows[self.entry_start[s]:self.entry_start[s + 1]]


def build_layout(observed: np.ndarray) -> StickLayout:
    """Pack the observed sets :math:`O_k = \\{c: b_{ck} > 0\\}` of the non-empty sticks.

    Parameters
    ----------
    observed : ndarray of shape (C, K - 1), bool

    Returns
    -------
    StickLayout
    """
    observed = np.asarray(observed, dtype=bool)
    sticks = np.flatnonzero(observed.any(axis=0))
    which, entry_rows = np.nonzero(observed[:, sticks].T)  # stick after stick
    sizes = np.bincount(which, minlength=sticks.size).astype(np.intp)
    entry_start = np.concatenate(([0], np.cumsum(sizes))).astype(np.intp)
    block_start = np.concatenate(([0], np.cumsum(sizes * sizes))).astype(np.intp)
    local = np.arange(entry_rows.size, dtype=np.intp) - entry_start[which]
    col_start = block_start[which] + local * sizes[which]
    entry_rows = entry_rows.astype(np.intp)
    entry_cols = sticks[which]
    return StickLayout(observed, sticks, sizes, entry_rows, entry_cols, entry_start, block_start,
                       col_start + local, col_start,
                       entry_rows * observed.shape[1] + entry_cols)


class FactorWorkspace:
    """Flat buffer for every stick's :math:`|O_k| \\times |O_k|` matrix, reused across psi steps.

    After :func:`psi_step` the block of stick ``s`` (``views[s]``, column-major) holds the
    lower-triangular :math:`L_k^{-1}` with :math:`L_k L_k^\\top = \\Sigma_{OO} + D_k^{-1}`, valid
    until the next psi step with this workspace.

    Parameters
    ----------
    layout : StickLayout
    base : ndarray of shape (C, C) or None
        Covariance whose blocks :math:`\\tilde\\Sigma_{O_kO_k}` are gathered once and rescaled
        in every psi step (``sigma = scale * base``); ``None`` gathers from ``sigma`` every time.
    max_bytes : float
        Skip the pre-gathered copy of ``base`` when it would need more memory.
    chunk : int
        Column sums of squares are taken over runs of whole blocks of at most
        ``max(chunk, max |O_k|^2)`` numbers (one scratch buffer of that size, two numpy calls
        per run instead of one per stick).
    """

    def __init__(self, layout: StickLayout, base: np.ndarray | None = None,
                 max_bytes: float = 256e6, chunk: int = 2 ** 18):
        n = int(layout.block_start[-1])
        self.flat = np.empty(n)
        bs = layout.block_start
        self.views = [self.flat[bs[s]:bs[s + 1]].reshape((m, m), order="F")
                      for s, m in enumerate(layout.sizes)]
        self.base_blocks = None
        if base is not None and n * 8 <= max_bytes:
            self.base_blocks = np.empty(n)
            self._gather(layout, base, self.base_blocks)
        chunk = max(int(chunk), int(np.max(layout.sizes, initial=0)) ** 2)
        self._scratch = np.empty(min(chunk, n))
        self._runs = []
        s0 = 0
        for s1 in range(1, layout.sticks.size + 1):
            if s1 == layout.sticks.size or bs[s1 + 1] - bs[s0] > chunk:
                self._runs.append((s0, s1))
                s0 = s1

    def colsumsq(self, layout: StickLayout, out: np.ndarray) -> np.ndarray:
        """Column sums of squares of every block, stick after stick (ndarray of shape (E,))."""
        bs, es = layout.block_start, layout.entry_start
        for s0, s1 in self._runs:
            lo, hi = bs[s0], bs[s1]
            sq = np.multiply(self.flat[lo:hi], self.flat[lo:hi], out=self._scratch[:hi - lo])
            np.add.reduceat(sq, layout.col_start[es[s0]:es[s1]] - lo, out=out[es[s0]:es[s1]])
        return out

    @staticmethod
    def _gather(layout: StickLayout, sigma: np.ndarray, out: np.ndarray) -> None:
        bs = layout.block_start
        for s in range(layout.sticks.size):
            r = layout.rows(s)
            out[bs[s]:bs[s + 1]] = sigma.take(r, 0).take(r, 1).ravel(order="F")

    def load(self, layout: StickLayout, sigma: np.ndarray, scale: float,
             site_precision: np.ndarray) -> None:
        """Write every block of :math:`B' = \\Sigma_{O_kO_k} + D_k^{-1}` into the buffer.

        ``sigma = scale * base`` (the pre-gathered blocks are rescaled, or gathered from
        ``sigma``); ``site_precision`` (shape (E,)) is :math:`E[\\omega]` on the observed
        entries, stick after stick.
        """
        if self.base_blocks is not None:
            np.multiply(self.base_blocks, scale, out=self.flat)
        else:
            self._gather(layout, sigma, self.flat)
        self.flat[layout.diag_pos] += 1.0 / site_precision


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
        With ``need_reduction``: :math:`\\sum_k (\\Sigma - V_k)`.
    workspace : FactorWorkspace
        Holds this step's :math:`L_k^{-1}` (for :func:`_marginal_variances`) until the next
        psi step with the same workspace.
    """

    psi_mean: np.ndarray
    psi_var: np.ndarray
    alpha: np.ndarray
    trace_dv: np.ndarray
    quad: np.ndarray
    logdet_b: np.ndarray
    reduction: np.ndarray | None
    workspace: FactorWorkspace | None = None


def psi_step(layout: StickLayout, sigma: np.ndarray, mu: np.ndarray, kappa: np.ndarray,
             omega_mean: np.ndarray, full: bool = False, need_reduction: bool = False,
             workspace: FactorWorkspace | None = None, scale: float = 1.0) -> PsiStep:
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
    workspace : FactorWorkspace or None
        Reused buffer; its pre-gathered blocks must be those of ``sigma / scale``.
    scale : float
        ``sigma = scale * base`` for the workspace's ``base``.

    Returns
    -------
    PsiStep
    """
    c, km1 = mu.shape
    if workspace is None:
        workspace = FactorWorkspace(layout)
    diag_sigma = np.diag(sigma).copy()
    alpha = np.zeros((c, km1))
    var = np.repeat(diag_sigma[:, None], km1, axis=1)
    trace_dv = np.zeros(km1)
    logdet_b = np.zeros(km1)
    if layout.sticks.size:
        idx = layout.entry_flat
        e = np.take(omega_mean, idx)
        # alpha_O = B'^-1 y, y = kappa / e - mu: GP regression on pseudo-observations
        a = np.take(kappa, idx) / e - np.take(mu, idx)
        workspace.load(layout, sigma, scale, e)
        es = layout.entry_bounds
        for s, w in enumerate(workspace.views):
            # w, the column-major block of B' = Sigma_OO + D^-1, is overwritten in place (no
            # copies) by L^-1 (upper triangle zeroed), and a[lo:hi] by B'^-1 y.
            lo, hi = es[s], es[s + 1]
            if _BLOCKED_FROM <= hi - lo < _BLOCKED_BELOW:
                info = _chol_inv_blocked(w)
                seg = a[lo:hi]
                seg[:] = w.T @ (w @ seg)  # L^-T L^-1 y
            else:  # positional flags: keyword parsing costs more than a small block's flops
                _, info = _potrf(w, 1, 1, 1)  # (a, lower, clean, overwrite_a): L
                if info == 0:
                    _potrs(w, a[lo:hi], 1, 1)  # (c, b, lower, overwrite_b)
                    _trtri(w, 1, 0, 1)  # (c, lower, unitdiag, overwrite_c): L^-1
            if info != 0:  # pragma: no cover - B' = Sigma_OO + D^-1 is positive definite
                raise np.linalg.LinAlgError(f"Cholesky of Sigma_OO + D^-1 failed (info={info})")
        # diag(B'^-1) = colsumsq(L^-1); e_c (V_k)_cc = 1 - e_c diag(B'^-1)_c, from
        # V_OO = D^-1 - D^-1 B'^-1 D^-1 (absolute error ~1e-16 / e_c)
        one_minus = 1.0 - workspace.colsumsq(layout, np.empty_like(e)) / e
        starts = layout.entry_start[:-1]
        trace_dv[layout.sticks] = np.add.reduceat(one_minus, starts)
        # log|B| = log|B'| + sum log e, and diag(L^-1) = 1 / diag(L)
        logdet_b[layout.sticks] = np.add.reduceat(
            np.log(e) - 2.0 * np.log(workspace.flat[layout.diag_pos]), starts)
        np.put(alpha, idx, a)
        np.put(var, idx, np.maximum(one_minus, 0.0) / e)
    delta = sigma @ alpha
    psi_mean = mu + delta
    quad = np.sum(alpha * delta, axis=0)
    reduction = None
    if full:
        reduction = np.zeros((c, c)) if need_reduction else None
        var = _marginal_variances(layout, sigma, workspace, var, everywhere=True,
                                  reduction=reduction)
    return PsiStep(psi_mean, np.maximum(var, 0.0), alpha, trace_dv, quad, logdet_b, reduction,
                   workspace)


def _chol_inv_blocked(w: np.ndarray) -> int:
    """Overwrite the column-major SPD block ``w`` with :math:`L^{-1}` (lower, upper triangle
    zeroed; :math:`LL^\top` = ``w``) by one 2 x 2 block step.

    With ``w = [[A11, A21^T], [A21, A22]]``: :math:`L_{11}^{-1}` from potrf/trtri of
    ``A11``, :math:`L_{21} = A_{21}L_{11}^{-\top}`, :math:`L_{22}^{-1}` from potrf/trtri of
    the Schur complement :math:`A_{22} - L_{21}L_{21}^\top`, and
    :math:`(L^{-1})_{21} = -L_{22}^{-1}L_{21}L_{11}^{-1}`.

    Parameters
    ----------
    w : ndarray of shape (n, n), Fortran-ordered

    Returns
    -------
    int
        LAPACK's ``info`` (0 on success).
    """
    h = w.shape[0] // 2
    x11, info = _potrf(w[:h, :h], 1, 1, 0)  # a copy: the view is not contiguous
    if info != 0:  # pragma: no cover - positive definite input
        return info
    _trtri(x11, 1, 0, 1)
    l21 = w[h:, :h] @ x11.T
    schur = (w[h:, h:] - l21 @ l21.T).T  # column-major (symmetric up to rounding)
    _, info = _potrf(schur, 1, 1, 1)
    if info != 0:  # pragma: no cover
        return h + info
    _trtri(schur, 1, 0, 1)
    w[h:, :h] = -(schur @ (l21 @ x11))
    w[:h, :h] = x11
    w[h:, h:] = schur
    w[:h, h:] = 0.0
    return 0


def _marginal_variances(layout: StickLayout, sigma: np.ndarray, workspace: FactorWorkspace,
                        psi_var: np.ndarray, everywhere: bool = False,
                        reduction: np.ndarray | None = None) -> FloatArray:
    """Marginal variances off the observed sets from the factors of the last psi step.

    ``workspace`` holds that psi step's :math:`L_k^{-1}` (same ``layout`` and ``sigma``); the
    observed entries of ``psi_var`` are kept unless ``everywhere``.
    :math:`diag\\,V_k = diag\\,\\Sigma - colsumsq(L_k^{-1}\\Sigma_{O U})` on each stick's
    unobserved covariates :math:`U_k` (:math:`O(|O_k|^2 |U_k|)` per stick; the observed sets of
    grid data are large, so :math:`U_k` is small), or on all covariates with ``everywhere``,
    which also adds :math:`\\Sigma - V_k = h^\\top h` to ``reduction``.

    Returns
    -------
    ndarray of shape (C, K - 1)
    """
    var = psi_var.copy()
    diag_sigma = np.diag(sigma)
    n_sticks = layout.sticks.size
    if everywhere:
        which = np.repeat(np.arange(n_sticks), sigma.shape[0])
        targets = np.tile(np.arange(sigma.shape[0]), n_sticks)
    else:
        which, targets = np.nonzero(~layout.observed[:, layout.sticks].T)
    tb = np.searchsorted(which, np.arange(n_sticks + 1)).tolist()
    eb = layout.entry_bounds
    reduced = np.empty(targets.size)  # colsumsq(L^-1 Sigma_OU), stick after stick
    for s, w in enumerate(workspace.views):
        if tb[s] == tb[s + 1]:
            continue
        target = targets[tb[s]:tb[s + 1]]
        h = w @ sigma.take(layout.entry_rows[eb[s]:eb[s + 1]], 0).take(target, 1)
        np.einsum("ij,ij->j", h, h, out=reduced[tb[s]:tb[s + 1]])
        if reduction is not None:
            reduction += h.T @ h
    var[targets, layout.sticks[which]] = np.maximum(diag_sigma[targets] - reduced, 0.0)
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
        self.last: tuple | None = None  # previous (x, g)
        self.dxs: list[np.ndarray] = []  # recent differences of x and of g
        self.dgs: list[np.ndarray] = []

    def reset(self) -> None:
        self.last = None
        self.dxs.clear()
        self.dgs.clear()

    def propose(self, x: np.ndarray, fx: np.ndarray) -> np.ndarray:
        g = fx - x
        if self.last is not None:
            self.dxs.append(x - self.last[0])
            self.dgs.append(g - self.last[1])
            if len(self.dxs) > self.memory:
                self.dxs.pop(0)
                self.dgs.pop(0)
        self.last = (x, g)
        if not self.dxs:
            return fx
        dx, dg = np.stack(self.dxs), np.stack(self.dgs)  # (m, n)
        # least squares min ||g - dg^T gamma|| by the (m x m) normal equations, pseudo-inverted
        # by eigenvalues (directions below 1e-14 of the largest are dropped): a tall lstsq
        # costs more than a psi step's bookkeeping, and a poor gamma is rejected anyway.
        evals, evecs = np.linalg.eigh(dg @ dg.T)
        keep = evals > 1e-14 * max(evals[-1], 0.0)
        if not keep.any():
            return fx
        gamma = evecs[:, keep] @ ((evecs[:, keep].T @ (dg @ g)) / evals[keep])
        out = x + g - gamma @ (dx + dg)
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
    # Per-entry work touches the observed entries only (b = kappa = w = 0 elsewhere).
    idx = layout.entry_flat
    b_obs, kappa_obs = np.take(b, idx), np.take(kappa, idx)
    log_binom = log_binomial_coefficients(b_obs, np.take(counts[:, :-1], idx))
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

    # The kernel M-step changes the base covariance, so its blocks are gathered every step.
    workspace = FactorWorkspace(layout, None if learn_kernel else base)

    def evaluate(w_in, theta_in, mu_in) -> _Evaluation:
        site = np.zeros((c, km1))
        np.put(site, idx, pg_expectation(b_obs, np.take(w_in, idx)))
        st = psi_step(layout, theta_in * base, mu_in, kappa, site, full=learn_kernel,
                      need_reduction=learn_kernel, workspace=workspace, scale=theta_in)
        mean_obs, var_obs = np.take(st.psi_mean, idx), np.take(st.psi_var, idx)
        w_obs = optimal_tilts(mean_obs, var_obs)
        w_out = np.zeros((c, km1))
        np.put(w_out, idx, w_obs)
        elbo = elbo_value(b_obs, kappa_obs, mean_obs, w_obs, log_binom, st.trace_dv, st.quad,
                          st.logdet_b, psi_var=var_obs)
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
        parts = [np.take(w_, idx)]
        if learn_scale:
            parts.append([np.log(th)])
        if learn_mean == "constant":
            parts.append(mu_[0])
        return np.concatenate(parts)

    n_obs = idx.size

    def unpack(x):
        w_ = np.zeros((c, km1))
        np.put(w_, idx, x[:n_obs])
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
            step = psi_step(layout, sigma, mu, kappa, cur.site_precision,
                            workspace=workspace, scale=theta)
        step = replace(
            step, psi_var=_marginal_variances(layout, sigma, step.workspace, step.psi_var))
    w_full = optimal_tilts(step.psi_mean, step.psi_var)
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

        \psi_{\cdot k} = \lambda_k + f - \Sigma_{\cdot O}(\Sigma_{OO} + D^{-1})^{-1}
        (f_O + D^{-1/2}\varepsilon)

    has covariance exactly :math:`V_k = (\Sigma^{-1} + D)^{-1}`. Cost: one Cholesky of
    :math:`\Sigma` (:math:`C^3/3`) and one product for the prior draws of all sticks
    (:math:`C^2(K-1)M` for ``M = n_samples``), then per stick
    :math:`O(|O_k|^3 + C|O_k|M)` with the packed blocks of :func:`psi_step`; :math:`V_k` itself
    is never formed. The random numbers are drawn stick after stick (the prior draw, then the
    noise of the observed entries), so a seed gives the same draws whatever the batching.

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
    m = int(n_samples)
    chol_s = np.linalg.cholesky(sigma)
    layout = build_layout(site_precision > 0)
    eb = layout.entry_bounds
    slot = dict(zip(layout.sticks.tolist(), range(layout.sticks.size)))
    z = np.empty((c, km1, m))
    noise = np.empty((layout.entry_rows.size, m))
    for k in range(km1):
        z[:, k, :] = rng.standard_normal((c, m))
        s = slot.get(k)
        if s is not None:
            noise[eb[s]:eb[s + 1]] = rng.standard_normal((eb[s + 1] - eb[s], m))
    f = (chol_s @ z.reshape(c, km1 * m)).reshape(c, km1, m)  # prior draws, every stick
    if layout.sticks.size:
        rows, cols = layout.entry_rows, layout.entry_cols
        e = site_precision[rows, cols]
        rhs = f[rows, cols, :] + noise / np.sqrt(e)[:, None]  # f_O + D^-1/2 eps, (E, M)
        ws = FactorWorkspace(layout)
        ws.load(layout, sigma, 1.0, e)
        for s, w in enumerate(ws.views):
            _, info = _potrf(w, 1, 1, 1)  # L L^T = Sigma_OO + D^-1, in place
            if info != 0:  # pragma: no cover - positive definite
                raise np.linalg.LinAlgError(f"Cholesky of Sigma_OO + D^-1 failed (info={info})")
            rhs[eb[s]:eb[s + 1]] = _potrs(w, rhs[eb[s]:eb[s + 1]], 1, 0)[0]
        # f_k -= Sigma_.O x_k for every stick at once: x scattered into a (C, K - 1, M) array
        x = np.zeros((c, km1, m))
        x[rows, cols, :] = rhs
        f -= (sigma @ x.reshape(c, km1 * m)).reshape(c, km1, m)
    return (psi_mean[:, :, None] + f).transpose(2, 0, 1)


__all__ = ["sample_q_psi", "pg_expectation", "jittered_covariance",
           "StickLayout", "build_layout", "FactorWorkspace", "PsiStep", "psi_step", "run_cavi"]
