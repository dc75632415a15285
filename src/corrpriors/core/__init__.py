"""Core inference: the correlated multinomial model, CAVI, ELBO, EM and stick-breaking."""

from __future__ import annotations

from .model import CorrelatedMultinomial, select_kernel
from .results import VIResult

__all__ = ["CorrelatedMultinomial", "VIResult", "select_kernel"]
