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
draws (:func:`monte_carlo_sqrt_mean`, at most :data:`HELLINGER_DRAWS` draws); the
per-pair layer and the sparse-support hypothesis then add their closed forms conditionally
on every draw (Rao-Blackwellised).

**How many draws** (:func:`average_sqrt_draws`). An estimate :math:`\hat r = r + e` of a row
costs, in expected loss, :math:`\lVert r\rVert - \hat u^\top r
\approx \lVert e_\perp\rVert^2 / (2 \lVert r\rVert)` over the optimum
:math:`1 - \lVert r\rVert` (:math:`\hat u = \hat r / \lVert\hat r\rVert`; to second order in
the noise, :math:`e_\perp` its part orthogonal to :math:`r`), and the average of :math:`M` draws
has :math:`E\lVert e\rVert^2 = \sum_j \sigma_j^2 / M` (:math:`\sigma_j^2` the variance of one
draw's value). The draws therefore stop, doubling from :data:`FIRST_DRAWS`, once this bound,
summed over the rows with the variances estimated from the draws themselves, is at most
``rtol`` (default :data:`HELLINGER_RTOL`) times the estimated expected loss summed over the
rows: the Monte-Carlo noise then adds about ``rtol / 2`` to the expected Hellinger distance.
Where the conditional closed forms leave little variance (rows with data, a deterministic
world, the sparse-support hypothesis holding the weight) a few dozen draws suffice; ``rtol=0``
takes exactly ``n_draws``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._random import as_generator, required_rng
from ..._special import log_half_gamma_ratio
from ..._typing import FloatArray, SeedLike
from ..._validation import check_int

__all__ = ["FIRST_DRAWS", "HELLINGER_DRAWS", "HELLINGER_RTOL", "POINT_ESTIMATES",
           "average_sqrt_draws", "chunk_draws", "dirichlet_sqrt_mean", "from_sqrt_mean", "monte_carlo_sqrt_mean",
           "point_estimate"]

#: At most this many posterior draws in the Monte-Carlo estimates of :math:`E[\sqrt P]` (a
#: per-entry relative standard error of about :math:`\mathrm{sd}(\sqrt{P_j}) / (16\, E\sqrt{P_j})`).
HELLINGER_DRAWS = 256

#: The draws stop once their Monte-Carlo noise costs at most this fraction of the estimate's
#: expected squared Hellinger loss (module docstring; about half of it in the distance).
HELLINGER_RTOL = 0.01

#: The first batch of draws of an adaptive estimate (then doubling), and the fewest it stops at.
FIRST_DRAWS = 16

#: The point estimates a belief offers: its posterior mean, or the Bayes estimate under the
#: squared Hellinger loss.
POINT_ESTIMATES = ("mean", "hellinger")

#: At most this many floats per chunk of posterior draws (32 MiB per array of the chunk).
_CHUNK_FLOATS = 2 ** 22


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


def average_sqrt_draws(sqrt_draws: Any, n_draws: int = HELLINGER_DRAWS, *,
                       rtol: float = HELLINGER_RTOL, chunk: int | None = None,
                       first: int = FIRST_DRAWS) -> tuple[FloatArray, int]:
    r"""Average per-draw values of :math:`\sqrt P` until their noise is small enough.

    Parameters
    ----------
    sqrt_draws : callable
        ``sqrt_draws(m)`` returns ndarray of shape (m, ..., S): ``m`` independent draws of a
        variable whose expectation is :math:`E[\sqrt P]` of every row (the square roots of
        posterior draws, or Rao-Blackwellised conditional values).
    n_draws : int, default=:data:`HELLINGER_DRAWS`
        The most draws taken.
    rtol : float, default=:data:`HELLINGER_RTOL`
        Stop (from ``first`` draws on, doubling) once the estimated Monte-Carlo cost
        in expected squared Hellinger loss, summed over the rows, is at most ``rtol`` times the
        estimated expected loss (module docstring); 0: exactly ``n_draws`` draws.
    chunk : int, optional
        At most this many draws per call (memory); default: no limit.
    first : int, default=:data:`FIRST_DRAWS`
        The first batch (then doubling), and the fewest draws the rule stops at (at least 2:
        the variances are estimated from the draws).

    Returns
    -------
    r : ndarray of shape (..., S)
        The average.
    n : int
        The number of draws averaged.
    """
    n = check_int(n_draws, "n_draws", low=1)
    if isinstance(rtol, bool) or not isinstance(rtol, (int, float, np.integer, np.floating)):
        raise TypeError(f"rtol: expected a finite non-negative number, got {type(rtol).__name__}")
    tol = float(rtol)
    if not (np.isfinite(tol) and tol >= 0.0):
        raise ValueError(f"rtol: expected a finite non-negative number, got {rtol!r}")
    most = n if chunk is None else check_int(chunk, "chunk", low=1)
    least = check_int(first, "first", low=2)
    total: Any = 0.0
    total_sq: Any = 0.0
    done = 0
    while done < n:
        m = min(n - done, most, max(least, done) if tol > 0 else n)
        x = np.asarray(sqrt_draws(m), dtype=np.float64)
        total = total + x.sum(axis=0)
        total_sq = total_sq + np.square(x).sum(axis=0)
        done += m
        if tol > 0 and least <= done < n and _noise_cost(total, total_sq, done) <= tol:
            break
    return np.asarray(total) / done, done


def _noise_cost(total: FloatArray, total_sq: FloatArray, n: int) -> float:
    r"""Estimated Monte-Carlo cost of the average of ``n`` draws over its expected loss (module
    docstring): :math:`\sum \sum_j \hat\sigma_j^2 / (2 n \lVert\hat r\rVert)` over
    :math:`\sum (1 - \lVert\hat r\rVert)`, both summed over the rows (0 when both vanish).
    """
    r = total / n
    var = np.maximum(total_sq / n - np.square(r), 0.0) * (n / (n - 1.0))
    norm = np.sqrt(np.square(r).sum(axis=-1))
    cost = float(np.sum(var.sum(axis=-1) / (2.0 * n * np.maximum(norm, 1e-12))))
    loss = float(np.sum(np.maximum(1.0 - norm, 0.0)))
    if cost == 0.0:
        return 0.0
    return cost / loss if loss > 0.0 else float("inf")


def monte_carlo_sqrt_mean(belief: Any, n_draws: int = HELLINGER_DRAWS, *,
                          rng: SeedLike, rtol: float = HELLINGER_RTOL) -> FloatArray:
    r""":math:`E[\sqrt P]` of any dense belief by averaging its posterior draws.

    Parameters
    ----------
    belief : TransitionBelief
        Anything with ``n_states``, ``n_actions`` and ``sample_many(n, rng=...)`` returning
        ndarray of shape (n, S, A, S).
    n_draws : int, default=:data:`HELLINGER_DRAWS`
        The most posterior draws (taken in chunks of at most about 32 MiB per array).
    rng : numpy.random.Generator or seed
    rtol : float, default=:data:`HELLINGER_RTOL`
        Stop early as :func:`average_sqrt_draws` does; 0 takes exactly ``n_draws``.

    Returns
    -------
    ndarray of shape (S, A, S)
    """
    gen = as_generator(rng)
    size = belief.n_states * belief.n_actions * belief.n_states

    def sqrt_draws(m: int) -> FloatArray:
        draws = belief.sample_many(m, rng=gen)
        if not isinstance(draws, np.ndarray):
            raise ValueError("belief: its draws are not dense arrays (sparse storage); the "
                             "Monte-Carlo Hellinger estimate needs dense draws")
        return np.sqrt(draws)

    return average_sqrt_draws(sqrt_draws, n_draws, rtol=rtol, chunk=chunk_draws(size))[0]


def chunk_draws(size: int) -> int:
    """Draws of ``size`` floats each that fit in one chunk of about 32 MiB (at least 1)."""
    return max(1, _CHUNK_FLOATS // max(int(size), 1))


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
    return required_rng(rng, "this belief's Hellinger estimate is a Monte-Carlo average over its "
                             "posterior draws")
