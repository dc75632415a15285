"""Run the planners' small dense linear algebra with one BLAS thread.

At MDP sizes (S ~ 100) multi-threaded BLAS brings no speed-up, and when the machine is
oversubscribed (parallel seeds, other jobs) OpenBLAS threads that spin-wait can slow a batched
solve down by two orders of magnitude; the limits live in :mod:`corrpriors._threads`.
"""

from __future__ import annotations

import contextlib

from .._threads import blas_threads
from .._threads import single_blas_thread as blas_single_thread


def single_threaded_blas() -> contextlib.AbstractContextManager:
    """Context manager limiting BLAS to one thread (a no-op without threadpoolctl)."""
    return blas_threads(1)


__all__ = ["blas_single_thread", "single_threaded_blas"]
