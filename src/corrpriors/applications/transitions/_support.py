r"""Sparse supports: a per-(state, action) prior that knows a pair reaches only a few states.

A symmetric Dirichlet belief spreads its pseudo-counts over every state; whatever its
concentration, it keeps predicting *new* next states at a rate that falls only with the visits,
while many environments move every (state, action) pair to a handful of states and never
elsewhere (a random MDP's three successors, a slippery grid's three moves). The sparse-support
prior draws that handful first:

.. math::

    k \sim \pi, \qquad Z \mid k \sim \mathrm{Uniform}\{Z \subseteq \{1..S\} : |Z| = k\}, \qquad
    P(\cdot \mid s, a) \mid Z \sim \mathrm{Dir}(\beta \mathbf 1_Z),

with the prior :math:`\pi` over the support size and the concentration :math:`\beta` shared by
all pairs and learned from their pooled evidence (:func:`fit_support`). For a pair with
:math:`N` observations, :math:`m` distinct next states and counts :math:`n_j`, the support must
contain the :math:`m` observed states:

.. math::

    P(\text{data} \mid k) = \frac{\binom{S - m}{k - m}}{\binom{S}{k}}\,
    \frac{\Gamma(k\beta)}{\Gamma(k\beta + N)} \prod_{j\ \text{seen}}
    \frac{\Gamma(\beta + n_j)}{\Gamma(\beta)} \quad (k \ge m; \text{ else } 0),

the probability of the observed *sequence* (:func:`support_log_likelihood`), and
:math:`P(k \mid \text{data}) \propto \pi_k P(\text{data} \mid k)`. Given :math:`k`, the
support holds the :math:`m` seen states and :math:`k - m` of the :math:`S - m` unseen ones
uniformly, so the posterior mean (the predictive of the next observation, :func:`support_mean`)
is

.. math::

    \hat P_j = \sum_k P(k \mid \text{data}) \frac{n_j + \beta}{N + k\beta} \ (j\ \text{seen}),
    \qquad
    \hat P_u = \sum_k P(k \mid \text{data}) \frac{k - m}{S - m} \frac{\beta}{N + k\beta}
    \ (u\ \text{unseen}),

and a posterior draw (:func:`support_draws`) draws :math:`k`, then :math:`k - m` unseen states,
then :math:`\mathrm{Dir}(\beta + n)` on the support. Once a pair has shown as many distinct
states as the pooled evidence says pairs have, it puts (almost) no mass anywhere else -- what
the Hellinger error of system identification rewards and what a Dirichlet chosen by its own
evidence does not do (it keeps :math:`S\alpha / (N + S\alpha)` for the unseen states).

The prior ignores geometry: every support of a size is equally likely. The correlated belief
uses it as one more hypothesis beside its per-pair layer, per action, chosen by the evidence
(:mod:`._layer`); :class:`SupportTransitionModel` is the standalone belief.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import gammaln, logsumexp

from ..._random import as_generator
from ..._special import log_half_gamma_ratio
from ..._typing import FloatArray, SeedLike
from ..._validation import check_int
from ._beliefs import _check_n, _TransitionBelief
from ._hellinger import from_sqrt_mean

__all__ = ["BETAS", "SupportFit", "SupportTransitionModel", "fit_support", "support_draws",
           "support_hellinger_estimate", "support_log_evidence", "support_log_likelihood",
           "support_mean", "support_size_posterior", "support_sqrt_mean"]

#: The lattice of Dirichlet concentrations :math:`\beta` on a support (a quarter decade apart).
BETAS = 10.0 ** np.arange(-2.0, 2.0 + 1e-9, 0.25)


def _rows(counts: Any) -> FloatArray:
    n = np.asarray(counts, dtype=np.float64)
    if n.ndim < 1 or n.shape[-1] < 1:
        raise ValueError(f"counts: expected an array of shape (..., S), got shape {n.shape}")
    if not np.all(np.isfinite(n)) or np.any(n < 0):
        raise ValueError("counts: expected finite non-negative counts")
    return n.reshape(-1, n.shape[-1])


def _check_beta(beta: Any) -> float:
    b = float(beta)
    if not (np.isfinite(b) and b > 0):
        raise ValueError(f"beta: expected a positive finite number, got {beta!r}")
    return b


def _check_pi(pi: Any, size: int) -> FloatArray:
    p = np.asarray(pi, dtype=np.float64)
    if p.shape != (size,) or not np.all(np.isfinite(p)) or np.any(p < 0) or not p.sum() > 0:
        raise ValueError(f"pi: expected {size} non-negative weights of the support sizes "
                         f"1..{size} (not all 0), got shape {p.shape}")
    return p / p.sum()


def _summaries(counts: Any, beta: float) -> tuple[FloatArray, float, FloatArray, FloatArray,
                                                  FloatArray]:
    """Validated rows ``n`` (R, S), ``beta``, their totals N (R, 1), distinct next states m
    (R, 1) and the support sizes k = 1..S (1, S).
    """
    n = _rows(counts)
    b = _check_beta(beta)
    S = n.shape[-1]
    N = n.sum(axis=-1, keepdims=True)
    m = (n > 0).sum(axis=-1, keepdims=True).astype(np.float64)
    k = np.arange(1, S + 1, dtype=np.float64)[None, :]
    return n, b, N, m, k


def _unseen_share(k: FloatArray, m: FloatArray, S: int) -> FloatArray:
    """(k - m) / (S - m), shape (R, S): the chance that a given unseen state is in a support
    of size k holding the m seen ones (0 where k < m).
    """
    return np.maximum(k - m, 0.0) / np.maximum(S - m, 1.0)


def _size_mixture(counts: Any, pi: Any, beta: float, entry: Any, total: Any) -> FloatArray:
    r"""A Dirichlet moment of every state mixed over the posterior of the support size.

    Given the size :math:`k`, a member :math:`j` of the support has the moment
    ``entry(n_j + beta) * total(N + k beta)`` (the posterior mean: :math:`a_j / a_0`;
    :math:`E\sqrt{P_j}`: :math:`\Gamma(a_j+\frac12)/\Gamma(a_j) \cdot
    \Gamma(a_0)/\Gamma(a_0+\frac12)`), a seen state is a member, an unseen one with
    probability :func:`_unseen_share`; the moment is linear in the posterior, so it is mixed
    over :math:`P(k \mid \text{data})` as it is. Returns the shape of ``counts``.
    """
    shape = np.shape(counts)
    n, b, N, m, k = _summaries(counts, beta)
    g = support_size_posterior(n, pi, b) * total(N + k * b)            # (R, K)
    seen = entry(n + b) * g.sum(axis=-1, keepdims=True)
    unseen = entry(np.array(b)) * np.sum(g * _unseen_share(k, m, n.shape[-1]), axis=-1,
                                         keepdims=True)
    return np.where(n > 0, seen, unseen).reshape(shape)


def _log_joint(counts: Any, pi: Any, beta: float) -> FloatArray:
    """The log joint log pi_k + log P(data_r | k), ndarray of shape (R, S).

    Raises ``ValueError`` naming ``pi`` if some row gets no mass at any size.
    """
    L = support_log_likelihood(counts, beta)
    p = _check_pi(pi, L.shape[-1])
    with np.errstate(divide="ignore"):
        v = L + np.log(p)[None, :]
    if not np.all(np.isfinite(v.max(axis=-1))):
        raise ValueError("pi: gives no mass to support sizes as large as the distinct next "
                         "states of some row")
    return v


def support_log_likelihood(counts: Any, beta: float) -> FloatArray:
    r"""Log probability of every row's observed sequence given each support size.

    Parameters
    ----------
    counts : array_like of shape (..., S)
        Next-state counts of R rows (any leading shape).
    beta : float
        The Dirichlet concentration on the support.

    Returns
    -------
    ndarray of shape (R, S)
        Entry ``[r, k - 1]``: :math:`\log P(\text{data}_r \mid k)` (module docstring),
        ``-inf`` for :math:`k < m_r`; 0 for a row without data.
    """
    n, b, N, m, k = _summaries(counts, beta)
    own = np.sum(gammaln(n + b) - gammaln(b), axis=-1, keepdims=True)   # (R, 1)
    return _size_log_terms(N, m, n.shape[-1], b) + own


def _size_log_terms(N: FloatArray, m: FloatArray, S: int, b: float) -> FloatArray:
    r"""The part of :func:`support_log_likelihood` that depends on the support size, (R, S):
    a row enters only through its total ``N`` and its distinct next states ``m`` (both (R, 1));
    the rest, :math:`\sum_j \log\Gamma(n_j + \beta) - \log\Gamma(\beta)`, is the same for
    every size.
    """
    k = np.arange(1, S + 1, dtype=np.float64)[None, :]
    ok = k >= m
    with np.errstate(invalid="ignore"):
        cover = gammaln(S - m + 1) + gammaln(k + 1) - gammaln(np.where(ok, k - m, 0) + 1) \
            - gammaln(S + 1.0)
        out = cover + gammaln(k * b) - gammaln(k * b + N)
    return np.where(ok, out, -np.inf)


def support_size_posterior(counts: Any, pi: Any, beta: float) -> FloatArray:
    r""":math:`P(k \mid \text{data})` of every row.

    Parameters
    ----------
    counts : array_like of shape (..., S)
    pi : array_like of shape (S,)
        Prior weights of the support sizes 1..S.
    beta : float

    Returns
    -------
    ndarray of shape (R, S)
        Rows on the simplex (a row without data: ``pi``).
    """
    v = _log_joint(counts, pi, beta)
    w = np.exp(v - v.max(axis=-1, keepdims=True))
    return w / w.sum(axis=-1, keepdims=True)


def support_log_evidence(counts: Any, pi: Any, beta: float) -> float:
    r"""Pooled log evidence :math:`\sum_r \log \sum_k \pi_k P(\text{data}_r \mid k)`.

    Parameters
    ----------
    counts : array_like of shape (..., S)
    pi : array_like of shape (S,)
    beta : float

    Returns
    -------
    float
        The log probability of all rows' observed sequences (0 without data).
    """
    return float(np.sum(logsumexp(_log_joint(counts, pi, beta), axis=-1)))


def support_mean(counts: Any, pi: Any, beta: float) -> FloatArray:
    r"""Posterior mean (the predictive of the next observation) of every row.

    Parameters
    ----------
    counts : array_like of shape (..., S)
    pi : array_like of shape (S,)
    beta : float

    Returns
    -------
    ndarray of the shape of ``counts``
        Rows on the simplex (module docstring).
    """
    return _size_mixture(counts, pi, beta, lambda a: a, lambda a0: 1.0 / a0)


def support_sqrt_mean(counts: Any, pi: Any, beta: float) -> FloatArray:
    r""":math:`E[\sqrt{P_j} \mid \text{data}]` of every row under the sparse-support prior.

    Mixed over the posterior of the support size *inside* the expectation; with
    :math:`E[\sqrt{p}]` of a Dirichlet component in closed form,

    .. math::

        E[\sqrt{P_j} \mid k] = \frac{\Gamma(n_j + \beta + \tfrac12)}{\Gamma(n_j + \beta)}
        \frac{\Gamma(N + k\beta)}{\Gamma(N + k\beta + \tfrac12)}, \qquad
        E[\sqrt{P_u} \mid k] = \frac{k - m}{S - m}
        \frac{\Gamma(\beta + \tfrac12)}{\Gamma(\beta)}
        \frac{\Gamma(N + k\beta)}{\Gamma(N + k\beta + \tfrac12)}

    for a seen state :math:`j` and an unseen one :math:`u` (in the support with probability
    :math:`(k - m) / (S - m)`).

    Parameters
    ----------
    counts : array_like of shape (..., S)
    pi : array_like of shape (S,)
    beta : float

    Returns
    -------
    ndarray of the shape of ``counts``
    """
    return _size_mixture(counts, pi, beta, lambda a: np.exp(log_half_gamma_ratio(a)),
                         lambda a0: np.exp(-log_half_gamma_ratio(a0)))


def support_hellinger_estimate(counts: Any, pi: Any, beta: float) -> FloatArray:
    r"""The Bayes estimate of every row under the squared Hellinger loss.

    The posterior mean minimises the expected squared error, not the expected squared
    Hellinger distance :math:`\tfrac12 \sum_j (\sqrt{\hat P_j} - \sqrt{P_j})^2`; that is
    minimised on the simplex by :math:`\hat P_j \propto (E[\sqrt{P_j} \mid \text{data}])^2`
    (:mod:`._hellinger`), with :math:`E\sqrt{P_j}` from :func:`support_sqrt_mean`. For an
    unseen state, :math:`E\sqrt{P_u}` carries the probability that it is in the support once,
    while :math:`E P_u` carries it too: squared, the estimate puts a factor of about
    :math:`(k - m) / (S - m)` less mass on every unseen state than the mean does.

    Parameters
    ----------
    counts : array_like of shape (..., S)
    pi : array_like of shape (S,)
    beta : float

    Returns
    -------
    ndarray of the shape of ``counts``
        Rows on the simplex.
    """
    return from_sqrt_mean(support_sqrt_mean(counts, pi, beta))


def support_draws(counts: Any, pi: Any, beta: float, n_draws: int, *,
                  rng: SeedLike) -> FloatArray:
    r"""Posterior draws of every row: :math:`k`, then the support, then a Dirichlet on it.

    Parameters
    ----------
    counts : array_like of shape (R, S)
    pi : array_like of shape (S,)
    beta : float
    n_draws : int
        M.
    rng : numpy.random.Generator or seed

    Returns
    -------
    ndarray of shape (M, R, S)
        Every row of every draw sums to one and is zero off its drawn support.
    """
    gen = as_generator(rng)
    M = check_int(n_draws, "n_draws", low=1)
    n = np.asarray(counts, dtype=np.float64)
    if n.ndim != 2:
        raise ValueError(f"counts: expected shape (R, S), got {n.shape}")
    b = _check_beta(beta)
    R, S = n.shape
    post = np.tile(support_size_posterior(n, pi, b), (M, 1))           # (M R, K)
    cdf = np.cumsum(post, axis=-1)
    nn = np.tile(n, (M, 1))
    seen = nn > 0
    u = gen.random((M * R, 1)) * cdf[:, -1:]
    k = np.minimum((cdf <= u).sum(axis=-1), S - 1) + 1                # support sizes
    keys = gen.random((M * R, S))
    keys[seen] = -1.0                                                   # the seen are in
    rank = np.argsort(np.argsort(keys, axis=-1), axis=-1)
    inside = rank < k[:, None]
    g = np.where(inside, gen.standard_gamma(np.where(inside, nn + b, 1.0)), 0.0)
    z = g.sum(axis=-1, keepdims=True)
    bad = ~(z[:, 0] > 0)                    # all Gamma draws underflowed (tiny beta): one-hot
    if bad.any():
        pick = np.argmax(np.where(inside[bad], gen.random((int(bad.sum()), S)), -1.0), -1)
        g[bad] = 0.0
        g[np.flatnonzero(bad), pick] = 1.0
        z[bad] = 1.0
    out = (g / z).reshape(M, R, S)
    return out


class SupportFit:
    """The pooled hyper-parameters of the sparse-support prior (:func:`fit_support`).

    Attributes
    ----------
    pi : ndarray of shape (S,)
        Prior weights of the support sizes 1..S.
    beta : float
        The Dirichlet concentration on a support.
    log_evidence : float
        :func:`support_log_evidence` of the counts at ``(pi, beta)``.
    """

    def __init__(self, pi: FloatArray, beta: float, log_evidence: float) -> None:
        self.pi = pi
        self.beta = beta
        self.log_evidence = log_evidence


def _em_pi(L: FloatArray, pi: FloatArray, iters: int, w: FloatArray) -> tuple[FloatArray, float]:
    """EM for the support-size weights given the row log likelihoods (rows with data), (R, S);
    ``w`` (R,): how many rows each row of ``L`` stands for (:func:`_grouped_rows`).
    """
    S = L.shape[-1]
    top = L.max(axis=-1, keepdims=True)
    lik = np.exp(L - top)                                               # (R, K)
    p = pi
    ev = -np.inf
    for _ in range(iters):
        joint = lik * p[None, :]
        z = joint.sum(axis=-1, keepdims=True)
        ev_new = float(w @ (np.log(z[:, 0]) + top[:, 0]))
        # MAP under a Dirichlet with total pseudo-count 1 spread over the sizes (no size
        # ever gets probability 0: a row may later show more distinct states than any so far)
        p = (w @ (joint / z) + 1.0 / S) / (w.sum() + 1.0)
        if ev_new - ev < 1e-4:                          # nats: the weights have settled
            break
        ev = ev_new
    joint = lik * p[None, :]
    return p, float(w @ (np.log(joint.sum(axis=-1)) + top[:, 0]))


def _grouped_rows(n: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The distinct (total, distinct next states) of rows with data ``n`` (R, S): N and m of
    every group, (G, 1) each, and how many rows it holds, (G,). A row's likelihood of a support
    size depends on it only through them (:func:`_size_log_terms`), so the EM of
    :func:`fit_support` runs over the groups (tens) instead of the rows (up to S A).
    """
    keys = np.stack([n.sum(axis=-1), (n > 0).sum(axis=-1)], axis=1)
    groups, size = np.unique(keys, axis=0, return_counts=True)
    return groups[:, :1], groups[:, 1:], size.astype(np.float64)


def fit_support(counts: Any, betas: Any = BETAS, iters: int = 200,
                start: SupportFit | None = None) -> SupportFit:
    r"""Empirical-Bayes hyper-parameters of the sparse-support prior from pooled rows.

    For every :math:`\beta` of the lattice the support-size prior :math:`\pi` is fitted by EM
    (the maximum of the pooled evidence, with a Dirichlet pseudo-count of :math:`1 / S` per
    size so that no size has probability 0); the :math:`\beta` of the largest evidence is kept.

    Parameters
    ----------
    counts : array_like of shape (..., S)
        Next-state counts of every (state, action) pair, pooled.
    betas : array_like of shape (L,), default=:data:`BETAS`
        Positive candidate concentrations.
    iters : int, default=200
        At most this many EM steps per concentration.
    start : SupportFit, optional
        A previous fit (of fewer data): EM starts from its :math:`\pi`, and the lattice is
        searched from its :math:`\beta` to the nearest local maximum of the evidence (a
        refit after a few more observations evaluates about three concentrations, not all).

    Returns
    -------
    SupportFit
        Without data: :math:`\pi` uniform over the sizes, :math:`\beta = 1`.
    """
    n = _rows(counts)
    S = n.shape[-1]
    bs = np.atleast_1d(np.asarray(betas, dtype=np.float64))
    if bs.ndim != 1 or bs.size == 0 or not np.all(np.isfinite(bs) & (bs > 0)):
        raise ValueError("betas: expected a non-empty 1-D array of positive finite numbers")
    n = n[n.sum(axis=-1) > 0]
    if n.shape[0] == 0:
        return SupportFit(np.full(S, 1.0 / S), 1.0, 0.0)
    pi = np.full(S, 1.0 / S) if start is None else _check_pi(start.pi, S)
    memo: dict[int, SupportFit] = {}

    N, m, size = _grouped_rows(n)
    seen = n[n > 0]

    def at(i: int) -> SupportFit:
        if i not in memo:
            b = float(bs[i])
            p, ev = _em_pi(_size_log_terms(N, m, S, b), pi, int(iters), size)
            own = float(np.sum(gammaln(seen + b) - gammaln(b)))   # the same at every size
            memo[i] = SupportFit(p, b, ev + own)
        return memo[i]

    if start is None:
        return max((at(i) for i in range(bs.size)), key=lambda f: f.log_evidence)
    i = int(np.argmin(np.abs(np.log(bs) - np.log(start.beta))))
    while True:                                         # hill-climb on the lattice
        best = max((at(j) for j in (i, i - 1, i + 1) if 0 <= j < bs.size),   # ties: stay
                   key=lambda f: f.log_evidence)
        j = int(np.flatnonzero(bs == best.beta)[0])
        if j == i:
            return best
        i = j


class SupportTransitionModel(_TransitionBelief):
    r"""The sparse-support belief: every pair a few next states, sizes learned from all pairs.

    The prior of :mod:`._support` (support size, then support, then a Dirichlet on it) with its
    hyper-parameters (:math:`\pi`, :math:`\beta`) refitted to the pooled counts
    (:func:`fit_support`) whenever the data change.

    Parameters
    ----------
    n_states : int
        S.
    n_actions : int
        A.

    Attributes
    ----------
    fit_ : SupportFit
        The current hyper-parameters (after :meth:`mean` or :meth:`sample_many`).
    """

    def __init__(self, n_states: int, n_actions: int) -> None:
        super().__init__(n_states, n_actions, sparse=False)
        self._fitted_version = -1
        self.fit_ = SupportFit(np.full(self.n_states, 1.0 / self.n_states), 1.0, 0.0)

    def _refit(self) -> SupportFit:
        if self._fitted_version != self._version:
            self.fit_ = fit_support(self._counts, start=None if self._fitted_version < 0
                                    else self.fit_)
            self._fitted_version = self._version
        return self.fit_

    def mean(self) -> FloatArray:
        """Posterior mean, ndarray of shape (S, A, S)."""
        f = self._refit()
        return support_mean(self._counts, f.pi, f.beta)

    def hellinger_estimate(self, *, rng: SeedLike = None) -> FloatArray:
        r"""The Bayes estimate under the squared Hellinger loss (closed form,
        :func:`support_hellinger_estimate`), ndarray of shape (S, A, S); ``rng`` is ignored.
        """
        f = self._refit()
        return support_hellinger_estimate(self._counts, f.pi, f.beta)

    def sample_many(self, n: int, *, rng: SeedLike) -> FloatArray:
        """``n`` posterior draws, ndarray of shape (n, S, A, S)."""
        f = self._refit()
        S, A = self.n_states, self.n_actions
        d = support_draws(self._counts.reshape(S * A, S), f.pi, f.beta, _check_n(n), rng=rng)
        return d.reshape(-1, S, A, S)
