r"""Transition tables without (S, S) arrays: a sparse part plus per-row background profiles.

A posterior mean or draw of :math:`P(s' \mid s, a)` of a belief with a category map puts the
window categories on at most K next states per (s, a), the observed far jumps on a few more,
and spreads the rest of the "other" mass (the Dirichlet pseudo-counts) over *every* state
outside the window of ``s``. :class:`BackgroundTransitions` holds that exactly in O(S A K + S J)
memory:

.. math::

    P[(s, a), s'] = T[(s, a), s'] + \sum_j b_j(s, a)\,
        \frac{u_j(s')\,[s' \notin W(s)]}{\sum_{s'' \notin W(s)} u_j(s'')},

with :math:`T` a sparse (S A, S) table (rows ``s * A + a``), :math:`u_j` a few global
profiles over the states (uniform: the Dirichlet's pseudo-counts; the pooled far-jump
destinations) and :math:`W(s)` the states excluded from the profiles in row ``s`` (its
window). Expectations :math:`\sum_{s'} P[(s, a), s'] V(s')`, single entries and draws of next
states need no (S, S) array.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..._typing import FloatArray, IntArray
from ..._validation import check_index_array
from ...mdp.metrics import operator_hellinger

__all__ = ["BackgroundTransitions"]


@dataclasses.dataclass(frozen=True, eq=False)
class BackgroundTransitions:
    r"""A transition model :math:`P(s' \mid s, a)` as a sparse table plus background profiles.

    Parameters
    ----------
    table : scipy.sparse.csr_array of shape (S A, S)
        :math:`T`; row ``s * A + a``.
    background : ndarray of shape (S A, J)
        :math:`b_j(s, a)`, the mass of row ``(s, a)`` spread by profile ``j``.
    profiles : ndarray of shape (J, S)
        :math:`u_j`, non-negative.
    excluded : scipy.sparse.csr_array of shape (S, S), optional
        Pattern of :math:`W(s)`: the states a profile never reaches from ``s`` (``None``:
        none excluded).
    n_actions : int
        A.

    Attributes
    ----------
    n_states : int
        S.
    shape : tuple
        (S, A, S).
    """

    table: sp.csr_array
    background: np.ndarray
    profiles: np.ndarray
    excluded: sp.csr_array | None
    n_actions: int
    _norm: np.ndarray = dataclasses.field(init=False, repr=False)

    def __post_init__(self) -> None:
        S = int(self.table.shape[1])
        A = int(self.n_actions)
        if self.table.shape != (S * A, S):
            raise ValueError(f"table: expected shape (S A, S) = ({S * A}, {S}), got "
                             f"{self.table.shape}")
        J = self.profiles.shape[0]
        if self.background.shape != (S * A, J) or self.profiles.shape != (J, S):
            raise ValueError(f"background, profiles: expected shapes (S A, J) and (J, S) = "
                             f"({S * A}, {J}) and ({J}, {S}), got {self.background.shape} and "
                             f"{self.profiles.shape}")
        total = self.profiles.sum(axis=1)                              # (J,)
        inside = (np.zeros((S, J)) if self.excluded is None
                  else np.asarray(self.excluded @ self.profiles.T).reshape(S, J))
        mass = total[None, :] - inside                                 # (S, J)
        norm = np.divide(1.0, mass, out=np.zeros_like(mass), where=mass > 0)
        object.__setattr__(self, "_norm", norm)

    @property
    def n_states(self) -> int:
        """S."""
        return int(self.table.shape[1])

    @property
    def shape(self) -> tuple[int, int, int]:
        """(S, A, S)."""
        return (self.n_states, self.n_actions, self.n_states)

    def _weights(self) -> FloatArray:
        """Per-row factor of each profile, ``b_j(s, a) / sum over the outside of u_j``."""
        S, A = self.n_states, self.n_actions
        return (self.background.reshape(S, A, -1) * self._norm[:, None, :]).reshape(S * A, -1)

    def expect(self, values: Any) -> FloatArray:
        r"""Expected next-state values :math:`\sum_{s'} P[(s, a), s']\,V(s')`.

        Parameters
        ----------
        values : array_like of shape (S,) or (S, m)

        Returns
        -------
        ndarray of shape (S, A) or (S, A, m)
        """
        v = np.asarray(values, dtype=np.float64)
        S, A = self.n_states, self.n_actions
        if v.shape[:1] != (S,) or v.ndim > 2:
            raise ValueError(f"values: expected shape (S,) or (S, m) with S = {S}, got {v.shape}")
        vm = v.reshape(S, -1)
        out = np.asarray(self.table @ vm)                              # (S A, m)
        if self.profiles.shape[0]:
            w = self._weights()                                        # (S A, J)
            for j, u in enumerate(self.profiles):
                uv = u[:, None] * vm                                   # (S, m)
                outside = uv.sum(axis=0)[None, :] - (
                    0.0 if self.excluded is None else np.asarray(self.excluded @ uv))
                outside = np.broadcast_to(outside, (S, vm.shape[1]))
                out += w[:, j:j + 1] * np.repeat(outside, A, axis=0)
        return out.reshape((S, A) + v.shape[1:])

    def policy_rows(self, actions: Any) -> BackgroundTransitions:
        r"""The rows ``(s, actions[s])`` of a deterministic policy, as a one-action table.

        Parameters
        ----------
        actions : array_like of int, shape (S,)

        Returns
        -------
        BackgroundTransitions
            With ``n_actions = 1`` (:math:`P_\pi`).
        """
        act = check_index_array(actions, "actions", self.n_actions, "A")
        if act.shape != (self.n_states,):
            raise ValueError(f"actions: expected shape (S,) = ({self.n_states},), got {act.shape}")
        rows = np.arange(self.n_states) * self.n_actions + act
        return BackgroundTransitions(sp.csr_array(self.table[rows]), self.background[rows],
                                 self.profiles, self.excluded, 1)

    def policy_matrix(self, policy: Any, keep: Any = None) -> spla.LinearOperator:
        r""":math:`P_\pi(s, s') = \sum_a \pi(a \mid s) P(s' \mid s, a)` as an operator (nothing
        of size S^2 is formed): the :class:`~corrpriors.mdp.planning.TransitionOperator` protocol.

        Parameters
        ----------
        policy : ndarray of shape (S, A)
            Row-stochastic action probabilities.
        keep : ndarray of shape (S,), optional
            Row weights (0 empties the rows of terminal states).

        Returns
        -------
        scipy.sparse.linalg.LinearOperator of shape (S, S)
        """
        S, A = self.n_states, self.n_actions
        w = np.asarray(policy, dtype=np.float64)
        if w.shape != (S, A):
            raise ValueError(f"policy: expected shape (S, A) = ({S}, {A}), got {w.shape}")
        k = np.ones(S) if keep is None else np.asarray(keep, dtype=np.float64)
        if np.array_equal(w, np.eye(A)[w.argmax(axis=1)]):   # deterministic: its rows only
            rows = self.policy_rows(w.argmax(axis=1))

            def matvec(v: np.ndarray) -> np.ndarray:
                return k * rows.expect(np.ravel(v))[:, 0]
        else:
            def matvec(v: np.ndarray) -> np.ndarray:
                return k * np.sum(w * self.expect(np.ravel(v)), axis=1)
        return spla.LinearOperator((S, S), matvec=matvec, dtype=np.float64)

    def entries(self, rows: Any, cols: Any) -> FloatArray:
        """Probabilities ``P[rows, cols]`` (rows ``s * A + a``) without building the table.

        Parameters
        ----------
        rows, cols : array_like of int, shape (E,)

        Returns
        -------
        ndarray of shape (E,)
        """
        r = check_index_array(rows, "rows", self.n_states * self.n_actions, "S A").ravel()
        c = check_index_array(cols, "cols", self.n_states, "S").ravel()
        out = np.asarray(self.table[r, c]).ravel().astype(np.float64)
        if self.profiles.shape[0]:
            s = r // self.n_actions
            out = out + (self._weights()[r] * self.profiles[:, c].T).sum(axis=1) * \
                ~self._is_excluded(s, c)
        return out

    def _is_excluded(self, s: IntArray, c: IntArray) -> np.ndarray:
        if self.excluded is None:
            return np.zeros(s.shape, dtype=bool)
        return np.asarray(self.excluded[s, c]).ravel() != 0

    def hellinger_to(self, other: Any) -> FloatArray:
        r"""Hellinger distance of every row to another transition model.

        :math:`H = \sqrt{1 - \sum_{s'} \sqrt{P(s') P'(s')}}` (both rows on the simplex), read on
        the support of ``other`` only -- exact when ``other`` is sparse (a true model), with
        no (S, S) array.

        Parameters
        ----------
        other : corrpriors.mdp.SparseTransitions, scipy.sparse array of shape (S A, S) (row
            ``s * A + a``) or ndarray of shape (S, A, S)

        Returns
        -------
        ndarray of shape (S, A)
        """
        return operator_hellinger(self, other)

    def row_sums(self) -> FloatArray:
        """Total probability of every row (1 up to round-off), ndarray of shape (S A,)."""
        return np.asarray(self.table.sum(axis=1)).ravel() + self.background.sum(axis=1)

    def toarray(self) -> FloatArray:
        """The dense table, ndarray of shape (S, A, S) (small problems only)."""
        S, A = self.n_states, self.n_actions
        dense = self.table.toarray()
        if self.profiles.shape[0]:
            allowed = np.ones((S, S)) if self.excluded is None else 1.0 - (
                self.excluded.toarray() != 0)
            w = self._weights().reshape(S, A, -1)
            for j, u in enumerate(self.profiles):
                dense += (w[:, :, j][:, :, None] * (allowed * u[None, :])[:, None, :]
                          ).reshape(S * A, S)
        return dense.reshape(S, A, S)

    def sample_next(self, states: Any, actions: Any, *, rng: np.random.Generator) -> IntArray:
        """Draw next states of ``(states[t], actions[t])``.

        Parameters
        ----------
        states, actions : array_like of int, shape (T,)
        rng : numpy.random.Generator

        Returns
        -------
        ndarray of shape (T,)
        """
        s = np.atleast_1d(check_index_array(states, "states", self.n_states, "S"))
        a = np.atleast_1d(check_index_array(actions, "actions", self.n_actions, "A"))
        if s.shape != a.shape or s.ndim != 1:
            raise ValueError(f"states, actions: expected equal 1-D shapes, got {s.shape} and {a.shape}")
        rows = s * self.n_actions + a
        out = np.empty(rows.size, dtype=np.int64)
        t = self.table
        for i, (row, state) in enumerate(zip(rows.tolist(), s.tolist())):
            lo, hi = t.indptr[row], t.indptr[row + 1]
            mass = np.concatenate([t.data[lo:hi], self.background[row]])
            k = int(np.searchsorted(np.cumsum(mass), rng.random() * mass.sum(), side="right"))
            k = min(k, mass.size - 1)
            if k < hi - lo:
                out[i] = t.indices[lo + k]
                continue
            u = self.profiles[k - (hi - lo)]
            cdf = np.cumsum(u)
            while True:   # a profile restricted to the outside of the state: rejection
                cand = int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"))
                cand = min(cand, self.n_states - 1)
                if self.excluded is None or self.excluded[state, cand] == 0:
                    out[i] = cand
                    break
        return out
