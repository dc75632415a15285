"""Explicit randomness: normalise seeds to Generators and split streams.

Library code never touches numpy's global random state.
"""

from __future__ import annotations

import numpy as np

from ._typing import SeedLike


def as_generator(seed: SeedLike) -> np.random.Generator:
    """Return a :class:`numpy.random.Generator` for ``seed``.

    Parameters
    ----------
    seed : None, int, numpy.random.SeedSequence or numpy.random.Generator
        A Generator is returned unchanged (the caller's stream is shared);
        anything else goes through :func:`numpy.random.default_rng`.
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, np.random.RandomState):
        raise TypeError(
            "rng: legacy numpy.random.RandomState is not supported; "
            "pass a numpy.random.Generator (numpy.random.default_rng(seed))"
        )
    if seed is not None and not isinstance(seed, (int, np.integer, np.random.SeedSequence)):
        raise TypeError(
            f"rng: expected None, an int, a SeedSequence or a Generator, got {type(seed).__name__}"
        )
    if isinstance(seed, (bool, np.bool_)):
        raise TypeError("rng: expected None, an int, a SeedSequence or a Generator, got bool")
    if isinstance(seed, (int, np.integer)) and seed < 0:
        raise ValueError(f"rng: an integer seed must be non-negative, got {int(seed)}")
    return np.random.default_rng(seed)


def spawn(rng: np.random.Generator, n: int) -> list[np.random.Generator]:
    """Split ``rng`` into ``n`` independent child generators (one stream per sub-task)."""
    return list(as_generator(rng).spawn(n))


__all__ = ["as_generator", "spawn"]
