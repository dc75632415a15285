"""Sparse count storage, window category maps and sparse transition tables against the dense
(S, S) implementations on small problems (identity, displacement and censored maps, far jumps).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from corrpriors.applications.transitions import (
    CorrelatedTransitionModel,
    DirichletTransitionModel,
    displacement_category_map,
    identity_category_map,
)
from corrpriors.applications.transitions._categories import _nearest_first
from corrpriors.applications.transitions._window import (
    aggregate_pairs,
    far_destinations_pairs,
    impute_pairs,
    next_state_tables,
    window_category_map,
)


def grid_coords(rows: int, cols: int) -> np.ndarray:
    r, c = np.divmod(np.arange(rows * cols), cols)
    return np.stack([r, c], axis=1)


def random_counts(S: int, rng: np.random.Generator, far: int = 3) -> np.ndarray:
    """Counts of one action: moves to grid neighbours plus a few far jumps."""
    coords = grid_coords(*_shape(S))
    counts = np.zeros((S, S))
    for s in range(S):
        near = np.flatnonzero(np.abs(coords - coords[s]).max(axis=1) <= 1)
        for s2 in rng.choice(near, size=3):
            counts[s, s2] += rng.integers(0, 4)
    for _ in range(far):
        counts[rng.integers(S), rng.integers(S)] += rng.integers(1, 3)
    return counts


def _shape(S: int) -> tuple[int, int]:
    return {20: (4, 5), 30: (5, 6), 12: (3, 4)}[S]


MAPS = [("exclude", "lexicographic"), ("exclude", "nearest"), ("stay", "nearest"),
        ("clip", "lexicographic")]


def dense_map(S, boundary, order, pooling=0.0):
    coords = grid_coords(*_shape(S))
    cmap = displacement_category_map(coords, 1, boundary=boundary, other_pooling=pooling)
    return _nearest_first(cmap, 2, 1) if order == "nearest" else cmap


@pytest.mark.parametrize("boundary, order", MAPS)
def test_window_map_is_the_displacement_map(boundary, order):
    S = 20
    dense = dense_map(S, boundary, order)
    window = window_category_map(grid_coords(4, 5), 1, boundary=boundary, order=order)
    back = window.to_dense()
    np.testing.assert_array_equal(back.category, dense.category)
    np.testing.assert_array_equal(back.valid, dense.valid)
    np.testing.assert_array_equal(window.valid, dense.valid)
    assert type(back) is type(dense)
    if boundary != "exclude":
        np.testing.assert_array_equal(back.destination, dense.destination)


@pytest.mark.parametrize("boundary, order", MAPS)
def test_pair_algebra_matches_dense_methods(boundary, order):
    rng = np.random.default_rng(3)
    S = 30
    coords = grid_coords(5, 6)
    dense = dense_map(S, boundary, order, pooling=1.0)
    window = window_category_map(coords, 1, boundary=boundary, order=order, other_pooling=1.0)
    counts = random_counts(S, rng)
    s, s2 = np.nonzero(counts)
    n = counts[s, s2]
    for cmap in (dense, window):
        np.testing.assert_array_equal(aggregate_pairs(cmap, s, s2, n), dense.aggregate(counts))
        np.testing.assert_array_equal(far_destinations_pairs(cmap, s, s2, n),
                                      dense.far_destinations(counts))
    q = rng.dirichlet(np.ones(dense.n_categories), size=S)
    if boundary != "exclude":
        for cmap in (dense, window):
            np.testing.assert_array_equal(impute_pairs(cmap, s, s2, n, q), dense.impute(counts, q))
    pooled = dense.far_destinations(counts)
    expected = dense.next_state_probs(q, dense.other_weights(counts, pooled))
    for cmap in (dense, window):
        table = next_state_tables(cmap, q[None], [(s, s2, n)], pooled)
        np.testing.assert_allclose(table.toarray()[:, 0, :], expected, rtol=0, atol=1e-15)
        np.testing.assert_allclose(table.row_sums(), 1.0, atol=1e-12)
        v = rng.standard_normal((S, 2))
        np.testing.assert_allclose(table.expect(v)[:, 0], expected @ v, rtol=1e-12, atol=1e-14)
        rows, cols = rng.integers(S, size=50), rng.integers(S, size=50)
        np.testing.assert_allclose(table.entries(rows, cols), expected[rows, cols],
                                   rtol=1e-13, atol=1e-16)
        truth = rng.dirichlet(np.full(S, 0.3), size=S)
        truth[truth < 0.02] = 0.0
        truth /= truth.sum(axis=1, keepdims=True)
        hell = np.sqrt(0.5 * ((np.sqrt(expected) - np.sqrt(truth)) ** 2).sum(axis=1))
        np.testing.assert_allclose(table.hellinger_to(sp.csr_array(truth))[:, 0], hell,
                                   rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(table.hellinger_to(truth[:, None, :])[:, 0], hell,
                                   rtol=1e-10, atol=1e-12)
        from corrpriors.mdp import SparseTransitions

        np.testing.assert_allclose(
            table.hellinger_to(SparseTransitions(sp.csr_array(truth)))[:, 0], hell,
            rtol=1e-10, atol=1e-12)


def test_tables_without_pooling_and_identity_map():
    rng = np.random.default_rng(4)
    S = 12
    cmap = dense_map(S, "exclude", "lexicographic")
    counts = random_counts(S, rng)
    s, s2 = np.nonzero(counts)
    q = rng.dirichlet(np.ones(cmap.n_categories), size=(2, S))
    table = next_state_tables(cmap, q, [(s, s2, counts[s, s2])] * 2, None)
    for a in range(2):
        np.testing.assert_allclose(table.toarray()[:, a],
                                   cmap.next_state_probs(q[a], cmap.other_weights(counts)),
                                   atol=1e-15)
    ident = identity_category_map(S)
    qi = rng.dirichlet(np.ones(S), size=(1, S))
    table = next_state_tables(ident, qi, [(s, s2, counts[s, s2])], None)
    np.testing.assert_allclose(table.toarray()[:, 0], qi[0], atol=1e-15)


@pytest.mark.parametrize("boundary", ["exclude", "stay"])
def test_sparse_model_matches_dense_model(boundary):
    """The same belief with dense and with sparse storage: counts, category counts, fits,
    means and draws agree (means and draws to 1e-12; fits on equal category counts)."""
    rng = np.random.default_rng(5)
    S, A = 30, 2
    coords = grid_coords(5, 6)
    cmap = dense_map(S, boundary, "nearest", pooling=1.0)
    window = window_category_map(coords, 1, boundary=boundary, order="nearest",
                                 other_pooling=1.0)
    kw = dict(precision=None, covariance=np.exp(-0.5 * ((coords[:, None] - coords[None]) ** 2)
                                                .sum(-1)) + 1e-6 * np.eye(S),
              selection=None, learn_scale=False, scale=1.0, max_iter=30)
    dense = CorrelatedTransitionModel(S, A, category_map=cmap, sparse=False, **kw)
    sparse = CorrelatedTransitionModel(S, A, category_map=window, sparse=True, **kw)
    for _ in range(2):
        s, a, s2 = rng.integers(S, size=60), rng.integers(A, size=60), rng.integers(S, size=60)
        near = rng.random(60) < 0.9
        s2 = np.where(near, np.clip(s + rng.integers(-1, 2, 60), 0, S - 1), s2)
        dense.update(s, a, s2)
        sparse.update(s, a, s2)
    np.testing.assert_array_equal(sparse.counts.toarray().reshape(S, A, S), dense.counts)
    np.testing.assert_array_equal(sparse._far, dense._far)
    dense.refit()
    sparse.refit()
    for md, ms in zip(dense.models_, sparse.models_):
        np.testing.assert_array_equal(md.psi_mean_, ms.psi_mean_)
    mean = sparse.mean()
    np.testing.assert_allclose(mean.toarray(), dense.mean(), rtol=0, atol=1e-12)
    draws_s = sparse.sample_many(2, rng=np.random.default_rng(9))
    draws_d = dense.sample_many(2, rng=np.random.default_rng(9))
    for m in range(2):
        np.testing.assert_allclose(draws_s[m].toarray(), draws_d[m], rtol=0, atol=1e-12)
    np.testing.assert_allclose(sparse.action_mean(1).toarray()[:, 0], dense.action_mean(1),
                               atol=1e-12)


def test_sparse_counts_storage_and_set_counts():
    rng = np.random.default_rng(6)
    S, A = 12, 3
    dense = DirichletTransitionModel(S, A, sparse=False)
    sparse = DirichletTransitionModel(S, A, sparse=True)
    for _ in range(3):
        s, a, s2 = rng.integers(S, size=40), rng.integers(A, size=40), rng.integers(S, size=40)
        dense.update(s, a, s2)
        sparse.update(s, a, s2)
    np.testing.assert_array_equal(sparse.counts.toarray(), dense.counts.reshape(S * A, S))
    np.testing.assert_allclose(sparse.mean().toarray(), dense.mean(), rtol=0, atol=1e-15)
    sparse.set_counts(dense.counts)
    np.testing.assert_array_equal(sparse.counts.toarray(), dense.counts.reshape(S * A, S))
    sparse.set_counts(sparse.counts)       # a sparse (S A, S) table is accepted too
    np.testing.assert_array_equal(sparse.counts.toarray(), dense.counts.reshape(S * A, S))
    with pytest.raises(ValueError, match="sparse"):
        DirichletTransitionModel(S, A, sparse="yes")


@pytest.mark.parametrize("variant", ["sampling", "mean"])
def test_psrl_plans_sparse_tables_like_dense_ones(variant):
    """The agent's sparse path (plan_sparse on BackgroundTransitions draws) gives the Q-values of
    the dense path (policy_iteration on (S, A, S) draws), with terminal states."""
    from corrpriors.applications import PSRLAgent

    rng = np.random.default_rng(8)
    S, A = 20, 2
    coords = grid_coords(4, 5)
    cmap = dense_map(S, "stay", "nearest", pooling=1.0)
    window = window_category_map(coords, 1, boundary="stay", order="nearest", other_pooling=1.0)
    kw = dict(covariance=np.exp(-0.5 * ((coords[:, None] - coords[None]) ** 2).sum(-1))
              + 1e-6 * np.eye(S), learn_scale=False, scale=1.0, max_iter=30)
    rewards = rng.standard_normal((S, A))
    agents = [PSRLAgent(CorrelatedTransitionModel(S, A, category_map=m, sparse=sp_, **kw),
                        rewards, 0.9, variant=variant, n_samples=3, terminal=term)
              for m, sp_ in ((cmap, False), (window, True))
              for term in [np.arange(S) == S - 1]]
    s, a, s2 = rng.integers(S, size=80), rng.integers(A, size=80), rng.integers(S, size=80)
    s2 = np.where(rng.random(80) < 0.9, np.clip(s + rng.integers(-1, 2, 80), 0, S - 1), s2)
    for agent in agents:
        agent.belief.update(s, a, s2)
        agent.plan(rng=np.random.default_rng(1))
    dense, sparse = agents
    np.testing.assert_allclose(sparse.q_values_, dense.q_values_, rtol=1e-8, atol=1e-8)
    np.testing.assert_array_equal(sparse.policy_, dense.policy_)


def test_sparse_tables_sample_next_states_by_their_probabilities():
    rng = np.random.default_rng(12)
    S = 12
    cmap = dense_map(S, "exclude", "lexicographic", pooling=1.0)
    counts = random_counts(S, rng, far=6)
    s, s2 = np.nonzero(counts)
    q = rng.dirichlet(np.ones(cmap.n_categories) * 0.5, size=(1, S))
    table = next_state_tables(cmap, q, [(s, s2, counts[s, s2])], cmap.far_destinations(counts))
    P = table.toarray()[:, 0]
    n = 20000
    draws = table.sample_next(np.full(n, 3), np.zeros(n, dtype=int), rng=rng)
    freq = np.bincount(draws, minlength=S) / n
    se = np.sqrt(P[3] * (1 - P[3]) / n)
    assert np.all(np.abs(freq - P[3]) <= 5 * se + 1e-12)


def test_psrl_sparse_transition_rewards_match_dense_ones():
    import scipy.sparse as sp

    from corrpriors.applications import PSRLAgent

    rng = np.random.default_rng(13)
    S, A = 12, 2
    cmap = dense_map(S, "exclude", "lexicographic", pooling=1.0)
    window = window_category_map(grid_coords(3, 4), 1, other_pooling=1.0)
    coords = grid_coords(3, 4)
    kw = dict(covariance=np.exp(-0.5 * ((coords[:, None] - coords[None]) ** 2).sum(-1))
              + 1e-6 * np.eye(S), learn_scale=False, scale=1.0, max_iter=30)
    r = np.zeros((S, A, S))
    r[:, :, 5] = 1.0
    r[:, 1, 7] = -0.5
    dense = PSRLAgent(CorrelatedTransitionModel(S, A, category_map=cmap, sparse=False, **kw),
                      r, 0.9, variant="mean")
    sparse = PSRLAgent(CorrelatedTransitionModel(S, A, category_map=window, sparse=True, **kw),
                       sp.csr_array(r.reshape(S * A, S)), 0.9, variant="mean")
    s, a, s2 = rng.integers(S, size=50), rng.integers(A, size=50), rng.integers(S, size=50)
    for agent in (dense, sparse):
        agent.belief.update(s, a, s2)
        agent.plan(rng=0)
    np.testing.assert_allclose(sparse.q_values_, dense.q_values_, rtol=1e-8, atol=1e-9)
    with pytest.raises(ValueError, match="sparse table of transition rewards"):
        PSRLAgent(dense.belief, sp.csr_array(r.reshape(S * A, S)), 0.9)


def _two_action_table(rng: np.random.Generator, S: int = 20):
    """A BackgroundTransitions with two actions (sparse part plus background profiles)."""
    import dataclasses

    cmap = dense_map(S, "exclude", "lexicographic", pooling=1.0)
    both = [random_counts(S, rng, far=6) for _ in range(2)]
    far = cmap.far_destinations(both[0] + both[1])      # one excluded pattern for the actions
    tables = []
    for counts in both:
        s, s2 = np.nonzero(counts)
        q = rng.dirichlet(np.ones(cmap.n_categories) * 0.5, size=(1, S))
        tables.append(next_state_tables(cmap, q, [(s, s2, counts[s, s2])], far))
    t0, t1 = tables
    A = 2
    order = np.arange(2 * S).reshape(A, S).T.ravel()      # rows s * A + a
    table = sp.csr_array(sp.vstack([t0.table, t1.table])[order])
    background = np.vstack([t0.background, t1.background])[order]
    return dataclasses.replace(t0, table=table, background=background, n_actions=A)


@pytest.mark.parametrize("terminal", [False, True])
def test_operator_policy_iteration_is_the_dense_planner(terminal):
    """policy_iteration_operator / plan_sparse on a BackgroundTransitions give the values, Q-values
    and policy of policy_iteration on its dense (S, A, S) table (the dense LU oracle)."""
    from corrpriors.applications import plan_sparse
    from corrpriors.mdp import TabularMDP, policy_iteration, policy_iteration_operator

    rng = np.random.default_rng(21)
    table = _two_action_table(rng)
    S, A = table.n_states, table.n_actions
    P = table.toarray()
    np.testing.assert_allclose(P.sum(axis=2), 1.0, atol=1e-12)
    R = rng.standard_normal((S, A))
    term = (np.arange(S) % 7 == 3) if terminal else None
    dense = policy_iteration(TabularMDP(P, R, 0.9, terminal=term))
    for res in (policy_iteration_operator(table, R, 0.9, terminal=term, tol=1e-12),
                plan_sparse(table, R, 0.9, terminal=term, tol=1e-12,
                            initial_policy=np.zeros(S, dtype=int))):
        assert res.converged
        np.testing.assert_allclose(res.values, dense.values, rtol=0, atol=1e-9)
        np.testing.assert_allclose(res.q_values, dense.q_values, rtol=0, atol=1e-9)
        np.testing.assert_array_equal(res.policy, dense.policy)


def test_background_policy_matrix_is_the_dense_policy_matrix():
    """P_pi of deterministic and stochastic policies, with terminal rows, against the dense table."""
    rng = np.random.default_rng(22)
    table = _two_action_table(rng)
    S, A = table.n_states, table.n_actions
    P = table.toarray()
    keep = (np.arange(S) % 5 != 0).astype(float)
    v = rng.standard_normal(S)
    for pi in (np.eye(A)[rng.integers(A, size=S)], rng.dirichlet(np.ones(A), size=S)):
        want = keep * np.einsum("sa,sat,t->s", pi, P, v)
        np.testing.assert_allclose(table.policy_matrix(pi, keep) @ v, want, atol=1e-13)
    with pytest.raises(ValueError, match="policy"):
        table.policy_matrix(np.ones((S, A + 1)))


def test_operator_planner_rejects_bad_input():
    from corrpriors.mdp import policy_iteration_operator
    from corrpriors.mdp._sparse_solve import solve_policy_values

    table = _two_action_table(np.random.default_rng(23))
    S = table.n_states
    with pytest.raises(TypeError, match="transitions"):
        policy_iteration_operator(np.ones((S, 2, S)) / S, np.zeros(S), 0.9)
    with pytest.raises(ValueError, match="rewards"):
        policy_iteration_operator(table, np.zeros((S, 3)), 0.9)
    with pytest.raises(ValueError, match="discount"):
        policy_iteration_operator(table, np.zeros(S), 1.0)
    with pytest.raises(ValueError, match="terminal"):
        policy_iteration_operator(table, np.zeros(S), 0.9, terminal=np.zeros(S))
    with pytest.raises(ValueError, match="initial_values"):
        policy_iteration_operator(table, np.zeros(S), 0.9, initial_values=np.zeros(S + 1))
    with pytest.raises(ValueError, match="direct"):
        solve_policy_values(table.policy_matrix(np.eye(2)[np.zeros(S, dtype=int)]),
                            np.zeros(S), 0.9, solver="direct")


@pytest.mark.parametrize("n_actions", [1, 4])
def test_sparse_counts_keep_their_cells_up_to_the_largest_keyable_state_count(n_actions):
    """Sparse counts key a cell (s, a, s') by (a S + s) S + s' in int64. Beyond A S^2 = 2^63 - 1
    (S = 1,518,500,250 with 4 actions) the keys wrapped around: with S = 2e9 the transitions of
    actions 0-2 were lost and action 3 raised OverflowError; such sizes are refused, naming
    n_states. At the largest S that fits, cells at the far corner come back exactly, with few
    entries (nothing of size S is allocated by updates)."""
    import math

    S = math.isqrt((2**63 - 1) // n_actions)
    a = n_actions - 1
    belief = DirichletTransitionModel(S, n_actions, sparse=True)
    belief.update([S - 1, 5, S - 1], [a, a, 0], [S - 1, 7, 3])
    s, s2, c = belief._action_pairs(a)
    np.testing.assert_array_equal(s, [5, S - 1] if a else [5, S - 1, S - 1])
    np.testing.assert_array_equal(s2, [7, S - 1] if a else [7, 3, S - 1])
    assert belief._keys.max() == n_actions * S * S - 1
    with pytest.raises(ValueError, match=rf"^n_states: expected at most {S:,} states with {n_actions} "
                                         rf"action.*64-bit integers\), got {S + 1:,}"):
        DirichletTransitionModel(S + 1, n_actions, sparse=True)


def test_unsigned_indices_give_the_cells_of_signed_ones():
    """uint64 indices made the keys float64 (uint64 + int64), rounding them: at S = 1e9 an
    observed transition was stored in another cell."""
    S = 10**9
    signed, unsigned = (DirichletTransitionModel(S, 4, sparse=True) for _ in range(2))
    signed.update([S - 1, 3], [3, 1], [S - 3, 4])
    unsigned.update(np.array([S - 1, 3], dtype=np.uint64), np.array([3, 1], dtype=np.uint8),
                    np.array([S - 3, 4], dtype=np.uint64))
    np.testing.assert_array_equal(unsigned._keys, signed._keys)
    np.testing.assert_array_equal(np.concatenate(unsigned._action_pairs(3)), [S - 1, S - 3, 1.0])


def test_sparse_transition_rewards_refuse_sizes_without_cell_keys():
    from corrpriors.mdp import SparseTransitionRewards

    with pytest.raises(ValueError, match=r"^n_states: expected at most 1,518,500,249 states with 4 actions"):
        SparseTransitionRewards(1_518_500_250, 4, [0, 0], [], [])     # refused before indptr is read
