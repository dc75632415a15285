"""Per-action fits in parallel (joblib threads and processes, a local Dask cluster): the same
numbers as one after the other."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from corrpriors.applications import CorrelatedTransitionModel


def _world(side: int = 5, n: int = 300, seed: int = 0):
    r, c = np.divmod(np.arange(side * side), side)
    coords = np.stack([r, c], axis=1)
    info = SimpleNamespace(n_states=side * side, n_actions=4, coordinates=coords,
                           shape=(side, side))
    rng = np.random.default_rng(seed)
    s = rng.integers(side * side, size=n)
    a = rng.integers(4, size=n)
    moves = np.array([(-1, 0), (1, 0), (0, -1), (0, 1)])
    tgt = np.clip(coords[s] + moves[a], 0, side - 1)
    s2 = tgt[:, 0] * side + tgt[:, 1]
    jump = rng.random(n) < 0.03
    s2[jump] = 0                                   # a few far jumps (pooling)
    return info, s, a, s2


def _fit(sparse: bool, selection: str = "fixed", **kwargs):
    info, s, a, s2 = _world()
    belief = CorrelatedTransitionModel.for_mdp(info, prior="gmrf", sparse=sparse, max_iter=15,
                                               selection=selection, **kwargs)
    belief.update(s, a, s2)
    return belief.refit()


def _assert_same(x, y):
    assert x.n_fits_ == y.n_fits_
    assert x.selected_ == y.selected_
    for mx, my in zip(x.models_, y.models_):
        np.testing.assert_array_equal(mx.psi_mean_, my.psi_mean_)
        np.testing.assert_array_equal(mx.psi_var_, my.psi_var_)


@pytest.mark.parametrize("sparse, backend", [
    pytest.param(True, "threads", marks=pytest.mark.slow),
    pytest.param(False, "threads", marks=pytest.mark.slow),
    pytest.param(True, "loky", marks=pytest.mark.slow),
    pytest.param(False, "loky", marks=pytest.mark.slow)])
def test_joblib_backends_give_the_serial_numbers(sparse, backend):
    serial = _fit(sparse, "collapsed")
    parallel = _fit(sparse, "collapsed", n_jobs=2, backend=backend)
    _assert_same(serial, parallel)
    # and the next refit (warm starts carried back from the workers) too
    info, s, a, s2 = _world(seed=1)
    for belief in (serial, parallel):
        belief.update(s, a, s2)
        belief.refit()
    _assert_same(serial, parallel)


def test_threads_give_the_serial_numbers_at_a_fixed_scale():
    _assert_same(_fit(True), _fit(True, n_jobs=2))


def test_dask_local_cluster_gives_the_serial_numbers():
    distributed = pytest.importorskip("dask.distributed")
    serial = _fit(True)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        on_dask = _fit(True, n_jobs=2, backend=client)
        also = _fit(True, n_jobs=-1, backend="dask")   # the current default client
    _assert_same(serial, on_dask)
    _assert_same(serial, also)


@pytest.mark.slow
def test_dask_worker_processes_give_the_serial_numbers():
    distributed = pytest.importorskip("dask.distributed")
    serial = _fit(True, "collapsed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        on_dask = _fit(True, "collapsed", n_jobs=2, backend=client)
    _assert_same(serial, on_dask)


def test_bad_parallel_arguments_raise():
    info, *_ = _world()
    with pytest.raises(ValueError, match="n_jobs"):
        CorrelatedTransitionModel.for_mdp(info, n_jobs=0)
    with pytest.raises(ValueError, match="backend"):
        CorrelatedTransitionModel.for_mdp(info, backend="mpi")
    with pytest.raises(TypeError, match="backend"):
        CorrelatedTransitionModel.for_mdp(info, backend=3)
