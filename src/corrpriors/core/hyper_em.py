r"""Variational EM (M-steps) for the prior's hyper-parameters.

With :math:`q` fixed, the ELBO depends on the prior through

.. math::

    f(\mu, \Sigma) = -\frac12\sum_{k=1}^{K-1}\Big[\log|\Sigma|
        + tr\big(\Sigma^{-1}(V_k + d_k d_k^\top)\big)\Big], \qquad d_k = \mu_k - \lambda_k .

* **Scale** (:math:`\Sigma = \theta\tilde\Sigma`):
  :math:`\theta^\ast = S / ((K-1)C)` with
  :math:`S = \sum_k tr(\tilde\Sigma^{-1}(V_k + d_k d_k^\top))`. (The paper prints
  :math:`1/(KC)`; the stationary point of :math:`f` has :math:`(K-1)C`.) With a
  :math:`Gamma(a, r)` hyper-prior (shape, rate) the MAP update is the positive root of
  :math:`2r\theta^2 + ((K-1)C - 2(a-1))\theta - S = 0`.
* **Constant mean** (:math:`\mu_k = m_k 1`):
  :math:`m_k^\ast = 1^\top\Sigma^{-1}\lambda_k / 1^\top\Sigma^{-1}1`, or with a
  :math:`N(m_0, \tau^2)` hyper-prior
  :math:`(1^\top\Sigma^{-1}\lambda_k + m_0/\tau^2) / (1^\top\Sigma^{-1}1 + 1/\tau^2)`.
* **Kernel parameters** :math:`\eta` (log space): maximise
  :math:`f(\eta) = -\frac12[(K-1)\log|\Sigma_\eta| + tr(\Sigma_\eta^{-1}M)]`,
  :math:`M = \sum_k (V_k + d_k d_k^\top)`, with gradient
  :math:`\partial f/\partial\eta_j = -\frac12 tr\big(((K-1)\Sigma^{-1} - \Sigma^{-1}M\Sigma^{-1})
  \,\partial\Sigma/\partial\eta_j\big)` (appendix B), by L-BFGS-B within the kernel's bounds.

All functions are pure and work on arrays; :func:`m_step` combines them for the CAVI driver.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.linalg import cho_solve
from scipy.optimize import minimize
from scipy.special import gammaln

from .._typing import FloatArray
from .priors.base import prior_scale_range


def scale_statistic(theta_old: float, n_covariates: int, trace_dv: np.ndarray,
                    quad: np.ndarray) -> float:
    r""":math:`S = \sum_k tr(\tilde\Sigma^{-1}(V_k + d_k d_k^\top))` from the factorisation.

    Uses :math:`tr(\tilde\Sigma^{-1}V_k) = \theta_{old}(C - tr(D_k V_k))` and
    :math:`d_k^\top\tilde\Sigma^{-1}d_k = \theta_{old}\,d_k^\top\Sigma^{-1}d_k`, so no inverse of
    :math:`\tilde\Sigma` is needed.

    Parameters
    ----------
    theta_old : float
        The scale used in the factorisation.
    n_covariates : int
        C.
    trace_dv : ndarray of shape (K - 1,)
        :math:`tr(D_k V_k)`.
    quad : ndarray of shape (K - 1,)
        :math:`d_k^\top\Sigma^{-1}d_k` at ``theta_old``.

    Returns
    -------
    float
    """
    return float(theta_old * np.sum(n_covariates - trace_dv + quad))


def update_scale(stat: float, n_covariates: int, n_sticks: int,
                 prior: tuple[float, float] | None = None) -> float:
    """Closed-form (MAP-)EM update of the scale.

    Parameters
    ----------
    stat : float
        :func:`scale_statistic`.
    n_covariates, n_sticks : int
        C and K - 1.
    prior : (shape, rate) or None
        Gamma hyper-prior on the scale.

    Returns
    -------
    float
        The maximiser of ``-(K-1)C/2 log t - S/(2t) [+ (a-1) log t - r t]``.
    """
    n = float(n_covariates * n_sticks)
    if prior is None:
        return stat / n
    a, r = prior
    beta = n - 2.0 * (a - 1.0)
    # positive root of 2 r t^2 + beta t - S = 0, written without cancellation
    disc = np.sqrt(beta * beta + 8.0 * r * stat)
    if beta >= 0:
        return float(2.0 * stat / (beta + disc))
    return float((disc - beta) / (4.0 * r))


def log_gamma_density(theta: float, prior: tuple[float, float]) -> float:
    """Log density of ``Gamma(shape, rate)`` at ``theta``."""
    a, r = prior
    return float(a * np.log(r) - gammaln(a) + (a - 1.0) * np.log(theta) - r * theta)


def log_normal_density(x: np.ndarray, loc: np.ndarray, std: float) -> float:
    """Sum of ``log N(x_i | loc_i, std^2)``."""
    z = (np.asarray(x) - loc) / std
    return float(np.sum(-0.5 * z * z - np.log(std) - 0.5 * np.log(2.0 * np.pi)))


def update_constant_mean(sigma_inv_ones: np.ndarray, psi_mean: np.ndarray,
                         prior_mean: np.ndarray | None = None,
                         prior_std: float | None = None) -> FloatArray:
    r"""Closed-form (MAP-)EM update of constant stick means :math:`\mu_k = m_k 1`.

    :math:`m_k = (1^\top\Sigma^{-1}\lambda_k + m_0/\tau^2) / (1^\top\Sigma^{-1}1 + 1/\tau^2)`
    (without the hyper-prior terms when ``prior_std`` is None).

    Parameters
    ----------
    sigma_inv_ones : ndarray of shape (C,)
        :math:`\Sigma^{-1}1` at the current (already updated) covariance.
    psi_mean : ndarray of shape (C, K - 1)
        :math:`\lambda`.
    prior_mean : ndarray of shape (K - 1,) or None
    prior_std : float or None
        Normal hyper-prior :math:`N(m_0, \tau^2)` on each ``m_k``.

    Returns
    -------
    ndarray of shape (K - 1,)
    """
    num = sigma_inv_ones @ psi_mean
    den = float(np.sum(sigma_inv_ones))
    if prior_std is not None:
        num = num + np.asarray(prior_mean, dtype=float) / prior_std ** 2
        den = den + 1.0 / prior_std ** 2
    return num / den


def kernel_objective(eta: np.ndarray, bound_kernel, scale: float, jitter: float,
                     m_stat: np.ndarray, n_sticks: int) -> tuple[float, FloatArray]:
    r"""Value and gradient of :math:`f(\eta)` (to be maximised).

    Parameters
    ----------
    eta : ndarray of shape (P,)
        Log-space kernel hyper-parameters.
    bound_kernel : BoundKernel
        Provides ``with_theta``, ``gram`` and ``gram_gradient``.
    scale : float
        :math:`\theta` multiplying the kernel.
    jitter : float
        The fixed diagonal jitter added to the Gram matrix.
    m_stat : ndarray of shape (C, C)
        :math:`M = \sum_k (V_k + d_k d_k^\top)`.
    n_sticks : int
        K - 1.

    Returns
    -------
    value : float
        ``-inf`` when the Gram matrix cannot be factorised.
    grad : ndarray of shape (P,)
    """
    kern = bound_kernel.with_theta(np.asarray(eta, dtype=float))
    gram = kern.gram()
    c = gram.shape[0]
    sigma = scale * (gram + jitter * np.eye(c))
    try:
        chol = np.linalg.cholesky(sigma)
    except np.linalg.LinAlgError:
        return -np.inf, np.zeros(len(eta))
    logdet = 2.0 * np.sum(np.log(np.diag(chol)))
    sinv_m = cho_solve((chol, True), m_stat)
    value = -0.5 * (n_sticks * logdet + np.trace(sinv_m))
    sinv = cho_solve((chol, True), np.eye(c))
    w = n_sticks * sinv - cho_solve((chol, True), sinv_m.T).T
    dgram = scale * np.asarray(kern.gram_gradient())  # (C, C, P)
    grad = -0.5 * np.einsum("ij,ijp->p", w, dgram)
    return float(value), grad


def optimise_kernel(bound_kernel, scale: float, jitter: float, m_stat: np.ndarray,
                    n_sticks: int, maxiter: int = 50) -> tuple[object, float, float]:
    """One kernel M-step: L-BFGS-B on ``-f(eta)`` in log space within the kernel's bounds.

    The step is accepted only if it increases ``f``, so the EM objective cannot drop.

    Returns
    -------
    kernel : BoundKernel
        The (possibly unchanged) bound kernel.
    f_old, f_new : float
    """
    eta0 = np.asarray(bound_kernel.theta, dtype=float)
    f0, _ = kernel_objective(eta0, bound_kernel, scale, jitter, m_stat, n_sticks)
    bounds = np.asarray(bound_kernel.bounds, dtype=float).reshape(-1, 2)

    def neg(eta):
        v, g = kernel_objective(eta, bound_kernel, scale, jitter, m_stat, n_sticks)
        if not np.isfinite(v):
            return 1e300, np.zeros_like(eta)
        return -v, -g

    res = minimize(neg, eta0, jac=True, method="L-BFGS-B", bounds=list(map(tuple, bounds)),
                   options={"maxiter": maxiter})
    f1 = -float(res.fun)
    if np.isfinite(f1) and f1 > f0:
        return bound_kernel.with_theta(np.asarray(res.x, dtype=float)), f0, f1
    return bound_kernel, f0, f0


def m_step(step: Any, hyper: Any, options: Any) -> Any:
    """All M-steps for the :math:`q` of one psi step: scale, kernel, then means.

    Parameters
    ----------
    step : PsiStep
        The sweep's statistics.
    hyper : corrpriors.core.cavi.Hyper
        The hyper-parameters the step was computed with.
    options : corrpriors.core.cavi.CAVIOptions

    Returns
    -------
    Hyper
        A new record (``hyper`` itself is not modified).
    """
    c, km1 = step.psi_mean.shape
    scale, mean, prior = hyper.scale, hyper.mean, hyper.prior
    if options.learn_scale:
        stat = scale_statistic(scale, c, step.trace_dv, step.quad)
        # the maximiser within the usable range (the objective is unimodal in the scale)
        scale = float(np.clip(update_scale(stat, c, km1, options.scale_prior),
                              *prior_scale_range(prior)))
    if options.learn_kernel:
        prior = prior.kernel_m_step(hyper.scale, scale, step, mean)
    if options.learn_mean == "constant" and not options.joint_mean:
        m_new = update_constant_mean(prior.precision_ones() / scale, step.psi_mean,
                                     options.mean_prior_mean, options.mean_prior_std)
        mean = np.repeat(m_new[None, :], c, axis=0)
    elif options.learn_mean == "full":
        mean = step.psi_mean.copy()
    return type(hyper)(scale, mean, prior)


__all__ = ["m_step", "scale_statistic", "update_scale", "log_gamma_density", "log_normal_density",
           "update_constant_mean", "kernel_objective", "optimise_kernel"]
