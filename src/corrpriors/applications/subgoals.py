r"""Subgoal modelling: a latent subgoal per state, coupled across states (paper section 4.2).

Generative model (Sosic et al. 2018, with the subgoal distributions of Alt et al. 2019):

.. math::

    \mathbf p_s = \Pi_{SB}(\boldsymbol\psi_{s\cdot}), \qquad
    g_s \sim \mathrm{Cat}(\mathbf p_s), \qquad
    a_d \sim p(a \mid s_d, g_{s_d}) = \mathrm{softmax}_a\big(\beta\, \tilde Q_{g}(s_d, a)\big),

for every state :math:`s \in \{1, \dots, S\}` and demonstration :math:`d = 1, \dots, D`, where
:math:`\tilde Q_g` are the optimal Q-values for reaching goal state :math:`g` normalised per
state (the "normalised softmax" action model). The subgoal distributions
:math:`\mathbf p_s \in \Delta^G` are tied together by a :class:`CorrelatedMultinomial`
(covariates = states, categories = the :math:`G` candidate goal states) or kept independent
(Dirichlet).

Inference alternates (1) a variational fit of the subgoal distributions on the one-hot counts
:math:`\mathbf x_s = \mathrm{onehot}(g_s)` (warm-started between sweeps) and (2) a draw of every
:math:`g_s` from its conditional

.. math::

    P(g_s = g \mid \cdot) \propto p_s(g) \prod_{d:\, s_d = s} p(a_d \mid s, g)
    = p_s(g) \prod_a p(a \mid s, g)^{n_{sa}},

computed for all states at once in log space from the demonstration counts :math:`n_{sa}`.
The policy estimate averages the subgoal policies over the kept samples,
:math:`\hat\pi(a \mid s) = \frac1M \sum_m p(a \mid s, g_s^{(m)})`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._deprecation import deprecated_keyword
from .._memory import check_memory
from .._random import as_generator, required_rng, sample_categorical
from .._typing import FloatArray, SeedLike
from .._validation import as_real_array, check_array, check_bool, check_counts, check_int, check_points, check_positive

__all__ = [
    "MAX_SWEEPS",
    "SubgoalPolicyEstimator",
    "goal_action_probs",
    "sample_categorical",
    "subgoal_conditionals",
    "subgoal_log_likelihoods",
]

#: The most sweeps ``n_burnin`` and ``n_samples`` may each ask for. A sweep is a variational fit
#: and a draw of every subgoal: about 0.2 ms on a 4-state toy and 65 ms on the paper's
#: 101-state wall world (measured), so a million sweeps is minutes to 18 hours; the paper
#: keeps 100 after 100. The kept draws, (n_samples, S) integers, are also checked against the
#: memory this process may use.
MAX_SWEEPS = 1_000_000


def _safe_log(p: np.ndarray) -> np.ndarray:
    r"""``log(p)`` with zeros mapped to ``log(tiny)`` (finite) instead of ``-inf``.

    Only for the fitted subgoal distributions :math:`p_s(g)`, which are positive in exact
    arithmetic (a zero there is an underflow). A zero of :math:`p(a \mid s, g)` is a real
    zero and keeps ``log 0 = -inf`` (see :func:`_log_likelihoods`).
    """
    return np.log(np.maximum(p, np.finfo(np.float64).tiny))


def _exact_log(p: np.ndarray) -> np.ndarray:
    """``log(p)`` with ``log 0 = -inf`` (no warning)."""
    with np.errstate(divide="ignore"):
        return np.log(p)


def _check_action_probs(action_probs, name: str = "action_probs") -> FloatArray:
    arr = check_array(action_probs, name, ndim=3)
    if arr.shape[0] < 1 or arr.shape[2] < 1:
        raise ValueError(f"{name}: expected shape (S, G, A) with at least one state and one "
                         f"action, got {arr.shape}")
    if arr.shape[1] < 2:
        raise ValueError(f"{name}: expected at least G = 2 candidate goals (axis 1 of shape "
                         f"(S, G, A)): with one goal there is no subgoal to infer; got shape "
                         f"{arr.shape}")
    if (arr < 0).any():
        raise ValueError(f"{name}: probabilities must be non-negative, found {arr.min():g}")
    dev = np.abs(arr.sum(axis=-1) - 1.0)
    if dev.max() > 1e-6:
        s, g = np.unravel_index(np.argmax(dev), dev.shape)
        raise ValueError(f"{name}: p(a | s, g) must sum to one over the last (action) axis; "
                         f"worst row (s={s}, g={g}) deviates by {dev.max():.3g}")
    return arr


def subgoal_log_likelihoods(counts, log_action_probs) -> FloatArray:
    r"""Log-likelihood of every state's demonstrations under every candidate subgoal.

    :math:`L_{sg} = \sum_a n_{sa} \log p(a \mid s, g)`, one einsum over all states and goals.

    Parameters
    ----------
    counts : array_like of shape (S, A)
        Demonstration counts :math:`n_{sa}` (how often action ``a`` was shown at state ``s``).
    log_action_probs : array_like of shape (S, G, A)
        :math:`\log p(a \mid s, g)`. ``-inf`` entries (probability 0) are allowed: an
        action never shown there contributes nothing (:math:`0 \cdot \log 0 = 0`), a shown
        one makes :math:`L_{sg} = -\infty` (goal ``g`` is ruled out at state ``s``).

    Returns
    -------
    log_lik : ndarray of shape (S, G)
        Finite, or ``-inf`` where the demonstrations are impossible under the goal.
    """
    n = check_counts(counts, "counts", min_categories=1)
    logp = _check_log_probs(log_action_probs, "log_action_probs", ndim=3)
    if logp.shape[0] != n.shape[0] or logp.shape[2] != n.shape[1]:
        raise ValueError(f"counts (S, A) and log_action_probs (S, G, A) disagree: got {n.shape} "
                         f"and {logp.shape}")
    return _log_likelihoods(n, logp)


def _log_likelihoods(counts: FloatArray, log_action_probs: FloatArray) -> FloatArray:
    """:func:`subgoal_log_likelihoods` of checked arrays: ``sum_a where(n > 0, n log p, 0)``.

    The finite terms go through one einsum (``-inf`` entries replaced by 0, so a zero count
    never gives ``0 * inf``); a shown action of probability 0 then sets the entry to ``-inf``.
    """
    impossible = np.isneginf(log_action_probs)
    if not impossible.any():
        return np.einsum("sa,sga->sg", counts, log_action_probs)
    finite = np.einsum("sa,sga->sg", counts, np.where(impossible, 0.0, log_action_probs))
    ruled_out = np.einsum("sa,sga->sg", (counts > 0).astype(np.float64),
                          impossible.astype(np.float64)) > 0
    finite[ruled_out] = -np.inf
    return finite


def _check_live_rows(z: FloatArray, names: str, why: str) -> None:
    """Refuse, naming ``names`` and the first such state, a row of ``z`` that is ``-inf``
    throughout (every goal has probability zero: the conditional would be 0 / 0).
    """
    dead = np.flatnonzero(np.isneginf(z.max(axis=-1, initial=-np.inf)))
    if dead.size:
        raise ValueError(f"{names}: every goal of state {dead[0]} has probability zero ({why})")


def _check_log_probs(x, name: str, ndim: int) -> FloatArray:
    """Real log-probabilities with ``ndim`` axes: ``-inf`` (probability 0) allowed, NaN and
    ``+inf`` refused, naming ``name``.
    """
    arr = as_real_array(x, name).astype(np.float64)
    if arr.ndim != ndim:
        raise ValueError(f"{name}: expected a {ndim}-D array, got shape {arr.shape}")
    if np.isnan(arr).any() or np.isposinf(arr).any():
        raise ValueError(f"{name}: expected log-probabilities (-inf allowed for probability 0), "
                         f"found NaN or +inf")
    return arr


def subgoal_conditionals(log_prior, log_lik) -> FloatArray:
    r"""Normalised conditional of each state's subgoal: :math:`\propto p_s(g)\, e^{L_{sg}}`.

    Parameters
    ----------
    log_prior : array_like of shape (S, G)
        :math:`\log p_s(g)`, the current subgoal distributions.
    log_lik : array_like of shape (S, G)
        :func:`subgoal_log_likelihoods`.

    Returns
    -------
    probs : ndarray of shape (S, G)
        Rows on the simplex (computed with a log-sum-exp, stable for very peaked rows).
    """
    prior = _check_log_probs(log_prior, "log_prior", ndim=2)
    lik = _check_log_probs(log_lik, "log_lik", ndim=2)
    if prior.shape != lik.shape:
        raise ValueError(f"log_prior, log_lik: expected the same shape (S, G), got {prior.shape} "
                         f"and {lik.shape}")
    z = prior + lik
    _check_live_rows(z, "log_prior, log_lik", "log_prior + log_lik is -inf throughout the row")
    return _conditionals(z)


def _conditionals(z: FloatArray) -> FloatArray:
    """:func:`subgoal_conditionals` of the checked sum ``log_prior + log_lik`` (every row has
    a finite maximum; ``-inf`` entries become probability 0).
    """
    z = z - z.max(axis=-1, keepdims=True)
    p = np.exp(z)
    return p / p.sum(axis=-1, keepdims=True)


def goal_action_probs(mdp, beta: float, *, normalize: bool = True, goals=None) -> FloatArray:
    r"""The subgoal policies :math:`p(a \mid s, g) = \mathrm{softmax}_a(\beta \tilde Q_g(s, a))`.

    Parameters
    ----------
    mdp : TabularMDP
        The environment (S states, A actions).
    beta : float
        Inverse temperature :math:`\beta > 0`.
    normalize : bool, default True
        Normalise each goal's Q-values per state before the softmax (the normalised softmax
        model of Sosic et al. 2018; the exact normalisation is that of
        :func:`corrpriors.mdp.boltzmann_policy`).
    goals : array_like of int, optional
        Candidate goal states (default: every state, G = S).

    Returns
    -------
    action_probs : ndarray of shape (S, G, A)
    """
    from ..mdp import boltzmann_policy, goal_q_values

    beta = check_positive(beta, "beta")
    q = goal_q_values(mdp) if goals is None else goal_q_values(mdp, goals=goals)  # (S, A, G)
    pol = boltzmann_policy(q, beta, normalize=normalize, action_axis=1)            # (S, A, G)
    return np.ascontiguousarray(np.moveaxis(np.asarray(pol, dtype=np.float64), 2, 1))


class SubgoalPolicyEstimator:
    r"""Policy estimate through latent subgoals (paper section 4.2), PG-coupled or Dirichlet.

    Model (symbols as in the module docstring): every state ``s`` has a latent subgoal
    :math:`g_s \sim \mathrm{Cat}(\mathbf p_s)`; actions follow the subgoal policy
    :math:`p(a \mid s, g_s)` given as ``action_probs``. ``model="pg"`` couples the
    :math:`\mathbf p_s` with a :class:`~corrpriors.core.model.CorrelatedMultinomial` over the
    states (a squared-exponential kernel on ``coordinates`` unless ``covariance`` is given);
    ``model="dirichlet"`` uses independent :math:`\mathrm{Dir}(\alpha)` priors.

    Inference alternates a variational fit of the subgoal distributions on the one-hot subgoal
    counts (warm-started, ``max_iter`` iterations per sweep) with a vectorised draw of all
    :math:`g_s` from their conditionals; ``n_burnin`` sweeps are discarded and the next
    ``n_samples`` kept.

    Parameters
    ----------
    action_probs : array_like of shape (S, G, A)
        Subgoal policies :math:`p(a \mid s, g)`; see :func:`goal_action_probs`.
    model : {"pg", "dirichlet"}, default "pg"
    coordinates : array_like of shape (S, D), optional
        State coordinates for the default kernel (``model="pg"``).
    covariance : ndarray of shape (S, S) or BoundKernel, optional
        Prior covariance over states; overrides ``coordinates``.
    lengthscale : float, optional
        Length scale of the default squared-exponential kernel; default: the largest distance
        between two states (the paper's choice).
    alpha : float, default 1e-3
        Dirichlet concentration (``model="dirichlet"``), the paper's value.
    scale : float, default 1.0
        The kernel scale :math:`\theta` (prior covariance :math:`\theta\Sigma`); fixed unless
        ``learn_scale``. 1.0 is what the paper's public companion code uses.
    learn_scale : bool, default False
        Learn :math:`\theta` by EM inside every fit. Off by default: on the one-hot subgoal
        counts, whose unvisited states carry random subgoals early in the chain, EM drives
        :math:`\theta` towards 0 (measured on the wall world: about 0.04 after 200 sweeps, also
        with a Gamma(2, 1) hyper-prior), which turns the coupled model into the uniform-prior one.
    prior_source : {"plugin", "sample"}, default "plugin"
        Which subgoal distribution enters step (2). ``"plugin"``: the variational plug-in
        :math:`\Pi_{SB}(\lambda_s)` (Dirichlet: the posterior mean) -- what the paper and its
        companion code do. ``"sample"``: one draw :math:`\mathbf p \sim q` per sweep, which makes
        the scheme a (variationally approximated) two-block Gibbs sampler over
        :math:`(\mathbf p, g)`. Either way the fit includes the state's own current subgoal,
        so unvisited states keep their subgoal for a while (the chain is "sticky"): with the
        Dirichlet plug-in the current subgoal keeps probability :math:`(1 + \alpha)/(1 + G\alpha)`
        (0.91 for G = 101, alpha = 1e-3, so a jump about every 11 sweeps; 0.99 for G = 10,
        where the chain practically never moves). The exact posterior of an unvisited state
        under independent Dirichlet priors is the uniform goal average.
    estimate : {"samples", "rao_blackwell"}, default "samples"
        ``"samples"``: average :math:`p(a \mid s, g_s^{(m)})` over the kept draws (the paper).
        ``"rao_blackwell"``: average the conditional expectation
        :math:`\sum_g P(g_s = g \mid \cdot)^{(m)} p(a \mid s, g)` instead (same target, lower
        variance).
    n_burnin : int, default 100
        Discarded sweeps, at most ``MAX_SWEEPS`` = 1,000,000.
    n_samples : int, default 100
        Kept sweeps :math:`M`, from 1 to ``MAX_SWEEPS`` (the kept (M, S) draws must also fit in
        memory).
    max_iter : int, default 10
        Variational iterations per sweep (warm-started, so a few suffice). Measured on the wall
        world (S = G = 101, one BLAS thread): about 13 s of CPU for 200 sweeps with 10
        iterations, 7 s with 3.
    init : {"likelihood", "uniform"}, default "likelihood"
        Initial subgoals: drawn from the likelihood alone (uniform :math:`\mathbf p_s`) or uniformly.
    model_options : dict, optional
        Extra keyword arguments for ``CorrelatedMultinomial`` (e.g. ``scale_prior``).
    **kwargs
        ``random_state``, deprecated (removed in corrpriors 0.3): the randomness is
        :meth:`fit`'s ``rng``.

    Attributes
    ----------
    policy_ : ndarray of shape (S, A)
        The policy estimate :math:`\hat\pi`.
    subgoal_samples_ : ndarray of shape (M, S)
        The kept subgoal draws :math:`g^{(m)}`.
    subgoal_probs_ : ndarray of shape (S, G)
        Average of the step-(2) conditionals over the kept sweeps (posterior subgoal marginals).
    log_likelihoods_ : ndarray of shape (S, G)
        :math:`L_{sg}` from the demonstrations; ``-inf`` for a goal under which a shown action
        has probability 0 (that goal gets posterior probability 0 at that state).
    scale_trace_ : ndarray of shape (n_burnin + n_samples,)
        The learned kernel scale after every sweep (NaN for the Dirichlet model).
    model_ : CorrelatedMultinomial or DirichletMultinomial
        The subgoal model of the last sweep.
    """

    def __init__(self, action_probs, *, model: str = "pg", coordinates=None, covariance=None,
                 lengthscale: float | None = None, alpha: float = 1e-3, scale: float = 1.0,
                 learn_scale: bool = False, prior_source: str = "plugin", estimate: str = "samples",
                 n_burnin: int = 100,
                 n_samples: int = 100, max_iter: int = 10, init: str = "likelihood",
                 model_options: dict | None = None, **kwargs: Any):
        self.action_probs = action_probs
        self.model = model
        self.coordinates = coordinates
        self.covariance = covariance
        self.lengthscale = lengthscale
        self.alpha = alpha
        self.scale = scale
        self.learn_scale = learn_scale
        self.prior_source = prior_source
        self.estimate = estimate
        self.n_burnin = n_burnin
        self.n_samples = n_samples
        self.max_iter = max_iter
        self.init = init
        self.model_options = model_options
        self._random_state = deprecated_keyword("SubgoalPolicyEstimator", kwargs, "random_state",
                                                "pass rng to fit() instead")

    # ------------------------------------------------------------------ helpers
    def _validate(self) -> tuple[int, int, int]:
        """Check the settings; return ``n_burnin``, ``n_samples`` and ``max_iter`` as ints."""
        if self.model not in ("pg", "dirichlet"):
            raise ValueError(f"model: expected 'pg' or 'dirichlet', got {self.model!r}")
        if self.prior_source not in ("plugin", "sample"):
            raise ValueError(f"prior_source: expected 'plugin' or 'sample', got {self.prior_source!r}")
        if self.estimate not in ("samples", "rao_blackwell"):
            raise ValueError(f"estimate: expected 'samples' or 'rao_blackwell', got {self.estimate!r}")
        if self.init not in ("likelihood", "uniform"):
            raise ValueError(f"init: expected 'likelihood' or 'uniform', got {self.init!r}")
        check_bool(self.learn_scale, "learn_scale")
        return (check_int(self.n_burnin, "n_burnin", 0, MAX_SWEEPS),
                check_int(self.n_samples, "n_samples", 1, MAX_SWEEPS),
                check_int(self.max_iter, "max_iter", 1))

    def _make_model(self, n_states: int, max_iter: int):
        if self.model == "dirichlet":
            from ..baselines import DirichletMultinomial

            return DirichletMultinomial(alpha=check_positive(self.alpha, "alpha"))
        from ..core.model import CorrelatedMultinomial
        from .imitation import state_kernel

        cov = self.covariance
        if cov is None:
            if self.coordinates is None:
                raise ValueError("coordinates: model='pg' needs state coordinates (S, D) or a "
                                 "covariance (S, S)")
            coords = check_points(self.coordinates, "coordinates", n_points=n_states, what="states",
                                  symbol="S")
            cov = state_kernel(coordinates=coords, lengthscale=self.lengthscale)
        opts = dict(self.model_options or {})
        opts.setdefault("max_iter", max_iter)
        opts.setdefault("learn_scale", self.learn_scale)
        opts.setdefault("scale", check_positive(self.scale, "scale"))
        return CorrelatedMultinomial(covariance=cov, **opts)

    def _rng(self, rng: SeedLike) -> SeedLike:
        """``fit``'s ``rng``, or the deprecated constructor ``random_state`` when it is None."""
        if self._random_state is not None:
            if rng is not None:
                raise ValueError("rng, random_state: give the randomness once, as fit(counts, rng=...) "
                                 "(random_state is deprecated)")
            return self._random_state
        return required_rng(rng, "fit draws the subgoals (a sampler), so the same seed gives the same "
                                 "estimate")

    # ---------------------------------------------------------------------- fit
    def fit(self, counts, *, rng: SeedLike = None) -> SubgoalPolicyEstimator:
        """Run the sampler on demonstration counts.

        Parameters
        ----------
        counts : array_like of shape (S, A)
            State-action demonstration counts.
        rng : int, numpy.random.SeedSequence or numpy.random.Generator
            Required: the source of every draw (initial subgoals, the sweeps' subgoal draws
            and, with ``prior_source="sample"``, the subgoal distributions). The estimate is a
            sampler's output, so the same ``rng`` (seed) gives the same result; pass
            ``numpy.random.default_rng()`` for fresh randomness.

        Returns
        -------
        self : SubgoalPolicyEstimator

        Raises
        ------
        ValueError
            Among others, when at some state every candidate goal gives a demonstrated action
            probability 0 (the demonstrations are impossible under the model).
        """
        import warnings

        from ..exceptions import ConvergenceWarning

        n_burnin, n_samples, max_iter = self._validate()
        probs_sga = _check_action_probs(self.action_probs)
        n_states, n_goals, n_actions = probs_sga.shape
        counts = check_counts(counts, "counts", min_categories=1)
        if counts.shape != (n_states, n_actions):
            raise ValueError(f"counts: expected shape (S, A) = ({n_states}, {n_actions}) to match "
                             f"action_probs, got {counts.shape}")
        check_memory(8.0 * n_samples * n_states,
                     f"SubgoalPolicyEstimator: the kept subgoal draws, (n_samples, S) = "
                     f"({n_samples:,}, {n_states:,}) integers,",
                     "keep fewer sweeps (n_samples)")
        model = self._make_model(n_states, max_iter)
        rng = as_generator(self._rng(rng))
        log_lik = _log_likelihoods(counts, _exact_log(probs_sga))
        _check_live_rows(log_lik, "counts, action_probs",
                         "action_probs gives a demonstrated action there probability 0 under "
                         "every candidate goal")
        self.log_likelihoods_ = log_lik

        goals: np.ndarray
        if self.init == "likelihood":
            goals = sample_categorical(_conditionals(log_lik), rng=rng)
        else:
            goals = np.asarray(rng.integers(0, n_goals, size=n_states), dtype=np.int64)

        n_total = n_burnin + n_samples
        rows = np.arange(n_states)
        kept = np.empty((n_samples, n_states), dtype=np.int64)
        cond_sum = np.zeros((n_states, n_goals))
        scale_trace = np.full(n_total, np.nan)
        onehot = np.zeros((n_states, n_goals))
        for sweep in range(n_total):
            onehot[:] = 0.0
            onehot[rows, goals] = 1.0
            # (1) variational fit of the subgoal distributions (warm-started)
            with warnings.catch_warnings():
                # a few iterations per sweep by design: do not warn about convergence
                warnings.simplefilter("ignore", ConvergenceWarning)
                if self.model == "pg":
                    model.fit(onehot, warm_start=sweep > 0)
                    scale_trace[sweep] = float(model.scale_)
                else:
                    model.fit(onehot)
            if self.prior_source == "plugin":
                p = model.probs(method="plugin")
            else:
                p = model.sample_probs(1, rng=rng)[0]
            # (2) conditional draw of every subgoal
            cond = _conditionals(_safe_log(p) + log_lik)
            goals = sample_categorical(cond, rng=rng)
            if sweep >= n_burnin:
                kept[sweep - n_burnin] = goals
                cond_sum += cond

        self.subgoal_samples_ = kept
        self.subgoal_probs_ = cond_sum / n_samples
        if self.estimate == "samples":
            self.policy_ = probs_sga[rows[None, :], kept].mean(axis=0)
        else:
            self.policy_ = np.einsum("sg,sga->sa", self.subgoal_probs_, probs_sga)
        self.scale_trace_ = scale_trace
        self.model_ = model
        self.n_states_, self.n_goals_, self.n_actions_ = n_states, n_goals, n_actions
        return self
