"""Shared pytest configuration."""

import os

import matplotlib

matplotlib.use("Agg")  # never open a window
os.environ.setdefault("MPLBACKEND", "Agg")

try:  # the suite's matrices are small: multi-threaded BLAS only adds contention
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")
except ImportError:  # pragma: no cover
    pass
