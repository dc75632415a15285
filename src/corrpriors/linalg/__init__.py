"""Linear algebra below the core and the kernels: dense and sparse Cholesky machinery.

* :func:`jittered_cholesky` -- the one jittered dense Cholesky (one escalation and one warning
  rule, used by every dense prior and sampler);
* :class:`SparseCholesky` -- ordering and symbolic analysis of a sparse SPD pattern done once,
  numeric factorisations (:class:`CholeskyFactor`) on it: solves, log-determinants, draws and the
  exact selected inverse (Takahashi recursions);
* :func:`analysis_for` -- the cached analysis of a pattern, shared by every user of that pattern.

This package imports only numpy, scipy and the package's shared primitives; the core, the
kernels and everything above them import it, never the other way round.
"""

from __future__ import annotations

from .dense import JITTER_LEVELS, JITTER_START, JITTER_WARN_ABOVE, jittered_cholesky
from .sparse import CholeskyFactor, NotPositiveDefiniteError, SparseCholesky, analysis_for

__all__ = [
    "JITTER_LEVELS",
    "JITTER_START",
    "JITTER_WARN_ABOVE",
    "CholeskyFactor",
    "NotPositiveDefiniteError",
    "SparseCholesky",
    "analysis_for",
    "jittered_cholesky",
]
