r"""Logistic stick-breaking map and the count statistics of the binomial expansion.

The map :math:`\Pi_{SB}: \mathbb{R}^{K-1} \to \Delta^{K}` is

.. math::

    \pi_k = \sigma(\psi_k) \prod_{j<k} (1 - \sigma(\psi_j)), \quad k < K, \qquad
    \pi_K = \prod_{j<K} (1 - \sigma(\psi_j)).

Everything is computed in log space (``log sigma(x) = -logaddexp(0, -x)``), so the
result stays on the simplex for ``|psi|`` up to 1e3 and beyond.

The multinomial likelihood factorises into K-1 binomials,
``x_ck ~ Bin(b_ck, sigma(psi_ck))`` with ``b_ck = N_c - sum_{j<k} x_cj``, and the
Polya-Gamma augmentation uses ``kappa_ck = x_ck - b_ck / 2``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from .._typing import FloatArray
from .._validation import as_real_array, check_simplex


def log_sigmoid(x: np.ndarray) -> np.ndarray:
    """Numerically stable ``log(sigmoid(x))``."""
    return -np.logaddexp(0.0, -np.asarray(x, dtype=float))


def log_probs(psi) -> FloatArray:
    """Log of the stick-breaking image, stable for extreme ``psi``.

    Parameters
    ----------
    psi : array_like of shape (..., K-1)

    Returns
    -------
    log_pi : ndarray of shape (..., K)
    """
    psi = np.asarray(psi, dtype=float)
    if psi.ndim == 0 or psi.shape[-1] < 1:
        raise ValueError(f"psi: expected shape (..., K-1) with K-1 >= 1, got {psi.shape}")
    log_stick = log_sigmoid(psi)            # log sigma(psi_k)
    log_rest = log_sigmoid(-psi)            # log(1 - sigma(psi_k))
    cum_rest = np.cumsum(log_rest, axis=-1)  # sum_{j<=k} log(1 - sigma_j)
    out = np.empty(psi.shape[:-1] + (psi.shape[-1] + 1,))
    out[..., 0] = log_stick[..., 0]
    out[..., 1:-1] = log_stick[..., 1:] + cum_rest[..., :-1]
    out[..., -1] = cum_rest[..., -1]
    return out


def psi_to_pi(psi) -> FloatArray:
    """Stick-breaking map ``psi -> pi``.

    Parameters
    ----------
    psi : array_like of shape (..., K-1)

    Returns
    -------
    pi : ndarray of shape (..., K)
        Non-negative, sums to one along the last axis.
    """
    psi = np.asarray(psi, dtype=float)
    if psi.ndim == 0 or psi.shape[-1] < 1:
        raise ValueError(f"psi: expected shape (..., K-1) with K-1 >= 1, got {psi.shape}")
    # products of sigma(psi) and 1 - sigma(psi) = sigma(-psi), each accurate to a few ulps
    # relative: the same numbers as exp(log_probs(psi)) at a third of the cost
    stick = expit(psi)
    rest = np.cumprod(expit(-psi), axis=-1)
    pi = np.empty(psi.shape[:-1] + (psi.shape[-1] + 1,))
    pi[..., 0] = stick[..., 0]
    pi[..., 1:-1] = stick[..., 1:] * rest[..., :-1]
    pi[..., -1] = rest[..., -1]
    # Exact renormalisation guards against round-off when all mass sits on one category.
    return pi / pi.sum(axis=-1, keepdims=True)


def pi_to_psi(pi) -> FloatArray:
    """Inverse stick-breaking map ``pi -> psi``.

    ``psi_k = log pi_k - log(sum_{j>k} pi_j)``; the tail sums are computed directly
    (not as ``1 - cumsum``) so small probabilities keep their relative accuracy.
    Zero probabilities map to ``-inf`` / ``+inf`` as the limit dictates: ``pi_k = 0`` with
    mass left after ``k`` gives ``-inf``, ``pi_k > 0`` with none left after it gives ``+inf``.
    Once the stick is used up (``sum_{j>=k} pi_j = 0``) the later logits do not affect ``pi``
    at all; they are returned as ``0`` (not ``log 0 - log 0 = NaN``), so
    ``psi_to_pi(pi_to_psi(pi))`` gives back every zero exactly.

    Parameters
    ----------
    pi : array_like of shape (..., K)
        Rows on the simplex: finite, non-negative, summing to one (to ``1e-6``).

    Returns
    -------
    psi : ndarray of shape (..., K-1)
    """
    pi = as_real_array(pi, "pi").astype(np.float64)
    if pi.ndim == 0 or pi.shape[-1] < 2:
        raise ValueError(f"pi: expected shape (..., K) with K >= 2, got {pi.shape}")
    if np.isnan(pi).any():
        raise ValueError("pi: contains NaN")
    if (pi < 0).any():
        raise ValueError(f"pi: probabilities must be non-negative, found {pi.min():g}")
    pi = check_simplex(pi, "pi", atol=0.0)
    tail = np.cumsum(pi[..., ::-1], axis=-1)[..., ::-1]  # tail[k] = sum_{j>=k} pi_j
    with np.errstate(divide="ignore", invalid="ignore"):
        psi = np.log(pi[..., :-1]) - np.log(tail[..., 1:])
    # stick used up before k: psi_k is unidentified (0 * anything); 0 keeps psi_to_pi exact
    psi[tail[..., :-1] == 0.0] = 0.0
    return psi


def uniform_psi(n_categories: int) -> FloatArray:
    """The ``psi`` whose stick-breaking image is the uniform distribution.

    ``psi_k = -log(K - k)`` for ``k = 1, ..., K-1``.

    Returns
    -------
    psi : ndarray of shape (K-1,)
    """
    K = int(n_categories)
    if K < 2:
        raise ValueError(f"n_categories: expected K >= 2, got {n_categories}")
    return -np.log(K - np.arange(1, K, dtype=float))


def log_det_jacobian(psi) -> FloatArray:
    """``log |det d pi_{1:K-1} / d psi|`` of the stick-breaking map.

    The Jacobian is lower triangular with diagonal ``pi_k (1 - sigma(psi_k))``.

    Parameters
    ----------
    psi : array_like of shape (..., K-1)

    Returns
    -------
    logdet : ndarray of shape (...)
    """
    psi = np.asarray(psi, dtype=float)
    lp = log_probs(psi)[..., :-1]
    return np.sum(lp + log_sigmoid(-psi), axis=-1)


def count_statistics(counts) -> tuple[FloatArray, FloatArray]:
    """Binomial-expansion statistics of a count matrix.

    Parameters
    ----------
    counts : array_like of shape (C, K)
        Non-negative counts (validated by the caller).

    Returns
    -------
    b : ndarray of shape (C, K-1)
        ``b_ck = N_c - sum_{j<k} x_cj``: the trials left for stick k.
    kappa : ndarray of shape (C, K-1)
        ``kappa_ck = x_ck - b_ck / 2``.
    """
    x = np.asarray(counts, dtype=float)
    tail = np.cumsum(x[..., ::-1], axis=-1)[..., ::-1]  # sum_{j>=k} x_j
    b = tail[..., :-1]
    kappa = x[..., :-1] - 0.5 * b
    return b, kappa


__all__ = ["psi_to_pi", "pi_to_psi", "log_probs", "log_sigmoid", "uniform_psi",
           "log_det_jacobian", "count_statistics"]
