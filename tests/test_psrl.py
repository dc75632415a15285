"""Tests for corrpriors.applications.psrl (planning, agent, run loop)."""

from __future__ import annotations

import dataclasses
import itertools

import gymnasium
import numpy as np
import pytest

from corrpriors.applications.psrl import NormalGammaRewards, PSRLAgent, run_psrl
from corrpriors.applications.transitions import (
    CorrelatedTransitionModel,
    DirichletTransitionModel,
    KnownTransitionModel,
    TransitionBelief,
)
from corrpriors.envs import TabularEnv, from_gymnasium, tunnel_world
from corrpriors.mdp import TabularMDP, normalized_return


def random_mdp(rng, S, A):
    P = rng.random((S, A, S)) ** 3
    P /= P.sum(-1, keepdims=True)
    R = rng.normal(size=(S, A))
    return P, R


def chain_mdp(n=8, slip=0.1):
    """A chain with a reward at the far end: moving right pays off only if planned."""
    P = np.zeros((n, 2, n))
    for s in range(n):
        left, right = max(s - 1, 0), min(s + 1, n - 1)
        P[s, 0, left] += 1 - slip
        P[s, 0, right] += slip
        P[s, 1, right] += 1 - slip
        P[s, 1, left] += slip
    R = np.zeros(n)
    R[0] = 0.05
    R[-1] = 1.0
    return P, R


def test_mean_agent_q_values_match_policy_enumeration():
    rng = np.random.default_rng(1)
    P, R = random_mdp(rng, 3, 2)
    counts = rng.integers(0, 4, size=P.shape)
    belief = DirichletTransitionModel(3, 2, alpha=0.5).set_counts(counts)
    Pm = belief.mean()
    agent = PSRLAgent(belief, R, 0.95, variant="mean")
    pi = agent.plan(rng=0)

    def values(policy):
        idx = np.arange(3)
        return np.linalg.solve(np.eye(3) - 0.95 * Pm[idx, policy], R[idx, policy])

    best = max((values(np.array(p)) for p in itertools.product(range(2), repeat=3)),
               key=lambda v: v.sum())
    np.testing.assert_allclose(values(pi), best, rtol=1e-10)
    np.testing.assert_allclose(agent.q_values_.max(-1), best, rtol=1e-10)


def test_known_model_agent_reaches_optimal_return():
    P, R = chain_mdp()
    agent = PSRLAgent(KnownTransitionModel(P), R, 0.95, variant="sampling", n_samples=3,
                      replan_every=10)
    out = run_psrl(P, agent, 100, 0, rng=np.random.default_rng(3))
    np.testing.assert_array_equal(out["steps"], np.arange(0, 101, 10))
    np.testing.assert_allclose(out["expected_return"], out["optimal_return"], rtol=1e-12)
    assert agent.n_plans_ == 11
    # the optimal policy walks right: the chain end is reached
    assert out["states"].max() == 7


def test_sampling_with_concentrated_posterior_equals_mean():
    P, R = chain_mdp(slip=0.2)
    a_s = PSRLAgent(KnownTransitionModel(P), R, 0.9, variant="sampling", n_samples=5)
    a_m = PSRLAgent(KnownTransitionModel(P), R, 0.9, variant="mean")
    np.testing.assert_array_equal(a_s.plan(rng=0), a_m.plan(rng=0))
    np.testing.assert_allclose(a_s.q_values_, a_m.q_values_, rtol=1e-12)
    # a Dirichlet posterior with overwhelming data: same policy, Q-values within 1e-4
    big = DirichletTransitionModel(8, 2, alpha=1.0).set_counts(np.round(P * 1e9))
    b_s = PSRLAgent(big, R, 0.9, variant="sampling", n_samples=5)
    b_m = PSRLAgent(DirichletTransitionModel(8, 2).set_counts(np.round(P * 1e9)), R, 0.9,
                    variant="mean")
    np.testing.assert_array_equal(b_s.plan(rng=1), b_m.plan(rng=1))
    np.testing.assert_allclose(b_s.q_values_, b_m.q_values_, rtol=1e-4)


def test_dirichlet_agent_with_enough_data_plans_optimally():
    P, R = chain_mdp(n=6)
    rng = np.random.default_rng(4)
    counts = rng.multinomial(2000, P.reshape(-1, 6)).reshape(P.shape)      # exploratory data
    agent = PSRLAgent(DirichletTransitionModel(6, 2, alpha=1.0).set_counts(counts), R, 0.95,
                      variant="sampling", n_samples=10, replan_every=20)
    out = run_psrl(P, agent, 100, 0, rng=rng)
    np.testing.assert_allclose(out["expected_return"], float(out["optimal_return"]), rtol=1e-9)
    assert agent.belief.counts.sum() == counts.sum() + 100      # 100 = 5 full replan blocks


def test_run_is_reproducible_and_validates():
    P, R = chain_mdp(n=5)

    def go(seed):
        agent = PSRLAgent(DirichletTransitionModel(5, 2, alpha=1e-3), R, 0.9, replan_every=7)
        return run_psrl(P, agent, 50, 0, rng=seed, eval_every=10)

    o1, o2, o3 = go(5), go(5), go(6)
    np.testing.assert_array_equal(o1["states"], o2["states"])
    np.testing.assert_array_equal(o1["expected_return"], o2["expected_return"])
    assert not np.array_equal(o1["states"], o3["states"])
    agent = PSRLAgent(DirichletTransitionModel(5, 2), R, 0.9)
    with pytest.raises(ValueError, match="variant"):
        PSRLAgent(DirichletTransitionModel(5, 2), R, 0.9, variant="greedy")
    with pytest.raises(ValueError, match="discount"):
        PSRLAgent(DirichletTransitionModel(5, 2), R, 1.0)
    with pytest.raises(ValueError, match="rewards"):
        PSRLAgent(DirichletTransitionModel(5, 2), np.zeros(4), 0.9)
    with pytest.raises(ValueError, match="start_state"):
        run_psrl(P, agent, 10, 5, rng=0)
    with pytest.raises(RuntimeError, match="plan"):
        PSRLAgent(DirichletTransitionModel(5, 2), R, 0.9).act(0)


def test_ties_are_broken_at_random():
    S, A = 30, 4
    agent = PSRLAgent(DirichletTransitionModel(S, A), np.zeros(S), 0.9, variant="mean")
    pi = agent.plan(rng=np.random.default_rng(0))        # all actions tie everywhere
    counts = np.bincount(pi, minlength=A)
    assert (counts > 0).all()                            # not always action 0
    np.testing.assert_array_equal(pi, PSRLAgent(DirichletTransitionModel(S, A), np.zeros(S), 0.9,
                                                variant="mean").plan(rng=np.random.default_rng(0)))


# --------------------------------------------------------------------------------------
# Gymnasium environments: the env loop, terminal states, learned rewards, the protocol
# --------------------------------------------------------------------------------------
def _lake(desc=("SFFF", "FHFH", "FFFH", "HFFG")):
    env = gymnasium.make("FrozenLake-v1", desc=list(desc), is_slippery=True)
    return env, from_gymnasium(env)


@pytest.mark.parametrize("belief", ["dirichlet", "correlated"])
def test_env_loop_equals_matrix_loop_on_a_corrpriors_env(belief):
    """Same dynamics, same random numbers: the same trajectory, replans and scores."""
    mdp = tunnel_world(shape=(5, 5))
    n, seed = 120, 5

    def agent():
        b = (DirichletTransitionModel(25, 4, alpha=1e-3) if belief == "dirichlet" else
             CorrelatedTransitionModel.for_mdp(mdp, radius=2, max_iter=20))
        return PSRLAgent(b, mdp.reward_matrix, 0.9, n_samples=3, replan_every=20)

    a_m, a_e = agent(), agent()
    m = run_psrl(mdp.transitions, a_m, n, 3, rng=np.random.default_rng(seed), eval_every=20)
    # the matrix loop draws the n environment uniforms first, then the agent's; the
    # environment's generator seeded with the same seed replays those uniforms
    g = np.random.default_rng(seed)
    g.random(n)
    env = TabularEnv(mdp)            # no time limit, uniform start distribution
    e = run_psrl(env, a_e, n, rng=g, eval_every=20, true_mdp=from_gymnasium(env),
                 env_seed=seed, reset_options={"state": 3})
    np.testing.assert_array_equal(e["states"], m["states"][:-1])
    np.testing.assert_array_equal(e["next_states"], m["states"][1:])
    np.testing.assert_array_equal(e["actions"], m["actions"])
    np.testing.assert_array_equal(e["steps"], m["steps"])
    np.testing.assert_allclose(e["expected_return"], m["expected_return"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(e["optimal_return"], m["optimal_return"], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(a_e.belief.counts, a_m.belief.counts)
    assert a_e.n_plans_ == a_m.n_plans_ == 1 + n // 20
    assert not e["terminated"].any() and not e["truncated"].any()


def test_terminal_transitions_never_enter_the_counts():
    env, mdp = _lake()
    belief = DirichletTransitionModel(16, 4, alpha=1e-3)
    agent = PSRLAgent(belief, mdp.rewards, 0.95, n_samples=2, replan_every=25)
    out = run_psrl(env, agent, 400, rng=0, true_mdp=mdp)
    ended = out["terminated"]
    assert ended.sum() >= 5                                  # several episodes ended
    counts = belief.counts
    assert counts.sum() == 400                               # every step is one transition ...
    np.testing.assert_array_equal(counts[mdp.terminal], 0)   # ... none out of a terminal state
    # the restarts are not transitions: after an episode ends the next one starts at S
    np.testing.assert_array_equal(out["states"][1:][ended[:-1]], 0)
    np.testing.assert_array_equal(agent.terminal_, np.isin(np.arange(16),
                                                            out["next_states"][ended]))
    # the planner treats the known terminal states as absorbing without future
    np.testing.assert_array_equal(agent.q_values_[agent.terminal_], 0.0)


def test_known_model_scores_normalized_return_one():
    env, mdp = _lake()
    agent = PSRLAgent(KnownTransitionModel(mdp.transitions), mdp.rewards, 0.95, n_samples=2,
                      replan_every=10, terminal=mdp.terminal)
    out = run_psrl(env, agent, 30, rng=1, true_mdp=mdp)
    np.testing.assert_allclose(out["normalized_return"], 1.0, atol=1e-10)
    assert out["policies"].shape == (4, 16)
    scored = dataclasses.replace(mdp, discount=0.95)       # scored with the agent's discount
    np.testing.assert_allclose(normalized_return(scored, out["policies"]), 1.0, atol=1e-10)
    assert out["optimal_return"] > out["uniform_return"]
    assert normalized_return(mdp, np.full((16, 4), 0.25)) == pytest.approx(0.0, abs=1e-12)


def test_replanning_per_episode_and_without_a_true_model():
    env, mdp = _lake()
    agent = PSRLAgent(DirichletTransitionModel(16, 4), mdp.rewards, 0.95, n_samples=2,
                      replan_every="episode")
    out = run_psrl(env, agent, 200, rng=3)
    ends = int((out["terminated"] | out["truncated"]).sum())
    assert ends > 3
    assert agent.n_plans_ == 1 + ends and len(out["episode_returns"]) == ends
    assert "normalized_return" not in out
    with pytest.raises(ValueError, match="eval_every: required"):
        run_psrl(env, agent, 10, rng=0, true_mdp=mdp)
    assert len(run_psrl(env, agent, 10, rng=0, true_mdp=mdp, eval_every=5)["steps"]) == 3


def test_learned_rewards_find_the_optimal_policy():
    # known dynamics, unknown deterministic rewards R(s): the agent learns them from step()
    P, R = chain_mdp(n=6)
    true = TabularMDP(P, R, 0.9)
    env = TabularEnv(true, initial_distribution=0)
    agent = PSRLAgent(KnownTransitionModel(P), None, 0.9, n_samples=4, replan_every=20,
                      learn_rewards=True)
    out = run_psrl(env, agent, 400, rng=2, true_mdp=true, eval_every=20)
    assert out["normalized_return"][-1] == pytest.approx(1.0, abs=1e-9)
    # the posterior mean of a visited pair is the conjugate shrinkage n R / (n + 1) (m0 = 0,
    # kappa0 = 1): every reward was credited to the pair that earned it
    n = np.zeros((6, 2))
    np.add.at(n, (out["states"], out["actions"]), 1)
    np.testing.assert_allclose(agent.reward_belief_.mean(), n * R[:, None] / (n + 1), atol=1e-12)


def test_learned_and_known_rewards_are_exclusive():
    with pytest.raises(ValueError, match="exactly one"):
        PSRLAgent(DirichletTransitionModel(4, 2), None, 0.9)
    with pytest.raises(ValueError, match="exactly one"):
        PSRLAgent(DirichletTransitionModel(4, 2), np.zeros(4), 0.9, learn_rewards=True)
    agent = PSRLAgent(DirichletTransitionModel(4, 2), None, 0.9, learn_rewards=True)
    agent.plan(rng=0)
    with pytest.raises(ValueError, match="reward: required"):
        agent.observe(0, 1, 2, rng=0)
    with pytest.raises(ValueError, match="transition matrix"):
        run_psrl(np.full((4, 2, 4), 0.25), agent, 5, 0, rng=0)


class DuckBelief:
    """Not a subclass of anything in corrpriors: the protocol's members only."""

    def __init__(self, P):
        self.P = np.asarray(P)
        self.n_states, self.n_actions = self.P.shape[:2]
        self.seen = 0

    def update(self, states, actions, next_states):
        self.seen += len(states)
        return self

    def mean(self):
        return self.P.copy()

    def sample_many(self, n, *, rng):
        return np.broadcast_to(self.P, (n,) + self.P.shape).copy()


def test_a_duck_typed_belief_is_accepted():
    P, R = chain_mdp(n=5)
    duck = DuckBelief(P)
    assert isinstance(duck, TransitionBelief)
    agent = PSRLAgent(duck, R, 0.9, n_samples=2, replan_every=10)
    out = run_psrl(P, agent, 30, 0, rng=0)
    reference = run_psrl(P, PSRLAgent(KnownTransitionModel(P), R, 0.9, n_samples=2,
                                      replan_every=10), 30, 0, rng=0)
    np.testing.assert_array_equal(out["states"], reference["states"])
    assert duck.seen == 30
    with pytest.raises(TypeError, match="belief: expected a transition belief"):
        PSRLAgent(object(), R, 0.9)


def test_normal_gamma_posterior_matches_quadrature_and_sampling():
    rewards = np.array([0.3, -0.4, 1.1])
    post = NormalGammaRewards(2, 1, mean=0.2, kappa=2.0, shape=1.5, rate=0.7)
    post.update([1, 1, 1], [0, 0, 0], rewards)
    # oracle: the posterior of mu by brute-force quadrature over (mu, tau)
    mu = np.linspace(-4, 4, 1601)[:, None]
    tau = np.linspace(1e-4, 25, 2500)[None, :]
    logp = (0.5 * np.log(tau) - 2.0 * tau * (mu - 0.2) ** 2 / 2     # N(mu; m0, 1/(k0 tau))
            + (1.5 - 1) * np.log(tau) - 0.7 * tau                    # Gamma(tau; a0, b0)
            + sum(0.5 * np.log(tau) - 0.5 * tau * (r - mu) ** 2 for r in rewards))
    w = np.exp(logp - logp.max())
    w /= w.sum()
    mean_mu = float((w * mu).sum())
    var_mu = float((w * (mu - mean_mu) ** 2).sum())
    assert post.mean()[1, 0] == pytest.approx(mean_mu, abs=1e-4)
    assert post.mean()[0, 0] == 0.2                      # no data: the prior mean
    draws = post.sample_many(200_000, rng=np.random.default_rng(0))[:, 1, 0]
    assert draws.mean() == pytest.approx(mean_mu, abs=4 * np.sqrt(var_mu / 2e5))
    assert draws.var() == pytest.approx(var_mu, rel=0.02)
    np.testing.assert_array_equal(post.sample_many(3, rng=4), post.sample_many(3, rng=4))
    with pytest.raises(ValueError, match="rewards: contains NaN"):
        post.update([0], [0], [np.nan])
    with pytest.raises(ValueError, match="kappa"):
        NormalGammaRewards(2, 1, kappa=0.0)


def _doubling_oracle(pairs, steps_between, S, A, first_visits=True):
    """When a TSDE agent replans, recomputed naively from the whole history after every step
    (``first_visits=False``: the revisit rule, a pair's first visit since a replan not counted).
    """
    due, last_plan_at, since = [], 0, 0
    for t in range(1, len(pairs) + 1):
        s, a = pairs[t - 1]
        since += 1
        now = sum(1 for p in pairs[:t] if p == (s, a))
        before = sum(1 for p in pairs[:last_plan_at] if p == (s, a))
        since_plan = sum(1 for p in pairs[last_plan_at:t] if p == (s, a))
        replan = since >= steps_between or (now > 2 * before and (first_visits or since_plan >= 2))
        due.append(replan)
        if replan:
            last_plan_at, since = t, 0
    return due


@pytest.mark.parametrize("every", [1000, 7])
def test_replan_on_doubling_replans_when_a_pair_doubles(every):
    # TSDE's rule, against a naive recount of the history: a replan is due when the pair just
    # left has been visited more than twice as often as when the agent last planned (its first
    # visit included), or when the schedule says so
    rng = np.random.default_rng(5)
    S, A = 3, 2
    agent = PSRLAgent(DirichletTransitionModel(S, A), np.zeros((S, A)), 0.9, n_samples=1,
                      replan_every=every, replan_on_doubling=True)
    agent.plan(rng=0)
    pairs = [(int(rng.integers(S)), int(rng.integers(A))) for _ in range(60)]
    got = [agent.observe(s, a, int(rng.integers(S)), rng=1) for s, a in pairs]
    assert got == _doubling_oracle(pairs, every, S, A)
    assert sum(got) > S * A   # every first visit, then the doublings
    assert agent.n_plans_ == 1 + sum(got)
    np.testing.assert_array_equal(agent.visits_, np.bincount(
        [s * A + a for s, a in pairs], minlength=S * A).reshape(S, A))
    # off (the default): the schedule alone
    plain = PSRLAgent(DirichletTransitionModel(S, A), np.zeros((S, A)), 0.9, n_samples=1,
                      replan_every=every)
    plain.plan(rng=0)
    got = [plain.observe(s, a, 0, rng=1) for s, a in pairs]
    assert got == [(t + 1) % every == 0 for t in range(len(pairs))]


@pytest.mark.parametrize("every", [1000, 7])
def test_replan_on_revisit_replans_when_a_pair_comes_back_doubled(every):
    # The revisit rule against the naive recount: the doubling rule without the pairs' first
    # visits since a replan (a pair unvisited at the last replan fires at its second visit)
    rng = np.random.default_rng(6)
    S, A = 4, 2
    pairs = [(int(rng.integers(S)), int(rng.integers(A))) for _ in range(80)]
    agent = PSRLAgent(DirichletTransitionModel(S, A), np.zeros((S, A)), 0.9, n_samples=1,
                      replan_every=every, replan_on_revisit=True)
    agent.plan(rng=0)
    got = [agent.observe(s, a, int(rng.integers(S)), rng=1) for s, a in pairs]
    assert got == _doubling_oracle(pairs, every, S, A, first_visits=False)
    tsde = _doubling_oracle(pairs, every, S, A)
    assert sum(got) < sum(tsde)    # fewer replans than TSDE's
    assert agent.n_plans_ == 1 + sum(got)
    # with both rules, the doubling rule (which includes the revisits)
    both = PSRLAgent(DirichletTransitionModel(S, A), np.zeros((S, A)), 0.9, n_samples=1,
                     replan_every=every, replan_on_revisit=True, replan_on_doubling=True)
    both.plan(rng=0)
    assert [both.observe(s, a, 0, rng=1) for s, a in pairs] == tsde


def _corridor(n=6):
    """A deterministic corridor (left, right) paying for "right" next to the right end, and a
    prior (pseudo-counts) believing that "left" leads to the goal's neighbour from everywhere."""
    P = np.zeros((n, 2, n))
    for s in range(n):
        P[s, 0, max(s - 1, 0)] = 1.0
        P[s, 1, min(s + 1, n - 1)] = 1.0
    R = np.zeros((n, 2))
    R[n - 2, 1] = 1.0
    prior = np.zeros((n, 2, n))
    prior[:, 0, n - 2] = 1
    return TabularMDP(P, R, 0.9), prior


def test_replan_on_revisit_leaves_a_cycle():
    # The corridor's prior plan bumps into the left wall: the revisit rule lets the first bump
    # pass (a first visit), replans at the second and moves on
    true, prior = _corridor()
    belief = DirichletTransitionModel(true.n_states, 2, alpha=0.01).set_counts(prior)
    agent = PSRLAgent(belief, true.rewards, 0.9, variant="mean", replan_every=40,
                      replan_on_revisit=True)
    run = run_psrl(TabularEnv(true, initial_distribution=0), agent, 40, rng=0)
    first_right = int(np.argmax(run["actions"] == 1))
    assert 2 <= first_right <= 4 and run["next_states"].max() >= 2


def test_replan_on_doubling_stops_following_a_refuted_plan():
    # A deterministic corridor whose prior plan bumps into the left wall: with a fixed schedule
    # the agent repeats the refuted move until the next replan; with the doubling rule it
    # replans after the first bump and moves on.
    true, prior = _corridor()
    n, R = true.n_states, true.rewards
    runs = {}
    for doubling in (False, True):
        belief = DirichletTransitionModel(n, 2, alpha=0.01).set_counts(prior)
        agent = PSRLAgent(belief, R, 0.9, variant="mean", replan_every=40,
                          replan_on_doubling=doubling)
        runs[doubling] = run_psrl(TabularEnv(true, initial_distribution=0), agent, 40, rng=0)
    assert np.all(runs[False]["actions"] == 0)     # 40 bumps: one refuted plan, followed
    first_right = int(np.argmax(runs[True]["actions"] == 1))
    assert 1 <= first_right <= 3 and runs[True]["next_states"].max() >= 2


@pytest.mark.parametrize("name", ["replan_on_doubling", "replan_on_revisit"])
def test_replan_rules_are_bools(name):
    with pytest.raises(TypeError, match=f"{name}: expected True or False, got 'yes'"):
        PSRLAgent(DirichletTransitionModel(3, 2), np.zeros((3, 2)), 0.9, **{name: "yes"})


def _untouched(agent):
    """Nothing of a refused transition was recorded, and the agent still plans."""
    assert agent.visits_.sum() == 0 and not agent.terminal_.any()
    agent.plan(rng=0)


@pytest.mark.parametrize("call, error, match", [
    (lambda ag: ag.act(-1), ValueError, r"state: expected an integer in \[0, 3\], got -1"),
    (lambda ag: ag.act(4), ValueError, r"state: expected an integer in \[0, 3\], got 4"),
    (lambda ag: ag.act(1.5), ValueError, "state: .* got 1.5"),
    (lambda ag: ag.act(10**300), ValueError, "state: .* got 1000"),
    (lambda ag: ag.observe(3, 0, -2, rng=0, terminated=True), ValueError,
     r"next_state: expected an integer in \[0, 3\], got -2"),
    (lambda ag: ag.observe(4, 0, 0, rng=0), ValueError, r"state: expected an integer in \[0, 3\], got 4"),
    (lambda ag: ag.observe(0, 2, 0, rng=0), ValueError, r"action: expected an integer in \[0, 1\], got 2"),
    (lambda ag: ag.observe(0, 1.0000001, 0, rng=0), ValueError, "action: .* got 1.0000001"),
    (lambda ag: ag.observe(True, 0, 0, rng=0), ValueError, "state: .* got True"),
    # "no" would be truth-tested as True and end the episode; 1 is not a flag either
    (lambda ag: ag.observe(0, 0, 1, rng=0, terminated="no"), TypeError,
     "terminated: expected True or False, got 'no'"),
    (lambda ag: ag.observe(0, 0, 1, rng=0, truncated=None), TypeError, "truncated: expected True or False, got None"),
    (lambda ag: ag.observe(0, 0, 1, rng=0, truncated=1), TypeError, "truncated: expected True or False, got 1"),
], ids=["act-negative", "act-S", "act-fraction", "act-huge", "next-state-negative", "state-S", "action-A",
        "action-fraction", "state-bool", "terminated-str", "truncated-None", "truncated-int"])
def test_act_and_observe_refuse_states_actions_and_flags_out_of_range(call, error, match):
    # before: act(-1) returned policy_[S - 1] and observe buffered the transition, marked the
    # state terminal and counted the visit; every later plan() failed on the buffer
    agent = PSRLAgent(DirichletTransitionModel(4, 2), np.zeros((4, 2)), 0.9, variant="mean")
    agent.plan(rng=0)
    with pytest.raises(error, match=match):
        call(agent)
    _untouched(agent)


@pytest.mark.parametrize("reward, error, match", [
    (float("nan"), ValueError, "reward: expected a real number in .*, got nan"),
    (float("inf"), ValueError, "reward: .* got inf"),
    (1e200, ValueError, r"reward: expected a real number in \[-1e\+100, 1e\+100\], got 1e\+200"),
    ("1", TypeError, "reward: .* got '1'"),
], ids=["nan", "inf", "1e200", "str"])
def test_observe_refuses_a_reward_it_cannot_learn_from(reward, error, match):
    agent = PSRLAgent(DirichletTransitionModel(4, 2), None, 0.9, learn_rewards=True, variant="mean")
    agent.plan(rng=0)
    with pytest.raises(error, match=match):
        agent.observe(0, 0, 1, rng=0, reward=reward)
    _untouched(agent)
    assert agent.observe(0, 0, 1, rng=0, reward=-1e100) is False   # the bound itself is a reward


_P5, _R5 = chain_mdp(n=5)


@pytest.mark.parametrize("call, error, match", [
    (lambda: PSRLAgent(DirichletTransitionModel(5, 2), _R5, 0.9, n_samples=float("nan")), ValueError,
     r"n_samples: expected an integer in \[1, 10000\], got nan"),
    (lambda: PSRLAgent(DirichletTransitionModel(5, 2), _R5, 0.9, n_samples=True), ValueError, "n_samples: .* got True"),
    (lambda: PSRLAgent(DirichletTransitionModel(5, 2), _R5, 0.9, n_samples=10**12), ValueError, "n_samples: .* got 10"),
    (lambda: PSRLAgent(DirichletTransitionModel(5, 2), _R5, 0.9, replan_every=None), ValueError,
     "replan_every: expected an integer >= 1, got None"),
    (lambda: PSRLAgent(DirichletTransitionModel(5, 2), _R5, 0.9, replan_every=2.5), ValueError, "replan_every: .* 2.5"),
    (lambda: PSRLAgent(DirichletTransitionModel(5, 2), _R5, 0.9, replan_every="never"), ValueError,
     "replan_every: expected a positive int or 'episode', got 'never'"),
    (lambda: PSRLAgent(DirichletTransitionModel(5, 2), _R5, None), TypeError,
     r"discount: expected a real number in \[0, 1\), got None"),
    (lambda: PSRLAgent(DirichletTransitionModel(5, 2), _R5, float("nan")), ValueError, "discount: .* got nan"),
    (lambda: PSRLAgent(DirichletTransitionModel(5, 2), _R5, True), TypeError, "discount: .* got True"),
], ids=["samples-nan", "samples-bool", "samples-huge", "replan-None", "replan-fraction", "replan-str",
        "discount-None", "discount-nan", "discount-bool"])
def test_agent_settings_are_checked_naming_them(call, error, match):
    # before: int(nan) and float(None) failed with Python's own messages, n_samples=True ran
    # one sample and 10**12 failed at the first plan
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize("kwargs, match", [
    (dict(n_steps=float("nan")), r"n_steps: expected an integer in \[0, 10000000\], got nan"),
    (dict(n_steps=10**12), r"n_steps: expected an integer in \[0, 10000000\], got 1000000000000"),
    (dict(n_steps=True), "n_steps: .* got True"),
    (dict(eval_every=float("nan")), "eval_every: expected an integer >= 1, got nan"),
    (dict(eval_every=0), "eval_every: expected an integer >= 1, got 0"),
    (dict(env_seed=-1), "env_seed: expected an integer >= 0, got -1"),
    (dict(env_seed=1.5), "env_seed: expected an integer >= 0, got 1.5"),
    (dict(env_seed="1"), "env_seed: expected an integer >= 0, got '1'"),
], ids=["steps-nan", "steps-huge", "steps-bool", "eval-nan", "eval-0", "seed-negative", "seed-fraction",
        "seed-str"])
def test_run_settings_are_checked_naming_them(kwargs, match):
    # before: int(nan) errors, env_seed=-1 failed inside gymnasium's seeding, env_seed=1.5 ran
    # as seed 1, and n_steps=10**12 asked numpy for 7 TiB
    env = TabularEnv(TabularMDP(*chain_mdp(n=5), 0.9), initial_distribution=0)
    agent = PSRLAgent(DirichletTransitionModel(5, 2), _R5, 0.9)
    args = dict(n_steps=10, rng=0, true_mdp=TabularMDP(*chain_mdp(n=5), 0.9), eval_every=5) | kwargs
    with pytest.raises(ValueError, match=match):
        run_psrl(env, agent, args.pop("n_steps"), **args)
    assert agent.n_plans_ == 0
    with pytest.raises(ValueError, match=r"start_state: expected an integer in \[0, 4\], got nan"):
        run_psrl(_P5, agent, 10, float("nan"), rng=0)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(n_states=float("nan")), ValueError, "n_states: expected an integer >= 1, got nan"),
    (dict(n_states=None), ValueError, "n_states: expected an integer >= 1, got None"),
    (dict(n_states=True), ValueError, "n_states: .* got True"),
    (dict(n_actions=2.5), ValueError, "n_actions: .* got 2.5"),
    (dict(n_states=10**12), ValueError, "n_states, n_actions: a reward belief over 1,000,000,000,000 x 2 "),
    (dict(mean=1e200), ValueError, r"mean: expected a real number in \[-1e\+100, 1e\+100\], got 1e\+200"),
    (dict(mean=float("nan")), ValueError, "mean: .* got nan"),
    (dict(kappa=0.0), ValueError, r"kappa: expected a real number in \[1e-100, 1e\+100\], got 0.0"),
    (dict(rate=1e300), ValueError, "rate: .* got 1e\\+300"),
    (dict(shape="1"), TypeError, "shape: .* got '1'"),
], ids=["S-nan", "S-None", "S-bool", "A-fraction", "S-huge", "mean-huge", "mean-nan", "kappa-0", "rate-huge",
        "shape-str"])
def test_normal_gamma_settings_are_checked_naming_them(kwargs, error, match):
    with pytest.raises(error, match=match):
        NormalGammaRewards(**(dict(n_states=2, n_actions=2) | kwargs))


def test_normal_gamma_refuses_rewards_whose_squares_overflow_and_never_draws_infinity():
    # before: rewards of +-1e200 were accepted (their squares are inf) and every draw of the pair
    # was infinite; a prior shape of 1e-3 drew tau = 0, an infinite draw, about half the time
    post = NormalGammaRewards(2, 2).update([1], [1], [0.5])
    before = post.posterior()
    with pytest.raises(ValueError, match=r"rewards: expected magnitudes at most 1e\+100 .*, got 1e\+200"):
        post.update([0, 0], [0, 0], [1e200, -1e200])
    for a, b in zip(before, post.posterior()):
        np.testing.assert_array_equal(a, b)                       # nothing folded in
    extreme = NormalGammaRewards(2, 2, mean=-1e100, kappa=1e100, shape=1e-100, rate=1e100)
    extreme.update([0, 0, 1], [0, 0, 1], [1e100, -1e100, 1e100])
    for belief in (extreme, NormalGammaRewards(2, 2, shape=1e-3)):
        assert np.isfinite(belief.sample_many(2000, rng=0)).all()
    with pytest.raises(ValueError, match=r"n: expected an integer >= 1, got nan"):
        post.sample_many(float("nan"), rng=0)
    with pytest.raises(ValueError, match="n: 1,000,000,000,000 draws of 2 x 2 expected rewards would need about"):
        post.sample_many(10**12, rng=0)


def test_the_last_step_is_scored_when_the_period_does_not_divide_the_run():
    # before: 23 steps scored every 10 ended the curves at step 20 (and 5 steps every 10 at step 0)
    P, R = chain_mdp(n=5)
    true = TabularMDP(P, R, 0.9)
    for n_steps, every, want in ((23, 10, [0, 10, 20, 23]), (5, 10, [0, 5]), (20, 10, [0, 10, 20]), (0, 10, [0])):
        agent = PSRLAgent(DirichletTransitionModel(5, 2), R, 0.9, n_samples=2, replan_every=7)
        out = run_psrl(P, agent, n_steps, 0, rng=1, eval_every=every)
        np.testing.assert_array_equal(out["steps"], want)
        assert len(out["expected_return"]) == len(want)
        agent = PSRLAgent(DirichletTransitionModel(5, 2), R, 0.9, n_samples=2, replan_every=7)
        out = run_psrl(TabularEnv(true, initial_distribution=0), agent, n_steps, rng=1, eval_every=every,
                       true_mdp=true)
        np.testing.assert_array_equal(out["steps"], want)
        assert len(out["policies"]) == len(out["normalized_return"]) == len(out["episodes"]) == len(want)
        np.testing.assert_array_equal(out["policies"][-1], agent.policy_)       # the policy it ended with
    # per episode: after every episode and after the last step (mid-episode here)
    env = gymnasium.wrappers.TimeLimit(TabularEnv(true, initial_distribution=0), 6)
    agent = PSRLAgent(DirichletTransitionModel(5, 2), R, 0.9, n_samples=2, replan_every="episode")
    out = run_psrl(env, agent, 15, rng=1, eval_every="episode", true_mdp=true)
    np.testing.assert_array_equal(out["steps"], [0, 6, 12, 15])
    np.testing.assert_array_equal(out["episodes"], [0, 1, 2, 2])
