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

The likelihood sum has terms of size :math:`b` and a total of order :math:`\log b` per entry;
with large counts it is evaluated in a cancellation-free form (:func:`likelihood_term`,
:mod:`corrpriors._special`), so the ELBO and the collapsed bound are accurate to about
1e-10 relative for counts up to :math:`2^{53}` (larger counts are refused by
:func:`corrpriors._validation.check_counts`).
"""

from __future__ import annotations

import numpy as np

from .._special import (
    binomial_deviance,
    expected_softplus,
    log_binomial_at_mle,
    log_binomial_coefficient,
    log_cosh_half,
    log_cosh_half_gap,
    softplus_gap,
)
from .._typing import FloatArray

# A direct sum whose terms add up to ``scale`` in absolute value is off by at most about
# 64 eps scale (pairwise summation of products of a few correctly rounded factors); it is
# used when that is below _DIRECT_RTOL of its value, else the cancellation-free form.
_ROUNDING = 64.0 * np.finfo(float).eps
_DIRECT_RTOL = 1e-11
_LOG2 = float(np.log(2.0))


def _direct_if_accurate(direct: float, scale: float, accurate) -> float:
    """``direct`` if its rounding error bound ``_ROUNDING * scale`` is at most
    ``_DIRECT_RTOL * |direct|``, else ``accurate()``.
    """
    if _ROUNDING * scale <= _DIRECT_RTOL * abs(direct):
        return float(direct)
    return float(accurate())


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
    """``sum_{c,k} log C(b_ck, x_ck)`` (equals the log multinomial coefficients of the rows),
    to a few ulps for counts up to ``2**53``
    (:func:`~corrpriors._special.log_binomial_coefficient`).

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
    return float(np.sum(log_binomial_coefficient(b, x)))


def likelihood_term(b: np.ndarray, kappa: np.ndarray, psi_mean: np.ndarray, w: np.ndarray,
                    log_binom: float, *, psi_var: np.ndarray) -> float:
    r"""Expected augmented log-likelihood minus the PG entropy terms, at the optimal tilts
    :math:`w = \sqrt{V + \lambda^2}`:
    ``sum_{c,k} [log C(b, x) - b log 2 + kappa lambda - b log cosh(w/2)]``.

    That direct sum has terms of size :math:`b` and a total of order :math:`\log b` per entry,
    so with large counts it cancels (at :math:`10^{15}` every digit). It is returned when its
    rounding error bound is below 1e-11 of its value (small and moderate counts: the fast
    path); otherwise the same quantity is evaluated without cancellation as

    .. math::

        \sum_{c,k}\Big[\log Bin(x; b, \tfrac xb) - b\,KL(\tfrac xb \,\|\, \sigma(\lambda))
        - b\big(\log\cosh\tfrac w2 - \log\cosh\tfrac\lambda2\big)\Big]

    (:func:`~corrpriors._special.log_binomial_at_mle`,
    :func:`~corrpriors._special.binomial_deviance`,
    :func:`~corrpriors._special.log_cosh_half_gap`), with :math:`x = \kappa + b/2`.

    Parameters
    ----------
    b, kappa, psi_mean, w : ndarray of shape (C, K - 1), or of shape (E,)
    log_binom : float
        Precomputed :func:`log_binomial_coefficients`.
    psi_var : ndarray of shape (C, K - 1), or of shape (E,)
        Marginal variances :math:`V_{cc}` of the same entries.

    Returns
    -------
    float
    """
    kl = kappa * psi_mean
    n_total = float(np.sum(b))
    lch = float(np.vdot(b, log_cosh_half(w)))
    direct = log_binom - _LOG2 * n_total + float(np.sum(kl)) - lch
    scale = abs(log_binom) + _LOG2 * n_total + float(np.sum(np.abs(kl))) + lch

    def accurate() -> float:
        x = kappa + 0.5 * b
        return float(np.sum(log_binomial_at_mle(b, x)) - np.sum(binomial_deviance(b, x, psi_mean))
                     - np.vdot(b, log_cosh_half_gap(psi_mean, psi_var, w)))

    return _direct_if_accurate(direct, scale, accurate)


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
               logdet_b: np.ndarray, *, psi_var: np.ndarray) -> float:
    """Total ELBO: likelihood term minus the KL of every stick.

    Parameters
    ----------
    b, kappa, psi_mean, w : ndarray of shape (C, K - 1), or of shape (E,)
        The full arrays, or only the observed entries (``b > 0``; elsewhere ``b`` and
        ``kappa`` are zero, so those entries add nothing). ``w`` the optimal tilts
        (:func:`optimal_tilts`).
    log_binom : float
        Precomputed :func:`log_binomial_coefficients`.
    trace_dv, quad, logdet_b : ndarray of shape (K - 1,)
    psi_var : ndarray of shape (C, K - 1), or of shape (E,)
        Marginal variances of ``q(psi)`` at the same entries as ``psi_mean``.

    Returns
    -------
    float
    """
    return likelihood_term(b, kappa, psi_mean, w, log_binom, psi_var=psi_var) - float(
        np.sum(kl_terms(trace_dv, quad, logdet_b)))


def expected_log_likelihood(b: np.ndarray, x: np.ndarray, psi_mean: np.ndarray,
                            psi_var: np.ndarray, log_binom: float) -> float:
    r""":math:`E_q[\log p(X \mid \psi)]` of the stick-breaking binomials, exactly (no
    Polya-Gamma bound): :math:`\sum_{c,k} \log\binom{b}{x} + x\lambda - b\,E[\log(1 +
    e^{\psi})]` under the marginals :math:`N(\lambda_{ck}, (V_k)_{cc})`.

    The direct sum when its rounding error bound is below 1e-11 of its value, otherwise the
    cancellation-free :math:`\sum_{c,k} \log Bin(x; b, \tfrac xb) - b\,KL(\tfrac xb \,\|\,
    \sigma(\lambda)) - b\,(E[\log(1 + e^{\psi})] - \log(1 + e^{\lambda}))`
    (:func:`~corrpriors._special.softplus_gap`), as in :func:`likelihood_term`.

    Parameters
    ----------
    b, x, psi_mean, psi_var : ndarray of shape (C, K - 1)
    log_binom : float
        Precomputed :func:`log_binomial_coefficients`.

    Returns
    -------
    float
    """
    obs = b > 0
    bo, xo, mo, vo = b[obs], x[obs], psi_mean[obs], psi_var[obs]
    xl = xo * mo
    esp = float(np.vdot(bo, expected_softplus(mo, vo)))
    direct = log_binom + float(np.sum(xl)) - esp
    scale = abs(log_binom) + float(np.sum(np.abs(xl))) + esp

    def accurate() -> float:
        return float(np.sum(log_binomial_at_mle(bo, xo)) - np.sum(binomial_deviance(bo, xo, mo))
                     - np.vdot(bo, softplus_gap(mo, vo)))

    return _direct_if_accurate(direct, scale, accurate)


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

    :func:`expected_log_likelihood` and :func:`likelihood_term` share
    :math:`\sum\log Bin(x; b, \sigma(\lambda))`, so

    .. math:: L_\psi = L + \sum_{c,k} b_{ck}\big[\big(\log\cosh\tfrac{w}{2}
              - \log\cosh\tfrac{\lambda}{2}\big) - \big(E\log(1 + e^{\psi})
              - \log(1 + e^{\lambda})\big)\big],

    two small non-negative gaps per entry (the first is never below the second), which is
    how it is computed.

    Parameters
    ----------
    b, x, kappa, psi_mean, psi_var : ndarray of shape (C, K - 1)
        ``psi_var`` the marginal variances of the fitted :math:`q(\psi)`. Only the observed
        set ``b > 0`` of ``x`` and ``kappa`` matters (the binomial parts cancel).
    elbo : float
        The ELBO of the fit (tilts optimal for :math:`q(\psi)`).

    Returns
    -------
    float
    """
    obs = b > 0
    mean, var = psi_mean[obs], psi_var[obs]
    return float(elbo + np.sum(b[obs] * (log_cosh_half_gap(mean, var) - softplus_gap(mean, var))))


__all__ = ["optimal_tilts", "log_cosh_half", "log_binomial_coefficients", "likelihood_term",
           "kl_terms", "elbo_value", "expected_softplus", "expected_log_likelihood",
           "collapsed_bound"]
