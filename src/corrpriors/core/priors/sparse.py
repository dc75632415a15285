r"""A sparse-precision prior structure: :math:`\tilde\Sigma = Q^{-1}` for a sparse SPD :math:`Q`.

The second implementation of :class:`~corrpriors.core.priors.GaussianPrior`, for large state
spaces (Gaussian Markov random fields, e.g. :func:`corrpriors.kernels.grid_precision`). With
:math:`\Sigma = \theta Q^{-1}` and the sites :math:`D_k = diag(e_k)` (zero off the observed
set), every stick's posterior has the sparse precision

.. math::

    P_k = Q/\theta + D_k, \qquad V_k = P_k^{-1}, \qquad
    \lambda_k = \mu_k + P_k^{-1}(\kappa_k - D_k\mu_k),

on one sparsity pattern for all sticks, iterations and scales, so the ordering and symbolic
factorisation are done once (:class:`~corrpriors.linalg.SparseCholesky`) and each
psi step costs one numeric factorisation and one selected inversion per stick (about
:math:`C^{1.5}` on 2-D grids, against :math:`C^3` dense). Everything stays exact:

* marginal variances :math:`diag\,V_k` by selected inversion (Takahashi recursions), on every
  covariate, so the psi step is always complete;
* :math:`\log|B_k| = \log|\Sigma| - \log|V_k| = \log|P_k| - \log|Q| + C\log\theta`;
* :math:`\alpha_k = \Sigma^{-1}(\lambda_k - \mu_k) = Q(\lambda_k - \mu_k)/\theta`, the quadratic
  term :math:`(\lambda_k - \mu_k)^\top\alpha_k` and :math:`tr(D_kV_k) = \sum_O e\,diag V_k`;
* joint draws :math:`\lambda_k + L_k^{-\top}z` from the factor (and the Gibbs conditional).

Kernel learning is not available (compare precisions with
:func:`~corrpriors.core.selection.select_kernel`); the scale is learned by EM or selected by
:func:`~corrpriors.core.selection.select_scale` as for any prior.
"""

from __future__ import annotations

import threading
import uuid
import weakref
from typing import Any

import numpy as np

from ..._typing import FloatArray
from ..._validation import check_precision
from ...linalg import NotPositiveDefiniteError, analysis_for
from .base import PsiStep, StickLayout, joint_constant_mean

#: A stick observed at no more than this many covariates is updated by the Woodbury identity
#: from the prior's factor (m + 1 solves) instead of a factorisation and a selected inversion
#: of :math:`Q/\theta + D_k` (rare categories -- a grid's diagonal moves, far jumps -- are
#: observed at a handful of states; at C = 10^4 - 10^5 one solve costs 1/9 - 1/15 of a
#: factorisation with its selected inversion).
LOW_RANK_MAX = 8

#: The priors alive in this process by their token (:meth:`SparsePrecisionPrior.__reduce__`):
#: a prior that travels to a worker process and back is this process's object again, and a
#: worker restores each prior once (its symbolic analysis and prior factor), not per task.
_LIVE: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_LIVE_LOCK = threading.Lock()


class _LowRankStick:
    r"""Posterior of a stick observed on a small set O, by the Woodbury identity.

    With :math:`\Sigma = \theta Q^{-1}` and :math:`M = D_O^{-1} + \Sigma_{OO}`:
    :math:`P^{-1} = \Sigma - \Sigma_{:O} M^{-1} \Sigma_{O:}` and
    :math:`\log|P| = C\log(1/\theta) + \log|Q| + \log|D_O| + \log|M|` (Sylvester). The
    :meth:`solve`, :meth:`inverse_diagonal` and :meth:`logdet` of a factor of
    :math:`P = Q/\theta + D`, exactly, from m + 1 solves with the prior's factor.
    """

    def __init__(self, prior: SparsePrecisionPrior, scale: float, observed: np.ndarray,
                 site: np.ndarray):
        self.prior, self.scale, self.observed = prior, float(scale), observed
        self.site = site
        c = prior.n_covariates
        if observed.size:
            e = np.zeros((c, observed.size))
            e[observed, np.arange(observed.size)] = 1.0
            self.sigma_o = self.scale * prior._prior_factor.solve(e)        # (C, m)
            m = np.diag(1.0 / site) + self.sigma_o[observed]
            self.chol = np.linalg.cholesky(0.5 * (m + m.T))
            self.logdet_m = 2.0 * float(np.sum(np.log(np.diag(self.chol)))) + \
                float(np.sum(np.log(site)))
        else:
            self.sigma_o = np.zeros((c, 0))
            self.logdet_m = 0.0

    def _m_solve(self, b: np.ndarray) -> np.ndarray:
        from scipy.linalg import cho_solve

        return cho_solve((self.chol, True), b)

    def solve(self, b: Any) -> np.ndarray:
        r""":math:`P^{-1} b` for b of shape (C,) or (C, r)."""
        x = self.scale * self.prior._prior_factor.solve(b)
        if self.observed.size:
            x = x - self.sigma_o @ self._m_solve(x[self.observed])
        return x

    def inverse_diagonal(self) -> np.ndarray:
        r""":math:`diag\,P^{-1}`, ndarray of shape (C,)."""
        var = self.scale * self.prior.prior_variance()
        if self.observed.size:
            w = self._m_solve(self.sigma_o.T)                                 # (m, C)
            var = var - np.einsum("ij,ji->i", self.sigma_o, w)
        return var

    def sample(self, z: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        r"""Draws with covariance :math:`P^{-1}` from standard normal ``z`` of shape (C, n).

        Matheron's rule: :math:`x_0 = \sqrt\theta\,L_Q^{-\top}z \sim N(0, \Sigma)` from the
        prior's factor, :math:`\varepsilon \sim N(0, D_O^{-1})` (drawn here, after ``z``), then
        :math:`x = x_0 - \Sigma_{:O} M^{-1}(x_{0,O} + \varepsilon) \sim N(0, P^{-1})`.
        """
        x = np.sqrt(self.scale) * self.prior._prior_factor.sample(z)
        if self.observed.size:
            eps = rng.standard_normal((self.observed.size, z.shape[1])) / np.sqrt(self.site)[:, None]
            x = x - self.sigma_o @ self._m_solve(x[self.observed] + eps)
        return x

    def logdet(self) -> float:
        r""":math:`\log|P|`."""
        c = self.prior.n_covariates
        return -c * np.log(self.scale) + self.prior.logdet_precision + self.logdet_m


class SparsePrecisionPrior:
    r"""The prior structure :math:`\tilde\Sigma = Q^{-1}` of a sparse precision (module docstring).

    Parameters
    ----------
    precision : scipy.sparse matrix or ndarray of shape (C, C)
        Symmetric positive definite :math:`Q` (validated).
    ordering : str, default="auto"
        Fill-reducing ordering of the sparse Cholesky factorisation.
    name : str
        Argument name for messages.
    size : int, optional
        Expected C.

    Attributes
    ----------
    precision : scipy.sparse.csr_array of shape (C, C)
    n_covariates : int
    jitter : float
        Always 0 (a positive-definite precision needs none).
    logdet_precision : float
        :math:`\log|Q|`.
    """

    def __init__(self, precision: Any, *, ordering: Any = "auto", name: str = "precision",
                 size: int | None = None):
        self.precision = check_precision(precision, name, size)
        self.n_covariates = int(self.precision.shape[0])
        self.jitter = 0.0
        self.name = name
        self._ordering = ordering
        self.analysis = analysis_for(self.precision, ordering)
        self._prepared = self.analysis.prepare(self.precision, name)   # validated once
        self._local = threading.local()    # one reusable factor workspace per thread
        self._prior_factor = self._factorize(1.0, None, reuse=False)
        self.logdet_precision = self._prior_factor.logdet()
        self._prior_variance: np.ndarray | None = None
        self.low_rank_max = LOW_RANK_MAX
        #: Iterate independent sticks separately (:func:`corrpriors.core.cavi.separable`):
        #: every update of an observed stick is a factorisation and a selected inversion.
        self.split_sticks = True
        self._token = uuid.uuid4().hex
        with _LIVE_LOCK:
            _LIVE[self._token] = self

    def __repr__(self) -> str:
        return (f"SparsePrecisionPrior(C={self.n_covariates}, nnz={self.precision.nnz}, "
                f"factor nnz={self.analysis.nnz_factor})")

    def __reduce__(self) -> tuple:
        """Pickle the precision and the settings only (about 1/20 of the analysis, factor and
        workspaces): the receiving process returns its live prior of the same token if it has
        one (the original, back in the process that made it; a worker's earlier copy), and
        otherwise redoes the symbolic analysis (:func:`~corrpriors.linalg.analysis_for`: once
        per pattern and process) and the prior's factor -- the same numbers.
        """
        settings = {"low_rank_max": self.low_rank_max, "split_sticks": self.split_sticks}
        return (_restore_prior, (self._token, self.precision, self._ordering, self.name,
                                 settings, self._prior_variance))

    def _factorize(self, scale: float, diagonal: np.ndarray | None, reuse: bool = True) -> Any:
        r"""Factor of :math:`Q/\theta + diag(d)`; with ``reuse`` into this thread's workspace
        (valid until this thread's next factorisation: the psi step and the draws use each
        stick's factor before the next one).
        """
        workspace = None
        if reuse:
            workspace = getattr(self._local, "workspace", None)
            if workspace is None:
                workspace = self._local.workspace = self.analysis.workspace()
        try:
            return self.analysis.factorize(self._prepared, scale=1.0 / scale, diagonal=diagonal,
                                           workspace=workspace)
        except NotPositiveDefiniteError as err:
            raise ValueError(f"{self.name}: expected a positive-definite precision; the "
                             f"Cholesky factorisation broke down at row/column {err.index}") \
                from None

    # ------------------------------------------------------------------ protocol
    def prior_variance(self) -> FloatArray:
        r""":math:`diag\,Q^{-1}`, ndarray of shape (C,) (selected inversion, cached)."""
        if self._prior_variance is None:
            self._prior_variance = self._prior_factor.inverse_diagonal()
        return self._prior_variance

    def precision_ones(self) -> FloatArray:
        r""":math:`Q\mathbf 1`, ndarray of shape (C,)."""
        return np.asarray(self.precision @ np.ones(self.n_covariates))

    def psi_step(self, layout: StickLayout, scale: float, mean: np.ndarray, kappa: np.ndarray,
                 site: np.ndarray, *, full: bool = False, reduction: bool = False,
                 constant_mean: tuple[np.ndarray, float] | None = None) -> PsiStep:
        r"""See :meth:`corrpriors.core.priors.GaussianPrior.psi_step` (always complete).

        With ``constant_mean``, :math:`\lambda_k(m) = g + m\,h` with :math:`g = P_k^{-1}\kappa_k`,
        :math:`h = P_k^{-1}Q\mathbf 1/\theta = \mathbf 1 - P_k^{-1}e_k`, and the GLS sums of
        :func:`~corrpriors.core.priors.joint_constant_mean` are
        :math:`\mathbf 1^\top Ay = \sum\kappa_k - e_k^\top g`, :math:`\mathbf 1^\top A\mathbf 1 =
        e_k^\top h` (two solves with the stick's factor).
        """
        if reduction:
            raise ValueError("learn_kernel: a precision prior has no kernel to learn; compare "
                             "precisions with select_kernel instead")
        c, km1 = mean.shape
        d = layout.scatter(site)
        mean = mean.copy()
        lam = mean.copy()
        var = np.repeat(scale * self.prior_variance()[:, None], km1, axis=1)
        alpha = np.zeros((c, km1))
        trace_dv, quad, logdet_b = np.zeros(km1), np.zeros(km1), np.zeros(km1)
        logdet_sigma = c * np.log(scale) - self.logdet_precision
        ones_q = None
        if constant_mean is not None:  # sticks without data: the hyper-prior's (or current) mean
            ones_q = self.precision_ones() / scale
            mean[:] = joint_constant_mean(np.zeros(km1), np.zeros(km1), mean[0],
                                          constant_mean)[None, :]
            lam[:] = mean
        for k in layout.sticks:
            observed = np.flatnonzero(d[:, k])
            factor = (_LowRankStick(self, scale, observed, d[observed, k])
                      if observed.size <= self.low_rank_max else self._factorize(scale, d[:, k]))
            if constant_mean is None or ones_q is None:  # (both or neither)
                delta = factor.solve(kappa[:, k] - d[:, k] * mean[:, k])  # lambda_k - mu_k
            else:
                gh = factor.solve(np.stack([kappa[:, k], ones_q], axis=1))
                g, h = gh[:, 0], gh[:, 1]
                m = joint_constant_mean(np.array([kappa[:, k].sum() - d[:, k] @ g]),
                                        np.array([d[:, k] @ h]), mean[:1, k],
                                        (np.asarray(constant_mean[0])[k:k + 1]
                                         if constant_mean[1] > 0 else np.zeros(1),
                                         constant_mean[1]))[0]
                mean[:, k] = m
                delta = g + m * h - m
            lam[:, k] = mean[:, k] + delta
            var[:, k] = factor.inverse_diagonal()
            alpha[:, k] = (self.precision @ delta) / scale
            quad[k] = float(delta @ alpha[:, k])
            trace_dv[k] = float(d[:, k] @ var[:, k])
            logdet_b[k] = logdet_sigma + factor.logdet()
        return PsiStep(lam, np.maximum(var, 0.0), alpha, trace_dv, quad, logdet_b, None,
                       complete=True, mean=None if constant_mean is None else mean)

    def complete_variances(self, layout: StickLayout, scale: float, site: np.ndarray,
                           step: PsiStep) -> FloatArray:
        """See :meth:`corrpriors.core.priors.GaussianPrior.complete_variances`."""
        if step.complete:
            return step.psi_var
        zeros = np.zeros(layout.observed.shape)
        return self.psi_step(layout, scale, zeros, zeros, site).psi_var

    def sample_posterior(self, scale: float, center: np.ndarray, site: np.ndarray, n: int, *,
                         rng: np.random.Generator,
                         pseudo: np.ndarray | None = None) -> FloatArray:
        r"""Joint draws :math:`m_k + P_k^{-1/2}z` per stick, :math:`P_k = Q/\theta + D_k`.

        The random numbers are drawn stick after stick (``standard_normal((C, n))`` each).
        See :meth:`corrpriors.core.priors.GaussianPrior.sample_posterior`.
        """
        c, km1 = center.shape
        m = int(n)
        out = np.empty((m, c, km1))
        for k in range(km1):
            z = rng.standard_normal((c, m))
            observed = np.flatnonzero(site[:, k])
            loc = center[:, k]
            if observed.size <= self.low_rank_max:   # the prior's factor (Matheron's rule)
                stick = _LowRankStick(self, scale, observed, site[observed, k])
                if pseudo is not None and observed.size:
                    loc = loc + stick.solve(site[:, k] * (pseudo[:, k] - center[:, k]))
                out[:, :, k] = (loc[:, None] + stick.sample(z, rng)).T
                continue
            factor = self._factorize(scale, site[:, k])
            if pseudo is not None:
                loc = loc + factor.solve(site[:, k] * (pseudo[:, k] - center[:, k]))
            out[:, :, k] = (loc[:, None] + factor.sample(z)).T
        return out


def _restore_prior(token: str, precision: Any, ordering: Any, name: str, settings: dict,
                   prior_variance: np.ndarray | None) -> SparsePrecisionPrior:
    """Unpickle a :class:`SparsePrecisionPrior` (see its ``__reduce__``)."""
    with _LIVE_LOCK:
        live = _LIVE.get(token)
    if live is not None and all(getattr(live, k) == v for k, v in settings.items()):
        return live
    prior = SparsePrecisionPrior.__new__(SparsePrecisionPrior)
    SparsePrecisionPrior.__init__(prior, precision, ordering=ordering, name=name)
    for key, value in settings.items():
        setattr(prior, key, value)
    prior._prior_variance = prior_variance
    with _LIVE_LOCK:   # (the same token: a later task in this process finds this object)
        _LIVE.pop(prior._token, None)
        prior._token = token
        _LIVE[token] = prior
    return prior


__all__ = ["SparsePrecisionPrior", "check_precision"]
