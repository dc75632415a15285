"""Covariance functions for the correlated multinomial prior, and sparse GMRF precisions.

Kernels are immutable; their free hyper-parameters form one log-space vector ``theta``
with ``bounds`` (scikit-learn convention). Evaluate on coordinates (``k(X)``) or on a
distance matrix (``k.from_distances(D)``), combine with ``+`` and ``*``, and freeze on the
model's covariates with ``k.bind(coords=X)`` / ``k.bind(distances=D)``.

Examples
--------
>>> import numpy as np
>>> from corrpriors.kernels import SquaredExponential, Matern32, euclidean_distances
>>> X = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]])
>>> k = SquaredExponential(lengthscale=2.0) + 0.5 * Matern32(lengthscale=1.0)
>>> k.hyperparameter_names
['k1__lengthscale', 'k2__kernel__lengthscale']
>>> bound = k.bind(coords=X)
>>> bound.gram().shape, bound.gram_gradient().shape
((3, 3), (3, 3, 2))

Large state spaces use a sparse *precision* instead of a covariance (``gmrf``): a
Matern-like Gaussian Markov random field on a grid or a graph,

>>> from corrpriors.kernels import grid_precision
>>> grid_precision((100, 100), length_scale=10.0).shape
(10000, 10000)
"""

from .base import BoundKernel, Hyperparameter, Kernel
from .combination import Product, Scaled, Sum
from .distances import euclidean_distances, graph_distances
from .gmrf import graph_precision, grid_adjacency, grid_precision, knn_adjacency, lattice_adjacency, matern_kappa
from .stationary import Exponential, Matern32, Matern52, SquaredExponential
from .task import MultiTaskKernel, TaskCorrelation, kronecker_precision, task_coordinates

__all__ = [
    "BoundKernel",
    "Exponential",
    "Hyperparameter",
    "Kernel",
    "Matern32",
    "Matern52",
    "MultiTaskKernel",
    "Product",
    "Scaled",
    "SquaredExponential",
    "Sum",
    "TaskCorrelation",
    "euclidean_distances",
    "graph_distances",
    "graph_precision",
    "grid_adjacency",
    "grid_precision",
    "knn_adjacency",
    "kronecker_precision",
    "lattice_adjacency",
    "matern_kappa",
    "task_coordinates",
]
