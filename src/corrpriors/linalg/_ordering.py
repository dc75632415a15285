"""Fill-reducing orderings for the sparse Cholesky factorisation (``sparse_linalg``).

Every ordering returns ``(perm, bounds)``: ``perm`` is the elimination order (position
``k`` of the permuted matrix is original row/column ``perm[k]``) and ``bounds`` either
``None`` or the boundaries of contiguous column blocks that the supernodal factorisation
may treat as dense (nested dissection returns its separators and leaf sub-domains).

The nested dissection below (George's automatic nested dissection by breadth-first level
structures, George & Liu, *Computer Solution of Large Sparse Positive Definite Systems*,
1981, ch. 8) is written with ``scipy.sparse.csgraph`` so that it needs no compiled
extension; it is the best on grids and meshes but poor on small-world graphs, where
SuperLU's multiple minimum degree wins (``SparseCholesky(ordering="auto")`` analyses both).
METIS (``pymetis``, optional), reverse Cuthill-McKee (banded) and the natural order are
alternatives.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

ORDERINGS = ("nested_dissection", "metis", "mmd", "rcm", "natural")

#: Balance window of the separator level: both sides keep at least this share of the rest.
_MIN_SIDE = 0.3


def fill_reducing_ordering(graph: sp.csr_array, method: str, *, leaf_size: int
                           ) -> tuple[np.ndarray, np.ndarray | None]:
    """Elimination order of a symmetric sparsity graph.

    Parameters
    ----------
    graph : scipy.sparse.csr_array of shape (C, C)
        Symmetric adjacency (structure only), without the diagonal.
    method : {"nested_dissection", "metis", "mmd", "rcm", "natural"}
    leaf_size : int
        Nested dissection stops splitting sub-graphs of at most this many vertices.

    Returns
    -------
    perm : ndarray of shape (C,)
        Elimination order.
    bounds : ndarray of shape (n_blocks + 1,) or None
        Dense column blocks of the permuted matrix (nested dissection only).
    """
    n = graph.shape[0]
    if method == "nested_dissection":
        return nested_dissection(graph, leaf_size=leaf_size)
    if method == "metis":
        return _metis(graph), None
    if method == "mmd":
        return _superlu_mmd(graph), None
    if method == "rcm":
        perm = csgraph.reverse_cuthill_mckee(graph, symmetric_mode=True)
        return np.asarray(perm, dtype=np.int64), None
    if method == "natural":
        return np.arange(n, dtype=np.int64), None
    raise ValueError(f"ordering: expected one of {ORDERINGS} or a permutation array, "
                     f"got {method!r}")


def nested_dissection(graph: sp.csr_array, *, leaf_size: int
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Nested dissection by breadth-first level structures.

    A connected sub-graph larger than ``leaf_size`` is split by one level of a
    breadth-first search from a pseudo-peripheral vertex (every level is a vertex
    separator); the level is the smallest one whose two sides both keep at least 30 % of
    the vertices, thinned to the vertices adjacent to the far side. The parts are
    ordered first, the separator last, recursively. Disconnected sub-graphs are split
    into their components (small ones packed together into one block).

    Parameters
    ----------
    graph : scipy.sparse.csr_array of shape (C, C)
        Symmetric adjacency without the diagonal.
    leaf_size : int
        Sub-graphs of at most this many vertices are not split further.

    Returns
    -------
    perm : ndarray of shape (C,)
    bounds : ndarray of shape (n_blocks + 1,)
        Each block is a leaf sub-domain, a separator or a pack of small components.
    """
    graph = sp.csr_array(graph)
    graph.sort_indices()
    local = np.full(graph.shape[0], -1, dtype=np.int64)
    blocks: list[np.ndarray] = []
    stack: list[tuple[bool, np.ndarray]] = [(False, np.arange(graph.shape[0]))]
    while stack:
        emit, verts = stack.pop()
        if emit or verts.size <= leaf_size:
            if verts.size:
                blocks.append(verts)
            continue
        sub = _subgraph(graph, verts, local)
        n_comp, labels = csgraph.connected_components(sub, directed=True,
                                                      connection="strong")
        if n_comp > 1:
            stack.extend(reversed(_component_tasks(verts, labels, n_comp, leaf_size)))
            continue
        parts = _level_bisection(sub)
        if parts is None:
            blocks.append(verts)
            continue
        first, second, sep = parts
        stack.extend([(True, verts[sep]), (False, verts[second]), (False, verts[first])])
    perm = np.concatenate(blocks) if blocks else np.zeros(0, dtype=np.int64)
    bounds = np.concatenate([[0], np.cumsum([b.size for b in blocks])]).astype(np.int64)
    return perm.astype(np.int64), bounds


def _subgraph(graph: sp.csr_array, verts: np.ndarray, local: np.ndarray) -> sp.csr_array:
    """Induced sub-graph on ``verts`` (``local`` is an all ``-1`` scratch array, restored)."""
    local[verts] = np.arange(verts.size)
    starts, ends = graph.indptr[verts], graph.indptr[verts + 1]
    lengths = ends - starts
    total = int(lengths.sum())
    # positions of the rows' entries in graph.indices, without a Python loop
    offs = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    cols = local[graph.indices[np.arange(total) + offs]]
    keep = cols >= 0
    row_of = np.repeat(np.arange(verts.size), lengths)[keep]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(row_of, minlength=verts.size))])
    local[verts] = -1
    data = np.ones(int(keep.sum()))
    return sp.csr_array((data, cols[keep], indptr), shape=(verts.size, verts.size))


def _component_tasks(verts: np.ndarray, labels: np.ndarray, n_comp: int,
                     leaf_size: int) -> list[tuple[bool, np.ndarray]]:
    """Tasks for the components of a sub-graph: large ones split, small ones packed."""
    order = np.argsort(labels, kind="stable")
    sizes = np.bincount(labels, minlength=n_comp)
    pieces = np.split(verts[order], np.cumsum(sizes)[:-1])
    tasks: list[tuple[bool, np.ndarray]] = []
    pack: list[np.ndarray] = []
    packed = 0
    for piece in pieces:
        if piece.size > leaf_size:
            tasks.append((False, piece))
            continue
        if packed + piece.size > leaf_size:
            tasks.append((True, np.concatenate(pack)))
            pack, packed = [], 0
        pack.append(piece)
        packed += piece.size
    if pack:
        tasks.append((True, np.concatenate(pack)))
    return tasks


def _bfs_levels(graph: sp.csr_array, start: int) -> np.ndarray:
    """Breadth-first distance of every vertex of a connected symmetric graph from ``start``."""
    _, pred = csgraph.breadth_first_order(graph, start, directed=True,
                                          return_predecessors=True)
    hop = pred.astype(np.int64)
    hop[start] = start
    level = np.ones(graph.shape[0], dtype=np.int64)
    level[start] = 0
    # pointer jumping: level[v] is the number of hops from v to hop[v]
    while np.any(hop != start):
        level += level[hop]
        hop = hop[hop]
    return level


def _level_bisection(graph: sp.csr_array
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Split a connected graph into (first part, second part, separator) local indices."""
    degree = np.diff(graph.indptr)
    start = int(np.argmin(degree))
    levels = _bfs_levels(graph, start)
    for _ in range(4):  # pseudo-peripheral vertex: restart from a far, low-degree vertex
        far = np.flatnonzero(levels == levels.max())
        candidate = int(far[np.argmin(degree[far])])
        new = _bfs_levels(graph, candidate)
        if new.max() <= levels.max():
            break
        levels = new
    height = int(levels.max())
    if height < 2:
        return None
    counts = np.bincount(levels)
    cum = np.cumsum(counts)
    n = graph.shape[0]
    cand = np.arange(1, height)
    left, right = cum[cand - 1], n - cum[cand]
    ok = np.minimum(left, right) >= _MIN_SIDE * (left + right)
    if ok.any():
        pool = cand[ok]
        best = pool[np.lexsort((np.abs(left[ok] - right[ok]), counts[pool]))[0]]
    else:
        best = cand[np.argmin(np.abs(left - right))]
    in_sep = levels == best
    beyond = (levels == best + 1).astype(np.float64)
    touches = (graph @ beyond) > 0
    sep = in_sep & touches
    first = (levels < best) | (in_sep & ~touches)
    return np.flatnonzero(first), np.flatnonzero(levels > best), np.flatnonzero(sep)


def _metis(graph: sp.csr_array) -> np.ndarray:
    """METIS nested dissection (``pymetis``, an optional dependency)."""
    try:
        import pymetis
    except ImportError:
        raise ValueError("ordering='metis' needs the optional package pymetis "
                         "(pip install pymetis); the default 'nested_dissection' needs "
                         "nothing") from None
    g = sp.csr_array(graph)
    perm, _ = pymetis.nested_dissection(xadj=g.indptr.astype(np.int64),
                                        adjncy=g.indices.astype(np.int64))
    return np.asarray(perm, dtype=np.int64)


def _superlu_mmd(graph: sp.csr_array) -> np.ndarray:
    """SuperLU's multiple minimum degree on A + A^T (read off a cheap incomplete LU)."""
    from scipy.sparse.linalg import spilu

    n = graph.shape[0]
    g = sp.csc_array(graph, dtype=np.float64)
    g.data[:] = -1.0
    degree = np.asarray(abs(g).sum(axis=0)).ravel()
    surrogate = sp.csc_array(g + sp.diags_array(degree + 1.0))
    ilu = spilu(surrogate, drop_tol=1.0, fill_factor=1.0, permc_spec="MMD_AT_PLUS_A",
                diag_pivot_thresh=0.0, options={"SymmetricMode": True})
    perm = np.empty(n, dtype=np.int64)
    perm[ilu.perm_c] = np.arange(n)
    return perm
