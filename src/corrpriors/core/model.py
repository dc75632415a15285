r"""The correlated multinomial model (scikit-learn style estimator)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from .._random import as_generator
from .._repr import estimator_repr
from .._threads import blas_threads
from .._typing import FloatArray, SeedLike
from .._validation import (
    as_real_array,
    check_array,
    check_bool,
    check_counts,
    check_covariance,
    check_points,
    check_positive,
    check_shape,
)
from ..exceptions import ConvergenceWarning
from .cavi import CAVIOptions, run_cavi
from .fixed_point import FixedPointOptions, stall_advice
from .priors.base import GaussianPrior, build_layout, check_prior
from .priors.dense import DenseCovariancePrior
from .results import VIResult
from .stick_breaking import count_statistics, psi_to_pi, uniform_psi


def marginal_probs(psi_mean: np.ndarray, psi_var: np.ndarray, *, method: str = "plugin",
                   n_samples: int = 2000, rng: SeedLike = None,
                   return_std: bool = False) -> Any:
    r"""Category probabilities from independent Gaussian marginals of the stick logits.

    Parameters
    ----------
    psi_mean, psi_var : ndarray of shape (N, K - 1)
    method : {"plugin", "mc"}
        ``"plugin"``: :math:`\pi(E[\psi])`; ``"mc"``: :math:`E[\pi(\psi)]` by Monte Carlo.
    n_samples : int
    rng : None, int or numpy.random.Generator
    return_std : bool
        Also return the standard deviations of the probabilities (Monte Carlo; deviations
        merged chunk by chunk, Chan et al.).

    Returns
    -------
    probs : ndarray of shape (N, K)
    std : ndarray of shape (N, K)
        Only with ``return_std=True``.
    """
    if method not in ("plugin", "mc"):
        raise ValueError(f"method: expected 'plugin' or 'mc', got {method!r}")
    return_std = check_bool(return_std, "return_std")
    if method == "plugin" and not return_std:
        return psi_to_pi(psi_mean)
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) \
            or n_samples < 1:
        raise ValueError(f"n_samples: expected a positive integer, got {n_samples!r}")
    gen = as_generator(rng)
    total = np.zeros((psi_mean.shape[0], psi_mean.shape[1] + 1))
    m2 = np.zeros_like(total)
    sd = np.sqrt(psi_var)
    chunk = max(1, int(2 ** 22 // max(1, psi_mean.size)))
    done = 0
    while done < n_samples:
        m = min(chunk, n_samples - done)
        pi = psi_to_pi(psi_mean + sd * gen.standard_normal((m,) + psi_mean.shape))
        part = pi.sum(axis=0)
        if return_std:
            dev = part / m - (total / done if done else 0.0)
            m2 += ((pi - part / m) ** 2).sum(axis=0) + dev ** 2 * (done * m / (done + m))
        total += part
        done += m
    mean = total / n_samples if method == "mc" else psi_to_pi(psi_mean)
    if not return_std:
        return mean
    return mean, np.sqrt(m2 / max(1, n_samples - 1))


def _snapshot(source: Any) -> Any:
    """A copy of a matrix's values (to notice in-place changes); ``None`` for objects."""
    import scipy.sparse as sp

    if _is_bound_kernel(source) or isinstance(source, GaussianPrior) or source is None:
        return None
    if sp.issparse(source):
        return sp.csr_array(source, copy=True)
    return np.array(source, dtype=float, copy=True)


def _same_values(snapshot: Any, source: Any) -> bool:
    import scipy.sparse as sp

    if snapshot is None:
        return True
    if sp.issparse(source):
        current = sp.csr_array(source)
        return (current.shape == snapshot.shape and current.nnz == snapshot.nnz
                and abs(current - snapshot).sum() == 0)
    return np.array_equal(snapshot, np.asarray(source))


def _is_bound_kernel(obj: Any) -> bool:
    return hasattr(obj, "gram") and callable(obj.gram)


#: Largest magnitude of a prior mean on the logit scale. The stick probabilities are exactly 0
#: or 1 in double precision from about 750 on, so larger means say nothing more; and from about
#: 1e12 on the fit loses the posterior variances (relative to the mean's square the unit-scale
#: variances fall below the rounding: 1.0001 at 1e12, 0 or 3.7e33 at 1e30 and 1e50, against
#: the prior's 1), the collapsed bound turns NaN (1e16) and the Polya-Gamma sampler does not
#: return (tilts of 1e46). 1e6 keeps every quantity exact to the digit (checked to 1e10).
MAX_LOGIT = 1e6


def _check_logits(x: np.ndarray, name: str) -> np.ndarray:
    worst = float(np.max(np.abs(x), initial=0.0))
    if worst > MAX_LOGIT:
        raise ValueError(f"{name}: prior means of the stick logits must lie within "
                         f"+-{MAX_LOGIT:g} (the sticks are exactly 0 or 1 from about 750 on, and "
                         f"the fit loses precision far beyond), got {worst:.3g}")
    return x


def _summary(draws: np.ndarray, level: float, return_std: bool) -> Any:
    """Central interval (and standard deviation) of draws (M, ...) along the first axis."""
    from .marginals import central_interval

    lower, upper = central_interval(draws, level)
    return (lower, upper, draws.std(axis=0, ddof=1)) if return_std else (lower, upper)


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
    covariance : ndarray of shape (C, C), BoundKernel or GaussianPrior, optional
        :math:`\tilde\Sigma`: symmetric positive semi-definite. A rank-deficient matrix is
        accepted with the smallest escalating diagonal jitter :math:`\epsilon` that allows a
        Cholesky factorisation (silent up to 1e-8 of the mean diagonal, else a
        :class:`~corrpriors.exceptions.JitterWarning`); the jittered matrix is used everywhere
        (VI, ELBO, Gibbs), so the ELBO is exact for the fitted model. A bound kernel
        (``kernel.bind(coords=...)``) enables ``learn_kernel`` and :meth:`predict_probs`. Any
        object implementing :class:`~corrpriors.core.priors.GaussianPrior` is used as it is.
        Exactly one of ``covariance`` and ``precision``.
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
        Stop when the relative change of the objective is at most ``tol`` and the gains are
        shrinking so that the rest of the climb (Aitken's estimate from the last gains) is at
        most ``tol`` relative too (:class:`~corrpriors.core.fixed_point.FixedPointOptions`).
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
    precision : scipy.sparse matrix or ndarray of shape (C, C), optional
        A sparse symmetric positive-definite precision :math:`Q` with
        :math:`\tilde\Sigma = Q^{-1}` (e.g. a GMRF from :func:`corrpriors.kernels.grid_precision`):
        the same model, fitted exactly through sparse Cholesky factorisations and selected
        inversion (:class:`~corrpriors.core.priors.SparsePrecisionPrior`), for 10^4-10^5
        covariates. Exactly one of ``covariance`` and ``precision``.
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
    scale_selected_ : bool
        Whether the fixed scale was chosen from these data by :func:`~corrpriors.select_scale`
        (then :meth:`credible_interval` integrates over it).

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

    def __init__(self, covariance: Any = None, mean: Any = None, learn_mean: str | None = None,
                 learn_scale: bool = False, max_iter: int = 1000, tol: float = 1e-8, *,
                 precision: Any = None, scale: float = 1.0,
                 scale_prior: tuple[float, float] | None = None,
                 mean_prior_std: float | None = None, mean_prior_mean: Any = None,
                 learn_kernel: bool = False, warm_start: bool = False, verbose: bool = False,
                 acceleration: str | None = "anderson"):
        self.covariance = covariance
        self.precision = precision
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

    def __repr__(self) -> str:  # noqa: D105
        return estimator_repr(self)

    # ------------------------------------------------------------------ validation / prior
    def _options(self, n_categories: int) -> CAVIOptions:
        """The validated options of a fit (every constructor parameter checked here, once)."""
        learn_scale = check_bool(self.learn_scale, "learn_scale")
        learn_kernel = check_bool(self.learn_kernel, "learn_kernel")
        check_positive(self.tol, "tol", strict=False)
        check_positive(self.scale, "scale")
        scale_prior = None
        if self.scale_prior is not None:
            sp = self.scale_prior
            if isinstance(sp, (str, bytes)) or not hasattr(sp, "__len__") or len(sp) != 2:
                raise ValueError(f"scale_prior: expected (shape, rate), a pair of positive "
                                 f"numbers, got {sp!r}")
            scale_prior = (check_positive(sp[0], "scale_prior shape"),
                           check_positive(sp[1], "scale_prior rate"))
        tau = None
        if self.mean_prior_std is not None:
            tau = check_positive(self.mean_prior_std, "mean_prior_std")
            if tau ** 2 == 0.0 or not np.isfinite(1.0 / tau ** 2):
                raise ValueError(f"mean_prior_std: expected a positive number whose square is "
                                 f"representable (mean_prior_std >= 1e-150), got {tau!r}")
        if self.mean_prior_mean is None:
            m0 = uniform_psi(n_categories)
        else:
            m0 = check_array(self.mean_prior_mean, "mean_prior_mean", ndim=1)
            check_shape(m0, (n_categories - 1,), "mean_prior_mean")
            _check_logits(m0, "mean_prior_mean")
        if self.learn_kernel and self.precision is not None:
            raise ValueError("learn_kernel: a precision prior has no kernel to learn; compare "
                             "precisions (e.g. length scales) with select_kernel instead")
        if self.learn_kernel and not _is_bound_kernel(self.covariance):
            raise ValueError("learn_kernel: needs covariance to be a bound kernel "
                             "(kernel.bind(coords=...)), got an array")
        if self.learn_kernel and self.covariance.n_params == 0:
            raise ValueError("learn_kernel: every hyper-parameter of the kernel is fixed; "
                             "give one a range (e.g. lengthscale_bounds) or set learn_kernel=False")
        iteration = FixedPointOptions(max_iter=self.max_iter, tol=float(self.tol),
                                      acceleration=self.acceleration)
        return CAVIOptions(learn_scale=learn_scale, learn_mean=self.learn_mean,
                           scale_prior=scale_prior, mean_prior_mean=m0, mean_prior_std=tau,
                           learn_kernel=learn_kernel, iteration=iteration)

    def _build_prior(self, n_covariates: int) -> GaussianPrior:
        cov = self.covariance
        if (cov is None) == (self.precision is None):
            raise ValueError("covariance, precision: expected exactly one of them, got "
                             + ("neither" if cov is None else "both"))
        if self.precision is not None:
            from .priors.sparse import SparsePrecisionPrior

            if isinstance(self.precision, GaussianPrior):
                return check_prior(self.precision, n_covariates, "precision")
            return SparsePrecisionPrior(self.precision, size=n_covariates)
        if isinstance(cov, GaussianPrior):
            return check_prior(cov, n_covariates, "covariance")
        if _is_bound_kernel(cov):
            if cov.n_covariates != n_covariates:
                raise ValueError(f"covariance: expected a kernel bound to C = {n_covariates} "
                                 f"covariates (rows of counts), got C = {cov.n_covariates}")
            return DenseCovariancePrior.from_kernel(cov)
        if cov is None:
            raise ValueError("covariance: required, got None")
        import scipy.sparse as sp

        if isinstance(cov, (str, bytes)) or sp.issparse(cov):
            raise ValueError(f"covariance: expected a numeric (C, C) array or a bound kernel, "
                             f"got {type(cov).__name__}")
        # complex (the imaginary part would be lost) and booleans (True is not 1.0) refused
        # before any conversion to float
        as_real_array(cov, "covariance", allow_bool=False, expected="a real (C, C) matrix")
        arr = check_covariance(cov, "covariance", size=n_covariates)
        return DenseCovariancePrior(arr)

    def _prior(self, n_covariates: int) -> GaussianPrior:
        """The prior structure, cached while ``covariance`` is unchanged (validation, the
        Cholesky factor and the jitter cost O(C^3); PSRL refits the same prior often).
        """
        prev = getattr(self, "_prior_cache", None)
        source = self.covariance if self.precision is None else self.precision
        if (prev is not None and prev[0] is source and prev[2].n_covariates == n_covariates
                and _same_values(prev[1], source)):
            return prev[2]
        prior = self._build_prior(n_covariates)
        self._prior_cache = (source, _snapshot(source), prior)
        return prior

    def _prepare_mean(self, c: int, k: int) -> np.ndarray:
        if self.mean is None:
            return np.repeat(uniform_psi(k)[None, :], c, axis=0)
        mean = as_real_array(self.mean, "mean", allow_bool=False,
                             expected="real prior means of the stick logits").astype(np.float64)
        if mean.shape == (k - 1,):
            mean = np.repeat(mean[None, :], c, axis=0)
        if mean.shape != (c, k - 1):
            raise ValueError(f"mean: expected shape (K-1,) = ({k - 1},) or (C, K-1) = "
                             f"({c}, {k - 1}), got {mean.shape}")
        if not np.all(np.isfinite(mean)):
            raise ValueError("mean: contains NaN or infinite values")
        return _check_logits(mean, "mean")

    def _start(self, init: Any, warm_start: bool | None, shape: tuple[int, int]
               ) -> VIResult | None:
        use_warm = self.warm_start if warm_start is None else warm_start
        if isinstance(init, CorrelatedMultinomial):
            init = getattr(init, "result_", None)
        if init is None and use_warm:
            init = getattr(self, "result_", None)
        if init is not None and init.psi_mean.shape == shape:
            return init
        return None

    # ------------------------------------------------------------------ fitting
    def fit(self, counts: Any, warm_start: bool | None = None,
            init: VIResult | CorrelatedMultinomial | None = None, *,
            callback: Any = None) -> CorrelatedMultinomial:
        """Fit :math:`q` (and the learned hyper-parameters) to a count matrix.

        Parameters
        ----------
        counts : array_like of shape (C, K)
            Non-negative integer counts (integer-valued floats accepted), K >= 2.
        warm_start : bool, optional
            Overrides the ``warm_start`` parameter for this call.
        init : VIResult or CorrelatedMultinomial, optional
            Start from this solution (tilts, scale, means) if its shapes match.
        callback : callable, optional
            Called as ``callback(iteration, objective)`` after every accepted iteration
            (progress reports).

        Returns
        -------
        self
        """
        x = check_counts(counts, "counts")
        c, k = x.shape
        options = self._options(k)
        if self.learn_mean == "full":
            warnings.warn(
                "learn_mean='full' sets the prior mean to the posterior mean (mu_k = lambda_k, as "
                "in the paper); this removes the prior's coupling between covariates and the "
                "result depends on max_iter. Prefer learn_mean='constant'.", UserWarning,
                stacklevel=2)
        prior = self._prior(c)
        mean = self._prepare_mean(c, k)
        report = None if callback is None else (
            lambda it, ev: callback(it, ev.objective))
        res = run_cavi(x, prior, mean, options, scale=float(self.scale),
                       init=self._start(init, warm_start, (c, k - 1)), callback=report,
                       verbose=bool(self.verbose))
        if not res.monotone:
            warnings.warn("the objective decreased during the fit: the arithmetic broke down "
                          "(an extreme prior scale or extreme counts?); the result is recorded "
                          "with converged_=False.", ConvergenceWarning, stacklevel=2)
        elif not res.converged:
            warnings.warn(self._not_converged_message(res, options), ConvergenceWarning,
                          stacklevel=2)
        self._set_result(res)
        self.counts_ = x
        return self

    def _not_converged_message(self, res: VIResult, options: CAVIOptions) -> str:
        """The ConvergenceWarning of a fit stopped at ``max_iter``: how far it was and what to
        try.
        """
        advice = stall_advice(res.objective_trace, float(self.tol), int(self.max_iter))
        tries = [f"max_iter={advice.max_iter}"]
        if advice.tol is not None:  # close: a looser tolerance is a fair choice
            tries.append(f"tol={advice.tol:.0e}")
        if options.learn_kernel and not options.joint_kernel:
            tries.append("learn_mean=None or 'constant' (the joint kernel step, which "
                         "converges in tens of iterations)")
        if (options.iteration.acceleration is None and not options.learn_kernel
                and options.learn_mean != "full"):
            tries.append("acceleration='anderson'")
        if options.learn_scale and res.scale < 0.02 * float(self.scale):
            tries.append(f"a fixed scale or a scale_prior (the scale fell to {res.scale:.2g}: "
                         f"the counts may vary no more than the prior mean allows)")
        elif options.learn_scale or options.learn_kernel:
            tries.append("fewer learned hyper-parameters (a fixed scale or kernel)")
        return (f"CAVI did not converge in max_iter={self.max_iter} iterations "
                f"(tol={self.tol:g}){advice.how_far('tol')}. Try {'; '.join(tries)}. The "
                f"result is recorded with converged_=False.")

    def _set_result(self, res: VIResult) -> None:
        self.result_ = res
        self.scale_selected_ = False  # set by ScaleSearch after its fits
        self.psi_mean_ = res.psi_mean
        self.psi_var_ = res.psi_var
        self.elbo_ = res.elbo
        self.objective_ = res.objective
        self.elbo_trace_ = res.elbo_trace
        self.objective_trace_ = res.objective_trace
        self.scale_ = res.scale
        self.mean_ = res.mean
        self.prior_ = res.prior
        self.covariance_ = getattr(res.prior, "base", None)
        self.jitter_ = res.jitter
        self.n_iter_ = res.n_iter
        self.n_psi_steps_ = res.n_psi_steps
        self.converged_ = res.converged
        self.kernel_ = getattr(res.prior, "kernel", None)

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

    def probs(self, method: str = "plugin", n_samples: int = 2000, *, rng: SeedLike = None,
              return_std: bool = False) -> Any:
        r"""Posterior probability vectors.

        Parameters
        ----------
        method : {"plugin", "mc"}
            ``"plugin"``: :math:`\pi(\lambda)` (what the paper uses). ``"mc"``:
            :math:`E_q[\pi(\psi)]` by Monte Carlo over the marginals :math:`N(\lambda_{ck},
            (V_k)_{cc})` (sticks are independent under q, so marginals suffice per covariate).
        n_samples : int
        rng : None, int or numpy.random.Generator
            Needed for ``method="mc"`` or ``return_std`` (``None``: fresh OS entropy).
        return_std : bool, default=False
            Also return the standard deviations of the probabilities under the **mean-field**
            :math:`q(\psi)` of the VI fit, by Monte Carlo over the same marginals
            (``n_samples`` draws from ``rng``, also with ``method="plugin"``, whose mean uses no
            draws). They are too small: the mean-field posterior is too narrow (its 90 %
            intervals cover .81-.88 in simulation-based calibration, .75-.81 with a learned
            scale plugged in). For calibrated
            uncertainty use ``credible_interval(return_std=True)``.

        Returns
        -------
        probs : ndarray of shape (C, K)
        std : ndarray of shape (C, K)
            Only with ``return_std=True``.
        """
        self._check_fitted()
        return marginal_probs(self.psi_mean_, self.psi_var_, method=method, n_samples=n_samples,
                              rng=rng, return_std=check_bool(return_std, "return_std"))

    def predict_psi(self, new_covariates: Any, *, new_mean: Any = None
                    ) -> tuple[FloatArray, FloatArray]:
        r"""Posterior means and variances of :math:`\psi` at new covariates.

        The GP conditional of the prior given the fitted :math:`q`: for a new covariate
        :math:`x_*` with cross-covariances :math:`k_* = \theta\tilde k(X, x_*)`,

        .. math::

            E[\psi_{*k}] = \mu_{*k} + k_*^\top\Sigma^{-1}(\lambda_k - \mu_k), \qquad
            Var[\psi_{*k}] = \theta\tilde k(x_*, x_*) - k_{*O}^\top(\Sigma_{OO} + D_k^{-1})^{-1}
            k_{*O},

        exactly what a fit with the new covariates appended as zero-count rows gives (a zero-count
        row does not change the others' posterior), at the fitted scale and means.

        Parameters
        ----------
        new_covariates : array_like of shape (M, D)
            Coordinates, like those the kernel was bound to.
        new_mean : array_like of shape (K - 1,) or (M, K - 1), optional
            Prior means at the new covariates; needed only when the fitted means vary by
            covariate (otherwise the common mean is used).

        Returns
        -------
        mean : ndarray of shape (M, K - 1)
        var : ndarray of shape (M, K - 1)
        """
        self._check_fitted()
        res = self.result_
        kernel = getattr(res.prior, "kernel", None)
        coords = getattr(kernel, "coords", None)
        if kernel is None or coords is None or not hasattr(res.prior, "conditional"):
            raise ValueError("new_covariates: prediction needs a model built on a kernel bound to "
                             "coordinates (kernel.bind(coords=...)); this model's prior is a "
                             "plain matrix (or a distance-bound kernel), whose covariance with "
                             "new covariates is unknown")
        x_new = check_points(new_covariates, "new_covariates", n_dims=coords.shape[1])
        km1 = res.psi_mean.shape[1]
        mu_new = self._mean_at(x_new.shape[0], km1, new_mean)
        cross = np.asarray(kernel.kernel(coords, x_new), dtype=np.float64)       # (C, M)
        self_var = np.asarray(kernel.kernel.diag(x_new), dtype=np.float64) + res.jitter
        b, kappa = count_statistics(self.counts_)
        layout = build_layout(b > 0)
        with blas_threads(1):
            shift, var = res.prior.conditional(layout, res.scale, res.mean, kappa,
                                               layout.gather(res.site_precision), cross, self_var)
        return mu_new + shift, var

    def _mean_at(self, m: int, km1: int, new_mean: Any) -> FloatArray:
        if new_mean is not None:
            mu = check_array(new_mean, "new_mean")
            if mu.shape == (km1,):
                mu = np.repeat(mu[None, :], m, axis=0)
            check_shape(mu, (m, km1), "new_mean")
            return _check_logits(mu, "new_mean")
        fitted = self.result_.mean
        if not np.all(fitted == fitted[:1]):
            raise ValueError("new_mean: the fitted prior means vary by covariate; pass the prior "
                             "means at the new covariates (shape (K-1,) or (M, K-1))")
        return np.repeat(fitted[:1], m, axis=0)

    def predict_probs(self, new_covariates: Any, method: str = "plugin", *,
                      return_std: bool = False, n_samples: int = 2000, rng: SeedLike = None,
                      new_mean: Any = None) -> Any:
        r"""Category probabilities at new covariates (see :meth:`predict_psi`).

        Parameters
        ----------
        new_covariates : array_like of shape (M, D)
        method : {"plugin", "mc"}
            As in :meth:`probs`.
        return_std : bool, default=False
            Also return posterior standard deviations (scikit-learn's ``return_std``) under the
            **mean-field** :math:`q(\psi)` of the VI fit, like :meth:`probs`: too small. For
            calibrated uncertainty use ``predict_credible_interval(return_std=True)``.
        n_samples : int
        rng : None, int or numpy.random.Generator
            Needed for ``method="mc"`` or ``return_std``.
        new_mean : array_like, optional
            See :meth:`predict_psi`.

        Returns
        -------
        probs : ndarray of shape (M, K)
        std : ndarray of shape (M, K)
            Only with ``return_std=True``.
        """
        return_std = check_bool(return_std, "return_std")
        mean, var = self.predict_psi(new_covariates, new_mean=new_mean)
        return marginal_probs(mean, var, method=method, n_samples=n_samples, rng=rng,
                              return_std=return_std)

    # ------------------------------------------------------------------ calibrated uncertainty
    def calibrated_posterior(self, *, hyper: str = "auto") -> Any:
        r"""The calibrated posterior behind ``credible_interval(method="calibrated")`` (cached).

        Expectation propagation started from the VI fit, with tilted marginals, integrated over
        the hyper-parameters the fit learned (:mod:`corrpriors.core.intervals`).

        Parameters
        ----------
        hyper : {"auto", "fixed", "scale", "all"}
            ``"auto"``: integrate the scale if ``learn_scale`` or the model was chosen by
            :func:`~corrpriors.select_scale` / :class:`~corrpriors.ScaleSearch`
            (``scale_selected_``), and the kernel's free parameters if ``learn_kernel`` (flat
            hyper-priors on their logarithms; the scale's is the ``scale_prior`` when given);
            keep the rest at the fitted values. ``"fixed"``: plug in every fitted value.
            ``"scale"``: integrate the scale only. ``"all"``: the scale and the kernel's
            parameters.

        Returns
        -------
        CalibratedPosterior
        """
        from .intervals import calibrated_marginals, hyper_axes

        self._check_fitted()
        key = (id(self.result_), hyper)
        cached = getattr(self, "_calibrated", None)
        if cached is not None and cached[0] == key and cached[1] is self.result_:
            return cached[2]
        learned = bool(self.learn_scale) or bool(getattr(self, "scale_selected_", False))
        scale_on, kernel_on = hyper_axes(self.result_, hyper, learned, bool(self.learn_kernel))
        post = calibrated_marginals(self.counts_, self.result_, integrate_scale=scale_on,
                                    integrate_kernel=kernel_on,
                                    scale_prior=self.scale_prior if self.learn_scale else None)
        self._calibrated = (key, self.result_, post)
        return post

    def credible_interval(self, level: float = 0.9, *, method: str = "calibrated",
                          rng: SeedLike = None, n_samples: int = 1024, hyper: str = "auto",
                          return_std: bool = False) -> Any:
        r"""Central credible intervals of every probability :math:`\pi_{ck}`.

        Parameters
        ----------
        level : float, default=0.9
            Posterior mass inside, in (0, 1): the bounds are the :math:`(1 - level)/2` and
            :math:`(1 + level)/2` posterior quantiles.
        method : {"calibrated", "vi", "gibbs"}
            ``"calibrated"`` (default): expectation propagation with tilted marginals,
            integrated over learned hyper-parameters (:meth:`calibrated_posterior`); covers
            at its nominal level in simulation-based calibration (see the user guide, "How far
            to trust the intervals"). ``"vi"``: the mean-field :math:`q(\psi)` of the fit, too
            narrow (90 % intervals cover .81-.88; .75-.81 with a learned scale). ``"gibbs"``: ``n_samples`` draws of the
            Polya-Gamma Gibbs sampler (after ``n_samples // 4`` burn-in sweeps) at the fitted
            hyper-parameters; exact up to Monte Carlo error, tens of times slower.
        rng : None, int or numpy.random.Generator
        n_samples : int, default=1024
            Draws per covariate (randomised quasi-Monte Carlo for ``"calibrated"`` and
            ``"vi"``, Gibbs sweeps for ``"gibbs"``).
        hyper : {"auto", "fixed", "scale", "all"}
            Hyper-parameters of ``"calibrated"`` (see :meth:`calibrated_posterior`).
        return_std : bool, default=False
            Also return the posterior standard deviations of the probabilities under the same
            method (from the same draws).

        Returns
        -------
        lower, upper : ndarray of shape (C, K)
        std : ndarray of shape (C, K)
            Only with ``return_std=True``.
        """
        from .intervals import vi_marginals
        from .marginals import probability_interval

        level, n_samples, gen = self._interval_args(level, method, n_samples, rng, hyper,
                                                    return_std)
        return_std = bool(return_std)
        if method == "gibbs":
            draws = self.fit_gibbs(self.counts_, n_samples, burn_in=max(1, n_samples // 4),
                                   rng=gen).pi
            return _summary(draws, level, return_std)
        mixture = (vi_marginals(self.result_) if method == "vi"
                   else self.calibrated_posterior(hyper=hyper).marginals)
        return probability_interval(mixture, level, n_samples, rng=gen, return_std=return_std)

    def predict_credible_interval(self, new_covariates: Any, level: float = 0.9, *,
                                  method: str = "calibrated", rng: SeedLike = None,
                                  n_samples: int = 1024, new_mean: Any = None,
                                  hyper: str = "auto", return_std: bool = False) -> Any:
        """Central credible intervals of the probabilities at new covariates.

        As :meth:`credible_interval`, for the predictions of :meth:`predict_probs` (a model
        built on a kernel bound to coordinates). ``"calibrated"`` uses EP's Gaussian
        predictive of every hyper-parameter point; ``"gibbs"`` the prior's conditional given
        every Gibbs draw.

        Parameters
        ----------
        new_covariates : array_like of shape (M, D)
        level : float
        method : {"calibrated", "vi", "gibbs"}
        rng : None, int or numpy.random.Generator
        n_samples : int
        new_mean : array_like of shape (K - 1,) or (M, K - 1), optional
            See :meth:`predict_psi`.
        hyper : {"auto", "fixed", "scale", "all"}
        return_std : bool, default=False

        Returns
        -------
        lower, upper : ndarray of shape (M, K)
        std : ndarray of shape (M, K)
            Only with ``return_std=True``.
        """
        from .intervals import gibbs_predictive_psi, predictive_marginals
        from .marginals import MarginalMixture, MarginalPsi, probability_interval

        level, n_samples, gen = self._interval_args(level, method, n_samples, rng, hyper,
                                                    return_std)
        return_std = bool(return_std)
        mean, var = self.predict_psi(new_covariates, new_mean=new_mean)  # validates
        x_new = np.asarray(new_covariates, dtype=float)
        mu_new = self._mean_at(x_new.shape[0], mean.shape[1], new_mean)
        if method == "vi":
            mixture = MarginalMixture.single(MarginalPsi(mean, var), "vi")
        elif method == "gibbs":
            res = self.result_
            draws = self.fit_gibbs(self.counts_, n_samples, burn_in=max(1, n_samples // 4),
                                   rng=gen).psi
            psi = gibbs_predictive_psi(res.prior, res.scale, res.mean, draws, x_new, mu_new,
                                       rng=gen)
            return _summary(psi_to_pi(psi), level, return_std)
        else:
            mixture = predictive_marginals(self.calibrated_posterior(hyper=hyper), self.counts_,
                                           x_new, mu_new)
        return probability_interval(mixture, level, n_samples, rng=gen, return_std=return_std)

    def _interval_args(self, level: Any, method: str, n_samples: Any, rng: SeedLike,
                       hyper: Any, return_std: Any) -> tuple[float, int, np.random.Generator]:
        from .intervals import HYPER

        self._check_fitted()
        if not isinstance(hyper, str) or hyper not in HYPER:   # checked for every method, not only "calibrated"
            raise ValueError(f"hyper: expected one of {HYPER}, got {hyper!r}")
        check_bool(return_std, "return_std")
        if isinstance(level, bool) or not isinstance(level, (int, float, np.floating)) \
                or not 0.0 < float(level) < 1.0:
            raise ValueError(f"level: expected a number in (0, 1), got {level!r}")
        if method not in ("calibrated", "vi", "gibbs"):
            raise ValueError(f"method: expected 'calibrated', 'vi' or 'gibbs', got {method!r}")
        if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) \
                or n_samples < 2:
            raise ValueError(f"n_samples: expected an integer >= 2, got {n_samples!r}")
        return float(level), int(n_samples), as_generator(rng)

    def sample_psi(self, n: int, *, rng: SeedLike, method: str = "vi") -> FloatArray:
        r"""Joint draws of :math:`\psi` (each stick jointly across covariates).

        The prior's joint sampler (for a dense prior Matheron's rule, see
        :meth:`corrpriors.core.priors.DenseCovariancePrior.sample_posterior`).

        Parameters
        ----------
        n : int
        rng : None, int or numpy.random.Generator
        method : {"vi", "calibrated"}
            ``"vi"``: the mean-field :math:`q(\psi)` of the fit (too narrow, see
            :meth:`credible_interval`). ``"calibrated"``: the Gaussian approximations of
            :meth:`calibrated_posterior` (EP at every hyper-parameter point, the points drawn by
            their weights); the tilted marginals of :meth:`credible_interval` are
            per-covariate and do not enter joint draws.

        Returns
        -------
        ndarray of shape (n, C, K - 1)
        """
        self._check_fitted()
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"n: expected a positive integer, got {n!r}")
        if method not in ("vi", "calibrated"):
            raise ValueError(f"method: expected 'vi' or 'calibrated', got {method!r}")
        gen = as_generator(rng)
        res = self.result_
        if method == "vi":
            with blas_threads(1):
                return res.prior.sample_posterior(res.scale, res.psi_mean, res.site_precision,
                                                  int(n), rng=gen)
        post = self.calibrated_posterior()
        comp = post.marginals.allocation(gen.permutation((np.arange(n) + gen.random()) / n))
        out = np.empty((int(n),) + res.psi_mean.shape)
        with blas_threads(1):
            for g in np.unique(comp):
                ep, prior = post.fits[g]
                sel = np.flatnonzero(comp == g)
                out[sel] = prior.sample_posterior(ep.scale, ep.psi_mean, ep.site_precision,
                                                  sel.size, rng=gen)
        return out

    def sample_probs(self, n: int, *, rng: SeedLike = None, method: str = "vi") -> FloatArray:
        """Joint draws of the probability vectors (see :meth:`sample_psi`).

        Parameters
        ----------
        n : int
        rng : None, int or numpy.random.Generator
        method : {"vi", "calibrated"}

        Returns
        -------
        ndarray of shape (n, C, K)
        """
        return psi_to_pi(self.sample_psi(n, rng=rng, method=method))

    def fit_gibbs(self, counts: Any, n_samples: int, burn_in: int = 200, *,
                  rng: SeedLike = None, thin: int = 1):
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

        x = check_counts(counts, "counts")
        c, k = x.shape
        self._options(k)
        if hasattr(self, "result_") and self.result_.psi_mean.shape == (c, k - 1):
            res = self.result_
            return run_gibbs(x, res.mean, res.prior, n_samples, burn_in=burn_in, thin=thin,
                             rng=as_generator(rng), init_psi=res.psi_mean, scale=res.scale)
        return run_gibbs(x, self._prepare_mean(c, k), self._prior(c), n_samples,
                         burn_in=burn_in, thin=thin, rng=as_generator(rng),
                         scale=float(self.scale))


__all__ = ["CorrelatedMultinomial", "marginal_probs"]
