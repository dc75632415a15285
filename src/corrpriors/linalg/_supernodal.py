"""Supernodal multifrontal Cholesky and selected inversion on dense LAPACK fronts.

Pure functions on arrays behind :mod:`corrpriors.linalg.sparse`. Everything here works
on the *permuted* matrix ``A[perm][:, perm]`` split into contiguous column blocks
(supernodes) ``[start_b, end_b)``. Block ``b`` owns a dense panel of shape
``(n_b + r_b, n_b)`` (C order, one slice of a flat buffer): rows are the block's own
columns followed by its row structure ``struct_b`` (the ``r_b`` rows below the block that
may be non-zero in the factor), so the panel holds ``L[cols_b, cols_b]`` (lower triangle)
above ``L[struct_b, cols_b]``. The same layout holds the selected inverse
``Sigma = A^-1`` on the factor's pattern.

Factorisation (multifrontal, Duff & Reid 1983; Liu 1992): blocks in increasing order; each
block's panel receives the matrix entries and the children's update matrices
(extend-add), is factorised with ``potrf``/``trsm`` and passes its update
``U_b = -L21 L21^T`` (``syrk``) to its parent.

Selected inversion (Takahashi, Fagan & Chen 1973; supernodal form of Lin et al. 2011,
SelInv): blocks in decreasing order; with ``Y = L21 L11^-1`` and ``S_RR`` the inverse on the
block's row structure (gathered from the parent's front),
``S_RJ = -S_RR Y`` and ``S_JJ = (L11 L11^T)^-1 - Y^T S_RJ``.

Triangular kernels are called on C-order arrays through their Fortran transposes (a C-order
lower triangle is a Fortran upper triangle), so every LAPACK/BLAS call works in place.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np
from scipy.linalg import blas, lapack

#: Relaxed amalgamation: (maximum merged block width, maximum share of explicit zeros).
_RELAX = ((16, 1.0), (48, 0.5), (128, 0.2), (1 << 62, 0.05))


@dataclass(frozen=True, eq=False)
class Symbolic:
    """Block structure of the Cholesky factor of a permuted symmetric pattern.

    Attributes
    ----------
    n : int
        Order C of the matrix.
    bounds : ndarray of shape (n_blocks + 1,)
        Column ``bounds[b]:bounds[b + 1]`` belong to block ``b``.
    struct : list of ndarray
        ``struct[b]``: sorted rows below block ``b`` (permuted indices) in its panel.
    parent : ndarray of shape (n_blocks,)
        Parent block (``-1`` for a root).
    children : list of list of int
        Children of each block, increasing.
    rel : list of ndarray
        ``rel[b]``: positions of ``struct[b]`` in the parent's row list (own columns
        first, then the parent's structure).
    split : ndarray of shape (n_blocks,)
        ``split[b]``: how many of ``rel[b]`` fall on the parent's own columns.
    offsets : ndarray of shape (n_blocks + 1,)
        Panel ``b`` is ``buffer[offsets[b]:offsets[b + 1]]`` with shape ``(n_b + r_b, n_b)``.
    diag : ndarray of shape (C,)
        Buffer position of every diagonal entry ``L[j, j]`` (permuted order).
    panel_map : list of tuple of ndarray
        ``panel_map[c]``: (source, target) flat positions, each of shape (E_c,): the entries
        on and below the diagonal of block ``c``'s update matrix (shape (r_c, r_c)) in its
        columns ``[:split_c]``, and where they are added into its parent's panel (extend-add).
    update_map : list of tuple of ndarray
        ``update_map[c]``: (source, target) flat positions of the remaining entries on and
        below the diagonal of block ``c``'s update (rows and columns ``[split_c:]``) and of
        their places in its parent's update matrix. Only lower triangles are moved (the
        update matrices' upper triangles are never computed).
    gather_map : list of ndarray
        ``gather_map[c]``: flat positions, shape (r_c, r_c), of block ``c``'s row structure
        in its parent's selected-inverse front (of shape (n_p + r_p, n_p + r_p)), all on or
        below the front's diagonal (the front is symmetric).
    """

    n: int
    bounds: np.ndarray
    struct: list
    parent: np.ndarray
    children: list
    rel: list
    split: np.ndarray
    offsets: np.ndarray
    diag: np.ndarray
    panel_map: list = dataclasses.field(default_factory=list)
    update_map: list = dataclasses.field(default_factory=list)
    gather_map: list = dataclasses.field(default_factory=list)

    @property
    def n_blocks(self) -> int:
        """Number of supernodes."""
        return len(self.struct)

    @property
    def size(self) -> int:
        """Length of the panel buffer (stored factor entries, zeros included)."""
        return int(self.offsets[-1])

    def flops(self) -> float:
        """Floating-point operations of one numeric factorisation (dense kernels)."""
        n = np.diff(self.bounds).astype(float)
        r = np.array([s.size for s in self.struct], dtype=float)
        return float(np.sum(n ** 3 / 3 + n ** 2 * r + n * r ** 2))


class FactorTooLarge(Exception):
    """Internal signal: the factor has more than the allowed ``entries`` (analysis stopped)."""

    def __init__(self, entries: int):
        super().__init__(entries)
        self.entries = entries


def block_structures(indptr: np.ndarray, indices: np.ndarray, bounds: np.ndarray,
                     limit: float | None = None) -> tuple[list, np.ndarray]:
    """Row structure and parent of each column block (block symbolic factorisation).

    Parameters
    ----------
    indptr, indices : ndarray
        Lower triangle (rows >= column, diagonal included) of the permuted pattern in
        compressed-column form with sorted rows.
    bounds : ndarray of shape (n_blocks + 1,)
    limit : float, optional
        Stop with :class:`FactorTooLarge` as soon as the panels found so far hold more than
        this many entries (``sum (n_b + r_b) n_b``, a lower bound of the factor's buffer; with
        one column per block, the entries of ``L``): a factor too large for memory is
        refused after about ``limit`` steps of work instead of O(nnz(L)).

    Returns
    -------
    struct : list of ndarray
        Sorted rows below each block that the (block-dense) factor may fill.
    parent : ndarray of shape (n_blocks,)
    """
    n_blocks = bounds.size - 1
    block_of = np.repeat(np.arange(n_blocks), np.diff(bounds))
    pending: list[list[np.ndarray]] = [[] for _ in range(n_blocks)]
    struct: list[np.ndarray] = []
    parent = np.full(n_blocks, -1, dtype=np.int64)
    edges = bounds.tolist()
    entries, cap = 0, float("inf") if limit is None else limit
    for b in range(n_blocks):
        start, end = edges[b], edges[b + 1]
        rows = indices[indptr[start]:indptr[end]]
        pieces = [rows[rows >= end]] + pending[b]
        pending[b] = []
        s = np.unique(np.concatenate(pieces)) if len(pieces) > 1 else np.unique(pieces[0])
        struct.append(s)
        entries += (end - start) * (end - start + s.size)
        if entries > cap:
            raise FactorTooLarge(entries)
        if s.size:
            p = block_of[s[0]]
            parent[b] = p
            pending[p].append(s[s >= bounds[p + 1]])
    return struct, parent


def amalgamate(bounds: np.ndarray, struct: list, parent: np.ndarray) -> np.ndarray:
    """Relaxed supernode amalgamation: merge a block into its parent when contiguous.

    A block whose parent starts right after it (or a root block, e.g. a small connected
    component, followed by any block) is merged into the next block when the merged panel
    stays narrow enough for its share of explicit zeros (``_RELAX``); fewer, larger blocks
    cut the per-block Python overhead while the dense kernels absorb the extra zeros.

    Returns
    -------
    bounds : ndarray of shape (n_merged + 1,)
    """
    n_blocks = bounds.size - 1
    width = np.diff(bounds).astype(np.int64)
    below = np.array([s.size for s in struct], dtype=np.int64)
    true_nz = width * (width + 1) // 2 + width * below
    keep = np.ones(n_blocks + 1, dtype=bool)
    for b in range(n_blocks - 1):
        if parent[b] != b + 1 and parent[b] >= 0:
            continue
        w = width[b] + width[b + 1]
        total = w * (w + 1) // 2 + w * below[b + 1]
        zeros = 1.0 - (true_nz[b] + true_nz[b + 1]) / total
        if _relaxed(w, zeros):
            keep[b + 1] = False
            width[b + 1] = w
            true_nz[b + 1] += true_nz[b]
    return bounds[keep]


def _relaxed(width: int, zeros: float) -> bool:
    return any(width <= cap and zeros <= share for cap, share in _RELAX)


def relaxed_supernodes(indptr: np.ndarray, indices: np.ndarray, limit: float | None = None
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Supernodes of an arbitrary ordering: column etree, relaxed merging, re-ordering.

    Every column starts alone; in increasing order, each column absorbs the groups of its
    elimination-tree children while ``_RELAX`` allows (fundamental supernodes have no
    extra zeros, so they always form). Columns are then re-ordered so that each group is
    contiguous: groups by their top column, columns ascending within a group. That is a
    topological order of the elimination tree, hence an equivalent ordering (same fill).

    Parameters
    ----------
    indptr, indices : ndarray
        Lower triangle of the permuted pattern (compressed columns, diagonal included).
    limit : float, optional
        Largest number of entries of ``L`` (else :class:`FactorTooLarge`, see
        :func:`block_structures`).

    Returns
    -------
    order : ndarray of shape (C,)
        New position -> old (permuted) column.
    bounds : ndarray of shape (n_groups + 1,)
    """
    n = indptr.size - 1
    struct, parent = block_structures(indptr, indices, np.arange(n + 1, dtype=np.int64), limit)
    below = np.array([s.size for s in struct], dtype=np.int64)
    width = np.ones(n, dtype=np.int64)
    true_nz = 1 + below
    link = np.arange(n, dtype=np.int64)
    has_parent = np.flatnonzero(parent >= 0)
    by_parent = has_parent[np.argsort(parent[has_parent], kind="stable")]
    starts = np.searchsorted(parent[by_parent], np.arange(n + 1))
    for j in range(n):
        for c in by_parent[starts[j]:starts[j + 1]]:
            w = width[c] + width[j]
            total = w * (w + 1) // 2 + w * below[j]
            if _relaxed(w, 1.0 - (true_nz[c] + true_nz[j]) / total):
                link[c] = j
                width[j] = w
                true_nz[j] += true_nz[c]
    top = link
    while True:
        nxt = top[top]
        if np.array_equal(nxt, top):
            break
        top = nxt
    order = np.lexsort((np.arange(n), top))
    sizes = np.bincount(top, minlength=n)
    bounds = np.concatenate([[0], np.cumsum(sizes[sizes > 0])]).astype(np.int64)
    return order.astype(np.int64), bounds


def analyse(indptr: np.ndarray, indices: np.ndarray, bounds: np.ndarray, *,
            limit: float | None = None, maps: bool = True) -> Symbolic:
    """Symbolic factorisation: supernodes, their structures, extend-add maps, panel layout.

    Parameters
    ----------
    indptr, indices : ndarray
        Lower triangle of the permuted pattern (compressed columns, sorted rows, diagonal
        included).
    bounds : ndarray of shape (n_blocks + 1,)
        Initial column blocks (nested dissection's separators and leaves, or
        ``relaxed_supernodes``); contiguous blocks are then amalgamated (``amalgamate``).
    limit : float, optional
        Largest factor buffer in entries (else :class:`FactorTooLarge`, see
        :func:`block_structures`).
    maps : bool, default=True
        Build the extend-add and gather maps (else :func:`with_maps` builds them later:
        they hold about as many integers as the factor has entries).

    Returns
    -------
    Symbolic
    """
    n = indptr.size - 1
    struct, parent = block_structures(indptr, indices, bounds, limit)
    merged = amalgamate(bounds, struct, parent)
    if merged.size != bounds.size:
        bounds = merged
        struct, parent = block_structures(indptr, indices, bounds, limit)
    width = np.diff(bounds)
    below = np.array([s.size for s in struct], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum((width + below) * width)]).astype(np.int64)
    children: list[list[int]] = [[] for _ in range(len(struct))]
    rel: list[np.ndarray] = []
    split = np.zeros(len(struct), dtype=np.int64)
    for b, p in enumerate(parent):
        if p < 0:
            rel.append(np.zeros(0, dtype=np.int64))
            continue
        children[p].append(b)
        start, end = bounds[p], bounds[p + 1]
        s = struct[b]
        own = s < end
        pos = np.where(own, s - start, width[p] + np.searchsorted(struct[p], s))
        rel.append(pos.astype(np.int64))
        split[b] = int(own.sum())
    block_of = np.repeat(np.arange(len(struct)), width)
    cols = np.arange(n)
    local = cols - bounds[block_of]
    diag = offsets[block_of] + local * width[block_of] + local
    sym = Symbolic(n, bounds.astype(np.int64), struct, parent, children, rel, split, offsets,
                   diag.astype(np.int64))
    return with_maps(sym) if maps else sym


def with_maps(sym: Symbolic) -> Symbolic:
    """``sym`` with its extend-add and gather maps (built once; ``sym`` if it has them)."""
    if sym.panel_map or not sym.n_blocks:
        return sym
    below = np.array([s.size for s in sym.struct], dtype=np.int64)
    panel_map, update_map, gather_map = _extend_add_maps(
        sym.offsets, np.diff(sym.bounds), below, sym.parent, sym.rel, sym.split)
    return dataclasses.replace(sym, panel_map=panel_map, update_map=update_map,
                               gather_map=gather_map)


def memory_bytes(sym: Symbolic, pattern_entries: int) -> float:
    """Upper bound of the bytes allocated from here on: the maps (:func:`with_maps`), one
    numeric factorisation and its selected inverse.

    Counted: the factor and selected-inverse buffers (``sym.size`` float64 each), the maps
    (intp) and the largest block's temporaries while they are built, the update matrices
    alive at once during :func:`factorize` and the fronts alive at once during
    :func:`selected_inverse` (both found by replaying the block order), each block's dense
    temporaries, and ``12 * pattern_entries`` words for the copies of the matrix's values.
    Not counted: right-hand sides, and the index arrays of ``lower_entries`` (``L``,
    ``selected_inverse()``), which the CAVI does not use.
    """
    width = np.diff(sym.bounds).astype(float)
    r = np.array([s.size for s in sym.struct], dtype=float)
    k = sym.split.astype(float)
    child = sym.parent >= 0
    e_panel = k * r - k * (k - 1) / 2
    e_update = (r - k) * (r - k + 1) / 2
    maps = float(np.sum(np.where(child, 2 * e_panel + 2 * e_update + r * r, 0.0)))
    build = 10.0 * float(np.max(np.where(child, r * r + r, 0.0), initial=0.0))
    words = (2.0 * sym.size + maps + build + _peak_updates(sym, r) + _peak_fronts(sym, width, r)
             + 12.0 * pattern_entries + 4.0 * float(np.sum(r)) + 8.0 * sym.n)
    return 8.0 * words


def _peak_updates(sym: Symbolic, r: np.ndarray) -> float:
    """Most update-matrix entries alive at once in :func:`factorize` (children's updates are
    held until the parent's own update exists), plus one extend-add temporary.
    """
    held = np.where((sym.parent >= 0) & (r > 0), r * r, 0.0)
    freed = np.zeros(sym.n_blocks)
    np.add.at(freed, sym.parent[sym.parent >= 0], held[sym.parent >= 0])
    live = np.cumsum(held - freed) + freed
    return float(np.max(live, initial=0.0) + np.max(held, initial=0.0))


def _peak_fronts(sym: Symbolic, width: np.ndarray, r: np.ndarray) -> float:
    """Most entries alive at once in :func:`selected_inverse`: the fronts of blocks whose
    children are not all done, plus one block's front and temporaries (S_RR, Y^T, S_JJ).
    """
    has_children = np.array([bool(c) for c in sym.children])
    front = np.where(has_children, (width + r) ** 2, 0.0)
    first_child = np.full(sym.n_blocks, sym.n_blocks, dtype=np.int64)
    kids = np.flatnonzero(sym.parent >= 0)
    np.minimum.at(first_child, sym.parent[kids], kids)
    freed = np.zeros(sym.n_blocks + 1)
    np.add.at(freed, first_child, front)   # freed after the gather of the first child
    created_after = front.sum() - np.cumsum(front)          # fronts of blocks > b
    freed_after = freed.sum() - np.cumsum(freed)[:-1]       # ... freed at blocks > b
    step = front + r * r + width * r + width * width + width
    return float(np.max(created_after - freed_after + step, initial=0.0))


def _extend_add_maps(offsets: np.ndarray, width: np.ndarray, below: np.ndarray,
                     parent: np.ndarray, rel: list, split: np.ndarray
                     ) -> tuple[list, list, list]:
    """Flat positions of every block's update in its parent and of its row structure in the
    parent's selected-inverse front (computed once, at the analysis).

    Scattering and gathering through flat indices precomputed here is 2-10x faster than the
    2-D broadcast fancy index per factorisation (measured, fronts of 30-500 rows); moving only
    the lower triangles of the updates halves the extend-add's work (which was 38 % of a
    factorisation at C = 10^5). The maps hold about as many integers as the factor has entries.
    """
    panel_map: list[tuple[np.ndarray, np.ndarray]] = []
    update_map: list[tuple[np.ndarray, np.ndarray]] = []
    gather_map: list[np.ndarray] = []
    none = np.zeros(0, dtype=np.intp)
    for c, p in enumerate(parent):
        if p < 0:
            panel_map.append((none, none))
            update_map.append((none, none))
            gather_map.append(np.zeros((0, 0), dtype=np.intp))
            continue
        r, k, w = rel[c], int(split[c]), int(width[p])
        rc = r.size
        i, j = np.nonzero(np.tri(rc, k, dtype=bool))                 # i >= j, j < k
        panel_map.append(((i * rc + j).astype(np.intp),
                          (offsets[p] + r[i] * w + r[j]).astype(np.intp)))
        i, j = np.tril_indices(rc - k)                               # rows, columns >= k
        low = r[k:] - w
        update_map.append((((i + k) * rc + j + k).astype(np.intp),
                           (low[i] * int(below[p]) + low[j]).astype(np.intp)))
        # the lower triangle of the front (rows >= columns): its upper right block S_JR is
        # never written, S_RR is stored whole
        hi, lo = np.maximum(r[:, None], r[None, :]), np.minimum(r[:, None], r[None, :])
        gather_map.append((hi * (w + int(below[p])) + lo).astype(np.intp))
    return panel_map, update_map, gather_map


def positions(sym: Symbolic, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Buffer positions of lower-triangle entries ``(rows >= cols)`` of the permuted factor.

    Parameters
    ----------
    rows, cols : ndarray of shape (E,)
        Permuted indices with ``rows >= cols``, each inside the block pattern.

    Returns
    -------
    ndarray of shape (E,)
    """
    width = np.diff(sym.bounds)
    block_of = np.repeat(np.arange(sym.n_blocks), width)
    b = block_of[cols]
    start, end = sym.bounds[b], sym.bounds[b + 1]
    # one global search: structures concatenated with keys (block, row)
    sizes = np.array([s.size for s in sym.struct], dtype=np.int64)
    first = np.concatenate([[0], np.cumsum(sizes)])
    keys = np.repeat(np.arange(sym.n_blocks, dtype=np.int64), sizes) * sym.n
    keys = keys + (np.concatenate(sym.struct) if sym.n_blocks else np.zeros(0, np.int64))
    below = rows >= end
    where = np.searchsorted(keys, b * sym.n + rows) - first[b]
    rowpos = np.where(below, width[b] + where, rows - start)
    return sym.offsets[b] + rowpos * width[b] + (cols - start)


class NotPositiveDefinite(Exception):
    """Internal signal: pivot ``column`` (permuted index) of the factorisation failed."""

    def __init__(self, column: int):
        super().__init__(column)
        self.column = column


def factorize(sym: Symbolic, buffer: np.ndarray) -> None:
    """Numeric multifrontal Cholesky, in place.

    Parameters
    ----------
    sym : Symbolic
    buffer : ndarray of shape (sym.size,)
        On entry the lower triangle of the permuted matrix scattered into the panels
        (zeros elsewhere); on exit the factor ``L``.

    Raises
    ------
    NotPositiveDefinite
        With the permuted column whose pivot is not positive.
    """
    bounds, offsets = sym.bounds, sym.offsets
    panel_map, update_map = sym.panel_map, sym.update_map
    updates: dict[int, np.ndarray] = {}   # lower triangles valid (upper ones never written)
    potrf, trsm, syrk = lapack.dpotrf, blas.dtrsm, blas.dsyrk
    for b in range(sym.n_blocks):
        n = int(bounds[b + 1] - bounds[b])
        r = sym.struct[b].size
        panel = buffer[offsets[b]:offsets[b + 1]].reshape(n + r, n)
        pending = []
        for c in sym.children[b]:
            uc = updates.pop(c).reshape(-1)
            source, target = panel_map[c]
            buffer[target] += uc[source]
            if update_map[c][0].size:
                pending.append((uc, update_map[c]))
        top = panel[:n]
        _, info = potrf(top.T, lower=0, clean=1, overwrite_a=1)
        if info != 0:
            raise NotPositiveDefinite(int(bounds[b]) + (info - 1 if info > 0 else 0))
        if r:
            low = panel[n:]
            trsm(1.0, top.T, low.T, side=0, lower=0, trans_a=1, overwrite_b=1)
            if sym.parent[b] < 0:
                continue
            # U_b = -L21 L21^T (its lower triangle; beta = 0 never reads the empty buffer),
            # then the children's updates on the block's row structure
            update = np.empty((r, r))
            syrk(-1.0, low.T, beta=0.0, c=update.T, trans=1, lower=0, overwrite_c=1)
            flat = update.reshape(-1)
            for uc, (source, target) in pending:
                flat[target] += uc[source]
            updates[b] = update


@functools.lru_cache(maxsize=256)
def _strict_upper(n: int) -> np.ndarray:
    """Boolean mask of the strict upper triangle of an n x n block (cached per size)."""
    return np.triu(np.ones((n, n), dtype=bool), 1)


def selected_inverse(sym: Symbolic, factor: np.ndarray, out: np.ndarray | None = None
                     ) -> np.ndarray:
    """Entries of ``A^-1`` on the factor's block pattern (supernodal Takahashi recursion).

    Parameters
    ----------
    sym : Symbolic
    factor : ndarray of shape (sym.size,)
        The factor ``L`` from :func:`factorize`.
    out : ndarray of shape (sym.size,), optional
        Buffer to write into (every entry is overwritten); a new one by default.

    Returns
    -------
    ndarray of shape (sym.size,)
        Same layout: panel ``b`` holds ``Sigma[cols_b, cols_b]`` (full symmetric block)
        above ``Sigma[struct_b, cols_b]``.
    """
    bounds, offsets = sym.bounds, sym.offsets
    if out is None:
        out = np.empty_like(factor)
    fronts: dict[int, np.ndarray] = {}
    remaining = [len(c) for c in sym.children]
    potri, trsm, gemm = lapack.dpotri, blas.dtrsm, blas.dgemm
    for b in range(sym.n_blocks - 1, -1, -1):
        n = int(bounds[b + 1] - bounds[b])
        r = sym.struct[b].size
        panel = factor[offsets[b]:offsets[b + 1]].reshape(n + r, n)
        sigma = out[offsets[b]:offsets[b + 1]].reshape(n + r, n)
        # C-order arrays are handed to BLAS as their Fortran transposes: ``x.T`` below is a
        # contiguous Fortran array, so every product is written in place.
        sjj = panel[:n].copy()   # its strict upper triangle is zero (potrf, clean=1)
        potri(sjj.T, lower=0, overwrite_c=1)  # (L11 L11^T)^-1 in the lower triangle
        diag = sjj.diagonal().copy()
        if r:
            p = int(sym.parent[b])
            srr = fronts[p].reshape(-1)[sym.gather_map[b]]
            remaining[p] -= 1
            if remaining[p] == 0:
                del fronts[p]
            yt = trsm(1.0, panel[:n].T, panel[n:].T, side=0, lower=0, trans_a=0)   # Y^T
            srj = sigma[n:]   # S_RJ = -S_RR Y, i.e. S_RJ^T = -Y^T S_RR (S_RR symmetric)
            gemm(-1.0, yt, srr.T, beta=0.0, c=srj.T, overwrite_c=1)
            # H = tril(inv) - Y^T S_RJ / 2, then S_JJ = H + H^T - diag(inv): the symmetric
            # part of tril(inv) + tril(inv)^T - diag(inv) - Y^T S_RJ
            gemm(-0.5, srj.T, yt, beta=1.0, c=sjj.T, trans_a=0, trans_b=1, overwrite_c=1)
        np.add(sjj, sjj.T, out=sigma[:n])
        sigma[:n].reshape(-1)[::n + 1] -= diag
        if sym.children[b]:
            front = np.empty((n + r, n + r))   # read on and below its diagonal only
            front[:, :n] = sigma
            if r:
                front[n:, n:] = srr
            fronts[b] = front
    return out


def solve_lower(sym: Symbolic, factor: np.ndarray, x: np.ndarray) -> None:
    """Overwrite ``x`` (permuted, shape (C, m), C order) with ``L^-1 x``."""
    bounds, offsets, trsm = sym.bounds, sym.offsets, blas.dtrsm
    for b in range(sym.n_blocks):
        start, end = int(bounds[b]), int(bounds[b + 1])
        n = end - start
        panel = factor[offsets[b]:offsets[b + 1]].reshape(-1, n)
        xj = x[start:end]
        trsm(1.0, panel[:n].T, xj.T, side=1, lower=0, trans_a=0, overwrite_b=1)
        if panel.shape[0] > n:
            x[sym.struct[b]] -= panel[n:] @ xj


def solve_upper(sym: Symbolic, factor: np.ndarray, x: np.ndarray) -> None:
    """Overwrite ``x`` (permuted, shape (C, m), C order) with ``L^-T x``."""
    bounds, offsets, trsm = sym.bounds, sym.offsets, blas.dtrsm
    for b in range(sym.n_blocks - 1, -1, -1):
        start, end = int(bounds[b]), int(bounds[b + 1])
        n = end - start
        panel = factor[offsets[b]:offsets[b + 1]].reshape(-1, n)
        xj = x[start:end]
        if panel.shape[0] > n:
            xj -= panel[n:].T @ x[sym.struct[b]]
        trsm(1.0, panel[:n].T, xj.T, side=1, lower=0, trans_a=1, overwrite_b=1)


def lower_entries(sym: Symbolic) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows, columns and buffer positions of every lower-triangle slot of the panels.

    Returns
    -------
    rows, cols, pos : ndarray of shape (E,)
        Permuted indices (``rows >= cols``) and buffer positions.
    """
    rows_all, cols_all, pos_all = [], [], []
    for b in range(sym.n_blocks):
        start, end = int(sym.bounds[b]), int(sym.bounds[b + 1])
        n = end - start
        idx = np.concatenate([np.arange(start, end), sym.struct[b]])
        i, j = np.nonzero(np.tri(idx.size, n, dtype=bool))
        rows_all.append(idx[i])
        cols_all.append(start + j)
        pos_all.append(sym.offsets[b] + i * n + j)
    if not rows_all:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    return (np.concatenate(rows_all), np.concatenate(cols_all), np.concatenate(pos_all))
