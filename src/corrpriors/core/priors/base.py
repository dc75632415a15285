r"""The prior protocol: everything the CAVI, the ELBO, the M-steps and the samplers ask of
:math:`p(\psi)`.

Every stick :math:`k` has the Gaussian prior :math:`\psi_{\cdot k} \sim N(\mu_k, \theta\tilde\Sigma)`
over the C covariates; :math:`\tilde\Sigma` is the prior's *structure* (a dense kernel matrix, or
the inverse of a sparse precision), the scale :math:`\theta` and the means :math:`\mu` are
hyper-parameters held by the driver. The Polya-Gamma likelihood enters a psi step only through
*sites* on the observed entries :math:`O_k = \{c: b_{ck} > 0\}`: a precision
:math:`e_{ck} = E[\omega_{ck}]` and a linear term :math:`\kappa_{ck}`, so

.. math::

    q(\psi_{\cdot k}) = N(\lambda_k, V_k), \qquad
    V_k = \big((\theta\tilde\Sigma)^{-1} + D_k\big)^{-1}, \qquad
    \lambda_k = V_k\big(\kappa_k + (\theta\tilde\Sigma)^{-1}\mu_k\big),

with :math:`D_k = diag(e_{\cdot k})` (zero off :math:`O_k`). A prior implements
:class:`GaussianPrior`: the psi step (:math:`\lambda`, the marginal variances of the observed
entries and the three numbers per stick the ELBO and the scale M-step need), the remaining marginal
variances, :math:`\tilde\Sigma^{-1}\mathbf 1` for the constant-mean M-step and joint draws from
:math:`q`. The driver never asks which implementation it has. Implementations:
:class:`~corrpriors.core.priors.DenseCovariancePrior` (a kernel or a matrix; GP regression on
each stick's observed set) and, for large state spaces, a sparse-precision prior.

How to add a prior: one module with a class satisfying :class:`GaussianPrior` (run
``tests/test_core_prior.py``'s conformance tests on it, which compare every method with dense
solves of the formulas above).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..._typing import FloatArray


@dataclass(frozen=True, eq=False)
class StickLayout:
    """The observed sets of the non-empty sticks, packed stick after stick.

    Every non-empty stick ``k = sticks[s]`` owns the entries
    ``entry_start[s]:entry_start[s + 1]`` (its observed covariates, ascending) and the
    ``|O_k| x |O_k|`` column-major block ``block_start[s]:block_start[s + 1]`` of a flat buffer
    (used by the dense prior).

    Attributes
    ----------
    observed : ndarray of shape (C, K - 1), bool
        ``b > 0``.
    sticks : ndarray of shape (S,)
        The non-empty sticks, ascending.
    sizes : ndarray of shape (S,)
        ``|O_k|`` of each of them.
    entry_rows, entry_cols : ndarray of shape (E,)
        Covariate and stick of every observed entry (``E = sizes.sum()``).
    entry_start : ndarray of shape (S + 1,)
    block_start : ndarray of shape (S + 1,)
    diag_pos : ndarray of shape (E,)
        Position of each entry's diagonal element in the flat buffer.
    col_start : ndarray of shape (E,)
        Position where each entry's column of its block starts in the flat buffer.
    entry_flat : ndarray of shape (E,)
        ``entry_rows * (K - 1) + entry_cols``: positions in a C-ordered (C, K - 1) array.
    """

    observed: np.ndarray
    sticks: np.ndarray
    sizes: np.ndarray
    entry_rows: np.ndarray
    entry_cols: np.ndarray
    entry_start: np.ndarray
    block_start: np.ndarray
    diag_pos: np.ndarray
    col_start: np.ndarray
    entry_flat: np.ndarray

    @functools.cached_property
    def entry_bounds(self) -> list:
        """List of int: ``entry_start`` as Python integers (cheap slicing in loops)."""
        return [int(i) for i in self.entry_start]

    @property
    def n_covariates(self) -> int:
        """C."""
        return int(self.observed.shape[0])

    @property
    def n_sticks(self) -> int:
        """K - 1."""
        return int(self.observed.shape[1])

    def rows(self, s: int) -> np.ndarray:
        """Ndarray of shape (sizes[s],): the observed covariates of the ``s``-th stick."""
        return self.entry_rows[self.entry_start[s]:self.entry_start[s + 1]]

    def gather(self, x: np.ndarray) -> FloatArray:
        """The observed entries of a (C, K - 1) array, stick after stick (ndarray of shape (E,))."""
        return np.take(x, self.entry_flat)

    def scatter(self, values: np.ndarray, fill: float = 0.0) -> FloatArray:
        """A (C, K - 1) array holding ``values`` (shape (E,)) on the observed entries."""
        out = np.full(self.observed.shape, fill, dtype=float)
        np.put(out, self.entry_flat, values)
        return out


def build_layout(observed: np.ndarray) -> StickLayout:
    r"""Pack the observed sets :math:`O_k = \{c: b_{ck} > 0\}` of the non-empty sticks.

    Parameters
    ----------
    observed : ndarray of shape (C, K - 1), bool

    Returns
    -------
    StickLayout
    """
    observed = np.asarray(observed, dtype=bool)
    sticks = np.flatnonzero(observed.any(axis=0))
    which, entry_rows = np.nonzero(observed[:, sticks].T)  # stick after stick
    sizes = np.bincount(which, minlength=sticks.size).astype(np.intp)
    entry_start = np.concatenate(([0], np.cumsum(sizes))).astype(np.intp)
    block_start = np.concatenate(([0], np.cumsum(sizes * sizes))).astype(np.intp)
    local = np.arange(entry_rows.size, dtype=np.intp) - entry_start[which]
    col_start = block_start[which] + local * sizes[which]
    entry_rows = entry_rows.astype(np.intp)
    entry_cols = sticks[which]
    return StickLayout(observed, sticks, sizes, entry_rows, entry_cols, entry_start, block_start,
                       col_start + local, col_start,
                       entry_rows * observed.shape[1] + entry_cols)


@dataclass(frozen=True)
class PsiStep:
    r"""Output of a psi step: :math:`q(\psi)` and the per-stick numbers of the ELBO.

    Attributes
    ----------
    psi_mean : ndarray of shape (C, K - 1)
        :math:`\lambda`.
    psi_var : ndarray of shape (C, K - 1)
        :math:`diag V_k`: exact on the observed entries; elsewhere exact if the step was asked
        for every variance (``full=True``), otherwise the prior variance
        :math:`\theta\tilde\Sigma_{cc}` (complete them with
        :meth:`GaussianPrior.complete_variances`).
    alpha : ndarray of shape (C, K - 1)
        :math:`\Sigma^{-1}(\lambda_k - \mu_k)` with :math:`\Sigma = \theta\tilde\Sigma`.
    trace_dv : ndarray of shape (K - 1,)
        :math:`tr(D_k V_k) = C - tr(\Sigma^{-1}V_k)`.
    quad : ndarray of shape (K - 1,)
        :math:`(\lambda_k-\mu_k)^\top\Sigma^{-1}(\lambda_k-\mu_k)`.
    logdet_b : ndarray of shape (K - 1,)
        :math:`\log|\Sigma| - \log|V_k| = \log|I + \Sigma D_k|`.
    reduction : ndarray of shape (C, C) or None
        :math:`\sum_k (\Sigma - V_k)` when asked for (kernel M-step of dense priors).
    complete : bool
        Whether ``psi_var`` holds every marginal variance.
    mean : ndarray of shape (C, K - 1) or None
        With ``constant_mean``: the constant prior means chosen jointly with :math:`q(\psi)`
        (the step's :math:`\mu`); ``None`` otherwise (the given means were used).
    """

    psi_mean: np.ndarray
    psi_var: np.ndarray
    alpha: np.ndarray
    trace_dv: np.ndarray
    quad: np.ndarray
    logdet_b: np.ndarray
    reduction: np.ndarray | None = None
    complete: bool = False
    mean: np.ndarray | None = None


def joint_constant_mean(sum_ay: np.ndarray, sum_a1: np.ndarray, current: np.ndarray,
                        constant_mean: tuple[np.ndarray, float]) -> FloatArray:
    r"""The constant prior mean of every stick, maximised jointly with :math:`q(\psi)`.

    For fixed :math:`q(\omega)` the ELBO is a concave quadratic in :math:`(\lambda_k, m_k)`
    jointly; its maximiser over :math:`m_k` is the generalised-least-squares mean of the
    pseudo-observations :math:`y = \kappa/e` (covariance :math:`\Sigma_{OO} + D^{-1}`, inverse
    :math:`A`), with the normal hyper-prior :math:`N(m_0, \tau^2)`:

    .. math:: m_k = \frac{\mathbf 1^\top A y + m_0/\tau^2}{\mathbf 1^\top A\mathbf 1 + 1/\tau^2}.

    Parameters
    ----------
    sum_ay, sum_a1 : ndarray of shape (K - 1,)
        :math:`\mathbf 1^\top A y` and :math:`\mathbf 1^\top A \mathbf 1` per stick (zero for
        sticks without observations).
    current : ndarray of shape (K - 1,)
        The means so far (kept for sticks without data and without a hyper-prior).
    constant_mean : (ndarray of shape (K - 1,), float)
        :math:`m_0` and the hyper-prior precision :math:`1/\tau^2` (0 for none).

    Returns
    -------
    ndarray of shape (K - 1,)
    """
    m0, precision = constant_mean
    den = sum_a1 + precision
    num = sum_ay + (precision * np.asarray(m0, dtype=float) if precision > 0 else 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        m = num / den
    return np.where(den > 0, m, current)


@runtime_checkable
class GaussianPrior(Protocol):
    r"""What the core asks of the prior structure :math:`\tilde\Sigma` (see the module docstring).

    Attributes
    ----------
    n_covariates : int
        C.
    jitter : float
        Diagonal jitter added to :math:`\tilde\Sigma` (0 if none); reported in the fit's result.
    """

    n_covariates: int
    jitter: float

    def prior_variance(self) -> FloatArray:
        r""":math:`diag\,\tilde\Sigma`, ndarray of shape (C,)."""
        ...

    def precision_ones(self) -> FloatArray:
        r""":math:`\tilde\Sigma^{-1}\mathbf 1`, ndarray of shape (C,) (constant-mean M-step)."""
        ...

    def psi_step(self, layout: StickLayout, scale: float, mean: np.ndarray, kappa: np.ndarray,
                 site: np.ndarray, *, full: bool = False, reduction: bool = False,
                 constant_mean: tuple[np.ndarray, float] | None = None) -> PsiStep:
        r"""The update of :math:`q(\psi)` for every stick.

        Parameters
        ----------
        layout : StickLayout
        scale : float
            :math:`\theta`.
        mean : ndarray of shape (C, K - 1)
            :math:`\mu`.
        kappa : ndarray of shape (C, K - 1)
            Linear site terms (zero off the observed entries).
        site : ndarray of shape (E,)
            Site precisions :math:`e > 0` on ``layout``'s observed entries.
        full : bool
            Also compute every marginal variance.
        reduction : bool
            Also return :math:`\sum_k(\Sigma - V_k)` (only priors supporting kernel learning).
        constant_mean : (ndarray of shape (K - 1,), float), optional
            Choose constant prior means :math:`\mu_k = m_k\mathbf 1` jointly with
            :math:`q(\psi)` (:func:`joint_constant_mean`, hyper-prior mean and precision) instead
            of using ``mean``; they are returned in ``PsiStep.mean``.

        Returns
        -------
        PsiStep
        """
        ...

    def complete_variances(self, layout: StickLayout, scale: float, site: np.ndarray,
                           step: PsiStep) -> FloatArray:
        r"""Every marginal variance of the :math:`q` of ``step`` (computed from ``scale`` and
        ``site``; may reuse the factors of the last psi step with this layout).

        Returns
        -------
        ndarray of shape (C, K - 1)
        """
        ...

    def sample_posterior(self, scale: float, center: np.ndarray, site: np.ndarray, n: int, *,
                         rng: np.random.Generator,
                         pseudo: np.ndarray | None = None) -> FloatArray:
        r"""Joint draws of every stick from :math:`N(m_k, V_k)`.

        :math:`V_k = ((\theta\tilde\Sigma)^{-1} + diag(site_{\cdot k}))^{-1}`. Without ``pseudo``
        the draws are centred at ``center`` (the VI posterior, ``center = lambda``). With
        ``pseudo`` (the Gibbs conditional) ``center`` is the prior mean :math:`\mu` and the draws
        are centred at :math:`V_k(\Sigma^{-1}\mu_k + site_{\cdot k}\,pseudo_{\cdot k})`, the
        posterior of Gaussian pseudo-observations ``pseudo`` with precisions ``site``.

        Parameters
        ----------
        scale : float
        center : ndarray of shape (C, K - 1)
        site : ndarray of shape (C, K - 1)
            Non-negative; zero where there is no likelihood term.
        n : int
            M.
        rng : numpy.random.Generator
        pseudo : ndarray of shape (C, K - 1), optional

        Returns
        -------
        ndarray of shape (M, C, K - 1)
        """
        ...


#: Usable range of the mean prior variance :math:`\theta\,\overline{diag\,\tilde\Sigma}` of the
#: stick logits. Above the upper limit the pseudo-observation noise :math:`1/E[\omega]` (about 4/b)
#: falls below the rounding error of the prior covariance and the CAVI arithmetic breaks down
#: (measured: non-monotone traces and wrong probabilities from about 1e22 on); long before it the
#: answer has stopped changing with the scale (probabilities within 1e-4 from 1e12 on), so the
#: limit costs nothing. Small variances are exact down to the lower limit.
PRIOR_VARIANCE_RANGE = (1e-150, 1e15)


def prior_scale_range(prior: GaussianPrior) -> tuple[float, float]:
    r"""The usable range of the scale :math:`\theta` for ``prior`` (see
    :data:`PRIOR_VARIANCE_RANGE`).
    """
    v = float(np.mean(prior.prior_variance()))
    return PRIOR_VARIANCE_RANGE[0] / v, PRIOR_VARIANCE_RANGE[1] / v


def check_prior_scale(scale: float, prior: GaussianPrior, name: str = "scale") -> float:
    """Raise a ``ValueError`` naming ``name`` if ``scale`` is outside :func:`prior_scale_range`."""
    lo, hi = prior_scale_range(prior)
    if not lo * (1 - 1e-9) <= scale <= hi * (1 + 1e-9):
        v = float(np.mean(prior.prior_variance()))
        raise ValueError(
            f"{name}: the prior variance of the stick logits, scale x mean diagonal of the "
            f"covariance = {scale:.3g} x {v:.3g} = {scale * v:.3g}, is outside the usable range "
            f"[{PRIOR_VARIANCE_RANGE[0]:g}, {PRIOR_VARIANCE_RANGE[1]:g}] (here: {lo:.3g} <= "
            f"{name} <= {hi:.3g}). Above it the arithmetic cannot resolve the data against the "
            f"prior; the fitted probabilities stop changing with the scale long before it.")
    return scale


def check_scale_prior(scale_prior: tuple[float, float] | None, prior: GaussianPrior) -> None:
    """Raise a ``ValueError`` naming ``scale_prior`` if the mean of its Gamma(shape, rate), the
    scale it favours, lies outside :func:`prior_scale_range` (the MAP-EM scale would then be
    pinned to a bound of the range, where the arithmetic breaks down, instead of being learned).
    """
    if scale_prior is None:
        return
    lo, hi = prior_scale_range(prior)
    shape, rate = scale_prior
    mean = shape / rate
    if not lo <= mean <= hi:
        raise ValueError(
            f"scale_prior: the Gamma(shape={shape:g}, rate={rate:g}) hyper-prior favours scales "
            f"near shape / rate = {mean:.3g}, outside the usable range {lo:.3g} <= scale <= "
            f"{hi:.3g} of this prior (prior variance of the stick logits in "
            f"[{PRIOR_VARIANCE_RANGE[0]:g}, {PRIOR_VARIANCE_RANGE[1]:g}]); choose shape and rate "
            f"whose ratio is a plausible scale, e.g. 2 1")


def check_prior(prior: Any, n_covariates: int | None = None, name: str = "prior") -> GaussianPrior:
    """Check that ``prior`` implements :class:`GaussianPrior` (and has ``n_covariates`` rows)."""
    if not isinstance(prior, GaussianPrior):
        raise TypeError(f"{name}: expected an object implementing GaussianPrior, got "
                        f"{type(prior).__name__}")
    if n_covariates is not None and prior.n_covariates != n_covariates:
        raise ValueError(f"{name}: expected a prior over C = {n_covariates} covariates (rows of "
                         f"counts), got C = {prior.n_covariates}")
    return prior


__all__ = ["PRIOR_VARIANCE_RANGE", "GaussianPrior", "PsiStep", "StickLayout", "build_layout",
           "check_prior", "check_prior_scale", "check_scale_prior", "joint_constant_mean", "prior_scale_range"]
