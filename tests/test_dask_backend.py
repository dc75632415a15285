"""The Dask backend of the runner, for real, on a small local cluster."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("dask.distributed")

import toy_experiment as toy  # noqa: E402  (the toy experiment of the runner tests)
from corrpriors.runner._run import run_experiment  # noqa: E402

pytestmark = pytest.mark.usefixtures("toy_registered")   # (conftest)


def test_dask_local_cluster_gives_the_same_numbers_as_joblib(tmp_path):
    config = toy.Config(log_dir=str(tmp_path / "log"))
    (tmp_path / "log").mkdir()
    kwargs = dict(config=config, seeds=[0, 1, 3], progress=False, echo=None, plot=False)
    loky = run_experiment(toy.NAME, backend="loky", jobs=2, out=tmp_path / "loky", **kwargs)
    dask = run_experiment(toy.NAME, backend="dask", jobs=2, processes=False, out=tmp_path / "dask", **kwargs)
    assert dask.computed_seeds == (0, 1, 3)
    assert dask.summary == loky.summary
    for k in (0, 1, 3):
        a = np.load(loky.out_dir / "seeds" / f"seed-{k}.npz")
        b = np.load(dask.out_dir / "seeds" / f"seed-{k}.npz")
        assert a.files == b.files
        for key in a.files:
            np.testing.assert_array_equal(a[key], b[key])
    # resume works the same on dask: nothing left to do
    again = run_experiment(toy.NAME, backend="dask", jobs=2, processes=False, out=tmp_path / "dask", **kwargs)
    assert again.computed_seeds == () and again.skipped_seeds == (0, 1, 3)


def test_dask_scheduler_address(tmp_path):
    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        report = run_experiment(
            toy.NAME, config=toy.Config(), seeds=[2], backend="dask", scheduler=cluster.scheduler_address,
            out=tmp_path, progress=False, echo=None, plot=False,
        )
    from corrpriors.runner import seed_generator
    ref = toy.run_seed(toy.Config(), rng=seed_generator(toy.NAME, 2))
    np.testing.assert_allclose(report.summary["metrics"]["error"]["methods"]["a"]["mean"], ref.curves["error"]["a"])


@pytest.mark.slow
def test_dask_worker_processes_give_the_same_numbers(tmp_path):
    kwargs = dict(config=toy.Config(), seeds=[0, 1], progress=False, echo=None, plot=False)
    loky = run_experiment(toy.NAME, backend="loky", jobs=1, out=tmp_path / "loky", **kwargs)
    dask = run_experiment(toy.NAME, backend="dask", jobs=2, processes=True, out=tmp_path / "dask", **kwargs)
    assert dask.summary == loky.summary
