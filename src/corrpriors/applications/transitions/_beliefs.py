r"""The belief protocol, its shared count bookkeeping, and the Dirichlet and known beliefs."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np
import scipy.sparse as sp

from ..._memory import check_memory
from ..._random import as_generator, sample_dirichlet
from ..._special import log_half_gamma_ratio
from ..._typing import FloatArray, IntArray, SeedLike
from ..._validation import check_array, check_counts, check_int, check_real, check_shape, check_simplex
from ...mdp._sparse import check_cell_keys, sparse_rows
from ._hellinger import dirichlet_sqrt_mean, from_sqrt_mean

__all__ = ["DirichletTransitionModel", "KnownTransitionModel", "TransitionBelief"]


@runtime_checkable
class TransitionBelief(Protocol):
    r"""What PSRL and system identification need from a belief over :math:`P(s' \mid s, a)`.

    Any object with these members qualifies (``isinstance(obj, TransitionBelief)`` checks
    that they exist); the beliefs of this module implement it.

    Attributes
    ----------
    n_states : int
        S.
    n_actions : int
        A.
    """

    n_states: int
    n_actions: int

    def update(self, states: Any, actions: Any, next_states: Any) -> Any:
        """Fold in transitions ``(states[t], actions[t]) -> next_states[t]``, arrays of shape (T,)."""

    def mean(self) -> FloatArray:
        """Posterior-mean (or plug-in) model, ndarray of shape (S, A, S)."""

    def sample_many(self, n: int, *, rng: SeedLike) -> FloatArray:
        """``n`` posterior draws of the model, ndarray of shape (n, S, A, S)."""

    # Optional (not part of the structural check): ``hellinger_estimate(*, rng=None)``, the
    # Bayes estimate under the squared Hellinger loss, ndarray of shape (S, A, S)
    # (:mod:`._hellinger`; :func:`~._hellinger.point_estimate` falls back to Monte Carlo).


#: From this many states on, beliefs store their counts sparsely and return sparse tables
#: (``sparse=None``): dense (S, A, S) arrays take 8 S^2 A bytes (128 MB at 2,000 states and
#: 4 actions, 320 GB at 10^5).
SPARSE_FROM_STATES = 2000


def check_dense_memory(arrays: float, n_states: int, n_actions: int, what: str,
                       alternative: str = "pass sparse=True (or sparse=None) to store the counts "
                                          "sparsely") -> None:
    """Refuse ``arrays`` dense (S, A, S) float64 arrays that cannot fit, before they exist."""
    check_memory(8.0 * arrays * n_states * n_actions * n_states,
                 f"{what}: {arrays:,g} dense (S, A, S) float64 arrays of {n_states:,} states x "
                 f"{n_actions} actions", alternative)


def _resolve_sparse(sparse: Any, n_states: int) -> bool:
    if sparse is None:
        return n_states >= SPARSE_FROM_STATES
    if not isinstance(sparse, (bool, np.bool_)):
        raise ValueError(f"sparse: expected True, False or None (automatic), got {sparse!r}")
    return bool(sparse)


class _TransitionBelief:
    """Shared count bookkeeping of every transition belief.

    Dense storage keeps an (S, A, S) count array; sparse storage (``sparse=True``, or
    ``None`` from :data:`SPARSE_FROM_STATES` states on) the observed cells only, as sorted
    keys ``(a S + s) S + s'`` and their counts (memory O(distinct transitions)); the keys are
    64-bit integers, so A S^2 must stay below 2**63 (:func:`~corrpriors.mdp._sparse.check_cell_keys`).
    """

    def __init__(self, n_states: int, n_actions: int, sparse: bool | None = False) -> None:
        n_states = check_int(n_states, "n_states", 1)
        n_actions = check_int(n_actions, "n_actions", 1)
        check_cell_keys(n_states, n_actions)
        self.n_states = n_states
        self.n_actions = n_actions
        self.sparse = _resolve_sparse(sparse, self.n_states)
        if self.sparse:
            self._keys = np.zeros(0, dtype=np.int64)
            self._vals = np.zeros(0)
        else:
            check_dense_memory(1, n_states, n_actions, f"{type(self).__name__}(sparse=False)")
            self._counts = np.zeros((self.n_states, self.n_actions, self.n_states))
        self._version = 0   # bumped whenever the data change
        self._action_versions = np.zeros(self.n_actions, dtype=np.int64)   # ... per action

    @property
    def counts(self) -> Any:
        """Observed transition counts (a copy): ndarray of shape (S, A, S), or with sparse
        storage a scipy.sparse.csr_array of shape (S A, S) (row ``s * A + a``).
        """
        if not self.sparse:
            return self._counts.copy()
        S, A = self.n_states, self.n_actions
        a, rest = np.divmod(self._keys, S * S)
        s, s2 = np.divmod(rest, S)
        out = sp.csr_array((self._vals.copy(), (s * A + a, s2)), shape=(S * A, S))
        out.sort_indices()
        return out

    def _action_pairs(self, a: int) -> tuple[IntArray, IntArray, FloatArray]:
        """Observed ``(states, next_states, counts)`` of action ``a`` (distinct pairs)."""
        S = self.n_states
        if not self.sparse:
            s, s2 = np.nonzero(self._counts[:, a, :])
            return s, s2, self._counts[s, a, s2]
        lo, hi = np.searchsorted(self._keys, [a * S * S, (a + 1) * S * S])
        s, s2 = np.divmod(self._keys[lo:hi] - a * S * S, S)
        return s, s2, self._vals[lo:hi]

    def _merge(self, keys: IntArray, vals: FloatArray) -> None:
        """Add counts at (sorted, distinct) keys to the sparse storage."""
        pos = np.searchsorted(self._keys, keys)
        hit = pos < self._keys.size
        hit[hit] = self._keys[pos[hit]] == keys[hit]
        self._vals[pos[hit]] += vals[hit]
        if (~hit).any():
            self._keys = np.insert(self._keys, pos[~hit], keys[~hit])
            self._vals = np.insert(self._vals, pos[~hit], vals[~hit])

    def update(self, states: Any, actions: Any, next_states: Any) -> _TransitionBelief:
        """Accumulate observed transitions ``(states[t], actions[t]) -> next_states[t]``.

        Parameters
        ----------
        states, actions, next_states : array_like of shape (T,) or scalars
            Integer indices.

        Returns
        -------
        self
        """
        s = np.atleast_1d(np.asarray(states))
        a = np.atleast_1d(np.asarray(actions))
        s2 = np.atleast_1d(np.asarray(next_states))
        if not (s.shape == a.shape == s2.shape) or s.ndim != 1:
            raise ValueError(f"states, actions, next_states: expected equal 1-D shapes, got "
                             f"{s.shape}, {a.shape}, {s2.shape}")
        for name, v, n in (("states", s, self.n_states), ("actions", a, self.n_actions),
                           ("next_states", s2, self.n_states)):
            if v.size and (not np.issubdtype(v.dtype, np.integer) or v.min() < 0 or v.max() >= n):
                raise ValueError(f"{name}: expected integers in [0, {n}), got {v}")
        if s.size == 0:
            return self
        s, a, s2 = (v.astype(np.int64) for v in (s, a, s2))   # uint64 + int64 would be float64
        if self.sparse:
            cells, times = np.unique((a * self.n_states + s) * self.n_states + s2, return_counts=True)
            self._merge(cells, times.astype(np.float64))
            self._version += 1
            self._action_versions[np.unique(a)] += 1
            return self
        # only the touched cells: a dense bincount would allocate S * A * S integers per update
        cells, times = np.unique((s * self.n_actions + a) * self.n_states + s2, return_counts=True)
        i, j, k = np.unravel_index(cells, self._counts.shape)
        self._counts[i, j, k] += times
        self._version += 1
        self._action_versions[np.unique(j)] += 1
        return self

    def set_counts(self, counts: Any) -> _TransitionBelief:
        """Replace the data by a count array.

        Parameters
        ----------
        counts : array_like of shape (S, A, S), or scipy.sparse array of shape (S A, S)
            Non-negative integer counts (a sparse table: row ``s * A + a``).

        Returns
        -------
        self
        """
        S, A = self.n_states, self.n_actions
        if sp.issparse(counts):
            coo = sparse_rows(counts, S, A, "counts")
            vals = check_counts(coo.data, "counts", min_categories=1, ndim=1)   # (booleans refused)
            keep = vals > 0
            s, a = np.divmod(coo.row[keep].astype(np.int64), A)
            keys, vals = (a * S + s) * S + coo.col[keep], vals[keep]
        else:
            c = check_counts(counts, "counts", min_categories=1, ndim=3)
            check_shape(c, (S, A, S), "counts")
            s, a, s2 = np.nonzero(c)
            keys, vals = (a * S + s) * S + s2, c[s, a, s2]
        order = np.argsort(keys)
        keys, vals = keys[order], vals[order].astype(np.float64)
        old = [self._action_pairs(b) for b in range(A)]
        if self.sparse:
            self._keys, self._vals = keys, vals
        else:
            a, rest = np.divmod(keys, S * S)
            self._counts = np.zeros((S, A, S))
            self._counts[rest // S, a, rest % S] = vals
        changed = [not all(np.array_equal(x, y) for x, y in zip(old[b], self._action_pairs(b)))
                   for b in range(A)]
        self._version += 1
        self._action_versions[np.flatnonzero(changed)] += 1
        return self

    def mean(self) -> FloatArray:  # pragma: no cover - abstract
        raise NotImplementedError

    def sample_many(self, n: int, *, rng: SeedLike) -> FloatArray:  # pragma: no cover
        raise NotImplementedError

    def sample(self, *, rng: SeedLike) -> FloatArray:
        """One posterior draw of the transition model, ndarray of shape (S, A, S)."""
        return self.sample_many(1, rng=rng)[0]



#: Largest prior total alpha * S of a Dirichlet row: its posterior sums and Gamma draws stay finite.
_MAX_ROW_TOTAL = 1e300


#: What to do instead of dense draws that cannot fit.
DRAWS_ADVICE = ("draw fewer at once (smaller n), or use sparse storage (sparse=True), whose draws "
                "are sparse tables")


def _check_n(n: Any) -> int:
    """The number of draws ``n`` as a positive int (NaN, infinities, fractions, bools and
    non-numbers refused with a ``ValueError`` naming ``n``).
    """
    return check_int(n, "n", 1)


class DirichletTransitionModel(_TransitionBelief):
    r"""Independent conjugate Dirichlet belief per (state, action).

    .. math:: P(\cdot \mid s, a) \sim \mathrm{Dir}(\alpha \mathbf 1_S), \qquad
              P(\cdot \mid s, a) \mid X \sim \mathrm{Dir}(\alpha \mathbf 1_S + X_{s a \cdot}).

    Parameters
    ----------
    n_states : int
        S.
    n_actions : int
        A.
    alpha : float, default=1.0
        Symmetric concentration (1 = uniform prior, 1e-3 = sparse prior).
    sparse : bool or None, default=None
        Store the counts sparsely and return :class:`BackgroundTransitions` means and draws
        (``None``: from :data:`SPARSE_FROM_STATES` states on).
    """

    def __init__(self, n_states: int, n_actions: int, alpha: float = 1.0, *,
                 sparse: bool | None = None) -> None:
        super().__init__(n_states, n_actions, sparse)
        self.alpha = check_real(alpha, "alpha", 0.0, closed="right", expected="a finite positive number")
        if not self.alpha * self.n_states <= _MAX_ROW_TOTAL:
            raise ValueError(f"alpha: expected alpha * S <= {_MAX_ROW_TOTAL:g} so that the rows of the belief sum "
                             f"to a finite number, got alpha = {self.alpha:g} with S = {self.n_states}")

    def mean(self) -> Any:
        """Posterior mean, ndarray of shape (S, A, S); sparse storage: a
        :class:`BackgroundTransitions` (the counts' cells plus a uniform background).
        """
        if not self.sparse:
            post = self._counts + self.alpha
            return post / post.sum(axis=-1, keepdims=True)
        counts = self.counts
        z = np.asarray(counts.sum(axis=1)).ravel() + self.alpha * self.n_states
        return self._table(counts, counts.data / np.repeat(z, np.diff(counts.indptr)),
                           self.alpha * self.n_states / z)

    def hellinger_estimate(self, *, rng: SeedLike = None) -> Any:
        r"""The Bayes estimate under the squared Hellinger loss, :math:`\hat P_j \propto
        E[\sqrt{P_j}]^2` (:mod:`._hellinger`), in closed form.

        Minimising :math:`E[\sum_j (\sqrt{q_j} - \sqrt{P_j})^2]` over the simplex gives
        :math:`q_j \propto E[\sqrt{P_j}]^2`, and for the posterior
        :math:`\mathrm{Dir}(\alpha + X_{sa\cdot})`

        .. math:: E[\sqrt{P_j}] = \frac{\Gamma(a_j + \tfrac12)\, \Gamma(a_0)}
                  {\Gamma(a_j)\, \Gamma(a_0 + \tfrac12)}, \qquad a = \alpha + X_{sa\cdot},

        so that, relative to the mean :math:`a_j / a_0`, an unseen state gets about
        :math:`\pi \alpha^2` instead of :math:`\alpha` (a sparse prior's pseudo-counts nearly
        vanish) while a seen one keeps about :math:`n_j + \alpha - \tfrac14`.

        Parameters
        ----------
        rng : ignored
            Accepted for the common signature of the beliefs' estimates (closed form).

        Returns
        -------
        ndarray of shape (S, A, S); sparse storage: a :class:`BackgroundTransitions`
            Rows on the simplex.
        """
        if not self.sparse:
            return from_sqrt_mean(dirichlet_sqrt_mean(self._counts + self.alpha))
        counts = self.counts
        S = self.n_states
        seen = np.exp(2.0 * log_half_gamma_ratio(counts.data + self.alpha))
        unseen = float(np.exp(2.0 * log_half_gamma_ratio(np.array(self.alpha))))
        rows = np.repeat(np.arange(counts.shape[0]), np.diff(counts.indptr))
        m = np.diff(counts.indptr)
        z = np.bincount(rows, weights=seen, minlength=counts.shape[0]) + (S - m) * unseen
        # every state gets the background unseen * S / z spread uniformly: the seen cells the rest
        return self._table(counts, (seen - unseen) / z[rows], unseen * S / z)

    def _table(self, counts: Any, values: FloatArray, background: FloatArray) -> Any:
        from ._tables import BackgroundTransitions

        table = sp.csr_array((values, counts.indices, counts.indptr), shape=counts.shape)
        return BackgroundTransitions(table, background[:, None], np.ones((1, self.n_states)), None,
                                 self.n_actions)

    def sample_many(self, n: int, *, rng: SeedLike) -> Any:
        """``n`` posterior draws, ndarray of shape (n, S, A, S); sparse storage: a list of
        ``n`` :class:`BackgroundTransitions`.

        Sparse draws are exact in the mass of every observed cell and in the total mass of
        the pseudo-counts (``Gamma(c + alpha) = Gamma(c) + Gamma(alpha)``), whose split over
        the states is replaced by its mean (uniform): the (S, A, S) draw is never formed.
        """
        n = _check_n(n)
        if not self.sparse:   # the concentrations, the Gamma draws, their logs and the draws
            check_dense_memory(3 * n + 2, self.n_states, self.n_actions, f"sample_many({n})",
                               DRAWS_ADVICE)
            return sample_dirichlet(self._counts + self.alpha, n, rng=rng)
        gen = as_generator(rng)
        counts = self.counts
        rows = np.repeat(np.arange(counts.shape[0]), np.diff(counts.indptr))
        out = []
        for _ in range(n):
            g = gen.standard_gamma(counts.data)
            bg = gen.standard_gamma(np.full(counts.shape[0], self.alpha * self.n_states))
            z = np.bincount(rows, weights=g, minlength=counts.shape[0]) + bg
            out.append(self._table(counts, g / z[rows], bg / z))
        return out


class KnownTransitionModel(_TransitionBelief):
    """The true model as a (point-mass) belief; data are recorded but change nothing.

    Parameters
    ----------
    P : array_like of shape (S, A, S)
        Transition probabilities, rows on the simplex.
    """

    def __init__(self, P: Any) -> None:
        P = check_array(P, "P", ndim=3)
        if P.shape[0] != P.shape[2]:
            raise ValueError(f"P: expected shape (S, A, S), got {P.shape}")
        check_simplex(P, "P")
        super().__init__(P.shape[0], P.shape[1])
        self._P = P.copy()
        self._P.setflags(write=False)

    def mean(self) -> FloatArray:
        """The true model, ndarray of shape (S, A, S)."""
        return self._P.copy()

    def hellinger_estimate(self, *, rng: SeedLike = None) -> FloatArray:
        """The true model (a point mass is its own Bayes estimate under any loss), ndarray of
        shape (S, A, S); ``rng`` is ignored.
        """
        return self._P.copy()

    def sample_many(self, n: int, *, rng: SeedLike) -> FloatArray:
        """``n`` copies of the true model, ndarray of shape (n, S, A, S)."""
        n = _check_n(n)
        check_dense_memory(n, self.n_states, self.n_actions, f"sample_many({n})",
                           "draw fewer at once (smaller n)")
        return np.broadcast_to(self._P, (n,) + self._P.shape).copy()
