"""Subgoal model: conditionals vs brute-force enumeration, sampler, estimator behaviour."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from corrpriors.applications.subgoals import (
    SubgoalPolicyEstimator,
    sample_categorical,
    subgoal_conditionals,
    subgoal_log_likelihoods,
)


def _random_problem(rng, n_states=9, n_goals=9, n_actions=4, n_demos=25):
    action_probs = rng.dirichlet(np.ones(n_actions), size=(n_states, n_goals))
    prior = rng.dirichlet(np.ones(n_goals), size=n_states)
    states = rng.integers(0, n_states, n_demos)
    actions = rng.integers(0, n_actions, n_demos)
    return action_probs, prior, states, actions


def _log_joint(goals, prior, action_probs, states, actions):
    """log p(g, a_1..D | p), looping over states and demonstrations (the oracle)."""
    total = 0.0
    for s, g in enumerate(goals):
        total += np.log(prior[s, g])
    for s, a in zip(states, actions):
        total += np.log(action_probs[s, goals[s], a])
    return total


def _counts(states, actions, n_states, n_actions):
    c = np.zeros((n_states, n_actions))
    for s, a in zip(states, actions):
        c[s, a] += 1
    return c


def test_conditional_matches_brute_force_joint_3x3():
    """P(g_s | g_-s, data) from the vectorised code == the normalised joint over g_s values."""
    rng = np.random.default_rng(0)
    action_probs, prior, states, actions = _random_problem(rng)
    counts = _counts(states, actions, 9, 4)
    cond = subgoal_conditionals(np.log(prior), subgoal_log_likelihoods(counts, np.log(action_probs)))
    goals = rng.integers(0, 9, 9)
    for s in range(9):
        logj = []
        for g in range(9):
            gg = goals.copy()
            gg[s] = g
            logj.append(_log_joint(gg, prior, action_probs, states, actions))
        logj = np.array(logj)
        brute = np.exp(logj - logj.max())
        brute /= brute.sum()
        np.testing.assert_allclose(cond[s], brute, rtol=1e-10, atol=1e-14)


def test_conditional_full_enumeration_small():
    """Marginals of the exact posterior over all G^S configurations == product of conditionals.

    Given p, the subgoals are independent across states a posteriori, so the marginal of g_s over
    the full enumeration must equal its conditional.
    """
    rng = np.random.default_rng(1)
    action_probs, prior, states, actions = _random_problem(rng, n_states=3, n_goals=3,
                                                           n_actions=4, n_demos=8)
    counts = _counts(states, actions, 3, 4)
    cond = subgoal_conditionals(np.log(prior), subgoal_log_likelihoods(counts, np.log(action_probs)))
    configs = list(itertools.product(range(3), repeat=3))
    logj = np.array([_log_joint(np.array(c), prior, action_probs, states, actions) for c in configs])
    w = np.exp(logj - logj.max())
    w /= w.sum()
    for s in range(3):
        marg = np.zeros(3)
        for c, wi in zip(configs, w):
            marg[c[s]] += wi
        np.testing.assert_allclose(cond[s], marg, rtol=1e-10)


def test_conditional_stable_for_many_demonstrations_and_zero_probs():
    with np.errstate(divide="ignore"):
        logp = np.log(np.array([[[1.0, 0.0], [0.5, 0.5]]]))  # S=1, G=2, A=2, p(a=1 | g=0) = 0
    counts = np.array([[5000.0, 0.0]])
    cond = subgoal_conditionals(np.zeros((1, 2)), subgoal_log_likelihoods(counts, logp))
    np.testing.assert_allclose(cond, [[1.0, 0.0]], atol=1e-300)
    counts = np.array([[10.0, 1.0]])  # action 1 impossible under goal 0
    cond = subgoal_conditionals(np.zeros((1, 2)), subgoal_log_likelihoods(counts, logp))
    assert np.all(np.isfinite(cond))
    np.testing.assert_allclose(cond, [[0.0, 1.0]], atol=1e-200)


def test_sample_categorical_frequencies():
    rng = np.random.default_rng(2)
    p = np.array([[0.1, 0.2, 0.7], [0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    n = 20000
    draws = np.stack([sample_categorical(p, rng=rng) for _ in range(n)])
    for s in range(3):
        freq = np.bincount(draws[:, s], minlength=3) / n
        se = np.sqrt(p[s] * (1 - p[s]) / n)
        assert np.all(np.abs(freq - p[s]) <= 5 * se + 1e-12)
    assert np.all(draws[:, 1] != 2) and np.all(draws[:, 2] == 2)


def test_sample_categorical_reproducible():
    p = np.full((50, 7), 1 / 7)
    a = sample_categorical(p, rng=np.random.default_rng(3))
    b = sample_categorical(p, rng=np.random.default_rng(3))
    c = sample_categorical(p, rng=np.random.default_rng(4))
    np.testing.assert_array_equal(a, b)
    assert np.any(a != c)


def _chain_world(n=5):
    """A 1-D chain: subgoal g means 'walk towards g' (action 0 left, 1 right, ties uniform)."""
    probs = np.zeros((n, n, 2))
    for s in range(n):
        for g in range(n):
            if g < s:
                probs[s, g] = [0.95, 0.05]
            elif g > s:
                probs[s, g] = [0.05, 0.95]
            else:
                probs[s, g] = [0.5, 0.5]
    return probs


def test_dirichlet_subgoal_estimator_explains_data_and_is_reproducible():
    probs = _chain_world()
    counts = np.zeros((5, 2))
    counts[1, 1] = 6   # at state 1 the agent always moved right
    counts[3, 0] = 6   # at state 3 always left
    est = SubgoalPolicyEstimator(probs, model="dirichlet", n_burnin=20, n_samples=60).fit(counts, rng=0)
    assert est.policy_.shape == (5, 2)
    np.testing.assert_allclose(est.policy_.sum(axis=1), 1.0)
    assert est.policy_[1, 1] > 0.85 and est.policy_[3, 0] > 0.85
    assert est.subgoal_samples_.shape == (60, 5)
    assert np.all(est.subgoal_samples_[:, 1] >= 2)  # a goal to the right of state 1
    again = SubgoalPolicyEstimator(probs, model="dirichlet", n_burnin=20, n_samples=60).fit(counts, rng=0)
    np.testing.assert_array_equal(est.subgoal_samples_, again.subgoal_samples_)
    rb = SubgoalPolicyEstimator(probs, model="dirichlet", n_burnin=20, n_samples=60,
                                estimate="rao_blackwell").fit(counts, rng=0)
    np.testing.assert_allclose(rb.policy_.sum(axis=1), 1.0)
    assert rb.policy_[1, 1] > 0.85


def test_estimator_rejects_bad_input():
    probs = _chain_world()
    with pytest.raises(ValueError, match="counts"):
        SubgoalPolicyEstimator(probs, model="dirichlet").fit(np.zeros((4, 2)), rng=0)
    with pytest.raises(ValueError, match="model"):
        SubgoalPolicyEstimator(probs, model="gp").fit(np.zeros((5, 2)), rng=0)
    with pytest.raises(ValueError, match="prior_source"):
        SubgoalPolicyEstimator(probs, prior_source="mean").fit(np.zeros((5, 2)), rng=0)
    bad = probs.copy()
    bad[0, 0] = [0.2, 0.2]
    with pytest.raises(ValueError, match="action_probs"):
        SubgoalPolicyEstimator(bad, model="dirichlet").fit(np.zeros((5, 2)), rng=0)


def test_pg_subgoal_prior_propagates_goals_to_unvisited_states():
    """Data at states 0-2 say 'move right'; the coupled prior carries that to states 3-4."""
    n = 10
    probs = _chain_world(n)
    coords = np.arange(n, dtype=float)[:, None]
    counts = np.zeros((n, 2))
    counts[[0, 1, 2], 1] = 4
    pg = SubgoalPolicyEstimator(probs, model="pg", coordinates=coords, lengthscale=3.0, scale=10.0,
                                max_iter=5, n_burnin=30, n_samples=150,
                                estimate="rao_blackwell").fit(counts, rng=1)
    assert np.all(pg.policy_[[0, 1, 2], 1] > 0.9)
    # independent subgoals: an unvisited state's exact posterior averages over all goals
    uniform_goal_average = probs[:, :, 1].mean(axis=1)
    assert pg.policy_[3, 1] > uniform_goal_average[3] + 0.05
    assert pg.policy_[4, 1] > uniform_goal_average[4]
    assert np.all(pg.scale_trace_ == 10.0)


def test_sample_prior_source_runs_and_is_reproducible():
    probs = _chain_world(6)
    coords = np.arange(6, dtype=float)[:, None]
    counts = np.zeros((6, 2))
    counts[1, 1] = 3
    kw = {"model": "pg", "coordinates": coords, "prior_source": "sample", "n_burnin": 3, "n_samples": 5,
              "max_iter": 3}
    a = SubgoalPolicyEstimator(probs, **kw).fit(counts, rng=7)
    b = SubgoalPolicyEstimator(probs, **kw).fit(counts, rng=np.random.default_rng(7))
    np.testing.assert_array_equal(a.subgoal_samples_, b.subgoal_samples_)
    np.testing.assert_allclose(a.policy_.sum(1), 1.0)


def test_fit_takes_its_randomness_as_a_keyword_only_rng():
    """The sampler's draws come from fit(counts, *, rng): required, and the same seed gives the
    same estimate (before: a constructor random_state defaulting to None, so two identical calls
    differed)."""
    import inspect

    probs = _chain_world(6)
    coords = np.arange(6, dtype=float)[:, None]
    counts = np.zeros((6, 2))
    counts[1, 1] = 3
    rng_param = inspect.signature(SubgoalPolicyEstimator.fit).parameters.get("rng")
    assert rng_param is not None and rng_param.kind is inspect.Parameter.KEYWORD_ONLY
    assert "random_state" not in inspect.signature(SubgoalPolicyEstimator).parameters
    est = SubgoalPolicyEstimator(probs, coordinates=coords, n_burnin=2, n_samples=3, max_iter=2)
    with pytest.raises(ValueError, match=r"^rng: fit draws the subgoals"):
        est.fit(counts)
    a = est.fit(counts, rng=3).policy_.copy()
    np.testing.assert_array_equal(a, est.fit(counts, rng=np.random.default_rng(3)).policy_)
    with pytest.raises(TypeError, match="rng"):
        est.fit(counts, rng="3")


def test_random_state_is_deprecated_and_still_works():
    probs = _chain_world(5)
    counts = np.zeros((5, 2))
    counts[1, 1] = 4
    kw = {"model": "dirichlet", "n_burnin": 3, "n_samples": 4}
    with pytest.warns(DeprecationWarning, match=r"random_state is deprecated; pass rng to fit\(\)"):
        old = SubgoalPolicyEstimator(probs, random_state=5, **kw)
    new = SubgoalPolicyEstimator(probs, **kw).fit(counts, rng=5)
    np.testing.assert_array_equal(old.fit(counts).subgoal_samples_, new.subgoal_samples_)
    with pytest.raises(ValueError, match="rng, random_state: give the randomness once"):
        old.fit(counts, rng=5)
    with pytest.raises(TypeError, match="unexpected keyword argument 'n_sample'"):
        SubgoalPolicyEstimator(probs, n_sample=4)


def test_sweep_counts_are_integers_within_a_cap():
    """n_samples=True passed and failed deep inside; 10**11 ended in a MemoryError; n_burnin had
    no upper bound (its loop would have run for years)."""
    probs = _chain_world(5)
    counts = np.zeros((5, 2))
    for kw, name in [({"n_samples": True}, "n_samples"), ({"n_burnin": False}, "n_burnin"),
                     ({"n_samples": 2.5}, "n_samples"), ({"n_samples": 10**11}, "n_samples"),
                     ({"n_burnin": 10**6 + 1}, "n_burnin"), ({"max_iter": True}, "max_iter")]:
        with pytest.raises(ValueError, match=rf"^{name}: expected an integer"):
            SubgoalPolicyEstimator(probs, model="dirichlet", **kw).fit(counts, rng=0)
    est = SubgoalPolicyEstimator(probs, model="dirichlet", n_burnin=np.int64(1), n_samples=2.0)
    assert est.fit(counts, rng=0).subgoal_samples_.shape == (2, 5)


def test_kept_draws_must_fit_in_memory(monkeypatch):
    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "1K")   # 1 KiB: 200 x 50 draws do not fit
    probs = _chain_world(50)
    with pytest.raises(ValueError, match=r"kept subgoal draws, \(n_samples, S\) = \(200, 50\)"):
        SubgoalPolicyEstimator(probs, model="dirichlet", n_burnin=0, n_samples=200).fit(
            np.zeros((50, 2)), rng=0)


def test_one_candidate_goal_is_blamed_on_action_probs():
    probs = _chain_world(5)[:, :1]
    for model in ("dirichlet", "pg"):
        with pytest.raises(ValueError, match=r"^action_probs: expected at least G = 2 candidate goals"):
            SubgoalPolicyEstimator(probs, model=model, coordinates=np.arange(5.0)[:, None]).fit(
                np.zeros((5, 2)), rng=0)


def test_coordinates_must_have_one_row_per_state():
    probs = _chain_world(5)
    with pytest.raises(ValueError, match=r"^coordinates: expected shape \(S, D\) with S = 5 states"):
        SubgoalPolicyEstimator(probs, coordinates=np.arange(4.0)[:, None]).fit(np.zeros((5, 2)), rng=0)


def test_public_helpers_validate_their_input():
    """subgoal_log_likelihoods returned NaN for NaN counts; subgoal_conditionals NaN for a row
    with no possible goal and a numpy broadcasting error for mismatched shapes."""
    logp = np.log(_chain_world(5))
    with pytest.raises(ValueError, match="^counts: contains NaN"):
        subgoal_log_likelihoods(np.full((5, 2), np.nan), logp)
    with pytest.raises(ValueError, match="^counts: counts must be integers"):
        subgoal_log_likelihoods(np.full((5, 2), 0.5), logp)
    with pytest.raises(ValueError, match="^log_action_probs: expected log-probabilities"):
        subgoal_log_likelihoods(np.ones((5, 2)), np.full_like(logp, np.nan))
    with pytest.raises(ValueError, match=r"^log_prior, log_lik: every goal of state 1"):
        subgoal_conditionals(np.array([[0.0, -1.0], [-np.inf, -np.inf]]), np.zeros((2, 2)))
    with pytest.raises(ValueError, match=r"^log_prior, log_lik: expected the same shape"):
        subgoal_conditionals(np.zeros((2, 3)), np.zeros((3, 2)))
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(subgoal_conditionals(np.log([[0.5, 0.5, 0.0]]), np.zeros((1, 3))),
                                   [[0.5, 0.5, 0.0]])


def test_learn_scale_must_be_a_bool():
    with pytest.raises(TypeError, match="^learn_scale: expected True or False, got 'no'"):
        SubgoalPolicyEstimator(_chain_world(5), model="dirichlet", learn_scale="no").fit(np.zeros((5, 2)), rng=0)


def _ruled_out_problem():
    """S = G = 3, A = 2. State 0: goals 0 and 2 make the shown action 0 impossible, goal 1 makes
    the ten shown 1s merely unlikely (log-likelihood -1842, below log of the smallest double);
    state 1: every goal possible; state 2: unvisited, with zeros in p(a | s, g)."""
    tiny = 1e-80
    probs = np.array([
        [[0.0, 1.0], [1.0 - tiny, tiny], [0.0, 1.0]],
        [[0.3, 0.7], [0.6, 0.4], [0.5, 0.5]],
        [[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]],
    ])
    counts = np.array([[1, 10], [2, 1], [0, 0]])
    return probs, counts


def _enumerated_marginals(probs, counts):
    """Exact P(g_s | data) under uniform independent goal priors (which is also the marginal
    under symmetric Dirichlet priors), by enumerating all G^S goal configurations and looping
    over the single demonstrations; log 0 = -inf, probabilities never multiplied in float."""
    n_states, n_goals, _ = probs.shape
    demos = [(s, a) for s in range(n_states) for a in range(probs.shape[2])
             for _ in range(int(counts[s, a]))]
    configs = list(itertools.product(range(n_goals), repeat=n_states))
    logj = np.zeros(len(configs))
    for i, goals in enumerate(configs):
        for s, a in demos:
            p = probs[s, goals[s], a]
            logj[i] += np.log(p) if p > 0 else -np.inf
    w = np.exp(logj - logj.max())
    w /= w.sum()
    marg = np.zeros((n_states, n_goals))
    for goals, wi in zip(configs, w):
        for s, g in enumerate(goals):
            marg[s, g] += wi
    return marg


def test_ruled_out_goal_gets_probability_zero_as_in_brute_force_enumeration():
    """A goal under which a shown action has probability 0 had log-likelihood -708 (log 0 floored
    at log(tiny)), so it beat a goal that is merely unlikely (-1842): state 0 got P = [0.5, 0, 0.5]
    instead of the exact [0, 1, 0]. Now log 0 = -inf and such a goal gets probability 0."""
    probs, counts = _ruled_out_problem()
    with np.errstate(divide="ignore"):
        log_lik = subgoal_log_likelihoods(counts, np.log(probs))
    assert np.isneginf(log_lik[0, [0, 2]]).all() and np.isfinite(log_lik[[1, 2]]).all()
    np.testing.assert_allclose(log_lik[0, 1], 10 * np.log(1e-80) + np.log1p(-1e-80))
    np.testing.assert_array_equal(log_lik[2], 0.0)        # unvisited: 0 * log 0 = 0
    cond = subgoal_conditionals(np.zeros((3, 3)), log_lik)
    exact = _enumerated_marginals(probs, counts)
    np.testing.assert_array_equal(exact[0], [0.0, 1.0, 0.0])
    np.testing.assert_allclose(cond, exact, rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("kw", [
    {"model": "dirichlet"},
    {"model": "dirichlet", "init": "uniform", "estimate": "rao_blackwell"},
    {"model": "dirichlet", "prior_source": "sample"},
    {"model": "pg", "coordinates": np.arange(3.0)[:, None], "max_iter": 3},
    {"model": "pg", "coordinates": np.arange(3.0)[:, None], "max_iter": 3, "prior_source": "sample",
     "init": "uniform", "estimate": "rao_blackwell"},
])
def test_estimator_never_picks_a_ruled_out_goal(kw):
    """The estimator gave state 0's ruled-out goals all the posterior mass (subgoal_probs_
    [0.5, 0, 0.5] here; [1, 0] on the audit's one-state case). Where the enumerated posterior is
    a point mass the sampler must reproduce it exactly; ruled-out goals are never drawn."""
    probs, counts = _ruled_out_problem()
    est = SubgoalPolicyEstimator(probs, n_burnin=5, n_samples=20, **kw).fit(counts, rng=0)
    exact = _enumerated_marginals(probs, counts)
    assert np.all(np.isfinite(est.subgoal_probs_)) and np.all(np.isfinite(est.policy_))
    np.testing.assert_array_equal(est.subgoal_probs_[0], exact[0])
    np.testing.assert_array_equal(est.subgoal_samples_[:, 0], 1)
    np.testing.assert_allclose(est.policy_[0], probs[0, 1], rtol=1e-12)
    assert est.policy_[0, 0] > 0                      # the shown action keeps positive probability
    np.testing.assert_allclose(est.policy_.sum(axis=1), 1.0)

    # the audit's one-state case: exact posterior [0, 1]
    p1 = np.array([[[0.0, 1.0], [1 - 1e-80, 1e-80]]])
    one = SubgoalPolicyEstimator(p1, n_burnin=3, n_samples=10,
                                 **{k: (v[:1] if k == "coordinates" else v) for k, v in kw.items()})
    np.testing.assert_array_equal(one.fit([[1, 10]], rng=0).subgoal_probs_, [[0.0, 1.0]])


def test_state_whose_demonstrations_every_goal_rules_out_is_refused():
    """fit succeeded and returned a policy giving a shown action probability 0."""
    p0 = np.array([[[1.0, 0.0], [0.0, 1.0]]])
    for model in ("dirichlet", "pg"):
        est = SubgoalPolicyEstimator(p0, model=model, coordinates=[[0.0]], n_burnin=1, n_samples=2)
        with pytest.raises(ValueError, match=r"^counts, action_probs: every goal of state 0 has "
                                             r"probability zero \(action_probs gives a demonstrated"):
            est.fit([[1, 2]], rng=0)
    probs, counts = _ruled_out_problem()
    counts[2] = [1, 1]     # state 2: goal 0 rules out action 1, goal 1 action 0; goal 2 possible
    SubgoalPolicyEstimator(probs, model="dirichlet", n_burnin=1, n_samples=2).fit(counts, rng=0)
    probs[2, 2] = [1.0, 0.0]
    with pytest.raises(ValueError, match=r"^counts, action_probs: every goal of state 2 "):
        SubgoalPolicyEstimator(probs, model="dirichlet", n_burnin=1, n_samples=2).fit(counts, rng=0)
