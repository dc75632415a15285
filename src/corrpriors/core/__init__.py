"""Core inference: the correlated multinomial model, CAVI, ELBO, EM and stick-breaking."""

from __future__ import annotations

from .model import CorrelatedMultinomial
from .priors.sparse import SparsePrecisionPrior
from .results import VIResult
from .selection import ScaleSearch, ScaleSelection, select_kernel, select_scale

__all__ = ["CorrelatedMultinomial", "ScaleSearch", "ScaleSelection", "SparsePrecisionPrior",
           "VIResult", "select_kernel", "select_scale"]
