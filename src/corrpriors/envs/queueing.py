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
rate 2, which made the table at :math:`10^5` states 2.5 times as large: 4.9e8 entries, not 2.0e8).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.stats import poisson

from .._memory import check_memory
from .._random import as_generator
from .._validation import check_bool, check_index_array, check_int, check_real
from ..mdp._sparse import CHUNK_ENTRIES, SparseTransitions, dense_nbytes, prefer_sparse
from ..mdp.tabular import TabularMDP


def _check_buffers(buffers: Any) -> tuple[int, int]:
    try:
        b1, b2 = buffers
    except (TypeError, ValueError):
        raise ValueError(f"buffers: expected (B1, B2), got {buffers!r}") from None
    try:
        return check_int(b1, "buffers", 0), check_int(b2, "buffers", 0)   # True is not 1
    except ValueError:
        raise ValueError(f"buffers: expected non-negative integers (B1, B2), got {buffers!r}") from None


def _check_rate(x: Any, name: str) -> float:
    """``x`` as a finite non-negative rate (``True`` and ``'1'`` are not rates)."""
    return check_real(x, name, 0.0, expected="a finite non-negative rate")


def _check_rates(arrival_rate: Any, service_rates: Any) -> tuple[float, float, float]:
    """``arrival_rate`` and the two ``service_rates`` as finite non-negative rates."""
    lam1 = _check_rate(arrival_rate, "arrival_rate")
    try:
        given = list(service_rates)
    except TypeError:
        given = []
    if len(given) != 2:
        raise ValueError(f"service_rates: expected two rates, got {service_rates!r}")
    beta1, beta2 = (_check_rate(r, "service_rates") for r in given)
    return lam1, beta1, beta2


def _cut_off(rate: float, tail_mass: float, largest: float = np.inf) -> int:
    """The smallest Q >= ceil(rate) with P(q > Q) <= tail_mass, q ~ Poisson(rate) (0 at rate 0):
    the first Q that stops ``while poisson.sf(Q, rate) > tail_mass: Q += 1``, searched in
    growing vectorised steps; ``largest + 1`` if it is beyond ``largest``.
    """
    if rate == 0.0:
        return 0
    if np.ceil(rate) > largest:
        return int(largest) + 1
    Q, step = int(np.ceil(rate)), 64
    while Q <= largest:
        k = np.arange(Q, int(min(Q + step, largest + 1)))
        stop = np.flatnonzero(~(poisson.sf(k, rate) > tail_mass))
        if stop.size:
            return Q + int(stop[0])
        Q, step = Q + k.size, 2 * step
    return int(largest) + 1


def _truncated_pmf(rate: float, tail_mass: float, largest: float = np.inf) -> np.ndarray:
    """Poisson pmf on 0..Q with the tail P(q > Q) <= tail_mass folded into Q (:func:`_cut_off`);
    only 0..largest, unfolded, if Q is beyond ``largest`` (the values that can be used).
    """
    if rate == 0.0:
        return np.ones(1)
    Q = _cut_off(rate, tail_mass, largest)
    if Q > largest:
        return poisson.pmf(np.arange(int(largest) + 1), rate)
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


def _classes(top: int, lo: int, hi: int, groups: bool = False) -> Any:
    """The values 0..top as representatives and how many values each stands for: the values
    in [lo, hi] are represented by lo, the others by themselves.

    Returns (values, multiplicities), or with ``groups`` a list of such pairs whose values are
    each one range of consecutive values (below lo, lo, above hi).
    """
    if lo > hi:
        parts = [np.arange(top + 1)]
    else:
        parts = [np.arange(lo), np.array([lo]), np.arange(hi + 1, top + 1)]
    mults = [np.ones(p.size, dtype=np.int64) for p in parts]
    if lo <= hi:
        mults[1][0] = hi - lo + 1
    if groups:
        return [(p, m) for p, m in zip(parts, mults) if p.size]
    return np.concatenate(parts), np.concatenate(mults)


class _Network:
    """The rows of the transition table: the buffers and the truncated pmfs of q1, and per
    action of q2 and q3 (:func:`_truncated_pmf`).
    """

    def __init__(self, B1: int, B2: int, arrival_rate: float, rates: tuple[tuple[float, float], ...],
                 capped: bool, tail_mass: float) -> None:
        self.B1, self.B2, self.rates, self.capped = B1, B2, rates, capped
        self.p1 = _truncated_pmf(arrival_rate, tail_mass)
        self.pmfs = [_truncated_pmf(r2, tail_mass) for r2, _ in rates]
        # q3 beyond the largest queue 2 (B2 + q2) is never used: a huge rate empties queue 2
        self.p3 = [_truncated_pmf(r3, tail_mass, B2 + p2.size - 1) for p2, (_, r3) in zip(self.pmfs, rates)]
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

    def entry_count(self) -> int:
        """The number of non-zeros of the table, from the rows of a few states.

        A state whose b1 lies in [Q2, B1 - Q1] (no clipping of queue 1, nor of the capped batch)
        has the row of b1 = Q2 moved by b1 - Q2 (same outcomes, sums and zeros); likewise for b2
        in [Q3 + 1, B2 - Q2 - 1] (no boundary of queue 2 reached). So the rows of those two
        representatives and of the states near the buffers' ends, times how many states each
        stands for, count every entry (Q1, Q2, Q3: the cut-offs, the largest over the actions).
        """
        q2 = max(p.size for p in self.pmfs) - 1
        b1, b1_mult = _classes(self.B1, q2, self.B1 - (self.p1.size - 1))
        total = 0
        for b2, b2_mult in _classes(self.B2, max(self.reach) + 1, self.B2 - q2 - 1, groups=True):
            ids = (b1[:, None] * (self.B2 + 1) + b2[None, :]).ravel()
            mult = (b1_mult[:, None] * b2_mult[None, :]).ravel()
            n = max(1, CHUNK_ENTRIES // self.per_state())
            for lo in range(0, ids.size, n):
                lengths = self.rows(ids[lo:lo + n])[0]
                total += int(((lengths[0::2] + lengths[1::2]) * mult[lo:lo + n]).sum())
        return total

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


def _transition_table(net: _Network, sparse: bool, n_entries: int) -> np.ndarray | SparseTransitions:
    """The table from its rows, a block of states at a time, written into CSR arrays of the
    counted size (dense: their ``toarray``).
    """
    S = (net.B1 + 1) * (net.B2 + 1)
    data = np.empty(n_entries)
    indices = np.empty(n_entries, dtype=np.int32 if S < 2**31 else np.int64)   # columns < S
    indptr = np.zeros(2 * S + 1, dtype=np.int64)
    filled = 0
    for ids in _state_blocks(net.B1, net.B2, net.per_state()):     # consecutive states
        lengths, cols, vals = net.rows(ids)
        end = filled + cols.size
        if end > data.size:           # more than counted (entry_count is exact): make room
            data = np.concatenate([data[:filled], np.empty(end - filled)])
            indices = np.concatenate([indices[:filled], np.empty(end - filled, dtype=indices.dtype)])
        data[filled:end], indices[filled:end] = vals, cols
        indptr[2 * ids[0] + 1:2 * ids[-1] + 3] = filled + np.cumsum(lengths)
        filled = end
    indptr = indptr.astype(indices.dtype if filled < 2**31 else np.int64)
    M = sp.csr_array((data[:filled], indices[:filled], indptr), shape=(2 * S, S))
    if not sparse:
        return M.toarray().reshape(S, 2, S)
    return SparseTransitions(M, copy=False)


#: Bytes per entry of the finished table: the probability (8), its column index (4, or 8 from
#: 2**31 entries or states) and the row-sum check's flag (1).
ENTRY_BYTES = 13

#: Bytes per enumerated outcome (q1, q2, b2') of a block of states while its rows are summed
#: (tracemalloc traced 40-88 beyond the table, buffers (31, 31) to (315, 315), (3000, 0) and
#: (0, 3000), rates up to 2000); a block holds about
#: :data:`~corrpriors.mdp._sparse.CHUNK_ENTRIES` outcomes, or one state's.
OUTCOME_BYTES = 120


def _check_rates_size(arrival_rate: float, rates: tuple[tuple[float, float], ...], B2: int) -> None:
    """Refuse, before the Poisson cut-offs are searched, rates whose outcomes per state cannot
    fit: each cut-off is at least the rate, so one state enumerates at least
    (ceil(rate_1) + 1) (ceil(rate_2) + 1) (ceil(rate_3) + 1) outcomes per action.
    """
    per_state = sum((np.ceil(arrival_rate) + 1) * (np.ceil(r2) + 1) * min(B2 + 1, np.ceil(r3) + 1)
                    for r2, r3 in rates)
    check_memory(OUTCOME_BYTES * per_state,
                 f"arrival_rate, service_rates: the queueing network's rates ({arrival_rate:g}; "
                 f"{rates[0][0]:g}, {rates[1][1]:g}) give at least {per_state:.3g} Poisson outcomes "
                 f"(q1, q2, q3) per state, and summing one state's",
                 "use smaller rates (the cut-offs of the Poisson sums grow with them)")


def _check_table_size(B1: int, B2: int, n_entries: int | None, per_state: int | None,
                      sparse: bool) -> None:
    """Refuse a table that cannot fit, before building it: with ``n_entries`` None, the least
    any table of these buffers needs (one entry per (state, action)); else the counted entries
    plus a block's outcomes (and the dense (S, 2, S) array when one is asked for).
    """
    S = (B1 + 1) * (B2 + 1)
    n = 2 * S if n_entries is None else n_entries
    need = ENTRY_BYTES * float(n) + 8.0 * (2 * S + 1)
    if per_state is not None:
        need += OUTCOME_BYTES * float(max(CHUNK_ENTRIES, per_state))
    if not sparse:
        check_memory(need + dense_nbytes(S, 2),
                     f"sparse: the dense (S, 2, S) table of the queueing network with buffers "
                     f"({B1}, {B2}) ({S:,} states)", "pass sparse=None (automatic) or sparse=True")
    listed = ("at least one transition probability per (state, action)" if n_entries is None else
              f"{n_entries:,} transition probabilities above the Poisson cut-offs, "
              f"{n_entries / (2 * S):.0f} per (state, action)")
    check_memory(need, f"buffers: the queueing network with buffers ({B1}, {B2}) ({S:,} states, 2 actions, "
                       f"{listed})", "use smaller buffers")


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
        Poisson tail mass beyond the summation cut-offs (folded into the cut-off), in [0, 1).
    sparse : bool or None
        A :class:`~corrpriors.mdp.SparseTransitions` (True), a dense array (False), or by size
        (None: sparse above :data:`~corrpriors.mdp.DENSE_LIMIT_BYTES`). The numbers are the
        same bit for bit; the table is built in blocks of states (bounded temporaries).

    Returns
    -------
    ndarray of shape (S, 2, S) or SparseTransitions
        S = (B1 + 1)(B2 + 1).

    Raises
    ------
    corrpriors._memory.MemoryEstimateError
        Before anything is built, when the table would not fit in the memory this process may
        use (:func:`corrpriors._memory.memory_budget`), naming ``buffers`` (the entries are
        counted exactly first: about 1,000 per (state, action) at the default rates, 196
        million at :math:`10^5` states, 2.4 GiB), ``arrival_rate, service_rates`` (one state's
        Poisson outcomes) or ``sparse`` (a dense table asked for).
    """
    B1, B2 = _check_buffers(buffers)
    lam1, beta1, beta2 = _check_rates(arrival_rate, service_rates)
    capped = check_bool(capped, "capped")   # "no" is not False
    tail_mass = check_real(tail_mass, "tail_mass", 0.0, 1.0, closed="left")
    S = (B1 + 1) * (B2 + 1)
    as_sparse = prefer_sparse(S, 2, sparse)
    rates = ((beta1, 0.0), (0.0, beta2))
    _check_rates_size(lam1, rates, B2)
    _check_table_size(B1, B2, None, None, as_sparse)
    net = _Network(B1, B2, lam1, rates, capped, tail_mass)
    n_entries = net.entry_count()
    _check_table_size(B1, B2, n_entries, net.per_state(), as_sparse)
    return _transition_table(net, as_sparse, n_entries)


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
        :data:`~corrpriors.mdp.DENSE_LIMIT_BYTES`, i.e. beyond about 2,050 states). A network
        whose table cannot fit in memory is refused before it is built, naming ``buffers``
        (:math:`10^5` states: 196 million entries, 2.4 GiB, about 15 CPU seconds).

    Returns
    -------
    TabularMDP
        ``rewards`` (S,) = -(b1 + b2); ``shape`` = (B1 + 1, B2 + 1) so the state space plots
        as an image with b1 down the rows and b2 along the columns.
    """
    B1, B2 = _check_buffers(buffers)
    normalize_coordinates = check_bool(normalize_coordinates, "normalize_coordinates")
    P = queueing_transitions((B1, B2), arrival_rate, service_rates, capped, sparse=sparse)
    coords = np.argwhere(np.ones((B1 + 1, B2 + 1), dtype=bool)).astype(np.float64)
    R = -coords.sum(axis=1)
    if normalize_coordinates:
        coords = coords / np.maximum(np.array([B1, B2], dtype=np.float64), 1.0)
    return TabularMDP(P, R, discount, coordinates=coords, shape=(B1 + 1, B2 + 1),
                      name="QueueingNetwork")


#: Largest rate :func:`simulate_queueing` samples (numpy's Poisson sampler refuses rates near
#: 2**63; a queue's buffer is exhausted long before).
MAX_SIMULATED_RATE = 1e18


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
    B1, B2 = _check_buffers(buffers)
    lam1, beta1, beta2 = _check_rates(arrival_rate, service_rates)
    if max(lam1, beta1, beta2) > MAX_SIMULATED_RATE:
        raise ValueError(f"arrival_rate, service_rates: expected rates at most {MAX_SIMULATED_RATE:g} "
                         f"(numpy's Poisson sampler), got {lam1:g}; ({beta1:g}, {beta2:g})")
    capped = check_bool(capped, "capped")   # "no" is not False
    gen = as_generator(rng)
    n_states = (B1 + 1) * (B2 + 1)
    s = check_index_array(states, "states", n_states, "S")
    a = check_index_array(actions, "actions", 2, "A")
    if a.shape != s.shape:
        raise ValueError(f"states, actions: expected arrays of the same shape, got {s.shape} and {a.shape}")
    s, a = s.ravel(), a.ravel()
    b1, b2 = np.unravel_index(s, (B1 + 1, B2 + 1))
    q1 = gen.poisson(lam1, size=s.size)
    q2 = gen.poisson(beta1 * (a == 0))
    q3 = gen.poisson(beta2 * (a == 1))
    served = np.minimum(q2, b1 + q1) if capped else q2
    nb1 = np.clip(b1 + q1 - q2, 0, B1)
    nb2 = np.clip(b2 + served - q3, 0, B2)
    return np.ravel_multi_index((nb1, nb2), (B1 + 1, B2 + 1))


__all__ = ["queueing_network", "queueing_transitions", "simulate_queueing"]
