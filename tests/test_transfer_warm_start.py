"""Warm starts between related fits (issue 26's cost): a scale search, a transition belief and
the multi-task beliefs' pooled sources started from a related problem's fits give the cold
fits' choices and posteriors (to the fits' tolerance), except for a censored map's imputation,
whose start is the donor's (checked against a direct computation); the transfer search's
first scale climbs start where the other folds stand and still find the lattice maximum."""

from __future__ import annotations

import numpy as np
import pytest

from corrpriors.applications import CorrelatedTransitionModel, MultiTaskTransitionModel, TransferSearch
from corrpriors.applications.multitask import SourceField
from corrpriors.applications.transitions import TruncatedCategoryMap
from corrpriors.core import CorrelatedMultinomial
from corrpriors.core.selection import ScaleSearch
from corrpriors.envs import windy_task_family
from corrpriors.experiments.transfer import uniform_transitions
from corrpriors.kernels import SquaredExponential
from corrpriors.mdp import transition_counts


def _grid(n):
    return np.array([(i, j) for i in range(n) for j in range(n)], dtype=float)


def _estimator():
    return CorrelatedMultinomial(SquaredExponential(lengthscale=1.5).bind(coords=_grid(4)),
                                 learn_mean="constant", mean_prior_std=3.0, tol=1e-10, max_iter=500)


def test_scale_search_warm_start_gives_the_cold_choice():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(3), size=16)
    donor_counts = np.stack([rng.multinomial(12, q) for q in p])
    counts = np.stack([rng.multinomial(12, q) for q in p])
    donor = ScaleSearch(_estimator(), step=0.5, start=100.0)
    donor_choice = donor.select(donor_counts).scale
    cold = ScaleSearch(_estimator(), step=0.5, start=100.0).select(counts)
    warm_search = ScaleSearch(_estimator(), step=0.5, start=100.0).warm_start_from(donor)
    warm = warm_search.select(counts)
    assert donor_choice in warm.values            # the climb started at the donor's choice
    assert warm.scale == cold.scale
    np.testing.assert_allclose(warm.model.psi_mean_, cold.model.psi_mean_, atol=2e-5)
    assert warm.value == pytest.approx(cold.value, abs=1e-6)
    assert warm_search._seeds == {}               # the donor's solutions serve one climb only
    with pytest.raises(TypeError, match="other"):
        warm_search.warm_start_from(donor.estimator)
    with pytest.raises(ValueError, match="same lattice"):
        ScaleSearch(_estimator(), step=0.25).warm_start_from(donor)


def _family(seed=1, shape=(4, 4), n=600):
    rng = np.random.default_rng(seed)
    mdps, _ = windy_task_family(0.8, 2, rng=rng, shape=shape)
    S, A = mdps[0].n_states, mdps[0].n_actions
    counts = [transition_counts(uniform_transitions(m, n, rng=rng), S, A) for m in mdps]
    return mdps, counts


_OPTS = dict(lengthscale=2.0, prior="dense", scale_step=0.5, tol=1e-9, max_iter=500,
             concentration=None, contamination_prior=None, distinct_prior=None)


def test_belief_warm_start_uncensored_is_the_cold_fit():
    mdps, counts = _family()
    opts = dict(_OPTS, encoding="absolute")
    donor = CorrelatedTransitionModel.for_mdp(mdps[0], **opts).set_counts(counts[0])
    donor.mean()
    cold = CorrelatedTransitionModel.for_mdp(mdps[1], **opts).set_counts(counts[1])
    warm = CorrelatedTransitionModel.for_mdp(mdps[1], **opts).warm_start_from(donor)
    warm.set_counts(counts[1])
    np.testing.assert_allclose(warm.mean(), cold.mean(), atol=2e-5)   # the fits' tolerance
    np.testing.assert_array_equal(warm.scale_, cold.scale_)


def test_belief_warm_start_imputes_from_the_donor():
    """A censored map's imputation starts from the donor's probabilities: with one round, the
    fit is the cold scale search on the counts imputed from them."""
    mdps, counts = _family()
    opts = dict(_OPTS, impute_rounds=1)
    donor = CorrelatedTransitionModel.for_mdp(mdps[0], **opts).set_counts(counts[0])
    donor.mean()
    warm = CorrelatedTransitionModel.for_mdp(mdps[1], **opts).warm_start_from(donor)
    cmap = warm.category_map
    assert isinstance(cmap, TruncatedCategoryMap)
    warm.set_counts(counts[1]).mean()
    for a in range(warm.n_actions):
        x = cmap.impute(counts[1][:, a, :], donor.models_[a].probs())
        direct = ScaleSearch(warm._searches[a][0][1].estimator, step=0.5).select(x)
        np.testing.assert_allclose(warm.models_[a].probs(), direct.model.probs(), atol=2e-5)
        assert warm.models_[a].scale_ == direct.scale


def test_belief_warm_start_errors():
    mdps, counts = _family()
    belief = CorrelatedTransitionModel.for_mdp(mdps[0], **_OPTS)
    with pytest.raises(TypeError, match="other"):
        belief.warm_start_from(object())
    small, _ = _family(shape=(3, 3))
    with pytest.raises(ValueError, match="S, A, K"):
        belief.warm_start_from(CorrelatedTransitionModel.for_mdp(small[0], **_OPTS))
    fixed = CorrelatedTransitionModel.for_mdp(mdps[1], **dict(_OPTS, selection="fixed"))
    with pytest.raises(ValueError, match="scale selection"):
        belief.warm_start_from(fixed)


def test_pooled_sources_warm_started_match_cold_sources():
    mdps, counts = _family()
    opts = dict(_OPTS, encoding="absolute")
    fields, means = {}, {}
    for warm in (True, False):
        mt = MultiTaskTransitionModel.for_mdps(mdps, **opts)
        calls: list = []

        def spy(t, d, calls=calls, real=mt._warm_start_pooled, warm=warm):
            calls.append((t, d))
            if warm:
                real(t, d)

        mt._warm_start_pooled = spy
        for t, c in enumerate(counts):
            mt.set_counts(t, c)
        fields[warm] = [[mt._source_field(t, a) for a in range(4)] for t in range(3)]
        means[warm] = [mt.pooled_[t].mean() for t in range(3)]
        assert calls == [(1, 0), (2, 1)]
    for mw, mc in zip(means[True], means[False]):
        np.testing.assert_allclose(mw, mc, atol=2e-5)   # the fits' tolerance
    for fw, fc in zip(fields[True], fields[False]):
        for w, c in zip(fw, fc):   # (logits of rarely seen categories converge more slowly)
            np.testing.assert_allclose(w.deviation, c.deviation, atol=5e-3)
            np.testing.assert_allclose(w.constant, c.constant, atol=5e-3)
            assert w.scale == c.scale


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
