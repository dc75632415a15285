"""Round 20 fixes of corrpriors.mdp: row rescaling, real-only inputs, terminal rollouts, the
"auto" sparse solver near discount one, non-finite inputs, a stable Boltzmann policy."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import softmax

import corrpriors.mdp._sparse_solve as solve_mod
from corrpriors.exceptions import ConvergenceWarning
from corrpriors.mdp import (
    SparseTransitions,
    TabularMDP,
    expected_return,
    policy_evaluation,
    policy_iteration,
    sample_trajectories,
)
from corrpriors.mdp.planning import boltzmann_policy, finite_horizon, greedy_policy, q_values


def two_state():
    P = np.zeros((2, 1, 2))
    P[0, 0, 1] = P[1, 0, 0] = 1.0
    return TabularMDP(P, [1.0, 0.0], 0.5)


# ------------------------------------------------------------------ 1. rows summing slightly above one
def test_rows_accepted_above_one_are_rescaled_so_values_are_exact():
    g = 1 - 1e-10
    P = np.array([[[1 + 5e-9]]])
    for T in (P, SparseTransitions(sp.csr_array(P.reshape(1, 1)))):
        m = TabularMDP(T, [1.0], g)
        assert float(m.transition_matrix().sum()) == 1.0
        V = policy_iteration(m, initial_policy=np.zeros(1, dtype=int)).values
        np.testing.assert_allclose(V, [1 / (1 - g)], rtol=1e-6)   # was -2.04e8 for 1e10
        np.testing.assert_allclose(policy_evaluation(m, [0]), [1 / (1 - g)], rtol=1e-6)
    g2 = 0.99999999
    P2 = np.array([[[0.5 + 9e-9, 0.5]], [[0.5, 0.5 + 9e-9]]])
    dense = policy_iteration(TabularMDP(P2, [1.0, 1.0], g2)).values
    sparse = policy_iteration(TabularMDP(SparseTransitions.from_dense(P2), [1.0, 1.0], g2),
                              initial_policy=np.zeros(2, dtype=int)).values
    np.testing.assert_allclose(dense, 1 / (1 - g2), rtol=1e-6)   # was 9.99999833e8 for 1e8
    np.testing.assert_allclose(sparse, dense, rtol=1e-12)


def test_normalised_rows_keep_their_numbers_bit_for_bit():
    P = np.random.default_rng(0).dirichlet(np.ones(4), size=(4, 2))
    m = TabularMDP(P, np.zeros(4), 0.9)
    np.testing.assert_array_equal(m.transitions, P)
    np.testing.assert_array_equal(SparseTransitions.from_dense(P).toarray(), P)


# ------------------------------------------------------------------ 2. complex / string inputs
@pytest.mark.parametrize("make, match", [
    (lambda P: TabularMDP(P.astype(complex) + 1j, [1, 0], 0.5), r"^transitions: .*complex"),
    (lambda P: TabularMDP(P, np.array([1 + 5j, 0]), 0.5), r"^rewards: .*complex"),
    (lambda P: TabularMDP(P, ["1", "0"], 0.5), r"^rewards: expected a numeric array"),
    (lambda P: TabularMDP(P, np.array([1, "2"], dtype=object), 0.5), r"^rewards: .*object"),
    (lambda P: TabularMDP(P, [1, 0], 0.5, coordinates=[1j, 2]), r"^coordinates: .*complex"),
    (lambda P: SparseTransitions(sp.csr_array(np.array([[1 + 1j, 0], [0, 1]]))), r"^transitions: .*complex"),
    (lambda P: SparseTransitions.from_dense(P.astype(complex)), r"^transitions: .*complex"),
    (lambda P: policy_iteration(TabularMDP(P, [1, 0], 0.5), rewards=np.array([[1 + 1j], [0]])),
     r"^rewards: .*complex"),
    (lambda P: policy_evaluation(TabularMDP(P, [1, 0], 0.5), np.array([[1 + 1j], [1]])), r"^policy: .*complex"),
    (lambda P: q_values(TabularMDP(P, [1, 0], 0.5), [1j, 0]), r"^values: .*complex"),
])
def test_complex_and_string_inputs_are_refused_by_name(make, match):
    P = np.zeros((2, 1, 2))
    P[0, 0, 1] = P[1, 0, 0] = 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no "discards the imaginary part" on the way
        with pytest.raises(TypeError, match=match):
            make(P)


# ------------------------------------------------------------------ 3. rollouts: terminal states, start
def terminal_mdp():
    rng = np.random.default_rng(5)
    S, A = 4, 2
    P = rng.dirichlet(np.ones(S), size=(S, A))
    R = rng.normal(size=(S, A)) + 1.0
    return TabularMDP(P, R, 0.8, terminal=np.array([False, False, True, True]),
                      initial_distribution=[0.7, 0.3, 0.0, 0.0])


def test_rollout_returns_match_expected_return_with_terminal_states():
    m = terminal_mdp()
    pi = np.full((4, 2), 0.5)
    T, E = 60, 4000
    tr = sample_trajectories(m, pi, T, rng=0, n_episodes=E)       # start: m.initial_distribution
    assert not np.isin(tr.states[:, 0], [2, 3]).any()               # probability 0 there
    G = tr.rewards @ (m.discount ** np.arange(T))
    exact = expected_return(m, pi)
    assert abs(G.mean() - exact) < 4 * G.std() / np.sqrt(E) + 0.8 ** T * 10
    inside = np.isin(tr.states, [2, 3])
    assert inside.any() and np.all(tr.rewards[inside] == 0.0)
    assert np.all(tr.next_states[inside] == tr.states[inside])      # absorbing


def test_rollout_start_must_be_an_integer_state():
    m = terminal_mdp()
    for bad in (0.9, True, [0.0, 1.0]):
        with pytest.raises(ValueError, match=r"^start: "):
            sample_trajectories(m, np.full((4, 2), 0.5), 3, rng=0, n_episodes=2, start=bad)
    tr = sample_trajectories(m, np.full((4, 2), 0.5), 3, rng=0, n_episodes=2, start=[1, 0])
    assert tr.states[:, 0].tolist() == [1, 0]


# ------------------------------------------------------------------ 4. "auto" near discount one
def ring(S, A=4, K=5, seed=1):
    rng = np.random.default_rng(seed)
    ns = (np.arange(S)[:, None, None] + rng.integers(-3, 4, size=(S, A, K))) % S
    p = rng.random((S, A, K))
    return SparseTransitions.from_entries(ns, p / p.sum(-1, keepdims=True)), rng.normal(size=(S, A))


def test_auto_solver_switches_to_lu_when_richardson_cannot_finish(monkeypatch):
    monkeypatch.setattr(solve_mod, "DIRECT_MAX_STATES", 100)
    monkeypatch.setattr(solve_mod, "KRYLOV_MAX_ITER", 2)
    T, R = ring(300)
    m = TabularMDP(T, R, 0.99999)
    pi = np.full((300, 4), 0.25)
    exact = policy_evaluation(m, pi, solver="direct")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        V = policy_evaluation(m, pi)                                 # auto: was 0.1 off after 1e6 steps
    np.testing.assert_allclose(V, exact, rtol=1e-9, atol=0)


def test_iterative_cap_is_named_and_policy_iteration_reports_no_convergence(monkeypatch):
    monkeypatch.setattr(solve_mod, "DIRECT_MAX_STATES", 100)
    monkeypatch.setattr(solve_mod, "KRYLOV_MAX_ITER", 2)
    monkeypatch.setattr(solve_mod, "RICHARDSON_MAX_ITER", 50, raising=False)
    T, R = ring(300)
    m = TabularMDP(T, R, 0.99999)
    with pytest.warns(ConvergenceWarning, match=r"cap of 50 Richardson steps was reached"):
        res = policy_iteration(m, solver="iterative", initial_policy=np.zeros(300, dtype=int), max_iter=1)
    assert res.converged is False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        assert policy_iteration(m, solver="direct", initial_policy=np.zeros(300, dtype=int)).converged


# ------------------------------------------------------------------ 5. non-finite and mis-shaped inputs
def test_non_finite_and_mis_shaped_inputs_are_refused_by_name():
    m = two_state()
    with pytest.raises(ValueError, match=r"^values: contains NaN"):
        q_values(m, [np.nan, 0])
    with pytest.raises(ValueError, match=r"^terminal_values: contains NaN"):
        finite_horizon(m, 2, terminal_values=[np.nan, 0])
    with pytest.raises(ValueError, match=r"^terminal_values: expected shape \(S,\) = \(2,\), got \(3, 2\)"):
        finite_horizon(m, 2, terminal_values=np.zeros((3, 2)))
    with pytest.raises(ValueError, match=r"^q: contains NaN"):
        greedy_policy([[np.nan, 1.0]])
    with pytest.raises(ValueError, match=r"^horizon: "):
        finite_horizon(m, True)
    np.testing.assert_allclose(finite_horizon(m, 2, terminal_values=[1.0, 2.0]).values[0],
                               [1 + 0.5 * 0 + 0.25 * 1, 0 + 0.5 * 1 + 0.25 * 2])


# ------------------------------------------------------------------ 6. Boltzmann policy
def test_boltzmann_is_stable_and_matches_softmax():
    q = np.random.default_rng(2).normal(size=(5, 3)) * 4
    for beta in (0.0, 0.3, 2.0):
        np.testing.assert_allclose(boltzmann_policy(q, beta), softmax(beta * q, axis=1), rtol=1e-12)
    np.testing.assert_array_equal(boltzmann_policy([[1, 2.0]], 1e308), [[0.0, 1.0]])
    np.testing.assert_array_equal(boltzmann_policy([[2.0, 1.0, 2.0]], 1e300), [[0.5, 0.0, 0.5]])
    for bad in ([[np.inf, 1.0]], [[np.nan, 1.0]]):
        with pytest.raises(ValueError, match=r"^q: contains NaN or infinite"):
            boltzmann_policy(bad, 1.0)


# ------------------------------------------------------------------ 7. silent coercions
def test_grid_shape_walls_and_tol_are_not_coerced():
    P = np.zeros((2, 1, 2))
    P[0, 0, 1] = P[1, 0, 0] = 1.0
    with pytest.raises(ValueError, match=r"^shape: expected an integer"):
        TabularMDP(P, [1, 0], 0.5, shape=(1.5, 2))
    with pytest.raises(ValueError, match=r"^walls: expected a boolean mask \(or 0/1\)"):
        TabularMDP(P, [1, 0], 0.5, shape=(1, 3), walls=[[0, 0.5, 2]])
    assert TabularMDP(P, [1, 0], 0.5, shape=(1, 3), walls=[[0, 1, 0]]).walls.tolist() == [[False, True, False]]
    with pytest.raises(TypeError, match=r"^tol: "):
        policy_iteration(TabularMDP(P, [1, 0], 0.5), tol="1e-3")
