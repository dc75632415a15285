r"""The sparse path of :func:`corrpriors.envs.from_gymnasium`: a toy-text table read in O(listed transitions).

The rules are those of the dense path (:mod:`corrpriors.envs.adapter`), applied to the listed
entries only: probabilities of one (s, a, s') summed in listing order, terminal states from
the ``terminated`` flags, reachability by a breadth-first search on the sparse graph, and the
rewards :math:`r(s, a, s')` of unlisted transitions as a default rule
(:class:`~corrpriors.mdp.SparseTransitionRewards`) instead of a filled (S, A, S) array.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order

from ..mdp._sparse import SparseTransitionRewards, SparseTransitions, absorb_rows
from ..mdp.checks import ROW_ATOL


def _collect(listed: Iterable[tuple[int, int, list]], S: int, A: int) -> dict[str, np.ndarray]:
    """The listed entries merged per (s, a, s'), in (s, a, s') order.

    Returns arrays of shape (L,): ``rows`` (s * A + a), ``cols`` (s'), ``p`` (summed in listing
    order, as the dense ``+=``), ``pr`` (summed p * r), ``ends`` / ``goes_on`` (reached with
    terminated True / False at positive probability). Entries of probability 0 are dropped.
    """
    keys: list[int] = []
    probs: list[float] = []
    rewards: list[float] = []
    done: list[bool] = []
    for s, a, entries in listed:
        base = (s * A + a) * S
        for p, s2, r, d in entries:
            keys.append(base + s2)
            probs.append(p)
            rewards.append(p * r)
            done.append(d)
    k = np.asarray(keys, dtype=np.int64)
    p = np.asarray(probs, dtype=np.float64)
    pr = np.asarray(rewards, dtype=np.float64)
    d = np.asarray(done, dtype=bool)
    uniq, inv = np.unique(k, return_inverse=True)
    inv = inv.ravel()
    out = {"p": np.bincount(inv, weights=p, minlength=uniq.size),
           "pr": np.bincount(inv, weights=pr, minlength=uniq.size),
           "ends": np.bincount(inv, weights=(d & (p > 0)).astype(float), minlength=uniq.size) > 0,
           "goes_on": np.bincount(inv, weights=(~d & (p > 0)).astype(float), minlength=uniq.size) > 0}
    out["rows"], out["cols"] = np.divmod(uniq, S)
    totals = np.bincount(out["rows"], weights=out["p"], minlength=S * A)
    bad = np.flatnonzero(np.abs(totals - 1.0) > ROW_ATOL)
    if bad.size:
        s, a = divmod(int(bad[0]), A)
        raise ValueError(f"env.unwrapped.P[{s}][{a}]: probabilities must sum to 1, they sum to "
                         f"{totals[bad[0]]:.12g}")
    pos = np.asarray(out["p"]) > 0
    return {k: v[pos] for k, v in out.items()}


def _reach(rows: np.ndarray, cols: np.ndarray, A: int, S: int, start: np.ndarray,
           terminal: np.ndarray) -> np.ndarray:
    """Breadth-first search from a super-source linked to ``start``; terminal states have no out-edges."""
    src = rows // A
    live = ~terminal[src]
    first = np.flatnonzero(start)
    i = np.concatenate([src[live], np.full(first.size, S)])
    j = np.concatenate([cols[live], first])
    G = sp.csr_array((np.ones(i.size), (i, j)), shape=(S + 1, S + 1))
    seen = np.zeros(S + 1, bool)
    seen[breadth_first_order(G, S, directed=True, return_predecessors=False)] = True
    return seen[:S]


def reachable_sparse(P: SparseTransitions, start: np.ndarray, terminal: np.ndarray) -> np.ndarray:
    """States reachable from ``start`` without stepping out of a terminal state (sparse table)."""
    M = P.matrix
    rows = np.repeat(np.arange(M.shape[0]), np.diff(M.indptr))
    return _reach(rows, M.indices.astype(np.int64), P.n_actions, P.n_states, start, terminal)


def _terminal(e: dict[str, np.ndarray], S: int, A: int, start: np.ndarray) -> np.ndarray:
    """Terminal states and the check that termination depends on the state reached only."""
    terminal = np.zeros(S, bool)
    terminal[e["cols"][e["ends"]]] = True
    live = _reach(e["rows"], e["cols"], A, S, start, terminal) & ~terminal
    clash = e["goes_on"] & live[e["rows"] // A] & terminal[e["cols"]]
    if clash.any():
        j = int(np.flatnonzero(clash)[0])            # entries are in (s, a, s') order
        s, a = divmod(int(e["rows"][j]), A)
        raise ValueError(f"env.unwrapped.P: state {int(e['cols'][j])} ends the episode on some "
                         f"transitions but not on P[{s}][{a}]; the adapter needs termination to "
                         "depend only on the state reached")
    return terminal


def _rewards(e: dict[str, np.ndarray], S: int, A: int, terminal: np.ndarray) -> SparseTransitionRewards:
    """r(s, a, s'): the listed means, r(s') for unlisted arrivals where the reward is a function of
    the next state, else the (s, a) mean of the listed rewards; 0 from terminal states.
    """
    rows, cols = e["rows"], e["cols"]
    r = e["pr"] / e["p"]
    counts = np.bincount(rows, minlength=S * A)
    fallback = np.bincount(rows, weights=r, minlength=S * A) / np.maximum(counts, 1)
    live = ~terminal[rows // A]
    low = np.full(S, np.inf)
    high = np.full(S, -np.inf)
    np.minimum.at(low, cols[live], r[live])
    np.maximum.at(high, cols[live], r[live])
    entered = np.isfinite(low)
    state_function = bool(np.all(high[entered] - low[entered]
                                 <= 1e-12 * np.maximum(1.0, np.abs(low[entered]))))
    keep = live                                      # terminal rows earn nothing (inert)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows[keep], minlength=S * A))])
    return SparseTransitionRewards(S, A, indptr, cols[keep], r[keep],
                                   arrival=np.where(entered, low, 0.0),
                                   arrival_known=entered if state_function else None,
                                   fallback=fallback.reshape(S, A), inert=terminal)


def sparse_model(listed: Iterable[tuple[int, int, list]], S: int, A: int,
                 start: np.ndarray) -> tuple[SparseTransitions, SparseTransitionRewards, np.ndarray]:
    """Transitions, transition rewards and terminal mask of a toy-text table, all sparse.

    Parameters
    ----------
    listed : iterable of (s, a, entries)
        The validated entries (:func:`corrpriors.envs.adapter._listed`).
    S, A : int
    start : ndarray of bool, shape (S,)
        States an episode can start in.

    Returns
    -------
    (SparseTransitions, SparseTransitionRewards, ndarray of bool of shape (S,))
    """
    e = _collect(listed, S, A)
    terminal = _terminal(e, S, A, start)
    rewards = _rewards(e, S, A, terminal)     # before normalising: pr / p is the listed mean
    totals = np.bincount(e["rows"], weights=e["p"], minlength=S * A)
    data = e["p"] / totals[e["rows"]]        # remove the round-off the check allowed
    indptr = np.concatenate([[0], np.cumsum(np.bincount(e["rows"], minlength=S * A))])
    P: Any = SparseTransitions(sp.csr_array((data, e["cols"], indptr), shape=(S * A, S)), copy=False)
    t = np.flatnonzero(terminal)
    if t.size:
        P = absorb_rows(P, t, t)              # absorbing: P[t, a, t] = 1
    return P, rewards, terminal


__all__ = ["reachable_sparse", "sparse_model"]
