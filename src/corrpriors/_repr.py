"""Readable ``repr`` for estimators: the constructor parameters that differ from the defaults.

``CorrelatedMultinomial(covariance=SquaredExponential(lengthscale=2).bind(C=25),
learn_scale=True)`` instead of ``<... object at 0x...>``; arrays are shown by shape.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np


def short_repr(value: Any) -> str:
    """``repr(value)`` cut to 160 characters; arrays by shape, long lists and tuples by length."""
    if isinstance(value, np.ndarray):
        return f"array(shape={value.shape})"
    if isinstance(value, (list, tuple)) and len(value) > 6:
        return f"{type(value).__name__}(len={len(value)})"
    text = repr(value)
    return text if len(text) <= 160 else text[:157] + "..."


def _differs(value: Any, default: Any) -> bool:
    if default is inspect.Parameter.empty:
        return True
    if isinstance(value, np.ndarray) or isinstance(default, np.ndarray):
        return True
    try:
        return bool(value != default)
    except Exception:  # noqa: BLE001 - objects without a boolean comparison
        return value is not default


def estimator_repr(obj: Any) -> str:
    """``ClassName(param=value, ...)`` for the constructor parameters not at their defaults."""
    params = inspect.signature(type(obj).__init__).parameters
    parts = []
    for name, p in params.items():
        if name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if not hasattr(obj, name):
            continue
        value = getattr(obj, name)
        if _differs(value, p.default):
            parts.append(f"{name}={short_repr(value)}")
    return f"{type(obj).__name__}({', '.join(parts)})"


__all__ = ["estimator_repr", "short_repr"]
