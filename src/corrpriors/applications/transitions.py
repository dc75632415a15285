r"""Beliefs over the transition model :math:`P(s' \mid s, a)` of a finite MDP.

Three beliefs share one interface (the :class:`TransitionBelief` protocol: any object with
these members works with :class:`~corrpriors.applications.PSRLAgent`), used by system
identification and by PSRL:

* :class:`DirichletTransitionModel` -- an independent conjugate Dirichlet(alpha) per (s, a);
* :class:`CorrelatedTransitionModel` -- the paper's model: one
  :class:`corrpriors.core.model.CorrelatedMultinomial` per action with the states as
  covariates, so that similar states get similar next-state distributions;
* :class:`KnownTransitionModel` -- the true model (a point mass), for tests and references.

:meth:`CorrelatedTransitionModel.for_mdp` builds the correlated belief for an MDP (or a
Gymnasium environment's :func:`~corrpriors.envs.env_info`) in one call.

The interface: ``update(states, actions, next_states)`` accumulates transitions,
``set_counts(counts)`` replaces them, ``counts`` is the (S, A, S) count array,
``mean()`` the posterior-mean (or plug-in) model of shape (S, A, S), ``sample(rng=...)``
one posterior draw of shape (S, A, S) and ``sample_many(n, rng=...)`` a batch of
shape (n, S, A, S).

Category maps
-------------
The correlated model shares statistical strength between states through the
*categories* of its multinomials. A :class:`CategoryMap` says which next state of
``s`` plays the role of category ``k``:

* the identity map (:func:`identity_category_map`) makes category ``k`` the absolute
  next state ``k`` -- the paper's encoding;
* a displacement map (:func:`displacement_category_map`) makes category ``k`` the
  relative move ``coords[s'] - coords[s] = d_k`` inside a window
  ``|d|_inf <= radius``, so that "the same move" is the same category in every state
  (grid displacements, changes of the two queue lengths). Displacements that leave
  the state space are *structural zeros* of that state, and transitions beyond the
  window (for instance the tunnel world's jump from the goal back to the start) fall
  into one extra "other" category.

Mapping category probabilities ``q[s, k]`` back to next-state probabilities:

1. ``q`` is renormalised over the categories valid for ``s`` (mass the model puts on a
   structural zero is discarded, not moved to a particular neighbour);
2. the window categories go to their unique next state;
3. the "other" mass is spread over the next states outside the window according to
   the posterior mean of a small per-(state, action) Dirichlet over the observed
   "other" transitions: ``w[s, s'] ∝ n_other[s, s'] + other_prior``; with no such
   observation this is uniform over the states outside the window.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .._random import as_generator, sample_dirichlet
from .._typing import FloatArray, IntArray, SeedLike
from .._validation import check_array, check_counts, check_positive, check_shape, check_simplex

__all__ = [
    "GMRF_FROM_STATES",
    "GMRF_MAX_CATEGORIES",
    "TransitionBelief",
    "CategoryMap",
    "CorrelatedTransitionModel",
    "DirichletTransitionModel",
    "KnownTransitionModel",
    "TruncatedCategoryMap",
    "displacement_category_map",
    "identity_category_map",
    "window_displacements",
]


# --------------------------------------------------------------------------------------
# Category maps
# --------------------------------------------------------------------------------------
_GOLDEN = (np.sqrt(5.0) - 1.0) / 2.0   # offsets frac(k * golden) of the systematic split
@dataclasses.dataclass(frozen=True, eq=False)
class CategoryMap:
    """Map from (state, next state) pairs to shared categories.

    Parameters
    ----------
    category : ndarray of shape (S, S)
        ``category[s, s']`` in ``0..n_window - 1`` is the shared category of the
        transition ``s -> s'``; ``-1`` marks a next state outside the window, which
        goes to the "other" category. Within a row every window category may occur
        at most once (the map must be invertible given ``s``).
    n_window : int, optional
        Number of window categories (default: ``category.max() + 1``).
    other_prior : float, default=0.01
        Pseudo-count of the per-(state, action) Dirichlet that spreads the "other"
        mass over the next states outside the window.
    other_pooling : float, default=0.0
        Weight (in pseudo-counts) of a base measure shared by all states and actions in that
        Dirichlet: the destinations of every "other" transition observed anywhere, restricted
        to the state's outside next states. Far jumps often lead to the same few states from
        everywhere (a fall or a trap resets to the start), so one observed fall tells the
        unvisited states where theirs would lead. 0: each (state, action) on its own.

    Attributes
    ----------
    n_states : int
        S.
    n_categories : int
        K = ``n_window`` plus one if there is an "other" category.
    has_other : bool
        Whether some transition lies outside the window.
    valid : ndarray of shape (S, K)
        ``valid[s, k]`` is True when category ``k`` has a next state for ``s``.
    outside : ndarray of shape (S, S)
        ``outside[s, s']`` is True when ``s'`` is outside the window of ``s``.
    """

    category: IntArray
    n_window: int | None = None
    other_prior: float = 0.01
    other_pooling: float = 0.0
    # derived in __post_init__
    has_other: bool = dataclasses.field(init=False, repr=False)
    valid: np.ndarray = dataclasses.field(init=False, repr=False)
    outside: np.ndarray = dataclasses.field(init=False, repr=False)
    index: np.ndarray = dataclasses.field(init=False, repr=False)
    _rows: np.ndarray = dataclasses.field(init=False, repr=False)
    _cols: np.ndarray = dataclasses.field(init=False, repr=False)
    _cats: np.ndarray = dataclasses.field(init=False, repr=False)

    def __post_init__(self) -> None:
        cat = np.asarray(self.category)
        if cat.ndim != 2 or cat.shape[0] != cat.shape[1]:
            raise ValueError(f"category: expected shape (S, S), got {cat.shape}")
        if not np.issubdtype(cat.dtype, np.integer) and (
                not np.all(np.isfinite(cat)) or not np.all(cat == np.round(cat))):
            raise ValueError("category: expected integer entries")
        cat = cat.astype(np.int64)
        if (cat < -1).any():
            raise ValueError(f"category: entries must be >= -1 (-1 = outside the window), "
                             f"found {cat.min()}")
        n_window = int(cat.max()) + 1 if self.n_window is None else int(self.n_window)
        if n_window < 1 or cat.max() >= n_window:
            raise ValueError(f"n_window: expected an int > max(category) = {cat.max()}, got {n_window}")
        check_positive(self.other_prior, "other_prior")
        if not (np.isfinite(self.other_pooling) and self.other_pooling >= 0):
            raise ValueError(f"other_pooling: expected a finite number >= 0, got "
                             f"{self.other_pooling!r}")
        S = cat.shape[0]
        outside = cat < 0
        has_other = bool(outside.any())
        K = n_window + int(has_other)
        rows, cols = np.nonzero(~outside)
        cats = cat[rows, cols]
        hits = np.bincount(rows * K + cats, minlength=S * K)
        if (hits > 1).any():
            s_bad = int(np.argmax(hits > 1)) // K
            raise ValueError(f"category: row {s_bad} maps two next states to the same category; "
                             "the map must be one-to-one within a row")
        valid = (hits > 0).reshape(S, K)
        if has_other:
            valid[:, -1] = outside.any(axis=1)
        if (valid.sum(axis=1) < 1).any():  # pragma: no cover - every row has >= 1 next state
            raise ValueError("category: every state needs at least one valid category")
        index = np.where(outside, K - 1, cat)
        for name, arr in (("category", cat), ("outside", outside), ("valid", valid),
                          ("index", index), ("_rows", rows), ("_cols", cols), ("_cats", cats)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)
        object.__setattr__(self, "n_window", n_window)
        object.__setattr__(self, "other_prior", float(self.other_prior))
        object.__setattr__(self, "other_pooling", float(self.other_pooling))
        object.__setattr__(self, "has_other", has_other)

    # -- sizes ---------------------------------------------------------------------
    @property
    def n_states(self) -> int:
        """Number of states S."""
        return int(self.category.shape[0])

    @property
    def n_categories(self) -> int:
        """Number of categories K (window categories plus "other" if present)."""
        return int(self.valid.shape[1])

    @property
    def is_identity(self) -> bool:
        """True when category k is next state k in every row (nothing to map)."""
        S = self.n_states
        return (not self.has_other and self.n_window == S
                and bool(np.all(self.category == np.arange(S)[None, :])))

    # -- next states -> categories -------------------------------------------------
    def aggregate(self, x: Any) -> FloatArray:
        """Sum next-state quantities (counts or probabilities) into categories.

        Parameters
        ----------
        x : array_like of shape (..., S, S)

        Returns
        -------
        ndarray of shape (..., S, K)
            ``out[..., s, k] = sum_{s' : category(s, s') = k} x[..., s, s']``.
        """
        x = np.asarray(x, dtype=np.float64)
        S, K = self.n_states, self.n_categories
        if x.ndim < 2 or x.shape[-2:] != (S, S):
            raise ValueError(f"x: expected shape (..., S, S) = (..., {S}, {S}), got {x.shape}")
        out = np.zeros(x.shape[:-1] + (K,))
        out[..., self._rows, self._cats] = x[..., self._rows, self._cols]
        if self.has_other:  # row total minus the window: no (..., S, S) temporary
            other = x.sum(axis=-1) - out[..., :-1].sum(axis=-1)
            out[..., -1] = np.maximum(other, 0.0)   # rounding of probabilities only
        return out

    def other_weights(self, counts: Any, pooled: Any | None = None) -> FloatArray:
        """Distribution of the "other" mass over the next states outside the window.

        Parameters
        ----------
        counts : array_like of shape (..., S, S)
            Observed transition counts (one action, or a batch of actions).
        pooled : array_like of shape (S,), optional
            Counts of the far jumps observed into each next state, over all states and
            actions (:meth:`far_destinations`); used with ``other_pooling > 0``.

        Returns
        -------
        ndarray of shape (..., S, S)
            Posterior mean of the Dirichlet over the outside states,
            ``w[s, s'] ∝ (counts[s, s'] + other_prior + other_pooling * m[s, s'])
            * outside[s, s']`` with ``m[s]`` the pooled destinations restricted to the
            outside of ``s`` and normalised (zero where none lies outside); rows whose state
            has no outside next state are zero.
        """
        counts = np.asarray(counts, dtype=np.float64)
        w = np.where(self.outside, counts + self.other_prior, 0.0)
        if pooled is not None and self.other_pooling > 0:
            pooled = np.asarray(pooled, dtype=np.float64)
            if pooled.shape != (self.n_states,):
                raise ValueError(f"pooled: expected shape (S,) = ({self.n_states},), got "
                                 f"{pooled.shape}")
            dest = np.flatnonzero(pooled)                 # the few states far jumps led to
            inside = np.bincount(self._rows, weights=pooled[self._cols], minlength=self.n_states)
            zm = pooled.sum() - inside                    # pooled mass outside each window
            scale = np.divide(self.other_pooling, zm, out=np.zeros_like(zm), where=zm > 0)
            w[..., dest] += self.outside[:, dest] * pooled[dest] * scale[:, None]
        z = w.sum(axis=-1, keepdims=True)
        return np.divide(w, z, out=np.zeros_like(w), where=z > 0)

    def far_destinations(self, counts: Any) -> FloatArray:
        """Far jumps ("other" transitions) observed into each next state.

        Parameters
        ----------
        counts : array_like of shape (..., S, S)
            Transition counts (e.g. of every action, shape (A, S, S)).

        Returns
        -------
        ndarray of shape (S,)
            ``sum over the leading axes and s of counts[..., s, s'] * outside[s, s']``.
        """
        counts = np.asarray(counts)
        if counts.ndim < 2 or counts.shape[-2:] != self.outside.shape:
            raise ValueError(f"counts: expected shape (..., S, S) = (..., {self.n_states}, "
                             f"{self.n_states}), got {counts.shape}")
        idx = np.nonzero(counts)     # observed transitions only: no (..., S, S) temporaries
        s, s2 = idx[-2], idx[-1]
        far = self.outside[s, s2]
        return np.bincount(s2[far], weights=counts[idx][far].astype(np.float64),
                           minlength=self.n_states).astype(np.float64)

    # -- categories -> next states -------------------------------------------------
    def _valid_probs(self, q: FloatArray) -> FloatArray:
        """Renormalise ``q`` over the valid categories of each state.

        Mass on structural zeros is discarded; a row with all its mass there falls back to
        uniform over its valid categories.
        """
        qv = np.where(self.valid, q, 0.0)
        z = qv.sum(axis=-1, keepdims=True)
        bad = ~(z > 1e-300)
        if bad.any():
            uniform = self.valid / self.valid.sum(axis=1, keepdims=True)
            qv = np.where(bad, uniform, qv)
            z = np.where(bad, 1.0, z)
        return qv / z

    def next_state_probs(self, q: Any, other_weights: Any | None = None) -> FloatArray:
        """Map category probabilities to next-state probabilities.

        Parameters
        ----------
        q : array_like of shape (..., S, K)
            Category probabilities per state (rows on the simplex).
        other_weights : array_like of shape (..., S, S), optional
            Distribution of the "other" mass over outside states, as returned by
            :meth:`other_weights` (default: uniform over the outside states).

        Returns
        -------
        ndarray of shape (..., S, S)
            Rows on the simplex: ``q`` renormalised over the valid categories of each
            state, window categories sent to their next state, "other" mass spread by
            ``other_weights``.
        """
        q = np.asarray(q, dtype=np.float64)
        S, K = self.n_states, self.n_categories
        if q.ndim < 2 or q.shape[-2:] != (S, K):
            raise ValueError(f"q: expected shape (..., S, K) = (..., {S}, {K}), got {q.shape}")
        qv = self._valid_probs(q)
        out = np.zeros(q.shape[:-1] + (S,))
        out[..., self._rows, self._cols] = qv[..., self._rows, self._cats]
        if self.has_other:
            w = self.other_weights(np.zeros((S, S))) if other_weights is None else \
                np.asarray(other_weights, dtype=np.float64)
            out = out + qv[..., -1:] * w
        return out


def identity_category_map(n_states: int) -> CategoryMap:
    """Absolute encoding: category ``k`` is next state ``k`` (the paper's encoding).

    Parameters
    ----------
    n_states : int
        S.

    Returns
    -------
    CategoryMap
        With K = S categories, all valid, no "other" category.
    """
    S = int(n_states)
    if S < 2:
        raise ValueError(f"n_states: expected an int >= 2, got {n_states}")
    return CategoryMap(np.tile(np.arange(S, dtype=np.int64), (S, 1)), n_window=S)


BOUNDARY_RULES = ("exclude", "clip", "stay")
"""What a displacement leaving the state space means (see :func:`displacement_category_map`)."""


def displacement_category_map(coordinates: Any, radius: int, other_prior: float = 0.01,
                              boundary: str = "exclude", other_pooling: float = 0.0
                              ) -> CategoryMap:
    r"""Relative encoding: category = displacement ``coords[s'] - coords[s]``.

    The window holds the ``(2 radius + 1)^D`` displacements ``d`` with
    ``|d|_inf <= radius``, in lexicographic order of ``d``. Next states beyond
    the window go to one extra, last, "other" category (present only if some state
    has such a next state). What a displacement that leaves the state space means is
    set by ``boundary``.

    Parameters
    ----------
    coordinates : array_like of shape (S, D)
        Integer coordinates of the states (grid cells, queue lengths), all distinct.
    radius : int
        Window half-width (>= 1).
    other_prior : float, default=0.01
        See :class:`CategoryMap`.
    boundary : {"exclude", "clip", "stay"}, default="exclude"
        ``"exclude"``: such a displacement is a structural zero of that state (its mass
        is discarded and the rest renormalised). ``"clip"``: the displacement is the
        *intended* move and the next state is ``coords[s] + d`` clipped coordinate-wise
        to the box of the coordinates -- the truncation :math:`(\cdot)_0^B` of queues with
        finite buffers (a clipped point that is not a state is a structural zero).
        ``"stay"``: a move that does not land on a state leaves the agent where it is
        -- a grid's walls. With ``"clip"`` and ``"stay"`` several categories can lead to
        the same next state, so observations are censored: a
        :class:`TruncatedCategoryMap` is returned, whose beliefs impute the latent
        displacement (see :meth:`TruncatedCategoryMap.impute`).
    other_pooling : float, default=0.0
        See :class:`CategoryMap`.

    Returns
    -------
    CategoryMap
        A :class:`TruncatedCategoryMap` for ``boundary="clip"`` or ``"stay"``.
    """
    if boundary not in BOUNDARY_RULES:
        raise ValueError(f"boundary: expected one of {', '.join(BOUNDARY_RULES)}, got {boundary!r}")
    coords = np.asarray(coordinates)
    if coords.ndim != 2 or coords.shape[0] < 2:
        raise ValueError(f"coordinates: expected shape (S, D) with S >= 2, got {coords.shape}")
    if not np.all(coords == np.round(coords)):
        raise ValueError("coordinates: expected integer coordinates")
    coords = coords.astype(np.int64)
    if len(np.unique(coords, axis=0)) != len(coords):
        raise ValueError("coordinates: states must have distinct coordinates")
    if int(radius) != radius or radius < 1:
        raise ValueError(f"radius: expected an int >= 1, got {radius}")
    r = int(radius)
    D = coords.shape[1]
    disp = coords[None, :, :] - coords[:, None, :]              # (S, S, D)
    inside = np.abs(disp).max(axis=-1) <= r
    width = 2 * r + 1
    weights = width ** np.arange(D - 1, -1, -1)                  # lexicographic order
    cat = ((disp + r) * weights).sum(axis=-1)
    cat = np.where(inside, cat, -1)
    if boundary == "exclude":
        return CategoryMap(cat, n_window=width ** D, other_prior=other_prior,
                           other_pooling=other_pooling)
    index = {tuple(c): i for i, c in enumerate(coords.tolist())}
    aim = coords[:, None, :] + window_displacements(D, r)[None]   # (S, n_window, D)
    if boundary == "clip":
        aim = np.clip(aim, coords.min(axis=0), coords.max(axis=0))
    dest = np.array([[index.get(tuple(c), -1 if boundary == "clip" else s) for c in row]
                     for s, row in enumerate(aim.tolist())], dtype=np.int64)
    return TruncatedCategoryMap(cat, n_window=width ** D, other_prior=other_prior,
                                other_pooling=other_pooling, destination=dest)


def window_displacements(n_dims: int, radius: int) -> IntArray:
    """The displacement of each window category of :func:`displacement_category_map`.

    Returns
    -------
    ndarray of shape ((2 radius + 1)^D, D)
    """
    return np.array(list(itertools.product(range(-radius, radius + 1), repeat=n_dims)),
                    dtype=np.int64)


@dataclasses.dataclass(frozen=True, eq=False)
class TruncatedCategoryMap(CategoryMap):
    """A category map in which several categories can lead to the same next state.

    Category ``k`` of state ``s`` is an *intended* move that leads to
    ``destination[s, k]``; moves that would leave the state space are truncated (a queue's
    finite buffer) or stay put (a grid's walls), so near the boundary several categories share
    one next state and an observed transition is *censored*: it says which next state was
    reached, not which category produced it. ``category`` is the *direct* map of
    :class:`CategoryMap` (the category whose move is exactly ``coords[s'] - coords[s]``); its
    :meth:`aggregate` is the uncensored reading of the counts, used to start the imputation.

    Parameters
    ----------
    category : ndarray of shape (S, S)
        Direct categories, as in :class:`CategoryMap` (``-1``: outside the window).
    n_window : int, optional
        Number of window categories.
    other_prior : float, default=0.01
        See :class:`CategoryMap`.
    destination : ndarray of shape (S, n_window)
        Next state of every window category from every state; ``-1`` marks a structural
        zero. Must agree with ``category`` (a direct category leads to its own next state),
        and every destination must lie inside the window of its state.

    Notes
    -----
    Mapping category probabilities back (:meth:`next_state_probs`) sums the categories that
    share a next state instead of discarding the truncated ones. Fitting a belief needs
    category counts: :meth:`impute` allocates each observed (state, next state) count to the
    categories that lead there in proportion to the current category probabilities (the
    E-step of EM for censored data), rounded to integers by deterministic systematic sampling.
    """

    destination: np.ndarray | None = None
    _dflat: np.ndarray = dataclasses.field(init=False, repr=False)
    _drows: np.ndarray = dataclasses.field(init=False, repr=False)
    _dcats: np.ndarray = dataclasses.field(init=False, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        assert self.n_window is not None   # set by CategoryMap.__post_init__
        if self.destination is None:
            raise ValueError("destination: expected an int array of shape (S, n_window), got None")
        S, W = self.n_states, int(self.n_window)
        dest = np.asarray(self.destination)
        if dest.shape != (S, W) or not np.issubdtype(dest.dtype, np.integer):
            raise ValueError(f"destination: expected an int array of shape (S, n_window) = "
                             f"({S}, {W}), got {dest.dtype} {dest.shape}")
        dest = dest.astype(np.int64)
        if (dest < -1).any() or (dest >= S).any():
            raise ValueError(f"destination: entries must lie in [-1, {S}), found "
                             f"[{dest.min()}, {dest.max()}]")
        if (dest[self._rows, self._cats] != self._cols).any():
            raise ValueError("destination: a direct category must lead to its own next state "
                             "(destination[s, category[s, s']] == s')")
        rows, cats = np.nonzero(dest >= 0)
        if self.outside[rows, dest[rows, cats]].any():
            raise ValueError("destination: every destination must lie inside the window of its "
                             "state (outside next states belong to the 'other' category)")
        valid = self.valid.copy()
        valid[:, :W] = dest >= 0
        if (valid.sum(axis=1) < 1).any():
            raise ValueError("destination: every state needs at least one valid category")
        for name, arr in (("destination", dest), ("valid", valid), ("_dflat", rows * S + dest[rows, cats]),
                          ("_drows", rows), ("_dcats", cats)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    @property
    def is_identity(self) -> bool:
        """Always False (categories are moves, several may share a next state)."""
        return False

    def next_state_probs(self, q: Any, other_weights: Any | None = None) -> FloatArray:
        """Map category probabilities to next-state probabilities (truncated moves summed).

        Parameters
        ----------
        q : array_like of shape (..., S, K)
            Category probabilities per state.
        other_weights : array_like of shape (..., S, S), optional
            As in :meth:`CategoryMap.next_state_probs`.

        Returns
        -------
        ndarray of shape (..., S, S)
            ``out[..., s, s'] = sum_{k: destination[s, k] = s'} q[..., s, k]`` plus the
            "other" mass spread by ``other_weights``, with ``q`` renormalised over the valid
            categories.
        """
        q = np.asarray(q, dtype=np.float64)
        S, K = self.n_states, self.n_categories
        if q.ndim < 2 or q.shape[-2:] != (S, K):
            raise ValueError(f"q: expected shape (..., S, K) = (..., {S}, {K}), got {q.shape}")
        qv = self._valid_probs(q)
        lead = q.shape[:-2]
        m = int(np.prod(lead, dtype=np.int64))
        w = qv.reshape((m, S, K))[:, self._drows, self._dcats]                 # (m, P)
        idx = (np.arange(m)[:, None] * (S * S) + self._dflat[None, :]).ravel()
        out = np.bincount(idx, weights=w.ravel(), minlength=m * S * S).reshape(lead + (S, S))
        if self.has_other:
            ow = self.other_weights(np.zeros((S, S))) if other_weights is None else \
                np.asarray(other_weights, dtype=np.float64)
            out = out + qv[..., -1:] * ow
        return out

    def impute(self, counts: Any, q: Any | None = None) -> FloatArray:
        """Integer category counts for observed transitions, given category probabilities.

        Parameters
        ----------
        counts : array_like of shape (S, S)
            Observed next-state counts (one action), non-negative integers.
        q : array_like of shape (S, K), optional
            Current category probabilities (e.g. a fitted model's); ``None`` gives the
            uncensored reading :meth:`aggregate` (each transition counted as its direct move).

        Returns
        -------
        ndarray of shape (S, K)
            Each count ``counts[s, s']`` of a next state inside the window is split over the
            valid categories ``k`` with ``destination[s, k] = s'`` in proportion to
            ``q[s, k]``, rounded by systematic sampling: the ``n`` points ``u + j``
            (``j = 0..n-1``) are dealt to the categories by their cumulative shares, so every
            category gets the floor or the ceiling of its share. The offset ``u`` in [0, 1) is
            fixed per (s, s') (the fractional part of golden-ratio multiples), so the split is
            deterministic yet unbiased across transitions -- largest-remainder rounding would
            give every single observation to the most likely category (hard EM), which makes
            the imputed boundary rows too peaked. Counts outside the window go to "other".
            Row sums equal those of ``counts``.
        """
        c = np.asarray(counts, dtype=np.float64)
        S = self.n_states
        if c.shape != (S, S) or (c < 0).any() or not np.all(c == np.round(c)):
            raise ValueError(f"counts: expected non-negative integer counts of shape ({S}, {S}), "
                             f"got shape {c.shape}")
        if q is None:
            return self.aggregate(c)
        q = np.asarray(q, dtype=np.float64)
        if q.shape != (S, self.n_categories) or not np.all(np.isfinite(q)) or (q < 0).any():
            raise ValueError(f"q: expected finite non-negative probabilities of shape "
                             f"({S}, {self.n_categories}), got shape {q.shape}")
        qv = self._valid_probs(q)
        g = self._dflat                                           # the target of each pair
        n = c.ravel()[g]
        w = qv[self._drows, self._dcats] + 1e-300
        share = n * w / np.bincount(g, weights=w, minlength=S * S)[g]
        order = np.argsort(g, kind="stable")                      # by target, then category
        gs, sh = g[order], share[order]
        first = np.r_[True, gs[1:] != gs[:-1]]
        last = np.r_[gs[1:] != gs[:-1], True]
        cum = np.cumsum(sh)
        upper = cum - (cum - sh)[first][np.cumsum(first) - 1]     # cumulative share in the group
        upper[last] = n[order][last]                              # exact group totals
        lower = np.r_[0.0, upper[:-1]]
        lower[first] = 0.0
        u = np.modf(_GOLDEN * (gs + 1.0))[0]                      # fixed offset per target
        alloc = np.ceil(upper - u) - np.ceil(lower - u)
        out = np.zeros((S, self.n_categories))
        out[self._drows[order], self._dcats[order]] = alloc
        if self.has_other:
            out[:, -1] = np.where(self.outside, c, 0.0).sum(axis=-1)
        return out


# --------------------------------------------------------------------------------------
# Beliefs
# --------------------------------------------------------------------------------------
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


def _covariance_candidates(covariance: Any, n_states: int, many: bool) -> list[tuple[Any, Any]]:
    """``[(name, covariance)]``: one entry, or (with ``many``) a dict / sequence of candidates."""
    if many and isinstance(covariance, dict):
        items = list(covariance.items())
    elif many and isinstance(covariance, (list, tuple)):
        items = list(enumerate(covariance))
    else:
        items = [(0, covariance)]
    if not items:
        raise ValueError("covariance: expected at least one candidate covariance")
    out = []
    for name, cov in items:
        if not hasattr(cov, "gram"):
            cov = check_array(cov, "covariance", ndim=2)
            check_shape(cov, (n_states, n_states), "covariance")
        out.append((name, cov))
    return out


def _precision_candidates(precision: Any, n_states: int, many: bool) -> list[tuple[Any, Any]]:
    """``[(name, SparsePrecisionPrior)]`` from one precision or (with ``many``) candidates."""
    from ..core.prior import GaussianPrior
    from ..core.sparse_prior import SparsePrecisionPrior

    if many and isinstance(precision, dict):
        items = list(precision.items())
    elif many and isinstance(precision, (list, tuple)):
        items = list(enumerate(precision))
    else:
        items = [(0, precision)]
    if not items:
        raise ValueError("precision: expected at least one candidate precision")
    return [(name, q if isinstance(q, GaussianPrior)
             else SparsePrecisionPrior(q, size=n_states)) for name, q in items]


def _nearest_first(cmap: CategoryMap, n_dims: int, radius: int) -> CategoryMap:
    """The same relative map with its window categories ordered by move length (L1, then
    lexicographic); "other" stays last. A :class:`TruncatedCategoryMap` stays one, its
    destinations permuted with the categories.
    """
    disp = window_displacements(n_dims, radius)
    order = np.lexsort((np.arange(len(disp)), np.abs(disp).sum(axis=1)))  # new -> old index
    new_index = np.empty_like(order)
    new_index[order] = np.arange(order.size)
    cat = np.array(cmap.category, copy=True)
    assert cmap.n_window is not None   # set by CategoryMap.__post_init__
    window = (cat >= 0) & (cat < cmap.n_window)
    cat[window] = new_index[cat[window]]
    if isinstance(cmap, TruncatedCategoryMap):   # the intended moves, permuted alike
        assert cmap.destination is not None   # checked by TruncatedCategoryMap.__post_init__
        return dataclasses.replace(cmap, category=cat, destination=cmap.destination[:, order])
    return dataclasses.replace(cmap, category=cat)


#: From this many states on, :meth:`CorrelatedTransitionModel.for_mdp` uses the sparse GMRF
#: prior by default (``prior="auto"``), if there are at most :data:`GMRF_MAX_CATEGORIES`
#: categories. Measured on 2-D grid worlds (relative encoding, 10 categories, 4 actions,
#: 10 S random-walk transitions, all actions at a fixed scale), dense / GMRF fit time:
#: 0.35x at S = 100, 0.52x at 225, 0.85x at 400, 3.9x at 900. The sparse path factorises the
#: whole state space once per observed stick, the dense one each stick's observed set, so with
#: many categories (Taxi's 82 in 4-D: dense 11 s, GMRF 358 s for one fit of 6 actions) dense
#: stays cheaper.
GMRF_FROM_STATES = 500
#: Most categories for which ``prior="auto"`` may choose the GMRF prior.
GMRF_MAX_CATEGORIES = 30


def _gmrf_precisions(coords: np.ndarray, integral: bool, scales: list[float]) -> dict:
    """One normalised GMRF precision per length scale on the states' graph."""
    from ..kernels import graph_precision, knn_adjacency, lattice_adjacency

    if integral:
        adjacency = lattice_adjacency(coords.astype(np.int64))
    else:
        adjacency = knn_adjacency(coords, n_neighbors=min(2 * coords.shape[1] + 2,
                                                          coords.shape[0] - 1))
    return {v: graph_precision(adjacency, kappa=np.sqrt(8.0) / v, alpha=2) for v in scales}


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


def _scale_selection(selection: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Constructor arguments of a ``selection`` rule of :meth:`CorrelatedTransitionModel.for_mdp`."""
    if selection in ("collapsed", "elbo"):
        return {"selection": selection}
    if selection == "em":
        return {"learn_scale": True}
    if selection == "fixed":
        return {"learn_scale": False, "scale_prior": None, "scale": kwargs.get("scale", 1.0)}
    raise ValueError(f"selection: expected 'collapsed', 'elbo', 'em' or 'fixed', got "
                     f"{selection!r}")


class CorrelatedTransitionModel(_TransitionBelief):
    r"""The paper's correlated belief: one correlated multinomial per action over the states.

    For every action ``a`` the category counts ``X^{(a)}[s, k]`` (next states of ``s`` under
    ``a``, mapped to categories by ``category_map``) follow
    :class:`corrpriors.core.model.CorrelatedMultinomial` with the states as covariates:

    .. math:: \psi^{(a)}_{\cdot k} \sim N(\mu_k, \theta_a \tilde\Sigma), \qquad
              q^{(a)}_s = \Pi_{SB}(\psi^{(a)}_{s \cdot}), \qquad
              X^{(a)}_{s \cdot} \sim Mult(N_{sa}, q^{(a)}_s),

    and next-state probabilities follow from ``q`` through the category map (see the
    module docstring). Refits are *lazy* -- an action's model is refitted only when its
    counts changed since its last fit -- and *warm-started* from that fit.

    Parameters
    ----------
    n_states : int
        S.
    n_actions : int
        A.
    covariance : ndarray of shape (S, S) or BoundKernel
        :math:`\tilde\Sigma` over the states (e.g. a squared-exponential kernel on the
        state coordinates), shared by all actions.
    category_map : CategoryMap, optional
        Default :func:`identity_category_map` (absolute encoding).
    learn_scale : bool, default=True
        Learn :math:`\theta_a` by (MAP-)EM at every fit.
    learn_mean : {None, "constant", "full"}, default="constant"
        Learn one prior mean per stick (and action); ``None`` keeps the uniform logits;
        ``"full"`` is the paper's (coupling-destroying) choice, see the core model.
    scale_prior : (shape, rate) or None, default=(2.0, 1.0)
        Gamma hyper-prior on :math:`\theta_a` (MAP-EM); keeps the scale positive while the
        data are scarce, but cannot stop EM from shrinking it (see
        :class:`~corrpriors.core.model.CorrelatedMultinomial`); with ``learn_scale=False``
        and a fixed ``scale`` the scale can instead be chosen by the models'
        ``collapsed_bound()``, as the system-identification experiment does.
    probs_method : {"plugin", "mc"}, default="plugin"
        How :meth:`mean` turns :math:`q(\psi)` into probabilities: ``"plugin"``
        :math:`\Pi_{SB}(\lambda)` (the paper's, deterministic) or a Monte-Carlo posterior
        mean drawn from ``mc_rng``.
    max_iter : int, default=100
        CAVI iteration cap per refit (warm starts need few).
    tol : float, default=1e-6
        Relative objective change that stops a refit.
    impute_rounds : int, default=3
        With a :class:`TruncatedCategoryMap` (censored observations at the boundary): at
        most this many impute-then-fit rounds per refit (EM; it stops early when the
        imputed counts no longer change, and refits continue it across new data).
    selection : {None, "collapsed", "elbo"}, default=None
        ``None``: the scale is learned by (MAP-)EM (``learn_scale``) or fixed. Otherwise, at
        every refit and for every action, the scale :math:`\theta_a` (and, if ``covariance``
        lists several candidates, the covariance) maximising this criterion is chosen by a
        warm-started climb over a log lattice of scales
        (:class:`~corrpriors.core.selection.ScaleSearch`); ``"collapsed"`` (the collapsed
        bound) does not shrink :math:`\theta` on scarce data the way EM on the ELBO does.
        ``learn_scale`` and ``scale_prior`` are then ignored.
    scale_range : (float, float), default=(1e-2, 1e4)
        Range of the scale lattice (with ``selection``).
    scale_step : float, default=0.25
        Lattice spacing in decades (with ``selection``).
    mc_rng : None, int, numpy.random.SeedSequence or numpy.random.Generator, default=None
        Randomness of ``probs_method="mc"`` (unused by ``"plugin"``). An int or SeedSequence
        makes every Monte-Carlo mean reproducible (each call restarts from it: common random
        numbers across refits); a Generator is advanced by every call; ``None`` draws fresh
        OS entropy.
    **model_kwargs
        Passed on to :class:`~corrpriors.core.model.CorrelatedMultinomial` (for example
        ``mean_prior_std`` -- default 3.0 here, a weak normal hyper-prior on the constant
        means -- ``learn_kernel``, ``scale``).

    Attributes
    ----------
    models_ : list of CorrelatedMultinomial
        One per action (fitted lazily).
    n_fits_ : int
        Number of per-action model fits performed so far.
    fit_seconds_ : float
        Wall-clock seconds spent in those fits.
    n_unconverged_ : int
        Fits that stopped at ``max_iter`` (expected with small caps; their
        :class:`~corrpriors.exceptions.ConvergenceWarning` is suppressed and counted here).
    selected_ : list of dict or None
        With ``selection``: per action, the chosen ``candidate`` (index or name of the
        covariance), ``scale`` and criterion ``value`` at the last refit (``None`` before).
    """

    def __init__(self, n_states: int, n_actions: int, covariance: Any = None,
                 category_map: CategoryMap | None = None, learn_scale: bool = True,
                 learn_mean: str | None = "constant",
                 scale_prior: tuple[float, float] | None = (2.0, 1.0),
                 probs_method: str = "plugin", max_iter: int = 100, tol: float = 1e-6,
                 selection: str | None = None, scale_range: tuple[float, float] = (1e-2, 1e4),
                 scale_step: float = 0.25, precision: Any = None, impute_rounds: int = 3, *,
                 mc_rng: SeedLike = None, **model_kwargs: Any) -> None:
        super().__init__(n_states, n_actions)
        from ..core.model import CorrelatedMultinomial
        from ..core.selection import ScaleSearch, check_criterion

        cmap = identity_category_map(self.n_states) if category_map is None else category_map
        if not isinstance(cmap, CategoryMap):
            raise TypeError(f"category_map: expected a CategoryMap, got {type(cmap).__name__}")
        if cmap.n_states != self.n_states:
            raise ValueError(f"category_map: expected a map over S = {self.n_states} states, "
                             f"got {cmap.n_states}")
        if probs_method not in ("plugin", "mc"):
            raise ValueError(f"probs_method: expected 'plugin' or 'mc', got {probs_method!r}")
        if learn_mean not in (None, "constant", "full"):
            raise ValueError(f"learn_mean: expected None, 'constant' or 'full', got {learn_mean!r}")
        if int(impute_rounds) != impute_rounds or impute_rounds < 1:
            raise ValueError(f"impute_rounds: expected a positive int, got {impute_rounds!r}")
        self.impute_rounds = int(impute_rounds)
        if selection is not None:
            check_criterion(selection)
        if (covariance is None) == (precision is None):
            raise ValueError("covariance, precision: expected exactly one of them, got "
                             + ("neither" if covariance is None else "both"))
        if precision is None:
            key = "covariance"
            candidates = _covariance_candidates(covariance, self.n_states,
                                                many=selection is not None)
        else:  # one sparse-precision prior per candidate, shared by every action and scale
            key = "precision"
            candidates = _precision_candidates(precision, self.n_states,
                                               many=selection is not None)
        self.covariance = covariance if selection is not None or covariance is None \
            else candidates[0][1]
        self.precision = precision
        self.category_map = cmap
        self.probs_method = probs_method
        as_generator(mc_rng, name="mc_rng")  # validates the seed now, not at the first mean()
        self.mc_rng = mc_rng
        self.selection = selection
        kwargs: dict[str, Any] = {"mean_prior_std": 3.0}
        kwargs.update(model_kwargs)
        templates = [
            (name, CorrelatedMultinomial(**{key: cov}, learn_mean=learn_mean,
                                         learn_scale=learn_scale, max_iter=max_iter, tol=tol,
                                         scale_prior=scale_prior, warm_start=True, **kwargs))
            for name, cov in candidates]
        self.models_ = [templates[0][1]] + [
            CorrelatedMultinomial(**{key: candidates[0][1]}, learn_mean=learn_mean,
                                  learn_scale=learn_scale, max_iter=max_iter, tol=tol,
                                  scale_prior=scale_prior, warm_start=True, **kwargs)
            for _ in range(self.n_actions - 1)]
        self._searches: list[list[tuple[Any, Any]]] | None = None
        self.selected_: list[dict | None] | None = None
        if selection is not None:
            lo, hi = (float(v) for v in scale_range)
            self._searches = [
                [(name, ScaleSearch(t, criterion=selection, low=lo, high=hi, step=scale_step))
                 for name, t in templates]
                for _ in range(self.n_actions)]
            self.selected_ = [None] * self.n_actions
        self.n_fits_ = 0
        self.fit_seconds_ = 0.0
        self.n_unconverged_ = 0
        self._fitted_versions = np.full(self.n_actions, -1, dtype=np.int64)   # data of each fit
        self._cache: dict[str, Any] = {}
        self._far = np.zeros(self.n_states)   # far jumps observed into each state (pooling)

    @classmethod
    def for_mdp(cls, mdp: Any, *, encoding: str | None = None, lengthscale: Any = 2.0,
                radius: int = 1, selection: str = "collapsed", prior: str = "auto",
                category_order: str = "nearest", boundary: str | None = None,
                other_pooling: float = 1.0, **kwargs: Any) -> CorrelatedTransitionModel:
        r"""The correlated belief for an MDP's states in one call.

        A squared-exponential kernel on the state coordinates,
        :math:`\tilde\Sigma_{ij} = \exp(-\lVert x_i - x_j\rVert^2 / \ell^2)` (the paper's
        form, :class:`~corrpriors.kernels.SquaredExponential`), with
        either category encoding.

        Parameters
        ----------
        mdp : TabularMDP or EnvInfo
            Anything with ``n_states``, ``n_actions`` and ``coordinates`` (ndarray of shape
            (S, D)); only these are used (never the transitions).
        encoding : {"relative", "absolute"}, optional
            ``"relative"``: category = displacement ``coords[s'] - coords[s]`` within
            ``radius`` (:func:`displacement_category_map`), so that "the same move" is shared
            between states -- the default when the coordinates are integers. ``"absolute"``:
            category = next state (the paper's encoding, ``pg_absolute`` in the experiments)
            -- the default otherwise.
        lengthscale : float or sequence of float, default=2.0
            :math:`\ell`, in coordinate units; with several values and a criterion
            ``selection``, every action picks the best one at every refit.
        radius : int, default=1
            Window half-width of the relative encoding (moves beyond it share one "other"
            category per state).
        selection : {"collapsed", "elbo", "em", "fixed"}, default="collapsed"
            How the prior scale :math:`\theta_a` (and the length scale, among several) is
            chosen at every refit: ``"collapsed"`` -- the maximiser of the collapsed bound on
            a log lattice of scales (:class:`~corrpriors.core.selection.ScaleSearch`, warm
            started from the previous choice); ``"elbo"`` -- the same with the ELBO;
            ``"em"`` -- MAP-EM (Gamma(2, 1) hyper-prior; one fit per refit, the cheapest, but
            EM shrinks the scale on scarce data); ``"fixed"`` -- kept at ``scale`` (a keyword
            argument, default 1).
        category_order : {"nearest", "lexicographic"}, default="nearest"
            Order of the relative encoding's window categories along the stick-breaking
            construction. ``"nearest"``: by the length of the move (staying first, then the
            unit moves, ...), so that the frequent moves come first and the later sticks are
            observed only where a rare move was seen -- the same model family, and far
            cheaper when the window is large (Taxi, 82 categories: one fit of all actions
            11.2 s -> 1.7 s). ``"lexicographic"``: :func:`displacement_category_map`'s order
            (the paper experiments').
        boundary : {"exclude", "clip", "stay"}, optional
            What a move of the relative encoding that would leave the state space means
            (:func:`displacement_category_map`): ``"exclude"`` -- a structural zero, so a
            move into a wall is observed as "stay in place" and the kernel carries that to
            the neighbouring states, where the move works; ``"stay"`` -- the categories are
            the *intended* moves and one that does not land on a state keeps the agent in
            place (a grid's edges and walls; boundary observations are censored and imputed
            by EM, see :class:`TruncatedCategoryMap`); ``"clip"`` -- clipped to the
            coordinates' box (a queue's finite buffer). Default: ``"stay"`` when the states
            are the cells of a grid (``mdp.shape`` is set: FrozenLake, CliffWalking,
            corrpriors' grid worlds), else ``"exclude"`` (Taxi, features). Measured with
            ``corrpriors sysid`` / ``psrl`` (docs: "Your own environment"): on FrozenLake
            8 x 8 "stay" lowers the Hellinger error by a quarter to three quarters and lets
            the CliffWalking PSRL policies find the optimum sooner, at 0.7-2.2x the CPU time;
            on Taxi's 4-D coordinates it helps below 1,000 transitions, is worse from 3,000
            on and costs 1.8x. Only the relative encoding has moves; with
            ``encoding="absolute"`` it must be ``None`` or ``"exclude"``.
        other_pooling : float, default=1.0
            Relative encoding: weight (pseudo-counts) of the destinations of all far jumps
            observed so far in the prior of where an unobserved far jump of a state leads
            (:class:`CategoryMap`); 0 spreads it uniformly over the states outside the
            window. Measured (docs: "Your own environment"): on CliffWalking a fall from one
            cliff cell then tells every other cliff cell that falling leads back to the start;
            the PSRL policies are optimal at step 500 in 7 and 8 of 10 seeds against 1 and 3
            without, and on CliffWalkingSlippery reach the goal after 500 steps with
            probability .51 / .45 against .06 / .07.
        prior : {"auto", "dense", "gmrf"}, default="auto"
            ``"dense"``: the squared-exponential kernel above (cost per fit about
            :math:`\sum_k |O_k|^3`, cubic in S). ``"gmrf"``: a Matern-like Gaussian Markov random
            field on the states' graph -- the lattice of integer coordinates
            (:func:`~corrpriors.kernels.lattice_adjacency`) or a k-nearest-neighbour graph of
            real features -- :math:`Q = \tau(\kappa^2 I + L)^2` with :math:`\kappa = \sqrt8/\ell`
            (the 2-D Matern range) and unit geometric-mean variance
            (:func:`~corrpriors.kernels.graph_precision`), fitted exactly by sparse Cholesky
            factorisations (cost about :math:`S^{1.5}` on grids). ``"auto"``: ``"gmrf"`` from
            :data:`GMRF_FROM_STATES` states on with at most :data:`GMRF_MAX_CATEGORIES`
            categories (where it is faster, measured), else ``"dense"``.
        **kwargs
            Passed on to the constructor (``max_iter``, ``tol``, ``learn_mean``, ``scale``,
            ...).

        Returns
        -------
        CorrelatedTransitionModel

        Examples
        --------
        >>> import gymnasium
        >>> from corrpriors.envs import from_gymnasium
        >>> mdp = from_gymnasium(gymnasium.make("FrozenLake-v1", map_name="4x4"))
        >>> belief = CorrelatedTransitionModel.for_mdp(mdp)
        >>> belief.n_categories            # the 3 x 3 window of moves and one "other" (jumps)
        10
        """
        from ..kernels import SquaredExponential

        S, A = int(mdp.n_states), int(mdp.n_actions)
        coords = getattr(mdp, "coordinates", None)
        if coords is None:
            raise ValueError(f"mdp: {getattr(mdp, 'name', 'the MDP')} has no state coordinates; "
                             "give features (corrpriors.envs.from_gymnasium(env, features=...)) "
                             "or use a DirichletTransitionModel")
        coords = check_array(coords, "mdp.coordinates", ndim=2)
        integral = bool(np.all(coords == np.round(coords)))
        if boundary is not None and boundary not in BOUNDARY_RULES:
            raise ValueError(f"boundary: expected None or one of {', '.join(BOUNDARY_RULES)}, "
                             f"got {boundary!r}")
        if encoding is None:
            encoding = "relative" if integral else "absolute"
        if encoding == "relative":
            if not integral:
                raise ValueError("mdp.coordinates: expected integer coordinates for the relative "
                                 "encoding (displacements between states); use "
                                 "encoding='absolute' for real-valued features")
            if boundary is None:
                boundary = "stay" if getattr(mdp, "shape", None) is not None else "exclude"
            cmap = displacement_category_map(coords.astype(np.int64), radius, boundary=boundary,
                                             other_pooling=other_pooling)
            if category_order == "nearest":
                cmap = _nearest_first(cmap, coords.shape[1], radius)
            elif category_order != "lexicographic":
                raise ValueError(f"category_order: expected 'nearest' or 'lexicographic', got "
                                 f"{category_order!r}")
        elif encoding == "absolute":
            if boundary not in (None, "exclude"):
                raise ValueError(f"boundary: the absolute encoding has no moves to truncate; "
                                 f"expected None or 'exclude', got {boundary!r}")
            cmap = identity_category_map(S)
        else:
            raise ValueError(f"encoding: expected 'relative' or 'absolute', got {encoding!r}")
        scales = [check_positive(v, "lengthscale") for v in np.atleast_1d(lengthscale)]
        kwargs.update(_scale_selection(selection, kwargs))
        if len(scales) > 1 and "selection" not in kwargs:
            raise ValueError(f"lengthscale: several candidates need selection='collapsed' or "
                             f"'elbo', got selection={selection!r}")
        if prior == "auto":
            prior = ("gmrf" if S >= GMRF_FROM_STATES and cmap.n_categories <= GMRF_MAX_CATEGORIES
                     else "dense")
        if prior == "dense":
            priors = {v: SquaredExponential(lengthscale=float(v)).bind(coords=coords)
                      for v in scales}
        elif prior == "gmrf":
            priors = _gmrf_precisions(coords, integral, scales)
        else:
            raise ValueError(f"prior: expected 'auto', 'dense' or 'gmrf', got {prior!r}")
        chosen: Any = priors if "selection" in kwargs else priors[scales[0]]
        key = "covariance" if prior == "dense" else "precision"
        return cls(S, A, category_map=cmap, **{key: chosen}, **kwargs)

    @property
    def n_categories(self) -> int:
        """K, the number of categories per state."""
        return self.category_map.n_categories

    @property
    def scale_(self) -> FloatArray:
        r"""Learned scales :math:`\theta_a`, ndarray of shape (A,)."""
        self.refit()
        return np.array([m.scale_ for m in self.models_])

    def refit(self, actions: Any = None) -> CorrelatedTransitionModel:
        """Fit every action's model whose counts changed since its last fit (lazy, warm).

        Parameters
        ----------
        actions : sequence of int, optional
            Only these actions (default: all).

        Returns
        -------
        self
        """
        import time
        import warnings

        from ..exceptions import ConvergenceWarning

        if self._cache.get("version") == self._version:
            return self
        which = range(self.n_actions) if actions is None else [int(a) for a in actions]
        censored = isinstance(self.category_map, TruncatedCategoryMap)
        cat_counts = self.category_map.aggregate(self._counts.transpose(1, 0, 2))   # (A, S, K)
        for a in which:
            if self._fitted_versions[a] == self._action_versions[a]:   # its data are unchanged
                continue
            tic = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                model = self._fit_action(a, cat_counts[a], censored)
            self.fit_seconds_ += time.perf_counter() - tic
            self.n_unconverged_ += int(not model.converged_)
            self._fitted_versions[a] = self._action_versions[a]
        if actions is None:
            self._cache = {"version": self._version}
        return self

    def _fit_action(self, a: int, counts: FloatArray, censored: bool) -> Any:
        """Fit (or select) action ``a``'s model and return it.

        With a censored category map this is EM: impute from the current fit, refit, repeat
        while the imputation changes (at most ``impute_rounds`` fits or selections, each
        warm-started).
        """
        if not censored:
            return self._fit_counts(a, counts)
        cmap, raw = self.category_map, self._counts[:, a, :]
        assert isinstance(cmap, TruncatedCategoryMap)   # the only censoring map
        current = self.models_[a]
        x = cmap.impute(raw, current.probs() if hasattr(current, "result_") else None)
        for _ in range(self.impute_rounds):
            model = self._fit_counts(a, x)
            x_new = cmap.impute(raw, model.probs())
            if np.array_equal(x_new, x):
                break
            x = x_new
        return model

    def _fit_counts(self, a: int, counts: FloatArray) -> Any:
        """One fit of action ``a``'s model to category counts (or a selection); the model."""
        if self._searches is None:
            self.n_fits_ += 1
            return self.models_[a].fit(counts, warm_start=True)
        return self._select(a, counts)

    def _select(self, a: int, counts: FloatArray) -> Any:
        """Choose action ``a``'s covariance and scale by the criterion; returns the model."""
        assert self._searches is not None and self.selected_ is not None
        best: tuple[float, Any, Any] | None = None
        for name, search in self._searches[a]:
            before = search.n_fits_
            sel = search.select(counts)
            self.n_fits_ += search.n_fits_ - before
            if best is None or sel.value > best[0]:
                best = (sel.value, name, sel)
        assert best is not None   # at least one candidate per action
        value, name, sel = best
        self.models_[a] = sel.model
        self.selected_[a] = {"candidate": name, "scale": sel.scale, "value": value}
        return sel.model

    def action_mean(self, action: int) -> FloatArray:
        """Posterior-mean next-state probabilities of one action, ndarray of shape (S, S).

        Refits only that action's model (if its counts changed).
        """
        a = int(action)
        if not 0 <= a < self.n_actions:
            raise ValueError(f"action: expected 0 <= action < {self.n_actions}, got {action!r}")
        self.refit([a])
        q = self.models_[a].probs(method=self.probs_method, rng=self.mc_rng)
        return self._to_next_states(q, a)

    def _to_next_states(self, q: FloatArray, a: int) -> FloatArray:
        cmap = self.category_map
        if cmap.is_identity:
            return q
        return cmap.next_state_probs(q, cmap.other_weights(self._counts[:, a, :], self._far))

    def update(self, states: Any, actions: Any, next_states: Any) -> CorrelatedTransitionModel:
        """Accumulate observed transitions ``(states[t], actions[t]) -> next_states[t]``.

        Parameters
        ----------
        states, actions, next_states : array_like of shape (T,) or scalars
            Integer indices.

        Returns
        -------
        self
        """
        super().update(states, actions, next_states)   # validates
        s = np.atleast_1d(np.asarray(states)).astype(np.int64)      # validated above
        s2 = np.atleast_1d(np.asarray(next_states)).astype(np.int64)
        far = self.category_map.outside[s, s2]           # where far jumps led (pooling)
        self._far += np.bincount(s2[far], minlength=self.n_states)
        return self

    def set_counts(self, counts: Any) -> CorrelatedTransitionModel:
        """Replace the data by a count array.

        Parameters
        ----------
        counts : array_like of shape (S, A, S)
            Non-negative integer counts.

        Returns
        -------
        self
        """
        super().set_counts(counts)
        self._far = self.category_map.far_destinations(np.moveaxis(self._counts, 1, 0))
        return self

    def category_probs(self) -> FloatArray:
        """Posterior category probabilities per action, ndarray of shape (A, S, K)."""
        self.refit()
        return np.stack([m.probs(method=self.probs_method, rng=self.mc_rng) for m in self.models_])

    def mean(self) -> FloatArray:
        """Posterior-mean (``probs_method``) transition model, ndarray of shape (S, A, S)."""
        self.refit()
        if "mean" not in self._cache:
            q = self.category_probs()
            self._cache["mean"] = np.stack([self._to_next_states(q[a], a)
                                            for a in range(self.n_actions)], axis=1)
        return self._cache["mean"].copy()

    def sample_many(self, n: int, *, rng: SeedLike) -> FloatArray:
        r"""``n`` joint draws from :math:`q(\psi)` mapped to models, shape (n, S, A, S)."""
        n = _check_n(n)
        gen = as_generator(rng)
        self.refit()
        out = np.empty((n, self.n_states, self.n_actions, self.n_states))
        for a, model in enumerate(self.models_):
            out[:, :, a, :] = self._to_next_states(model.sample_probs(n, rng=gen), a)
        return out
