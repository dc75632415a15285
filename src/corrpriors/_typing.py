"""Type aliases shared across the package."""

from __future__ import annotations

from typing import Union

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
SeedLike = Union[None, int, np.random.SeedSequence, np.random.Generator]

__all__ = ["FloatArray", "IntArray", "SeedLike"]
