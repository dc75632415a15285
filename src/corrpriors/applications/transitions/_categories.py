r"""Category maps: which next state of ``s`` plays the role of category ``k``.

See the package docstring (:mod:`corrpriors.applications.transitions`) for the encodings.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any

import numpy as np

from ..._memory import check_memory
from ..._typing import FloatArray, IntArray
from ..._validation import check_int, check_positive
from ...mdp.tabular import BOUNDARY_RULES

__all__ = [
    "BOUNDARY_RULES",
    "CategoryMap",
    "TruncatedCategoryMap",
    "MAX_COORDINATE",
    "check_radius",
    "displacement_category_map",
    "identity_category_map",
    "integer_coordinates",
    "integer_coordinates_problem",
    "valid_probs",
    "window_displacements",
    "window_size",
]


_GOLDEN = (np.sqrt(5.0) - 1.0) / 2.0   # offsets frac(k * golden) of the systematic split

#: Bytes per (state, next state) pair that :func:`identity_category_map` allocates at its peak
#: (measured: 58; its (S, S) int64 input, and what :class:`CategoryMap` derives from it: the
#: int64 copy, ``index``, ``_rows``, ``_cols``, ``_cats``, the boolean masks, the histogram).
IDENTITY_MAP_BYTES_PER_PAIR = 64
#: Bytes per (state, next state) pair that :func:`displacement_category_map` allocates at its
#: peak, whatever the dimension (measured with ``tracemalloc``: 26-29 at D = 1, 2, 3, with every
#: boundary rule; 49 and 73 at D = 2, 3 before round 20 built the map one coordinate at a time):
#: the (S, S) int64 map and its window mask, then :class:`CategoryMap`'s derived arrays.
DISPLACEMENT_MAP_BYTES_PER_PAIR = 32


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
        """Renormalise ``q`` over the valid categories of each state (:func:`valid_probs`)."""
        return valid_probs(self.valid, q)

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


def valid_probs(valid: np.ndarray, q: FloatArray) -> FloatArray:
    """Renormalise category probabilities over the valid categories of each state.

    Mass on structural zeros is discarded; a row with all its mass there falls back to
    uniform over its valid categories.

    Parameters
    ----------
    valid : ndarray of bool, shape (S, K)
    q : ndarray of shape (..., S, K)

    Returns
    -------
    ndarray of shape (..., S, K)
    """
    qv = np.where(valid, q, 0.0)
    z = qv.sum(axis=-1, keepdims=True)
    bad = ~(z > 1e-300)
    if bad.any():
        uniform = valid / valid.sum(axis=1, keepdims=True)
        qv = np.where(bad, uniform, qv)
        z = np.where(bad, 1.0, z)
    return qv / z


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
    S = check_int(n_states, "n_states", 2)
    check_memory(IDENTITY_MAP_BYTES_PER_PAIR * float(S) ** 2,
                 f"identity_category_map ({S:,} states: (S, S) category arrays)",
                 "use the relative encoding with sparse storage (window_category_map, "
                 "CorrelatedTransitionModel.for_mdp(..., sparse=True)) or fewer states")
    return CategoryMap(np.tile(np.arange(S, dtype=np.int64), (S, 1)), n_window=S)


#: The largest magnitude of a coordinate of the relative encoding: float64 holds every integer
#: exactly only up to 2**53, and below it the encoding's int64 arithmetic (displacements, window
#: indices) cannot overflow. Coordinates of order 1e300 were cast to int64 as one value, and
#: refused as "states must have distinct coordinates".
MAX_COORDINATE = 2 ** 53


def integer_coordinates_problem(coordinates: np.ndarray) -> str | None:
    """Why ``coordinates`` (ndarray of shape (S, D), finite) are not distinct integers of
    magnitude at most :data:`MAX_COORDINATE`, as the relative encoding needs; None if they are.
    """
    coords = np.asarray(coordinates, dtype=np.float64)
    if not np.all(coords == np.round(coords)):
        return "they are not all integers"
    big = float(np.abs(coords).max(initial=0.0))
    if big > MAX_COORDINATE:
        return (f"they reach {big:.6g} in magnitude, beyond 2**53 = {MAX_COORDINATE:,} (float64 "
                f"holds integers exactly only up to there)")
    ints = coords.astype(np.int64)
    _, first, inverse = np.unique(ints, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    repeated = np.flatnonzero(first[inverse] != np.arange(len(ints)))
    if repeated.size:
        j = int(repeated[0])
        i = int(first[inverse[j]])
        return f"states {i} and {j} share the coordinates {tuple(int(v) for v in ints[j])}"
    return None


def integer_coordinates(coordinates: Any, name: str = "coordinates") -> IntArray:
    """``coordinates`` as int64, if they can be the relative encoding's; else a ``ValueError``.

    An (S, D) array, S >= 2, of distinct integers of magnitude at most :data:`MAX_COORDINATE`
    (:func:`integer_coordinates_problem`); ``name`` is the argument named in the message.
    """
    coords = np.asarray(coordinates)
    if coords.ndim != 2 or coords.shape[0] < 2:
        raise ValueError(f"{name}: expected shape (S, D) with S >= 2, got {coords.shape}")
    problem = integer_coordinates_problem(coords)
    if problem is not None:
        raise ValueError(f"{name}: expected distinct integer coordinates (the relative encoding); "
                         f"{problem}")
    return coords.astype(np.int64)


def check_radius(radius: Any, coordinates: np.ndarray) -> int:
    """``radius`` as an int, if it is a window half-width the relative encoding can use.

    At least 1 and at most the largest coordinate difference of two states (``coordinates``,
    ndarray of shape (S, D)): a wider window only adds categories no transition reaches --
    ``(2 radius + 1)^D`` of them, each an (S,) column of every action's model (a radius of 1,000
    on a 10 x 10 grid asked for about 24 GB before it was refused).
    """
    if isinstance(radius, bool) or int(radius) != radius or radius < 1:
        raise ValueError(f"radius: expected an int >= 1, got {radius!r}")
    coords = np.asarray(coordinates, dtype=float)
    span = int(np.ceil((coords.max(axis=0) - coords.min(axis=0)).max())) if coords.size else 0
    if radius > max(span, 1):
        raise ValueError(f"radius: expected at most {max(span, 1)} (the largest coordinate difference of two "
                         f"states; a wider window only adds empty categories), got {radius}")
    return int(radius)


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
    coords = integer_coordinates(coordinates)
    r = check_radius(radius, coords)
    D = coords.shape[1]
    S = coords.shape[0]
    # per (state, window category): the masks and counts of CategoryMap (24-28 bytes measured);
    # for the censored maps also the aimed points, their lookup and destinations (77, 81, 128 and
    # 179 bytes at D = 1 ... 4)
    per_entry = 32.0 if boundary == "exclude" else 8.0 * (5 * D + 6)
    check_memory(DISPLACEMENT_MAP_BYTES_PER_PAIR * float(S) ** 2 + per_entry * S * window_size(D, r),
                 f"displacement_category_map (S = {S:,} states, D = {D}, radius {r}: (2 radius + 1)^D = "
                 f"{window_size(D, r):.3g} window categories)",
                 "use a smaller radius (at most the largest coordinate difference of two states is useful)")
    width = 2 * r + 1
    cat = _window_categories(coords, r)
    if boundary == "exclude":
        return CategoryMap(cat, n_window=width ** D, other_prior=other_prior,
                           other_pooling=other_pooling)
    aim = coords[:, None, :] + window_displacements(D, r)[None]   # (S, n_window, D)
    if boundary == "clip":
        aim = np.clip(aim, coords.min(axis=0), coords.max(axis=0))
    dest = _state_at(coords, aim.reshape(-1, D)).reshape(S, width ** D)
    if boundary == "stay":
        dest = np.where(dest < 0, np.arange(S)[:, None], dest)
    return TruncatedCategoryMap(cat, n_window=width ** D, other_prior=other_prior,
                                other_pooling=other_pooling, destination=dest)


def window_size(n_dims: int, radius: int) -> float:
    """W = (2 radius + 1)^D, the relative encoding's window categories, as a float for size
    estimates (``inf`` beyond the float range: Python's float power raises there instead).
    """
    try:
        return float(2 * int(radius) + 1) ** int(n_dims)
    except OverflowError:
        return math.inf


def _window_categories(coords: IntArray, radius: int) -> IntArray:
    """``category[s, s']`` of the relative encoding: the lexicographic index of the displacement
    ``coords[s'] - coords[s]`` in the window of half-width ``radius``, -1 beyond it.

    One coordinate at a time, so that the peak is a few (S, S) arrays whatever D (an (S, S, D)
    displacement array and its temporaries took 49 bytes per pair at D = 2, 73 at D = 3).

    Parameters
    ----------
    coords : ndarray of shape (S, D)
        Integer coordinates.
    radius : int

    Returns
    -------
    ndarray of shape (S, S), int64
    """
    S, D = coords.shape
    width = 2 * radius + 1
    cat = np.zeros((S, S), dtype=np.int64)
    inside = np.ones((S, S), dtype=bool)
    for d in range(D):
        step = np.subtract.outer(coords[:, d], coords[:, d])     # coords[s] - coords[s'], (S, S)
        np.negative(step, out=step)
        inside &= np.abs(step) <= radius
        step += radius
        step *= width ** (D - 1 - d)
        cat += step
        del step
    cat[~inside] = -1
    return cat


def _state_at(coords: IntArray, points: IntArray) -> IntArray:
    """The state at each point: ``i`` with ``coords[i] == points[j]``, -1 where no state is.

    Parameters
    ----------
    coords : ndarray of shape (S, D)
        Distinct integer coordinates of the states.
    points : ndarray of shape (N, D)

    Returns
    -------
    ndarray of shape (N,), int64
    """
    S = coords.shape[0]
    _, inverse = np.unique(np.concatenate([coords, points]), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    state = np.full(int(inverse.max()) + 1, -1, dtype=np.int64)
    state[inverse[:S]] = np.arange(S)
    return state[inverse[S:]]


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
