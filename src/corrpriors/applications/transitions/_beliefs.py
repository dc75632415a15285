r"""The belief protocol, its shared count bookkeeping, and the Dirichlet and known beliefs."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..._random import sample_dirichlet
from ..._typing import FloatArray, SeedLike
from ..._validation import check_array, check_counts, check_positive, check_shape, check_simplex

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


class _TransitionBelief:
    """Shared count bookkeeping of every transition belief."""

    def __init__(self, n_states: int, n_actions: int) -> None:
        if int(n_states) != n_states or n_states < 1:
            raise ValueError(f"n_states: expected a positive int, got {n_states}")
        if int(n_actions) != n_actions or n_actions < 1:
            raise ValueError(f"n_actions: expected a positive int, got {n_actions}")
        self.n_states = int(n_states)
        self.n_actions = int(n_actions)
        self._counts = np.zeros((self.n_states, self.n_actions, self.n_states))
        self._version = 0   # bumped whenever the data change
        self._action_versions = np.zeros(self.n_actions, dtype=np.int64)   # ... per action

    @property
    def counts(self) -> FloatArray:
        """Observed transition counts, ndarray of shape (S, A, S) (a copy)."""
        return self._counts.copy()

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
        counts : array_like of shape (S, A, S)
            Non-negative integer counts.

        Returns
        -------
        self
        """
        c = check_counts(counts, "counts", min_categories=1, ndim=3)
        check_shape(c, (self.n_states, self.n_actions, self.n_states), "counts")
        changed = [not np.array_equal(self._counts[:, b, :], c[:, b, :]) for b in range(self.n_actions)]
        self._counts = c.copy()
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



def _check_n(n: Any) -> int:
    if int(n) != n or n < 1:
        raise ValueError(f"n: expected a positive int, got {n}")
    return int(n)


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
    """

    def __init__(self, n_states: int, n_actions: int, alpha: float = 1.0) -> None:
        super().__init__(n_states, n_actions)
        self.alpha = check_positive(alpha, "alpha")

    def mean(self) -> FloatArray:
        """Posterior mean, ndarray of shape (S, A, S)."""
        post = self._counts + self.alpha
        return post / post.sum(axis=-1, keepdims=True)

    def sample_many(self, n: int, *, rng: SeedLike) -> FloatArray:
        """``n`` posterior draws, ndarray of shape (n, S, A, S)."""
        return sample_dirichlet(self._counts + self.alpha, _check_n(n), rng=rng)


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

    def sample_many(self, n: int, *, rng: SeedLike) -> FloatArray:
        """``n`` copies of the true model, ndarray of shape (n, S, A, S)."""
        return np.broadcast_to(self._P, (_check_n(n),) + self._P.shape).copy()
