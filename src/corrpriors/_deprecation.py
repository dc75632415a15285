"""Deprecated public names keep working until :data:`REMOVED_IN`, with a :class:`DeprecationWarning`.

A module that moved becomes a two-line alias whose module-level ``__getattr__`` forwards every name
to the new module and warns once per name looked up::

    from .._deprecation import moved
    __getattr__, __dir__ = moved(__name__, "corrpriors.linalg.dense")

A keyword argument that was replaced is taken through ``**kwargs`` (so it no longer shows in the
signature) and read with :func:`deprecated_keyword`, which warns when it is given.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any

#: The release that removes the aliases.
REMOVED_IN = "0.3"


def moved(old: str, new: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for the alias module ``old`` of the module ``new``.

    Parameters
    ----------
    old, new : str
        Dotted module names.

    Returns
    -------
    getattr, dir : callable
        Install them as the alias module's ``__getattr__`` and ``__dir__``.
    """

    def __getattr__(name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        value = getattr(importlib.import_module(new), name)
        warnings.warn(f"{old} moved to {new}: import {name} from {new} ({old} is removed in "
                      f"corrpriors {REMOVED_IN})", DeprecationWarning, stacklevel=2)
        return value

    def __dir__() -> list[str]:
        module = importlib.import_module(new)
        return sorted(getattr(module, "__all__", dir(module)))

    return __getattr__, __dir__


def deprecated_keyword(owner: str, kwargs: dict[str, Any], old: str, instead: str) -> Any:
    """The value of the deprecated keyword argument ``old`` in ``kwargs`` (None when absent).

    Warns (:class:`DeprecationWarning`, at the caller of ``owner``) when ``old`` is given; any
    other name in ``kwargs`` is a :class:`TypeError`, as Python raises for an unknown keyword.

    Parameters
    ----------
    owner : str
        The callable that took ``**kwargs``, e.g. ``"SubgoalPolicyEstimator"``.
    kwargs : dict
        Its ``**kwargs``.
    old : str
        The deprecated keyword.
    instead : str
        What to do instead, e.g. ``"pass rng to fit()"``.
    """
    unknown = sorted(set(kwargs) - {old})
    if unknown:
        raise TypeError(f"{owner}() got an unexpected keyword argument {unknown[0]!r}")
    if old not in kwargs:
        return None
    warnings.warn(f"{owner}: {old} is deprecated; {instead} ({old} is removed in corrpriors "
                  f"{REMOVED_IN})", DeprecationWarning, stacklevel=3)
    return kwargs[old]


__all__ = ["REMOVED_IN", "deprecated_keyword", "moved"]
