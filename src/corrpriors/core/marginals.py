r"""Per-entry marginals of the stick logits and the credible intervals of the probabilities.

Given the hyper-parameters the posterior factorises over sticks, and :math:`\pi_c` depends only on
:math:`\psi_{c1}, \dots, \psi_{c,K-1}`, which are therefore independent a posteriori. Credible
intervals of :math:`\pi_c` (and any other per-covariate summary) need only the one-dimensional
marginals of :math:`\psi_{ck}`, drawn independently across sticks: no joint draws, no
:math:`C \times C` work. :class:`MarginalPsi` holds such marginals (Gaussian, or tabulated
quantiles where they are not Gaussian); :class:`MarginalMixture` a weighted mixture of them over
a grid of hyper-parameters, whose draws share one hyper-parameter point across the sticks of
a draw; :func:`probability_interval` the central intervals of :math:`\pi` from draws.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._typing import FloatArray
from .stick_breaking import psi_to_pi

#: Normal scores at which non-Gaussian marginals are tabulated (quantile :math:`F^{-1}(\Phi(z))`);
#: draws beyond them (probability 2e-9) take the end values.
SCORES = np.linspace(-6.0, 6.0, 481)

#: Most numbers held by one block of draws (about 64 MB of float64).
BLOCK = 2 ** 23


@dataclass(frozen=True)
class MarginalPsi:
    r"""Independent marginals of every :math:`\psi_{ck}`.

    Attributes
    ----------
    mean, var : ndarray of shape (C, K - 1)
        Gaussian marginals :math:`N(mean, var)` of the entries without a table.
    entries : ndarray of shape (E,)
        Flat positions (C-ordered in (C, K - 1)) of the entries with a tabulated marginal.
    table : ndarray of shape (E, Z)
        Their quantiles at the normal scores :data:`SCORES`.
    """

    mean: np.ndarray
    var: np.ndarray
    entries: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.intp))
    table: np.ndarray = field(default_factory=lambda: np.zeros((0, SCORES.size)))

    @property
    def shape(self) -> tuple[int, int]:
        """(C, K - 1)."""
        return self.mean.shape

    def draw(self, z: np.ndarray, rows: slice) -> FloatArray:
        r"""Marginal draws from standard normal variates (the quantile transform).

        Parameters
        ----------
        z : ndarray of shape (M, R, K - 1)
            Independent standard normal variates for the covariates ``rows``.
        rows : slice
            A contiguous block of covariates (R of them).

        Returns
        -------
        ndarray of shape (M, R, K - 1)
        """
        mean, sd = self.mean[rows], np.sqrt(self.var[rows])
        out = mean + sd * z
        if self.entries.size == 0:
            return out
        km1 = self.mean.shape[1]
        start, stop, _ = rows.indices(self.mean.shape[0])
        lo, hi = np.searchsorted(self.entries, [start * km1, stop * km1])
        if lo == hi:
            return out
        local = self.entries[lo:hi] - start * km1
        r, k = np.divmod(local, km1)
        zs = z[:, r, k]  # (M, e)
        pos = (np.clip(zs, SCORES[0], SCORES[-1]) - SCORES[0]) / (SCORES[1] - SCORES[0])
        j = np.minimum(pos.astype(np.intp), SCORES.size - 2)
        frac = pos - j
        tab = self.table[lo:hi]
        cols = np.arange(hi - lo)[None, :]
        left = tab[cols, j]
        out[:, r, k] = left + frac * (tab[cols, j + 1] - left)
        return out


@dataclass(frozen=True)
class MarginalMixture:
    r"""A mixture over hyper-parameter points of per-entry marginals.

    Attributes
    ----------
    components : tuple of MarginalPsi
    weights : ndarray of shape (G,)
        Posterior weights of the points (summing to 1).
    points : ndarray of shape (G, P)
        The hyper-parameter points (log space; P = 0 for fixed hyper-parameters).
    names : tuple of str
        The P hyper-parameter names.
    method : str
        What built the marginals (``"ep"``, ``"vi"``, ...).
    """

    components: tuple
    weights: np.ndarray
    points: np.ndarray
    names: tuple = ()
    method: str = ""

    @classmethod
    def single(cls, marginals: MarginalPsi, method: str = "") -> MarginalMixture:
        """A mixture of one component (fixed hyper-parameters)."""
        return cls((marginals,), np.ones(1), np.zeros((1, 0)), (), method)

    @property
    def shape(self) -> tuple[int, int]:
        """(C, K - 1)."""
        return self.components[0].shape

    def allocation(self, n: int, *, rng: np.random.Generator) -> FloatArray:
        """Component of every one of ``n`` draws (systematic resampling, in random order).

        Returns
        -------
        ndarray of shape (n,), int
        """
        edges = np.cumsum(self.weights)
        u = (rng.random() + np.arange(n)) / n
        comp = np.minimum(np.searchsorted(edges / edges[-1], u, side="right"),
                          len(self.components) - 1)
        return rng.permutation(comp)

    def draw_psi(self, n: int, *, rng: np.random.Generator,
                 rows: slice = slice(None)) -> FloatArray:
        r"""Per-entry draws: the sticks of a draw are independent given its hyper-parameters.

        Parameters
        ----------
        n : int
            M.
        rng : numpy.random.Generator
        rows : slice
            Covariates to draw (default all).

        Returns
        -------
        ndarray of shape (M, R, K - 1)
        """
        c, km1 = self.shape
        start, stop, _ = rows.indices(c)
        rows = slice(start, stop)
        z = rng.standard_normal((n, stop - start, km1))
        if len(self.components) == 1:
            return self.components[0].draw(z, rows)
        comp = self.allocation(n, rng=rng)
        out = np.empty_like(z)
        for g in np.unique(comp):
            sel = comp == g
            out[sel] = self.components[g].draw(z[sel], rows)
        return out


def central_interval(draws: np.ndarray, level: float) -> tuple[FloatArray, FloatArray]:
    r"""The :math:`(1 - level)/2` and :math:`(1 + level)/2` quantiles along the first axis.

    The same numbers as ``np.quantile(draws, ..., axis=0)`` (linear interpolation between
    order statistics), by one partition of the contiguous transposed draws.

    Parameters
    ----------
    draws : ndarray of shape (M, ...)
    level : float

    Returns
    -------
    lower, upper : ndarray of shape (...)
    """
    m = draws.shape[0]
    flat = np.ascontiguousarray(draws.reshape(m, -1).T)
    pos = np.array([(1.0 - level) / 2.0, (1.0 + level) / 2.0]) * (m - 1)
    lo = np.floor(pos).astype(np.intp)
    hi = np.minimum(lo + 1, m - 1)
    part = np.partition(flat, np.unique(np.concatenate([lo, hi])), axis=1)
    q = part[:, lo] + (pos - lo) * (part[:, hi] - part[:, lo])
    return q[:, 0].reshape(draws.shape[1:]), q[:, 1].reshape(draws.shape[1:])


def probability_interval(mixture: MarginalMixture, level: float, n_samples: int, *,
                         rng: np.random.Generator, return_std: bool = False) -> Any:
    r"""Central credible intervals of every :math:`\pi_{ck}` from per-covariate draws.

    Parameters
    ----------
    mixture : MarginalMixture
    level : float
        In (0, 1).
    n_samples : int
        Draws per covariate (M).
    rng : numpy.random.Generator
    return_std : bool
        Also return the standard deviations of the draws.

    Returns
    -------
    lower, upper : ndarray of shape (C, K)
        The :math:`(1 - level)/2` and :math:`(1 + level)/2` quantiles of the draws.
    std : ndarray of shape (C, K)
        Only with ``return_std``.
    """
    c, km1 = mixture.shape
    out = np.empty((3, c, km1 + 1))
    step = max(1, BLOCK // max(1, n_samples * (km1 + 1)))
    for start in range(0, c, step):
        rows = slice(start, min(c, start + step))
        pi = psi_to_pi(mixture.draw_psi(n_samples, rng=rng, rows=rows))
        out[0, rows], out[1, rows] = central_interval(pi, level)
        if return_std:
            out[2, rows] = pi.std(axis=0, ddof=1)
    return (out[0], out[1], out[2]) if return_std else (out[0], out[1])


__all__ = ["BLOCK", "SCORES", "MarginalMixture", "MarginalPsi", "central_interval",
           "probability_interval"]
