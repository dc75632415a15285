"""corrpriors: correlation priors for reinforcement learning.

Correlated multinomial models tied together by a Gaussian prior over logistic
stick-breaking parameters, with closed-form variational inference through
Polya-Gamma augmentation (Alt, Sosic & Koeppl, NeurIPS 2019).
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
