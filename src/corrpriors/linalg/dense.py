"""Dense linear-algebra primitives of the core: the one jittered Cholesky factorisation.

Rule (used by every prior and sampler): a symmetric positive semi-definite matrix ``A`` is
factorised as ``A + eps * I = L L^T`` with the smallest ``eps`` in ``1e-10, 1e-9, ...`` times the
mean of ``diag(A)`` (at most 14 levels) that succeeds. The first levels (``eps <= 1e-8`` times the
mean diagonal) are round-off protection for kernels whose Gram matrices are numerically singular
(squared-exponential kernels on grids have eigenvalues far below 1e-16); they change the prior by
less than its own floating-point noise and are silent. A larger ``eps`` materially changes the
prior, so it issues one :class:`~corrpriors.exceptions.JitterWarning`. The jittered matrix is then
used everywhere (VI, ELBO, samplers), so every bound is exact for the model actually fitted.
"""

from __future__ import annotations

import warnings

import numpy as np

from .._typing import FloatArray
from .._validation import SYMMETRY_RTOL, check_symmetric_square
from ..exceptions import JitterWarning

#: First jitter level, relative to the mean diagonal.
JITTER_START = 1e-10
#: Jitter above this level (relative to the mean diagonal) is reported by a JitterWarning.
JITTER_WARN_ABOVE = 1e-8
#: Number of levels tried (1e-10 ... 1e3 relative).
JITTER_LEVELS = 14


def jittered_cholesky(matrix: np.ndarray, *, name: str = "covariance",
                      stacklevel: int = 2) -> tuple[np.ndarray, FloatArray, float]:
    """Lower Cholesky factor of ``matrix + eps * I`` with the smallest working jitter ``eps``.

    Parameters
    ----------
    matrix : ndarray of shape (C, C)
        Symmetric (to ``SYMMETRY_RTOL`` relative to its largest entry), finite, positive
        semi-definite (the last is for the caller to check: see ``check_covariance``).
    name : str
        Argument name for messages.
    stacklevel : int
        Passed on to :func:`warnings.warn` (relative to the caller).

    Returns
    -------
    chol : ndarray of shape (C, C)
        Lower-triangular ``L`` with ``L L^T = matrix + eps * I``.
    jittered : ndarray of shape (C, C)
        ``matrix + eps * I``: use this matrix everywhere.
    eps : float

    Raises
    ------
    ValueError
        If ``matrix`` is not a finite symmetric square matrix, its mean diagonal is not
        positive, or no level up to 1e3 works.
    TypeError
        Complex or non-numeric ``matrix``.
    """
    a = check_symmetric_square(matrix, name)
    mean_diag = float(np.mean(np.diag(a)))
    if not mean_diag > 0:
        raise ValueError(f"{name}: diagonal must be positive, mean diagonal is {mean_diag:g}")
    eye = np.eye(a.shape[0])
    eps = JITTER_START * mean_diag
    for _ in range(JITTER_LEVELS):
        jittered = a + eps * eye
        try:
            chol = np.linalg.cholesky(jittered)
            break
        except np.linalg.LinAlgError:
            eps *= 10.0
    else:
        raise ValueError(f"{name}: could not be factorised even with diagonal jitter "
                         f"{eps / 10.0:.3g}; is it positive semi-definite?")
    if eps > JITTER_WARN_ABOVE * mean_diag * (1.0 + 1e-9):
        warnings.warn(
            f"{name} is numerically rank deficient: added diagonal jitter {eps:.3g} "
            f"({eps / mean_diag:.3g} x mean diagonal); the fit uses the jittered matrix.",
            JitterWarning, stacklevel=stacklevel + 1)
    return chol, jittered, eps


__all__ = ["JITTER_LEVELS", "JITTER_START", "JITTER_WARN_ABOVE", "SYMMETRY_RTOL", "jittered_cholesky"]
