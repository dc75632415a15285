"""
The stick-breaking transform and what a correlation prior looks like
====================================================================

The model never puts a Gaussian process on probabilities directly. It draws K - 1 real
"stick" logits :math:`\\psi_{c1}, \\dots, \\psi_{c,K-1}` per covariate and maps them to the
simplex with the logistic stick-breaking transform

.. math::

    \\pi_{ck} = \\sigma(\\psi_{ck}) \\prod_{j<k} \\bigl(1 - \\sigma(\\psi_{cj})\\bigr),
    \\qquad \\pi_{cK} = \\prod_{j<K} \\bigl(1 - \\sigma(\\psi_{cj})\\bigr).

Stick k takes the fraction :math:`\\sigma(\\psi_{ck})` of what the first k - 1 sticks left.
This example shows the transform and its inverse, then draws probability vectors from the
prior along a one-dimensional covariate: a Gaussian process on every stick with a
squared-exponential kernel makes neighbouring covariates share similar distributions, and
the length scale says how far that similarity reaches.
"""

import matplotlib.pyplot as plt
import numpy as np

from corrpriors import pi_to_psi, psi_to_pi
from corrpriors.kernels import SquaredExponential

# %%
# The transform and its inverse
# -----------------------------
# All-zero logits do not give the uniform distribution: the first stick takes half, the
# second half of the rest, and so on. The logits of the uniform distribution are
# :math:`\psi_k = -\log(K - k)`, the prior mean the model uses by default.
K = 4
print("psi = 0          ->", psi_to_pi(np.zeros(K - 1)).round(3))
uniform_logits = -np.log(K - np.arange(1, K))
print("psi = -log(K-k)  ->", psi_to_pi(uniform_logits).round(3))

p = np.array([0.1, 0.2, 0.3, 0.4])
print("round trip error:", np.abs(psi_to_pi(pi_to_psi(p)) - p).max())

# %%
# Prior draws along a covariate
# -----------------------------
# C = 200 covariates on a line, K = 3 categories (two sticks). Each stick's logits are one
# draw from :math:`N(\mu_k, \theta\,\tilde\Sigma)` with :math:`\tilde\Sigma_{cc'} =
# \exp(-d(c, c')^2 / l^2)`; the stacked areas are the three category probabilities.
rng = np.random.default_rng(0)
x = np.linspace(0.0, 10.0, 200)[:, None]                  # (C, 1) covariates
K = 3
mean = -np.log(K - np.arange(1, K))                       # (K - 1,) uniform logits
theta = 4.0                                               # prior scale

fig, axes = plt.subplots(2, 1, figsize=(7, 5), sharex=True, layout="constrained")
for ax, lengthscale in zip(axes, (0.5, 3.0)):
    gram = SquaredExponential(lengthscale=lengthscale).bind(coords=x).gram()   # (C, C)
    chol = np.linalg.cholesky(theta * gram + 1e-8 * np.eye(len(x)))
    psi = mean + chol @ rng.standard_normal((len(x), K - 1))                  # (C, K - 1)
    probs = psi_to_pi(psi)                                                    # (C, K)
    ax.stackplot(x[:, 0], probs.T, labels=[f"category {k + 1}" for k in range(K)],
                 colors=["#4c72b0", "#dd8452", "#55a868"])
    ax.set_ylim(0, 1)
    ax.set_ylabel("probability")
    ax.set_title(f"one prior draw: length scale $l$ = {lengthscale}, scale $\\theta$ = {theta}")
axes[-1].set_xlabel("covariate (e.g. a state's position)")
axes[0].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
plt.show()

# %%
# With the short length scale the distribution changes within a unit of the covariate; with
# the long one it drifts slowly, so counts observed at one covariate also inform its
# neighbours. The scale :math:`\theta` sets how far the distributions can move away from
# the prior mean (here the uniform distribution).
