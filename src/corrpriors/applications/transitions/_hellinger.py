r"""Point estimates matched to the Hellinger loss: :math:`\hat P_j \propto E[\sqrt{P_j}]^2`.

System identification scores an estimate :math:`q` of a row :math:`P(\cdot \mid s, a)` by the
Hellinger distance :math:`H(P, q)^2 = \tfrac12 \sum_j (\sqrt{q_j} - \sqrt{P_j})^2
= 1 - \sum_j \sqrt{q_j P_j}`. The posterior mean minimises the expected *squared error*
:math:`E\lVert q - P\rVert^2`, not the expected squared Hellinger distance. The Bayes estimate
under the latter minimises, over the simplex,

.. math::

    E[H(P, q)^2 \mid \text{data}] = 1 - \sum_j \sqrt{q_j}\, r_j, \qquad
    r_j = E[\sqrt{P_j} \mid \text{data}],

i.e. maximises the inner product of the unit vector :math:`\sqrt q` with :math:`r`; by
Cauchy-Schwarz the maximiser is :math:`\sqrt{q} = r / \lVert r\rVert`:

.. math:: \hat P_j = r_j^2 / \textstyle\sum_k r_k^2.

(The expected Hellinger *distance* :math:`E[H]` has no closed-form minimiser; the squared
distance is the loss the estimate is Bayes for.)

Everything therefore goes through :math:`r = E[\sqrt P]`, which is linear in the posterior:
a mixture of hypotheses or components has the weighted average of the components' :math:`r`
(the mixing happens *inside* the expectation, before squaring). For a Dirichlet row
:math:`\mathrm{Dir}(a)`, :math:`P_j \sim \mathrm{Beta}(a_j, a_0 - a_j)` and

.. math::

    E[\sqrt{P_j}] = \frac{\Gamma(a_j + \tfrac12)}{\Gamma(a_j)}
    \frac{\Gamma(a_0)}{\Gamma(a_0 + \tfrac12)}
    \qquad (a_0 = \textstyle\sum_k a_k),

which tends to :math:`a_j \sqrt\pi\, \Gamma(a_0) / \Gamma(a_0 + \tfrac12)` as
:math:`a_j \to 0` (and is 0 at :math:`a_j = 0`, a structural zero).

Beliefs whose posterior has no closed form for :math:`r` (the correlated model's logistic-normal
sticks mapped through the category map) estimate it by Monte Carlo over their own posterior
draws (:func:`monte_carlo_sqrt_mean`, :data:`HELLINGER_DRAWS` draws by default); the
per-pair layer and the sparse-support hypothesis then add their closed forms conditionally
on every draw (Rao-Blackwellised).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._random import as_generator
from ..._special import log_half_gamma_ratio
from ..._typing import FloatArray, SeedLike
from ..._validation import check_int

__all__ = ["HELLINGER_DRAWS", "POINT_ESTIMATES", "dirichlet_sqrt_mean", "from_sqrt_mean",
           "monte_carlo_sqrt_mean", "point_estimate"]

#: Posterior draws of the Monte-Carlo estimates of :math:`E[\sqrt P]` (per-entry relative
#: standard error about :math:`\mathrm{sd}(\sqrt{P_j}) / (16\, E\sqrt{P_j})`).
HELLINGER_DRAWS = 256

#: The point estimates a belief offers: its posterior mean, or the Bayes estimate under the
#: squared Hellinger loss.
POINT_ESTIMATES = ("mean", "hellinger")

#: At most this many floats per chunk of posterior draws in :func:`monte_carlo_sqrt_mean`.
_CHUNK_FLOATS = 2 ** 23


def dirichlet_sqrt_mean(alpha: Any) -> FloatArray:
    r""":math:`E[\sqrt{P_j}]` of Dirichlet rows (module docstring).

    Parameters
    ----------
    alpha : array_like of shape (..., S)
        Non-negative concentrations, every row with a positive total (a zero entry is a
        structural zero: :math:`E\sqrt{P_j} = 0`).

    Returns
    -------
    ndarray of shape (..., S)
    """
    a = np.asarray(alpha, dtype=np.float64)
    if a.ndim < 1 or not np.all(np.isfinite(a)) or np.any(a < 0):
        raise ValueError("alpha: expected finite non-negative concentrations of shape (..., S)")
    total = a.sum(axis=-1, keepdims=True)
    if not np.all(total > 0):
        raise ValueError("alpha: expected every row to have a positive total")
    return np.exp(log_half_gamma_ratio(a) - log_half_gamma_ratio(total))


def from_sqrt_mean(r: Any) -> FloatArray:
    r"""The Hellinger-Bayes estimate :math:`r_j^2 / \sum_k r_k^2` from :math:`r = E[\sqrt P]`.

    Parameters
    ----------
    r : array_like of shape (..., S)
        Non-negative, every row with a positive entry.

    Returns
    -------
    ndarray of shape (..., S)
        Rows on the simplex.
    """
    sq = np.asarray(r, dtype=np.float64) ** 2
    z = sq.sum(axis=-1, keepdims=True)
    if not np.all(np.isfinite(z) & (z > 0)):
        raise ValueError("r: expected finite non-negative rows with a positive entry")
    return sq / z


def monte_carlo_sqrt_mean(belief: Any, n_draws: int = HELLINGER_DRAWS, *,
                          rng: SeedLike) -> FloatArray:
    r""":math:`E[\sqrt P]` of any dense belief by averaging its posterior draws.

    Parameters
    ----------
    belief : TransitionBelief
        Anything with ``n_states``, ``n_actions`` and ``sample_many(n, rng=...)`` returning
        ndarray of shape (n, S, A, S).
    n_draws : int, default=:data:`HELLINGER_DRAWS`
        Posterior draws (taken in chunks of at most about 64 MiB).
    rng : numpy.random.Generator or seed

    Returns
    -------
    ndarray of shape (S, A, S)
    """
    n = check_int(n_draws, "n_draws", low=1)
    gen = as_generator(rng)
    size = belief.n_states * belief.n_actions * belief.n_states
    chunk = max(1, _CHUNK_FLOATS // size)
    total = np.zeros((belief.n_states, belief.n_actions, belief.n_states))
    left = n
    while left:
        m = min(chunk, left)
        draws = belief.sample_many(m, rng=gen)
        if not isinstance(draws, np.ndarray):
            raise ValueError("belief: its draws are not dense arrays (sparse storage); the "
                             "Monte-Carlo Hellinger estimate needs dense draws")
        total += np.sqrt(draws).sum(axis=0)
        left -= m
    return total / n


def point_estimate(belief: Any, kind: str = "mean", *, rng: SeedLike = None) -> Any:
    """A belief's point estimate of the transition model, by name.

    Parameters
    ----------
    belief : TransitionBelief
    kind : {"mean", "hellinger"}, default="mean"
        ``"mean"``: ``belief.mean()``; ``"hellinger"``: ``belief.hellinger_estimate(rng=rng)``,
        the Bayes estimate under the squared Hellinger loss (a belief without that method:
        :func:`from_sqrt_mean` of :func:`monte_carlo_sqrt_mean`).
    rng : numpy.random.Generator or seed, optional
        For the Monte-Carlo estimates (not used by ``"mean"`` or by closed forms).

    Returns
    -------
    ndarray of shape (S, A, S), or the belief's sparse table
    """
    if kind == "mean":
        return belief.mean()
    if kind != "hellinger":
        raise ValueError(f"point_estimate: expected one of {POINT_ESTIMATES}, got {kind!r}")
    if hasattr(belief, "hellinger_estimate"):
        return belief.hellinger_estimate(rng=rng)
    return from_sqrt_mean(monte_carlo_sqrt_mean(belief, rng=_required(rng)))


def _required(rng: SeedLike) -> SeedLike:
    """``rng`` itself; a ``ValueError`` naming it when it is None (a Monte-Carlo estimate)."""
    if rng is None:
        raise ValueError("rng: this belief's Hellinger estimate is a Monte-Carlo average over "
                         "its posterior draws; pass a numpy Generator or a seed")
    return rng
