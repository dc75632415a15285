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
folds the Poisson tails into the boundary states). The sums over :math:`q_1, q_2` run up
to a cut-off whose remaining Poisson tail mass is below ``tail_mass`` (1e-30); that tail
is folded into the cut-off value, so rows sum to one and entries are exact to ~1e-30.
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


def _clip_out_pmf(y: np.ndarray, rate: float, upper: int) -> np.ndarray:
    """P((y - q)_0^upper = m) for q ~ Poisson(rate); y (...,) integers -> (..., upper + 1)."""
    if upper == 0:
        return np.ones(y.shape + (1,))
    m = np.arange(upper + 1)
    k = y[..., None] - m                                   # q needed to land on m
    out = np.where(k >= 0, poisson.pmf(np.maximum(k, 0), rate), 0.0)
    # m = 0 collects q >= y ; m = upper collects q <= y - upper
    out[..., 0] = np.where(y > 0, poisson.sf(y - 1, rate), 1.0)
    out[..., upper] = np.where(y >= upper, poisson.cdf(y - upper, rate), 0.0)
    return out


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
    p1 = _truncated_pmf(lam1, tail_mass)
    rates = ((beta1, 0.0), (0.0, beta2))
    pmfs = [_truncated_pmf(r2, tail_mass) for r2, _ in rates]
    if prefer_sparse(S, 2, sparse):
        return _sparse_queueing(B1, B2, p1, pmfs, rates, capped)
    P = np.zeros((S, 2, S))
    for a in range(2):
        weights, target = _outcomes(np.arange(S), B1, B2, p1, pmfs[a], rates[a][1], capped)
        flat = (np.arange(S)[:, None] * S + target).ravel()
        P[:, a, :] = np.bincount(flat, weights=weights.ravel(), minlength=S * S).reshape(S, S)
    return P


def _outcomes(states: np.ndarray, B1: int, B2: int, p1: np.ndarray, p2: np.ndarray, r3: float,
              capped: bool) -> tuple[np.ndarray, np.ndarray]:
    """Probability and next state of every (q1, q2, b2') outcome of ``states``: two arrays (n, Q1 * Q2 * (B2 + 1))."""
    b1, b2 = np.unravel_index(states, (B1 + 1, B2 + 1))
    q1 = np.arange(p1.size)[None, :, None]
    q2 = np.arange(p2.size)[None, None, :]
    w = p1[None, :, None] * p2[None, None, :]           # (1, Q1, Q2)
    x1 = b1[:, None, None] + q1                         # queue 1 after arrivals
    nb1 = np.clip(x1 - q2, 0, B1)                       # (n, Q1, Q2)
    served = np.minimum(q2, x1) if capped else q2 + 0 * x1
    y = b2[:, None, None] + served                      # queue 2 before service
    pb2 = _clip_out_pmf(y, r3, B2)                      # (n, Q1, Q2, B2 + 1)
    n = states.size
    weights = (w[..., None] * pb2).reshape(n, -1)
    target = (nb1[..., None] * (B2 + 1) + np.arange(B2 + 1)).reshape(n, -1)
    return weights, target


def _sparse_queueing(B1: int, B2: int, p1: np.ndarray, pmfs: list[np.ndarray],
                     rates: tuple[tuple[float, float], ...], capped: bool) -> SparseTransitions:
    """The sparse table, a block of states at a time; each entry sums its outcomes in the dense
    ``bincount``'s order, so the values are the dense ones bit for bit.
    """
    S = (B1 + 1) * (B2 + 1)
    per_state = max(p1.size * p.size for p in pmfs) * (B2 + 1)
    block = max(1, CHUNK_ENTRIES // per_state)
    rows_parts, cols_parts, vals_parts = [], [], []
    for lo in range(0, S, block):
        ids = np.arange(lo, min(S, lo + block))
        for a in range(2):
            weights, target = _outcomes(ids, B1, B2, p1, pmfs[a], rates[a][1], capped)
            keys = ((ids[:, None] - lo) * S + target).ravel()
            uniq, inverse = np.unique(keys, return_inverse=True)
            vals = np.bincount(inverse.ravel(), weights=weights.ravel(), minlength=uniq.size)
            s_loc, cols = np.divmod(uniq, S)
            rows_parts.append((s_loc + lo) * 2 + a)
            cols_parts.append(cols)
            vals_parts.append(vals)
    rows, cols, vals = (np.concatenate(x) for x in (rows_parts, cols_parts, vals_parts))
    nz = vals != 0
    M = sp.csr_array((vals[nz], (rows[nz], cols[nz])), shape=(2 * S, S))
    return SparseTransitions(M, copy=False)


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
