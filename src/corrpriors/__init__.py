"""corrpriors: correlation priors for reinforcement learning.

Correlated multinomial models tied together by a Gaussian prior over logistic
stick-breaking parameters, with closed-form variational inference through
Polya-Gamma augmentation (Alt, Sosic & Koeppl, NeurIPS 2019).

The root package exports the core surface; the decision-making layers live in the
subpackages :mod:`corrpriors.mdp`, :mod:`corrpriors.envs`,
:mod:`corrpriors.applications`, :mod:`corrpriors.plotting` and
:mod:`corrpriors.experiments`.
"""

from __future__ import annotations

__version__ = "0.1.0"

from . import kernels
from .baselines import DirichletMultinomial
from .core import (
    CorrelatedMultinomial,
    ScaleSearch,
    ScaleSelection,
    SparsePrecisionPrior,
    VIResult,
    select_kernel,
    select_scale,
)
from .core.gibbs import GibbsResult, run_gibbs
from .core.stick_breaking import count_statistics, pi_to_psi, psi_to_pi
from .exceptions import ConvergenceWarning, JitterWarning

__all__ = [
    "ConvergenceWarning",
    "CorrelatedMultinomial",
    "DirichletMultinomial",
    "GibbsResult",
    "JitterWarning",
    "ScaleSearch",
    "ScaleSelection",
    "SparsePrecisionPrior",
    "VIResult",
    "__version__",
    "count_statistics",
    "kernels",
    "pi_to_psi",
    "psi_to_pi",
    "run_gibbs",
    "select_kernel",
    "select_scale",
]
