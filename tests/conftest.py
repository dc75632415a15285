"""Shared pytest configuration."""

import os

import matplotlib
import pytest

matplotlib.use("Agg")  # never open a window
os.environ.setdefault("MPLBACKEND", "Agg")

try:  # the suite's matrices are small: multi-threaded BLAS only adds contention
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")
except ImportError:  # pragma: no cover
    pass


@pytest.fixture
def toy_registered():
    """The runner tests' toy experiment (``tests/toy_experiment.py``) registered for one test."""
    import toy_experiment as toy
    from corrpriors.runner import registry

    registry.register(toy.NAME, toy)
    yield toy
    registry.unregister(toy.NAME)
