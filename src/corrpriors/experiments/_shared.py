"""Helpers shared by several experiments (instead of experiments importing each other).

Policies and their evaluation, the largest distance between states (the paper's default
length scale), the squared-exponential Gram matrix, the grid layout saved with a seed for
its figures, stacking a curve over seeds, one random stream per method, and naming a
non-default point estimate in a figure.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..runner.protocol import Claim, SeedResult


def optimal_q(mdp: Any) -> np.ndarray:
    """Optimal Q-values of ``mdp``; ndarray of shape (S, A)."""
    from ..mdp import value_iteration

    return np.asarray(value_iteration(mdp).q_values, dtype=float)


def boltzmann_expert(mdp: Any, beta: float, normalize: bool) -> np.ndarray:
    """Return ``softmax(beta * Q*)``; ndarray of shape (S, A).

    Q* are the optimal Q-values of ``mdp``, normalised per state if ``normalize``.
    """
    from ..mdp import boltzmann_policy

    return np.asarray(boltzmann_policy(optimal_q(mdp), beta, normalize=normalize), dtype=float)


def evaluate_policy(mdp: Any, expert: np.ndarray, estimate: np.ndarray) -> dict[str, float]:
    """Mean Hellinger distance over states and value loss of ``estimate`` against ``expert``."""
    from ..mdp import hellinger, value_loss

    return {"hellinger": float(np.mean(hellinger(expert, estimate))),
            "value_loss": float(value_loss(mdp, expert, estimate))}


def largest_distance(coords: Any) -> float:
    """Largest Euclidean distance between two of the points ``coords`` (ndarray of shape (N, D)).

    The paper's default length scale ("the maximum occurring distance value"); the same
    distances as :func:`corrpriors.applications.imitation.state_kernel` uses.
    """
    from ..kernels import euclidean_distances

    return float(euclidean_distances(np.asarray(coords, dtype=float)).max())


def se_covariance(coords: np.ndarray, lengthscale: float) -> np.ndarray:
    """Squared-exponential Gram matrix on Euclidean distances, via ``corrpriors.kernels``."""
    from ..kernels import SquaredExponential

    return SquaredExponential(lengthscale).bind(coords=np.asarray(coords, float)).gram()


def grid_extras(mdp: Any) -> dict[str, np.ndarray]:
    """Return the grid layout of a grid-shaped MDP as seed extras (``grid_walls``, ``grid_cells``)."""
    walls = np.zeros(mdp.shape, dtype=bool) if mdp.walls is None else np.asarray(mdp.walls, dtype=bool)
    return {"grid_walls": walls, "grid_cells": np.asarray(mdp.cells, dtype=np.int64)}


def grid_layout(result: SeedResult) -> Any:
    """Return the :class:`~corrpriors.plotting.GridLayout` saved by :func:`grid_extras`."""
    from ..envs import ACTION_VECTORS
    from ..plotting import GridLayout

    return GridLayout(walls=result.extras["grid_walls"], cells=result.extras["grid_cells"],
                      action_vectors=ACTION_VECTORS)


def curve_stack(results: Mapping[int, SeedResult], metric: str, method: str) -> np.ndarray:
    """``curves[metric][method]`` of every seed (in seed order); ndarray of shape (n_seeds, X)."""
    return np.stack([np.asarray(results[s].curves[metric][method], dtype=float) for s in sorted(results)])


def extra_stack(results: Mapping[int, SeedResult], name: str, method: str | None = None) -> np.ndarray:
    """Stack an extra (a per-method one if ``method``) of every seed; ndarray of shape (n_seeds, ...)."""
    rows = []
    for s in sorted(results):
        r = results[s]
        rows.append(np.asarray(r.extras[name] if method is None else r.method_extras[name][method], dtype=float))
    return np.stack(rows)


def nonfinite(numbers: Mapping[str, Any]) -> list[str]:
    """Names of the entries of ``numbers`` (name -> number or array) holding a NaN or an infinity."""
    return [name for name, value in numbers.items()
            if not np.all(np.isfinite(np.asarray(value, dtype=float)))]


def finite_claim(claim: str, holds: bool, detail: str, numbers: Mapping[str, Any]) -> Claim:
    """A :class:`Claim` that is not met when one of the ``numbers`` it rests on is not finite.

    ``numbers`` maps what the detail calls each number (or curve) to its value. A comparison
    with a NaN (a failed fit) proves nothing either way, so the claim is not met and the detail
    says which numbers were not finite.
    """
    bad = nonfinite(numbers)
    if bad:
        return Claim(claim, False, f"not met: {', '.join(bad)} not finite (a failed fit?); {detail}")
    return Claim(claim, bool(holds), detail)


__all__ = [
    "boltzmann_expert",
    "curve_stack",
    "evaluate_policy",
    "extra_stack",
    "finite_claim",
    "grid_extras",
    "grid_layout",
    "largest_distance",
    "nonfinite",
    "optimal_q",
    "se_covariance",
]


#: How figures name the point estimates of a transition model (``point_estimate``).
ESTIMATE_NAMES = {"mean": "posterior means", "hellinger": "every method's Hellinger-Bayes estimate"}


def estimate_title(environment: str, kind: str) -> str:
    """``environment``, followed by the point estimate scored when it is not the posterior mean."""
    return environment if kind == "mean" else f"{environment}, {ESTIMATE_NAMES[kind]}"


def method_stream(rng: np.random.Generator, methods: tuple) -> dict[str, np.random.Generator]:
    """One generator per method, from one draw of ``rng`` and the method's name.

    A method's numbers do not depend on which other methods run (``--methods`` subsets agree).
    """
    root = int(rng.integers(2**32))
    return {m: np.random.default_rng([root, zlib.crc32(m.encode())]) for m in methods}
