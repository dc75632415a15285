"""Multi-task transfer: the similarity search against brute force, the priors it builds, the
multi-task beliefs' bookkeeping, PSRL on a task view, and behaviour on related and unrelated
tasks (fixed seeds)."""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest

from corrpriors.applications import (
    CorrelatedTransitionModel,
    MultiTaskPolicyEstimator,
    MultiTaskTransitionModel,
    PSRLAgent,
    TransferSearch,
    TransitionBelief,
    run_psrl,
)
from corrpriors.applications import multitask as MT
from corrpriors.applications.multitask import (
    SIMILARITY_GRID,
    SourceField,
    similarity_log_prior,
    transfer_hyper_prior,
)
from corrpriors.core import CorrelatedMultinomial
from corrpriors.core.stick_breaking import uniform_psi
from corrpriors.envs import windy_gridworld, windy_task_family
from corrpriors.experiments.transfer import uniform_transitions
from corrpriors.kernels import SquaredExponential
from corrpriors.mdp import mean_hellinger, transition_counts


def _grid(n):
    return np.array([(i, j) for i in range(n) for j in range(n)], dtype=float)


def _template(n=4, **kw):
    return CorrelatedMultinomial(SquaredExponential(lengthscale=1.5).bind(coords=_grid(n)),
                                 learn_mean="constant", mean_prior_std=3.0, max_iter=300, tol=1e-7, **kw)


def _field(rng, c, km1, scale=0.7):
    return SourceField(scale * rng.standard_normal((c, km1)), rng.normal(size=km1), 2)


def test_hyper_prior_and_log_prior():
    m0 = uniform_psi(4)
    src = SourceField(np.zeros((3, 3)), np.array([1.0, -1.0, 0.5]), 1)
    mean, std = transfer_hyper_prior(0.0, src, m0, 3.0)
    np.testing.assert_allclose(mean, m0)
    assert std == 3.0
    mean, std = transfer_hyper_prior(0.75, src, m0, 3.0)
    np.testing.assert_allclose(mean, 0.25 * m0 + 0.75 * src.constant)
    assert std == pytest.approx(3.0 * np.sqrt(1 - 0.75 ** 2))
    np.testing.assert_allclose(transfer_hyper_prior(0.9, None, m0, 3.0)[0], m0)
    lp = similarity_log_prior(SIMILARITY_GRID, 0.5)
    assert np.exp(lp).sum() == pytest.approx(1.0)
    assert np.exp(lp[0]) == pytest.approx(0.5)
    assert lp[0] - lp[1] == pytest.approx(np.log(len(SIMILARITY_GRID) - 1))
    np.testing.assert_allclose(similarity_log_prior(SIMILARITY_GRID, None), -np.log(len(SIMILARITY_GRID)))
    with pytest.raises(ValueError, match="prior_related"):
        similarity_log_prior(SIMILARITY_GRID, 1.0)
    with pytest.raises(ValueError, match="similarity"):
        transfer_hyper_prior(1.0, src, m0, 3.0)


def test_lattice_models_are_the_documented_priors():
    """At (rho, theta): mean m0(rho) + rho * deviation, covariance theta * Sigma + tau(rho)^2 11^T."""
    rng = np.random.default_rng(0)
    search = TransferSearch(_template(), step=0.5)
    src = _field(rng, 16, 2)
    base = search.structure(16)
    for i, j in ((0, 0), (3, -2), (6, 1)):
        rho = SIMILARITY_GRID[i]
        model = search._build(i, j, src, (16, 3))
        m0, tau = transfer_hyper_prior(rho, src, uniform_psi(3), 3.0)
        np.testing.assert_allclose(model.mean, m0[None, :] + rho * src.deviation)
        np.testing.assert_allclose(model.covariance.base, 10.0 ** (0.5 * j) * base + tau ** 2, rtol=1e-12)
        assert model.learn_mean is None and not model.learn_scale


def test_no_source_is_the_single_task_model_with_the_constant_integrated():
    """Without related data every similarity is rho = 0; the fit is the single-task model whose
    constant N(m0, tau0^2) is integrated into the covariance."""
    rng = np.random.default_rng(1)
    counts = rng.multinomial(3, [0.5, 0.3, 0.2], size=16)
    sel = TransferSearch(_template(), step=0.5).select([counts], [None])
    assert sel.similarity == 0.0 and set(sel.values) == {0.0}
    theta = sel.scales[0]
    cov = theta * SquaredExponential(lengthscale=1.5)(_grid(4)) + 9.0    # tau0 = 3
    ref = CorrelatedMultinomial(cov, mean=uniform_psi(3), tol=1e-10, max_iter=3000).fit(counts)
    np.testing.assert_allclose(sel.models[0].psi_mean_, ref.psi_mean_, atol=1e-4)


def test_select_matches_brute_force_over_the_lattice():
    rng = np.random.default_rng(2)
    counts = [rng.multinomial(4, [0.6, 0.25, 0.15], size=16) for _ in range(2)]
    sources = [_field(rng, 16, 2), _field(rng, 16, 2)]
    grid = (0.0, 0.5, 0.9)
    search = TransferSearch(_template(), similarities=grid, step=0.5, low=1e-2, high=1e2,
                            similarity_criterion="evidence")
    sel = search.select(counts, sources)
    log_prior = similarity_log_prior(grid, 0.5)
    brute = {}
    for i in range(len(grid)):
        total = log_prior[i]
        for a in range(2):
            fresh = TransferSearch(_template(), similarities=grid, step=0.5, low=1e-2, high=1e2)
            best = -np.inf
            for j in range(fresh.j_min, fresh.j_max + 1):
                m = fresh._build(i, j, sources[a], counts[a].shape)
                best = max(best, m.fit(counts[a]).collapsed_bound())
            total += best
        brute[grid[i]] = total
    best_rho = max(brute, key=brute.get)
    assert sel.similarity == best_rho
    assert sel.value == pytest.approx(brute[best_rho], abs=1e-3)
    for rho, v in sel.values.items():
        assert v <= brute[rho] + 1e-3          # the climb never beats the exhaustive maximum


def test_cross_validation_matches_a_direct_computation():
    """The CV objective: each half predicted by the model fitted to the other half (rho = 0: the
    same family's model, constants integrated, no source), plus the log prior."""
    from corrpriors.applications.multitask import split_counts

    rng = np.random.default_rng(3)
    x = rng.multinomial(3, [0.6, 0.25, 0.15], size=16)
    src = _field(rng, 16, 2)
    grid = (0.0, 0.9)
    sel = TransferSearch(_template(), similarities=grid, step=0.5, low=1e-2, high=1e2,
                         similarity_rule="best", similarity_criterion="cv").select([x], [src])
    halves = split_counts(x)
    np.testing.assert_array_equal(halves[0] + halves[1], x)
    assert abs(halves[0].sum() - halves[1].sum()) <= 1
    lp = similarity_log_prior(grid, 0.5)
    expected = {}
    for i, rho in enumerate(grid):
        score = lp[i]
        for f in (0, 1):
            fresh = TransferSearch(_template(), similarities=grid, step=0.5, low=1e-2, high=1e2)
            best = max(((fresh._build(i, j, src, x.shape).fit(halves[f])) for j in
                        range(fresh.j_min, fresh.j_max + 1)), key=lambda m: m.collapsed_bound())
            score += float(np.sum(halves[1 - f] * np.log(best.probs())))
        expected[rho] = score
    for rho, v in sel.values.items():
        assert v == pytest.approx(expected[rho], abs=1e-3)
    assert sel.similarity == max(expected, key=expected.get)


def test_select_validates_its_inputs():
    search = TransferSearch(_template())
    x = np.ones((16, 3), dtype=int)
    with pytest.raises(ValueError, match="one source"):
        search.select([x], [])
    with pytest.raises(ValueError, match=r"sources\[0\]: expected a field of shape"):
        search.select([x], [SourceField(np.zeros((16, 5)), np.zeros(5), 1)])
    with pytest.raises(TypeError, match=r"sources\[0\]"):
        search.select([x], [np.zeros((16, 2))])
    with pytest.raises(ValueError, match="similarities"):
        TransferSearch(_template(), similarities=(0.5, 0.9))
    with pytest.raises(ValueError, match="similarity_criterion"):
        TransferSearch(_template(), similarity_criterion="aic")
    with pytest.raises(ValueError, match="dense prior"):
        TransferSearch(CorrelatedMultinomial(precision=np.eye(16)))
    with pytest.raises(ValueError, match="deviation, constant"):
        SourceField(np.zeros((4, 2)), np.zeros(3), 1)


def _family_counts(relatedness, seed, n_source=1500, shape=(5, 5), n_sources=2):
    rng = np.random.default_rng(seed)
    mdps, _ = windy_task_family(relatedness, n_sources, rng=rng, shape=shape)
    S, A = mdps[0].n_states, mdps[0].n_actions
    src = [transition_counts(uniform_transitions(m, n_source, rng=rng), S, A) for m in mdps[:-1]]
    tgt = uniform_transitions(mdps[-1], 400, rng=rng)
    return mdps, src, tgt


def _opts():
    return dict(lengthscale=2.0, prior="dense", scale_step=0.5, max_iter=200, tol=1e-6, concentration=None,
                contamination_prior=None, distinct_prior=None)


@pytest.mark.slow
def test_identical_sources_transfer():
    """Sources identical to the target (relatedness 1): strong similarity and a much better
    target estimate than the single-task model with few target data."""
    mdps, src, (s, a, s2) = _family_counts(1.0, seed=3)
    S, A = mdps[0].n_states, mdps[0].n_actions
    mt = MultiTaskTransitionModel.for_mdps(mdps, **_opts())
    for u, c in enumerate(src):
        mt.set_counts(u, c)
    x = transition_counts((s[:30], a[:30], s2[:30]), S, A)
    est = mt.set_counts(len(mdps) - 1, x).mean(len(mdps) - 1)
    pg = CorrelatedTransitionModel.for_mdp(mdps[-1], **_opts()).set_counts(x).mean()
    P = mdps[-1].transitions
    assert mt.similarity_[-1] >= 0.9
    assert mean_hellinger(P, est) < 0.7 * mean_hellinger(P, pg)


def test_zero_similarity_is_the_single_task_model():
    """When rho = 0 wins (here forced by a prior that makes relatedness very unlikely) the transfer
    belief is the task's single-task belief, exactly."""
    mdps, src, (s, a, s2) = _family_counts(0.0, seed=4, n_source=300, shape=(4, 4))
    mt = MultiTaskTransitionModel.for_mdps(mdps, prior_related=1e-12, **_opts())
    for u, c in enumerate(src):
        mt.set_counts(u, c)
    x = transition_counts((s[:40], a[:40], s2[:40]), 16, 4)
    est = mt.set_counts(2, x).mean(2)
    assert mt.similarity_[2] == 0.0
    pg = CorrelatedTransitionModel.for_mdp(mdps[-1], **_opts()).set_counts(x).mean()
    np.testing.assert_allclose(est, pg, atol=1e-10)
    np.testing.assert_allclose(est, mt.independent_mean(2), atol=0)


def test_multitask_bookkeeping_and_laziness():
    mdps, src, (s, a, s2) = _family_counts(0.8, seed=4, n_source=300, shape=(4, 4))
    mt = MultiTaskTransitionModel.for_mdps(mdps, **_opts())
    assert mt.n_tasks == 3 and np.all(np.isnan(mt.similarity_))
    mt.set_counts(0, src[0])
    np.testing.assert_array_equal(mt.independent_[0].counts, src[0])
    mt.update(2, s[:20], a[:20], s2[:20])
    np.testing.assert_array_equal(mt.independent_[2].counts, mt.task(2).counts)
    assert mt.counts.shape == (3, 16, 4, 16)
    est = mt.mean(2)
    assert est.shape == (16, 4, 16)
    np.testing.assert_allclose(est.sum(-1), 1.0)
    fits = mt.task(2).n_fits_
    mt.mean(2)
    assert mt.task(2).n_fits_ == fits                      # nothing changed: no refit
    mt.set_counts(1, src[1])                              # a related task's data changed
    mt.mean(2)
    assert mt.task(2).n_fits_ > fits
    assert mt.task(2).transfer_selected_["n_sources"] == [2] * 4
    draws = mt.sample_many(3, task=2, rng=0)
    assert draws.shape == (3, 16, 4, 16)
    np.testing.assert_allclose(draws.sum(-1), 1.0)
    np.testing.assert_array_equal(draws, mt.sample_many(3, task=2, rng=0))
    assert isinstance(mt.task(0), TransitionBelief)
    assert mt.independent_mean(2).shape == (16, 4, 16)


def test_task_view_drives_a_psrl_agent():
    mdps, src, _ = _family_counts(0.8, seed=5, n_source=300, shape=(4, 4))
    mt = MultiTaskTransitionModel.for_mdps(mdps, **_opts())
    mt.set_counts(0, src[0])
    mdp = mdps[-1]
    agent = PSRLAgent(mt.task(2), mdp.reward_matrix, mdp.discount, variant="mean", replan_every=10)
    res = run_psrl(mdp.transitions, agent, 20, 0, rng=1, eval_every=10)
    assert res["expected_return"].shape == (3,)
    assert mt.task(2).counts.sum() == 20 and mt.independent_[2].counts.sum() == 20
    assert mt.counts[0].sum() == src[0].sum()


def test_multitask_errors():
    mdp = windy_gridworld((4, 4))
    plain = dict(concentration=None, contamination_prior=None)      # no per-pair layer
    with pytest.raises(ValueError, match="beliefs"):
        MultiTaskTransitionModel([])
    with pytest.raises(TypeError, match=r"beliefs\[1\]"):
        MultiTaskTransitionModel([CorrelatedTransitionModel.for_mdp(mdp, prior="dense", **plain), object()])
    with pytest.raises(ValueError, match=r"beliefs\[1\]: expected \(S, A, K\)"):
        MultiTaskTransitionModel([CorrelatedTransitionModel.for_mdp(mdp, prior="dense", **plain),
                                  CorrelatedTransitionModel.for_mdp(windy_gridworld((5, 5)), prior="dense", **plain)])
    with pytest.raises(ValueError, match="dense prior"):
        MultiTaskTransitionModel([CorrelatedTransitionModel.for_mdp(mdp, prior="gmrf", **plain)])
    with pytest.raises(ValueError, match="dense count storage"):
        MultiTaskTransitionModel([CorrelatedTransitionModel.for_mdp(mdp, prior="dense", sparse=True)])
    with pytest.raises(ValueError, match="selection"):
        MultiTaskTransitionModel.for_mdps([mdp], selection="em")
    mt = MultiTaskTransitionModel.for_mdps([mdp, mdp], prior="dense")
    with pytest.raises(ValueError, match="task"):
        mt.mean(2)
    with pytest.raises(ValueError, match="prior_related"):
        MultiTaskTransitionModel.for_mdps([mdp], prior_related=1.5)
    # a task family's (mdps, params) passed whole, a non-MDP, tasks of other sizes
    family = windy_task_family(0.5, 1, rng=0, shape=(3, 3))
    with pytest.raises(TypeError, match=r"mdps\[0\]: expected a TabularMDP or EnvInfo, got list "
                                        r"\(a task family returns \(mdps, params\)"):
        MultiTaskTransitionModel.for_mdps(family)
    with pytest.raises(TypeError, match=r"mdps\[1\]: expected a TabularMDP or EnvInfo, got int"):
        MultiTaskTransitionModel.for_mdps([mdp, 3])
    with pytest.raises(ValueError, match=r"mdps\[1\]: expected 16 states and 4 actions like mdps\[0\], got 25"):
        MultiTaskTransitionModel.for_mdps([mdp, windy_gridworld((5, 5))])
    with pytest.raises(TypeError, match="mdp: expected a TabularMDP or EnvInfo, got list"):
        CorrelatedTransitionModel.for_mdp([mdp])


def test_tasks_on_other_states_are_refused():
    """The task kernel pairs state s of one task with state s of another: tasks with as many
    states at other coordinates (a 4 x 6 grid and a 6 x 4 one, moved or 3-D coordinates) were
    accepted and their states paired by index; they are refused, naming mdps."""
    import dataclasses

    wide, tall = windy_gridworld((4, 6)), windy_gridworld((6, 4))
    assert (wide.n_states, wide.n_actions) == (tall.n_states, tall.n_actions)
    with pytest.raises(ValueError, match=r"mdps\[1\]: expected the state coordinates of mdps\[0\] \(the task "
                                         r"kernel pairs state s of one task with state s of the others\), got 20 "
                                         r"of 24 states at other coordinates, the first state 4 at \[1\.0, 0\.0\] "
                                         r"against \[0\.0, 4\.0\]"):
        MultiTaskTransitionModel.for_mdps([wide, tall])
    with pytest.raises(ValueError, match=r"mdps\[2\]: .* got 20 of 24 states"):
        MultiTaskTransitionModel.for_mdps([wide, wide, tall])
    moved = dataclasses.replace(wide, coordinates=np.asarray(wide.coordinates) + [0.0, 1.0])
    with pytest.raises(ValueError, match=r"mdps\[1\]: .* got 24 of 24 states at other coordinates"):
        MultiTaskTransitionModel.for_mdps([wide, moved])
    deeper = dataclasses.replace(wide, coordinates=np.c_[wide.coordinates, np.zeros(24)])
    with pytest.raises(ValueError, match=r"mdps\[1\]: .* got coordinates of shape \(24, 3\) against \(24, 2\)"):
        MultiTaskTransitionModel.for_mdps([wide, deeper])
    # the same coordinates in another array (a relabelled task keeps them) are accepted
    from corrpriors.envs.task_family import relabel_states

    same = relabel_states(wide, np.random.default_rng(0).permutation(24))
    assert same.coordinates is not wide.coordinates
    assert MultiTaskTransitionModel.for_mdps([wide, same], prior="dense").n_tasks == 2


def test_single_task_has_no_transfer():
    mdp = windy_gridworld((4, 4))
    rng = np.random.default_rng(6)
    x = transition_counts(uniform_transitions(mdp, 50, rng=rng), 16, 4)
    mt = MultiTaskTransitionModel.for_mdps([mdp], **_opts())
    mt.set_counts(0, x)
    est = mt.mean(0)
    assert mt.similarity_[0] == 0.0
    assert mean_hellinger(mdp.transitions, est) == pytest.approx(
        mean_hellinger(mdp.transitions, CorrelatedTransitionModel.for_mdp(mdp, **_opts()).set_counts(x).mean()),
        rel=0.1)


def test_policy_estimator_transfers_between_identical_experts():
    """A data-poor expert borrows from an identical data-rich one. With the cross-validation at
    the joint model's conditional scale (the default) the one-standard-error guard is on a knife
    edge on this draw -- the best similarity (0.996) beats rho = 0 by 2.35 nats net of the prior,
    one standard error 2.7 -- and keeps rho = 0; with every fold climbing its scale it transfers
    (0.75: 2.31 nats, standard error 2.2). Over draws 0-11 of this problem both transfer in 7 of
    12 (measured in round 7). So: the climb transfers here, the default takes the best similarity
    or 0 -- then exactly the single-task policy -- and the rule "best" transfers with either."""
    rng = np.random.default_rng(7)
    coords = _grid(5)
    logits = np.stack([np.sin(coords[:, 0] / 2.0), np.cos(coords[:, 1] / 2.0), np.zeros(25)], 1) * 2
    policy = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    many = np.stack([rng.multinomial(20, p) for p in policy])
    few = np.zeros_like(many)
    for s in rng.choice(25, size=30, replace=True):        # 30 demonstrations for 25 states
        few[s] += rng.multinomial(1, policy[s])
    est = MultiTaskPolicyEstimator(coordinates=coords, lengthscale=2.0, scale_step=0.5,
                                   cv_scale="climb").fit(np.stack([many, few]))
    assert est.policies_.shape == est.independent_policies_.shape == (2, 25, 3)
    assert est.similarity_.shape == est.scale_.shape == (2,)
    assert est.similarity_[1] >= 0.75
    err = lambda p: np.abs(p - policy).sum(-1).mean()       # noqa: E731
    assert err(est.policies_[1]) < 0.6 * err(est.independent_policies_[1])
    for cv_scale in ("climb", "conditional"):   # (best: the default's, last)
        best = MultiTaskPolicyEstimator(coordinates=coords, lengthscale=2.0, scale_step=0.5,
                                        similarity_rule="best", cv_scale=cv_scale).fit(np.stack([many, few]))
        assert best.similarity_[1] >= 0.75
        assert err(best.policies_[1]) < 0.6 * err(best.independent_policies_[1])
    default = MultiTaskPolicyEstimator(coordinates=coords, lengthscale=2.0, scale_step=0.5).fit(
        np.stack([many, few]))
    assert default.similarity_[1] in (0.0, best.similarity_[1])
    if default.similarity_[1] == 0.0:
        np.testing.assert_array_equal(default.policies_[1], default.independent_policies_[1])
    with pytest.raises(ValueError, match="counts"):
        MultiTaskPolicyEstimator(coordinates=coords).fit(many)


def test_cross_validation_is_continuous_at_zero_similarity():
    """rho = 0 in the CV is the same family as rho > 0: a source that says nothing (zero field,
    constant = the default) at a tiny rho scores what rho = 0 scores (the single-task model
    with learned constants, the former reference, differs by nats)."""
    rng = np.random.default_rng(7)
    x = rng.multinomial(6, [0.6, 0.25, 0.15], size=16)
    src = SourceField(np.zeros((16, 2)), uniform_psi(3), 1)
    grid = (0.0, 1e-6)
    sel = TransferSearch(_template(), similarities=grid, step=0.5, low=1e-2, high=1e2,
                         prior_related=None, similarity_rule="best").select([x], [src])
    assert sel.values[1e-6] == pytest.approx(sel.values[0.0], abs=1e-3)


def _terms(values):
    return {i: np.asarray(v, dtype=float) for i, v in enumerate(values)}


def test_one_standard_error_rule():
    """Transfer (the best similarity) only when its score beats rho = 0's by more than one
    standard error of their difference (sqrt(n) sd of the paired per-covariate terms)."""
    from corrpriors.applications.multitask import TransferSearch as TS

    rng = np.random.default_rng(0)
    n = 50
    noise = rng.normal(size=n)
    best = rng.normal(size=n)

    def brute(found, terms, b):
        d = [terms[0][u] - terms[b][u] for u in range(n)]
        mean = sum(d) / n
        se = np.sqrt(n) * np.sqrt(sum((v - mean) ** 2 for v in d) / (n - 1))
        return 0 if found[0] >= found[b] - se else b

    def case(gap0, scale0):
        terms = {0: best - gap0 / n + scale0 * (noise - noise.mean()), 1: best - 1.0 / n, 2: best}
        return {i: float(t.sum()) for i, t in terms.items()}, terms

    def evaluate(i):
        assert i in found

    # se = sqrt(50) * 0.5 * sd(noise) ~ 3.5
    for gap0, expected in ((40.0, 2), (2.0, 0), (5.0, 2), (3.0, 0)):
        found, terms = case(gap0, 0.5)
        assert TS._one_se(2, found, terms, evaluate) == brute(found, terms, 2) == expected
        d = [terms[0][u] - terms[2][u] for u in range(n)]   # the "average" rule's bonus: that se
        se = np.sqrt(n) * np.sqrt(sum((v - sum(d) / n) ** 2 for v in d) / (n - 1))
        assert TS._zero_se(2, terms, evaluate) == pytest.approx(se, rel=1e-12)
    with pytest.raises(ValueError, match="similarity_rule"):
        TransferSearch(_template(), similarity_rule="median")
    with pytest.raises(ValueError, match="similarity_rule"):
        MultiTaskTransitionModel.for_mdps([windy_gridworld((3, 3))], similarity_rule=1)


def test_relabelled_family():
    """relabel_sources permutes every source's cells (brute-force check of the relabelling),
    keeps the target and the sources' parameters (same rng), and validates its inputs."""
    from corrpriors.envs.task_family import relabel_states

    plain, p_plain = windy_task_family(0.0, 2, rng=5, shape=(4, 4))
    relab, p_relab = windy_task_family(0.0, 2, rng=5, shape=(4, 4), relabel_sources=True)
    np.testing.assert_array_equal(relab[-1].transitions, plain[-1].transitions)
    for a, b in zip(p_plain, p_relab):
        assert (a.heading, a.drive, a.damping) == (b.heading, b.drive, b.damping)
    pi = np.random.default_rng(1).permutation(16)
    m = relabel_states(plain[0], pi)
    P, Q = np.asarray(plain[0].transitions), np.asarray(m.transitions)
    for s in range(16):
        for a in range(4):
            for t in range(16):
                assert Q[pi[s], a, pi[t]] == P[s, a, t]
    np.testing.assert_array_equal(np.asarray(m.rewards)[pi], np.asarray(plain[0].rewards))
    assert not np.allclose(relab[0].transitions, plain[0].transitions)
    with pytest.raises(ValueError, match="permutation"):
        relabel_states(plain[0], np.zeros(16, dtype=int))
    with pytest.raises(TypeError, match="relabel_sources"):
        windy_task_family(0.0, 1, rng=0, shape=(4, 4), relabel_sources="yes")


@pytest.mark.parametrize("layered", [False, True])
def test_task_without_data_is_the_prior_weighted_mixture(layered):
    """No data of the task: the mean is the prior-weighted mean over the lattice; each
    component's plug-in mean is pi((1 - rho) m0 + rho lambda_S) (the prior mean, independent
    of the scale), with a per-pair layer passed through the layer's prior (the single-task
    belief's at no data; component 0 is that belief); draws pick components by weight (their
    average approaches the mean of the component means of pi(E psi) only through the plug-in,
    so only shapes and the weights are checked there)."""
    from corrpriors.core.stick_breaking import psi_to_pi

    mdps, _ = windy_task_family(0.8, 2, rng=3, shape=(4, 4))
    plain = {} if layered else dict(concentration=None, contamination_prior=None)
    belief = MultiTaskTransitionModel.for_mdps(mdps, lengthscale=2.0, similarities=(0.0, 0.5, 0.9),
                                               **plain)
    rng = np.random.default_rng(0)
    counts = [transition_counts(uniform_transitions(mdps[t], 300, rng=rng), 16, 4) for t in range(2)]
    for t in range(2):
        belief.set_counts(t, counts[t])
    mean = belief.mean(2)
    view = belief.task(2)
    w = view.transfer_selected_["mixture_weights"]
    np.testing.assert_allclose(w, [0.5, 0.25, 0.25])
    assert belief.similarity_[2] == pytest.approx(0.25 * 0.5 + 0.25 * 0.9)
    expected = 0.5 * belief.independent_mean(2)
    cmap, src = view.category_map, counts[0] + counts[1]        # (S, A, S): the related tasks' data
    far_src = cmap.far_destinations(np.moveaxis(src, 1, 0))
    for rho, wi in ((0.5, 0.25), (0.9, 0.25)):
        comp = []
        for a in range(4):
            pooled = belief.pooled_[2].models_[a]
            lam = np.asarray(pooled.psi_mean_)
            psi = (1 - rho) * uniform_psi(lam.shape[1] + 1)[None, :] + rho * lam
            # the far jumps land as the related tasks' did, their counts weighted by rho
            spread = cmap.other_weights(rho * src[:, a, :], rho * far_src)
            comp.append(cmap.next_state_probs(psi_to_pi(psi), spread))
        comp = np.stack(comp, axis=1)
        layer = belief.independent_[2]._layer
        assert (layer is not None) is layered
        if layered:
            comp = layer.mean(np.zeros((16, 4, 16)), comp)
        expected = expected + wi * comp
    np.testing.assert_allclose(mean, expected, atol=1e-6)
    draws = belief.sample_many(5, task=2, rng=0)
    assert draws.shape == (5, 16, 4, 16)
    np.testing.assert_allclose(draws.sum(-1), 1.0)
    np.testing.assert_array_equal(draws, belief.sample_many(5, task=2, rng=0))
    belief.update(2, [0, 1, 2], [1, 1, 0], [1, 2, 2])     # data: the mixture gives way to a choice
    belief.mean(2)
    assert "mixture_weights" not in belief.task(2).transfer_selected_


@pytest.mark.parametrize("criterion", ["cv", "loo"])
def test_choose_is_select_without_the_full_data_fits(criterion):
    """choose() picks what select() picks, with the same objective values. The two-fold
    cross-validation fits only its fold models, and select(similarity=) then fits the chosen
    models; leave-one-out fits only the full-data models of the similarities it scores (sources
    of unknown scale: each climbs its scale), and select(similarity=) returns the chosen one's
    without another fit."""
    rng = np.random.default_rng(5)
    counts = [rng.multinomial(6, [0.5, 0.3, 0.2], size=16) for _ in range(2)]
    sources = [_field(rng, 16, 2, scale=0.3), _field(rng, 16, 2, scale=0.3)]
    kw = dict(similarities=(0.0, 0.5, 0.9), step=0.5, low=1e-2, high=1e2, prior_related=None,
              similarity_rule="best", similarity_criterion=criterion)
    a, b = TransferSearch(_template(), **kw), TransferSearch(_template(), **kw)
    sel = a.select(counts, sources)
    rho, values = b.choose(counts, sources)
    assert rho == sel.similarity
    assert values == sel.values
    if criterion == "cv":
        assert all(key[3] in (0, 1) for key in b._models)        # no full-data fit yet
    else:
        assert b._models and all(key[-1] == -1 for key in [*b._models, *b._conditional])
        assert sorted({key[0] for key in b._models}) == [b.similarities.index(v) for v in sorted(values)]
    before = b.n_fits_
    again = b.select(counts, sources, similarity=rho)
    if criterion == "loo" and rho > 0:
        assert b.n_fits_ == before                               # the scored fits
    np.testing.assert_allclose(again.scales, sel.scales)


def test_zero_similarity_fits_no_full_data_transfer_models():
    """When rho = 0 is chosen the belief is the single-task one, and the two-fold
    cross-validation spends no full-data fits on its own rho = 0 models (which would not be
    used; leave-one-out scores full-data fits, which then go unused)."""
    mdps, src, (s, a, s2) = _family_counts(0.0, seed=4, n_source=300, shape=(4, 4))
    mt = MultiTaskTransitionModel.for_mdps(mdps, prior_related=1e-12, similarity_criterion="cv",
                                           **_opts())
    for u, c in enumerate(src):
        mt.set_counts(u, c)
    mt.set_counts(2, transition_counts((s[:40], a[:40], s2[:40]), 16, 4)).mean(2)
    assert mt.similarity_[2] == 0.0
    search = mt.task(2)._search
    fitted = [*search._models, *search._conditional]   # (..., fold): climbed / conditional fits
    assert fitted and all(key[-1] in (0, 1) for key in fitted)
    np.testing.assert_allclose(mt.task(2).transfer_selected_["scales"],
                               mt.independent_[2].scale_)


@pytest.mark.parametrize("n_folds", [2, 3, 5])
def test_split_counts_into_folds(n_folds):
    """The parts sum to the counts, every cell's count is spread within one unit, the parts'
    totals within one unit; two folds are the original halves (odd units alternate)."""
    from corrpriors.applications.multitask import split_counts

    rng = np.random.default_rng(n_folds)
    x = rng.poisson(2.5, size=(20, 4))
    parts = split_counts(x, n_folds)
    assert len(parts) == n_folds
    np.testing.assert_array_equal(sum(parts), x)
    stack = np.stack(parts)
    assert (stack >= 0).all() and (stack.max(0) - stack.min(0) <= 1).all()
    totals = stack.sum(axis=(1, 2))
    assert totals.max() - totals.min() <= 1
    if n_folds == 2:
        odd = np.flatnonzero(x.ravel() % 2)
        first = x.ravel() // 2
        first[odd[0::2]] += 1
        np.testing.assert_array_equal(parts[0].ravel(), first)
    with pytest.raises(ValueError, match="n_folds"):
        split_counts(x, 1)


def test_k_fold_cross_validation_matches_a_direct_computation():
    """With three folds every fold's models are fitted to the other two folds' counts (scale by
    the collapsed bound over the whole lattice) and predict the held-out fold."""
    from corrpriors.applications.multitask import split_counts

    rng = np.random.default_rng(4)
    x = rng.multinomial(4, [0.6, 0.25, 0.15], size=16)
    src = _field(rng, 16, 2)
    grid = (0.0, 0.9)
    sel = TransferSearch(_template(), similarities=grid, step=0.5, low=1e-2, high=1e2,
                         similarity_rule="best", similarity_criterion="cv", cv_folds=3).select([x], [src])
    parts = split_counts(x, 3)
    lp = similarity_log_prior(grid, 0.5)
    expected = {}
    for i, rho in enumerate(grid):
        score = lp[i]
        for held in parts:
            fresh = TransferSearch(_template(), similarities=grid, step=0.5, low=1e-2, high=1e2)
            best = max(((fresh._build(i, j, src, x.shape).fit(x - held)) for j in
                        range(fresh.j_min, fresh.j_max + 1)), key=lambda m: m.collapsed_bound())
            score += float(np.sum(held * np.log(best.probs())))
        expected[rho] = score
    for rho, v in sel.values.items():
        assert v == pytest.approx(expected[rho], abs=1e-3)
    assert sel.similarity == max(expected, key=expected.get)
    with pytest.raises(ValueError, match="cv_folds"):
        TransferSearch(_template(), cv_folds=1)


def test_far_jumps_land_where_the_related_tasks_saw_them():
    """Where a pair's far jumps land is borrowed from the related tasks at the chosen
    similarity: identical lakes (relatedness 1) with holes that drop the agent back to the
    start. With 20 transitions of its own the target's belief sends a hole's far mass to the
    start as the sources' data say (the single-task belief spreads most of it over the far
    cells), the mean matches the power-prior formula computed from the counts, and at
    similarity 0 nothing is borrowed."""
    from corrpriors.envs import lake_task_family

    mdps, params = lake_task_family(1.0, 2, rng=5, shape=(5, 5), hole_density=0.2)
    S, A = 25, 4
    rng = np.random.default_rng(1)
    src = [transition_counts(uniform_transitions(m, 1500, rng=rng), S, A) for m in mdps[:-1]]
    x = transition_counts(uniform_transitions(mdps[-1], 20, rng=rng), S, A)
    mt = MultiTaskTransitionModel.for_mdps(mdps, **_opts())
    for u, c in enumerate(src):
        mt.set_counts(u, c)
    est = mt.set_counts(2, x).mean(2)
    rho = float(mt.similarity_[2])
    assert rho > 0.5
    view, single = mt.task(2), mt.independent_mean(2)
    holes = np.flatnonzero(params[-1].holes)
    holes = holes[view.category_map.outside[holes, 0]]           # the start outside their windows
    assert holes.size >= 2
    # of a hole's far mass (truth: all of it to the start) the start gets nearly all; the
    # single-task belief, with a handful of far jumps of its own, spreads much of it
    outside = view.category_map.outside[holes][:, None, :]

    def share(m):
        return m[holes, :, 0] / np.where(outside, m[holes], 0.0).sum(-1)

    assert share(est).min() > 0.98 and share(single).mean() < 0.9      # measured 0.99+, 0.86
    # the formula: w[s, s'] ∝ own + rho * sources' counts + other_prior + other_pooling * m
    cmap = view.category_map
    q = np.stack([m.probs(method=view.probs_method) for m in view.models_])
    both = src[0] + src[1]
    far_src = cmap.far_destinations(np.moveaxis(both, 1, 0))
    far_own = cmap.far_destinations(np.moveaxis(x, 1, 0))
    for a in range(A):
        spread = cmap.other_weights(x[:, a, :] + rho * both[:, a, :], far_own + rho * far_src)
        np.testing.assert_allclose(est[:, a, :], cmap.next_state_probs(q[a], spread), atol=1e-12)
    # similarity 0 (relabelled sources share nothing): the single-task belief exactly
    far_mdps, _ = lake_task_family(1.0, 2, rng=5, shape=(5, 5), hole_density=0.2, relabel_sources=True)
    mt0 = MultiTaskTransitionModel.for_mdps(far_mdps, prior_related=1e-12, **_opts())
    for u, c in enumerate(src):
        mt0.set_counts(u, c)
    assert mt0.set_counts(2, x).mean(2) is not None and mt0.similarity_[2] == 0.0
    np.testing.assert_allclose(mt0.mean(2), mt0.independent_mean(2), atol=0)


def test_full_data_fits_at_the_joint_models_conditional_scale():
    """full_scale="conditional" (the default): at the chosen rho > 0 the kept model is the
    documented prior at theta_S (1 - rho^2) fitted to all counts (checked against a direct
    CorrelatedMultinomial); "climb" keeps the collapsed bound's best lattice scale (brute
    force); rho = 0, the evidence criterion and a source of unknown scale climb either way."""
    rng = np.random.default_rng(7)
    x = rng.multinomial(4, [0.6, 0.25, 0.15], size=16)
    src = SourceField(0.7 * rng.standard_normal((16, 2)), rng.normal(size=2), 2, scale=2.0)
    grid, kw = (0.0, 0.5, 0.9), dict(step=0.5, low=1e-2, high=1e2)
    sel = TransferSearch(_template(), similarities=grid, **kw).select([x], [src], similarity=0.9)
    theta = 2.0 * (1 - 0.9 ** 2)
    assert sel.scales[0] == pytest.approx(theta)
    m0, tau = transfer_hyper_prior(0.9, src, uniform_psi(3), 3.0)
    cov = theta * SquaredExponential(lengthscale=1.5)(_grid(4)) + tau ** 2
    ref = CorrelatedMultinomial(cov, mean=m0[None, :] + 0.9 * src.deviation, tol=1e-10,
                                max_iter=3000).fit(x)
    np.testing.assert_allclose(sel.models[0].psi_mean_, ref.psi_mean_, atol=1e-4)
    # the climb: the lattice scale of the largest collapsed bound
    climb = TransferSearch(_template(), similarities=grid, full_scale="climb", **kw)
    csel = climb.select([x], [src], similarity=0.9)
    fresh = TransferSearch(_template(), similarities=grid, **kw)
    bounds = {j: fresh._build(2, j, src, x.shape).fit(x).collapsed_bound()
              for j in range(fresh.j_min, fresh.j_max + 1)}
    assert csel.scales[0] == pytest.approx(fresh.scale_of(max(bounds, key=bounds.get)))
    assert csel.scales[0] != pytest.approx(theta)
    # climbing either way: rho = 0, the evidence, a source without a scale
    for search, source, rho in ((TransferSearch(_template(), similarities=grid, **kw), src, 0.0),
                                (TransferSearch(_template(), similarities=grid, similarity_criterion="evidence",
                                                **kw), src, 0.9),
                                (TransferSearch(_template(), similarities=grid, **kw),
                                 SourceField(src.deviation, src.constant, 2), 0.9)):
        s = search.select([x], [source], similarity=rho)
        assert np.log10(s.scales[0]) / 0.5 == pytest.approx(round(np.log10(s.scales[0]) / 0.5))
    with pytest.raises(ValueError, match="full_scale"):
        TransferSearch(_template(), full_scale="fixed")
    with pytest.raises(ValueError, match="full_scale"):
        MultiTaskTransitionModel([CorrelatedTransitionModel(4, 1, covariance=np.eye(4))], full_scale="")


def test_average_weights_by_hand():
    """exp(objective) normalised over the similarities evaluated, the tiny ones dropped."""
    from corrpriors.applications.multitask import AVERAGE_PRUNE, average_weights

    grid = (0.0, 0.5, 0.75, 0.9)
    w = average_weights({0.0: -10.0, 0.5: -9.0, 0.9: -20.0}, grid)
    e = np.array([np.exp(-1.0), 1.0, 0.0, 0.0])
    np.testing.assert_allclose(w, e / e.sum())
    assert np.exp(-11.0) / (1 + np.exp(-1.0)) < AVERAGE_PRUNE            # (0.9 was dropped)
    np.testing.assert_allclose(average_weights({0.75: 3.0}, grid), [0, 0, 1, 0])
    # the soft one-standard-error guard: rho = 0's objective raised by the bonus
    w = average_weights({0.0: -10.0, 0.5: -9.0}, grid, zero_bonus=1.5)
    e = np.array([np.exp(0.5), 1.0, 0.0, 0.0])
    np.testing.assert_allclose(w, e / e.sum())
    with pytest.raises(ValueError, match="zero_bonus"):
        average_weights({0.0: 1.0}, grid, zero_bonus=-1.0)
    for bad in ({}, {0.3: 1.0}, {0.5: float("nan")}, {0.0: 1.0, 0.5: float("inf")}):
        with pytest.raises(ValueError, match="^values: expected"):
            average_weights(bad, grid)


def test_average_rule_is_the_weighted_mixture_of_the_full_data_fits():
    """similarity_rule="average": the mean is the average_weights mixture of the single-task
    belief (at 0) and the search's full-data fits at every similarity of positive weight, each
    borrowing far jumps at its own similarity; similarity_ is the weights' mean. Refused with a
    per-pair layer and by the policy estimator."""
    mdps, src, (s, a, s2) = _family_counts(0.8, seed=5, n_source=600, shape=(4, 4))
    opts = dict(_opts(), support_prior=None, encoding="absolute")   # (no censored counts)
    mt = MultiTaskTransitionModel.for_mdps(mdps, similarity_rule="average", **opts)
    for u, c in enumerate(src):
        mt.set_counts(u, c)
    x = transition_counts((s[:30], a[:30], s2[:30]), 16, 4)
    mean = mt.set_counts(2, x).mean(2)
    view = mt.task(2)
    sel = view.transfer_selected_
    from corrpriors.applications.multitask import average_weights

    bonus = view._search.zero_bonus_     # one standard error of the best's gain over rho = 0
    assert bonus >= 0.0
    w = average_weights(sel["values"], view._search.similarities, bonus)
    np.testing.assert_allclose(sel["mixture_weights"], w)
    assert np.count_nonzero(w) > 1
    assert mt.similarity_[2] == pytest.approx(float(np.dot(w, view._search.similarities)))
    expected = np.zeros_like(mean)
    sources = [mt._source_field(2, b) for b in range(4)]
    for i in np.flatnonzero(w):
        rho = view._search.similarities[i]
        if rho == 0.0:
            expected += w[i] * mt.independent_mean(2)
            continue
        models = view._search.select(list(x.transpose(1, 0, 2)), sources, similarity=rho).models
        with view._far_at(rho):
            comp = np.stack([view._to_next_states(m.probs(), b) for b, m in enumerate(models)], axis=1)
        expected += w[i] * comp
    np.testing.assert_allclose(mean, expected, atol=1e-8)
    with pytest.raises(ValueError, match="similarity_rule"):
        MultiTaskTransitionModel.for_mdps(mdps, similarity_rule="average")      # the layer's default
    with pytest.raises(ValueError, match="similarity_rule"):
        MultiTaskPolicyEstimator(distances=np.ones((4, 4)) - np.eye(4), similarity_rule="average").fit(
            np.ones((2, 4, 3)))


def test_fixed_similarity_is_the_search_at_that_similarity():
    """fixed_similarity=rho is the belief the search gives when it chooses rho (to the fits'
    tolerance: the search's fit is warm-started from its neighbours'), not its neighbour's;
    fixed 0 is the single-task belief; no data: the conditional prior at rho alone; a value
    off the lattice is refused."""
    mdps, _ = windy_task_family(0.8, 2, rng=3, shape=(5, 5))
    rng = np.random.default_rng(0)
    counts = [transition_counts(uniform_transitions(m, n, rng=rng), 25, 4)
              for m, n in zip(mdps, (2000, 2000, 40))]

    def build(**kw):
        belief = MultiTaskTransitionModel.for_mdps(mdps, lengthscale=2.0, **kw)
        for t, c in enumerate(counts):
            belief.set_counts(t, c)
        return belief

    searched = build()
    expected = searched.mean(2)
    rho = float(searched.similarity_[2])
    assert rho > 0
    fixed = build(fixed_similarity=rho)
    np.testing.assert_allclose(fixed.mean(2), expected, atol=1e-4)
    assert fixed.similarity_[2] == rho and fixed.task(2).transfer_selected_["values"] == {}
    grid = fixed.similarities
    neighbour = build(fixed_similarity=grid[grid.index(rho) - 1])
    assert np.abs(neighbour.mean(2) - expected).max() > 1e-2
    zero = build(fixed_similarity=0.0)
    np.testing.assert_array_equal(zero.mean(2), zero.independent_mean(2))
    # a task without data: rho's component of the prior mixture alone
    empty = MultiTaskTransitionModel.for_mdps(mdps, lengthscale=2.0, similarities=(0.0, 0.5, 0.9),
                                              fixed_similarity=0.9)
    mixture = MultiTaskTransitionModel.for_mdps(mdps, lengthscale=2.0, similarities=(0.0, 0.5, 0.9),
                                                prior_related=0.999999)
    for belief in (empty, mixture):
        for t in range(2):
            belief.set_counts(t, counts[t])
        belief.mean(2)
    np.testing.assert_allclose(empty.task(2).transfer_selected_["mixture_weights"], [0, 0, 1])
    assert empty.similarity_[2] == 0.9
    w = mixture.task(2).transfer_selected_["mixture_weights"]
    components = [mixture.task(2)._component_mean(c, r)
                  for c, r in zip(mixture.task(2)._mixture[1], (0.0, 0.5, 0.9))]
    np.testing.assert_allclose(mixture.mean(2), sum(wi * c for wi, c in zip(w, components)))
    np.testing.assert_allclose(empty.mean(2), components[2], atol=1e-12)
    for bad in (0.3, "a", 1.0):
        with pytest.raises(ValueError, match="fixed_similarity"):
            MultiTaskTransitionModel.for_mdps(mdps, fixed_similarity=bad)


def test_similarities_must_be_finite():
    """NaN compares false with everything, so an order check alone let (0, nan) through to a
    failure deep in a fit; every entry must be a finite number (not a bool or a string)."""
    mdp = windy_gridworld((3, 3))
    for bad in ([0, float("nan")], [0.0, np.nan, 0.5], [0.0, np.inf], [0.0, "0.5"], [False, 0.5]):
        with pytest.raises(ValueError, match="similarities: expected an increasing sequence"):
            MultiTaskTransitionModel.for_mdps([mdp, mdp], similarities=bad)
        with pytest.raises(ValueError, match="similarities"):
            TransferSearch(_template(), similarities=bad)
    assert MultiTaskTransitionModel.for_mdps([mdp], similarities=np.array([0.0, 0.5])).similarities == (0.0, 0.5)


def test_cv_folds_are_bounded():
    """cv_folds has the bound the transfer experiment's setting has (MAX_CV_FOLDS, one constant):
    10**7 folds were accepted and then asked for unbounded memory."""
    from corrpriors.experiments import transfer as T

    mdp = windy_gridworld((3, 3))
    for bad in (MT.MAX_CV_FOLDS + 1, 10 ** 7):
        with pytest.raises(ValueError, match=r"cv_folds: expected an integer in \[2, 50\]"):
            MultiTaskTransitionModel.for_mdps([mdp], cv_folds=bad)
        with pytest.raises(ValueError, match="cv_folds"):
            TransferSearch(_template(), cv_folds=bad)
    cv = dict(similarity_criterion="cv")   # (the only criterion with folds: elsewhere cv_folds is refused)
    assert MultiTaskTransitionModel.for_mdps([mdp], cv_folds=MT.MAX_CV_FOLDS, **cv).cv_folds == MT.MAX_CV_FOLDS
    assert TransferSearch(_template(), cv_folds=MT.MAX_CV_FOLDS, **cv).cv_folds == MT.MAX_CV_FOLDS
    assert T.RANGES["cv_folds"].high == MT.MAX_CV_FOLDS


def test_numbers_are_not_bools_or_strings():
    """fixed_similarity=False was taken as 0.0 (True refused), prior_related='0.5' was stored as a
    string and select(similarity=False) kept 0: bools and strings are refused alike."""
    mdp = windy_gridworld((3, 3))
    for bad in (False, True, np.bool_(False), "0.5", "0"):
        with pytest.raises(ValueError, match="fixed_similarity: expected None or a value of the similarity lattice"):
            MultiTaskTransitionModel.for_mdps([mdp], fixed_similarity=bad)
    assert MultiTaskTransitionModel.for_mdps([mdp], fixed_similarity=np.float64(0.5)).fixed_similarity == 0.5
    for bad in ("0.5", True, False, "abc", [0.5]):
        with pytest.raises(TypeError, match=r"prior_related: expected a probability in \(0, 1\) or None"):
            MultiTaskTransitionModel.for_mdps([mdp], prior_related=bad)
        with pytest.raises(TypeError, match="prior_related"):
            TransferSearch(_template(), prior_related=bad)
        with pytest.raises(TypeError, match="prior_related"):   # also on a one-point lattice
            similarity_log_prior((0.0,), bad)
    kept = MultiTaskTransitionModel.for_mdps([mdp], prior_related=np.float64(0.25)).prior_related
    assert kept == 0.25 and type(kept) is float
    search = TransferSearch(_template())
    with pytest.raises(ValueError, match="similarity: expected None or a value of the similarity lattice"):
        search.select([np.ones((16, 3))], [None], similarity=False)


def test_select_at_a_similarity_without_a_source_is_at_zero():
    """As its docstring says: with no source there is nothing to transfer, so select(similarity=)
    gives the selection at 0 (what the search chooses), not the similarity asked for."""
    x = np.random.default_rng(1).integers(0, 4, size=(16, 3))
    kept = TransferSearch(_template()).select([x], [None], similarity=0.5)
    searched = TransferSearch(_template()).select([x], [None])
    assert kept.similarity == searched.similarity == 0.0 and kept.values == {}
    np.testing.assert_allclose(kept.models[0].probs(), searched.models[0].probs())


def test_policy_estimator_checks_its_settings_before_fitting(monkeypatch):
    """prior_related (and the other search settings) were checked only by the transfer search,
    after every task's single-task fit; now before any fit."""
    from corrpriors.core.selection import ScaleSearch

    def fitted(*args, **kwargs):
        raise AssertionError("a fit ran before the settings were checked")

    monkeypatch.setattr(ScaleSearch, "select", fitted)
    counts = np.ones((2, 4, 3))
    for kw, exc, match in ((dict(prior_related=2.0), ValueError, "prior_related"),
                           (dict(prior_related="0.5"), TypeError, "prior_related"),
                           (dict(similarities=(0.0, np.nan)), ValueError, "similarities"),
                           (dict(similarity_criterion="aic"), ValueError, "similarity_criterion"),
                           (dict(similarity_rule="worst"), ValueError, "similarity_rule"),
                           (dict(cv_scale="fold"), ValueError, "cv_scale"),
                           (dict(full_scale="fold"), ValueError, "full_scale")):
        with pytest.raises(exc, match=match):
            MultiTaskPolicyEstimator(distances=np.ones((4, 4)) - np.eye(4), **kw).fit(counts)


def test_user_guide_states_the_policy_estimators_own_criterion():
    """The user guide said the policy estimator "does the same" as the transition model, whose
    default criterion is leave-one-out; the policies' default is the two-fold cross-validation,
    and the guide's sentence on them must name it."""
    guide = Path(__file__).resolve().parents[1] / "docs" / "user_guide" / "transfer.rst"
    if not guide.exists():
        pytest.skip("needs a source checkout (docs/)")
    paragraphs = [" ".join(p.split()) for p in guide.read_text(encoding="utf-8").split("\n\n")]
    text = next(p for p in paragraphs if p.startswith(":class:`~corrpriors.applications.MultiTaskPolicyEstimator`"))
    default = inspect.signature(MultiTaskPolicyEstimator).parameters["similarity_criterion"].default
    assert default != inspect.signature(MultiTaskTransitionModel).parameters["similarity_criterion"].default
    assert f'similarity_criterion="{default}"' in text
