"""TabularMDP validation, rollouts, counts and metrics."""

import numpy as np
import pytest

from corrpriors.mdp import (
    TabularMDP,
    check_mdp,
    emd,
    expected_return,
    hellinger,
    mean_hellinger,
    policy_evaluation,
    sample_trajectories,
    state_action_counts,
    transition_counts,
    value_iteration,
    value_loss,
)


def chain(S=3, A=2, gamma=0.9):
    rng = np.random.default_rng(0)
    return TabularMDP(rng.dirichlet(np.ones(S), size=(S, A)), rng.normal(size=S), gamma)


# ------------------------------------------------------------------ validation
def test_tabular_mdp_is_validated_and_immutable():
    m = chain()
    assert (m.n_states, m.n_actions) == (3, 2)
    assert m.reward_matrix.shape == (3, 2)
    with pytest.raises(ValueError):
        m.transitions[0, 0, 0] = 1.0
    with pytest.raises(AttributeError):
        m.discount = 0.5
    check_mdp(m)


@pytest.mark.parametrize("kwargs,match", [
    (dict(transitions=np.full((2, 1, 2), 0.4)), r"sum to one; worst row \(0, 0\)"),
    (dict(transitions=np.array([[[1.5, -0.5]], [[0.5, 0.5]]])), "non-negative"),
    (dict(transitions=np.full((2, 1, 3), 1 / 3)), "transitions"),
    (dict(transitions=np.full((2, 2), 0.5)), r"\(S, A, S\)"),
    (dict(rewards=[np.nan, 0.0]), "rewards: contains NaN"),
    (dict(rewards=[0.0, 0.0, 0.0]), r"rewards: expected shape \(S,\)"),
    (dict(discount=1.0), r"discount: expected a number in \[0, 1\)"),
    (dict(discount=-0.1), "discount"),
    (dict(coordinates=np.zeros((3, 2))), "coordinates"),
    (dict(shape=(3, 3)), "non-wall cells"),
    (dict(walls=np.zeros((1, 2), dtype=bool)), "walls: requires shape"),
    (dict(rewards=np.zeros((2, 1, 3))), r"\(S, A, S\) = \(2, 1, 2\)"),
    (dict(terminal=[0, 1]), r"terminal: expected a boolean mask of shape \(S,\)"),
    (dict(terminal=np.array([True])), "terminal"),
    (dict(initial_distribution=[0.5, 0.6]), "initial_distribution: probabilities must sum to one"),
    (dict(initial_distribution=[1.0]), r"initial_distribution: expected a distribution of shape"),
])
def test_tabular_mdp_errors(kwargs, match):
    base = dict(transitions=np.full((2, 1, 2), 0.5), rewards=[0.0, 1.0], discount=0.9)
    base.update(kwargs)
    with pytest.raises(ValueError, match=match):
        TabularMDP(**base)


def test_grid_metadata():
    walls = np.array([[False, True], [False, False]])
    m = TabularMDP(np.full((3, 1, 3), 1 / 3), np.zeros(3), 0.5, shape=(2, 2), walls=walls)
    np.testing.assert_array_equal(m.cells, [[0, 0], [1, 0], [1, 1]])
    g = m.state_grid([1.0, 2.0, 3.0])
    assert np.isnan(g[0, 1]) and g[1, 1] == 3.0


# ------------------------------------------------------------------ rollouts
def test_rollout_reproducible_and_seed_dependent():
    m = chain(4, 2)
    pi = np.full((4, 2), 0.5)
    a = sample_trajectories(m, pi, 50, rng=7, n_episodes=3)
    b = sample_trajectories(m, pi, 50, rng=7, n_episodes=3)
    c = sample_trajectories(m, pi, 50, rng=8, n_episodes=3)
    np.testing.assert_array_equal(a.states, b.states)
    assert not np.array_equal(a.states, c.states)
    assert a.states.shape == (3, 50)
    np.testing.assert_array_equal(a.states[:, 1:], a.next_states[:, :-1])
    np.testing.assert_allclose(a.rewards, m.reward_matrix[a.states, a.actions])


def test_rollout_frequencies_match_model():
    m = chain(3, 2)
    pi = np.array([[0.2, 0.8], [0.5, 0.5], [1.0, 0.0]])
    n = 20000
    tr = sample_trajectories(m, pi, 1, rng=0, n_episodes=n, start=1)
    emp = transition_counts(tr, 3, 2)[1] / n          # (A, S) joint of (a, s')
    expected = pi[1][:, None] * m.transitions[1]
    se = np.sqrt(expected * (1 - expected) / n)
    assert np.all(np.abs(emp - expected) <= 5 * se + 1e-12)
    # the deterministic action at state 2 is never deviated from
    tr2 = sample_trajectories(m, pi, 200, rng=1, n_episodes=5)
    assert np.all(tr2.actions[tr2.states == 2] == 0)


def test_rollout_never_visits_zero_probability_states():
    P = np.zeros((3, 1, 3))
    P[:, 0, 0] = 0.5
    P[:, 0, 1] = 0.5   # state 2 unreachable
    m = TabularMDP(P, np.zeros(3), 0.9)
    tr = sample_trajectories(m, np.ones((3, 1)), 500, rng=0, n_episodes=20, start=0)
    assert not (tr.next_states == 2).any()


def test_counts_match_loops():
    rng = np.random.default_rng(2)
    s = rng.integers(0, 5, size=300)
    a = rng.integers(0, 3, size=300)
    s2 = rng.integers(0, 5, size=300)
    X = transition_counts((s, a, s2), 5, 3)
    N = state_action_counts((s, a), 5, 3)
    Xr = np.zeros((5, 3, 5), dtype=int)
    Nr = np.zeros((5, 3), dtype=int)
    for i, j, k in zip(s, a, s2):
        Xr[i, j, k] += 1
        Nr[i, j] += 1
    np.testing.assert_array_equal(X, Xr)
    np.testing.assert_array_equal(N, Nr)
    np.testing.assert_array_equal(X.sum(-1), N)
    with pytest.raises(ValueError, match="out of range"):
        state_action_counts((s, a + 3), 5, 3)


# ------------------------------------------------------------------ metrics
def test_hellinger_values():
    p = np.array([[1.0, 0.0], [0.5, 0.5], [0.2, 0.8]])
    q = np.array([[0.0, 1.0], [0.5, 0.5], [0.8, 0.2]])
    h = hellinger(p, q)
    ref = np.sqrt(1 - np.sum(np.sqrt(p * q), axis=1))   # identity H^2 = 1 - Bhattacharyya
    np.testing.assert_allclose(h, ref)
    np.testing.assert_allclose(h[:2], [1.0, 0.0])
    assert mean_hellinger(p, q) == pytest.approx(ref.mean())
    np.testing.assert_allclose(hellinger(p.T, q.T, axis=0), h)


def test_value_loss_and_expected_return():
    m = chain(4, 3)
    opt = value_iteration(m).policy
    unif = np.full((4, 3), 1 / 3)
    assert value_loss(m, opt, opt) == 0.0
    V_o, V_u = policy_evaluation(m, opt), policy_evaluation(m, unif)
    assert value_loss(m, opt, unif) == pytest.approx(np.linalg.norm(V_o - V_u) / np.linalg.norm(V_o))
    assert expected_return(m, opt) == pytest.approx(V_o.mean())
    assert expected_return(m, opt, start=2) == pytest.approx(V_o[2])
    mu = np.array([0.1, 0.2, 0.3, 0.4])
    assert expected_return(m, opt, start=mu) == pytest.approx(V_o @ mu)
    assert expected_return(m, opt) >= expected_return(m, unif)


def test_emd_against_closed_forms():
    # 1-D: EMD = integral of |CDF_p - CDF_q|
    rng = np.random.default_rng(0)
    for _ in range(5):
        p, q = rng.dirichlet(np.ones(6)), rng.dirichlet(np.ones(6))
        ref = np.sum(np.abs(np.cumsum(p) - np.cumsum(q))[:-1])
        assert emd(p, q, coordinates=np.arange(6.0)) == pytest.approx(ref, abs=1e-9)
        # 0/1 ground distance = total variation
        assert emd(p, q) == pytest.approx(0.5 * np.abs(p - q).sum(), abs=1e-9)
    D = np.array([[0, 3.0], [3.0, 0]])
    assert emd([1, 0], [0, 1], D) == pytest.approx(3.0)
    with pytest.raises(ValueError, match="ground_distance"):
        emd([1, 0], [0, 1], np.zeros((3, 3)))


def test_transition_rewards_are_averaged_under_the_model_in_use():
    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.ones(3), size=(3, 2))
    r = rng.normal(size=(3, 2, 3))
    m = TabularMDP(P, r, 0.9)
    loop = np.array([[sum(P[s, a, t] * r[s, a, t] for t in range(3)) for a in range(2)]
                     for s in range(3)])
    np.testing.assert_allclose(m.reward_matrix, loop, atol=1e-15)
    Q = rng.dirichlet(np.ones(3), size=(4, 3, 2))           # a batch of other models
    batch = m.expected_rewards(Q)
    assert batch.shape == (4, 3, 2)
    np.testing.assert_allclose(batch[2], (Q[2] * r).sum(-1), atol=1e-15)
    np.testing.assert_allclose(m.with_transitions(Q[1]).reward_matrix, batch[1], atol=1e-15)
    np.testing.assert_array_equal(chain().expected_rewards(Q), chain().reward_matrix)


def test_expected_return_uses_the_initial_distribution():
    m = chain()
    pi = np.zeros(3, dtype=int)
    V = policy_evaluation(m, pi)
    assert expected_return(m, pi) == pytest.approx(V.mean())
    mu = np.array([0.2, 0.0, 0.8])
    m0 = TabularMDP(m.transitions, m.rewards, m.discount, initial_distribution=mu)
    assert expected_return(m0, pi) == pytest.approx(V @ mu)
    assert expected_return(m0, pi, start=1) == pytest.approx(V[1])
    with pytest.raises(ValueError, match="start: expected a state"):
        expected_return(m0, pi, start=3)
