r"""Independent Dirichlet-multinomial baseline (the paper's correlation-agnostic model).

.. math::

    \mathbf p_c \sim \mathrm{Dir}(\boldsymbol\alpha_c), \qquad
    \mathbf x_c \mid \mathbf p_c \sim \mathrm{Mult}(N_c, \mathbf p_c), \qquad c = 1, \dots, C,

independently over covariates. The posterior is conjugate,
:math:`\mathbf p_c \mid \mathbf x_c \sim \mathrm{Dir}(\boldsymbol\alpha_c + \mathbf x_c)`, and the
evidence is the Dirichlet-multinomial (Polya) probability

.. math::

    \log p(\mathbf X) = \sum_c \Big[ \log\frac{N_c!}{\prod_k x_{ck}!}
      + \log\frac{\Gamma(A_c)}{\Gamma(A_c + N_c)}
      + \sum_k \log\frac{\Gamma(\alpha_{ck} + x_{ck})}{\Gamma(\alpha_{ck})} \Big],
    \quad A_c = \sum_k \alpha_{ck}.

It includes the multinomial coefficient, so it is on the same scale as the correlated
model's ELBO (which bounds :math:`\log p(\mathbf X)` under the multinomial likelihood) and the
two can be compared for model selection. It is evaluated in Loader's deviance form
(:func:`corrpriors._special.dirichlet_multinomial_logpmf`), accurate to about 1e-14
relative for counts up to :math:`2^{53}` and any concentrations: the plain ``gammaln`` sum
cancels catastrophically for large counts or concentrations.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._memory import check_memory
from .._random import sample_dirichlet
from .._repr import estimator_repr, short_repr
from .._special import dirichlet_multinomial_logpmf
from .._typing import FloatArray, SeedLike
from .._validation import as_real_array, check_counts, holds_bool

#: Arrays of the draws' size, (M, C, K) float64, alive at the peak of
#: :meth:`DirichletMultinomial.sample_probs` (tracemalloc: 3.0-3.3 with a concentration below
#: one, which draws in log space, 2.0-2.3 otherwise; C, K, M = 100, 4, 2,000, 10, 50, 2,000 and
#: 1,000, 3, 500), plus one (M, C) array per covariate row for the normalisation (K = 2 with
#: C = 1: 2.5 draw-sized arrays).
_DRAW_ARRAYS = 3.5


def _check_draws(n: Any, name: str, n_rows: int, n_categories: int) -> int:
    """``n`` as an int >= 1 (refused naming ``name``) whose posterior draws fit in memory."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"{name}: expected an integer >= 1, got {n!r}")
    n = int(n)
    check_memory(8.0 * n * n_rows * (_DRAW_ARRAYS * n_categories + 1),
                 f"{name}: {n:,} draws from the DirichletMultinomial posterior of (C, K) = "
                 f"({n_rows:,}, {n_categories:,}) probabilities",
                 "ask for fewer draws")
    return n


#: The concentrations :class:`DirichletMultinomial` takes (the experiments' ``alpha_*`` settings
#: are narrower still, [1e-100, 1e12]).
ALPHA_RANGE = (1e-100, 1e100)


def _check_alpha(alpha: Any) -> np.ndarray:
    try:
        raw = as_real_array(alpha, "alpha")
    except (TypeError, ValueError):
        raw = None
    if raw is None or holds_bool(alpha, raw):   # '1' is not 1, True is not 1
        raise ValueError(f"alpha: expected a positive number or array, got {short_repr(alpha)}")
    a = raw.astype(np.float64)
    if a.ndim > 2:
        raise ValueError(f"alpha: expected a scalar, shape (K,) or (C, K), got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError("alpha: contains NaN or infinite values")
    if np.any(a <= 0):
        raise ValueError(f"alpha: concentrations must be positive, found minimum {a.min():g}")
    if np.any(a < ALPHA_RANGE[0]) or np.any(a > ALPHA_RANGE[1]):
        raise ValueError(f"alpha: expected concentrations in [{ALPHA_RANGE[0]:g}, {ALPHA_RANGE[1]:g}] (the "
                         f"evidence is exact there; below 1e-160 it underflows to -inf, and from 1e100 "
                         f"on the prior is the multinomial at uniform probabilities), found "
                         f"{a.min():g} to {a.max():g}")
    return a


class DirichletMultinomial:
    r"""Independent Dirichlet priors per covariate, with the closed-form posterior.

    Parameters
    ----------
    alpha : float or array_like of shape (K,) or (C, K), default=1.0
        Prior concentrations :math:`\alpha_{ck} > 0` (a scalar or a vector is shared by all
        covariates).

    Attributes
    ----------
    counts_ : ndarray of shape (C, K)
        The fitted counts.
    prior_alpha_ : ndarray of shape (C, K)
        Prior concentrations, broadcast.
    posterior_alpha_ : ndarray of shape (C, K)
        ``alpha + counts``.
    log_marginal_likelihood_ : float
        Exact :math:`\log p(\mathbf X)` (multinomial coefficient included).
    log_marginal_likelihood_per_covariate_ : ndarray of shape (C,)
    elbo_ : float
        Equal to ``log_marginal_likelihood_`` (the bound is tight for a conjugate model);
        comparable with ``CorrelatedMultinomial.elbo_``.
    n_iter_ : int
        Always 0 (closed form).
    converged_ : bool
        Always ``True``.

    Examples
    --------
    >>> import numpy as np
    >>> from corrpriors.baselines import DirichletMultinomial
    >>> m = DirichletMultinomial(alpha=1.0).fit([[3, 1, 0], [0, 0, 0]])
    >>> m.probs()
    array([[0.57142857, 0.28571429, 0.14285714],
           [0.33333333, 0.33333333, 0.33333333]])
    """

    def __init__(self, alpha: Any = 1.0) -> None:
        self.alpha = alpha

    def __repr__(self) -> str:  # noqa: D105
        return estimator_repr(self)

    def fit(self, counts: Any, warm_start: bool | None = None) -> DirichletMultinomial:
        """Compute the conjugate posterior and the evidence.

        Parameters
        ----------
        counts : array_like of shape (C, K)
            Non-negative integer counts (integer-valued floats accepted).
        warm_start : bool, optional
            Ignored (the posterior is closed form); accepted for interface parity with
            ``CorrelatedMultinomial.fit``.

        Returns
        -------
        self : DirichletMultinomial
        """
        x = check_counts(counts, "counts")
        C, K = x.shape
        a = _check_alpha(self.alpha)
        if a.ndim == 1 and a.shape != (K,):
            raise ValueError(f"alpha: expected shape (K,) = ({K},) to match counts, got {a.shape}")
        if a.ndim == 2 and a.shape != (C, K):
            raise ValueError(f"alpha: expected shape (C, K) = ({C}, {K}) to match counts, got {a.shape}")
        prior = np.broadcast_to(a, (C, K)).astype(np.float64)
        post = prior + x
        if not np.all(np.isfinite(prior.sum(axis=1))):
            raise ValueError("alpha: the concentrations of a covariate sum to more than the "
                             f"largest float ({np.finfo(float).max:.3g}); use smaller values")
        per_cov = dirichlet_multinomial_logpmf(x, prior)
        self.counts_ = x
        self.prior_alpha_ = prior
        self.posterior_alpha_ = post
        self.log_marginal_likelihood_per_covariate_ = per_cov
        self.log_marginal_likelihood_ = float(per_cov.sum())
        self.elbo_ = self.log_marginal_likelihood_
        self.n_iter_ = 0
        self.converged_ = True
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "posterior_alpha_"):
            raise ValueError("this DirichletMultinomial is not fitted yet; call fit(counts) first")

    def probs(self, method: str = "plugin", n_samples: int = 2000, *,
              rng: SeedLike = None) -> FloatArray:
        """Posterior mean probabilities, normalised over the category axis.

        Parameters
        ----------
        method : {"plugin", "mc"}, default="plugin"
            ``"plugin"``: the exact posterior mean ``alpha_post / alpha_post.sum(-1)``.
            ``"mc"``: the average of ``n_samples`` posterior draws (for parity with the
            correlated model; converges to the plugin value).
        n_samples : int, default=2000
            Draws for ``method="mc"``, at least 1; they are held at once (about
            ``3.5 * 8 * n_samples * C * K`` bytes at the peak), which must fit in memory.
        rng : numpy.random.Generator, int or None
            Randomness for ``method="mc"``.

        Returns
        -------
        probs : ndarray of shape (C, K)
            Rows sum to one.
        """
        self._check_fitted()
        if method == "plugin":
            post = self.posterior_alpha_
            return post / post.sum(axis=1, keepdims=True)
        if method == "mc":
            n = _check_draws(n_samples, "n_samples", *self.posterior_alpha_.shape)
            return sample_dirichlet(self.posterior_alpha_, n, rng=rng).mean(axis=0)
        raise ValueError(f"method: expected 'plugin' or 'mc', got {method!r}")

    def sample_probs(self, n: int, *, rng: SeedLike = None) -> FloatArray:
        """Draws from the posterior ``Dir(alpha + counts)`` of every covariate.

        Drawn by :func:`corrpriors._random.sample_dirichlet` (log space for concentrations
        below one), so tiny concentrations do not underflow to 0 / 0.

        Parameters
        ----------
        n : int
            Number M of draws, at least 1; about ``3.5 * 8 * M * C * K`` bytes at the peak,
            which must fit in memory (else :class:`~corrpriors._memory.MemoryEstimateError`,
            a ``ValueError``, before anything is drawn).
        rng : numpy.random.Generator, int or None

        Returns
        -------
        samples : ndarray of shape (M, C, K)
            Each ``samples[m, c]`` lies on the simplex.
        """
        self._check_fitted()
        n = _check_draws(n, "n", *self.posterior_alpha_.shape)
        return sample_dirichlet(self.posterior_alpha_, n, rng=rng)


__all__ = ["DirichletMultinomial"]
