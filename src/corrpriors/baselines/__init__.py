"""Baselines that ignore the correlation between covariates.

``DirichletMultinomial`` gives every covariate an independent Dirichlet prior; it has the
same ``fit / probs / sample_probs`` surface as :class:`corrpriors.CorrelatedMultinomial`
and a closed-form evidence comparable with that model's ELBO.
"""

from .dirichlet import DirichletMultinomial

__all__ = ["DirichletMultinomial"]
