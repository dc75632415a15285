r"""The two-queue batch network of the paper's section 4 (queueing-network modelling).

State :math:`\mathbf b = (b_1, b_2) \in \{0..B_1\} \times \{0..B_2\}`, indexed as
``np.ravel_multi_index((b1, b2), (B1 + 1, B2 + 1))`` (so ``state = b1 * (B2 + 1) + b2``).
Action 0 serves queue 1, action 1 serves queue 2. One step draws

.. math::

    q_1 \sim \mathrm{Poisson}(\vartheta_1), \quad
    q_2 \sim \mathrm{Poisson}(\beta_1 \mathbb 1[a = 0]), \quad
    q_3 \sim \mathrm{Poisson}(\beta_2 \mathbb 1[a = 1]),

independently, and moves to

.. math::

    \mathbf b' = \big[(b_1 + q_1 - q_2)_0^{B_1},\; (b_2 + q_2 - q_3)_0^{B_2}\big],
    \qquad (x)_0^B = \max(0, \min(B, x)),

exactly as the paper writes it. Note that in this formula the served batch :math:`q_2`
enters queue 2 in full even when queue 1 holds fewer than :math:`q_2` packets (it is not
capped by :math:`b_1 + q_1`). ``capped=True`` instead moves only
:math:`\min(q_2,\, b_1 + q_1)` packets (the content of queue 1 after the arrivals, before
buffer-1 truncation) to queue 2; :math:`b_1'` is the same in both variants. The reward is
:math:`R(\mathbf b) = -(b_1 + b_2)`, the discount 0.9.

The transition matrix is computed from the Poisson pmfs, not by sampling:
:math:`P(\mathbf b' \mid \mathbf b, a) = \sum_{q_1, q_2} p_1(q_1) p_2(q_2)\,
\mathbb 1[b_1' = (b_1 + q_1 - q_2)_0^{B_1}]\, P\big((y - q_3)_0^{B_2} = b_2'\big)` with
:math:`y = b_2 + \text{served}`, where the last factor is closed form
(pmf in the interior, cdf / survival function at the two boundaries, i.e. the truncation
folds the Poisson tails into the boundary states). Each of :math:`q_1, q_2, q_3` runs up to a
cut-off whose remaining Poisson tail mass is below ``tail_mass`` (1e-30); that tail is folded
into the cut-off value, so rows sum to one and entries are exact to ~1e-30. The cut-off of
:math:`q_3` shows only when :math:`B_2` exceeds it (34 at rate 2): a row then lists the
next :math:`b_2'` within the cut-off below :math:`b_2`, not every :math:`b_2' \le b_2` down to
where the pmf underflows (probabilities down to 1e-308, up to 206 values per :math:`b_1'` at
rate 2, which made the table at :math:`10^5` states 2.4 times as large).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.stats import poisson

from .._random import as_generator
from ..mdp._sparse import CHUNK_ENTRIES, SparseTransitions, prefer_sparse
from ..mdp.tabular import TabularMDP


def _check_buffers(buffers: Any) -> tuple[int, int]:
    try:
        b1, b2 = (int(b) for b in buffers)
    except (TypeError, ValueError):
        raise ValueError(f"buffers: expected (B1, B2), got {buffers!r}") from None
    if b1 < 0 or b2 < 0 or (b1, b2) != tuple(buffers):
        raise ValueError(f"buffers: expected non-negative integers (B1, B2), got {buffers!r}")
    return b1, b2


def _check_rate(x: Any, name: str) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a non-negative rate, got {x!r}") from None
    if not np.isfinite(v) or v < 0:
        raise ValueError(f"{name}: expected a finite non-negative rate, got {x!r}")
    return v


def _truncated_pmf(rate: float, tail_mass: float) -> np.ndarray:
    """Poisson pmf on 0..Q with the tail P(q > Q) < tail_mass folded into Q."""
    if rate == 0.0:
        return np.ones(1)
    Q = int(np.ceil(rate))
    while poisson.sf(Q, rate) > tail_mass:
        Q += 1
    pmf = poisson.pmf(np.arange(Q + 1), rate)
    pmf[-1] += poisson.sf(Q, rate)
    return pmf


def _b2_rows(ys: np.ndarray, rate: float, upper: int,
             pmf: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The non-zeros of P((y - q)_0^upper = m), q ~ Poisson(rate), for each y of ``ys``.

    Row y lists its m in increasing order: m = 0 collects q >= y (survival function), m = upper
    collects q <= y - upper (cdf), the m in between take ``pmf`` (:func:`_truncated_pmf`: q runs
    up to a cut-off Q that holds the tail beyond it, so the m below y - Q are not reached).

    Returns
    -------
    ptr : ndarray of shape (len(ys) + 1,)
        Row ``ys[i]`` is ``m[ptr[i]:ptr[i + 1]]``, ``p[ptr[i]:ptr[i + 1]]``.
    m, p : ndarray
        Next b2 and its probability.
    """
    if upper == 0:
        return np.arange(ys.size + 1), np.zeros(ys.size, dtype=np.int64), np.ones(ys.size)
    k = np.arange(pmf.size - 1, -1, -1)                   # columns in increasing m = y - k
    m = np.concatenate([ys[:, None] - k[None, :], np.full((ys.size, 1), upper)], axis=1)
    p = np.zeros(m.shape)
    inner = (m[:, :-1] >= 1) & (m[:, :-1] < upper)
    p[:, :-1] = np.where(inner, pmf[k][None, :], 0.0)
    at_zero = m[:, :-1] == 0                              # in the grid where y <= Q
    p[:, :-1][at_zero] = np.where(ys > 0, poisson.sf(ys - 1, rate), 1.0)[at_zero.any(axis=1)]
    p[:, -1] = np.where(ys >= upper, poisson.cdf(ys - upper, rate), 0.0)
    keep = p != 0
    ptr = np.concatenate([[0], np.cumsum(keep.sum(axis=1))])
    return ptr, m[keep], p[keep]


def _state_blocks(B1: int, B2: int, per_state: int) -> list[np.ndarray]:
    """The states in blocks of at most about ``CHUNK_ENTRIES // per_state``: whole b1 rows when
    a row fits, else pieces of one row (so the b2 values of a block form one short range).
    """
    n = max(1, CHUNK_ENTRIES // per_state)
    width = B2 + 1
    if n >= width:
        rows = n // width
        return [np.arange(lo * width, min(B1 + 1, lo + rows) * width) for lo in range(0, B1 + 1, rows)]
    return [b1 * width + np.arange(lo, min(width, lo + n)) for b1 in range(B1 + 1) for lo in range(0, width, n)]


class _Network:
    """The rows of the transition table: the buffers and the truncated pmfs of q1, and per
    action of q2 and q3 (:func:`_truncated_pmf`).
    """

    def __init__(self, B1: int, B2: int, arrival_rate: float, rates: tuple[tuple[float, float], ...],
                 capped: bool, tail_mass: float) -> None:
        self.B1, self.B2, self.rates, self.capped = B1, B2, rates, capped
        self.p1 = _truncated_pmf(arrival_rate, tail_mass)
        self.pmfs = [_truncated_pmf(r2, tail_mass) for r2, _ in rates]
        self.p3 = [_truncated_pmf(r3, tail_mass) for _, r3 in rates]
        self.reach = [p3.size - 1 for p3 in self.p3]

    def _window(self, a: int) -> tuple[int, int]:
        """Next states (b1', b2') one state can reach under action a lie in a w1 x w2 window."""
        q2 = self.pmfs[a].size - 1
        return (min(self.B1 + 1, self.p1.size + q2), min(self.B2 + 1, self.reach[a] + q2 + 1))

    def per_state(self) -> int:
        """A bound on the outcomes and on the accumulator cells of one state (both actions)."""
        out = 0
        for a, p2 in enumerate(self.pmfs):
            w1, w2 = self._window(a)
            outcomes = self.p1.size * p2.size * min(self.B2 + 1, self.reach[a] + 1)
            out += max(outcomes, w1 * w2)
        return out

    def rows(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The rows (s, a) of the states ``ids`` (whose b2 values form one range): the entries
        of each row (``2 * len(ids)``, row ``s * 2 + a``), then their columns and probabilities
        in row-major order.

        Each cell sums its (q1, q2, b2') outcomes in the order of the dense construction's
        ``bincount`` (q1, then q2, then b2'), leaving out the outcomes of probability zero (they
        add nothing), so every value is the dense one bit for bit.
        """
        B1, B2, p1 = self.B1, self.B2, self.p1
        b1, b2 = np.unravel_index(ids, (B1 + 1, B2 + 1))
        n = ids.size
        per_action = []
        for a, p2 in enumerate(self.pmfs):
            q1 = np.arange(p1.size)[None, :, None]
            q2 = np.arange(p2.size)[None, None, :]
            w = np.broadcast_to(p1[None, :, None] * p2[None, None, :], (n, p1.size, p2.size))
            x1 = b1[:, None, None] + q1                       # queue 1 after arrivals
            nb1 = np.clip(x1 - q2, 0, B1)                     # (n, Q1, Q2)
            served = np.minimum(q2, x1) if self.capped else q2 + 0 * x1
            y = b2[:, None, None] + served                    # queue 2 before service
            y0 = int(b2.min())
            ptr, m, p = _b2_rows(np.arange(y0, int(b2.max()) + p2.size), self.rates[a][1], B2,
                                 self.p3[a])
            # accumulate in a w1 x w2 window of next states per state, row-major: cell order
            # is column order, and no sort is needed
            w1, w2 = self._window(a)
            lo1 = np.maximum(b1 - (p2.size - 1), 0)
            lo2 = np.maximum(b2 - self.reach[a], 0)
            local = (np.arange(n)[:, None, None] * (w1 * w2) + (nb1 - lo1[:, None, None]) * w2
                     - lo2[:, None, None]).ravel()
            yi = (y - y0).ravel()
            counts = np.diff(ptr)[yi]                         # b2' outcomes of each (q1, q2)
            pos = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts - ptr[yi], counts)
            key = np.repeat(local, counts) + m[pos]
            acc = np.bincount(key, weights=np.repeat(w.ravel(), counts) * p[pos], minlength=n * w1 * w2)
            nz = np.flatnonzero(acc)
            s_loc, cell = np.divmod(nz, w1 * w2)
            d1, d2 = np.divmod(cell, w2)
            cols = (lo1[s_loc] + d1) * (B2 + 1) + lo2[s_loc] + d2
            per_action.append((np.bincount(s_loc, minlength=n), cols, acc[nz]))
        lengths = np.stack([count for count, _, _ in per_action], axis=1).ravel()
        starts = np.cumsum(lengths) - lengths
        cols = np.empty(int(lengths.sum()), dtype=np.int64)
        vals = np.empty(cols.size)
        for a, (count, c, v) in enumerate(per_action):       # interleave the actions' rows
            first = np.cumsum(count) - count
            s_loc = np.repeat(np.arange(n), count)
            at = starts[s_loc * 2 + a] + np.arange(c.size) - first[s_loc]
            cols[at], vals[at] = c, v
        return lengths, cols, vals


def _transition_table(net: _Network, sparse: bool) -> np.ndarray | SparseTransitions:
    """The table, a block of states at a time, as CSR arrays (dense: their ``toarray``)."""
    S = (net.B1 + 1) * (net.B2 + 1)
    parts = [net.rows(ids) for ids in _state_blocks(net.B1, net.B2, net.per_state())]
    lengths = np.concatenate([x[0] for x in parts])
    index_type = np.int32 if S < 2**31 and lengths.sum() < 2**31 else np.int64
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(index_type)
    indices = np.concatenate([x[1] for x in parts]).astype(index_type)
    data = np.concatenate([x[2] for x in parts])
    M = sp.csr_array((data, indices, indptr), shape=(2 * S, S))
    if not sparse:
        return M.toarray().reshape(S, 2, S)
    return SparseTransitions(M, copy=False)


def queueing_transitions(buffers: tuple[int, int] = (10, 10), arrival_rate: float = 1.0,
                         service_rates: tuple[float, float] = (3.0, 2.0), capped: bool = False,
                         tail_mass: float = 1e-30, *,
                         sparse: bool | None = None) -> np.ndarray | SparseTransitions:
    r"""Exact transition tensor of the queueing network (see the module docstring).

    Parameters
    ----------
    buffers : tuple of int
        (B1, B2).
    arrival_rate : float
        :math:`\vartheta_1`.
    service_rates : tuple of float
        (:math:`\beta_1`, :math:`\beta_2`): mean batch served from queue 1 (action 0) and
        from queue 2 (action 1).
    capped : bool
        Cap the batch moved to queue 2 at :math:`b_1 + q_1`.
    tail_mass : float
        Poisson tail mass beyond the summation cut-off (folded into the cut-off).
    sparse : bool or None
        A :class:`~corrpriors.mdp.SparseTransitions` (True), a dense array (False), or by size
        (None: sparse above :data:`~corrpriors.mdp.DENSE_LIMIT_BYTES`). The numbers are the
        same bit for bit; the sparse table is built in blocks of states (bounded temporaries).

    Returns
    -------
    ndarray of shape (S, 2, S) or SparseTransitions
        S = (B1 + 1)(B2 + 1).
    """
    B1, B2 = _check_buffers(buffers)
    lam1 = _check_rate(arrival_rate, "arrival_rate")
    try:
        beta1, beta2 = (_check_rate(r, "service_rates") for r in service_rates)
    except TypeError:
        raise ValueError(f"service_rates: expected two rates, got {service_rates!r}") from None
    S = (B1 + 1) * (B2 + 1)
    net = _Network(B1, B2, lam1, ((beta1, 0.0), (0.0, beta2)), capped, tail_mass)
    return _transition_table(net, prefer_sparse(S, 2, sparse))


def queueing_network(buffers: tuple[int, int] = (10, 10), arrival_rate: float = 1.0,
                     service_rates: tuple[float, float] = (3.0, 2.0), discount: float = 0.9,
                     capped: bool = False, normalize_coordinates: bool = False, *,
                     sparse: bool | None = None) -> TabularMDP:
    """Build the paper's two-queue batch network as a :class:`~corrpriors.mdp.TabularMDP`.

    Parameters
    ----------
    buffers : tuple of int
        (B1, B2); default (10, 10), S = 121.
    arrival_rate : float
        Mean arrivals per step at queue 1 (default 1).
    service_rates : tuple of float
        Mean batch sizes (3, 2) when serving queue 1 (action 0) / queue 2 (action 1).
    discount : float
        Default 0.9.
    capped : bool
        See the module docstring (default False: the paper's formula).
    normalize_coordinates : bool
        Coordinates (b1 / B1, b2 / B2) in [0, 1] instead of (b1, b2).
    sparse : bool or None
        As in :func:`queueing_transitions` (default: sparse above
        :data:`~corrpriors.mdp.DENSE_LIMIT_BYTES`, i.e. beyond about 2,050 states).

    Returns
    -------
    TabularMDP
        ``rewards`` (S,) = -(b1 + b2); ``shape`` = (B1 + 1, B2 + 1) so the state space plots
        as an image with b1 down the rows and b2 along the columns.
    """
    B1, B2 = _check_buffers(buffers)
    P = queueing_transitions((B1, B2), arrival_rate, service_rates, capped, sparse=sparse)
    coords = np.argwhere(np.ones((B1 + 1, B2 + 1), dtype=bool)).astype(np.float64)
    R = -coords.sum(axis=1)
    if normalize_coordinates:
        coords = coords / np.maximum(np.array([B1, B2], dtype=np.float64), 1.0)
    return TabularMDP(P, R, discount, coordinates=coords, shape=(B1 + 1, B2 + 1),
                      name="QueueingNetwork")


def simulate_queueing(states: Any, actions: Any, *, rng: Any, buffers: tuple[int, int] = (10, 10),
                      arrival_rate: float = 1.0, service_rates: tuple[float, float] = (3.0, 2.0),
                      capped: bool = False) -> np.ndarray:
    """Sample next states by simulating the queue dynamics directly (Monte-Carlo oracle).

    Parameters
    ----------
    states, actions : array_like of int, shape (N,)
        Current state indices and actions.
    rng : int, Generator or None
    buffers, arrival_rate, service_rates, capped
        As in :func:`queueing_network`.

    Returns
    -------
    ndarray of shape (N,)
        Next state indices.
    """
    gen = as_generator(rng)
    B1, B2 = _check_buffers(buffers)
    s = np.asarray(states, dtype=np.int64).ravel()
    a = np.broadcast_to(np.asarray(actions, dtype=np.int64).ravel(), s.shape)
    b1, b2 = np.unravel_index(s, (B1 + 1, B2 + 1))
    beta1, beta2 = service_rates
    q1 = gen.poisson(arrival_rate, size=s.size)
    q2 = gen.poisson(beta1 * (a == 0))
    q3 = gen.poisson(beta2 * (a == 1))
    served = np.minimum(q2, b1 + q1) if capped else q2
    nb1 = np.clip(b1 + q1 - q2, 0, B1)
    nb2 = np.clip(b2 + served - q3, 0, B2)
    return np.ravel_multi_index((nb1, nb2), (B1 + 1, B2 + 1))


__all__ = ["queueing_network", "queueing_transitions", "simulate_queueing"]
