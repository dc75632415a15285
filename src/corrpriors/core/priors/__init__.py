"""The Gaussian priors over the stick-breaking parameters: the protocol and its implementations.

* :mod:`.base` -- the prior protocol :class:`GaussianPrior` (what a psi step, the M-steps and the
  samplers ask of a prior), the observed-set layout and the psi step's output;
* :mod:`.dense` -- :class:`DenseCovariancePrior`, a kernel's Gram matrix or any PSD covariance;
* :mod:`.sparse` -- :class:`SparsePrecisionPrior`, a sparse GMRF precision.

Adding a prior is one module here implementing :class:`GaussianPrior`.
"""

from __future__ import annotations

from .base import (
    PRIOR_VARIANCE_RANGE,
    GaussianPrior,
    PsiStep,
    StickLayout,
    build_layout,
    check_prior,
    check_prior_scale,
    joint_constant_mean,
    prior_scale_range,
)
from .dense import DenseCovariancePrior
from .sparse import SparsePrecisionPrior, check_precision

__all__ = [
    "PRIOR_VARIANCE_RANGE",
    "DenseCovariancePrior",
    "GaussianPrior",
    "PsiStep",
    "SparsePrecisionPrior",
    "StickLayout",
    "build_layout",
    "check_precision",
    "check_prior",
    "check_prior_scale",
    "joint_constant_mean",
    "prior_scale_range",
]
