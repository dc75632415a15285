r"""Category maps stored by their window only, and the category algebra on observed pairs.

:func:`displacement_category_map` stores an (S, S) category array: 8 S^2 bytes, 80 GB at
10^5 states. A displacement category is a function of coordinates, so
:class:`WindowCategoryMap` keeps only the (S, W) next state of every window category (W =
(2 radius + 1)^D) and finds the category of an observed transition ``(s, s')`` by a sorted
lookup. The functions below compute from *observed pairs* ``(s, s', n)`` what the dense
:class:`CategoryMap` methods compute from (S, S) count arrays -- category counts, imputed
counts of censored maps, pooled far-jump destinations -- and map category probabilities to a
:class:`BackgroundTransitions` table. They accept either kind of map (a dense map is read through
the same window pairs), so the dense methods are their oracle on small problems.
"""

from __future__ import annotations

import dataclasses
import weakref
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..._memory import check_memory
from ..._typing import FloatArray, IntArray
from ..._validation import check_positive
from ._categories import (
    _GOLDEN,
    BOUNDARY_RULES,
    CategoryMap,
    TruncatedCategoryMap,
    check_radius,
    integer_coordinates,
    valid_probs,
    window_displacements,
    window_size,
)
from ._tables import BackgroundTransitions

__all__ = ["WindowCategoryMap", "window_category_map"]


@dataclasses.dataclass(frozen=True, eq=False)
class WindowCategoryMap:
    """A relative (displacement) category map stored by its window: no (S, S) arrays.

    The same map as :func:`displacement_category_map` (then, with ``order``, the same category
    order): category ``k`` of state ``s`` is the move to ``direct[s, k]``; next states outside
    the window go to the last, "other", category.

    Parameters
    ----------
    direct : ndarray of shape (S, W)
        Next state whose move from ``s`` is window category ``k`` (``-1``: no such state).
    destination : ndarray of shape (S, W), optional
        Censored maps (boundary ``"stay"`` / ``"clip"``): the next state each *intended* move
        leads to (``-1``: a structural zero); several categories may share one. ``None``:
        uncensored (boundary ``"exclude"``).
    other_prior, other_pooling : float
        See :class:`CategoryMap`.

    Attributes
    ----------
    n_states, n_window, n_categories : int
        S, W and K = W + 1 ("other" is always present when S > W).
    has_other : bool
    valid : ndarray of shape (S, K)
    n_outside : ndarray of shape (S,)
        Number of next states outside the window of each state.
    censored : bool
    """

    direct: np.ndarray
    destination: np.ndarray | None = None
    other_prior: float = 0.01
    other_pooling: float = 0.0
    valid: np.ndarray = dataclasses.field(init=False, repr=False)
    n_outside: np.ndarray = dataclasses.field(init=False, repr=False)
    has_other: bool = dataclasses.field(init=False, repr=False)

    def __post_init__(self) -> None:
        direct = np.asarray(self.direct)
        if direct.ndim != 2 or not np.issubdtype(direct.dtype, np.integer):
            raise ValueError(f"direct: expected an int array of shape (S, W), got "
                             f"{direct.dtype} {direct.shape}")
        S, W = direct.shape
        direct = direct.astype(np.int64)
        if (direct < -1).any() or (direct >= S).any():
            raise ValueError(f"direct: entries must lie in [-1, {S})")
        check_positive(self.other_prior, "other_prior")
        if not (np.isfinite(self.other_pooling) and self.other_pooling >= 0):
            raise ValueError(f"other_pooling: expected a finite number >= 0, got "
                             f"{self.other_pooling!r}")
        inside = (direct >= 0).sum(axis=1)
        n_out = S - inside
        has_other = bool((n_out > 0).any())
        K = W + int(has_other)
        valid = np.zeros((S, K), dtype=bool)
        dest = None
        if self.destination is not None:
            dest = np.asarray(self.destination)
            if dest.shape != (S, W) or not np.issubdtype(dest.dtype, np.integer):
                raise ValueError(f"destination: expected an int array of shape (S, W) = ({S}, "
                                 f"{W}), got {dest.dtype} {dest.shape}")
            dest = dest.astype(np.int64)
            valid[:, :W] = dest >= 0
        else:
            valid[:, :W] = direct >= 0
        if has_other:
            valid[:, -1] = n_out > 0
        for name, arr in (("direct", direct), ("destination", dest), ("valid", valid),
                          ("n_outside", n_out)):
            if arr is not None:
                arr.setflags(write=False)
            object.__setattr__(self, name, arr)
        object.__setattr__(self, "has_other", has_other)
        object.__setattr__(self, "other_prior", float(self.other_prior))
        object.__setattr__(self, "other_pooling", float(self.other_pooling))

    @property
    def n_states(self) -> int:
        """S."""
        return int(self.direct.shape[0])

    @property
    def n_window(self) -> int:
        """W."""
        return int(self.direct.shape[1])

    @property
    def n_categories(self) -> int:
        """K."""
        return int(self.valid.shape[1])

    @property
    def censored(self) -> bool:
        """Whether several categories can lead to one next state (boundary stay / clip)."""
        return self.destination is not None

    @property
    def is_identity(self) -> bool:
        """Always False."""
        return False

    def to_dense(self) -> CategoryMap:
        """The equivalent (S, S) :class:`CategoryMap` (small problems, tests)."""
        S, W = self.direct.shape
        cat = np.full((S, S), -1, dtype=np.int64)
        rows, ks = np.nonzero(self.direct >= 0)
        cat[rows, self.direct[rows, ks]] = ks
        kw = {"n_window": W, "other_prior": self.other_prior,
              "other_pooling": self.other_pooling}
        if self.destination is None:
            return CategoryMap(cat, **kw)
        return TruncatedCategoryMap(cat, destination=self.destination, **kw)


def window_category_map(coordinates: Any, radius: int, other_prior: float = 0.01,
                        boundary: str = "exclude", other_pooling: float = 0.0,
                        order: str = "lexicographic") -> WindowCategoryMap:
    """:func:`displacement_category_map` without (S, S) arrays (memory O(S W)).

    Parameters
    ----------
    coordinates : array_like of shape (S, D)
        Distinct integer coordinates.
    radius : int
        Window half-width (>= 1).
    other_prior, boundary, other_pooling
        As in :func:`displacement_category_map`.
    order : {"lexicographic", "nearest"}, default="lexicographic"
        Window category order: :func:`displacement_category_map`'s, or by move length
        (:meth:`CorrelatedTransitionModel.for_mdp`'s ``category_order="nearest"``).

    Returns
    -------
    WindowCategoryMap
    """
    if boundary not in BOUNDARY_RULES:
        raise ValueError(f"boundary: expected one of {', '.join(BOUNDARY_RULES)}, got {boundary!r}")
    coords = integer_coordinates(coordinates)
    r = check_radius(radius, coords)
    if order not in ("lexicographic", "nearest"):
        raise ValueError(f"order: expected 'lexicographic' or 'nearest', got {order!r}")
    S, D = coords.shape
    check_memory(8.0 * S * window_size(D, r) * (D + 2),
                 f"window_category_map (S = {S:,} states, D = {D}, radius {r}: (2 radius + 1)^D = "
                 f"{window_size(D, r):.3g} window categories, (S, W, D) moves)",
                 "use a smaller radius or fewer coordinates")
    disp = window_displacements(D, r)                                   # (W, D)
    if order == "nearest":
        disp = disp[np.lexsort((np.arange(len(disp)), np.abs(disp).sum(axis=1)))]
    lo, hi = coords.min(axis=0) - r, coords.max(axis=0) + r
    dims = hi - lo + 1
    if float(np.prod(dims.astype(np.float64))) >= 2.0 ** 62:
        raise ValueError("coordinates: the box of the coordinates is too large to index")
    strides = np.concatenate([np.cumprod(dims[::-1])[::-1][1:], [1]]).astype(np.int64)

    def key(points: np.ndarray) -> np.ndarray:
        return ((points - lo) * strides).sum(axis=-1)

    keys = key(coords)
    order_keys = np.argsort(keys)
    sorted_keys = keys[order_keys]   # distinct: integer_coordinates checked the states

    def lookup(points: np.ndarray) -> np.ndarray:
        k = key(points)
        pos = np.minimum(np.searchsorted(sorted_keys, k), S - 1)
        return np.where(sorted_keys[pos] == k, order_keys[pos], -1)

    aim = coords[:, None, :] + disp[None, :, :]                          # (S, W, D)
    direct = lookup(aim)
    destination = None
    if boundary == "stay":
        destination = np.where(direct >= 0, direct, np.arange(S)[:, None])
    elif boundary == "clip":
        destination = lookup(np.clip(aim, coords.min(axis=0), coords.max(axis=0)))
    return WindowCategoryMap(direct, destination, other_prior=other_prior,
                             other_pooling=other_pooling)


# ------------------------------------------------------------------ the maps' window pairs
_PAIRS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclasses.dataclass(frozen=True)
class _Pairs:
    """A map's window read as pairs: sorted keys ``s * S + s'`` of the direct moves and their
    categories; for censored maps the (state, category, next state) of every intended move.
    """

    keys: np.ndarray
    cats: np.ndarray
    n_outside: np.ndarray
    excluded: sp.csr_array
    drows: np.ndarray | None
    dcats: np.ndarray | None
    dcols: np.ndarray | None


def _pairs(cmap: Any) -> _Pairs:
    cached = _PAIRS.get(cmap)
    if cached is not None:
        return cached
    S = cmap.n_states
    if isinstance(cmap, WindowCategoryMap):
        rows, cats = np.nonzero(cmap.direct >= 0)
        cols = cmap.direct[rows, cats]
        n_out = cmap.n_outside
        dest = cmap.destination
    elif isinstance(cmap, CategoryMap):
        rows, cols, cats = cmap._rows, cmap._cols, cmap._cats
        n_out = cmap.outside.sum(axis=1)
        dest = cmap.destination if isinstance(cmap, TruncatedCategoryMap) else None
    else:
        raise TypeError(f"category_map: expected a CategoryMap or WindowCategoryMap, got "
                        f"{type(cmap).__name__}")
    keys = rows.astype(np.int64) * S + cols
    order = np.argsort(keys, kind="stable")
    excluded = sp.csr_array((np.ones(rows.size), (rows, cols)), shape=(S, S))
    drows = dcats = dcols = None
    if dest is not None:
        drows, dcats = np.nonzero(dest >= 0)
        dcols = dest[drows, dcats]
    out = _Pairs(keys[order], cats[order].astype(np.int64), np.asarray(n_out, dtype=np.int64),
                 excluded, drows, dcats, dcols)
    _PAIRS[cmap] = out
    return out


def pair_categories(cmap: Any, states: IntArray, next_states: IntArray) -> IntArray:
    """Direct category of each transition ``states[t] -> next_states[t]`` (K - 1: "other").

    Returns
    -------
    ndarray of shape (T,)
    """
    p = _pairs(cmap)
    k = np.asarray(states, dtype=np.int64) * cmap.n_states + np.asarray(next_states, np.int64)
    if p.keys.size == 0:
        return np.full(k.shape, cmap.n_categories - 1, dtype=np.int64)
    pos = np.minimum(np.searchsorted(p.keys, k), p.keys.size - 1)
    return np.where(p.keys[pos] == k, p.cats[pos], cmap.n_categories - 1)


def aggregate_pairs(cmap: Any, states: IntArray, next_states: IntArray,
                    counts: FloatArray) -> FloatArray:
    """Category counts of one action's observed transitions (:meth:`CategoryMap.aggregate`).

    Parameters
    ----------
    states, next_states : ndarray of shape (E,)
        Distinct observed pairs.
    counts : ndarray of shape (E,)

    Returns
    -------
    ndarray of shape (S, K)
    """
    S, K = cmap.n_states, cmap.n_categories
    cats = pair_categories(cmap, states, next_states)
    out = np.bincount(np.asarray(states, np.int64) * K + cats, weights=counts,
                      minlength=S * K).astype(np.float64)
    return out.reshape(S, K)


def far_destinations_pairs(cmap: Any, states: IntArray, next_states: IntArray,
                           counts: FloatArray) -> FloatArray:
    """Far jumps observed into each next state (:meth:`CategoryMap.far_destinations`).

    Returns
    -------
    ndarray of shape (S,)
    """
    far = pair_categories(cmap, states, next_states) == cmap.n_categories - 1
    if not cmap.has_other:
        far[:] = False
    return np.bincount(np.asarray(next_states)[far], weights=np.asarray(counts, float)[far],
                       minlength=cmap.n_states).astype(np.float64)


def impute_pairs(cmap: Any, states: IntArray, next_states: IntArray, counts: FloatArray,
                 q: FloatArray | None) -> FloatArray:
    """Integer category counts of a censored map (:meth:`TruncatedCategoryMap.impute`).

    The same systematic split (offsets by the golden ratio per target ``s * S + s'``) on the
    observed pairs only.

    Returns
    -------
    ndarray of shape (S, K)
    """
    S, K = cmap.n_states, cmap.n_categories
    if q is None:
        return aggregate_pairs(cmap, states, next_states, counts)
    p = _pairs(cmap)
    assert p.drows is not None and p.dcats is not None and p.dcols is not None
    qv = valid_probs(cmap.valid, q)
    s = np.asarray(states, dtype=np.int64)
    obs_keys = s * S + np.asarray(next_states, dtype=np.int64)
    sort = np.argsort(obs_keys)
    obs_sorted, cnt_sorted = obs_keys[sort], np.asarray(counts, dtype=np.float64)[sort]
    g_all = p.drows.astype(np.int64) * S + p.dcols                     # every intended move
    pos = np.minimum(np.searchsorted(obs_sorted, g_all), max(obs_sorted.size - 1, 0))
    hit = obs_sorted.size > 0
    keep = (obs_sorted[pos] == g_all) if hit else np.zeros(g_all.size, dtype=bool)
    g, rows, cats = g_all[keep], p.drows[keep], p.dcats[keep]
    n = cnt_sorted[pos[keep]]
    w = qv[rows, cats] + 1e-300
    uniq, group = np.unique(g, return_inverse=True)
    share = n * w / np.bincount(group, weights=w, minlength=uniq.size)[group]
    order = np.argsort(g, kind="stable")                               # by target, then category
    gs, sh = g[order], share[order]
    first = np.r_[True, gs[1:] != gs[:-1]] if gs.size else np.zeros(0, dtype=bool)
    last = np.r_[gs[1:] != gs[:-1], True] if gs.size else np.zeros(0, dtype=bool)
    cum = np.cumsum(sh)
    upper = cum - (cum - sh)[first][np.cumsum(first) - 1]
    upper[last] = n[order][last]
    lower = np.r_[0.0, upper[:-1]] if gs.size else np.zeros(0)
    lower[first] = 0.0
    u = np.modf(_GOLDEN * (gs + 1.0))[0]
    alloc = np.ceil(upper - u) - np.ceil(lower - u)
    out = np.zeros((S, K))
    out[rows[order], cats[order]] = alloc
    if cmap.has_other:
        far = pair_categories(cmap, s, next_states) == K - 1
        out[:, -1] = np.bincount(s[far], weights=np.asarray(counts, float)[far], minlength=S)
    return out


def next_state_tables(cmap: Any, q: FloatArray, observed: list[tuple[IntArray, IntArray,
                                                                     FloatArray]],
                      pooled: FloatArray | None) -> BackgroundTransitions:
    """Category probabilities of every action to a :class:`BackgroundTransitions` table.

    The sparse counterpart of :meth:`CategoryMap.next_state_probs` with
    :meth:`CategoryMap.other_weights`: window categories go to their next states (censored maps
    sum the moves that share one), the "other" mass ``q[s, K - 1]`` to the outside states in
    proportion to ``counts + other_prior + other_pooling * m[s, s']``, whose uniform
    (``other_prior``) and pooled (``m``) parts are background profiles.

    Parameters
    ----------
    cmap : CategoryMap or WindowCategoryMap
    q : ndarray of shape (A, S, K)
        Category probabilities per action.
    observed : list of (states, next_states, counts)
        Each action's observed pairs.
    pooled : ndarray of shape (S,) or None
        Far jumps observed into each state (:func:`far_destinations_pairs`).

    Returns
    -------
    BackgroundTransitions
    """
    A, S, K = q.shape
    p = _pairs(cmap)
    rows_all, cols_all, vals_all = [], [], []
    background = np.zeros((S, A, 2 if cmap.has_other else 0))
    use_pool = pooled is not None and cmap.other_pooling > 0 and float(np.sum(pooled)) > 0
    if use_pool:
        assert pooled is not None
        inside_pool = np.asarray(p.excluded @ pooled)
        zm = pooled.sum() - inside_pool                                # pooled mass outside s
        pool_mass = np.where(zm > 0, cmap.other_pooling, 0.0)
    else:
        pool_mass = np.zeros(S)
    for a in range(A):
        qv = valid_probs(cmap.valid, q[a])
        if p.drows is None:
            r, c, v = p.keys // S, p.keys % S, qv[p.keys // S, p.cats]
        else:
            r, c, v = p.drows, p.dcols, qv[p.drows, p.dcats]
        rows_all.append(r * A + a)
        cols_all.append(c)
        vals_all.append(v)
        if not cmap.has_other:
            continue
        s_obs, s2_obs, n_obs = observed[a]
        far = pair_categories(cmap, s_obs, s2_obs) == K - 1
        c_out = np.bincount(s_obs[far], weights=n_obs[far], minlength=S)
        z = c_out + cmap.other_prior * p.n_outside + pool_mass
        qo = np.divide(qv[:, -1], z, out=np.zeros(S), where=z > 0)
        rows_all.append(s_obs[far] * A + a)
        cols_all.append(s2_obs[far])
        vals_all.append(qo[s_obs[far]] * n_obs[far])
        background[:, a, 0] = qo * cmap.other_prior * p.n_outside
        background[:, a, 1] = qo * pool_mass
    table = sp.csr_array((np.concatenate(vals_all), (np.concatenate(rows_all),
                                                     np.concatenate(cols_all))),
                         shape=(S * A, S))
    table.sum_duplicates()
    if cmap.has_other:
        profiles = np.stack([np.ones(S), np.asarray(pooled, dtype=np.float64) if use_pool
                             else np.zeros(S)])
    else:
        profiles = np.zeros((0, S))
    return BackgroundTransitions(table, background.reshape(S * A, -1), profiles, p.excluded, A)
