r"""The evidence lower bound of the Polya-Gamma augmented correlated multinomial model.

With :math:`q(\psi_{\cdot k}) = N(\lambda_k, V_k)` and
:math:`q(\omega_{ck}) = PG(b_{ck}, w_{ck})`, evaluated at :math:`w_{ck}^2 = E_q[\psi_{ck}^2]`,

.. math::

    L = -\sum_k KL\big(N(\lambda_k, V_k) \,\|\, N(\mu_k, \Sigma)\big)
        + \sum_{c,k} \Big[\log\binom{b_{ck}}{x_{ck}} - b_{ck}\log 2 + \kappa_{ck}\lambda_{ck}
        - b_{ck}\log\cosh\frac{w_{ck}}{2}\Big].

In the factorised form used by :mod:`corrpriors.core.cavi`
(:math:`B_k = I + D^{1/2}\Sigma_{OO}D^{1/2} = L_k L_k^\top`, :math:`D = diag E[\omega_k]` on the
observed set :math:`O_k`):

.. math::

    2\,KL_k = -\sum_{c \in O_k} E[\omega_{ck}] (V_k)_{cc} + \alpha_k^\top\Sigma_{OO}\alpha_k
              + \log|B_k|,

because :math:`tr(\Sigma^{-1}V_k) = C - tr(D V_k)`, :math:`\log|\Sigma| - \log|V_k| = \log|B_k|`
and :math:`(\mu_k-\lambda_k)^\top\Sigma^{-1}(\mu_k-\lambda_k) = \alpha_k^\top\Sigma_{OO}\alpha_k`.
The sum of :math:`\log\binom{b_{ck}}{x_{ck}}` over sticks is the multinomial coefficient, so
:math:`L \le \log p(X)` for the multinomial likelihood. (The paper's printed ELBO has
:math:`|\Sigma|` for :math:`\log|\Sigma|` and :math:`C(K-1)` for :math:`C(K-1)/2`.)
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln, ndtr

from .._typing import FloatArray


def log_cosh_half(w: np.ndarray) -> FloatArray:
    """Stable ``log(cosh(w / 2))`` for any real ``w``.

    Parameters
    ----------
    w : ndarray of shape (...)

    Returns
    -------
    ndarray of shape (...)
    """
    a = np.abs(np.asarray(w, dtype=float)) * 0.5
    return a + np.log1p(np.exp(-2.0 * a)) - np.log(2.0)


def optimal_tilts(psi_mean: np.ndarray, psi_var: np.ndarray) -> FloatArray:
    r"""The omega step: tilts :math:`w = \sqrt{V_{cc} + \lambda_c^2}` that maximise the ELBO
    for :math:`q(\psi)` (then :math:`E[\omega] = b\tanh(w/2)/(2w)`).

    Parameters
    ----------
    psi_mean, psi_var : ndarray of shape (...)
        Marginal means and variances of :math:`q(\psi)` (the full (C, K - 1) arrays, or the
        observed entries only).

    Returns
    -------
    ndarray of shape (...)
    """
    return np.sqrt(np.maximum(psi_var, 0.0) + psi_mean ** 2)


def log_binomial_coefficients(b: np.ndarray, x: np.ndarray) -> float:
    """``sum_{c,k} log C(b_ck, x_ck)`` (equals the log multinomial coefficients of the rows).

    Parameters
    ----------
    b : ndarray of shape (C, K - 1), or of shape (E,)
    x : ndarray of shape (C, K - 1), or of shape (E,)
        Counts of the first ``K - 1`` categories (entries with ``b = 0`` add nothing, so the
        observed entries alone suffice).

    Returns
    -------
    float
    """
    return float(np.sum(gammaln(b + 1.0) - gammaln(x + 1.0) - gammaln(b - x + 1.0)))


def likelihood_term(b: np.ndarray, kappa: np.ndarray, psi_mean: np.ndarray, w: np.ndarray,
                    log_binom: float) -> float:
    r"""Expected augmented log-likelihood minus the PG entropy terms.

    ``sum_{c,k} [log C(b, x) - b log 2 + kappa lambda - b log cosh(w/2)]``.

    Parameters
    ----------
    b, kappa, psi_mean, w : ndarray of shape (C, K - 1)
    log_binom : float
        Precomputed :func:`log_binomial_coefficients`.

    Returns
    -------
    float
    """
    return float(log_binom - np.log(2.0) * b.sum() + np.sum(kappa * psi_mean)
                 - np.sum(b * log_cosh_half(w)))


def kl_terms(trace_dv: np.ndarray, quad: np.ndarray, logdet_b: np.ndarray) -> FloatArray:
    r"""Per-stick :math:`KL(q(\psi_{\cdot k}) \| p(\psi_{\cdot k}))` from the factorisation.

    Parameters
    ----------
    trace_dv : ndarray of shape (K - 1,)
        :math:`\sum_{c \in O_k} E[\omega_{ck}](V_k)_{cc}`, i.e. ``C - tr(Sigma^-1 V_k)``.
    quad : ndarray of shape (K - 1,)
        :math:`(\mu_k-\lambda_k)^\top\Sigma^{-1}(\mu_k-\lambda_k)`.
    logdet_b : ndarray of shape (K - 1,)
        :math:`\log|\Sigma| - \log|V_k| = \log|B_k|`.

    Returns
    -------
    ndarray of shape (K - 1,)
    """
    return 0.5 * (-trace_dv + quad + logdet_b)


def elbo_value(b: np.ndarray, kappa: np.ndarray, psi_mean: np.ndarray, w: np.ndarray,
               log_binom: float, trace_dv: np.ndarray, quad: np.ndarray,
               logdet_b: np.ndarray) -> float:
    """Total ELBO: likelihood term minus the KL of every stick.

    Parameters
    ----------
    b, kappa, psi_mean, w : ndarray of shape (C, K - 1), or of shape (E,)
        The full arrays, or only the observed entries (``b > 0``; elsewhere ``b`` and
        ``kappa`` are zero, so those entries add nothing).
    log_binom : float
    trace_dv, quad, logdet_b : ndarray of shape (K - 1,)

    Returns
    -------
    float
    """
    return likelihood_term(b, kappa, psi_mean, w, log_binom) - float(
        np.sum(kl_terms(trace_dv, quad, logdet_b)))


# Gauss-Hermite rule (probabilists', weights summing to 1) for narrow Gaussians and a
# panel Gauss-Legendre rule on psi in [-36, 36] (unit panels, split at the kink at 0) for wide
# ones; see expected_softplus.
_GH_NODES, _GH_WEIGHTS = np.polynomial.hermite_e.hermegauss(64)
_GH_WEIGHTS = _GH_WEIGHTS / _GH_WEIGHTS.sum()
_GL_X, _GL_W = np.polynomial.legendre.leggauss(10)
_PANEL_EDGES = np.arange(-36.0, 36.0)
_PANEL_NODES = (_PANEL_EDGES[:, None] + 0.5 * (_GL_X[None, :] + 1.0)).ravel()
_PANEL_WEIGHTS = np.tile(0.5 * _GL_W, _PANEL_EDGES.size)
_PANEL_TAIL = np.log1p(np.exp(-np.abs(_PANEL_NODES)))  # log(1 + e^-|psi|) at the nodes


def expected_softplus(mean: np.ndarray, var: np.ndarray) -> FloatArray:
    r""":math:`E[\log(1 + e^{\psi})]` for :math:`\psi \sim N(m, v)`, to about 1e-12.

    For :math:`v < 1`: 64-point Gauss-Hermite. For wider Gaussians (where Gauss-Hermite
    converges slowly, because the integrand bends on a unit scale):
    :math:`\log(1+e^\psi) = \max(\psi, 0) + \log(1 + e^{-|\psi|})`, the first part in
    closed form (:math:`m\Phi(m/s) + s\varphi(m/s)`), the second -- bounded by
    :math:`\log 2`, decaying like :math:`e^{-|\psi|}` -- by Gauss-Legendre on unit panels of
    :math:`[-36, 36]` split at its kink at 0 (the Gaussian density is smooth on that scale).

    Parameters
    ----------
    mean, var : ndarray of shape (n,)

    Returns
    -------
    ndarray of shape (n,)
    """
    m = np.asarray(mean, dtype=float).ravel()
    v = np.maximum(np.asarray(var, dtype=float).ravel(), 0.0)
    sd = np.sqrt(v)
    out = np.empty_like(m)
    narrow = v < 1.0
    if narrow.any():
        psi = m[narrow, None] + sd[narrow, None] * _GH_NODES
        out[narrow] = np.logaddexp(0.0, psi) @ _GH_WEIGHTS
    wide = ~narrow
    if wide.any():
        mw, sw = m[wide], sd[wide]
        a = mw / sw
        e_max = mw * ndtr(a) + sw * np.exp(-0.5 * a * a) / np.sqrt(2.0 * np.pi)
        z = (_PANEL_NODES[None, :] - mw[:, None]) / sw[:, None]
        dens = np.exp(-0.5 * z * z) / (np.sqrt(2.0 * np.pi) * sw[:, None])
        out[wide] = e_max + (dens * _PANEL_TAIL) @ _PANEL_WEIGHTS
    return out.reshape(np.shape(mean))


def expected_log_likelihood(b: np.ndarray, x: np.ndarray, psi_mean: np.ndarray,
                            psi_var: np.ndarray, log_binom: float) -> float:
    r""":math:`E_q[\log p(X \mid \psi)]` of the stick-breaking binomials, exactly (no
    Polya-Gamma bound): :math:`\sum_{c,k} \log\binom{b}{x} + x\lambda - b\,E[\log(1 +
    e^{\psi})]` under the marginals :math:`N(\lambda_{ck}, (V_k)_{cc})`.

    Parameters
    ----------
    b, x, psi_mean, psi_var : ndarray of shape (C, K - 1)
    log_binom : float

    Returns
    -------
    float
    """
    obs = b > 0
    return float(log_binom + np.sum(x[obs] * psi_mean[obs])
                 - np.sum(b[obs] * expected_softplus(psi_mean[obs], psi_var[obs])))


def collapsed_bound(b: np.ndarray, x: np.ndarray, kappa: np.ndarray, psi_mean: np.ndarray,
                    psi_var: np.ndarray, elbo: float) -> float:
    r"""The bound with the Polya-Gamma variables integrated out, at the same :math:`q(\psi)`.

    .. math:: L_\psi = E_q[\log p(X \mid \psi)] - KL(q(\psi) \| p(\psi)),

    with the KL recovered from the (mean-field) ``elbo`` at :math:`w^2 = E_q[\psi^2]`. Since
    the augmented likelihood term of the ELBO is a pointwise lower bound of
    :math:`\log p(X \mid \psi)` (the Jaakkola-Jordan bound), ``elbo <= L_psi <= log p(X)``.
    The gap between the two grows with the prior scale: with few counts and a large
    :math:`\theta` the mean-field ELBO can be loose by hundreds of nats while
    :math:`L_\psi` stays close to an importance-sampled :math:`\log p(X)`, which is why
    hyper-parameters are better compared by :math:`L_\psi`.

    Parameters
    ----------
    b, x, kappa, psi_mean, psi_var : ndarray of shape (C, K - 1)
        ``psi_var`` the marginal variances of the fitted :math:`q(\psi)`.
    elbo : float
        The ELBO of the fit (tilts optimal for :math:`q(\psi)`).

    Returns
    -------
    float
    """
    log_binom = log_binomial_coefficients(b, x)
    w = optimal_tilts(psi_mean, psi_var)
    kl = likelihood_term(b, kappa, psi_mean, w, log_binom) - elbo
    return expected_log_likelihood(b, x, psi_mean, psi_var, log_binom) - kl


__all__ = ["optimal_tilts", "log_cosh_half", "log_binomial_coefficients", "likelihood_term",
           "kl_terms", "elbo_value", "expected_softplus", "expected_log_likelihood",
           "collapsed_bound"]
