"""Planners against brute force: linear solves, policy enumeration, per-goal loops."""

import dataclasses
import itertools
import warnings

import numpy as np
import pytest

from corrpriors.envs import wall_world
from corrpriors.exceptions import ConvergenceWarning
from corrpriors.mdp import (
    TabularMDP,
    boltzmann_policy,
    finite_horizon,
    goal_q_values,
    greedy_policy,
    normalize_q,
    normalized_return,
    policy_evaluation,
    policy_iteration,
    q_values,
    return_range,
    value_iteration,
)


def random_mdp(rng, S, A, state_rewards=False, gamma=0.9):
    P = rng.dirichlet(np.ones(S) * 0.5, size=(S, A))
    R = rng.normal(size=S) if state_rewards else rng.normal(size=(S, A))
    return TabularMDP(P, R, gamma)


def loop_policy_value(mdp, pi):
    """Reference: build the linear system entry by entry and solve it."""
    S, A = mdp.n_states, mdp.n_actions
    M = np.eye(S)
    r = np.zeros(S)
    for s in range(S):
        for a in range(A):
            r[s] += pi[s, a] * mdp.reward_matrix[s, a]
            for t in range(S):
                M[s, t] -= mdp.discount * pi[s, a] * mdp.transitions[s, a, t]
    return np.linalg.solve(M, r)


def enumerate_optimum(mdp):
    """Best deterministic policy by enumeration of all A**S policies."""
    S, A = mdp.n_states, mdp.n_actions
    best = None
    for acts in itertools.product(range(A), repeat=S):
        V = loop_policy_value(mdp, np.eye(A)[list(acts)])
        best = V if best is None else np.maximum(best, V)
    return best


@pytest.mark.parametrize("seed", range(6))
def test_policy_evaluation_matches_loop_solve(seed):
    rng = np.random.default_rng(seed)
    mdp = random_mdp(rng, 6, 3, state_rewards=bool(seed % 2))
    pi = rng.dirichlet(np.ones(3), size=6)
    np.testing.assert_allclose(policy_evaluation(mdp, pi), loop_policy_value(mdp, pi), atol=1e-12)
    # and the value satisfies the Bellman equation for pi
    V = policy_evaluation(mdp, pi)
    np.testing.assert_allclose(V, np.sum(pi * q_values(mdp, V), axis=1), atol=1e-12)


def test_policy_evaluation_deterministic_equals_one_hot():
    rng = np.random.default_rng(1)
    mdp = random_mdp(rng, 5, 3)
    acts = rng.integers(0, 3, size=5)
    np.testing.assert_allclose(policy_evaluation(mdp, acts), policy_evaluation(mdp, np.eye(3)[acts]))


@pytest.mark.parametrize("S,A,seed", [(2, 2, 0), (2, 3, 1), (3, 2, 2), (3, 3, 3), (3, 2, 4), (2, 2, 5)])
def test_vi_pi_and_enumeration_agree(S, A, seed):
    rng = np.random.default_rng(seed)
    mdp = random_mdp(rng, S, A, state_rewards=seed % 2 == 0, gamma=0.5 + 0.45 * rng.random())
    V_enum = enumerate_optimum(mdp)
    vi = value_iteration(mdp, tol=1e-11)
    pi = policy_iteration(mdp)
    assert vi.converged and pi.converged
    np.testing.assert_allclose(vi.values, V_enum, atol=1e-9)
    np.testing.assert_allclose(pi.values, V_enum, atol=1e-11)
    # the greedy policy of the optimum is optimal
    np.testing.assert_allclose(policy_evaluation(mdp, pi.policy), V_enum, atol=1e-10)


def test_batched_planning_equals_individual_calls():
    rng = np.random.default_rng(3)
    mdp = random_mdp(rng, 7, 3)
    batch = rng.dirichlet(np.ones(7), size=(10, 7, 3))
    vi = value_iteration(mdp, batch)
    pi = policy_iteration(mdp, batch)
    assert vi.values.shape == (10, 7) and vi.q_values.shape == (10, 7, 3)
    assert vi.policy.shape == (10, 7, 3)
    for m in range(10):
        single = value_iteration(mdp, batch[m])
        np.testing.assert_allclose(vi.values[m], single.values, atol=1e-9)
        np.testing.assert_allclose(pi.values[m], policy_iteration(mdp.with_transitions(batch[m])).values,
                                   atol=1e-11)
    # batched exact evaluation
    pol = rng.dirichlet(np.ones(3), size=7)
    Vb = policy_evaluation(mdp, pol, transitions=batch)
    np.testing.assert_allclose(Vb[4], policy_evaluation(mdp.with_transitions(batch[4]), pol))


def test_goal_q_values_match_per_goal_loop():
    mdp = wall_world()
    goals = np.array([0, 10, 50, 90, 100])
    for terminal in (False, True):
        Qg = goal_q_values(mdp, goals, terminal=terminal)
        assert Qg.shape == (mdp.n_states, 4, goals.size)
        for j, g in enumerate(goals):
            R = np.zeros(mdp.n_states)
            R[g] = 1.0
            P = mdp.transitions.copy()
            if terminal:  # the episode ends after leaving g: Q(g, .) = 1, no future term
                Q = np.zeros((mdp.n_states, 4))
                for _ in range(600):
                    Q = R[:, None] + mdp.discount * P @ Q.max(axis=1)
                    Q[g] = 1.0
            else:
                Q = value_iteration(TabularMDP(P, R, mdp.discount), tol=1e-12).q_values
            np.testing.assert_allclose(Qg[..., j], Q, atol=1e-10)


def test_goal_q_values_all_goals_is_fast_and_consistent():
    import time

    mdp = wall_world()
    t0 = time.perf_counter()
    Q = goal_q_values(mdp)
    elapsed = time.perf_counter() - t0
    assert Q.shape == (101, 4, 101)
    assert elapsed < 5.0
    # the goal state is the most valuable state for its own goal
    V = Q.max(axis=1)
    assert np.all(V.argmax(axis=0) == np.arange(101))


def test_greedy_policy_ties():
    Q = np.array([[1.0, 1.0, 0.0], [0.0, 2.0, 1.0]])
    np.testing.assert_allclose(greedy_policy(Q), [[0.5, 0.5, 0.0], [0.0, 1.0, 0.0]])
    np.testing.assert_allclose(greedy_policy(Q, ties="first"), [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    with pytest.raises(ValueError, match="ties"):
        greedy_policy(Q, ties="random")


def test_boltzmann_and_normalisation():
    Q = np.array([[1.0, 2.0, 4.0], [3.0, 3.0, 3.0]])
    Qn = normalize_q(Q)
    np.testing.assert_allclose(Qn, [[0.0, 1 / 3, 1.0], [1.0, 1.0, 1.0]])
    p = boltzmann_policy(Q, beta=2.0)
    ref = np.exp(2 * Q) / np.exp(2 * Q).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(p, ref)
    pn = boltzmann_policy(Q, beta=2.0, normalize=True)
    np.testing.assert_allclose(pn, np.exp(2 * Qn) / np.exp(2 * Qn).sum(axis=1, keepdims=True))
    # goal layout (S, A, G): softmax over axis 1
    QG = np.stack([Q, 2 * Q], axis=-1)
    pg = boltzmann_policy(QG, beta=1.0)
    np.testing.assert_allclose(pg.sum(axis=1), 1.0)
    np.testing.assert_allclose(pg[..., 1], boltzmann_policy(2 * Q, 1.0))
    # huge beta stays finite and tends to greedy
    np.testing.assert_allclose(boltzmann_policy(Q, 1e6)[0], [0, 0, 1])
    with pytest.raises(ValueError, match="beta"):
        boltzmann_policy(Q, -1.0)


def test_finite_horizon_matches_brute_force_and_converges():
    rng = np.random.default_rng(5)
    mdp = random_mdp(rng, 3, 2)
    # brute force the 2-step optimum by enumerating (a0, a1-per-state) plans
    fh = finite_horizon(mdp, 2)
    R, P, g = mdp.reward_matrix, mdp.transitions, mdp.discount
    V1 = R.max(axis=1)
    V0 = np.max(R + g * P @ V1, axis=1)
    np.testing.assert_allclose(fh.values[0], V0)
    np.testing.assert_allclose(fh.values[1], V1)
    np.testing.assert_allclose(fh.values[2], 0.0)
    long = finite_horizon(mdp, 400)
    np.testing.assert_allclose(long.values[0], value_iteration(mdp).values, atol=1e-9)
    assert finite_horizon(mdp, 3, discount=1.0).values.shape == (4, 3)


def test_value_iteration_warns_without_convergence():
    rng = np.random.default_rng(0)
    mdp = random_mdp(rng, 4, 2, gamma=0.99)
    with pytest.warns(ConvergenceWarning):
        res = value_iteration(mdp, max_iter=3)
    assert not res.converged


def test_planners_reject_bad_input():
    rng = np.random.default_rng(0)
    mdp = random_mdp(rng, 4, 2)
    with pytest.raises(ValueError, match="transitions"):
        value_iteration(mdp, np.ones((4, 2, 3)) / 3)
    with pytest.raises(ValueError, match="policy"):
        policy_evaluation(mdp, np.ones((4, 3)) / 3)
    with pytest.raises(ValueError, match="goals"):
        goal_q_values(mdp, [7])
    with pytest.raises(ValueError, match="horizon"):
        finite_horizon(mdp, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        value_iteration(mdp)


# ------------------------------------------------------------------ terminal states, r(s, a, s')
def terminal_pair(seed, S=5, A=2, gamma=0.9):
    """An MDP with terminal states whose rows say anything, and its explicit twin.

    The twin has no terminal mask: its terminal rows are absorbing self-loops paying nothing,
    which is what a terminal state means.
    """
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.ones(S) * 0.5, size=(S, A))
    r = rng.normal(size=(S, A, S))
    terminal = np.zeros(S, dtype=bool)
    terminal[[1, S - 1]] = True
    P2, r2 = P.copy(), r.copy()
    for t in np.flatnonzero(terminal):
        P2[t] = 0.0
        P2[t, :, t] = 1.0
        r2[t] = 0.0
    return TabularMDP(P, r, gamma, terminal=terminal), TabularMDP(P2, r2, gamma)


@pytest.mark.parametrize("seed", range(3))
def test_terminal_states_plan_like_absorbing_zero_reward_states(seed):
    mdp, twin = terminal_pair(seed)
    best = enumerate_optimum(twin)
    for res in (policy_iteration(mdp), value_iteration(mdp, tol=1e-12)):
        np.testing.assert_allclose(res.values, best, atol=1e-9)
    assert np.all(policy_iteration(mdp).values[mdp.terminal] == 0.0)
    pi = np.random.default_rng(seed).dirichlet(np.ones(2), size=5)
    np.testing.assert_allclose(policy_evaluation(mdp, pi), loop_policy_value(twin, pi), atol=1e-12)
    V = np.random.default_rng(seed + 10).normal(size=5)
    V_twin = np.where(mdp.terminal, 0.0, V)     # the twin's values at terminal states are 0
    Q = q_values(mdp, V)
    np.testing.assert_allclose(Q[~mdp.terminal], q_values(twin, V_twin)[~mdp.terminal], atol=1e-12)
    np.testing.assert_array_equal(Q[mdp.terminal], 0.0)
    fh, fh_twin = finite_horizon(mdp, 6), finite_horizon(twin, 6)
    np.testing.assert_allclose(fh.values, fh_twin.values, atol=1e-12)
    np.testing.assert_allclose(goal_q_values(mdp, [0, 2], terminal=True),
                               goal_q_values(twin, [0, 2], terminal=True)
                               * ~mdp.terminal[:, None, None], atol=1e-10)


def test_sampled_models_use_their_own_expected_transition_rewards():
    mdp, _ = terminal_pair(7)
    rng = np.random.default_rng(8)
    models = rng.dirichlet(np.ones(5), size=(3, 5, 2))
    batch = policy_iteration(mdp, models)
    for m in range(3):
        alone = policy_iteration(mdp.with_transitions(models[m]))
        np.testing.assert_allclose(batch.values[m], alone.values, atol=1e-10)
        # the oracle: average r under this model by hand, as state-action rewards
        R = np.einsum("sat,sat->sa", models[m], mdp.rewards)
        hand = TabularMDP(models[m], R, mdp.discount, terminal=mdp.terminal)
        np.testing.assert_allclose(alone.values, policy_iteration(hand).values, atol=1e-10)


def test_normalized_return_is_one_for_the_optimum_and_zero_for_uniform():
    mdp, twin = terminal_pair(3)
    mu = np.array([0.5, 0.0, 0.3, 0.2, 0.0])
    mdp = TabularMDP(mdp.transitions, mdp.rewards, mdp.discount, terminal=mdp.terminal,
                     initial_distribution=mu)
    uniform = np.full((5, 2), 0.5)
    assert normalized_return(mdp, policy_iteration(mdp).policy) == pytest.approx(1.0, abs=1e-12)
    assert normalized_return(mdp, uniform) == pytest.approx(0.0, abs=1e-12)
    pi = np.random.default_rng(0).dirichlet(np.ones(2), size=5)
    lo, hi = loop_policy_value(twin, uniform) @ mu, enumerate_optimum(twin) @ mu
    want = (loop_policy_value(twin, pi) @ mu - lo) / (hi - lo)
    assert normalized_return(mdp, pi) == pytest.approx(want, abs=1e-10)
    np.testing.assert_allclose(return_range(mdp), (lo, hi), atol=1e-10)
    flat = TabularMDP(mdp.transitions, np.zeros(5), 0.9)
    with pytest.raises(ValueError, match="normalized_return is undefined"):
        normalized_return(flat, uniform)


def test_planning_with_a_batch_of_sampled_rewards():
    rng = np.random.default_rng(11)
    mdp = random_mdp(rng, 4, 2)
    models = rng.dirichlet(np.ones(4), size=(3, 4, 2))
    rewards = rng.normal(size=(3, 4, 2))
    batch = policy_iteration(mdp, models, rewards=rewards)
    for m in range(3):
        twin = TabularMDP(models[m], rewards[m], mdp.discount)
        np.testing.assert_allclose(batch.values[m], enumerate_optimum(twin), atol=1e-10)
    one = policy_iteration(mdp, rewards=rewards)          # the MDP's own dynamics, 3 rewards
    np.testing.assert_allclose(one.values[1], enumerate_optimum(
        TabularMDP(mdp.transitions, rewards[1], mdp.discount)), atol=1e-10)
    with pytest.raises(ValueError, match=r"rewards: expected finite values of shape"):
        policy_iteration(mdp, rewards=np.zeros((4, 3)))


# ------------------------------------------------------------ beliefs' sparse tables (round 17)
def _background_tables(mdp, seed):
    """A correlated belief's sparse posterior mean and two draws (BackgroundTransitions with
    windows and two profiles), forced sparse on a small MDP so that they can be densified."""
    from corrpriors.applications import CorrelatedTransitionModel

    rng = np.random.default_rng(seed)
    S, A = mdp.n_states, mdp.n_actions
    belief = CorrelatedTransitionModel.for_mdp(mdp, selection="fixed", sparse=True)
    s, a = rng.integers(S, size=60), rng.integers(A, size=60)
    belief.update(s, a, np.array([rng.choice(S, p=mdp.transitions[i, j]) for i, j in zip(s, a)]))
    return belief.mean(), list(belief.sample_many(2, rng=seed))


def test_planners_take_a_beliefs_background_table_like_its_dense_equivalent():
    from corrpriors.applications import BackgroundTransitions
    from corrpriors.envs import goal_gridworld

    base = goal_gridworld((5, 6), rng=0)
    S, A = base.n_states, base.n_actions
    rng = np.random.default_rng(3)
    terminal = np.zeros(S, dtype=bool)
    terminal[[4, 17]] = True
    r_sas = rng.normal(size=(S, A, S)) * (rng.random((S, A, S)) < 0.1)   # transition rewards
    for mdp in (base, dataclasses.replace(base, rewards=r_sas, discount=0.9, terminal=terminal)):
        P, draws = _background_tables(mdp, 1)
        assert isinstance(P, BackgroundTransitions) and P.excluded is not None
        D = P.toarray()
        for plan in (value_iteration, policy_iteration):
            got, want = plan(mdp, transitions=P), plan(mdp, transitions=D)
            np.testing.assert_allclose(got.values, want.values, rtol=0, atol=1e-10)
            np.testing.assert_allclose(got.q_values, want.q_values, rtol=0, atol=1e-10)
        pi = boltzmann_policy(want.q_values, 2.0)
        np.testing.assert_allclose(policy_evaluation(mdp, pi, transitions=P, solver="iterative"),
                                   policy_evaluation(mdp, pi, transitions=D), rtol=0, atol=1e-9)
        np.testing.assert_allclose(q_values(mdp, want.values, transitions=P),
                                   q_values(mdp, want.values, transitions=D), rtol=0, atol=1e-12)
        dense_draws = np.stack([d.toarray() for d in draws])   # a list of draws, like a batch
        for plan in (value_iteration, policy_iteration):
            got, want = plan(mdp, transitions=draws), plan(mdp, transitions=dense_draws)
            np.testing.assert_allclose(got.values, want.values, rtol=0, atol=1e-10)
        np.testing.assert_allclose(policy_evaluation(mdp, pi, transitions=draws),
                                   policy_evaluation(mdp, pi, transitions=dense_draws),
                                   rtol=0, atol=1e-9)
        goals = np.array([0, 7, 20])
        np.testing.assert_allclose(goal_q_values(mdp, goals, transitions=P),
                                   goal_q_values(mdp, goals, transitions=D), rtol=0, atol=1e-9)


def test_planners_take_the_beliefs_mean_at_scale_without_densifying():
    """From 2,000 states on the beliefs return BackgroundTransitions: value iteration and the
    MDP-based policy iteration agree with the operator planner on the same table."""
    from corrpriors.applications import CorrelatedTransitionModel, DirichletTransitionModel
    from corrpriors.envs import goal_gridworld
    from corrpriors.mdp import policy_iteration_operator

    mdp = goal_gridworld((50, 50), rng=0)
    beliefs = (CorrelatedTransitionModel.for_mdp(mdp, selection="fixed"),
               DirichletTransitionModel(mdp.n_states, mdp.n_actions))
    for belief in beliefs:
        belief.update([0, 1, 2], [0, 1, 2], [1, 2, 3])
        P = belief.mean()
        assert not isinstance(P, np.ndarray)
        ref = policy_iteration_operator(P, mdp.reward_matrix, mdp.discount)
        vi = value_iteration(mdp, transitions=P, tol=1e-9)
        np.testing.assert_allclose(vi.values, ref.values, rtol=0, atol=1e-8)
        pi = policy_iteration(mdp, transitions=P)
        np.testing.assert_allclose(pi.values, ref.values, rtol=0, atol=1e-8)
        np.testing.assert_allclose(policy_evaluation(mdp, ref.policy, transitions=P), ref.values,
                                   rtol=0, atol=1e-8)
    draws = list(beliefs[1].sample_many(2, rng=0))
    assert value_iteration(mdp, transitions=draws).values.shape == (2, mdp.n_states)


@pytest.mark.parametrize("call, kwargs, match", [
    (value_iteration, {"tol": -1.0}, r"^tol: expected a finite number >= 0, got -1.0"),
    (value_iteration, {"tol": float("nan")}, r"^tol: "),
    (value_iteration, {"max_iter": -5}, r"^max_iter: expected an integer >= 1, got -5"),
    (value_iteration, {"max_iter": 0}, r"^max_iter: expected an integer >= 1"),
    (value_iteration, {"initial_values": [np.nan] * 6}, r"^initial_values: expected finite values"),
    (value_iteration, {"initial_values": np.zeros(4)}, r"^initial_values: expected shape \(S,\)"),
    (policy_iteration, {"max_iter": 0}, r"^max_iter: expected an integer >= 1, got 0"),
    (policy_iteration, {"max_iter": 2.5}, r"^max_iter: expected an integer >= 1"),
])
def test_planner_arguments_are_checked_up_front(call, kwargs, match):
    """Before: tol=-1 or NaN ran all 100,000 sweeps and warned, max_iter=-5 returned the values
    of one backup with a warning, NaN warm starts were taken, a wrong-shape one raised numpy's
    broadcast error, and policy_iteration(max_iter=0) failed on 'q: expected shape'."""
    mdp = random_mdp(np.random.default_rng(0), 6, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                  # refused, not run and warned about
        with pytest.raises(ValueError, match=match):
            call(mdp, **kwargs)
