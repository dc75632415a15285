"""Modules that moved: their old import paths keep working, with a :class:`DeprecationWarning`.

An old module becomes a two-line alias whose module-level ``__getattr__`` forwards every name to the
new module and warns once per name looked up::

    from .._deprecation import moved
    __getattr__, __dir__ = moved(__name__, "corrpriors.linalg.dense")
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


__all__ = ["REMOVED_IN", "moved"]
