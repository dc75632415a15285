"""Public functions of corrpriors.mdp at 10^5 states: a dense array that cannot fit is refused
up front, with one line naming the argument that asks for it and what to use instead, before
anything big is allocated. The budget is set with ``CORRPRIORS_MEMORY_LIMIT`` so that nothing
big is ever allocated here.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import scipy.sparse as sp

from corrpriors._memory import MemoryEstimateError
from corrpriors.mdp import state_action_counts, transition_counts
from memory_checks import traced_peak

S_BIG, A_BIG = 100_000, 4


@pytest.fixture
def budget_4g(monkeypatch):
    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "4G")


def few_transitions(S, A, n=1000, seed=0):
    rng = np.random.default_rng(seed)
    s = rng.integers(S, size=n)
    return s, rng.integers(A, size=n), np.minimum(s + 1, S - 1)


def test_transition_counts_refuses_the_dense_tensor_at_100k_states(budget_4g):
    """The default ``sparse=False`` asked numpy for 8 S^2 A bytes (298 GiB here) and died in a
    MemoryError, or was killed. Now refused before any allocation, pointing at sparse."""
    data = few_transitions(S_BIG, A_BIG)
    start = time.monotonic()

    def refused():
        with pytest.raises(MemoryEstimateError, match=(
                r"^transition_counts\(sparse=False\): the dense \(S, A, S\) int64 counts of 100,000 "
                r"states x 4 actions would need about 298 GiB, more than the 4 GiB this process may "
                r"use \(CORRPRIORS_MEMORY_LIMIT\); pass sparse=True .* or sparse=None")) as info:
            transition_counts(data, S_BIG, A_BIG)
        return info.value

    err, peak = traced_peak(refused)
    assert time.monotonic() - start < 1.0 and peak < 2**20
    assert isinstance(err, ValueError) and "\n" not in str(err)

    for sparse in (True, None):                     # what the message offers works
        counts, peak = traced_peak(transition_counts, data, S_BIG, A_BIG, sparse=sparse)
        assert isinstance(counts, sp.csr_array) and counts.shape == (S_BIG * A_BIG, S_BIG)
        assert counts.sum() == 1000 and peak < 16 * 2**20    # (S A + 1) row pointers: 3.05 MiB


def test_transition_counts_stays_dense_wherever_the_tensor_fits(monkeypatch):
    """No change of type for the sizes that worked: the check refuses exactly above the budget."""
    S, A = 100, 2                                    # 8 x 100 x 2 x 100 = 156 KiB
    data = few_transitions(S, A)
    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "200K")
    dense = transition_counts(data, S, A)
    assert isinstance(dense, np.ndarray) and dense.shape == (S, A, S) and dense.dtype == np.int64
    np.testing.assert_array_equal(dense.reshape(S * A, S), transition_counts(data, S, A, sparse=True).toarray())
    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "150K")
    with pytest.raises(MemoryEstimateError, match=r"about 156 KiB, more than the 150 KiB .*sparse=True"):
        transition_counts(data, S, A)
    auto = transition_counts(data, S, A, sparse=None)      # None: sparse where dense cannot fit
    assert isinstance(auto, sp.csr_array)
    np.testing.assert_array_equal(auto.toarray(), dense.reshape(S * A, S))
    monkeypatch.delenv("CORRPRIORS_MEMORY_LIMIT")
    assert isinstance(transition_counts(data, S, A, sparse=None), np.ndarray)   # 156 KiB < 64 MiB


@pytest.mark.parametrize("fn, data", [(transition_counts, few_transitions(5, 2)),
                                      (state_action_counts, few_transitions(5, 2)[:2])])
@pytest.mark.parametrize("n_states, n_actions, bad", [(0, 2, "n_states"), (5.5, 2, "n_states"),
                                                      ("5", 2, "n_states"), (5, True, "n_actions"),
                                                      (5, -1, "n_actions")])
def test_count_sizes_are_checked_by_name(fn, data, n_states, n_actions, bad):
    with pytest.raises(ValueError, match=rf"^{bad}: expected an integer >= 1, got"):
        fn(data, n_states, n_actions)


def test_state_action_counts_refuses_an_absurd_size(budget_4g):
    """(S, A) is small at 10^5 states (3 MiB); a wrong S of 10^12 is refused, not allocated."""
    data = few_transitions(S_BIG, A_BIG)[:2]
    assert state_action_counts(data, S_BIG, A_BIG).sum() == 1000
    with pytest.raises(MemoryEstimateError, match=r"^state_action_counts: the \(S, A\) int64 counts of "
                                                  r"1,000,000,000,000 states x 4 actions would need about 29\.1 TiB"):
        state_action_counts(data, 10**12, A_BIG)


# ------------------------------------------------------------ S x S arrays of the mdp functions
@pytest.fixture(scope="module")
def big_grid():
    """A goal grid world of 100,172 states (316 x 317, 4 actions, a SparseTransitions table)."""
    from corrpriors.envs import goal_gridworld

    return goal_gridworld((316, 317), rng=0)


def refused_up_front(fn, *args, match, within=2 * 2**20, **kwargs):
    """``fn`` raises MemoryEstimateError (one line, ``match``) in under a second, allocating less
    than ``within`` bytes (2 MiB; the validated inputs may count)."""
    start = time.monotonic()

    def call():
        with pytest.raises(MemoryEstimateError, match=match) as info:
            fn(*args, **kwargs)
        return info.value

    err, peak = traced_peak(call)
    assert time.monotonic() - start < 1.0 and peak < within, (time.monotonic() - start, peak)
    assert isinstance(err, ValueError) and "\n" not in str(err)


def test_emd_of_small_supports_among_100k_states(big_grid):
    """emd built the K x K cost matrix (and a dense (m + n) x m n constraint matrix) before
    looking at the supports: at K = 100,172 a MemoryError for 74.8 GiB. Now the costs and the
    program are those of the supports, with the same value bit for bit."""
    from corrpriors.mdp import emd

    K = big_grid.n_states
    C = np.asarray(big_grid.coordinates, dtype=np.float64)
    p, q = np.zeros(K), np.zeros(K)
    p[[0, 1, 2]], q[[500, 501, 90_000]] = (0.2, 0.3, 0.5), (0.6, 0.3, 0.1)
    sub = [0, 1, 2, 500, 501, 90_000]
    tv, peak = traced_peak(emd, p, q)                 # a few (K,) vectors: 0.8 MiB each
    assert tv == emd(p[sub], q[sub]) == pytest.approx(1.0) and peak < 8 * 2**20
    w, peak = traced_peak(emd, p, q, coordinates=C)
    assert w == emd(p[sub], q[sub], coordinates=C[sub]) and peak < 8 * 2**20


def dense_emd(p, q, D):
    """The reference: the K x K costs and the dense (m + n) x m n constraints of emd before."""
    from scipy.optimize import linprog

    a, b = p / p.sum(), q / q.sum()
    ia, ib = np.flatnonzero(a > 0), np.flatnonzero(b > 0)
    m, n = ia.size, ib.size
    A_eq = np.zeros((m + n, m * n))
    for i in range(m):
        A_eq[i, i * n:(i + 1) * n] = 1.0
    for j in range(n):
        A_eq[m + j, j::n] = 1.0
    return linprog(D[np.ix_(ia, ib)].ravel(), A_eq=A_eq, b_eq=np.concatenate([a[ia], b[ib]]),
                   bounds=(0, None), method="highs").fun


def test_emd_on_the_supports_equals_the_dense_program_bit_for_bit():
    from scipy.spatial.distance import cdist

    from corrpriors.mdp import emd

    rng = np.random.default_rng(0)
    for _ in range(30):
        K = int(rng.integers(2, 40))
        p, q = rng.random(K) * (rng.random(K) < 0.5), rng.random(K) * (rng.random(K) < 0.5)
        p[0], q[-1] = p[0] + 0.1, q[-1] + 0.1
        C, D = rng.normal(size=(K, 2)), rng.random((K, K))
        assert emd(p, q) == dense_emd(p, q, 1.0 - np.eye(K))
        assert emd(p, q, coordinates=C) == dense_emd(p, q, cdist(C, C))
        assert emd(p, q, D) == dense_emd(p, q, D)


def test_emd_refuses_a_program_that_cannot_fit(monkeypatch):
    from corrpriors.mdp import emd
    from corrpriors.mdp.metrics import EMD_BYTES_PER_FLOW

    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "100M")
    p = np.r_[np.ones(300), np.zeros(300)]
    assert EMD_BYTES_PER_FLOW * 300 * 300 > 100 * 2**20
    refused_up_front(emd, p, p[::-1], match=(
        r"^emd: the linear program between supports of 300 and 300 states \(90,000 flows\) would "
        r"need about 112 MiB, more than the 100 MiB .*; p, q: compare distributions with smaller supports"))


def test_grid_distances_and_dense_copies_are_refused_at_100k_states(big_grid, budget_4g):
    from corrpriors.mdp import SparseTransitionRewards, grid_distances

    refused_up_front(grid_distances, big_grid, match=(
        r"^grid_distances: the \(S, S\) distances of 100,172 states would need about 74\.8 GiB, more "
        r"than the 4 GiB .*cdist\(mdp\.coordinates\[rows\], mdp\.coordinates\)"))
    refused_up_front(big_grid.transitions.toarray, match=(
        r"^SparseTransitions\.toarray\(\): the dense \(S, A, S\) copy of 100,172 states x 4 actions "
        r"would need about 299 GiB.*use \.matrix"))
    S, A = big_grid.n_states, big_grid.n_actions
    rewards = SparseTransitionRewards(S, A, np.zeros(S * A + 1, np.int64), [], [])
    refused_up_front(rewards.toarray, match=(
        r"^SparseTransitionRewards\.toarray\(\): the dense \(S, A, S\) table of 100,172 states x 4 "
        r"actions would need about 299 GiB.*values_at"))


def test_dense_copies_and_distances_of_small_problems_are_unchanged(budget_4g):
    from corrpriors.envs import goal_gridworld
    from corrpriors.mdp import SparseTransitionRewards, grid_distances

    mdp = goal_gridworld((5, 6), rng=0, sparse=True)
    assert grid_distances(mdp).shape == (30, 30)
    P = mdp.transitions.toarray()
    assert P.shape == (30, 4, 30) and np.allclose(P.sum(-1), 1.0)
    r = np.random.default_rng(0).random((30, 4, 30))
    np.testing.assert_array_equal(SparseTransitionRewards.from_dense(r).toarray(), r)


def test_goal_q_values_of_every_state_of_100k_states_are_refused(big_grid, budget_4g):
    """The default goals (all S) asked for G x S x A tables: 299 GiB each at 100,172 states."""
    from corrpriors.mdp import goal_q_values

    refused_up_front(goal_q_values, big_grid, match=(
        r"^goal_q_values: 100,172 goals x 100,172 states x 4 actions would need about 2\.04 TiB, more "
        r"than the 4 GiB .*; goals: plan for fewer goal states"))


@pytest.mark.parametrize("sparse, shape", [(False, (10, 10)), (False, (14, 14)), (True, (20, 20))])
def test_goal_q_values_estimate_bounds_what_it_allocates(sparse, shape):
    """The check's estimate (GOAL_TABLES (S, A) tables per goal, and GOAL_DENSE_MATRICES (S, S)
    matrices per goal for a dense table) is within a factor 1.5 above the traced peak."""
    from corrpriors.envs import goal_gridworld
    from corrpriors.mdp import goal_q_values
    from corrpriors.mdp.planning import GOAL_DENSE_MATRICES, GOAL_TABLES

    mdp = goal_gridworld(shape, rng=0, sparse=sparse)
    S, A = mdp.n_states, mdp.n_actions
    _, peak = traced_peak(goal_q_values, mdp)
    estimate = 8.0 * S * S * (GOAL_TABLES * A + (0 if sparse else GOAL_DENSE_MATRICES * S))
    assert peak < estimate < 1.5 * peak, (peak, estimate)


# ------------------------------------------------ sizes chosen by the user: horizon, steps, batch
def test_finite_horizon_sample_trajectories_refuse_what_cannot_fit(big_grid, budget_4g):
    """Linear in S but multiplied by the user's horizon / steps: 10,000 steps of backward
    induction on 100,172 states held 97 GiB of Q-values and policies, found out at the end."""
    from corrpriors.mdp import finite_horizon, sample_trajectories

    refused_up_front(finite_horizon, big_grid, 10_000, match=(
        r"^finite_horizon: 10,000 steps x 1 model\(s\) x 100,172 states x 4 actions \(.*\) would need "
        r"about 97 GiB, more than the 4 GiB .*; horizon: plan over fewer steps"))
    uniform = np.full((big_grid.n_states, 4), 0.25)
    refused_up_front(sample_trajectories, big_grid, uniform, 10**9, rng=0, match=(
        r"^sample_trajectories: 1 episodes x 1,000,000,000 steps would need about 37\.3 GiB.*; "
        r"n_steps, n_episodes: sample fewer steps at a time"), within=8 * 2**20)   # the policy: 3 MiB
    assert finite_horizon(big_grid, 3).q_values.shape == (3, big_grid.n_states, 4)   # as before
    assert sample_trajectories(big_grid, uniform, 100, rng=0, n_episodes=3).states.shape == (3, 100)


def test_policy_evaluation_refuses_a_dense_batch_that_cannot_fit(monkeypatch):
    """A dense table's (S, S) systems, one per policy: 40 policies on 400 states need 147 MiB."""
    from corrpriors.envs import goal_gridworld
    from corrpriors.mdp import policy_evaluation

    mdp = goal_gridworld((20, 20), rng=0, sparse=False)
    pi = np.random.default_rng(0).dirichlet(np.ones(4), size=(40, 400))
    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "100M")
    refused_up_front(policy_evaluation, mdp, pi, match=(
        r"^policy_evaluation: 40 dense \(S, S\) systems of 400 states would need about 148 MiB, "
        r"more than the 100 MiB .*; policy: evaluate fewer policies .* SparseTransitions"))
    expected = policy_evaluation(mdp, pi[:10])                   # 10 at a time: 37.8 MiB
    np.testing.assert_allclose(expected[3], policy_evaluation(mdp, pi[3]), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape", [(10, 10), (20, 20)])
def test_estimates_of_horizon_rollout_and_evaluation_track_the_traced_peak(shape):
    """HORIZON_TABLES, ROLLOUT_ARRAYS and EVALUATION_MATRICES give estimates within [0.75, 1.5]
    times what the calls allocate (tracemalloc)."""
    from corrpriors.envs import goal_gridworld
    from corrpriors.mdp import finite_horizon, policy_evaluation, sample_trajectories
    from corrpriors.mdp.planning import EVALUATION_MATRICES, HORIZON_TABLES
    from corrpriors.mdp.rollout import ROLLOUT_ARRAYS

    mdp = goal_gridworld(shape, rng=0, sparse=False)
    S, A = mdp.n_states, mdp.n_actions
    pi = np.random.default_rng(0).dirichlet(np.ones(A), size=(20, S))
    for (fn, args, kwargs), estimate in [
            ((finite_horizon, (mdp, 200), {}), 8.0 * 200 * S * (HORIZON_TABLES * A + 1)),
            ((sample_trajectories, (mdp, pi[0], 2000), {"rng": 0, "n_episodes": 50}),
             8.0 * ROLLOUT_ARRAYS * 50 * 2000 + 8.0 * S * A * S),   # and the table's CDF
            ((policy_evaluation, (mdp, pi), {}), 8.0 * S * S * (EVALUATION_MATRICES * 20 + 1))]:
        _, peak = traced_peak(fn, *args, **kwargs)
        assert 0.75 * peak < estimate < 1.5 * peak, (fn.__name__, peak, estimate)
