r"""A dense prior structure :math:`\tilde\Sigma` (a kernel's Gram matrix or any PSD matrix).

Implements :class:`~corrpriors.core.priors.GaussianPrior` by GP regression on each stick's observed
set. Only :math:`O_k` enters a psi step (elsewhere :math:`E[\omega_{ck}] = 0`): with
:math:`D = diag(e_k)_O` and :math:`\Sigma = \theta\tilde\Sigma`, the update is GP regression of
the pseudo-observations :math:`y = D^{-1}\kappa_O - \mu_O` with noise variances :math:`D^{-1}`.
With :math:`B' = \Sigma_{OO} + D^{-1} = LL^\top`,

.. math::

    \alpha = B'^{-1}y, \qquad
    \lambda_k = \mu_k + \Sigma_{\cdot O}\alpha, \qquad
    diag\,V_k = diag\,\Sigma - colsumsq(L^{-1}\Sigma_{O\cdot}).

Inside the loop only the observed entries of :math:`diag\,V_k` are needed (for the tilts), and
:math:`V_{OO} = D^{-1} - D^{-1}B'^{-1}D^{-1}` gives them from :math:`diag(B'^{-1}) =
colsumsq(L^{-1})` at :math:`|O|^3/3` flops; the ELBO's :math:`tr(DV_k)` and
:math:`\log|B_k| = \log|I + D^{1/2}\Sigma_{OO}D^{1/2}| = \log|B'| + \sum\log e` come from the same
numbers. The full diagonal is computed once at the end with the :math:`colsumsq` form.
:math:`B'` is the diagonal scaling :math:`D^{-1/2}BD^{-1/2}` of
:math:`B = I + D^{1/2}\Sigma_{OO}D^{1/2}` (eigenvalues :math:`\ge 1`); Cholesky factorisation and
triangular inversion are invariant under diagonal scaling up to rounding (van der Sluis), so
:math:`B'` is as accurate to factorise as :math:`B`.

The non-empty sticks' blocks are packed column-major into one flat buffer
(:class:`FactorWorkspace`), so every LAPACK call (``potrf``, ``potrs``, ``trtri``) works in place
on its exact :math:`|O_k| \times |O_k|` block, and everything per entry is one vectorised call
over all sticks. Cost per psi step: :math:`\sum_k |O_k|^3/3 + C|O_k|` flops.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.linalg import lapack, solve_triangular

from ..._typing import FloatArray
from ..._validation import check_covariance
from ...linalg import jittered_cholesky
from .. import hyper_em
from .base import PsiStep, StickLayout, build_layout, joint_constant_mean, prior_scale_range

_potrf = lapack.dpotrf
_trtri = lapack.dtrtri
_potrs = lapack.dpotrs

#: Blocks with ``_BLOCKED_FROM <= |O_k| < _BLOCKED_BELOW`` rows are factorised and inverted by
#: one 2 x 2 block step (:func:`_chol_inv_blocked`: half-size potrf/trtri plus three matrix
#: products, which run at level-3 BLAS speed). Measured with OpenBLAS 0.3.31 on one core
#: (potrf + solve + trtri vs the block step): 1.12x faster at 96 rows, 1.3x at 200, 1.2x at 400,
#: slower from about 500 rows on and below 96. The answer is the same to rounding (tested).
_BLOCKED_FROM, _BLOCKED_BELOW = 96, 512


class FactorWorkspace:
    r"""Flat buffer for every stick's :math:`|O_k| \times |O_k|` matrix, reused across psi steps.

    After a psi step the block of stick ``s`` (``views[s]``, column-major) holds the
    lower-triangular :math:`L_k^{-1}` with :math:`L_k L_k^\top = \Sigma_{OO} + D_k^{-1}`, valid
    until the next psi step with this workspace (``last_step`` is that step).

    Parameters
    ----------
    layout : StickLayout
    base : ndarray of shape (C, C) or None
        Covariance whose blocks :math:`\tilde\Sigma_{O_kO_k}` are gathered once and rescaled
        in every psi step (``sigma = scale * base``); ``None`` gathers from ``sigma`` every time.
    max_bytes : float
        Skip the pre-gathered copy of ``base`` when it would need more memory.
    chunk : int
        Column sums of squares are taken over runs of whole blocks of at most
        ``max(chunk, max |O_k|^2)`` numbers (one scratch buffer of that size).
    """

    def __init__(self, layout: StickLayout, base: np.ndarray | None = None,
                 max_bytes: float = 256e6, chunk: int = 2 ** 18):
        self.layout = layout
        self.last_step: PsiStep | None = None
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
        r"""Write every block of :math:`B' = \Sigma_{O_kO_k} + D_k^{-1}` into the buffer.

        ``sigma = scale * base`` (the pre-gathered blocks are rescaled, or gathered from
        ``sigma``); ``site_precision`` (shape (E,)) is :math:`E[\omega]` on the observed
        entries, stick after stick.
        """
        if self.base_blocks is not None:
            np.multiply(self.base_blocks, scale, out=self.flat)
        else:
            self._gather(layout, sigma, self.flat)
        self.flat[layout.diag_pos] += 1.0 / site_precision


def _chol_inv_blocked(w: np.ndarray) -> int:
    r"""Overwrite the column-major SPD block ``w`` with :math:`L^{-1}` (lower, upper triangle
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


def _factor_and_solve(workspace: FactorWorkspace, layout: StickLayout, a: np.ndarray) -> None:
    """Replace every block of the loaded workspace by :math:`L^{-1}` and ``a`` by
    :math:`B'^{-1}a`, stick after stick, in place.
    """
    es = layout.entry_bounds
    for s, w in enumerate(workspace.views):
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


def _marginal_variances(layout: StickLayout, sigma: np.ndarray, workspace: FactorWorkspace,
                        psi_var: np.ndarray, everywhere: bool = False,
                        reduction: np.ndarray | None = None) -> FloatArray:
    r"""Marginal variances off the observed sets from the factors of the last psi step.

    ``workspace`` holds that psi step's :math:`L_k^{-1}` (same ``layout`` and ``sigma``); the
    observed entries of ``psi_var`` are kept unless ``everywhere``.
    :math:`diag\,V_k = diag\,\Sigma - colsumsq(L_k^{-1}\Sigma_{O U})` on each stick's
    unobserved covariates :math:`U_k` (:math:`O(|O_k|^2 |U_k|)` per stick), or on all covariates
    with ``everywhere``, which also adds :math:`\Sigma - V_k = h^\top h` to ``reduction``.

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


def _inverse_solve(workspace: FactorWorkspace, layout: StickLayout, b: np.ndarray) -> None:
    """Replace ``b`` (shape (E,)) by :math:`B'^{-1}b` per stick with the workspace's
    :math:`L^{-1}` blocks, in place.
    """
    es = layout.entry_bounds
    for s, w in enumerate(workspace.views):
        seg = b[es[s]:es[s + 1]]
        seg[:] = w.T @ (w @ seg)


def psi_step(layout: StickLayout, sigma: np.ndarray, mu: np.ndarray, kappa: np.ndarray,
             site: np.ndarray, *, workspace: FactorWorkspace, scale: float = 1.0,
             full: bool = False, need_reduction: bool = False,
             constant_mean: tuple[np.ndarray, float] | None = None) -> PsiStep:
    r"""The dense psi step (module docstring) for every stick.

    Parameters
    ----------
    layout : StickLayout
    sigma : ndarray of shape (C, C)
        Prior covariance :math:`\theta\tilde\Sigma` (jittered, scaled).
    mu, kappa : ndarray of shape (C, K - 1)
    site : ndarray of shape (E,)
        :math:`E[\omega]` on the observed entries, positive.
    workspace : FactorWorkspace
        Reused buffer; its pre-gathered blocks (if any) must be those of ``sigma / scale``.
    scale : float
    full, need_reduction : bool
        Every marginal variance (:math:`O(|O_k|^2 C)` per stick), and with it
        :math:`\sum_k(\Sigma - V_k)` (:math:`O(|O_k| C^2)` per stick).
    constant_mean : (ndarray of shape (K - 1,), float), optional
        Choose constant means jointly with :math:`q(\psi)`
        (:func:`~corrpriors.core.priors.joint_constant_mean`; :math:`A = B'^{-1}`).

    Returns
    -------
    PsiStep
    """
    c, km1 = mu.shape
    alpha = np.zeros((c, km1))
    var = np.repeat(np.diag(sigma)[:, None], km1, axis=1)
    trace_dv = np.zeros(km1)
    logdet_b = np.zeros(km1)
    if layout.sticks.size:
        idx = layout.entry_flat
        e = site
        # alpha_O = B'^-1 (y - mu), y = kappa / e: GP regression on pseudo-observations
        a = np.take(kappa, idx) / e
        if constant_mean is None:
            a -= np.take(mu, idx)
        workspace.load(layout, sigma, scale, e)
        _factor_and_solve(workspace, layout, a)
        if constant_mean is not None:  # a = B'^-1 y, v = B'^-1 1: the joint constant mean
            v = np.ones_like(a)
            _inverse_solve(workspace, layout, v)
            starts = layout.entry_start[:-1]
            sum_ay, sum_a1 = np.zeros(km1), np.zeros(km1)
            sum_ay[layout.sticks] = np.add.reduceat(a, starts)
            sum_a1[layout.sticks] = np.add.reduceat(v, starts)
            m = joint_constant_mean(sum_ay, sum_a1, mu[0], constant_mean)
            mu = np.repeat(m[None, :], c, axis=0)
            a -= m[layout.entry_cols] * v
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
    elif constant_mean is not None:  # no data: the hyper-prior's mean (or the current one)
        mu = np.repeat(joint_constant_mean(np.zeros(km1), np.zeros(km1), mu[0],
                                           constant_mean)[None, :], c, axis=0)
    delta = sigma @ alpha
    psi_mean = mu + delta
    quad = np.sum(alpha * delta, axis=0)
    reduction = None
    if full:
        reduction = np.zeros((c, c)) if need_reduction else None
        var = _marginal_variances(layout, sigma, workspace, var, everywhere=True,
                                  reduction=reduction)
    step = PsiStep(psi_mean, np.maximum(var, 0.0), alpha, trace_dv, quad, logdet_b, reduction,
                   complete=full, mean=None if constant_mean is None else mu)
    workspace.last_step = step
    return step


class DenseCovariancePrior:
    r"""The prior structure :math:`\tilde\Sigma + \epsilon I` from a dense PSD matrix or a kernel.

    Parameters
    ----------
    matrix : ndarray of shape (C, C)
        Symmetric positive semi-definite (validated here). The smallest working diagonal jitter
        :math:`\epsilon` is added (:func:`~corrpriors.linalg.jittered_cholesky`).
    kernel : BoundKernel, optional
        The bound kernel whose Gram matrix ``matrix`` is; enables kernel learning and prediction
        at new covariates.
    jitter : float, optional
        Use exactly this jitter instead of searching for one (used when a kernel M-step rebuilds
        the Gram matrix: the fitted model keeps one :math:`\epsilon`).
    name : str
        Argument name for messages.
    size : int, optional
        Expected C (checked, with a message naming ``name``).
    check : bool, default True
        Validate ``matrix`` (shape, finiteness, symmetry, an eigenvalue test of semi-definiteness).
        ``False`` only for a matrix built from an already validated one by operations that keep
        it positive semi-definite (the transfer search's :math:`\theta\tilde\Sigma +
        \tau^2\mathbf 1\mathbf 1^\top`, rebuilt for every lattice point: the eigenvalue test
        was a quarter of its CPU time); the Cholesky factorisation still fails on a matrix that
        is not positive definite.

    Attributes
    ----------
    base : ndarray of shape (C, C)
        :math:`\tilde\Sigma + \epsilon I`.
    chol : ndarray of shape (C, C)
        Its lower Cholesky factor.
    jitter : float
    n_covariates : int
    """

    base: np.ndarray
    chol: np.ndarray

    def __init__(self, matrix: Any, *, kernel: Any = None, jitter: float | None = None,
                 name: str = "covariance", size: int | None = None, check: bool = True):
        arr = check_covariance(matrix, name, size=size) if check else np.asarray(matrix, dtype=np.float64)
        if jitter is None:
            self.chol, self.base, self.jitter = jittered_cholesky(arr, name=name, stacklevel=3)
        else:
            self.base = arr + float(jitter) * np.eye(arr.shape[0])
            self.chol = np.linalg.cholesky(self.base)
            self.jitter = float(jitter)
        self.kernel = kernel
        self.n_covariates = int(arr.shape[0])
        self._workspace: FactorWorkspace | None = None
        self._scaled_chol: tuple[float, np.ndarray] | None = None
        self._precision_ones: np.ndarray | None = None

    @classmethod
    def from_kernel(cls, kernel: Any, *, jitter: float | None = None) -> DenseCovariancePrior:
        """The prior of a bound kernel's Gram matrix."""
        return cls(np.asarray(kernel.gram(), dtype=float), kernel=kernel, jitter=jitter)

    def __repr__(self) -> str:
        what = "matrix" if self.kernel is None else repr(self.kernel)
        return f"DenseCovariancePrior({what}, C={self.n_covariates}, jitter={self.jitter:.3g})"

    # ------------------------------------------------------------------ protocol
    def prior_variance(self) -> FloatArray:
        r""":math:`diag\,\tilde\Sigma`, ndarray of shape (C,)."""
        return np.diag(self.base).copy()

    def precision_ones(self) -> FloatArray:
        r""":math:`\tilde\Sigma^{-1}\mathbf 1`, ndarray of shape (C,)."""
        if self._precision_ones is None:
            z = solve_triangular(self.chol, np.ones(self.n_covariates), lower=True,
                                 check_finite=False)
            self._precision_ones = solve_triangular(self.chol, z, lower=True, trans="T",
                                                    check_finite=False)
        return self._precision_ones

    def _workspace_for(self, layout: StickLayout) -> FactorWorkspace:
        if self._workspace is None or self._workspace.layout is not layout:
            self._workspace = FactorWorkspace(layout, self.base)
        return self._workspace

    def psi_step(self, layout: StickLayout, scale: float, mean: np.ndarray, kappa: np.ndarray,
                 site: np.ndarray, *, full: bool = False, reduction: bool = False,
                 constant_mean: tuple[np.ndarray, float] | None = None) -> PsiStep:
        """See :meth:`corrpriors.core.priors.GaussianPrior.psi_step`."""
        return psi_step(layout, scale * self.base, mean, kappa, site, scale=scale,
                        workspace=self._workspace_for(layout), full=full,
                        need_reduction=reduction, constant_mean=constant_mean)

    def complete_variances(self, layout: StickLayout, scale: float, site: np.ndarray,
                           step: PsiStep) -> FloatArray:
        """See :meth:`corrpriors.core.priors.GaussianPrior.complete_variances`."""
        if step.complete:
            return step.psi_var
        ws = self._workspace_for(layout)
        sigma = scale * self.base
        if ws.last_step is not step:  # the workspace holds another step's factors: redo them
            zeros = np.zeros(layout.observed.shape)
            psi_step(layout, sigma, zeros, zeros, site, scale=scale, workspace=ws)
        return _marginal_variances(layout, sigma, ws, step.psi_var)

    def _chol_scaled(self, scale: float) -> np.ndarray:
        if self._scaled_chol is None or self._scaled_chol[0] != scale:
            chol = self.chol if scale == 1.0 else np.linalg.cholesky(scale * self.base)
            self._scaled_chol = (scale, chol)
        return self._scaled_chol[1]

    def sample_posterior(self, scale: float, center: np.ndarray, site: np.ndarray, n: int, *,
                         rng: np.random.Generator,
                         pseudo: np.ndarray | None = None) -> FloatArray:
        r"""Joint draws by Matheron's rule (pathwise conditioning) on the observed sets.

        With :math:`f \sim N(0, \Sigma)` and :math:`\varepsilon \sim N(0, I_{|O|})`,

        .. math::

            \psi_{\cdot k} = m_k + f - \Sigma_{\cdot O}(\Sigma_{OO} + D^{-1})^{-1}
            (f_O + D^{-1/2}\varepsilon - s_O)

        has covariance exactly :math:`V_k = (\Sigma^{-1} + D)^{-1}`; ``m = center`` and
        :math:`s = 0` for the VI posterior, :math:`s = pseudo - center` for the conditional of
        pseudo-observations. Cost: one product for the prior draws of all sticks
        (:math:`C^2(K-1)M`), then per stick :math:`O(|O_k|^3 + C|O_k|M)`; :math:`V_k` is never
        formed. The random numbers are drawn stick after stick (the prior draw, then the noise
        of the observed entries), so a seed gives the same draws whatever the batching.
        See :meth:`corrpriors.core.priors.GaussianPrior.sample_posterior`.
        """
        c, km1 = center.shape
        m = int(n)
        sigma = scale * self.base
        chol_s = self._chol_scaled(scale)
        layout = build_layout(site > 0)
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
            e = site[rows, cols]
            rhs = f[rows, cols, :] + noise / np.sqrt(e)[:, None]  # f_O + D^-1/2 eps, (E, M)
            if pseudo is not None:
                rhs -= (pseudo[rows, cols] - center[rows, cols])[:, None]
            ws = FactorWorkspace(layout)
            ws.load(layout, sigma, 1.0, e)
            for s, w in enumerate(ws.views):
                _, info = _potrf(w, 1, 1, 1)  # L L^T = Sigma_OO + D^-1, in place
                if info != 0:  # pragma: no cover - positive definite
                    raise np.linalg.LinAlgError(
                        f"Cholesky of Sigma_OO + D^-1 failed (info={info})")
                rhs[eb[s]:eb[s + 1]] = _potrs(w, rhs[eb[s]:eb[s + 1]], 1, 0)[0]
            # f_k -= Sigma_.O x_k for every stick at once: x scattered into a (C, K - 1, M) array
            x = np.zeros((c, km1, m))
            x[rows, cols, :] = rhs
            f -= (sigma @ x.reshape(c, km1 * m)).reshape(c, km1, m)
        return (center[:, :, None] + f).transpose(2, 0, 1)

    def conditional(self, layout: StickLayout, scale: float, mean: np.ndarray,
                    kappa: np.ndarray, site: np.ndarray, cross: np.ndarray,
                    new_variance: np.ndarray) -> tuple[FloatArray, FloatArray]:
        r"""The GP conditional of new covariates given :math:`q(\psi)`.

        Parameters
        ----------
        layout : StickLayout
        scale : float
        mean, kappa : ndarray of shape (C, K - 1)
        site : ndarray of shape (E,)
            The fitted :math:`q`'s site precisions.
        cross : ndarray of shape (C, M)
            :math:`\tilde\Sigma(X, X_*)`.
        new_variance : ndarray of shape (M,)
            :math:`\tilde\Sigma(x_*, x_*)` (with the jitter, as on the training diagonal).

        Returns
        -------
        shift : ndarray of shape (M, K - 1)
            :math:`k_*^\top\Sigma^{-1}(\lambda_k - \mu_k)`.
        var : ndarray of shape (M, K - 1)
        """
        step = self.psi_step(layout, scale, mean, kappa, site)
        ws = self._workspace_for(layout)
        k_new = scale * cross
        shift = k_new.T @ step.alpha
        var = np.repeat(scale * np.asarray(new_variance, dtype=float)[:, None],
                        mean.shape[1], axis=1)
        for s, w in enumerate(ws.views):
            h = w @ k_new[layout.rows(s)]  # L^-1 k_*O, (|O_k|, M)
            k = layout.sticks[s]
            var[:, k] = np.maximum(var[:, k] - np.einsum("ij,ij->j", h, h), 0.0)
        return shift, var

    # ------------------------------------------------------------------ kernel learning
    def with_kernel_theta(self, theta: np.ndarray) -> DenseCovariancePrior:
        """The prior of the same kernel at log-space hyper-parameters ``theta`` (same jitter)."""
        if self.kernel is None:
            raise ValueError("learn_kernel: needs a prior built from a bound kernel")
        return DenseCovariancePrior.from_kernel(self.kernel.with_theta(theta), jitter=self.jitter)

    def kernel_m_step(self, step_scale: float, scale: float, step: PsiStep,
                      mean: np.ndarray) -> DenseCovariancePrior:
        r"""One kernel M-step (L-BFGS-B on the kernel's log-space hyper-parameters).

        Maximises :math:`-\frac12[(K-1)\log|\Sigma_\eta| + tr(\Sigma_\eta^{-1}M)]` with
        :math:`M = \sum_k (V_k + d_k d_k^\top) = (K-1)\Sigma - \sum_k(\Sigma - V_k)
        + \sum_k d_kd_k^\top` (:func:`corrpriors.core.hyper_em.optimise_kernel`).

        Parameters
        ----------
        step_scale : float
            The scale ``step`` was computed with.
        scale : float
            The (updated) scale of the new prior.
        step : PsiStep
            A complete psi step with its ``reduction``.
        mean : ndarray of shape (C, K - 1)
            The prior means ``step`` was computed with.

        Returns
        -------
        DenseCovariancePrior
            ``self`` if the step does not improve the objective, else the prior of the new
            kernel (same jitter).
        """
        if self.kernel is None:
            raise ValueError("learn_kernel: needs a prior built from a bound kernel")
        km1 = step.psi_mean.shape[1]
        dmu = mean - step.psi_mean
        m_stat = km1 * step_scale * self.base - step.reduction + dmu @ dmu.T
        kernel, _, _ = hyper_em.optimise_kernel(self.kernel, scale, self.jitter, m_stat, km1)
        if kernel is self.kernel:
            return self
        return DenseCovariancePrior.from_kernel(kernel, jitter=self.jitter)

    def marginal_m_step(self, layout: StickLayout, resid: np.ndarray, noise: np.ndarray,
                        scale: float, *, learn_scale: bool,
                        scale_prior: tuple[float, float] | None = None
                        ) -> tuple[float, DenseCovariancePrior]:
        r"""The joint M-step of the scale and the kernel given :math:`q(\omega)`.

        Maximises the GP log marginal likelihood of the pseudo-observations
        (:func:`corrpriors.core.hyper_em.optimise_marginal`) over :math:`(\log\theta, \eta)`
        (or :math:`\eta` alone without ``learn_scale``).

        Parameters
        ----------
        layout : StickLayout
        resid, noise : ndarray of shape (E,)
            Pseudo-observations minus prior means, and their noise variances :math:`1/e`.
        scale : float
            The current :math:`\theta`.
        learn_scale : bool
        scale_prior : (shape, rate) or None

        Returns
        -------
        scale : float
        prior : DenseCovariancePrior
            ``self`` if the kernel did not change, else the prior of the new kernel (same
            jitter).
        """
        if self.kernel is None:
            raise ValueError("learn_kernel: needs a prior built from a bound kernel")
        new_scale, kernel = hyper_em.optimise_marginal(
            self.kernel, self.jitter, layout, resid, noise, scale, learn_scale=learn_scale,
            learn_kernel=True, scale_range=prior_scale_range(self), scale_prior=scale_prior)
        if kernel is self.kernel:
            return new_scale, self
        prior = DenseCovariancePrior.from_kernel(kernel, jitter=self.jitter)
        return float(np.clip(new_scale, *prior_scale_range(prior))), prior


__all__ = ["DenseCovariancePrior", "FactorWorkspace", "psi_step"]
