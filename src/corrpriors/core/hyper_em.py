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
from scipy.linalg import cho_factor, cho_solve
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


# ------------------------------------------------------------------------ joint (marginal) step
#: Trust region of one joint M-step (:func:`optimise_marginal`), in log units of the scale and
#: of the kernel's hyper-parameters: a factor of at most e = 2.72 per iteration (see
#: :func:`optimise_marginal`).
MARGINAL_MAX_LOG_STEP = 1.0


def marginal_objective(params: np.ndarray, bound_kernel: Any, jitter: float, layout: Any,
                       resid: np.ndarray, noise: np.ndarray, *, scale: float, learn_scale: bool,
                       scale_prior: tuple[float, float] | None = None
                       ) -> tuple[float, FloatArray]:
    r"""Value and gradient of the ELBO maximised over :math:`q(\psi)` with :math:`q(\omega)`
    fixed, as a function of :math:`(\log\theta, \eta)`.

    With :math:`q(\omega)` fixed the ELBO depends on :math:`\psi` through the Gaussian sites
    :math:`\exp(\kappa\psi - e\psi^2/2)`, :math:`e = E[\omega]`; its maximum over
    :math:`q(\psi)` is, up to terms free of the prior, the log marginal likelihood of GP
    regression of the pseudo-observations :math:`y = \kappa/e` with noise variances :math:`1/e`:

    .. math::

        g(\theta, \eta) = \sum_k \log N\big(y_{O_k};\ \mu_{O_k},\
            \theta(\tilde\Sigma_\eta + \epsilon I)_{O_kO_k} + D_k^{-1}\big)
            \;[+ \log Gamma(\theta \mid a, r)],

    with :math:`\partial g/\partial\phi = \frac12\sum_k tr\big((\alpha_k\alpha_k^\top -
    B_k^{-1})\,\partial B_k/\partial\phi\big)`, :math:`B_k = \theta\tilde\Sigma_{O_kO_k} +
    D_k^{-1}`, :math:`\alpha_k = B_k^{-1}(y - \mu)_{O_k}`. (The constant
    :math:`-\frac{|O|}{2}\log 2\pi` is left out.)

    Parameters
    ----------
    params : ndarray of shape (P,) or (P + 1,)
        :math:`(\log\theta, \eta)` with ``learn_scale``, else :math:`\eta`.
    bound_kernel : BoundKernel
    jitter : float
        :math:`\epsilon`, fixed.
    layout : StickLayout
    resid : ndarray of shape (E,)
        :math:`y - \mu` on the observed entries, stick after stick.
    noise : ndarray of shape (E,)
        :math:`1/e` on the observed entries.
    scale : float
        :math:`\theta` when it is not learned.
    learn_scale : bool
    scale_prior : (shape, rate) or None
        Gamma hyper-prior on :math:`\theta` (only with ``learn_scale``).

    Returns
    -------
    value : float
        ``-inf`` when a :math:`B_k` cannot be factorised.
    grad : ndarray of the shape of ``params``
    """
    params = np.asarray(params, dtype=float)
    n_scale = 1 if learn_scale else 0
    if learn_scale:
        scale = float(np.exp(params[0]))
    kern = bound_kernel.with_theta(params[n_scale:]) if params.size > n_scale else bound_kernel
    base = kern.gram()
    base[np.diag_indices_from(base)] += jitter
    w = np.zeros_like(base)  # sum_k (alpha alpha^T - B^-1), scattered onto the covariates
    value = 0.0
    es = layout.entry_bounds
    for s in range(layout.sticks.size):
        r, seg = layout.rows(s), slice(es[s], es[s + 1])
        b = scale * base[np.ix_(r, r)]
        b[np.diag_indices_from(b)] += noise[seg]
        try:
            chol = cho_factor(b, lower=True, check_finite=False)
        except np.linalg.LinAlgError:
            return -np.inf, np.zeros(params.size)
        alpha = cho_solve(chol, resid[seg], check_finite=False)
        value -= 0.5 * float(resid[seg] @ alpha) + float(np.sum(np.log(np.diag(chol[0]))))
        w[np.ix_(r, r)] += np.outer(alpha, alpha) - cho_solve(chol, np.eye(r.size),
                                                                check_finite=False)
    grad = np.empty(params.size)
    if learn_scale:
        grad[0] = 0.5 * scale * float(np.sum(w * base))
        if scale_prior is not None:
            value += log_gamma_density(scale, scale_prior)
            grad[0] += (scale_prior[0] - 1.0) - scale_prior[1] * scale
    if params.size > n_scale:
        grad[n_scale:] = 0.5 * scale * np.einsum("ij,ijp->p", w, kern.gram_gradient())
    return float(value), grad


def optimise_marginal(bound_kernel: Any, jitter: float, layout: Any, resid: np.ndarray,
                      noise: np.ndarray, scale: float, *, learn_scale: bool, learn_kernel: bool,
                      scale_range: tuple[float, float],
                      scale_prior: tuple[float, float] | None = None,
                      max_log_step: float = MARGINAL_MAX_LOG_STEP,
                      maxiter: int = 100) -> tuple[float, Any]:
    r"""The joint M-step: maximise :func:`marginal_objective` over :math:`(\log\theta, \eta)`.

    L-BFGS-B from the current values within ``scale_range``, the kernel's bounds and a trust
    region of ``max_log_step`` around the current values; the best point evaluated is kept and
    accepted only if it raises the objective, so the ELBO cannot drop.

    The trust region matters. The objective has flat regions: :math:`g` flattens out as
    :math:`\theta \to 0` (every hyper-parameter then stops mattering) and as the length scale
    falls below the covariates' spacing (the kernel matrix is then the identity). An
    unrestricted quasi-Newton step from a steep start lands on such a plateau, where the fit
    stalls at a worse point (measured: scale 1e-8 and an ELBO 0.06 below EM's; with a region
    of :math:`\pm 3` length scales of 0.05-0.15 on three of 80 small tables, 0.002-0.1 below
    EM's). Within :math:`\pm 1` (a factor :math:`e` per iteration) the fit follows the ascent
    as EM does, and reached an ELBO at least EM's on all 80 tables
    (``benchmarks/bench_kernel_learning.py``); a maximum on the boundary :math:`\theta \to 0`
    is still approached geometrically, so the objective's change per iteration measures the
    distance to it honestly.

    Parameters
    ----------
    bound_kernel : BoundKernel
    jitter : float
    layout : StickLayout
    resid, noise : ndarray of shape (E,)
        See :func:`marginal_objective`.
    scale : float
        The current :math:`\theta`.
    learn_scale, learn_kernel : bool
        Which of :math:`\theta` and :math:`\eta` to optimise (at least one).
    scale_range : (float, float)
        The usable range of :math:`\theta`.
    scale_prior : (shape, rate) or None
    max_log_step : float
        Half-width :math:`\Delta` of the trust region, in log units.
    maxiter : int
        L-BFGS-B iterations.

    Returns
    -------
    scale : float
    kernel : BoundKernel
        ``bound_kernel`` itself when :math:`\eta` is unchanged.
    """
    parts: list[np.ndarray] = []
    bounds: list[np.ndarray] = []
    if learn_scale:
        parts.append(np.array([np.log(scale)]))
        bounds.append(np.log(np.asarray(scale_range, dtype=float)).reshape(1, 2))
    if learn_kernel:
        parts.append(np.asarray(bound_kernel.theta, dtype=float))
        bounds.append(np.asarray(bound_kernel.bounds, dtype=float).reshape(-1, 2))
    box = np.concatenate(bounds)
    x0 = np.clip(np.concatenate(parts), box[:, 0], box[:, 1])
    box = np.column_stack([np.maximum(box[:, 0], x0 - max_log_step),
                           np.minimum(box[:, 1], x0 + max_log_step)])
    best: dict[str, Any] = {"value": -np.inf, "x": x0}

    def neg(x: np.ndarray) -> tuple[float, FloatArray]:
        v, g = marginal_objective(x, bound_kernel, jitter, layout, resid, noise, scale=scale,
                                  learn_scale=learn_scale, scale_prior=scale_prior)
        if not np.isfinite(v):
            return 1e300, np.zeros_like(x)
        if v > best["value"]:
            best.update(value=v, x=np.array(x, dtype=float))
        return -v, -g

    f0 = -neg(x0)[0]
    minimize(neg, x0, jac=True, method="L-BFGS-B", bounds=list(map(tuple, box)),
             options={"maxiter": maxiter, "ftol": 1e-13, "gtol": 1e-9})
    if not best["value"] > f0:
        return scale, bound_kernel
    x = best["x"]
    new_scale = float(np.exp(x[0])) if learn_scale else scale
    kernel = bound_kernel.with_theta(x[1 if learn_scale else 0:]) if learn_kernel else bound_kernel
    return new_scale, kernel

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


def marginal_m_step(layout: Any, kappa: np.ndarray, site: np.ndarray, hyper: Any,
                    options: Any) -> Any:
    r"""The joint M-step of the scale and the kernel with :math:`q(\omega)` fixed.

    Maximises the ELBO over :math:`(q(\psi), \theta, \eta)` together, given the sites
    :math:`e = E[\omega]` of the current :math:`q(\omega)`
    (:func:`marginal_objective`); the next psi step then computes the :math:`q(\psi)` that goes
    with the new hyper-parameters. Unlike the EM steps of :func:`m_step`, which hold
    :math:`q(\psi)` fixed, this step moves the scale and the length scale as far as the data
    allow in one iteration: holding :math:`q(\psi)` fixed couples the hyper-parameters to the
    previous posterior so tightly on small tables that EM needs thousands of iterations.

    Parameters
    ----------
    layout : StickLayout
    kappa : ndarray of shape (C, K - 1)
    site : ndarray of shape (E,)
        :math:`E[\omega]` on the observed entries, positive.
    hyper : corrpriors.core.cavi.Hyper
    options : corrpriors.core.cavi.CAVIOptions

    Returns
    -------
    Hyper
        A new record (the means are those of ``hyper``).
    """
    resid = layout.gather(kappa) / site - layout.gather(hyper.mean)
    scale, prior = hyper.prior.marginal_m_step(
        layout, resid, 1.0 / site, hyper.scale, learn_scale=options.learn_scale,
        scale_prior=options.scale_prior)
    return type(hyper)(scale, hyper.mean, prior)


__all__ = ["m_step", "scale_statistic", "update_scale", "log_gamma_density", "log_normal_density",
           "update_constant_mean", "kernel_objective", "optimise_kernel", "marginal_objective",
           "optimise_marginal", "marginal_m_step"]
