r"""The correlated multinomial model (scikit-learn style estimator)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from .._random import as_generator
from .._typing import FloatArray, SeedLike
from .._validation import check_counts, check_covariance, check_positive
from ..exceptions import ConvergenceWarning
from .cavi import jittered_covariance, run_cavi, sample_q_psi
from .results import VIResult
from .stick_breaking import count_statistics, psi_to_pi, uniform_psi

_LEARN_MEAN = (None, "constant", "full")


def _is_bound_kernel(obj: Any) -> bool:
    return hasattr(obj, "gram") and callable(obj.gram)


class CorrelatedMultinomial:
    r"""Multinomial counts at C covariates, tied by a Gaussian prior on stick-breaking logits.

    Generative model (Linderman et al. 2015; Alt, Sosic & Koeppl 2019), for covariates
    :math:`c = 1..C`, categories :math:`1..K` and sticks :math:`k = 1..K-1`:

    .. math::

        \psi_{\cdot k} &\sim N(\mu_k, \Sigma), \qquad
        \Sigma = \theta\,(\tilde\Sigma + \epsilon I),\\
        \pi_c &= \Pi_{SB}(\psi_{c\cdot}), \qquad
        \pi_{ck} = \sigma(\psi_{ck})\prod_{j<k}(1-\sigma(\psi_{cj})),\\
        x_{c\cdot} &\sim Mult(N_c, \pi_c)
        \;\Longleftrightarrow\; x_{ck} \sim Bin(b_{ck}, \sigma(\psi_{ck})),\;
        b_{ck} = N_c - \textstyle\sum_{j<k}x_{cj}.

    With Polya-Gamma variables :math:`\omega_{ck} \sim PG(b_{ck}, 0)` the augmented model is
    conditionally Gaussian, and the mean-field posterior
    :math:`q(\psi_{\cdot k}) = N(\lambda_k, V_k)`, :math:`q(\omega_{ck}) = PG(b_{ck}, w_{ck})` is
    fitted by closed-form coordinate ascent (:mod:`corrpriors.core.cavi`) on the exact ELBO
    (:mod:`corrpriors.core.elbo`), optionally with variational (MAP-)EM over :math:`\theta`,
    the means and kernel parameters (:mod:`corrpriors.core.hyper_em`).

    Parameters
    ----------
    covariance : ndarray of shape (C, C) or BoundKernel
        :math:`\tilde\Sigma`: symmetric positive semi-definite. A rank-deficient matrix is
        accepted with the smallest escalating diagonal jitter :math:`\epsilon` that allows a
        Cholesky factorisation (:class:`~corrpriors.exceptions.JitterWarning`); the jittered
        matrix is used everywhere (VI, ELBO, Gibbs), so the ELBO is exact for the fitted model.
        A bound kernel (``kernel.bind(coords=...)``) enables ``learn_kernel``.
    mean : None, ndarray of shape (K - 1,) or (C, K - 1)
        :math:`\mu`. ``None``: the logits of the uniform distribution, ``-log(K - k)``, for
        every covariate.
    learn_mean : {None, "constant", "full"}
        ``None`` keeps :math:`\mu` fixed. ``"constant"`` learns one value per stick,
        :math:`\mu_k = m_k 1` (the GP-style choice), optionally with a normal hyper-prior
        (``mean_prior_std``). ``"full"`` is the paper's :math:`\mu_k = \lambda_k`; it
        **collapses the prior's coupling**: every EM step moves the prior mean onto the
        posterior mean, so the prior term stops pulling the observed covariates towards their
        neighbours. At the fixed point each observed covariate has
        :math:`\lambda_{ck} = \kappa_{ck}/E[\omega_{ck}]`, the prior-free estimate, and the
        result depends on where the iteration cap stops the drift. A ``UserWarning`` is issued.
    learn_scale : bool
        Learn :math:`\theta` by the closed-form EM update
        :math:`\theta = \frac{1}{(K-1)C}\sum_k tr(\tilde\Sigma^{-1}(V_k + d_kd_k^\top))`
        (the paper prints ``1/(KC)``), or its MAP version with ``scale_prior``.
    max_iter : int
        Cap on psi steps (CAVI sweeps, rejected accelerated ones included).
    tol : float
        Stop when the relative change of the objective is at most ``tol``.
    scale : float
        Initial (or fixed) :math:`\theta`.
    scale_prior : (shape, rate) or None
        Gamma hyper-prior on :math:`\theta` (MAP-EM). With scarce data plain EM drives
        :math:`\theta` towards 0, because the ELBO's mean-field gap grows with
        :math:`\theta`; a weak prior such as ``(2.0, 1.0)`` keeps it positive but cannot stop
        the collapse when many sticks share one scale (on the tunnel world's absolute encoding
        it stops at ~6e-3 instead of ~1e-4). To choose :math:`\theta` on scarce data compare
        fits at fixed scales by :meth:`collapsed_bound` instead.
    mean_prior_std : float or None
        :math:`\tau` of a normal hyper-prior :math:`N(m_0, \tau^2)` on constant means.
    mean_prior_mean : ndarray of shape (K - 1,) or None
        :math:`m_0`; default the uniform logits ``-log(K - k)``.
    learn_kernel : bool
        Learn the bound kernel's log-space hyper-parameters by L-BFGS-B on the ELBO (M-step with
        the gradient of appendix B). Needs a BoundKernel.
    warm_start : bool
        Start every ``fit`` from the previous solution (tilts, scale, means) when the shapes
        match.
    verbose : bool
    acceleration : {"anderson", None}
        ``"anderson"`` (default) iterates the same CAVI/EM map with safeguarded Anderson
        acceleration: the same fixed point in about half the psi steps, the objective still
        never decreasing (a worse extrapolated point is rejected for the plain step). ``None``
        runs the plain coordinate ascent of the paper. Kernel learning and
        ``learn_mean="full"`` always run plain.

    Attributes
    ----------
    psi_mean_ : ndarray of shape (C, K - 1)
        :math:`\lambda`.
    psi_var_ : ndarray of shape (C, K - 1)
        :math:`diag V_k`.
    elbo_ : float
        ELBO at the returned parameters, a lower bound of :math:`\log p(X)`.
    objective_ : float
        ELBO plus log hyper-prior densities (what MAP-EM maximises).
    elbo_trace_, objective_trace_ : ndarray of shape (n_iter,)
    scale_ : float
    mean_ : ndarray of shape (C, K - 1)
        Prior means at the returned parameters.
    covariance_ : ndarray of shape (C, C)
        The jittered base covariance :math:`\tilde\Sigma + \epsilon I`.
    kernel_ : BoundKernel or None
        The (learned) bound kernel.
    jitter_ : float
    n_iter_ : int
        Accepted iterations (length of the traces).
    n_psi_steps_ : int
        Psi steps computed (the cost; ``>= n_iter_``).
    converged_ : bool
    result_ : VIResult

    Examples
    --------
    >>> import numpy as np
    >>> from corrpriors.core.model import CorrelatedMultinomial
    >>> cov = np.exp(-np.subtract.outer(np.arange(4.0), np.arange(4.0)) ** 2)
    >>> counts = np.array([[5, 1, 0], [4, 2, 0], [0, 0, 0], [1, 1, 4]])
    >>> m = CorrelatedMultinomial(covariance=cov).fit(counts)
    >>> m.probs().shape
    (4, 3)
    """

    def __init__(self, covariance: Any, mean: Any = None, learn_mean: str | None = None,
                 learn_scale: bool = False, max_iter: int = 1000, tol: float = 1e-8, *,
                 scale: float = 1.0, scale_prior: tuple[float, float] | None = None,
                 mean_prior_std: float | None = None, mean_prior_mean: Any = None,
                 learn_kernel: bool = False, warm_start: bool = False, verbose: bool = False,
                 acceleration: str | None = "anderson"):
        self.covariance = covariance
        self.mean = mean
        self.learn_mean = learn_mean
        self.learn_scale = learn_scale
        self.max_iter = max_iter
        self.tol = tol
        self.scale = scale
        self.scale_prior = scale_prior
        self.mean_prior_std = mean_prior_std
        self.mean_prior_mean = mean_prior_mean
        self.learn_kernel = learn_kernel
        self.warm_start = warm_start
        self.verbose = verbose
        self.acceleration = acceleration

    # ------------------------------------------------------------------ validation / prior
    def _check_params(self) -> None:
        if self.learn_mean not in _LEARN_MEAN:
            raise ValueError(f"learn_mean: expected one of {_LEARN_MEAN}, got {self.learn_mean!r}")
        if self.acceleration not in ("anderson", None):
            raise ValueError(f"acceleration: expected 'anderson' or None, got "
                             f"{self.acceleration!r}")
        if not isinstance(self.max_iter, (int, np.integer)) or self.max_iter < 1:
            raise ValueError(f"max_iter: expected a positive integer, got {self.max_iter!r}")
        check_positive(self.tol, "tol", strict=False)
        check_positive(self.scale, "scale")
        if self.scale_prior is not None:
            sp = tuple(self.scale_prior)
            if len(sp) != 2:
                raise ValueError(f"scale_prior: expected (shape, rate), got {self.scale_prior!r}")
            check_positive(sp[0], "scale_prior shape")
            check_positive(sp[1], "scale_prior rate")
        if self.mean_prior_std is not None:
            check_positive(self.mean_prior_std, "mean_prior_std")
        if self.learn_kernel and not _is_bound_kernel(self.covariance):
            raise ValueError("learn_kernel: needs covariance to be a bound kernel "
                             "(kernel.bind(coords=...)), got an array")

    def _prepare_covariance(self, n_covariates: int) -> tuple[np.ndarray, float, Any]:
        cov = self.covariance
        kernel = None
        if _is_bound_kernel(cov):
            kernel = cov
            cov = np.asarray(kernel.gram(), dtype=float)
        if cov is None:
            raise ValueError("covariance: required, got None")
        try:
            arr = np.asarray(cov, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"covariance: expected a numeric (C, C) array or a bound kernel, "
                             f"got {type(cov).__name__}") from None
        arr = check_covariance(arr, "covariance", size=n_covariates)
        min_eig = float(np.linalg.eigvalsh(arr)[0])
        base, eps = jittered_covariance(arr, min_eig, "covariance", stacklevel=5)
        return base, eps, kernel

    def _prepare_mean(self, c: int, k: int) -> np.ndarray:
        if self.mean is None:
            return np.repeat(uniform_psi(k)[None, :], c, axis=0)
        mean = np.asarray(self.mean, dtype=float)
        if mean.shape == (k - 1,):
            mean = np.repeat(mean[None, :], c, axis=0)
        if mean.shape != (c, k - 1):
            raise ValueError(f"mean: expected shape (K-1,) = ({k - 1},) or (C, K-1) = "
                             f"({c}, {k - 1}), got {mean.shape}")
        if not np.all(np.isfinite(mean)):
            raise ValueError("mean: contains NaN or infinite values")
        return mean

    def _cached_prior(self, c: int) -> tuple[np.ndarray, float, Any]:
        # Validation, eigenvalues and jitter cost O(C^3); PSRL refits the same prior often.
        prev = getattr(self, "_prior_cache", None)
        cov = self.covariance
        if (prev is not None and prev[0] is cov and prev[2].shape == (c, c)
                and (prev[1] is None or np.array_equal(prev[1], np.asarray(cov)))):
            return prev[2], prev[3], prev[4]
        base, eps, kernel = self._prepare_covariance(c)
        raw = None if kernel is not None else np.array(cov, dtype=float, copy=True)
        self._prior_cache = (cov, raw, base, eps, kernel)
        return base, eps, kernel

    # ------------------------------------------------------------------ fitting
    def fit(self, counts: Any, warm_start: bool | None = None,
            init: VIResult | CorrelatedMultinomial | None = None) -> CorrelatedMultinomial:
        """Fit :math:`q` (and the learned hyper-parameters) to a count matrix.

        Parameters
        ----------
        counts : array_like of shape (C, K)
            Non-negative integer counts (integer-valued floats accepted), K >= 2.
        warm_start : bool, optional
            Overrides the ``warm_start`` parameter for this call.
        init : VIResult or CorrelatedMultinomial, optional
            Start from this solution (tilts, scale, means) if its shapes match.

        Returns
        -------
        self
        """
        self._check_params()
        x = check_counts(counts, "counts")
        c, k = x.shape
        if self.learn_mean == "full":
            warnings.warn(
                "learn_mean='full' sets the prior mean to the posterior mean (mu_k = lambda_k, as "
                "in the paper); this removes the prior's coupling between covariates and the "
                "result depends on max_iter. Prefer learn_mean='constant'.", UserWarning,
                stacklevel=2)
        base, eps, kernel = self._cached_prior(c)
        mean = self._prepare_mean(c, k)
        if self.mean_prior_mean is None:
            m0 = uniform_psi(k)
        else:
            m0 = np.asarray(self.mean_prior_mean, dtype=float)
            if m0.shape != (k - 1,):
                raise ValueError(f"mean_prior_mean: expected shape (K-1,) = ({k - 1},), "
                                 f"got {m0.shape}")
        start = None
        use_warm = self.warm_start if warm_start is None else warm_start
        if isinstance(init, CorrelatedMultinomial):
            init = getattr(init, "result_", None)
        if init is None and use_warm:
            init = getattr(self, "result_", None)
        if init is not None and init.psi_mean.shape == (c, k - 1):
            start = init
        res = run_cavi(x, base, mean, jitter=eps, scale=float(self.scale),
                       learn_scale=bool(self.learn_scale), learn_mean=self.learn_mean,
                       scale_prior=None if self.scale_prior is None else tuple(self.scale_prior),
                       mean_prior_mean=m0, mean_prior_std=self.mean_prior_std,
                       bound_kernel=kernel, learn_kernel=bool(self.learn_kernel),
                       max_iter=int(self.max_iter), tol=float(self.tol), init=start,
                       verbose=bool(self.verbose), acceleration=self.acceleration)
        if not res.converged:
            warnings.warn(f"CAVI did not converge in max_iter={self.max_iter} iterations "
                          f"(tol={self.tol:g}); the result is recorded with converged_=False.",
                          ConvergenceWarning, stacklevel=2)
        self._set_result(res, kernel)
        self.counts_ = x
        return self

    def _set_result(self, res: VIResult, kernel: Any) -> None:
        self.result_ = res
        self.psi_mean_ = res.psi_mean
        self.psi_var_ = res.psi_var
        self.elbo_ = res.elbo
        self.objective_ = res.objective
        self.elbo_trace_ = res.elbo_trace
        self.objective_trace_ = res.objective_trace
        self.scale_ = res.scale
        self.mean_ = res.mean
        self.covariance_ = res.covariance
        self.jitter_ = res.jitter
        self.n_iter_ = res.n_iter
        self.n_psi_steps_ = res.n_psi_steps
        self.converged_ = res.converged
        if kernel is not None and res.kernel_theta is not None:
            kernel = kernel.with_theta(res.kernel_theta)
        self.kernel_ = kernel

    def _check_fitted(self) -> None:
        if not hasattr(self, "result_"):
            raise ValueError("this CorrelatedMultinomial is not fitted yet; call fit(counts) first")

    # ------------------------------------------------------------------ predictions
    def collapsed_bound(self) -> float:
        r"""Lower bound of :math:`\log p(X)` with the Polya-Gamma variables integrated out.

        :math:`E_q[\log p(X \mid \psi)] - KL(q(\psi) \| p(\psi))` at the fitted
        :math:`q(\psi)` (:func:`corrpriors.core.elbo.collapsed_bound`): never below
        ``elbo_``, and much tighter when the prior scale is large and counts are few. The
        ELBO's mean-field gap grows with :math:`\theta`, so EM on the ELBO shrinks
        :math:`\theta` towards 0 on scarce data; compare scales and kernels by this bound
        instead (:func:`select_kernel` with ``criterion="collapsed"``).

        Returns
        -------
        float
        """
        from .elbo import collapsed_bound

        self._check_fitted()
        b, kappa = count_statistics(self.counts_)
        return collapsed_bound(b, self.counts_[:, :-1], kappa, self.psi_mean_, self.psi_var_,
                               self.elbo_)

    def probs(self, method: str = "plugin", n_samples: int = 2000,
              rng: SeedLike = None) -> FloatArray:
        """Posterior probability vectors.

        Parameters
        ----------
        method : {"plugin", "mc"}
            ``"plugin"``: :math:`\\pi(\\lambda)` (what the paper uses). ``"mc"``:
            :math:`E_q[\\pi(\\psi)]` by Monte Carlo over the marginals :math:`N(\\lambda_{ck},
            (V_k)_{cc})` (sticks are independent under q, so marginals suffice per covariate).
        n_samples : int
        rng : None, int or numpy.random.Generator

        Returns
        -------
        ndarray of shape (C, K)
        """
        self._check_fitted()
        if method == "plugin":
            return psi_to_pi(self.psi_mean_)
        if method != "mc":
            raise ValueError(f"method: expected 'plugin' or 'mc', got {method!r}")
        if not isinstance(n_samples, (int, np.integer)) or n_samples < 1:
            raise ValueError(f"n_samples: expected a positive integer, got {n_samples!r}")
        gen = as_generator(rng)
        total = np.zeros((self.psi_mean_.shape[0], self.psi_mean_.shape[1] + 1))
        sd = np.sqrt(self.psi_var_)
        chunk = max(1, int(2 ** 22 // max(1, self.psi_mean_.size)))
        done = 0
        while done < n_samples:
            m = min(chunk, n_samples - done)
            psi = self.psi_mean_ + sd * gen.standard_normal((m,) + self.psi_mean_.shape)
            total += psi_to_pi(psi).sum(axis=0)
            done += m
        return total / n_samples

    def sample_psi(self, n: int, *, rng: SeedLike) -> FloatArray:
        """Joint draws from :math:`q(\\psi)` (each stick jointly across covariates).

        Uses Matheron's rule, see :func:`corrpriors.core.cavi.sample_q_psi` for the cost.

        Returns
        -------
        ndarray of shape (n, C, K - 1)
        """
        self._check_fitted()
        if not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"n: expected a positive integer, got {n!r}")
        res = self.result_
        return sample_q_psi(res.scale * res.covariance, res.psi_mean, res.site_precision, int(n),
                            rng=as_generator(rng))

    def sample_probs(self, n: int, *, rng: SeedLike = None) -> FloatArray:
        """Draws of the probability vectors from :math:`q`.

        Parameters
        ----------
        n : int
        rng : None, int or numpy.random.Generator

        Returns
        -------
        ndarray of shape (n, C, K)
        """
        return psi_to_pi(self.sample_psi(n, rng=rng))

    def fit_gibbs(self, counts: Any, n_samples: int, burn_in: int = 200, rng: SeedLike = None,
                  *, thin: int = 1):
        """Exact posterior samples by the Polya-Gamma Gibbs sampler under the same prior.

        Uses the jittered, scaled covariance and the prior mean of the last VI fit when there is
        one (so learned hyper-parameters carry over), otherwise the constructor's prior.
        The chain starts at the VI means when available.

        Parameters
        ----------
        counts : array_like of shape (C, K)
        n_samples, burn_in, thin : int
        rng : None, int or numpy.random.Generator
            Source of randomness (``None``: fresh OS entropy; pass a seed to reproduce).

        Returns
        -------
        GibbsResult
            ``psi`` (n_samples, C, K - 1) and ``pi`` (n_samples, C, K) draws.
        """
        from .gibbs import run_gibbs

        self._check_params()
        x = check_counts(counts, "counts")
        c, k = x.shape
        init_psi = None
        if hasattr(self, "result_") and self.result_.psi_mean.shape == (c, k - 1):
            cov = self.result_.scale * self.result_.covariance
            mean = self.result_.mean
            init_psi = self.result_.psi_mean
        else:
            base, _, _ = self._cached_prior(c)
            cov = float(self.scale) * base
            mean = self._prepare_mean(c, k)
        return run_gibbs(x, mean, cov, n_samples, burn_in=burn_in, thin=thin,
                         rng=as_generator(rng), init_psi=init_psi)


__all__ = ["CorrelatedMultinomial"]
