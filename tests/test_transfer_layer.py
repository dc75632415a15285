"""Transfer beliefs with the per-(state, action) layer (round 13).

Checked against independent computations: the layered transfer belief is the layered
single-task belief bit for bit where it chooses no transfer; with an effectively infinite
concentration it is the plain transfer belief; its correlated models are fitted to the layer's
table counts at the chosen similarity; the sources are the plain correlated model of the other
tasks' counts (a task without data, the mixture through the layer: tests/test_multitask.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from corrpriors.applications import CorrelatedTransitionModel, MultiTaskTransitionModel
from corrpriors.envs import lake_task_family, windy_task_family
from corrpriors.experiments.transfer import uniform_transitions
from corrpriors.mdp import mean_hellinger, transition_counts

PLAIN = dict(concentration=None, contamination_prior=None, distinct_prior=None, support_prior=None)


def _data(mdps, n_source, n_target, seed):
    rng = np.random.default_rng(seed)
    S, A = mdps[0].n_states, mdps[0].n_actions
    src = [transition_counts(uniform_transitions(m, n_source, rng=rng), S, A) for m in mdps[:-1]]
    x = transition_counts(uniform_transitions(mdps[-1], n_target, rng=rng), S, A)
    return src, x


def _fitted(mdps, src, x, **kw):
    mt = MultiTaskTransitionModel.for_mdps(mdps, lengthscale=2.0, **kw)
    for u, c in enumerate(src):
        mt.set_counts(u, c)
    mt.set_counts(len(mdps) - 1, x)
    mt.mean(len(mdps) - 1)   # (fits: the similarity is chosen)
    return mt


def test_no_transfer_is_the_layered_single_task_belief():
    """Sources that share nothing with the target (relabelled cells): rho = 0 is chosen and the
    transfer belief is the task's single-task belief with its layer -- mean and draws bit for
    bit, and both differ from the plain model's (the layer acts)."""
    mdps, _ = lake_task_family(0.0, 2, rng=11, shape=(5, 5), relabel_sources=True)
    src, x = _data(mdps, 1500, 300, seed=2)
    mt = _fitted(mdps, src, x)
    t = len(mdps) - 1
    assert mt.similarity_[t] == 0.0
    single = CorrelatedTransitionModel.for_mdp(mdps[t], lengthscale=2.0, prior="dense").set_counts(x)
    np.testing.assert_array_equal(mt.mean(t), single.mean())
    np.testing.assert_array_equal(mt.sample_many(3, task=t, rng=7), single.sample_many(3, rng=7))
    plain = CorrelatedTransitionModel.for_mdp(mdps[t], lengthscale=2.0, prior="dense", **PLAIN)
    assert np.abs(plain.set_counts(x).mean() - single.mean()).max() > 1e-3


def test_infinite_concentration_is_the_plain_transfer():
    """A fixed concentration of 1e12 makes every pair its base and every table a count: the
    layered transfer belief is then the plain one (absolute encoding: no far jumps, whose
    spreading differs with a per-pair layer). Fitting the layer's rounds with the single-task
    fits instead of the transfer search would fail this."""
    mdps, _ = windy_task_family(0.8, 2, rng=3, shape=(4, 4))
    src, x = _data(mdps, 800, 60, seed=4)
    kw = dict(encoding="absolute", prior="dense")
    huge = _fitted(mdps, src, x, concentration=1e12, contamination_prior=None,
                   distinct_prior=None, support_prior=None, **kw)
    plain = _fitted(mdps, src, x, **PLAIN, **kw)
    t = len(mdps) - 1
    assert huge.similarity_[t] == plain.similarity_[t] > 0.0
    np.testing.assert_allclose(huge.mean(t), plain.mean(t), atol=1e-8)
    single = CorrelatedTransitionModel.for_mdp(mdps[t], lengthscale=2.0, **PLAIN, **kw)
    assert np.abs(single.set_counts(x).mean() - plain.mean(t)).max() > 1e-2


def _lake_target(relatedness, rng, n_target, seed):
    """A layered transfer model over 4 x 4 lakes (absolute encoding) and its target's belief."""
    mdps, _ = lake_task_family(relatedness, 2, rng=rng, shape=(4, 4), hole_density=0.2)
    src, x = _data(mdps, 1500, n_target, seed=seed)
    mt = _fitted(mdps, src, x, encoding="absolute", prior="dense")
    return mdps, src, x, mt, mt.task(len(mdps) - 1)


def test_layer_fits_transfer_models_to_its_tables():
    """At a chosen similarity above 0 the correlated models are the transfer search's fits at
    that similarity, to the layer's final table counts (the layer's base is the transfer
    prediction), and the mean is the layer's posterior mean over that base."""
    mdps, src, x, mt, belief = _lake_target(0.9, rng=5, n_target=800, seed=6)
    t = len(mdps) - 1
    rho = mt.similarity_[t]
    assert rho > 0.0
    layer = belief._layer
    assert layer is belief._own_layer and layer is not mt.independent_[t]._layer
    tables = [layer.fitted[a] for a in range(4)]
    assert sum(t.sum() for t in tables) < 0.9 * x.sum()   # a pair's repeats: fewer tables
    same = belief._search.select(tables, [mt._source_field(t, b) for b in range(4)],
                                 similarity=rho)
    for a in range(4):
        np.testing.assert_array_equal(belief.models_[a].counts_, tables[a])   # identity map
        np.testing.assert_allclose(same.models[a].probs(), belief.models_[a].probs(), atol=1e-10)
    base = np.stack([m.probs() for m in belief.models_], axis=1)   # (S, A, S): identity map
    pairs = x + mt.pair_weight_[t] * (src[0] + src[1])   # (with the sources' pairs, if borrowed)
    np.testing.assert_allclose(mt.mean(t), layer.mean(pairs, base), atol=1e-12)


def test_sources_are_the_plain_model_of_the_other_tasks_counts():
    """The source that centres a task's prior is the plain correlated model (no layer) fitted to
    the other tasks' summed counts, whatever the tasks' own layers (a source's pair is direct
    evidence about the target's same pair, so its counts are not reduced to table counts)."""
    mdps, _ = windy_task_family(0.8, 2, rng=8, shape=(4, 4))
    src, x = _data(mdps, 600, 40, seed=9)
    mt = _fitted(mdps, src, x, prior="dense")
    t = len(mdps) - 1
    mt.mean(t)
    assert mt.independent_[t]._layer is not None and mt.pooled_[t]._layer is None
    plain = CorrelatedTransitionModel.for_mdp(mdps[0], lengthscale=2.0, prior="dense", **PLAIN,
                                              impute_rounds=1).set_counts(src[0] + src[1])
    np.testing.assert_allclose(mt.pooled_[t].mean(), plain.mean(), atol=1e-10)


@pytest.mark.slow
def test_layered_transfer_helps_on_lakes():
    """Lakes (holes: neighbours do not share dynamics) at relatedness 0.8, three draws: the
    layered transfer belief beats the layered single-task belief with few target data and is
    no worse (5 %) with many."""
    ratios = []
    for seed in range(3):
        mdps, _ = lake_task_family(0.8, 3, rng=100 + seed, shape=(8, 8))
        rng = np.random.default_rng(seed)
        S, A = mdps[0].n_states, mdps[0].n_actions
        src = [transition_counts(uniform_transitions(m, 2000, rng=rng), S, A) for m in mdps[:-1]]
        s, a, s2 = uniform_transitions(mdps[-1], 800, rng=rng)
        mt = MultiTaskTransitionModel.for_mdps(mdps, lengthscale=2.0)
        for u, c in enumerate(src):
            mt.set_counts(u, c)
        pg = CorrelatedTransitionModel.for_mdp(mdps[-1], lengthscale=2.0, prior="dense")
        P = mdps[-1].transitions
        row = []
        for n in (25, 800):
            x = transition_counts((s[:n], a[:n], s2[:n]), S, A)
            row.append(mean_hellinger(P, mt.set_counts(3, x).mean(3))
                       / mean_hellinger(P, pg.set_counts(x).mean()))
        ratios.append(row)
    r = np.mean(ratios, axis=0)
    assert r[0] < 0.9 and r[1] < 1.05


def test_borrowed_log_evidence_against_monte_carlo_and_the_chain_rule():
    """log p(n | m) under the layer: the Monte-Carlo ratio p(m + n) / p(m) (every pair's P drawn
    from Dir(c B), c from the lattice's prior); the chain rule p(n1 + n2 | m) =
    p(n1 | m) p(n2 | m + n1) exactly; m = 0 gives the layer's evidence."""
    from scipy.special import logsumexp

    from corrpriors.applications.transitions._layer import (
        NO_LAYER_PRIOR,
        borrowed_log_evidence,
        log_evidence,
    )

    rng = np.random.default_rng(3)
    base = rng.dirichlet(np.ones(3) * 2, size=2)                       # two pairs, three states
    n = np.array([[2, 0, 1], [0, 1, 1]], float)
    m = 0.5 * np.array([[3, 1, 0], [1, 2, 4]], float)                   # fractional: a power prior
    cs = np.array([1.0, 5.0, np.inf])
    prior = np.array([(1 - NO_LAYER_PRIOR) / 2, (1 - NO_LAYER_PRIOR) / 2, NO_LAYER_PRIOR])

    def log_p(x):   # log sum_c prior_c prod_rows E_{P ~ Dir(c B)}[prod_k P_k^x_k], by sampling
        terms = []
        for c, w in zip(cs, prior):
            if np.isinf(c):
                terms.append(np.log(w) + np.sum(x * np.log(base)))
                continue
            rows = [np.mean(np.prod(rng.dirichlet(c * b, size=400_000) ** xr, axis=1)) for b, xr in zip(base, x)]
            terms.append(np.log(w) + np.sum(np.log(rows)))
        return logsumexp(terms)

    got = borrowed_log_evidence(n, m, base, cs)
    assert got == pytest.approx(log_p(n + m) - log_p(m), abs=0.03)
    n1 = np.array([[1, 0, 1], [0, 0, 1]], float)
    chained = borrowed_log_evidence(n1, m, base, cs) + borrowed_log_evidence(n - n1, m + n1, base, cs)
    assert got == pytest.approx(chained, abs=1e-10)
    ev = log_evidence(n, base, cs)
    assert borrowed_log_evidence(n, np.zeros_like(n), base, cs) == pytest.approx(logsumexp(ev + np.log(prior)))
    with pytest.raises(ValueError, match="borrowed"):
        borrowed_log_evidence(n, -m, base, cs)
    with pytest.raises(ValueError, match="^borrowed: expected the shape"):
        borrowed_log_evidence(n, m[:1], base, cs)


def test_borrowed_evidence_rises_for_shared_pairs_and_falls_for_different_ones():
    """Counts drawn from the pairs' distributions: borrowing counts of the same distributions
    raises the evidence (by tens of nats), borrowing counts of other distributions lowers it
    with every step of the weight."""
    from corrpriors.applications.transitions._layer import borrowed_log_evidence

    rng = np.random.default_rng(4)
    base = np.full((30, 5), 0.2)
    truth = rng.dirichlet(np.full(5, 0.3), size=30)
    other = rng.dirichlet(np.full(5, 0.3), size=30)
    n = np.stack([rng.multinomial(3, p) for p in truth]).astype(float)
    same = np.stack([rng.multinomial(15, p) for p in truth]).astype(float)
    diff = np.stack([rng.multinomial(15, p) for p in other]).astype(float)
    weights = (0.0, 0.25, 0.5, 1.0)
    up = [borrowed_log_evidence(n, w * same, base) for w in weights]
    down = [borrowed_log_evidence(n, w * diff, base) for w in weights]
    assert np.argmax(up) > 0 and max(up) > up[0] + 10.0      # borrowing the same pairs pays
    assert np.all(np.diff(down) < 0)                          # borrowing other pairs costs


def test_pair_weight_borrows_the_pairs_of_identical_tasks():
    """Identical lakes: the pairs' Dirichlets borrow the other tasks' counts (eta > 0), the mean
    is the layer's posterior mean given the task's counts plus eta times the others', and it is
    closer to the truth than without borrowing. Without a layer the weight is 0."""
    mdps, src, x, mt, belief = _lake_target(1.0, rng=7, n_target=300, seed=8)
    t = len(mdps) - 1
    eta = mt.pair_weight_[t]
    assert mt.similarity_[t] > 0.9 and eta > 0.0
    base = np.stack([m.probs() for m in belief.models_], axis=1)   # (S, A, S): identity map
    borrowed = x + eta * (src[0] + src[1])
    np.testing.assert_allclose(mt.mean(t), belief._layer.mean(borrowed, base), atol=1e-12)
    P = mdps[t].transitions
    without = belief._layer.mean(x, base)
    assert mean_hellinger(P, mt.mean(t)) < mean_hellinger(P, without)
    plain = _fitted(mdps, src, x, encoding="absolute", **PLAIN)
    assert plain.pair_weight_[t] == 0.0
