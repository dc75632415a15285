"""The fit-by-fit scheduler of parallel refits (``_parallel.run_generators``) and what it ships:
every job runs once, each generator sees its own outcomes in order, the results are the serial
ones bit for bit (also with A not a multiple of n_jobs, a censored map, Dask), and a sparse
prior travels as its precision and comes back as itself."""

from __future__ import annotations

import functools
import pickle
from types import SimpleNamespace

import numpy as np
import pytest

from corrpriors.applications import CorrelatedTransitionModel
from corrpriors.applications.transitions._parallel import run_generators


def _steps(gen: int, length: int):
    """``length`` jobs, each chosen from the previous outcome (as a scale climb does)."""
    seen = []
    value = gen
    for k in range(length):
        outcome = yield functools.partial(divmod, 1000 * gen + 7 * value + k, 3)
        assert outcome == divmod(1000 * gen + 7 * value + k, 3)   # its own job's outcome
        seen.append(outcome)
        value = outcome[0] % 97
    return gen, seen


LENGTHS = [0, 1, 4, 3, 2]   # a generator without jobs; 10 jobs over 5 generators


@pytest.mark.parametrize("n_jobs, backend", [(2, "threads"), (3, "threads"), (-1, "threads"),
                                             (2, "loky")])
def test_every_job_runs_once_and_returns_to_its_generator(n_jobs, backend):
    serial_log: list[dict] = []
    serial = run_generators([_steps(g, n) for g, n in enumerate(LENGTHS)], 1, backend,
                            serial_log)
    log: list[dict] = []
    parallel = run_generators([_steps(g, n) for g, n in enumerate(LENGTHS)], n_jobs, backend,
                              log)
    assert parallel == serial   # (a dropped job leaves a generator unfinished: None here)
    assert [r[0] for r in parallel] == list(range(len(LENGTHS)))
    assert [len(r[1]) for r in parallel] == LENGTHS
    # one log entry per job: a duplicated or dropped job changes the counts
    assert sorted(e["unit"] for e in log) == sorted(e["unit"] for e in serial_log) == \
        [g for g, n in enumerate(LENGTHS) for _ in range(n)]
    assert all(e["end"] >= e["start"] and e["cpu"] >= 0 for e in log)


def test_a_failing_job_raises_in_the_caller():
    def bad():
        yield functools.partial(divmod, 1, 0)
        return None

    with pytest.raises(ZeroDivisionError):
        run_generators([_steps(0, 2), bad()], 2, "threads")


def _world(n_actions: int = 3, side: int = 5, n: int = 300, seed: int = 0):
    r, c = np.divmod(np.arange(side * side), side)
    coords = np.stack([r, c], axis=1)
    info = SimpleNamespace(n_states=side * side, n_actions=n_actions, coordinates=coords,
                           shape=(side, side))   # (a shape: walls censor the moves)
    rng = np.random.default_rng(seed)
    s = rng.integers(side * side, size=n)
    a = rng.integers(n_actions, size=n)
    moves = np.array([(-1, 0), (1, 0), (0, -1), (0, 1), (1, 1)])[:n_actions]
    tgt = np.clip(coords[s] + moves[a], 0, side - 1)
    s2 = tgt[:, 0] * side + tgt[:, 1]
    return info, s, a, s2


def _fit(**kwargs):
    info, s, a, s2 = _world()
    belief = CorrelatedTransitionModel.for_mdp(info, prior="gmrf", sparse=True, max_iter=15,
                                               selection="collapsed", **kwargs)
    assert belief.category_map.censored   # the refits impute (EM rounds of fits)
    belief.update(s, a, s2)
    belief.refit()
    info, s, a, s2 = _world(seed=1)
    first = [m.psi_mean_ for m in belief.models_]
    belief.update(s, a, s2)
    return first, belief.refit()


def _assert_same(x, y):
    (fx, bx), (fy, by) = x, y
    for u, v in zip(fx, fy):
        np.testing.assert_array_equal(u, v)
    assert bx.n_fits_ == by.n_fits_
    assert bx.selected_ == by.selected_
    assert len(bx.fit_log_) == len(by.fit_log_) > 0
    for mx, my in zip(bx.models_, by.models_):
        np.testing.assert_array_equal(mx.psi_mean_, my.psi_mean_)
        np.testing.assert_array_equal(mx.psi_var_, my.psi_var_)
        assert mx.elbo_ == my.elbo_


@pytest.mark.parametrize("backend", ["threads", pytest.param("loky", marks=pytest.mark.slow)])
def test_three_actions_on_two_workers_give_the_serial_numbers(backend):
    _assert_same(_fit(), _fit(n_jobs=2, backend=backend))


def test_three_actions_on_a_dask_cluster_give_the_serial_numbers():
    distributed = pytest.importorskip("dask.distributed")
    serial = _fit()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        _assert_same(serial, _fit(n_jobs=2, backend=client))


def test_a_sparse_prior_travels_as_its_precision_and_comes_back_as_itself():
    import corrpriors.core.priors.sparse as sparse_prior
    from corrpriors.core.priors import SparsePrecisionPrior
    from corrpriors.core.priors.base import build_layout
    from corrpriors.kernels import graph_precision, lattice_adjacency

    side = 12
    r, c = np.divmod(np.arange(side * side), side)
    q = graph_precision(lattice_adjacency(np.stack([r, c], axis=1)), kappa=1.0, alpha=2)
    prior = SparsePrecisionPrior(q)
    prior.low_rank_max = 3
    full = pickle.dumps({k: v for k, v in prior.__dict__.items() if k != "_local"})
    blob = pickle.dumps(prior)
    assert len(blob) < len(full) / 2        # no analysis, factor or workspace
    assert pickle.loads(blob) is prior      # this process's live prior
    # in a process without it (a fresh worker): rebuilt, same settings, same numbers
    del sparse_prior._LIVE[prior._token]
    copy = pickle.loads(blob)
    assert copy is not prior and copy.low_rank_max == 3 and pickle.loads(blob) is copy
    rng = np.random.default_rng(0)
    observed = rng.random((side * side, 2)) < 0.5
    observed[:, 1] &= rng.random(side * side) < 0.02   # a low-rank stick too
    layout = build_layout(observed)
    kappa = rng.normal(size=observed.shape) * observed
    site = layout.gather(rng.random(observed.shape) + 0.1)
    mean = np.zeros(observed.shape)
    a, b = (p.psi_step(layout, 2.0, mean, kappa, site) for p in (prior, copy))
    np.testing.assert_array_equal(a.psi_mean, b.psi_mean)
    np.testing.assert_array_equal(a.psi_var, b.psi_var)
    np.testing.assert_array_equal(a.logdet_b, b.logdet_b)
