"""The prior of ``corrpriors fit``: the memory a dense kernel prior needs, checked before any
C x C array exists, and the sparse GMRF prior (``--prior gmrf``) for tables too big for it.

Measured peak resident memory of ``corrpriors fit --learn-scale --max-iter 30`` (``/usr/bin/time
-v``; C rows on a square grid, K = 3; OpenBLAS): 170 MB, 398 MB and 1.28 GB at C = 1,000, 2,000
and 4,000, i.e. about 100 MB for the interpreter and about nine C x C float64 matrices (the
distances, the Gram matrix, its jittered copy and Cholesky factor, the psi step's blocks of
every stick); 358 MB and 1.14 GB at C = 1,000 and 2,000 with ``--learn-lengthscale`` (about 32
matrices: the M-step's inverses and gradients); ``--uncertainty`` (4,000 draws) adds 235 MB at
C = 2,000, about three arrays of ``samples x C x K`` numbers. The GMRF prior is sparse: about
10 kB per row on a 2-D grid (README: 1.06 GB at 99,856 rows).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._memory import about_bytes, available_memory

#: C x C float64 matrices alive at the peak of a dense fit, without and with a learned length
#: scale (measured at C = 1,000, 2,000 and 4,000; see the module docstring).
DENSE_MATRICES = {False: 10.0, True: 34.0}

#: Memory of the interpreter with numpy and scipy loaded (measured: ~100 MB).
BASE_BYTES = 150e6

#: Bytes per row of the sparse GMRF prior on a 2-D grid (measured; generous).
GMRF_BYTES_PER_ROW = 12e3

#: Smallest kappa^2 / lambda_max(L) of ``--prior gmrf``: the condition number of
#: Q = (kappa^2 I + L)^2 stays below about 1e10 (measured on a 5 x 6 grid: the fit's arithmetic
#: broke down at a ratio of 2.5e-7, range 2,000 spacings, and was sound at 1e-6).
GMRF_MIN_KAPPA2_RATIO = 1e-5

#: Largest kappa^2 of ``--prior gmrf`` (kappa^4 must not overflow; far beyond it the prior is
#: already independent across rows).
GMRF_MAX_KAPPA2 = 1e100


class LengthscaleRangeError(ValueError):
    """``--lengthscale`` outside the range that ``--prior gmrf`` can factorise."""


def fit_memory_estimate(n_rows: int, n_categories: int, *, prior: str, learn_lengthscale: bool,
                        n_predict: int = 0, mc_samples: int = 0) -> float:
    """Bytes a ``corrpriors fit`` run needs at its peak (an estimate, see the module docstring).

    Parameters
    ----------
    n_rows, n_categories : int
        C and K.
    prior : {"kernel", "gmrf"}
    learn_lengthscale : bool
    n_predict : int
        M, rows of ``--predict-at`` (a C x M cross-covariance and its solves).
    mc_samples : int
        Monte Carlo draws of ``--uncertainty`` / ``--method mc`` (0 without).

    Returns
    -------
    float
    """
    c, k = float(n_rows), float(n_categories)
    if prior == "gmrf":
        need = GMRF_BYTES_PER_ROW * c
    else:
        need = 8.0 * c * c * DENSE_MATRICES[bool(learn_lengthscale)] + 8.0 * 3.0 * c * n_predict
    need += 8.0 * 3.0 * mc_samples * (c + n_predict) * k
    return BASE_BYTES + need


def check_fit_memory(n_rows: int, n_categories: int, *, prior: str, learn_lengthscale: bool,
                     n_predict: int = 0, mc_samples: int = 0,
                     available: float | None = None) -> None:
    """Refuse (``ValueError``, one line starting with the option to change: ``--counts`` or
    ``--samples``) a fit whose memory estimate exceeds what is available.

    Parameters
    ----------
    n_rows, n_categories, prior, learn_lengthscale, n_predict, mc_samples
        See :func:`fit_memory_estimate`.
    available : float, optional
        Bytes available (default :func:`corrpriors._memory.available_memory`; no check if
        that is unknown).
    """
    need = fit_memory_estimate(n_rows, n_categories, prior=prior,
                               learn_lengthscale=learn_lengthscale, n_predict=n_predict,
                               mc_samples=mc_samples)
    if available is None:
        available = available_memory()
    if available is None or need <= available:
        return
    draws = need - fit_memory_estimate(n_rows, n_categories, prior=prior,
                                       learn_lengthscale=learn_lengthscale,
                                       n_predict=n_predict)
    here = f"{about_bytes(available)} is available here"
    if draws > need / 2:  # the Monte Carlo draws, not the prior, are what does not fit
        raise ValueError(f"--samples: {mc_samples:,} draws of C = {n_rows + n_predict:,} rows x "
                         f"K = {n_categories} probabilities need {about_bytes(need)} of "
                         f"memory; {here}: use fewer --samples")
    what = (f"the dense kernel prior holds about {DENSE_MATRICES[bool(learn_lengthscale)]:g} "
            f"C x C matrices" if prior == "kernel" else "the sparse GMRF prior")
    if prior == "kernel":
        way = ("use fewer rows, or --prior gmrf (a sparse prior on the coordinates' grid or "
               "nearest-neighbour graph: memory and time grow about linearly with C; in Python "
               "CorrelatedMultinomial(precision=corrpriors.kernels.graph_precision(...)))")
    else:
        way = "use fewer rows"
    if mc_samples:
        way += " or fewer --samples"
    raise ValueError(f"--counts: C = {n_rows:,} rows need {about_bytes(need)} of memory "
                     f"({what}); {here}: {way}")


def gmrf_precision(coords: np.ndarray, lengthscale: float) -> Any:
    r"""The sparse precision of ``--prior gmrf``: :math:`Q = \tau(\kappa^2 I + L)^2` (normalised
    to unit geometric-mean marginal variance) on the graph of the coordinates.

    Integer coordinates in which every point has a lattice neighbour (one unit away along one
    axis) use the grid graph of the occupied cells (:func:`~corrpriors.kernels.lattice_adjacency`);
    other coordinates the symmetrised graph of the ``2 D`` nearest neighbours, weighted so that
    lengths are in the coordinates' units (:func:`~corrpriors.kernels.knn_adjacency`).
    ``lengthscale`` is the Matern range :math:`\rho` (correlation about 0.14 at that distance),
    :math:`\kappa = \sqrt{8\nu}/\rho`, :math:`\nu = 2 - D/2`.

    Parameters
    ----------
    coords : ndarray of shape (C, D)
        D in 1..3.
    lengthscale : float

    Returns
    -------
    scipy.sparse.csr_array of shape (C, C)

    Raises
    ------
    ValueError
        D > 3, fewer than 2 points, or duplicate points; :class:`LengthscaleRangeError` for a
        range the factorisation cannot resolve (see :func:`_check_gmrf_range`).
    """
    from ..kernels import graph_precision, knn_adjacency, lattice_adjacency

    c, d = coords.shape
    if not 1 <= d <= 3:
        raise ValueError(f"--prior gmrf needs coordinates in 1 to 3 dimensions, got {d} columns")
    if c < 2:
        raise ValueError("--prior gmrf needs at least 2 rows")
    adjacency = None
    if np.all(coords == np.round(coords)):
        lattice = lattice_adjacency(coords)
        if np.all(np.diff(lattice.indptr) > 0):
            adjacency = lattice
    if adjacency is None:
        adjacency = knn_adjacency(coords, min(2 * d, c - 1))
    _check_gmrf_range(adjacency, lengthscale, d)
    return graph_precision(adjacency, length_scale=lengthscale, alpha=2, dim=d)


def _check_gmrf_range(adjacency: Any, lengthscale: float, dim: int) -> None:
    """Refuse a range that the sparse factorisation cannot resolve (:class:`LengthscaleRangeError`).

    ``lambda_max(L) <= 2 max_i sum_j w_ij`` (Gershgorin) bounds the Laplacian; kappa^2 below
    :data:`GMRF_MIN_KAPPA2_RATIO` of it leaves Q too ill-conditioned (a nearly constant
    field), above :data:`GMRF_MAX_KAPPA2` kappa^4 overflows.
    """
    from ..kernels import matern_kappa

    bound = 2.0 * float(np.max(np.asarray(adjacency.sum(axis=1)).ravel()))
    k2_min, k2_max = GMRF_MIN_KAPPA2_RATIO * bound, GMRF_MAX_KAPPA2
    factor = matern_kappa(1.0, alpha=2, dim=dim)  # kappa = factor / lengthscale
    kappa2 = (factor / lengthscale) ** 2
    if k2_min <= kappa2 <= k2_max:
        return
    longest, shortest = factor / np.sqrt(k2_min), factor / np.sqrt(k2_max)
    why = ("longer ranges make the precision too ill-conditioned to factorise (the prior is "
           "then nearly one constant field: use --prior kernel)" if kappa2 < k2_min
           else "shorter ranges overflow (the prior is independent across rows long before)")
    raise LengthscaleRangeError(
        f"--lengthscale {lengthscale:g}: with --prior gmrf on these coordinates the range must "
        f"lie in [{shortest:.3g}, {longest:.3g}]; {why}")


__all__ = ["BASE_BYTES", "DENSE_MATRICES", "GMRF_BYTES_PER_ROW", "GMRF_MAX_KAPPA2",
           "GMRF_MIN_KAPPA2_RATIO", "LengthscaleRangeError", "check_fit_memory",
           "fit_memory_estimate", "gmrf_precision"]
