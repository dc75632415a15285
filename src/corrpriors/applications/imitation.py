r"""Imitation learning: a posterior over the expert's policy from demonstrations (paper section 4.1).

The demonstrations :math:`\mathcal D = \{(s_d, a_d)\}_{d=1}^D` give the count matrix
:math:`X_{sa} = \sum_d \mathbb 1(s_d = s, a_d = a)`. The expert's local action distributions
:math:`\boldsymbol\pi_s \in \Delta^A` are modelled either jointly,

.. math::

    \boldsymbol\pi_s = \Pi_{SB}(\boldsymbol\psi_{s\cdot}), \qquad
    \boldsymbol\psi_{\cdot k} \sim \mathcal N(\boldsymbol\mu_k, \theta\,\Sigma), \qquad
    \mathbf x_s \sim \mathrm{Mult}(N_s, \boldsymbol\pi_s),

with :math:`\Sigma_{ss'} = \exp(-d(s, s')^2 / l^2)` on the states' coordinates (``model="pg"``),
or independently, :math:`\boldsymbol\pi_s \sim \mathrm{Dir}(\alpha)` (``model="dirichlet"``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._memory import check_memory
from .._typing import FloatArray, IntArray, SeedLike
from .._validation import check_array, check_bool, check_counts, check_int, check_positive

__all__ = ["PolicyEstimator", "demonstration_counts", "state_kernel"]

#: Arrays of the output's size, (n, S, A) float64, alive at the peak of
#: :meth:`PolicyEstimator.sample_policies` (tracemalloc, S = 100, A = 4, n = 2,000: 4.5 for the
#: PG model, 3.3 for Dirichlet).
_SAMPLE_ARRAYS = 5


def demonstration_counts(states, actions, n_states: int, n_actions: int) -> IntArray:
    """Count matrix of a demonstration set.

    Parameters
    ----------
    states : array_like of int, shape (D,)
        Visited states :math:`s_d`.
    actions : array_like of int, shape (D,)
        The actions :math:`a_d` shown there.
    n_states, n_actions : int
        S and A, at least 1 each; the (S, A) table must fit in memory
        (:func:`corrpriors.mdp.state_action_counts` checks before it allocates).

    Returns
    -------
    counts : ndarray of shape (S, A)
        ``counts[s, a]`` = number of demonstrations of action ``a`` at state ``s``.
    """
    n_states = check_int(n_states, "n_states", 1)   # before the ranges of states and actions
    n_actions = check_int(n_actions, "n_actions", 1)
    s = np.asarray(states)
    a = np.asarray(actions)
    if s.ndim != 1 or a.ndim != 1 or s.shape != a.shape:
        raise ValueError(f"states, actions: expected two 1-D arrays of equal length (D,), got "
                         f"{s.shape} and {a.shape}")
    for name, v, n in (("states", s, n_states), ("actions", a, n_actions)):
        if v.size and (not np.issubdtype(v.dtype, np.integer) or v.min() < 0 or v.max() >= n):
            raise ValueError(f"{name}: expected integers in [0, {n}), got values in "
                             f"[{v.min()}, {v.max()}] of dtype {v.dtype}")
    from ..mdp import state_action_counts

    return state_action_counts((s.astype(np.int64), a.astype(np.int64)), n_states, n_actions)


def state_kernel(*, coordinates=None, distances=None, lengthscale: float | None = None):
    r"""Squared-exponential kernel over states, bound to their locations (the paper's prior).

    :math:`k(s, s') = \exp(-d(s, s')^2 / l^2)` with Euclidean distances between the
    coordinates (or the given distances), and by default :math:`l` = the largest distance
    (the paper: "set l to the maximum occurring distance value").

    Parameters
    ----------
    coordinates : array_like of shape (S, D), optional
    distances : array_like of shape (S, S), optional
        Used instead of ``coordinates`` when given.
    lengthscale : float, optional
        Default: ``distances.max()``.

    Returns
    -------
    kernel : corrpriors.kernels.BoundKernel
    """
    from ..kernels import SquaredExponential, euclidean_distances

    if distances is None:
        if coordinates is None:
            raise ValueError("coordinates: give the state coordinates (S, D) or distances (S, S)")
        x = check_array(coordinates, "coordinates", ndim=2)
        distances = euclidean_distances(x)
    d = check_array(distances, "distances", ndim=2)
    if lengthscale is None:
        lengthscale = float(d.max()) if d.max() > 0 else 1.0
    lengthscale = check_positive(lengthscale, "lengthscale")
    return SquaredExponential(lengthscale=lengthscale).bind(distances=d)


class PolicyEstimator:
    r"""Posterior over a stochastic policy from state-action demonstrations.

    Model: see the module docstring. ``model="pg"`` fits a
    :class:`~corrpriors.core.model.CorrelatedMultinomial` over the states (covariates) and
    actions (categories); ``model="dirichlet"`` independent Dirichlet posteriors (with a
    near-zero ``alpha`` the estimate is uniform where there is no data).

    Parameters
    ----------
    model : {"pg", "dirichlet"}, default "pg"
    coordinates : array_like of shape (S, D), optional
        State coordinates for the default kernel :func:`state_kernel`.
    distances : array_like of shape (S, S), optional
        Distances between states (instead of ``coordinates``).
    covariance : ndarray of shape (S, S) or BoundKernel, optional
        A ready prior covariance (overrides coordinates / distances).
    lengthscale : float or sequence of float, optional
        Kernel length scale :math:`l`; default: the largest distance (the paper's choice). A
        sequence gives candidates: one model is fitted per value and the one with the highest
        ELBO is kept (:func:`corrpriors.core.selection.select_kernel`; the ELBO bounds the evidence,
        so it is comparable across kernels). A candidate of 0 stands for the largest distance.
    alpha : float, default 1e-3
        Dirichlet concentration (``model="dirichlet"``).
    learn_scale : bool, default True
        Learn the kernel scale :math:`\theta` by EM inside the fit. With the core's default
        ``scale_prior=None`` this is plain maximum-likelihood EM (no hyper-prior on
        :math:`\theta`); pass ``model_options={"scale_prior": (shape, rate)}`` for MAP-EM
        under a Gamma hyper-prior (see :class:`~corrpriors.core.model.CorrelatedMultinomial`).
    max_iter : int, default 1000
    tol : float, default 1e-8
    model_options : dict, optional
        Further keyword arguments for ``CorrelatedMultinomial``.

    Attributes
    ----------
    model_ : CorrelatedMultinomial or DirichletMultinomial
        The fitted count model.
    policy_ : ndarray of shape (S, A)
        Plug-in posterior-mean policy (PG: :math:`\Pi_{SB}(\lambda_s)`, what the paper shows;
        Dirichlet: the exact posterior mean).
    counts_ : ndarray of shape (S, A)
        The counts the model was fitted on.
    scale_ : float
        The learned kernel scale (NaN for the Dirichlet model).
    lengthscale_ : float
        The kernel length scale used (NaN for the Dirichlet model or a user covariance array).
    elbo_by_lengthscale_ : dict of float to float
        With candidate length scales: the ELBO of each (empty otherwise).

    Examples
    --------
    >>> est = PolicyEstimator("dirichlet").fit([[3, 1], [0, 0]])
    >>> est.policy_.round(3)
    array([[0.75 , 0.25 ],
           [0.5  , 0.5  ]])
    """

    def __init__(self, model: str = "pg", *, coordinates=None, distances=None, covariance=None,
                 lengthscale: float | Sequence[float] | None = None, alpha: float = 1e-3, learn_scale: bool = True,
                 max_iter: int = 1000, tol: float = 1e-8, model_options: dict | None = None):
        self.model = model
        self.coordinates = coordinates
        self.distances = distances
        self.covariance = covariance
        self.lengthscale: Any = lengthscale
        self.alpha = alpha
        self.learn_scale = learn_scale
        self.max_iter = max_iter
        self.tol = tol
        self.model_options = model_options

    def _model_options(self) -> dict:
        opts = dict(self.model_options or {})
        opts.setdefault("max_iter", self.max_iter)
        opts.setdefault("tol", self.tol)
        opts.setdefault("learn_scale", self.learn_scale)
        return opts

    def _make_model(self):
        if self.model == "dirichlet":
            from ..baselines import DirichletMultinomial

            self.lengthscale_ = float("nan")
            return DirichletMultinomial(alpha=check_positive(self.alpha, "alpha"))
        if self.model != "pg":
            raise ValueError(f"model: expected 'pg' or 'dirichlet', got {self.model!r}")
        from ..core.model import CorrelatedMultinomial

        cov = self.covariance
        if cov is None:
            cov = state_kernel(coordinates=self.coordinates, distances=self.distances,
                               lengthscale=self.lengthscale)
        ls = getattr(getattr(cov, "kernel", None), "lengthscale", None)
        self.lengthscale_ = float(ls) if ls is not None else float("nan")
        return CorrelatedMultinomial(covariance=cov, **self._model_options())

    def _fit_candidates(self, counts):
        """Fit one model per candidate length scale; keep the best by ELBO."""
        from ..core.selection import select_kernel

        cands = {}
        for i, value in enumerate(self.lengthscale):
            v = check_positive(value, f"lengthscale[{i}]", strict=False)   # 0: largest distance
            kern = state_kernel(coordinates=self.coordinates, distances=self.distances,
                                lengthscale=v if v > 0 else None)
            cands[float(kern.kernel.lengthscale)] = kern
        ranked = select_kernel(counts, cands, **self._model_options())
        self.elbo_by_lengthscale_ = {name: float(m.elbo_) for name, m in ranked}
        self.lengthscale_ = float(ranked[0][0])
        return ranked[0][1]

    def fit(self, counts, warm_start: bool = False) -> PolicyEstimator:
        """Fit on a state-action count matrix.

        Parameters
        ----------
        counts : array_like of shape (S, A)
            Demonstration counts (see :func:`demonstration_counts`).
        warm_start : bool, default False
            PG only: restart from the previous fit (same S, A) instead of from the prior. A
            previous fit of another kind (``model`` switched from ``"dirichlet"``) is not
            reused: the model is then fitted from scratch.

        Returns
        -------
        self : PolicyEstimator
        """
        counts = check_counts(counts, "counts")
        check_bool(self.learn_scale, "learn_scale")
        self.elbo_by_lengthscale_ = {}
        candidates = self.model == "pg" and self.covariance is None and \
            np.ndim(self.lengthscale) == 1
        if candidates:
            self.model_ = self._fit_candidates(counts)
        elif warm_start and self.model == "pg" and self._fitted_pg() \
                and getattr(self, "counts_", counts[:0]).shape == counts.shape:
            self.model_.fit(counts, warm_start=True)
        else:
            self.model_ = self._make_model()
            self.model_.fit(counts)
        self.counts_ = counts
        self.scale_ = float(self.model_.scale_) if self.model == "pg" else float("nan")
        self.policy_ = self.model_.probs(method="plugin")
        return self

    def _fitted_pg(self) -> bool:
        """Whether ``model_`` is a fitted correlated model (what a PG warm start needs)."""
        from ..core.model import CorrelatedMultinomial

        return isinstance(getattr(self, "model_", None), CorrelatedMultinomial)

    def fit_demonstrations(self, states, actions, n_states: int, n_actions: int) -> PolicyEstimator:
        r"""Fit on a demonstration set :math:`\{(s_d, a_d)\}`.

        Parameters
        ----------
        states, actions : array_like of int, shape (D,)
        n_states, n_actions : int

        Returns
        -------
        self : PolicyEstimator
        """
        return self.fit(demonstration_counts(states, actions, n_states, n_actions))

    def _check_fitted(self):
        if getattr(self, "model_", None) is None:
            raise ValueError("PolicyEstimator: call fit() before asking for the policy")

    def policy(self, method: str = "plugin", n_samples: int = 2000, *,
               rng: SeedLike = None) -> FloatArray:
        r"""Posterior-mean policy.

        Parameters
        ----------
        method : {"plugin", "mc"}, default "plugin"
            ``"plugin"``: :math:`\Pi_{SB}(\lambda_s)` (PG) or the Dirichlet posterior mean;
            ``"mc"``: Monte-Carlo estimate of :math:`E_q[\boldsymbol\pi_s]`.
        n_samples : int, default 2000
        rng : None, int or numpy.random.Generator

        Returns
        -------
        policy : ndarray of shape (S, A)
        """
        self._check_fitted()
        if method == "plugin":
            return self.model_.probs(method="plugin")
        if method == "mc":
            from .._random import as_generator

            return self.model_.probs(method="mc", n_samples=n_samples, rng=as_generator(rng))
        raise ValueError(f"method: expected 'plugin' or 'mc', got {method!r}")

    def sample_policies(self, n: int, *, rng: np.random.Generator) -> FloatArray:
        """Draw policies from the (approximate) posterior.

        Parameters
        ----------
        n : int
            At least 1; the draws (about five arrays of shape (n, S, A) at the peak) must fit
            in memory.
        rng : numpy.random.Generator

        Returns
        -------
        policies : ndarray of shape (n, S, A)
        """
        from .._random import as_generator

        self._check_fitted()
        n = check_int(n, "n", 1)
        n_states, n_actions = self.counts_.shape
        check_memory(_SAMPLE_ARRAYS * 8.0 * n * n_states * n_actions,
                     f"sample_policies: {n:,} draws of an (S, A) = ({n_states:,}, {n_actions:,}) policy",
                     "draw fewer policies at a time")
        return self.model_.sample_probs(n, rng=as_generator(rng))
