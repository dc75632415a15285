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
from scipy.special import expit, ndtri
from scipy.stats import qmc

from .._typing import FloatArray

#: The most dimensions of scipy's Sobol' sequences (its direction numbers);
#: :meth:`MarginalMixture.draw_sticks` draws independent uniforms beyond (plain Monte Carlo).
SOBOL_MAX_DIM = int(getattr(qmc.Sobol, "MAXDIM", 21201))

#: Normal scores at which non-Gaussian marginals are tabulated (quantile :math:`F^{-1}(\Phi(z))`);
#: draws beyond them (probability 2e-9) take the end values.
SCORES = np.linspace(-6.0, 6.0, 121)

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
        Flat positions (C-ordered in (C, K - 1)), increasing, of the entries with a tabulated
        marginal.
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
        r"""Marginal draws from normal scores (the quantile transform), shared by the rows.

        Parameters
        ----------
        z : ndarray of shape (K - 1, M)
            Normal scores, one row per stick; every covariate of ``rows`` uses the same ones
            (per-covariate draws: the covariates are not jointly distributed).
        rows : slice
            A contiguous block of covariates (R of them).

        Returns
        -------
        ndarray of shape (K - 1, R, M)
            Stick-major, each covariate's draws contiguous.
        """
        mean, sd = self.mean[rows].T, np.sqrt(self.var[rows]).T  # (K - 1, R)
        out = mean[:, :, None] + sd[:, :, None] * z[:, None, :]
        if self.entries.size == 0:
            return out
        km1 = self.mean.shape[1]
        start, stop, _ = rows.indices(self.mean.shape[0])
        lo, hi = np.searchsorted(self.entries, [start * km1, stop * km1])
        if lo == hi:
            return out
        r, k = np.divmod(self.entries[lo:hi] - start * km1, km1)
        pos = (np.clip(z, SCORES[0], SCORES[-1]) - SCORES[0]) / (SCORES[1] - SCORES[0])
        j = np.minimum(pos.astype(np.intp), SCORES.size - 2)  # (K - 1, M)
        frac = pos - j
        tab = self.table[lo:hi]
        for stick in np.unique(k):
            sel = np.flatnonzero(k == stick)
            left = tab[sel][:, j[stick]]  # (e, M)
            out[stick, r[sel]] = left + frac[stick] * (tab[sel][:, j[stick] + 1] - left)
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

    def allocation(self, u: np.ndarray) -> FloatArray:
        """Component of every draw from uniforms ``u`` (shape (M,)): inverse CDF of the weights.

        Returns
        -------
        ndarray of shape (M,), int
        """
        edges = np.cumsum(self.weights)
        return np.minimum(np.searchsorted(edges / edges[-1], u, side="right"),
                          len(self.components) - 1)

    def draw_sticks(self, n: int, *, rng: np.random.Generator, rows: slice = slice(None),
                    quasi: bool = True) -> FloatArray:
        r"""Per-covariate draws by randomised quasi-Monte Carlo, stick-major.

        One scrambled Sobol' sequence (Owen 1998) in K - 1 dimensions (one per stick; one more
        choosing the mixture component) gives the normal scores of every draw; the covariates
        of ``rows`` share them, each through its own marginals (:meth:`MarginalPsi.draw`). The
        sticks of a draw are independent given its hyper-parameter point, as in the posterior;
        the covariates are not jointly distributed. Randomised QMC is unbiased like plain Monte
        Carlo and more accurate per draw; every call scrambles anew.

        Parameters
        ----------
        n : int
            M (the first M points of a sequence of the next power of two).
        rng : numpy.random.Generator
        rows : slice
            Covariates to draw (default all).
        quasi : bool
            ``False``: independent uniforms instead of the Sobol' points (independent draws,
            e.g. for rank statistics, which stratified draws bias at the edges). Beyond
            :data:`SOBOL_MAX_DIM` dimensions (K > 21,201 categories) the draws are independent
            uniforms too: scipy's Sobol' sequences stop there.

        Returns
        -------
        ndarray of shape (K - 1, R, M)
        """
        c, km1 = self.shape
        start, stop, _ = rows.indices(c)
        rows = slice(start, stop)
        mix = len(self.components) > 1
        if quasi and km1 + int(mix) <= SOBOL_MAX_DIM:
            sobol = qmc.Sobol(km1 + int(mix), scramble=True, seed=rng)
            u = sobol.random_base2(max(0, int(np.ceil(np.log2(n)))))[:n]
        else:
            u = rng.random((n, km1 + int(mix)))
        z = np.ascontiguousarray(ndtri(np.clip(u[:, int(mix):], 1e-16, 1.0 - 1e-16)).T)
        if not mix:
            return self.components[0].draw(z, rows)
        comp = self.allocation(u[:, 0])
        out = np.empty((km1, stop - start, n))
        for g in np.unique(comp):
            sel = np.flatnonzero(comp == g)
            out[:, :, sel] = self.components[g].draw(z[:, sel], rows)
        return out

    def draw_psi(self, n: int, *, rng: np.random.Generator, rows: slice = slice(None),
                 quasi: bool = True) -> FloatArray:
        """:meth:`draw_sticks` as an ndarray of shape (M, R, K - 1)."""
        return np.moveaxis(self.draw_sticks(n, rng=rng, rows=rows, quasi=quasi), (0, 2), (2, 0))


def stick_major_probs(psi: np.ndarray) -> FloatArray:
    r"""The stick-breaking map on stick-major draws.

    The same numbers as :func:`~corrpriors.core.stick_breaking.psi_to_pi` (products of
    :math:`\sigma(\psi)` and :math:`\sigma(-\psi)`), on arrays whose sticks are the first axis,
    so every operation runs on contiguous memory (4x faster on (M, R, K - 1) draws).

    Parameters
    ----------
    psi : ndarray of shape (K - 1, ...)

    Returns
    -------
    ndarray of shape (K, ...)
    """
    km1 = psi.shape[0]
    out = np.empty((km1 + 1,) + psi.shape[1:])
    rest = np.ones(psi.shape[1:])
    for k in range(km1):
        np.multiply(rest, expit(psi[k]), out=out[k])
        rest *= expit(-psi[k])
    out[-1] = rest
    out /= out.sum(axis=0)  # as psi_to_pi: exact renormalisation
    return out


def _central_last(x: np.ndarray, level: float) -> tuple[FloatArray, FloatArray]:
    """Central interval along the last axis of a C-contiguous array (linear interpolation)."""
    m = x.shape[-1]
    flat = x.reshape(-1, m)
    pos = np.array([(1.0 - level) / 2.0, (1.0 + level) / 2.0]) * (m - 1)
    lo = np.floor(pos).astype(np.intp)
    hi = np.minimum(lo + 1, m - 1)
    part = np.partition(flat, np.unique(np.concatenate([lo, hi])), axis=1)
    q = part[:, lo] + (pos - lo) * (part[:, hi] - part[:, lo])
    return q[:, 0].reshape(x.shape[:-1]), q[:, 1].reshape(x.shape[:-1])


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
    lo, hi = _central_last(np.ascontiguousarray(draws.reshape(m, -1).T), level)
    return lo.reshape(draws.shape[1:]), hi.reshape(draws.shape[1:])


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
    out = np.empty((3, km1 + 1, c))
    step = max(1, BLOCK // max(1, n_samples * (km1 + 1)))
    for start in range(0, c, step):
        rows = slice(start, min(c, start + step))
        pi = stick_major_probs(mixture.draw_sticks(n_samples, rng=rng, rows=rows))
        out[0, :, rows], out[1, :, rows] = _central_last(pi, level)
        if return_std:
            out[2, :, rows] = pi.std(axis=-1, ddof=1)
    lower, upper, std = out[0].T, out[1].T, out[2].T
    return (lower, upper, std) if return_std else (lower, upper)


__all__ = ["BLOCK", "SCORES", "SOBOL_MAX_DIM", "MarginalMixture", "MarginalPsi", "central_interval",
           "probability_interval", "stick_major_probs"]
