"""Run the planners' small dense linear algebra with one BLAS thread.

At MDP sizes (S ~ 100) multi-threaded BLAS brings no speed-up, and when the machine is
oversubscribed (parallel seeds, other jobs) OpenBLAS threads that spin-wait can slow a
batched solve down by two orders of magnitude. If :mod:`threadpoolctl` is installed, the
public planners therefore limit BLAS to one thread for the duration of the call (and restore
the previous setting afterwards); without it they run unchanged.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_controller: Any = None


def single_threaded_blas() -> contextlib.AbstractContextManager:
    """Context manager limiting BLAS to one thread (a no-op without threadpoolctl)."""
    global _controller
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - optional dependency
        return contextlib.nullcontext()
    if _controller is None:
        _controller = ThreadpoolController()
    return _controller.limit(limits=1, user_api="blas")


def blas_single_thread(func: F) -> F:
    """Run ``func`` inside :func:`single_threaded_blas`."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with single_threaded_blas():
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
