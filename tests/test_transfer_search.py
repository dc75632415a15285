"""The transfer search's cheaper paths (issue 26's cost): the first scale climbs start where the
other folds stand and still return the lattice maximum (brute force); the similarity search
returns the maximum of any unimodal objective (brute force); the cross-validation at the joint
model's conditional scale (a direct computation); the sources' single imputation round."""

from __future__ import annotations

import numpy as np
import pytest

from corrpriors.applications import CorrelatedTransitionModel, MultiTaskTransitionModel, TransferSearch
from corrpriors.applications.multitask import (
    SourceField,
    similarity_log_prior,
    split_counts,
    transfer_hyper_prior,
)
from corrpriors.core import CorrelatedMultinomial
from corrpriors.core.stick_breaking import uniform_psi
from corrpriors.envs import windy_task_family
from corrpriors.experiments.transfer import uniform_transitions
from corrpriors.kernels import SquaredExponential
from corrpriors.mdp import transition_counts


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
    once; a later call on the same objective evaluates the same similarities again (cached fits)
    and returns the same choice."""
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
        first = sorted(calls)
        calls.clear()
        assert search._choose([np.zeros((16, 3))], [None], n - 1)[0] == peak
        assert sorted(calls) == first                    # the same search, not one from the last choice


def test_the_choice_does_not_depend_on_earlier_searches(monkeypatch):
    """Data whose objective is best at 0.875 but scores 0.25 below 0 get 0.875 whether or not an
    earlier search (other data) chose 0: a climb from the previous choice stopped at 0."""
    grid = (0.0, 0.25, 0.5, 0.75, 0.875, 0.9375)
    landscapes = [np.array([0.0, -5.0, -6.0, -7.0, -8.0, -9.0]),     # earlier data: 0 is best
                  np.array([0.0, -1.0, 2.0, 4.0, 6.0, 5.0])]         # now: 0.875, a dip at 0.25

    def choice(history):
        search = TransferSearch(_estimator(), similarities=grid, similarity_rule="best",
                                prior_related=None)
        for values in history:
            monkeypatch.setattr(search, "_objective",
                                lambda i, xs, srcs, folds, v=values: (float(v[i]), None))
            cur, _ = search._choose([np.zeros((16, 3))], [None], len(grid) - 1)
        return grid[cur]

    assert choice(landscapes[1:]) == 0.875
    assert choice(landscapes) == 0.875


def _direct_fit(rho, theta, src, x):
    """The prior of the module docstring at (rho, theta), constants integrated, fitted to x."""
    m0, tau = transfer_hyper_prior(rho, src, uniform_psi(3), 3.0)
    cov = theta * SquaredExponential(lengthscale=1.5)(_grid(4)) + tau ** 2
    return CorrelatedMultinomial(cov, mean=m0[None, :] + rho * src.deviation, tol=1e-10,
                                 max_iter=3000).fit(x)


@pytest.mark.parametrize("cv_scale", ["conditional", "climb"])
def test_cross_validation_at_the_conditional_scale(cv_scale):
    """cv_scale="conditional": every fold's model is the joint model's conditional, scale
    theta_S (1 - rho^2) of the source's scale (theta_S at rho = 0), fitted once (no climb).
    "climb": every fold climbs its own scale (the lattice maximum of the collapsed bound). The
    objectives match a direct computation and the choice is their maximum."""
    rng = np.random.default_rng(5)
    p = rng.dirichlet(np.ones(3), size=16)
    x = np.stack([rng.multinomial(5, q) for q in p])
    theta_s = 0.8
    src = SourceField(0.5 * rng.standard_normal((16, 2)), rng.normal(size=2), 2, scale=theta_s)
    grid = (0.0, 0.5, 0.9)
    search = TransferSearch(_estimator(), similarities=grid, step=0.5, low=1e-2, high=1e2,
                            similarity_rule="best", cv_scale=cv_scale, similarity_criterion="cv")
    sel = search.select([x], [src])
    halves = split_counts(x)
    lattice = [10.0 ** (0.5 * j) for j in range(search.j_min, search.j_max + 1)]
    expected = {}
    for i, rho in enumerate(grid):
        score = similarity_log_prior(grid, 0.5)[i]
        for f in (0, 1):
            if cv_scale == "conditional":
                model = _direct_fit(rho, theta_s * (1 - rho ** 2), src, halves[f])
            else:
                model = max((_direct_fit(rho, t, src, halves[f]) for t in lattice),
                            key=lambda m: m.collapsed_bound())
            score += float(np.sum(halves[1 - f] * np.log(model.probs())))
        expected[rho] = score
    assert set(sel.values) == set(grid)
    for rho, v in sel.values.items():
        assert v == pytest.approx(expected[rho], abs=1e-3)
    assert sel.similarity == max(expected, key=expected.get)
    conditional = {k: m for k, (m, _) in search._conditional.items()}
    if cv_scale == "climb":
        assert not conditional
        return
    base = search.structure(16)
    assert sorted(conditional) == [(i, 0, f) for i in (0, 1, 2) for f in (0, 1)]   # one fit each
    assert not any(key[2] >= 0 for key in search._scale_at)          # no fold climbs
    for (i, _, _), m in conditional.items():
        rho = grid[i]
        tau = transfer_hyper_prior(rho, src, uniform_psi(3), 3.0)[1]
        np.testing.assert_allclose(m.covariance.base, theta_s * (1 - rho ** 2) * base + tau ** 2,
                                   rtol=1e-12)
    assert search.conditional_scale(2, src) == pytest.approx(theta_s * (1 - 0.81))
    assert search.conditional_scale(0, None) is None
    assert search.conditional_scale(1, SourceField(src.deviation, src.constant, 2)) is None


def test_conditional_cross_validation_fits_once_per_fold_and_similarity():
    """Two folds: one conditional fit per fold and similarity evaluated, no climb; a second
    choice on the same counts fits nothing again."""
    rng = np.random.default_rng(6)
    x = rng.multinomial(4, [0.5, 0.3, 0.2], size=16)
    src = SourceField(0.3 * rng.standard_normal((16, 2)), uniform_psi(3), 1, scale=1.5)
    search = TransferSearch(_estimator(), similarities=(0.0, 0.25, 0.5, 0.75), step=0.5,
                            low=1e-2, high=1e2, similarity_rule="best", prior_related=None,
                            similarity_criterion="cv")
    calls = []
    fit = search._conditional_fit

    def counting(*args):
        calls.append(args[:2] + args[4:5])
        return fit(*args)

    search._conditional_fit = counting   # type: ignore[method-assign]
    _, values = search.choose([x], [src])
    before = search.n_fits_
    assert len(values) >= 3
    assert len(set(calls)) == len(calls) == 2 * len(values)   # (similarity, model, fold) once
    assert search.n_fits_ == len(calls) and not search._scale_at   # no climb
    search.choose([x], [src])
    assert search.n_fits_ == before


def test_cv_scale_is_validated():
    with pytest.raises(ValueError, match="cv_scale"):
        TransferSearch(_estimator(), cv_scale="joint")
    with pytest.raises(ValueError, match="cv_scale"):
        MultiTaskTransitionModel([CorrelatedTransitionModel(16, 4, covariance=np.eye(16))],
                                 cv_scale=None)
    with pytest.raises(ValueError, match="source_impute_rounds"):
        MultiTaskTransitionModel([CorrelatedTransitionModel(16, 4, covariance=np.eye(16))],
                                 source_impute_rounds=0)


@pytest.mark.parametrize("rounds", [1, None])
def test_sources_take_one_imputation_round(rounds):
    """The pooled sources impute the censored counts once (``source_impute_rounds=1``; None:
    the task's belief's rounds): the source field is that of a single-task belief with that many
    rounds fitted to the other tasks' summed counts."""
    rng = np.random.default_rng(8)
    mdps, _ = windy_task_family(0.8, 2, rng=rng, shape=(4, 4))
    opts = dict(lengthscale=2.0, prior="dense", scale_step=0.5, max_iter=200, tol=1e-6,
                concentration=None, contamination_prior=None, distinct_prior=None)
    counts = [transition_counts(uniform_transitions(m, n, rng=rng), 16, 4)
              for m, n in zip(mdps, (300, 300, 30))]
    mt = MultiTaskTransitionModel.for_mdps(mdps, source_impute_rounds=rounds, **opts)
    for t, c in enumerate(counts):
        mt.set_counts(t, c)
    mt.mean(2)
    n_rounds = 3 if rounds is None else rounds
    assert mt.pooled_[2].impute_rounds == n_rounds and mt.independent_[2].impute_rounds == 3
    ref = CorrelatedTransitionModel.for_mdp(mdps[2], impute_rounds=n_rounds, **opts)
    ref.set_counts(counts[0] + counts[1]).refit()
    for a in range(4):
        field = mt._source_field(2, a)
        expect = SourceField.from_model(ref.models_[a], 2)
        np.testing.assert_allclose(field.deviation, expect.deviation, atol=1e-6)
        assert field.scale == pytest.approx(expect.scale)


def test_leave_one_out_criterion_matches_a_direct_computation():
    """similarity_criterion="loo": the objective of every similarity is its log prior plus the
    approximate leave-one-out log predictive of the full-data model at the joint model's
    conditional scale (the model the task keeps), and the choice is the maximum."""
    from corrpriors.core.loo import loo_log_predictive

    rng = np.random.default_rng(7)
    p = rng.dirichlet(np.ones(3), size=16)
    x = np.stack([rng.multinomial(4, q) for q in p])
    theta_s = 0.8
    src = SourceField(np.log(p[:, :2]) - np.log(p[:, :2]).mean(0), rng.normal(size=2), 2, scale=theta_s)
    grid = (0.0, 0.5, 0.9)
    search = TransferSearch(_estimator(), similarities=grid, step=0.5, low=1e-2, high=1e2,
                            similarity_rule="best", similarity_criterion="loo")
    sel = search.select([x], [src])
    expected = {rho: similarity_log_prior(grid, 0.5)[i] + float(np.sum(loo_log_predictive(
        _direct_fit(rho, theta_s * (1 - rho ** 2), src, x).result_, x))) for i, rho in enumerate(grid)}
    assert set(sel.values) == set(grid)
    for rho, v in sel.values.items():
        assert v == pytest.approx(expected[rho], abs=1e-3)
    assert sel.similarity == max(expected, key=expected.get)
    assert sorted(search._conditional) == [(i, 0, -1) for i in (0, 1, 2)]   # full-data fits only
    if sel.similarity > 0:
        model = search._conditional[(grid.index(sel.similarity), 0, -1)][0]
        assert sel.models[0] is model
