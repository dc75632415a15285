r"""The per-(state, action) layer: how much the neighbours predict, learned from the data.

The correlated model predicts every next-state distribution from the neighbouring states
(:class:`~corrpriors.applications.CorrelatedTransitionModel`). Where neighbours do not predict
-- an action whose effect is drawn anew in every state (DeepSea's random action mapping), or
dynamics without any geometry -- the prediction should serve only as a *base measure* around
which every (state, action) pair keeps its own distribution. The layer is the hierarchical
(Dirichlet-process-like) model

.. math::

    B_{sa} = (1 - \varepsilon)\, Q_{sa} + \varepsilon\, U, \qquad
    P(\cdot \mid s, a) \sim \mathrm{Dir}(c_a B_{sa}), \qquad
    n_{sa\cdot} \sim \mathrm{Mult}(N_{sa}, P(\cdot \mid s, a)),

with :math:`Q_{sa}` the correlated model's prediction for (s, a) (from the *other* pairs: it is
fitted to the table counts below, and its far jumps spread by the pooled destinations only),
:math:`U` uniform over the S states and two hyper-parameters learned from the data:

* the **concentration** :math:`c_a` (per action): :math:`c_a \to \infty` recovers the plain
  correlated model (every pair is its prediction); small :math:`c_a` lets every pair differ from
  its prediction, and a deterministic environment drives it small, so that posterior draws of a
  pair never tried are (nearly) one-hot -- a committed guess, like a sparse Dirichlet's, not a
  diffuse average. Its posterior on a log lattice is proportional to the Dirichlet-multinomial
  evidence :func:`log_evidence` (closed form); posterior draws draw :math:`c_a` from it and
  the posterior mean averages over it;
* the **contamination** :math:`\varepsilon` (shared): the probability that a pair's next state
  is not predicted by its neighbours at all (any state, uniformly: the base measure of the
  sparse Dirichlet belief). Like :math:`c = \infty`, :math:`\varepsilon = 0` ("the neighbours
  predict every table") has prior probability :data:`NO_CONTAMINATION_PRIOR`; its posterior
  probability is the exact Bayes factor of the tables (:func:`contamination_absent`), so that
  tables the neighbours predict well switch the contamination off (the Occam factor), where a
  plain Beta posterior would keep :math:`\varepsilon \approx 1 / T` after :math:`T` of them,
  enough for a few committed guesses "anywhere" in every draw of a deterministic world.
  Otherwise :math:`\varepsilon \sim \mathrm{Beta}(a_0 + m_U, b_0 + m_Q)` with :math:`m_U, m_Q`
  the table counts the two components explain (:func:`contamination_posterior`); draws draw
  both.

A third, optional, part is about the actions of one state: **distinct outcomes**. With
probability :math:`\delta` the pairs of a state draw their dishes (the next states their
tables serve) *without replacement*: an action is unlikely to do what another action of the
same state is known (or drawn) to do. Actions exist to do different things -- a grid's four
moves, DeepSea's left and right whose labels are shuffled in every cell -- and where they do
not (two moves into one wall), the data say so: :math:`\delta` has a posterior on a grid
(:func:`distinct_posterior`) whose likelihood is the draws' own model
(:func:`distinct_log_likelihood`): two actions of a state with different outcomes are evidence
for :math:`\delta` only as far as the base expected them to coincide (DeepSea's shuffled
actions), none where the base already tells them apart (a grid's moves). It acts
on the per-pair part of the layer only (finite :math:`c`): the plain correlated model
(:math:`c = \infty`) is unchanged.

A fourth, optional, hypothesis is about geometry itself: **sparse supports**
(:mod:`._support`). Per action, the pairs' next-state distributions may instead follow the
sparse-support prior -- every pair moves to a few states, a uniformly drawn support of a size
whose prior, like the Dirichlet's concentration on it, is learned from all pairs' pooled
evidence -- ignoring the neighbours altogether. It has prior probability ``support_prior``,
exchangeably over the actions (a Beta prior of that mean on the actions' common probability,
so that an action with few data follows what the others' data say, :func:`support_weights`),
and the posterior probability of its evidence against the layer's (the probability of the
observed sequences under either, :func:`support_log_factor`): where neighbours predict which
states a pair reaches (a grid), the layer wins it by about :math:`\log(S\,B_j)` nats per
distinct next state; where they do not (a random MDP), the support prior wins by what it
knows about sizes. The mean mixes the two, and every posterior draw of an action picks one.

Given :math:`B`, the posterior of every pair is conjugate,
:math:`P(\cdot \mid s, a) \mid n \sim \mathrm{Dir}(c_a B_{sa} + n_{sa\cdot})`.

The base :math:`Q` is fitted to **table counts** (the Chinese-restaurant-franchise statistics of
the hierarchical Dirichlet process, Teh et al. 2006): the expected number of distinct draws
from the base measure behind :math:`n_{sa s'}` observations,
:math:`t = c B\,[\psi(c B + n) - \psi(c B)]` (:func:`expected_tables`), between 1 (small
:math:`c`: a deterministic pair visited a hundred times is one piece of evidence about its
neighbours) and :math:`n` (large :math:`c`: every observation is).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
from scipy.special import betaln, digamma, gammaln, logsumexp

from ..._random import as_generator, sample_dirichlet
from ..._typing import FloatArray, IntArray, SeedLike
from ..._validation import check_int
from ._hellinger import dirichlet_sqrt_mean
from ._support import (
    SupportFit,
    fit_support,
    support_draws,
    support_log_evidence,
    support_mean,
    support_sqrt_mean,
)

__all__ = ["CONCENTRATIONS", "DELTAS", "NO_CONTAMINATION_PRIOR", "NO_LAYER_PRIOR",
           "borrowed_log_evidence", "concentration_weights", "contamination_absent", "contamination_posterior",
           "distinct_draws", "distinct_log_likelihood", "distinct_posterior", "expected_tables",
           "layer_draws", "layer_mean", "layer_sqrt_mean", "log_evidence", "repel",
           "support_log_factor", "support_weights"]

#: The default lattice of concentrations c: a quarter decade apart from 1e-2 to 1e4, and
#: infinity (no layer: every pair is its base).
CONCENTRATIONS = np.r_[10.0 ** np.arange(-2.0, 4.0 + 1e-9, 0.25), np.inf]

#: Prior probability of :math:`c = \infty` (no layer) in :func:`concentration_weights`.
NO_LAYER_PRIOR = 0.5

_TINY = 1e-300


def _check_pair(counts: Any, base: Any) -> tuple[FloatArray, FloatArray]:
    n = np.asarray(counts, dtype=np.float64)
    b = np.asarray(base, dtype=np.float64)
    if n.ndim < 1 or n.shape != b.shape:
        raise ValueError(f"counts, base: expected arrays of one shape (..., S), got {n.shape} and "
                         f"{b.shape}")
    return n, b


def expected_tables(counts: Any, base: Any, concentration: float) -> FloatArray:
    r"""Integer table counts of the hierarchical Dirichlet model (the base model's data).

    Parameters
    ----------
    counts : array_like of shape (..., S)
        Observed next-state counts :math:`n` of every (state, action) row.
    base : array_like of shape (..., S)
        The base measure :math:`B` of every row (rows on the simplex).
    concentration : float
        :math:`c > 0`; ``inf`` returns ``counts``.

    Returns
    -------
    ndarray of shape (..., S)
        :math:`\max(1, \mathrm{round}(c B [\psi(c B + n) - \psi(c B)]))` where :math:`n > 0`,
        else 0: the expected number of tables (distinct draws from the base) serving the
        :math:`n` customers of a Chinese restaurant with concentration :math:`c B`, rounded,
        so that it lies between 1 and :math:`n`.
    """
    n, b = _check_pair(counts, base)
    c = float(concentration)
    if not c > 0:
        raise ValueError(f"concentration: expected a positive number, got {concentration!r}")
    return _round_tables(_table_means(n, b, c), n)


def _table_means(n: FloatArray, b: FloatArray, c: float) -> FloatArray:
    """Unrounded expected table counts (``n`` itself for ``c = inf``)."""
    seen = n > 0
    out = np.zeros_like(n)
    out[seen] = _seen_table_means(n[seen], b[seen], c)
    return out


def _seen_table_means(n: FloatArray, b: FloatArray, c: float) -> FloatArray:
    """:func:`_table_means` of entries with counts (1-D ``n > 0`` and their base ``b``)."""
    if np.isinf(c):
        return n.copy()
    cb = c * np.maximum(b, _TINY)
    return cb * (digamma(cb + n) - digamma(cb))


def _round_tables(t: FloatArray, n: FloatArray) -> FloatArray:
    return np.where(n > 0, np.clip(np.round(t), 1.0, n), 0.0)


def log_evidence(counts: Any, base: Any, concentrations: Any = CONCENTRATIONS) -> FloatArray:
    r"""Dirichlet-multinomial log evidence of the counts for every concentration.

    Parameters
    ----------
    counts : array_like of shape (..., S)
        Next-state counts of every row.
    base : array_like of shape (..., S)
        The base measure of every row.
    concentrations : array_like of shape (L,)
        Positive values; ``inf`` gives the multinomial likelihood under the base itself.

    Returns
    -------
    ndarray of shape (L,)
        :math:`\sum_{rows} \log\Gamma(c) - \log\Gamma(c + N) + \sum_{s'}
        [\log\Gamma(c B + n) - \log\Gamma(c B)]` (the probability of the observed sequence;
        its limit :math:`\sum n \log B` at :math:`c = \infty`), summed over the rows.
    """
    n, b = _check_pair(counts, base)
    cs = np.atleast_1d(np.asarray(concentrations, dtype=np.float64))
    if cs.ndim != 1 or not np.all(cs > 0):
        raise ValueError("concentrations: expected a 1-D array of positive numbers")
    n2 = n.reshape(-1, n.shape[-1])
    b2 = b.reshape(n2.shape)
    total = n2.sum(axis=-1)
    rows = total > 0
    i, j = np.nonzero(n2)
    nij = n2[i, j]
    bij = np.maximum(b2[i, j], _TINY)
    out = np.empty(cs.size)
    for k, c in enumerate(cs):
        if np.isinf(c):
            out[k] = float(np.sum(nij * np.log(bij)))
            continue
        cb = c * bij
        out[k] = float(np.sum(gammaln(c) - gammaln(c + total[rows]))
                       + np.sum(gammaln(cb + nij) - gammaln(cb)))
    if not np.all(np.isfinite(out)):
        raise ValueError("counts, base: the evidence is not finite (a count where the base is 0?)")
    return out


def borrowed_log_evidence(counts: Any, borrowed: Any, base: Any,
                          concentrations: Any = CONCENTRATIONS) -> float:
    r"""Log probability of the counts given borrowed counts, under the layer.

    The pairs' distributions are :math:`P_r \sim \mathrm{Dir}(c B_r)` with :math:`c` from the
    lattice's prior (:func:`concentration_weights`); the borrowed counts :math:`m` (for example
    :math:`\eta` times another task's counts: a power prior) are observed first, then the
    counts :math:`n`:

    .. math::

        \log p(n \mid m) = \log \sum_c \pi_c\, p(m, n \mid c) - \log \sum_c \pi_c\,
        p(m \mid c),

    both sequences' probabilities by :func:`log_evidence` (:math:`p(m, n \mid c)` is that of
    :math:`m + n`: the Dirichlet-multinomial's sequence probability composes). With
    :math:`m = 0` it is the layer's evidence of :math:`n`.

    Parameters
    ----------
    counts : array_like of shape (..., S)
        The counts :math:`n` of every row.
    borrowed : array_like of shape (..., S)
        Non-negative (possibly fractional) borrowed counts :math:`m`.
    base : array_like of shape (..., S)
        The base measure of every row.
    concentrations : array_like of shape (L,)
        The lattice (its prior as in :func:`concentration_weights`).

    Returns
    -------
    float
    """
    n, b = _check_pair(counts, base)
    m = np.asarray(borrowed, dtype=np.float64)
    if m.shape != n.shape:
        raise ValueError(f"borrowed: expected the shape of counts {n.shape}, got {m.shape}")
    if not (np.all(m >= 0) and np.all(n >= 0)):
        raise ValueError("counts, borrowed: expected non-negative counts")
    cs = np.atleast_1d(np.asarray(concentrations, dtype=np.float64))
    joint = logsumexp(_log_joint(log_evidence(n + m, b, cs), cs))
    return float(joint - logsumexp(_log_joint(log_evidence(m, b, cs), cs)))


def concentration_weights(log_ev: Any, concentrations: Any = CONCENTRATIONS) -> FloatArray:
    r"""Posterior weights of a lattice of concentrations.

    The prior gives :math:`c = \infty` (the neighbours predict every pair: the plain correlated
    model) probability :data:`NO_LAYER_PRIOR` and spreads the rest evenly over the finite
    values (a flat prior on :math:`\log c`): two hypotheses, "the neighbours predict" and
    "they do not quite", at even prior odds.

    Parameters
    ----------
    log_ev : array_like of shape (L,)
        :func:`log_evidence` values.
    concentrations : array_like of shape (L,)
        The lattice they belong to.

    Returns
    -------
    ndarray of shape (L,)
        Prior times ``exp(log_ev)``, normalised.
    """
    v = _log_joint(log_ev, concentrations)
    w = np.exp(v - v.max())
    return w / w.sum()


def _log_joint(log_ev: Any, concentrations: Any) -> FloatArray:
    """Log prior plus log evidence of every concentration (:func:`concentration_weights`)."""
    v = np.asarray(log_ev, dtype=np.float64)
    cs = np.asarray(concentrations, dtype=np.float64)
    if v.shape != cs.shape:
        raise ValueError(f"log_ev: expected one value per concentration, shape {cs.shape}, got "
                         f"{v.shape}")
    infinite = np.isinf(cs)
    n_finite = int((~infinite).sum())
    if infinite.any() and n_finite:
        prior = np.where(infinite, NO_LAYER_PRIOR / infinite.sum(),
                         (1.0 - NO_LAYER_PRIOR) / n_finite)
    else:
        prior = np.full(cs.shape, 1.0 / cs.size)
    return v + np.log(prior)


def support_log_factor(log_ev: Any, concentrations: Any, support_log_ev: float) -> float:
    r"""Log Bayes factor of the sparse-support hypothesis against the layer for one action.

    Parameters
    ----------
    log_ev : array_like of shape (L,)
        The layer's :func:`log_evidence` of the action's rows for every concentration.
    concentrations : array_like of shape (L,)
        Their lattice (its prior as in :func:`concentration_weights`).
    support_log_ev : float
        :func:`~._support.support_log_evidence` of the same rows.

    Returns
    -------
    float
        :math:`E_{sup} - \log \sum_l \pi_l e^{E_l}` (0 for an action without data).
    """
    return float(support_log_ev) - float(logsumexp(_log_joint(log_ev, concentrations)))


def support_weights(log_factors: Any, prior: float) -> FloatArray:
    r"""Posterior probabilities of the sparse-support hypothesis of every action, exchangeably.

    Whether the neighbours predict an action's next states is a property of the environment
    more than of the action: the hypotheses :math:`z_a` of the A actions are exchangeable,
    :math:`z_a \mid \theta \sim \mathrm{Bernoulli}(\theta)` with
    :math:`\theta \sim \mathrm{Beta}(2p, 2(1 - p))` (mean :math:`p`, the prior probability of
    one action's hypothesis). So an action with little data follows what the others' data say,
    where a fixed prior :math:`p` per action would keep an untried action at :math:`p` however
    clearly every other action is predicted by its neighbours (and PSRL, planning with its
    teleporting draws, might never try it). With one action it is the prior :math:`p` updated by
    the action's Bayes factor.

    Parameters
    ----------
    log_factors : array_like of shape (A,)
        :func:`support_log_factor` of every action.
    prior : float
        :math:`p` in (0, 1).

    Returns
    -------
    ndarray of shape (A,)
        :math:`P(z_a = 1 \mid \text{data})`, summing :math:`\theta` out exactly (elementary
        symmetric polynomials of the Bayes factors, in logs).
    """
    x = np.clip(np.asarray(log_factors, dtype=np.float64), -1e4, 1e4)
    A = x.size
    k = np.arange(A + 1)
    log_w = betaln(2 * prior + k, 2 * (1 - prior) + A - k)     # (A + 1,) prior of one z with k ones
    out = np.empty(A)
    for a in range(A):
        e = np.full(A, -np.inf)     # log elementary symmetric polynomials of the others' factors
        e[0] = 0.0
        for b in np.delete(np.arange(A), a):
            e[1:] = np.logaddexp(e[1:], e[:-1] + x[b])
        one = x[a] + logsumexp(e + log_w[1:])
        zero = logsumexp(e + log_w[:-1])
        # the logistic via tanh, not expit: below about -38 it is exactly 0, so an action
        # the neighbours predict keeps the layer's means and draws bit for bit
        out[a] = 0.5 * (1.0 + np.tanh(0.5 * np.clip(one - zero, -700.0, 700.0)))
    return out


def contamination_posterior(tables: Any, predicted: Any, epsilon: float,
                            prior: tuple[float, float]) -> tuple[float, float]:
    r"""Beta posterior of the contamination :math:`\varepsilon` given table counts.

    Every table was drawn from :math:`B = (1 - \varepsilon) Q + \varepsilon U`; the share
    :math:`\varepsilon U / B` of a table is credited to the uniform component (one EM step for
    the mixture weight, at the current :math:`\varepsilon`).

    Parameters
    ----------
    tables : array_like of shape (..., S)
        Table counts (:func:`expected_tables`).
    predicted : array_like of shape (..., S)
        :math:`Q` of every row.
    epsilon : float
        Current :math:`\varepsilon` in [0, 1].
    prior : (float, float)
        Beta prior :math:`(a_0, b_0)`.

    Returns
    -------
    (float, float)
        :math:`(a_0 + m_U, b_0 + m_Q)`.
    """
    t, q = _check_pair(tables, predicted)
    size = t.shape[-1]
    i = np.nonzero(t)
    u = float(epsilon) / size
    share = u / np.maximum((1.0 - float(epsilon)) * q[i] + u, _TINY)
    m_u = float(np.sum(t[i] * share))
    return float(prior[0]) + m_u, float(prior[1]) + float(t[i].sum()) - m_u


#: The grid on which the distinctness :math:`\delta` has its posterior (bin midpoints of [0, 1]).
DELTAS = (np.arange(200) + 0.5) / 200


#: Prior probability of :math:`\varepsilon = 0` (the neighbours predict every table) in
#: :func:`contamination_absent`.
NO_CONTAMINATION_PRIOR = 0.5


def _bin_log_prior(grid: FloatArray, prior: tuple[float, float]) -> FloatArray:
    """Log Beta-prior mass of the bins of [0, 1] around the increasing midpoints ``grid``."""
    from scipy.stats import beta as beta_dist

    edges = np.r_[0.0, 0.5 * (grid[1:] + grid[:-1]), 1.0]
    with np.errstate(divide="ignore"):
        return np.log(np.diff(beta_dist.cdf(edges, prior[0], prior[1])))


def contamination_absent(tables: Any, predicted: Any, prior: tuple[float, float],
                         grid: Any = None) -> float:
    r"""Posterior probability that there is no contamination (:math:`\varepsilon = 0`).

    Two hypotheses at prior odds :data:`NO_CONTAMINATION_PRIOR`, as for the concentration
    (:func:`concentration_weights`): the tables are all drawn from the neighbours' predictions
    :math:`Q`, or from :math:`(1 - \varepsilon) Q + \varepsilon U` with
    :math:`\varepsilon \sim \mathrm{Beta}(a_0, b_0)`. The Bayes factor
    :math:`\int \prod_j (1 - \varepsilon + \varepsilon / (S Q_j))^{t_j}\,
    \mathrm{Beta}(\varepsilon)\, d\varepsilon` is integrated over the bins around ``grid``
    (the prior's exact mass of every bin times the integrand at its midpoint).
    Tables the neighbours predict well are evidence for :math:`\varepsilon = 0` (the Occam
    factor: about :math:`1 / (T + 1)` for :math:`T` such tables under Beta(1, 1)).

    Parameters
    ----------
    tables : array_like of shape (..., S)
        Table counts (:func:`expected_tables`).
    predicted : array_like of shape (..., S)
        :math:`Q` of every row.
    prior : (float, float)
        The Beta prior of :math:`\varepsilon` under the second hypothesis.
    grid : array_like of shape (G,), optional
        Bin midpoints of [0, 1] (default :data:`DELTAS`).

    Returns
    -------
    float
        :math:`P(\varepsilon = 0 \mid \text{tables})`.
    """
    t, q = _check_pair(tables, predicted)
    e = DELTAS if grid is None else np.asarray(grid, dtype=np.float64)
    i = np.nonzero(t)
    if not np.all(q[i] > 0):
        return 0.0                                  # a table the neighbours cannot explain
    x = 1.0 / (t.shape[-1] * q[i])                  # U / Q at every table
    log_ratio = np.log1p(e[:, None] * (x[None, :] - 1.0)) @ t[i]       # (G,)
    v = log_ratio + _bin_log_prior(e, prior)
    top = float(np.max(v))
    log_bf = top + np.log(np.sum(np.exp(v - top)))
    p0 = NO_CONTAMINATION_PRIOR
    return float(1.0 / (1.0 + (1.0 - p0) / p0 * np.exp(min(log_bf, 700.0))))


def _state_modes(counts: FloatArray) -> list[tuple[int, IntArray, IntArray]]:
    """(state, tried actions, their most frequent next states) of every state with >= 2 tried."""
    tried = counts.sum(axis=-1) > 0                               # (S, A)
    mode = counts.argmax(axis=-1)                                 # (S, A)
    return [(int(s), np.flatnonzero(tried[s]), mode[s, tried[s]])
            for s in np.flatnonzero(tried.sum(axis=1) >= 2)]


def distinct_log_likelihood(counts: Any, base: Any, deltas: Any = DELTAS) -> FloatArray:
    r"""Log likelihood of the distinctness :math:`\delta` under the draws' model (:func:`repel`).

    The actions of a state take their outcomes one after the other in a random order; an action
    whose base is :math:`B_a` takes :math:`j` with probability
    :math:`B_a(j)\,(1 - \delta\,[j \in T]) / (1 - \delta\,B_a(T))`, :math:`T` the outcomes the
    actions before it took (:func:`repel`). Relative to independent actions
    (:math:`\delta = 0`) an outcome that coincides with a taken one contributes a factor
    :math:`(1 - \delta) / (1 - \delta B_a(T))`, a distinct one :math:`1 / (1 - \delta B_a(T))`:
    evidence for distinctness only as far as the base expected a coincidence. (Where the base already tells
    the actions apart -- a grid's moves -- distinct outcomes are no evidence; where it cannot
    -- DeepSea's shuffled actions -- every state whose actions differ is.)

    Parameters
    ----------
    counts : array_like of shape (S, A, S)
        Transition counts; a tried action's outcome is its most frequent next state, and every
        state with at least two tried actions is one observation.
    base : array_like of shape (S, A, S)
        The base measure :math:`B` of every pair.
    deltas : array_like of shape (G,)
        Values of :math:`\delta` in [0, 1].

    Returns
    -------
    ndarray of shape (G,)
        :math:`\sum_s \log \mathrm{mean}_{\pi} \prod_k (\ldots)`, the likelihood ratio against
        :math:`\delta = 0`, averaged over the orders :math:`\pi` of the state's tried actions
        (all orders up to 4 tried actions, else the order of the action indices).
    """
    n, b = _check_pair(counts, base)
    if n.ndim != 3 or n.shape[0] != n.shape[2]:
        raise ValueError(f"counts: expected shape (S, A, S), got {n.shape}")
    d = np.atleast_1d(np.asarray(deltas, dtype=np.float64))
    if d.ndim != 1 or not np.all((d >= 0) & (d <= 1)):
        raise ValueError("deltas: expected a 1-D array of values in [0, 1]")
    out = np.zeros(d.size)
    for s, acts, modes in _state_modes(n):
        orders = (list(itertools.permutations(range(acts.size))) if acts.size <= 4
                  else [tuple(range(acts.size))])
        ratio = np.zeros(d.size)
        for order in orders:
            r = np.ones(d.size)
            for k, i in enumerate(order):
                before = modes[list(order[:k])]
                if k == 0:
                    continue
                hit = 1.0 - d if modes[i] in before else 1.0
                r = r * hit / (1.0 - d * b[s, acts[i], np.unique(before)].sum())
            ratio += r
        with np.errstate(divide="ignore"):
            out += np.log(ratio / len(orders))
    return out


def distinct_posterior(counts: Any, base: Any, prior: tuple[float, float],
                       deltas: Any = DELTAS) -> FloatArray:
    r"""Posterior weights of the distinctness :math:`\delta` on a grid.

    Parameters
    ----------
    counts : array_like of shape (S, A, S)
        Transition counts.
    base : array_like of shape (S, A, S)
        The base measure of every pair.
    prior : (float, float)
        Beta prior :math:`(a_0, b_0)` of :math:`\delta`.
    deltas : array_like of shape (G,)
        The grid (bin midpoints of [0, 1]: the weights are the bins' probabilities).

    Returns
    -------
    ndarray of shape (G,)
        The Beta prior's mass of every bin times :func:`distinct_log_likelihood` at its
        midpoint, normalised.
    """
    d = np.asarray(deltas, dtype=np.float64)
    v = distinct_log_likelihood(counts, base, d) + _bin_log_prior(d, prior)
    if not np.any(np.isfinite(v)):
        raise ValueError("counts, base: no value of delta has a positive posterior density")
    w = np.exp(v - np.max(v))
    return w / w.sum()


def repel(base: Any, taken: Any, delta: Any) -> FloatArray:
    r"""Move a pair's base mass off the next states other actions of its state take.

    Parameters
    ----------
    base : array_like of shape (..., S)
        Base measures (rows on the simplex).
    taken : array_like of bool, shape (..., S)
        Next states taken by the state's other actions.
    delta : float or array_like broadcasting against ``base[..., :1]``
        :math:`\delta` in [0, 1].

    Returns
    -------
    ndarray of shape (..., S)
        ``base * (1 - delta * taken)`` renormalised; a row whose every state is taken keeps its
        base.
    """
    b = np.asarray(base, dtype=np.float64)
    w = b * (1.0 - np.asarray(delta, dtype=np.float64) * np.asarray(taken, dtype=bool))
    z = w.sum(axis=-1, keepdims=True)
    return np.where(z > _TINY, w / np.maximum(z, _TINY), b)


def mix_base(predicted: Any, epsilon: Any) -> FloatArray:
    r""":math:`B = (1 - \varepsilon) Q + \varepsilon U` along the last axis (``epsilon`` broadcasts)."""
    q = np.asarray(predicted, dtype=np.float64)
    e = np.asarray(epsilon, dtype=np.float64)
    return (1.0 - e) * q + e / q.shape[-1]


def layer_mean(counts: Any, base: Any, concentrations: Any, weights: Any,
               pair_base: Any = None) -> FloatArray:
    r"""Posterior mean of the rows, averaged over the concentration's posterior.

    Parameters
    ----------
    counts, base : array_like of shape (..., S)
    concentrations, weights : array_like of shape (L,)
    pair_base : array_like of shape (..., S), optional
        The base of the finite concentrations (default ``base``; e.g. :func:`repel` of it).

    Returns
    -------
    ndarray of shape (..., S)
        :math:`\sum_l w_l (c_l B' + n) / (c_l + N)` (:math:`B` itself for :math:`c = \infty`).
    """
    n, b = _check_pair(counts, base)
    bp = b if pair_base is None else _check_pair(counts, pair_base)[1]
    total = n.sum(axis=-1, keepdims=True)
    # sum_l w_l (c_l B' + n) / (c_l + N) = B' sum_l w_l c_l / (c_l + N) + n sum_l w_l / (c_l + N):
    # two numbers per row instead of a table per concentration
    on_base, on_counts = np.zeros_like(total), np.zeros_like(total)
    w_inf = 0.0
    for c, w in zip(np.asarray(concentrations, float), np.asarray(weights, float)):
        if w <= 0.0:
            continue
        if np.isinf(c):
            w_inf += w
            continue
        on_base += w * c / (c + total)
        on_counts += w / (c + total)
    return w_inf * b + on_base * bp + on_counts * n


def layer_sqrt_mean(counts: Any, base: Any, concentrations: Any, weights: Any) -> FloatArray:
    r""":math:`E[\sqrt{P}]` of the rows given their base, mixed over the concentration's posterior.

    Given the base :math:`B` a row is :math:`\mathrm{Dir}(c B + n)` for a finite :math:`c`
    (:func:`~._hellinger.dirichlet_sqrt_mean`) and :math:`B` itself for :math:`c = \infty`;
    the mixture over :math:`c` is taken inside the expectation (before any squaring).

    Parameters
    ----------
    counts : array_like of shape (..., S)
    base : array_like of shape (..., S)
        Base measures; any extra leading axes of ``base`` (for example M draws of it,
        (M, ..., S)) broadcast against ``counts``.
    concentrations, weights : array_like of shape (L,)

    Returns
    -------
    ndarray of the broadcast shape
        :math:`\sum_l w_l\, E_{\mathrm{Dir}(c_l B + n)}[\sqrt P]` (:math:`\sqrt B` for
        :math:`c_l = \infty`).
    """
    n = np.asarray(counts, dtype=np.float64)
    b = np.asarray(base, dtype=np.float64)
    if n.ndim < 1 or b.shape[b.ndim - n.ndim:] != n.shape:
        raise ValueError(f"counts, base: expected base of shape (..., *counts.shape), got "
                         f"{b.shape} and {n.shape}")
    out = np.zeros(np.broadcast_shapes(n.shape, b.shape))
    for c, w in zip(np.asarray(concentrations, float), np.asarray(weights, float)):
        if w <= 0.0:
            continue
        out += w * (np.sqrt(b) if np.isinf(c) else
                    dirichlet_sqrt_mean(np.maximum(c * b, _TINY) + n))
    return out


def layer_draws(counts: Any, base_draws: Any, concentrations: Any, weights: Any, *,
                rng: SeedLike) -> FloatArray:
    r"""Posterior draws of the rows given draws of their base measure.

    Parameters
    ----------
    counts : array_like of shape (R, S)
        Counts of the R rows (one action's states).
    base_draws : array_like of shape (M, R, S)
        M draws of the base measure of every row.
    concentrations, weights : array_like of shape (L,)
        The lattice and its posterior weights; every draw picks one concentration.
    rng : numpy.random.Generator or seed

    Returns
    -------
    ndarray of shape (M, R, S)
        Draw m: :math:`c \sim w`, then every row
        :math:`\sim \mathrm{Dir}(c B^{(m)} + n)` (:math:`B^{(m)}` itself if :math:`c = \infty`).
    """
    gen = as_generator(rng)
    n = np.asarray(counts, dtype=np.float64)
    out = np.array(base_draws, dtype=np.float64, copy=True)
    if out.ndim != 3 or out.shape[1:] != n.shape:
        raise ValueError(f"base_draws: expected shape (M, R, S) with (R, S) = {n.shape}, got "
                         f"{out.shape}")
    cs = np.asarray(concentrations, dtype=np.float64)
    pick = np.asarray(gen.choice(cs.size, size=out.shape[0],
                                 p=np.asarray(weights, dtype=np.float64)))
    for k in np.unique(pick).tolist():          # the draws of one concentration at once
        if np.isinf(cs[k]):
            continue
        sel = pick == k
        alpha = np.maximum(cs[k] * out[sel], _TINY) + n
        out[sel] = sample_dirichlet(alpha, 1, rng=gen)[0]
    return out


def distinct_draws(counts: Any, base_draws: Any, concentrations: Any, weights: Any,
                   delta: Any, *, rng: SeedLike, sqrt_out: FloatArray | None = None) -> FloatArray:
    r"""Posterior draws in which the actions of a state draw distinct outcomes (prob. delta).

    Parameters
    ----------
    counts : array_like of shape (S, A, S)
    base_draws : array_like of shape (M, S, A, S)
        Draws of every pair's base measure.
    concentrations : array_like of shape (L,)
    weights : array_like of shape (A, L)
        Every action's concentration posterior; each draw picks one concentration per action.
    delta : array_like of shape (M,)
        :math:`\delta` of every draw.
    rng : numpy.random.Generator or seed
    sqrt_out : ndarray of shape (M, S, A, S), optional
        Filled with :math:`E[\sqrt{P}]` of every row given everything the draw drew before its
        last Dirichlet (:func:`~._hellinger.dirichlet_sqrt_mean` of its parameters; the square
        root of the base with :math:`c = \infty`): averaged over the draws, an unbiased,
        Rao-Blackwellised estimate of the posterior :math:`E[\sqrt P]`. The draws themselves
        (and the random numbers used) are the same with or without it.

    Returns
    -------
    ndarray of shape (M, S, A, S)
        Draw m visits the actions of every state in a random order; an action with a finite
        concentration draws :math:`\mathrm{Dir}(c\,B' + n)` where :math:`B'` is its base
        :func:`repel`-ed (by :math:`\delta_m`) off the next states the actions before it hold
        more than half of their mass on; with :math:`c = \infty` it is its base.
    """
    gen = as_generator(rng)
    n = np.asarray(counts, dtype=np.float64)
    draws = np.asarray(base_draws, dtype=np.float64)
    M, S, A, _ = draws.shape
    cs = np.asarray(concentrations, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    d = np.asarray(delta, dtype=np.float64)
    out = np.empty_like(draws)
    rows = np.arange(S)
    for m in range(M):
        c_of = np.array([cs[gen.choice(cs.size, p=w[a])] for a in range(A)])
        order = np.argsort(gen.random((S, A)), axis=1)
        taken = np.zeros((S, S), dtype=bool)
        for j in range(A):
            act = order[:, j]
            c = c_of[act][:, None]                                     # (S, 1)
            finite = np.isfinite(c[:, 0])
            b = draws[m, rows, act]                                    # (S, S)
            x = b.copy()
            if sqrt_out is not None:
                sqrt_out[m, rows, act] = np.sqrt(b)
            if finite.any():
                bp = repel(b[finite], taken[finite], d[m])
                alpha = np.maximum(c[finite] * bp, _TINY) + n[rows[finite], act[finite]]
                x[finite] = sample_dirichlet(alpha, 1, rng=gen)[0]
                if sqrt_out is not None:
                    sqrt_out[m, rows[finite], act[finite]] = dirichlet_sqrt_mean(alpha)
            out[m, rows, act] = x
            taken |= x > 0.5
    return out


def _beta_prior(prior: Any, name: str) -> tuple[float, float] | None:
    """Validate a Beta prior ``(a0, b0)`` argument (None passes through)."""
    if prior is None:
        return None
    if isinstance(prior, (str, bytes)) or not hasattr(prior, "__len__") or len(prior) != 2:
        raise ValueError(f"{name}: expected (a0, b0), two positive numbers, or None, got {prior!r}")
    out = (float(prior[0]), float(prior[1]))
    if not all(np.isfinite(v) and v > 0 for v in out):
        raise ValueError(f"{name}: expected two positive numbers, got {prior!r}")
    return out


class _Layer:
    """The layer's state inside a :class:`CorrelatedTransitionModel` (see the module docstring).

    Holds the lattice of concentrations and their posterior weights per action, the Beta
    posterior of the contamination and the tables each action's correlated model was last fitted
    to; :meth:`refit` alternates tables and fits, :meth:`mean` and :meth:`draws` map the
    correlated model's predictions through the layer.
    """

    def __init__(self, lattice: FloatArray, prior: tuple[float, float] | None, rounds: int,
                 n_states: int, n_actions: int,
                 distinct: tuple[float, float] | None = None,
                 support: float | None = None) -> None:
        self.lattice = lattice
        self.weights = np.full((n_actions, lattice.size), 1.0 / lattice.size)
        self.prior = prior
        self.beta: tuple[float, float] = prior if prior is not None else (0.0, 1.0)
        self.absent = NO_CONTAMINATION_PRIOR if prior is not None else 1.0   # P(epsilon = 0)
        self.distinct = distinct
        self.delta_weights = (None if distinct is None else
                              distinct_posterior(np.zeros((1, 1, 1)), np.ones((1, 1, 1)), distinct))
        self.rounds = rounds
        self.support = support
        self.support_weights = np.full(n_actions, 0.0 if support is None else support)
        self.support_fit: SupportFit | None = None
        self._support_counts: FloatArray | None = None     # the counts support_fit is of
        # the last closed form of the support hypothesis: (fit, function, counts, value)
        self._closed: tuple[SupportFit, Any, FloatArray, FloatArray] | None = None
        self.fitted: list[FloatArray | None] = [None] * n_actions
        self.n_states = n_states

    @classmethod
    def build(cls, concentration: Any, prior: Any, rounds: Any, n_states: int,
              n_actions: int, distinct: Any = None, support: Any = None) -> _Layer | None:
        """Validate the belief's layer arguments; None when there is no layer."""
        rounds = check_int(rounds, "layer_rounds", 1)
        if concentration is None:
            lattice = np.array([np.inf])
        elif isinstance(concentration, str):
            if concentration != "auto":
                raise ValueError(f"concentration: expected None, 'auto' or a positive number, got "
                                 f"{concentration!r}")
            lattice = CONCENTRATIONS.copy()
        else:
            try:
                c = float(concentration)
            except (TypeError, ValueError):
                raise TypeError(f"concentration: expected None, 'auto' or a positive number, got "
                                f"{type(concentration).__name__}") from None
            if not c > 0:
                raise ValueError(f"concentration: expected None, 'auto' or a positive number, got "
                                 f"{concentration!r}")
            lattice = np.array([c])
        beta = _beta_prior(prior, "contamination_prior")
        delta = _beta_prior(distinct, "distinct_prior")
        if delta is not None and concentration is None:
            raise ValueError("distinct_prior: acts on the per-pair layer; it needs a concentration "
                             "('auto' or a number), got concentration=None")
        p_support = None
        if support is not None:
            if isinstance(support, (bool, str, bytes)) or not isinstance(support, (int, float)):
                raise TypeError(f"support_prior: expected None or a probability, got "
                                f"{type(support).__name__}")
            p_support = float(support)
            if not 0.0 < p_support < 1.0:
                raise ValueError(f"support_prior: expected a probability in (0, 1), got "
                                 f"{support!r}")
            if concentration is None:
                raise ValueError("support_prior: a hypothesis beside the per-pair layer; it needs "
                                 "a concentration ('auto' or a number), got concentration=None")
        if concentration is None and beta is None:
            return None
        return cls(lattice, beta, int(rounds), n_states, n_actions, delta, p_support)

    @property
    def delta(self) -> float:
        """Posterior mean of the distinctness (0 without a prior)."""
        return 0.0 if self.delta_weights is None else float(self.delta_weights @ DELTAS)

    @property
    def delta_beta(self) -> tuple[float, float]:
        """The Beta distribution with the mean and variance of the grid posterior of delta."""
        if self.delta_weights is None:
            return (0.0, 1.0)
        m = self.delta
        v = float(self.delta_weights @ (DELTAS - m) ** 2)
        k = m * (1.0 - m) / max(v, 1e-12) - 1.0
        return (m * k, (1.0 - m) * k)

    def _taken(self, counts: FloatArray) -> FloatArray:
        """(S, A, S): the most frequent next states of every state's *other* tried actions."""
        S, A, _ = counts.shape
        tried = counts.sum(axis=-1) > 0
        mode = counts.argmax(axis=-1)
        taken = np.zeros(counts.shape, dtype=bool)
        for a in range(A):
            for b in range(A):
                if a != b:
                    rows = np.flatnonzero(tried[:, b])
                    taken[rows, a, mode[rows, b]] = True
        return taken

    @property
    def epsilon(self) -> float:
        """Posterior mean of the contamination (0 without a prior)."""
        return (1.0 - self.absent) * self._slab_epsilon

    @property
    def _slab_epsilon(self) -> float:
        """Mean of the contamination given that there is some (the Beta posterior's)."""
        return 0.0 if self.prior is None else self.beta[0] / (self.beta[0] + self.beta[1])

    def _base(self, belief: Any) -> FloatArray | None:
        """The correlated predictions Q, (S, A, S); None before every action is fitted."""
        if not all(hasattr(m, "result_") for m in belief.models_):
            return None
        q = belief._current_category_probs()
        return np.stack([belief._to_next_states(q[a], a) for a in range(len(q))], axis=1)

    def _tables(self, counts: FloatArray, base: FloatArray, weights: FloatArray) -> FloatArray:
        """Table counts averaged over the concentration weights, rounded (the entries with
        counts only: the others have no tables).
        """
        seen = counts > 0
        n, b = counts[seen], base[seen]
        acc = np.zeros_like(n)
        for c, w in zip(self.lattice, weights):
            if w > 1e-12:
                acc += w * _seen_table_means(n, b, float(c))
        t = np.zeros_like(counts)
        t[seen] = acc
        return _round_tables(t, counts)

    def refit(self, belief: Any) -> None:
        """Alternate table counts and fits of the belief's correlated models, then update the
        concentration weights and the contamination (at most ``rounds`` rounds).

        The tables (the correlated models' data) and the contamination come from the belief's
        observed counts; the pairs' Dirichlets -- the concentration and distinctness weights
        here, the mean and draws -- condition on ``belief._layer_counts()`` (the same counts,
        or with a transfer belief's borrowed pair counts).
        """
        counts = belief._counts
        S = self.n_states
        base = self._base(belief)
        for r in range(self.rounds):
            B = np.full_like(counts, 1.0 / S) if base is None else mix_base(base, self.epsilon)
            todo: dict[int, FloatArray] = {}
            for a in range(counts.shape[1]):
                t = self._tables(counts[:, a, :], B[:, a, :], self.weights[a])
                last = self.fitted[a]
                if last is None or not np.array_equal(t, last):
                    todo[a] = t
            belief._fit_actions(todo)   # (in parallel with the belief's n_jobs)
            for a in todo:
                self.fitted[a] = todo[a]
            changed = bool(todo)
            if not changed and r > 0:
                break
            base = self._base(belief)
            assert base is not None   # every action was fitted above
            if self.prior is not None:
                tables = np.stack([t for t in self.fitted if t is not None], axis=1)
                for _ in range(3):   # a few EM steps of the mixture weight
                    self.beta = contamination_posterior(tables, base, self._slab_epsilon,
                                                        self.prior)
                self.absent = contamination_absent(tables, base, self.prior)
            B = mix_base(base, self.epsilon)
            pairs = belief._layer_counts()
            if self.distinct is not None:
                self.delta_weights = distinct_posterior(pairs, B, self.distinct)
            self._weigh(pairs, B)
            if not changed:
                break

    def _weigh(self, counts: FloatArray, B: FloatArray) -> None:
        """Concentration weights per action and, with ``support``, the support hypothesis'."""
        if self.support is not None and (self._support_counts is None
                                         or not np.array_equal(counts, self._support_counts)):
            self.support_fit = fit_support(counts, start=self.support_fit)   # pooled
            self._support_counts = counts.copy()
        f = self.support_fit if self.support is not None else None
        factors = np.zeros(counts.shape[1])
        for a in range(counts.shape[1]):
            ev = log_evidence(counts[:, a, :], B[:, a, :], self.lattice)
            self.weights[a] = concentration_weights(ev, self.lattice)
            if f is not None:
                factors[a] = support_log_factor(
                    ev, self.lattice, support_log_evidence(counts[:, a, :], f.pi, f.beta))
        if f is not None and self.support is not None:
            self.support_weights = support_weights(factors, self.support)

    def mean(self, counts: FloatArray, base: FloatArray) -> FloatArray:
        """Posterior mean (S, A, S) from the correlated means ``base`` (S, A, S)."""
        B = mix_base(base, self.epsilon)
        pair = B if self.distinct is None else repel(B, self._taken(counts), self.delta)
        out = np.stack([layer_mean(counts[:, a, :], B[:, a, :], self.lattice, self.weights[a],
                                   pair[:, a, :])
                        for a in range(counts.shape[1])], axis=1)
        return self._with_support(out, counts, support_mean)

    def _with_support(self, out: FloatArray, counts: FloatArray, closed_form: Any) -> FloatArray:
        """``out`` (..., S, A, S), an expectation under the layer, mixed with the sparse-support
        hypothesis's ``closed_form(counts, pi, beta)`` by its weight per action (the
        expectation is linear in the posterior; ``out`` itself when no action gives the
        hypothesis weight). The closed form is kept for the next call with the same fit and
        counts (the batches of one Monte-Carlo estimate).
        """
        f = self.support_fit
        if f is None or not self.support_weights.any():
            return out
        kept = self._closed
        if kept is None or kept[0] is not f or kept[1] is not closed_form \
                or not np.array_equal(kept[2], counts):
            kept = self._closed = (f, closed_form, counts.copy(), closed_form(counts, f.pi, f.beta))
        w = self.support_weights[None, :, None]
        return (1.0 - w) * out + w * kept[3]

    def _draw_bases(self, base_draws: FloatArray, rng: np.random.Generator) -> FloatArray:
        """Every draw's base measure (M, S, A, S): its contamination drawn from its posterior."""
        m = base_draws.shape[0]
        eps: Any = self.epsilon
        if self.prior is not None:
            a0, b0 = self.beta
            eps = np.asarray(rng.beta(a0, b0, size=m) * (rng.random(m) >= self.absent)
                             )[:, None, None, None]
        return mix_base(base_draws, eps)

    def _draw_deltas(self, m: int, rng: np.random.Generator) -> FloatArray:
        """``m`` distinctness values: from the grid posterior, uniform in a bin."""
        assert self.delta_weights is not None
        half = 0.5 / DELTAS.size
        return DELTAS[rng.choice(DELTAS.size, size=m, p=self.delta_weights)] \
            + rng.uniform(-half, half, size=m)

    def sqrt_draws(self, counts: FloatArray, base_draws: FloatArray, *,
                   rng: np.random.Generator) -> FloatArray:
        r"""Per-draw values (M, S, A, S) whose average estimates :math:`E[\sqrt P]`, from draws
        of the correlated model (M, S, A, S).

        Rao-Blackwellised: every draw of the base (and of the contamination, the distinctness
        and the actions' order and concentrations, as :meth:`draws` draws them) contributes
        the closed form of its last Dirichlet (:func:`layer_sqrt_mean`, or the conditional
        values of :func:`distinct_draws`); the sparse-support hypothesis enters every draw with
        its posterior weight per action, in closed form (:func:`~._support.support_sqrt_mean`).
        """
        B = self._draw_bases(base_draws, rng)
        if self.delta_weights is not None:
            out = np.empty_like(B)
            distinct_draws(counts, B, self.lattice, self.weights,
                           self._draw_deltas(B.shape[0], rng), rng=rng, sqrt_out=out)
        else:
            out = np.stack([layer_sqrt_mean(counts[:, a, :], B[:, :, a, :], self.lattice,
                                            self.weights[a])
                            for a in range(counts.shape[1])], axis=2)
        return self._with_support(out, counts, support_sqrt_mean)

    def draws(self, counts: FloatArray, base_draws: FloatArray, *,
              rng: np.random.Generator) -> FloatArray:
        """Posterior draws (M, S, A, S) from draws of the correlated model (M, S, A, S)."""
        m = base_draws.shape[0]
        B = self._draw_bases(base_draws, rng)
        if self.delta_weights is not None:
            out = distinct_draws(counts, B, self.lattice, self.weights,
                                 self._draw_deltas(m, rng), rng=rng)
        else:
            out = np.stack([layer_draws(counts[:, a, :], B[:, :, a, :], self.lattice,
                                        self.weights[a], rng=rng)
                            for a in range(counts.shape[1])], axis=2)
        f = self.support_fit
        if f is not None and self.support_weights.any():   # (no weight: the layer's draws
            # bit for bit) every draw of an action: the support hypothesis w.p. its weight
            pick = rng.random((m, counts.shape[1])) < self.support_weights[None, :]
            for a in np.flatnonzero(pick.any(axis=0)).tolist():
                sel = np.flatnonzero(pick[:, a])
                out[sel, :, a, :] = support_draws(counts[:, a, :], f.pi, f.beta, sel.size,
                                                  rng=rng)
        return out
