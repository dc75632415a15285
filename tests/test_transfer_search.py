"""The transfer search's cheaper paths (issue 26's cost): the first scale climbs start where the
other folds stand and still return the lattice maximum (brute force); the similarity search
returns the maximum of any unimodal objective (brute force)."""

from __future__ import annotations

import numpy as np
import pytest

from corrpriors.applications import TransferSearch
from corrpriors.applications.multitask import SourceField
from corrpriors.core import CorrelatedMultinomial
from corrpriors.kernels import SquaredExponential


def _grid(n):
    return np.array([(i, j) for i in range(n) for j in range(n)], dtype=float)


def _estimator():
    return CorrelatedMultinomial(SquaredExponential(lengthscale=1.5).bind(coords=_grid(4)),
                                 learn_mean="constant", mean_prior_std=3.0, tol=1e-10, max_iter=500)


def test_full_data_scales_are_the_lattice_maximum():
    """The full-data climbs start at the folds' choice and still return, per model, the best
    lattice scale at the chosen similarity (brute force over the lattice)."""
    rng = np.random.default_rng(3)
    est = _estimator()
    p = rng.dirichlet(np.ones(3), size=16)
    counts = [np.stack([rng.multinomial(6, q) for q in p]) for _ in range(2)]
    sources = [SourceField(np.log(p[:, :2] + 0.1) - np.log(p[:, :2] + 0.1).mean(0), np.zeros(2), 2)
               for _ in range(2)]
    search = TransferSearch(est, similarities=(0.0, 0.5, 0.9), step=0.5, low=1e-2, high=1e2,
                            similarity_rule="best")
    sel = search.select(counts, sources)
    i = search.similarities.index(sel.similarity)
    for a, x in enumerate(counts):
        fresh = TransferSearch(est, similarities=(0.0, 0.5, 0.9), step=0.5, low=1e-2, high=1e2)
        bounds = {j: fresh._build(i, j, sources[a], x.shape).fit(x).collapsed_bound()
                  for j in range(fresh.j_min, fresh.j_max + 1)}
        assert sel.scales[a] == pytest.approx(fresh.scale_of(max(bounds, key=bounds.get)))


@pytest.mark.parametrize("seed", range(6))
def test_similarity_search_finds_the_maximum_of_unimodal_objectives(seed, monkeypatch):
    """The similarity search (both ends and the middle of the lattice, then a climb from the
    best) returns the lattice maximum of any unimodal objective, each similarity evaluated
    once; a later call climbs from the previous choice."""
    rng = np.random.default_rng(seed)
    grid = tuple(np.r_[0.0, np.sort(rng.uniform(0.01, 0.99, size=rng.integers(1, 11)))])
    n = len(grid)
    for peak in range(n):
        up = np.cumsum(rng.uniform(0.1, 1.0, size=n))
        values = -np.abs(up - up[peak])                  # strictly unimodal, maximum at peak
        search = TransferSearch(_estimator(), similarities=grid, similarity_rule="best",
                                prior_related=None)
        calls: list = []

        def objective(i, xs, srcs, folds, values=values, calls=calls):
            calls.append(i)
            return float(values[i]), None

        monkeypatch.setattr(search, "_objective", objective)
        cur, found = search._choose([np.zeros((16, 3))], [None], n - 1)
        assert cur == peak
        assert len(calls) == len(set(calls))            # every similarity evaluated once
        calls.clear()
        assert search._choose([np.zeros((16, 3))], [None], n - 1)[0] == peak
        assert len(calls) <= 3                           # from the previous choice
