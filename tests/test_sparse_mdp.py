"""Sparse transition tables against dense oracles: the table, planners, rollouts, metrics."""

import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from corrpriors._random import inverse_cdf
from corrpriors.exceptions import ConvergenceWarning
from corrpriors.mdp import (
    SparseTransitionRewards,
    SparseTransitions,
    TabularMDP,
    check_mdp,
    check_transitions,
    expected_return,
    finite_horizon,
    goal_q_values,
    hellinger,
    mean_hellinger,
    normalized_return,
    policy_evaluation,
    policy_iteration,
    q_values,
    sample_trajectories,
    transition_counts,
    value_iteration,
    value_loss,
)
from corrpriors.mdp._sparse import expected_transition_rewards
from corrpriors.mdp._sparse_solve import solve_policy_values
from corrpriors.mdp.rollout import NextStateSampler


def sparse_table(rng, S, A, density=0.4):
    """A random table with zeros (column 0 always possible, so no row is empty)."""
    P = rng.random((S, A, S)) * (rng.random((S, A, S)) < density)
    P[..., rng.integers(S)] += 0.05
    return P / P.sum(axis=-1, keepdims=True)


def pair(P, R, gamma=0.9, **kw):
    """The same MDP with a dense and with a sparse table."""
    S, A = P.shape[:2]
    dense = TabularMDP(P, R, gamma, **kw)
    sparse = TabularMDP(sp.csr_array(P.reshape(S * A, S)), R, gamma, **kw)
    return dense, sparse


# ----------------------------------------------------------------------------- the table
def test_sparse_table_holds_the_dense_numbers_and_refuses_implicit_densifying():
    rng = np.random.default_rng(0)
    P = sparse_table(rng, 5, 3)
    T = SparseTransitions.from_dense(P)
    assert T.shape == (5, 3, 5) and T.ndim == 3 and (T.n_states, T.n_actions) == (5, 3)
    assert T.nnz == int((P > 0).sum())
    np.testing.assert_array_equal(T.toarray(), P)
    np.testing.assert_array_equal(T[2, 1], P[2, 1])
    np.testing.assert_array_equal(T[4], P[4])
    assert T[1, 2, 3] == P[1, 2, 3] and T[-1, -1, -1] == P[-1, -1, -1]
    with pytest.raises(TypeError, match=r"toarray\(\)"):
        np.asarray(T)
    with pytest.raises(TypeError, match="index with integers"):
        T[[0, 1]]
    with pytest.raises(IndexError, match="out of bounds"):
        T[5, 0]
    with pytest.raises(ValueError, match="read-only"):
        T.matrix.data[0] = 0.5
    U = pickle.loads(pickle.dumps(T))              # stays immutable through pickling (joblib)
    np.testing.assert_array_equal(U.toarray(), P)
    with pytest.raises(ValueError, match="read-only"):
        U.matrix.data[0] = 0.5
    # a scipy matrix of either flavour, COO with duplicates summed, explicit zeros dropped
    rows, cols = np.nonzero(P.reshape(15, 5))
    vals = P.reshape(15, 5)[rows, cols]
    coo = sp.coo_matrix((np.concatenate([vals / 2, vals / 2, [0.0]]),
                         (np.concatenate([rows, rows, [0]]), np.concatenate([cols, cols, [4]]))),
                        shape=(15, 5))
    np.testing.assert_allclose(SparseTransitions(coo).toarray(), P, rtol=0, atol=1e-15)
    assert SparseTransitions(coo).nnz == T.nnz


@pytest.mark.parametrize("matrix,error,match", [
    (np.eye(2), TypeError, "scipy sparse array"),
    (sp.csr_array(np.eye(3)[:2]), ValueError, r"shape \(S\*A, S\)"),
    (sp.csr_array(np.array([[1.5, -0.5], [0.0, 1.0]])), ValueError, r"non-negative.*\(0, 0, 1\)"),
    (sp.csr_array(np.array([[0.5, 0.4], [0.0, 1.0], [1, 0], [0, 1]])), ValueError,
     r"worst row \(s, a\) = \(0, 0\) sums to 0.9"),
    (sp.csr_array(np.array([[np.nan, 1.0], [0.0, 1.0]])), ValueError, "NaN"),
])
def test_bad_sparse_tables_get_clear_errors(matrix, error, match):
    with pytest.raises(error, match=match):
        SparseTransitions(matrix)


def test_from_entries_sums_repeated_next_states_in_order():
    idx = np.array([[[0, 1, 0]], [[1, 1, 1]]])
    p = np.array([[[0.25, 0.5, 0.25]], [[0.2, 0.3, 0.5]]])
    T = SparseTransitions.from_entries(idx, p)
    np.testing.assert_array_equal(T.toarray(), [[[0.5, 0.5]], [[0.0, 1.0]]])
    assert T.nnz == 3
    with pytest.raises(ValueError, match=r"next states must lie in \[0, 1\]"):
        SparseTransitions.from_entries(idx + 1, p)


def test_tabular_mdp_with_a_sparse_table():
    rng = np.random.default_rng(1)
    P = sparse_table(rng, 6, 2)
    dense, sparse = pair(P, rng.normal(size=6))
    assert sparse.is_sparse and not dense.is_sparse
    assert isinstance(sparse.transitions, SparseTransitions)
    assert (sparse.n_states, sparse.n_actions) == (6, 2) and "nnz" in repr(sparse)
    np.testing.assert_array_equal(sparse.transition_matrix().toarray(), P.reshape(12, 6))
    np.testing.assert_array_equal(dense.transition_matrix().toarray(), P.reshape(12, 6))
    check_mdp(sparse)
    # a posterior draw arrives as a sparse table: with_transitions accepts all three forms
    Q = sparse_table(rng, 6, 2)
    for form in (Q, sp.csr_array(Q.reshape(12, 6)), SparseTransitions.from_dense(Q)):
        np.testing.assert_array_equal(np.asarray(dense.with_transitions(form).transition_matrix().toarray()),
                                      Q.reshape(12, 6))
    with pytest.raises(TypeError, match="needs a dense"):
        check_transitions(sparse.transitions)


# ----------------------------------------------------------------------------- planners
@st.composite
def small_mdps(draw):
    S = draw(st.integers(1, 6))
    A = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    P = sparse_table(rng, S, A, density=draw(st.sampled_from([0.2, 0.5, 1.0])))
    kind = draw(st.sampled_from(["state", "state_action", "transition"]))
    R = {"state": rng.normal(size=S), "state_action": rng.normal(size=(S, A)),
         "transition": rng.normal(size=(S, A, S))}[kind]
    terminal = rng.random(S) < 0.3 if draw(st.booleans()) else None
    gamma = draw(st.sampled_from([0.0, 0.5, 0.9, 0.99]))
    return P, R, gamma, terminal, rng


def scaled(reference):
    """1e-12 on values of order 1; relative 1e-12 on larger ones (values reach |R| / (1 - gamma))."""
    return 1e-12 * max(1.0, float(np.abs(reference).max(initial=0.0)))


@settings(max_examples=60, deadline=None)
@given(small_mdps())
def test_planners_agree_on_dense_and_sparse_tables(case):
    P, R, gamma, terminal, rng = case
    dense, sparse = pair(P, R, gamma, terminal=terminal)
    S, A = P.shape[:2]
    np.testing.assert_allclose(sparse.reward_matrix, dense.reward_matrix, rtol=0, atol=1e-12)
    V = rng.normal(size=(2, S))
    np.testing.assert_allclose(q_values(sparse, V), q_values(dense, V), rtol=0, atol=1e-12)
    with warnings.catch_warnings():     # 40 fixed sweeps: no convergence wanted
        warnings.simplefilter("ignore", ConvergenceWarning)
        a, b = value_iteration(dense, tol=0.0, max_iter=40), value_iteration(sparse, tol=0.0, max_iter=40)
    np.testing.assert_allclose(b.q_values, a.q_values, rtol=0, atol=scaled(a.q_values))
    a, b = policy_iteration(dense), policy_iteration(sparse)
    np.testing.assert_allclose(b.values, a.values, rtol=0, atol=scaled(a.values))
    np.testing.assert_array_equal(b.policy, a.policy)
    pi = rng.dirichlet(np.ones(A), size=(3, S))
    ref = policy_evaluation(dense, pi)
    np.testing.assert_allclose(policy_evaluation(sparse, pi), ref, rtol=0, atol=scaled(ref))
    got = policy_evaluation(sparse, pi, solver="iterative", tol=1e-13)
    np.testing.assert_allclose(got, ref, rtol=0, atol=scaled(ref))
    acts = rng.integers(A, size=S)
    ref = policy_evaluation(dense, acts)
    np.testing.assert_allclose(policy_evaluation(sparse, acts), ref, rtol=0, atol=scaled(ref))
    np.testing.assert_allclose(finite_horizon(sparse, 4, discount=1.0).values,
                               finite_horizon(dense, 4, discount=1.0).values, rtol=0, atol=1e-12)
    np.testing.assert_allclose(goal_q_values(sparse, terminal=True), goal_q_values(dense, terminal=True),
                               rtol=0, atol=1e-12)
    ref = expected_return(dense, pi, start=0)
    np.testing.assert_allclose(expected_return(sparse, pi, start=0), ref, rtol=0, atol=scaled(ref))


def test_converged_value_iteration_agrees_and_sparse_batches_plan_per_model():
    rng = np.random.default_rng(3)
    P = sparse_table(rng, 8, 3)
    dense, sparse = pair(P, rng.normal(size=(8, 3, 8)), 0.95)
    a, b = value_iteration(dense), value_iteration(sparse)
    assert abs(a.n_iter - b.n_iter) <= 1
    np.testing.assert_allclose(b.values, a.values, rtol=0, atol=2e-10)
    draws = np.stack([sparse_table(rng, 8, 3) for _ in range(3)])
    as_list = [sp.csr_array(d.reshape(24, 8)) for d in draws]
    rewards = rng.normal(size=(3, 8, 3))
    a = policy_iteration(dense, draws, rewards=rewards)
    b = policy_iteration(sparse, as_list, rewards=rewards)
    np.testing.assert_allclose(b.q_values, a.q_values, rtol=0, atol=1e-12)
    a, b = value_iteration(dense, draws), value_iteration(dense, as_list)
    np.testing.assert_allclose(b.values, a.values, rtol=0, atol=2e-10)
    pi = rng.dirichlet(np.ones(3), size=8)
    np.testing.assert_allclose(policy_evaluation(dense, pi, as_list), policy_evaluation(dense, pi, draws),
                               rtol=0, atol=1e-12)
    np.testing.assert_allclose(finite_horizon(dense, 3, transitions=as_list).q_values,
                               finite_horizon(dense, 3, transitions=draws).q_values, rtol=0, atol=1e-12)
    np.testing.assert_allclose(q_values(dense, np.ones(8), as_list), q_values(dense, np.ones(8), draws),
                               rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="goal planning"):
        goal_q_values(dense, transitions=as_list)
    with pytest.raises(ValueError, match=r"expected shape \(\.\.\., S, A, S\)"):
        value_iteration(dense, sp.csr_array(np.eye(8)))


def test_metrics_on_sparse_models():
    rng = np.random.default_rng(4)
    P = sparse_table(rng, 7, 2)
    dense, sparse = pair(P, rng.normal(size=7), 0.9)
    pi = rng.dirichlet(np.ones(2), size=7)
    opt = policy_iteration(dense).policy
    assert value_loss(sparse, opt, pi) == pytest.approx(value_loss(dense, opt, pi), abs=1e-12)
    assert normalized_return(sparse, pi) == pytest.approx(normalized_return(dense, pi), abs=1e-12)
    Q = sparse_table(rng, 7, 2)
    assert expected_return(dense, pi, transitions=SparseTransitions.from_dense(Q)) == \
        pytest.approx(expected_return(dense, pi, transitions=Q), abs=1e-12)


# ----------------------------------------------------------------------------- the iterative solver
@pytest.mark.parametrize("gamma", [0.9, 0.999])
def test_iterative_evaluation_certifies_its_error_bound(gamma):
    S = 400
    rng = np.random.default_rng(5)
    # a deterministic cycle (the slowest case for Krylov solvers) mixed with random jumps
    rows = np.concatenate([np.arange(S), np.arange(S)])
    cols = np.concatenate([(np.arange(S) + 1) % S, rng.integers(S, size=S)])
    P_pi = sp.csr_array((np.r_[np.full(S, 0.95), np.full(S, 0.05)], (rows, cols)), shape=(S, S))
    r = rng.normal(size=S)
    exact = np.linalg.solve(np.eye(S) - gamma * P_pi.toarray(), r)
    for tol in (1e-6, 1e-11):
        V, bound = solve_policy_values(P_pi, r, gamma, solver="iterative", tol=tol)
        err = np.abs(V - exact).max()
        assert err <= bound + 1e-13 * np.abs(exact).max()
        assert bound <= tol * max(1.0, np.abs(V).max())
    V, bound = solve_policy_values(P_pi, r, gamma, solver="direct")
    assert bound == 0.0 and np.abs(V - exact).max() < 1e-10 * np.abs(exact).max()


def test_solver_arguments_are_checked():
    dense, sparse = pair(sparse_table(np.random.default_rng(0), 3, 2), np.zeros(3))
    with pytest.raises(ValueError, match="solver: expected one of auto, direct, iterative"):
        policy_evaluation(sparse, np.zeros(3, int), solver="cg")
    with pytest.raises(ValueError, match="tol: expected a positive number"):
        policy_iteration(sparse, tol=0.0)


def test_policy_iteration_with_iterative_evaluation_stops_and_matches():
    rng = np.random.default_rng(6)
    P = sparse_table(rng, 30, 4, density=0.2)
    dense, sparse = pair(P, rng.normal(size=(30, 4)), 0.99)
    a = policy_iteration(dense)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        b = policy_iteration(sparse, solver="iterative", tol=1e-12)
    assert b.converged
    np.testing.assert_allclose(b.values, a.values, rtol=0, atol=1e-9)


# ----------------------------------------------------------------------------- rollouts and sampling
def test_sparse_sampling_draws_what_the_dense_inverse_cdf_draws():
    rng = np.random.default_rng(7)
    P = sparse_table(rng, 9, 3, density=0.3)
    T = SparseTransitions.from_dense(P)
    s, a = rng.integers(9, size=5000), rng.integers(3, size=5000)
    u = rng.random(5000)
    u[:20] = 0.0
    dense = inverse_cdf(np.cumsum(P, axis=-1)[s, a], u)
    np.testing.assert_array_equal(T.sample(s, a, u), dense)
    np.testing.assert_array_equal([T.sample(int(x), int(y), float(z)) for x, y, z in zip(s[:300], a[:300], u[:300])],
                                  dense[:300])
    np.testing.assert_array_equal(NextStateSampler(P)(s, a, u), dense)
    assert (P[s, a, T.sample(s, a, u)] > 0).all()
    # the cumulative sums are the dense ones at the non-zeros, bit for bit
    M = T.matrix
    rows = np.repeat(np.arange(27), np.diff(M.indptr))
    np.testing.assert_array_equal(T.row_cdf, np.cumsum(P, axis=-1).reshape(27, 9)[rows, M.indices])


def test_rollouts_are_identical_for_dense_and_sparse_tables():
    rng = np.random.default_rng(8)
    dense, sparse = pair(sparse_table(rng, 12, 3), rng.normal(size=12))
    pi = rng.dirichlet(np.ones(3), size=12)
    a = sample_trajectories(dense, pi, 200, rng=11, n_episodes=5)
    b = sample_trajectories(sparse, pi, 200, rng=11, n_episodes=5)
    for f in ("states", "actions", "next_states", "rewards"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))


def test_sparse_transition_counts():
    rng = np.random.default_rng(9)
    data = (rng.integers(6, size=300), rng.integers(2, size=300), rng.integers(6, size=300))
    dense = transition_counts(data, 6, 2)
    sparse = transition_counts(data, 6, 2, sparse=True)
    assert sparse.shape == (12, 6) and sparse.dtype == np.int64
    np.testing.assert_array_equal(sparse.toarray().reshape(6, 2, 6), dense)


# ----------------------------------------------------------------------------- Hellinger
@settings(max_examples=60, deadline=None)
@given(st.integers(1, 7), st.integers(1, 3), st.integers(0, 2**31 - 1),
       st.sampled_from([0.1, 0.5, 1.0]))
def test_sparse_hellinger_matches_dense(S, A, seed, density):
    rng = np.random.default_rng(seed)
    P, Q = sparse_table(rng, S, A, density), sparse_table(rng, S, A, density)
    ref = hellinger(P, Q)
    TP, TQ = SparseTransitions.from_dense(P), SparseTransitions.from_dense(Q)
    np.testing.assert_allclose(hellinger(TP, TQ), ref, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(hellinger(TP, Q), ref)              # dense formula, bit for bit
    np.testing.assert_array_equal(hellinger(P, TQ), ref)
    np.testing.assert_array_equal(hellinger(TP, Q.reshape(S * A, S)), ref)
    flat = hellinger(sp.csr_array(P.reshape(S * A, S)), sp.csr_array(Q.reshape(S * A, S)))
    np.testing.assert_allclose(flat, ref.ravel(), rtol=0, atol=1e-12)
    assert mean_hellinger(TP, TQ) == pytest.approx(float(ref.mean()), abs=1e-12)


def test_sparse_hellinger_counts_mass_outside_the_truths_support():
    truth = SparseTransitions(sp.csr_array(np.array([[1.0, 0, 0], [0, 1, 0], [0, 0, 1]])))
    est = SparseTransitions(sp.csr_array(np.array([[0.5, 0.5, 0], [0, 0, 1], [0, 0, 1]])))
    np.testing.assert_allclose(hellinger(truth, est).ravel(),
                               [np.sqrt(1 - np.sqrt(0.5)), 1.0, 0.0], rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="axis"):
        hellinger(truth, est, axis=0)
    with pytest.raises(ValueError, match="rows of 3 categories"):
        hellinger(truth, np.ones((2, 3)) / 3)


# ----------------------------------------------------------------------------- transition rewards
def test_sparse_transition_rewards_match_their_dense_table():
    rng = np.random.default_rng(10)
    S, A = 6, 2
    support = rng.random((S, A, S)) < 0.3
    indptr = np.concatenate([[0], np.cumsum(support.reshape(S * A, S).sum(axis=1))])
    r = SparseTransitionRewards(S, A, indptr, np.nonzero(support.reshape(S * A, S))[1],
                                rng.normal(size=int(support.sum())), arrival=rng.normal(size=S),
                                arrival_known=rng.random(S) < 0.5, fallback=rng.normal(size=(S, A)),
                                inert=np.arange(S) == 2)
    dense = r.toarray()
    assert dense.shape == (S, A, S) and (dense[2] == 0).all()
    s, a, s2 = np.meshgrid(np.arange(S), np.arange(A), np.arange(S), indexing="ij")
    np.testing.assert_array_equal(r.values_at(s, a, s2), dense)
    assert r[1, 1, 4] == dense[1, 1, 4]
    np.testing.assert_array_equal(r[3, 0], dense[3, 0])
    P = sparse_table(rng, S, A)
    ref = np.einsum("sat,sat->sa", P, dense)
    np.testing.assert_allclose(r.expected(SparseTransitions.from_dense(P)), ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(r.expected(P), ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(expected_transition_rewards(SparseTransitions.from_dense(P), dense), ref,
                               rtol=0, atol=1e-12)
    mdp = TabularMDP(SparseTransitions.from_dense(P), r, 0.9)
    np.testing.assert_allclose(mdp.reward_matrix, ref, rtol=0, atol=1e-12)
    with pytest.raises(TypeError, match="toarray"):
        np.asarray(r)
    with pytest.raises(ValueError, match="sorted and unique"):
        SparseTransitionRewards(1, 1, [0, 2], [0, 0], [1.0, 2.0])
    round_trip = SparseTransitionRewards.from_dense(dense)
    np.testing.assert_array_equal(round_trip.toarray(), dense)


def test_hellinger_takes_a_beliefs_background_table():
    """hellinger / mean_hellinger read a belief's BackgroundTransitions against a dense or sparse
    truth like the dense computation (the table forced sparse on a small MDP), and at 2,000+
    states, where the beliefs return such tables, without densifying."""
    from corrpriors.applications import CorrelatedTransitionModel, DirichletTransitionModel
    from corrpriors.envs import goal_gridworld

    mdp = goal_gridworld((5, 6), rng=0)
    S, A = mdp.n_states, mdp.n_actions
    rng = np.random.default_rng(0)
    truth = np.asarray(mdp.transitions)
    sparse_truth = SparseTransitions.from_dense(truth)
    for belief in (CorrelatedTransitionModel.for_mdp(mdp, selection="fixed", sparse=True),
                   DirichletTransitionModel(S, A, sparse=True)):
        s, a = rng.integers(S, size=40), rng.integers(A, size=40)
        belief.update(s, a, np.array([rng.choice(S, p=truth[i, j]) for i, j in zip(s, a)]))
        for P in [belief.mean()] + list(belief.sample_many(2, rng=1)):
            ref = hellinger(truth, P.toarray())
            for got in (hellinger(truth, P), hellinger(P, truth), hellinger(sparse_truth, P),
                        hellinger(P, sp.csr_array(truth.reshape(S * A, S)))):
                assert got.shape == (S, A)
                np.testing.assert_allclose(got, ref, rtol=0, atol=1e-10)
            assert mean_hellinger(sparse_truth, P) == pytest.approx(float(ref.mean()), abs=1e-10)
        with pytest.raises(TypeError, match="two tables given as operators"):
            hellinger(belief.mean(), belief.mean())
    big = goal_gridworld((50, 50), rng=0)
    belief = DirichletTransitionModel(big.n_states, big.n_actions)
    belief.update([0, 1, 2], [0, 1, 2], [1, 2, 3])
    P = belief.mean()
    assert not isinstance(P, np.ndarray)
    h = hellinger(big.transitions, P)
    assert h.shape == (big.n_states, big.n_actions) and np.all((h > 0) & (h <= 1))
    assert mean_hellinger(P, big.transitions) == pytest.approx(float(h.mean()), abs=1e-15)


def test_tables_without_a_cell_lookup_are_named():
    """Transition rewards and the Hellinger distance read a table given as an operator through
    entries(rows, cols); one without it is refused, naming the argument and the table's type."""
    from types import SimpleNamespace

    from corrpriors.mdp._sparse import listed_expectation
    from corrpriors.mdp.metrics import operator_hellinger

    blind = SimpleNamespace(n_states=2, n_actions=1)
    with pytest.raises(TypeError, match=r"^transitions: transition rewards .* which SimpleNamespace does not have$"):
        listed_expectation(blind, [0], [1], [1.0])
    with pytest.raises(TypeError, match=r"^p, q: a table given as an operator .* which SimpleNamespace does not have$"):
        operator_hellinger(blind, np.full((2, 1, 2), 0.5))
