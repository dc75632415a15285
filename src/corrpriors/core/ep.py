r"""Expectation propagation (EP) for the correlated multinomial model, stick by stick.

Given the hyper-parameters the posterior factorises exactly over sticks: stick :math:`k` has the
prior :math:`\psi_{\cdot k} \sim N(\mu_k, \theta\tilde\Sigma)` and the likelihood
:math:`\prod_{c \in O_k} Bin(x_{ck}; b_{ck}, \sigma(\psi_{ck}))`. EP (Minka 2001) replaces every
binomial-logit factor by a Gaussian *site* :math:`\exp(\tilde\nu_{ck}\psi - \tilde\tau_{ck}
\psi^2/2)`, so the approximation is

.. math::

    q(\psi_{\cdot k}) = N(\lambda_k, V_k), \qquad
    V_k = \big((\theta\tilde\Sigma)^{-1} + diag\,\tilde\tau_{\cdot k}\big)^{-1}, \qquad
    \lambda_k = V_k\big(\tilde\nu_k + (\theta\tilde\Sigma)^{-1}\mu_k\big),

which is exactly the prior protocol's psi step with site precisions :math:`\tilde\tau` and linear
terms :math:`\tilde\nu` (:meth:`~corrpriors.core.priors.base.GaussianPrior.psi_step`): dense and sparse
priors work unchanged. The mean-field VI fit is the same family with
:math:`\tilde\tau = E[\omega]`, :math:`\tilde\nu = \kappa`, and is EP's starting point.

One *parallel* EP iteration: the psi step gives the marginals :math:`(\lambda_i, v_i)` of every
observed entry :math:`i`; the cavity removes the entry's site,
:math:`1/v_{-i} = 1/v_i - \tilde\tau_i`, :math:`m_{-i}/v_{-i} = \lambda_i/v_i - \tilde\nu_i`; the
tilted density :math:`N(m_{-i}, v_{-i})\,Bin(x_i; b_i, \sigma(\psi))` is moment-matched by
quadrature (:func:`~corrpriors.core.tilted.tilted_moments`); the new site makes the cavity times
site equal to those moments, and every site moves towards it (undamped; the step is halved
whenever the moment mismatch grows, which strongly coupled priors need). The binomial-logit
likelihood is log-concave, so every site precision stays positive and every cavity proper. EP
stops when every tilted mean and variance matches the marginal of :math:`q` (its fixed-point
condition) within ``tol``.

At the fixed point EP gives an approximation of the log evidence (Rasmussen & Williams 2006,
eq. 3.65, with a prior mean and binomial sites):

.. math::

    \log Z_{EP} = \sum_i \Big[\log\hat Z_i + \tfrac12\log(1 + v_{-i}\tilde\tau_i)
    + \frac{(\tilde\nu_i - \tilde\tau_i m_{-i})^2}{2\tilde\tau_i(1 + v_{-i}\tilde\tau_i)}\Big]
    - \tfrac12\sum_k\log|I + \Sigma D_k| - \tfrac12\sum_k y_k^\top(\Sigma_{OO} + D_k^{-1})^{-1}y_k,

with :math:`D_k = diag\,\tilde\tau_{\cdot k}`, :math:`y = \tilde\nu/\tilde\tau - \mu` on the observed
entries and :math:`\hat Z_i` the tilted normalisers (binomial coefficients included, so the
sum over sticks is the multinomial evidence). The psi step returns :math:`\log|I + \Sigma D_k|`,
and its :math:`\alpha_k = \Sigma^{-1}(\lambda_k - \mu_k)` equals
:math:`(\Sigma_{OO} + D_k^{-1})^{-1}y_k` on the observed entries (zero elsewhere), so the last
term is :math:`\sum y\alpha`. Unlike the ELBO and the collapsed bound, :math:`\log Z_{EP}` is not a
bound, but it is exact for one covariate and far closer to :math:`\log p(X)` when the prior
scale is large; :mod:`corrpriors.core.intervals` weights hyper-parameters by it.

References
----------
T. Minka (2001), "Expectation propagation for approximate Bayesian inference", UAI.
C. E. Rasmussen, C. K. I. Williams (2006), *Gaussian Processes for Machine Learning*, ch. 3.6.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._threads import blas_threads
from .._typing import FloatArray
from ..exceptions import ConvergenceWarning
from .cavi import CountData
from .priors.base import GaussianPrior, PsiStep
from .tilted import TiltedMoments, tilted_moments, tilted_quantiles

#: Smallest site precision kept (the likelihood of an entry far in a tail is almost flat).
MIN_SITE_PRECISION = 1e-12


@dataclass(frozen=True)
class EPOptions:
    """How EP iterates.

    Attributes
    ----------
    max_iter : int
        Cap on parallel EP iterations (psi steps).
    tol : float
        Stop when every tilted mean is within ``tol`` marginal standard deviations of the
        marginal of :math:`q` and every tilted variance within ``tol`` relative.
    damping : float
        Initial step size in (0, 1] of the site updates in natural parameters (1: undamped).
        Whenever the moment mismatch grows, the step is halved (down to ``min_damping``).
    min_damping : float
    warn : bool
        Warn when EP stops at ``max_iter`` before ``tol`` (off for a deliberately fixed number
        of updates, e.g. :data:`~corrpriors.core.loo.LOO_EP_OPTIONS`).
    """

    max_iter: int = 100
    tol: float = 1e-3
    damping: float = 1.0
    min_damping: float = 0.2
    warn: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.max_iter, bool) or not isinstance(self.max_iter, (int, np.integer)) \
                or self.max_iter < 1:
            raise ValueError(f"max_iter: expected a positive integer, got {self.max_iter!r}")
        if not (np.isfinite(self.tol) and self.tol > 0):
            raise ValueError(f"tol: expected a positive number, got {self.tol!r}")
        for name in ("damping", "min_damping"):
            value = getattr(self, name)
            if not (np.isfinite(value) and 0 < value <= 1):
                raise ValueError(f"{name}: expected a number in (0, 1], got {value!r}")


@dataclass(frozen=True)
class EPResult:
    r"""The EP approximation at fixed hyper-parameters.

    Attributes
    ----------
    psi_mean, psi_var : ndarray of shape (C, K - 1)
        Marginal means and variances of the Gaussian :math:`q(\psi)` (every entry).
    site_precision, site_linear : ndarray of shape (C, K - 1)
        :math:`\tilde\tau`, :math:`\tilde\nu` (zero off the observed entries).
    cavity_mean, cavity_var : ndarray of shape (E,)
        Cavities of the observed entries (``data.layout`` order) at the returned sites.
    log_evidence : float
        :math:`\log Z_{EP}` (module docstring).
    scale : float
    mean : ndarray of shape (C, K - 1)
        The prior means used.
    n_iter : int
        Psi steps computed.
    converged : bool
    residual : float
        The largest mismatch of tilted and marginal moments at the returned sites.
    """

    psi_mean: np.ndarray
    psi_var: np.ndarray
    site_precision: np.ndarray
    site_linear: np.ndarray
    cavity_mean: np.ndarray
    cavity_var: np.ndarray
    log_evidence: float
    scale: float
    mean: np.ndarray
    n_iter: int
    converged: bool
    residual: float


def divide_sites(mean: np.ndarray, var: np.ndarray, tau: np.ndarray, nu: np.ndarray,
                 min_precision: float | np.ndarray = 1e-300) -> tuple[FloatArray, FloatArray]:
    r"""Cavities: the Gaussian marginals :math:`N(m, v)` with the sites
    :math:`\exp(\nu\psi - \tau\psi^2/2)` divided out, elementwise.

    :math:`1/v_- = 1/v - \tau` (at least ``min_precision``: positive in exact arithmetic when
    the marginals contain the sites), :math:`m_-/v_- = m/v - \nu`. Returns ``(m_-, v_-)``.
    """
    cav_prec = np.maximum(1.0 / var - tau, min_precision)
    return (mean / var - nu) / cav_prec, 1.0 / cav_prec


def cavities(step: PsiStep, data: CountData, tau: np.ndarray,
             nu: np.ndarray) -> tuple[FloatArray, FloatArray]:
    """Cavity means and variances (E,) of the observed entries under ``step``'s marginals."""
    return divide_sites(data.layout.gather(step.psi_mean), data.layout.gather(step.psi_var), tau, nu)


def log_evidence(step: PsiStep, data: CountData, mean: np.ndarray, tau: np.ndarray,
                 nu: np.ndarray, cav_mean: np.ndarray, cav_var: np.ndarray,
                 log_z: np.ndarray) -> float:
    r""":math:`\log Z_{EP}` from a psi step at sites ``(tau, nu)`` (module docstring).

    Parameters
    ----------
    step : PsiStep
        The psi step with site precisions ``tau`` and linear terms ``nu``.
    data : CountData
    mean : ndarray of shape (C, K - 1)
        Prior means.
    tau, nu, cav_mean, cav_var, log_z : ndarray of shape (E,)
        Sites, cavities and tilted log normalisers of the observed entries.

    Returns
    -------
    float
    """
    layout = data.layout
    y = nu / tau - layout.gather(mean)
    quad = float(np.dot(y, layout.gather(step.alpha)))
    one_plus = 1.0 + cav_var * tau
    sites = log_z + 0.5 * np.log(one_plus) + (nu - tau * cav_mean) ** 2 / (2.0 * tau * one_plus)
    value = float(np.sum(sites) - 0.5 * np.sum(step.logdet_b) - 0.5 * quad)
    if not np.isfinite(value):
        raise FloatingPointError("the EP log evidence is not finite (extreme sites?)")
    return value


def _residual(step: PsiStep, data: CountData, tilted: TiltedMoments) -> float:
    lam = data.layout.gather(step.psi_mean)
    v = data.layout.gather(step.psi_var)
    if lam.size == 0:
        return 0.0
    return float(max(np.max(np.abs(tilted.mean - lam) / np.sqrt(v)),
                     np.max(np.abs(tilted.var / v - 1.0))))


def run_ep(data: CountData, prior: GaussianPrior, scale: float, mean: np.ndarray,
           site_precision: np.ndarray, site_linear: np.ndarray,
           options: EPOptions = EPOptions()) -> EPResult:
    r"""Parallel EP from the sites ``(site_precision, site_linear)`` (module docstring).

    Parameters
    ----------
    data : CountData
    prior : GaussianPrior
    scale : float
        :math:`\theta`.
    mean : ndarray of shape (C, K - 1)
        Prior means :math:`\mu`.
    site_precision, site_linear : ndarray of shape (E,)
        Starting sites on ``data.layout``'s observed entries (e.g. the VI fit's
        :math:`E[\omega]` and :math:`\kappa`, or another EP result's).
    options : EPOptions

    Returns
    -------
    EPResult
    """
    layout = data.layout
    tau = np.maximum(np.asarray(site_precision, float), MIN_SITE_PRECISION)
    nu = np.asarray(site_linear, float).copy()
    converged, n_iter, residual, damping = False, 0, np.inf, options.damping
    with blas_threads(1):
        while True:
            step = prior.psi_step(layout, scale, mean, layout.scatter(nu), tau)
            n_iter += 1
            cav_mean, cav_var = cavities(step, data, tau, nu)
            tilted = tilted_moments(cav_mean, cav_var, data.b_obs, data.x_obs)
            if not (np.all(np.isfinite(tilted.mean)) and np.all(tilted.var > 0)):
                raise FloatingPointError("EP: a tilted distribution has no finite mean or "
                                         "positive variance (extreme prior scale or counts?)")
            previous, residual = residual, _residual(step, data, tilted)
            if residual > previous:
                damping = max(0.5 * damping, min(options.min_damping, options.damping))
            converged = residual <= options.tol
            if converged or n_iter >= options.max_iter:
                break
            new_tau = np.maximum(1.0 / tilted.var - 1.0 / cav_var, MIN_SITE_PRECISION)
            new_nu = tilted.mean / tilted.var - cav_mean / cav_var
            tau += damping * (new_tau - tau)
            nu += damping * (new_nu - nu)
        value = log_evidence(step, data, mean, tau, nu, cav_mean, cav_var, tilted.log_z)
        var = prior.complete_variances(layout, scale, tau, step)
    if not converged and options.warn:
        warnings.warn(f"EP did not converge in {options.max_iter} iterations (largest moment "
                      f"mismatch {residual:.2g} > tol {options.tol:g}); the result is recorded "
                      f"with converged=False.", ConvergenceWarning, stacklevel=2)
    return EPResult(step.psi_mean, var, layout.scatter(tau), layout.scatter(nu), cav_mean,
                    cav_var, value, float(scale), mean, n_iter, converged, residual)





def ep_marginals(ep: EPResult, data: CountData, *, tilted: bool = True) -> Any:
    r"""Per-entry marginals of :math:`\psi` from an EP result.

    With ``tilted`` the observed entries get the tilted marginal (the cavity times the entry's
    exact binomial likelihood, tabulated by :func:`~corrpriors.core.tilted.tilted_quantiles`),
    a better one-dimensional marginal than the Gaussian of :math:`q` (Cseke & Heskes 2011);
    the other entries keep the Gaussian marginals of :math:`q`.

    Parameters
    ----------
    ep : EPResult
    data : CountData
    tilted : bool

    Returns
    -------
    MarginalPsi
    """
    from .marginals import SCORES, MarginalPsi

    if not tilted or data.layout.entry_flat.size == 0:
        return MarginalPsi(ep.psi_mean, ep.psi_var)
    order = np.argsort(data.layout.entry_flat)
    table = tilted_quantiles(ep.cavity_mean[order], ep.cavity_var[order], data.b_obs[order],
                             data.x_obs[order], SCORES)
    return MarginalPsi(ep.psi_mean, ep.psi_var, data.layout.entry_flat[order], table)


__all__ = ["EPOptions", "EPResult", "cavities", "divide_sites", "ep_marginals", "log_evidence", "run_ep"]
