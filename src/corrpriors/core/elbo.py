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
from scipy.special import gammaln

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


def log_binomial_coefficients(b: np.ndarray, x: np.ndarray) -> float:
    """``sum_{c,k} log C(b_ck, x_ck)`` (equals the log multinomial coefficients of the rows).

    Parameters
    ----------
    b : ndarray of shape (C, K - 1)
    x : ndarray of shape (C, K - 1)
        Counts of the first ``K - 1`` categories.

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
    b, kappa, psi_mean, w : ndarray of shape (C, K - 1)
    log_binom : float
    trace_dv, quad, logdet_b : ndarray of shape (K - 1,)

    Returns
    -------
    float
    """
    return likelihood_term(b, kappa, psi_mean, w, log_binom) - float(
        np.sum(kl_terms(trace_dv, quad, logdet_b)))


__all__ = ["log_cosh_half", "log_binomial_coefficients", "likelihood_term", "kl_terms",
           "elbo_value"]
