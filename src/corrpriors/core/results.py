"""Frozen result records of the variational fit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class VIResult:
    r"""Result of a variational fit of the correlated multinomial model.

    Symbols: C covariates (rows of the count matrix), K categories (``K - 1`` sticks).

    Attributes
    ----------
    psi_mean : ndarray of shape (C, K - 1)
        Variational means :math:`\lambda_{ck}`.
    psi_var : ndarray of shape (C, K - 1)
        Marginal variational variances :math:`(V_k)_{cc}`.
    w : ndarray of shape (C, K - 1)
        Tilts of :math:`q(\omega_{ck}) = PG(b_{ck}, w_{ck})`, ``w = sqrt(psi_var + psi_mean**2)``.
    omega_mean : ndarray of shape (C, K - 1)
        :math:`E_q[\omega_{ck}]` under the returned :math:`q(\omega)` (zero where
        :math:`b_{ck} = 0`).
    site_precision : ndarray of shape (C, K - 1)
        The :math:`E[\omega]` that defines the returned :math:`q(\psi)`:
        :math:`V_k = (\Sigma^{-1} + diag(site\_precision_{\cdot k}))^{-1}` (the previous omega
        step's value; equal to ``omega_mean`` at convergence).
    mean : ndarray of shape (C, K - 1)
        Prior means :math:`\mu_k` at the returned parameters.
    prior : GaussianPrior
        The prior structure :math:`\tilde\Sigma` actually used (jittered, with the learned
        kernel); the prior covariance is ``scale`` times it.
    scale : float
        :math:`\theta` (1.0 unless learned).
    kernel_theta : ndarray of shape (P,) or None
        Log-space kernel hyper-parameters at the returned parameters (``None`` when the
        covariance was given as an array).
    elbo : float
        ELBO at the returned parameters, a lower bound of ``log p(X)`` (multinomial likelihood).
    objective : float
        ``elbo`` plus the log densities of the hyper-priors (equal to ``elbo`` without them).
    elbo_trace : ndarray of shape (n_iter,)
        ELBO after every iteration.
    objective_trace : ndarray of shape (n_iter,)
        Objective after every iteration; never decreases.
    n_iter : int
        Number of accepted CAVI iterations (the length of the traces).
    converged : bool
        Whether the relative change of the objective fell below ``tol``.
    jitter : float
        The diagonal jitter :math:`\epsilon` added to the base covariance.
    n_psi_steps : int
        Number of psi steps computed (``n_iter`` plus rejected accelerated steps); with
        sticks iterated separately (see :func:`~corrpriors.core.cavi.run_cavi`) the most any
        stick took.
    n_stick_steps : int
        Stick updates computed: the number of non-empty sticks times ``n_psi_steps``, or with
        sticks iterated separately the sum over the sticks (the cost of a sparse prior: one
        factorisation per update of an observed stick).
    monotone : bool
        No plain step lowered the objective by more than round-off (when False the arithmetic
        broke down and ``converged`` is False).
    """

    psi_mean: np.ndarray
    psi_var: np.ndarray
    w: np.ndarray
    omega_mean: np.ndarray
    site_precision: np.ndarray
    mean: np.ndarray
    prior: Any
    scale: float
    kernel_theta: np.ndarray | None
    elbo: float
    objective: float
    elbo_trace: np.ndarray
    objective_trace: np.ndarray
    n_iter: int
    converged: bool
    jitter: float
    n_psi_steps: int = 0
    monotone: bool = True
    n_stick_steps: int = 0

    @property
    def covariance(self) -> np.ndarray:
        """Ndarray of shape (C, C): the dense base covariance of a dense prior."""
        base = getattr(self.prior, "base", None)
        if base is None:
            raise AttributeError(f"covariance: the prior {type(self.prior).__name__} has no dense "
                                 "covariance matrix")
        return base


__all__ = ["VIResult"]
