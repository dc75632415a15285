"""Distances between covariates: Euclidean on coordinates, shortest paths on graphs.

Also holds the input checks shared by the kernels (coordinates and distance matrices).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph
from scipy.spatial.distance import cdist

from .._memory import check_memory
from .._typing import FloatArray
from .._validation import as_real_array, check_bool, check_points


def check_coords(X: Any, name: str = "X", n_dims: int | None = None) -> FloatArray:
    """Validate a (N, D) array of finite covariate coordinates; return it as float64
    (:func:`corrpriors._validation.check_points`).
    """
    return check_points(X, name, n_dims)


def check_distances(D: Any, name: str = "distances", square: bool = True,
                    rtol: float = 1e-10) -> FloatArray:
    """Validate a distance matrix; return it as float64.

    Entries must be non-negative and not NaN; ``+inf`` (e.g. disconnected graph nodes) is
    allowed off the diagonal and means "uncorrelated" for every kernel here. With
    ``square=True`` the matrix must also be square, symmetric (to ``rtol`` times its largest
    finite entry) and have a zero diagonal.
    """
    arr = as_real_array(D, name).astype(np.float64)
    if arr.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D array, got shape {arr.shape}")
    if np.isnan(arr).any():
        raise ValueError(f"{name}: contains NaN")
    if (arr < 0).any():
        raise ValueError(f"{name}: must be non-negative, found minimum {arr.min():g}")
    if not square:
        return arr
    if arr.shape[0] != arr.shape[1]:
        raise ValueError(f"{name}: expected a square (N, N) matrix, got shape {arr.shape}")
    finite = np.isfinite(arr)
    scale = float(np.max(arr[finite])) if finite.any() else 0.0
    if not np.all(finite == finite.T) or not np.allclose(
            np.where(finite, arr, 0.0), np.where(finite.T, arr.T, 0.0), rtol=0, atol=rtol * max(scale, 1e-300)):
        raise ValueError(f"{name}: must be symmetric")
    diag = np.diag(arr)
    if np.any(diag > rtol * max(scale, 1e-300)):
        raise ValueError(f"{name}: must have a zero diagonal, found {diag.max():g}")
    out = arr.copy()
    np.fill_diagonal(out, 0.0)
    return out


def euclidean_distances(X, Y=None) -> FloatArray:
    """Pairwise Euclidean distances.

    Computed directly (``scipy.spatial.distance.cdist``), not through the expansion
    ``|x|^2 + |y|^2 - 2 x.y``, so the diagonal of ``euclidean_distances(X)`` is exactly 0
    and small distances keep their relative accuracy.

    Parameters
    ----------
    X : array_like of shape (N, D)
        Coordinates of N covariate points.
    Y : array_like of shape (M, D), optional
        Second set of points; ``X`` when omitted.

    Returns
    -------
    distances : ndarray of shape (N, M)

    Raises
    ------
    corrpriors._memory.MemoryEstimateError
        The (N, M) matrix would not fit in the memory this process may use (checked first).
    """
    X = check_coords(X, "X")
    Y = X if Y is None else check_coords(Y, "Y", n_dims=X.shape[1])
    check_memory(8.0 * X.shape[0] * Y.shape[0],
                 f"{'X' if Y is X else 'X, Y'}: the dense ({X.shape[0]:,}, {Y.shape[0]:,}) float64 "
                 f"distance matrix", "use fewer points (or a sparse GMRF precision, "
                 "corrpriors.kernels.knn_adjacency / lattice_adjacency, whose memory is linear)")
    return cdist(X, Y, metric="euclidean")


def graph_distances(adjacency, *, weighted: bool = True, directed: bool = False,
                    allow_disconnected: bool = False) -> FloatArray:
    """Shortest-path distances on a graph (``scipy.sparse.csgraph.shortest_path``).

    Parameters
    ----------
    adjacency : array_like or scipy.sparse matrix of shape (N, N)
        Non-zero entries are edges; with ``weighted=True`` their values are edge lengths
        (must be positive), otherwise every edge has length one.
    weighted : bool, default=True
        Use the entries as edge lengths.
    directed : bool, default=False
        Follow edges only in their direction. The result may then be asymmetric and is
        not a valid input for :meth:`Kernel.bind`. With ``False`` every edge counts in both
        directions: an edge given once (e.g. the upper triangle only) is enough, and where
        ``adjacency[i, j]`` and ``adjacency[j, i]`` are both non-zero and differ, the shorter
        length is used (``scipy.sparse.csgraph``'s convention).
    allow_disconnected : bool, default=False
        Return ``+inf`` between disconnected nodes instead of raising; every kernel maps
        an infinite distance to zero covariance.

    Returns
    -------
    distances : ndarray of shape (N, N)

    Raises
    ------
    corrpriors._memory.MemoryEstimateError
        The dense (N, N) result would not fit in the memory this process may use.

    Notes
    -----
    A squared-exponential (or Matern) kernel of graph shortest-path distances is **not
    guaranteed positive semi-definite**: shortest-path metrics are in general not
    Euclidean. On a grid graph (where shortest paths are Manhattan distances) it is
    clearly indefinite once the length scale reaches about one cell: measured on a 10 x 10
    grid, the smallest eigenvalue relative to the largest is -11 % for the squared
    exponential at ``l = 1`` (-2 % at ``l = 5``), -6 % for Matern 5/2 and -3 % for
    Matern 3/2; it is PSD only for ``l <= 0.7``. The exponential kernel is PSD on grid
    graphs (it factorises over the axes). The model's covariance check rejects an
    indefinite matrix; use Euclidean distances between cell coordinates
    (``euclidean_distances``) for the squared-exponential and Matern kernels.
    """
    weighted = check_bool(weighted, "weighted")
    directed = check_bool(directed, "directed")
    allow_disconnected = check_bool(allow_disconnected, "allow_disconnected")
    if sp.issparse(adjacency):
        as_real_array(adjacency.data, "adjacency")   # complex and strings: TypeError
        A = sp.csr_matrix(adjacency, dtype=np.float64)
        data = A.data
    else:
        A = as_real_array(adjacency, "adjacency").astype(np.float64)
        data = A
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"adjacency: expected a square (N, N) matrix, got shape {A.shape}")
    if not np.all(np.isfinite(data)):
        raise ValueError("adjacency: contains NaN or infinite values")
    if (data < 0).any():
        raise ValueError("adjacency: edge weights must be non-negative (zero means no edge)")
    n = A.shape[0]
    check_memory(2 * 8.0 * n * n,   # the (N, N) result and the solver's working copy
                 f"adjacency: the dense ({n:,}, {n:,}) float64 shortest-path distances of a graph "
                 f"of {n:,} nodes", "use a smaller graph (or its sparse GMRF precision, "
                 "corrpriors.kernels.graph_precision, whose memory is linear)")
    G = sp.csr_matrix(A)
    G.eliminate_zeros()
    dist = csgraph.shortest_path(G, method="auto", directed=directed, unweighted=not weighted)
    if not allow_disconnected and not np.all(np.isfinite(dist)):
        n_comp = csgraph.connected_components(G, directed=directed, connection="weak")[0]
        raise ValueError(f"adjacency: the graph is disconnected ({n_comp} components); "
                         "pass allow_disconnected=True to get infinite distances between them")
    return dist


__all__ = ["check_coords", "check_distances", "euclidean_distances", "graph_distances"]
