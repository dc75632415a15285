"""BLAS thread limits: the one place corrpriors talks to :mod:`threadpoolctl`.

The core's per-stick factorisations, the planners' batched solves and the Gibbs sweeps run many
small and medium matrix operations one after the other. Multi-threaded BLAS brings no speed-up
there and, on a busy machine, spin-waiting OpenBLAS threads slowed a 900 x 900 ``potrf + trtri``
from 0.036 s to 0.07-1.8 s and a 400 x 400 Cholesky 600x (measured on 2 shared cores), so these
code paths run inside :func:`blas_threads` with one thread. Without threadpoolctl the limits are
no-ops.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


@functools.lru_cache(maxsize=1)
def _controller() -> Any:
    """One ThreadpoolController per process (discovering the BLAS libraries costs ~1.5 ms, more
    than a small fit's psi step), or ``None`` without threadpoolctl.
    """
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency
        return None
    return ThreadpoolController()


def blas_threads(limit: int = 1) -> contextlib.AbstractContextManager:
    """Context manager limiting BLAS to ``limit`` threads for its duration.

    Parameters
    ----------
    limit : int
        Number of BLAS threads (default one).
    """
    controller = _controller()
    if controller is None:  # pragma: no cover
        return contextlib.nullcontext()
    return controller.limit(limits=int(limit), user_api="blas")


def single_blas_thread(func: F) -> F:
    """Decorator: run ``func`` with one BLAS thread."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with blas_threads(1):
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


__all__ = ["blas_threads", "single_blas_thread"]
