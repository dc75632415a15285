"""Tests for corrpriors.applications.transitions (category maps and transition beliefs)."""

from __future__ import annotations

import itertools

import gymnasium
import numpy as np
import pytest

from corrpriors.applications.transitions import (
    CategoryMap,
    CorrelatedTransitionModel,
    DirichletTransitionModel,
    KnownTransitionModel,
    displacement_category_map,
    identity_category_map,
    window_displacements,
)


def grid_coords(n):
    return np.array(list(itertools.product(range(n), range(n))))


def random_P(rng, S, A, sparsity=None):
    P = rng.random((S, A, S)) ** 4
    if sparsity is not None:
        P = P * (rng.random((S, A, S)) < sparsity)
        P[..., 0] += 1e-3
    return P / P.sum(-1, keepdims=True)


# ---------------------------------------------------------------- category maps
def test_identity_map_is_trivial_round_trip():
    rng = np.random.default_rng(0)
    cmap = identity_category_map(6)
    assert cmap.n_categories == 6 and not cmap.has_other and cmap.is_identity
    P = random_P(rng, 6, 2).transpose(1, 0, 2)               # (A, S, S)
    np.testing.assert_array_equal(cmap.aggregate(P), P)
    np.testing.assert_allclose(cmap.next_state_probs(P), P, atol=1e-15)


def test_displacement_map_structure_on_grid():
    coords = grid_coords(4)
    cmap = displacement_category_map(coords, radius=1)
    assert cmap.n_window == 9 and cmap.has_other and cmap.n_categories == 10
    disp = window_displacements(2, 1)
    # brute-force oracle of category and validity
    for s, s2 in itertools.product(range(16), repeat=2):
        d = coords[s2] - coords[s]
        if np.abs(d).max() <= 1:
            k = int(np.flatnonzero((disp == d).all(axis=1))[0])
            assert cmap.category[s, s2] == k and cmap.index[s, s2] == k
            assert cmap.valid[s, k]
        else:
            assert cmap.category[s, s2] == -1 and cmap.index[s, s2] == 9
    # corner (0, 0): only displacements with non-negative components are valid
    nonneg = (disp >= 0).all(axis=1)
    np.testing.assert_array_equal(cmap.valid[0, :9], nonneg)
    assert cmap.valid[:, 9].all()         # every cell of a 4x4 grid has far-away cells


def test_aggregate_matches_loop_oracle_and_conserves_counts():
    rng = np.random.default_rng(1)
    cmap = displacement_category_map(grid_coords(5), radius=1)
    counts = rng.integers(0, 5, size=(3, 25, 25)).astype(float)
    agg = cmap.aggregate(counts)
    oracle = np.zeros((3, 25, cmap.n_categories))
    for a, s, s2 in itertools.product(range(3), range(25), range(25)):
        oracle[a, s, cmap.index[s, s2]] += counts[a, s, s2]
    np.testing.assert_array_equal(agg, oracle)
    np.testing.assert_array_equal(agg.sum(-1), counts.sum(-1))


def test_round_trip_next_states_categories_next_states():
    rng = np.random.default_rng(2)
    cmap = displacement_category_map(grid_coords(5), radius=1)
    P = random_P(rng, 25, 4).transpose(1, 0, 2)              # (A, S, S) dense, incl. far jumps
    q = cmap.aggregate(P)
    far = np.where(cmap.outside, P, 0.0)
    w = far / far.sum(-1, keepdims=True)
    np.testing.assert_allclose(cmap.next_state_probs(q, w), P, atol=1e-14)


def test_mass_conservation_with_mass_on_structural_zeros():
    rng = np.random.default_rng(3)
    cmap = displacement_category_map(grid_coords(4), radius=1)
    q = rng.dirichlet(np.ones(cmap.n_categories), size=(7, 16))
    P = cmap.next_state_probs(q)
    assert (P >= 0).all()
    np.testing.assert_allclose(P.sum(-1), 1.0, atol=1e-12)
    # renormalisation: within-window entries are q / (sum of valid q)
    z = (q * cmap.valid).sum(-1)
    s, s2 = 5, 6                                              # a right-neighbour move
    np.testing.assert_allclose(P[:, s, s2], q[:, s, cmap.category[s, s2]] / z[:, s])
    # "other" mass uniform over the outside states without data
    n_out = cmap.outside[s].sum()
    np.testing.assert_allclose(P[:, s, cmap.outside[s]],
                               np.repeat((q[:, s, -1] / z[:, s])[:, None], n_out, 1) / n_out)


def test_other_weights_follow_observed_jumps():
    cmap = displacement_category_map(grid_coords(4), radius=1, other_prior=0.01)
    counts = np.zeros((16, 16))
    counts[15, 0] = 3.0                                       # goal -> start jump
    w = cmap.other_weights(counts)
    n_out = cmap.outside[15].sum()
    np.testing.assert_allclose(w[15, 0], 3.01 / (3.0 + 0.01 * n_out))
    np.testing.assert_allclose(w[15, 1], 0.01 / (3.0 + 0.01 * n_out))   # far, unobserved
    np.testing.assert_allclose(w.sum(-1), 1.0)
    assert (w[~cmap.outside] == 0).all()


def test_displacement_map_queue_like_changes_and_radius_covering_everything():
    coords = grid_coords(3)                                  # queue lengths 0..2
    cmap = displacement_category_map(coords, radius=2)
    assert not cmap.has_other and cmap.n_categories == 25
    rng = np.random.default_rng(4)
    P = random_P(rng, 9, 2).transpose(1, 0, 2)
    np.testing.assert_allclose(cmap.next_state_probs(cmap.aggregate(P)), P, atol=1e-14)


def test_category_map_validation():
    with pytest.raises(ValueError, match="category: expected shape"):
        CategoryMap(np.zeros((2, 3), dtype=int))
    with pytest.raises(ValueError, match="one-to-one"):
        CategoryMap(np.array([[0, 0], [0, 1]]))
    with pytest.raises(ValueError, match="radius"):
        displacement_category_map(grid_coords(3), radius=0)
    with pytest.raises(ValueError, match="distinct"):
        displacement_category_map(np.zeros((3, 2), dtype=int), radius=1)
    with pytest.raises(ValueError, match="q: expected shape"):
        identity_category_map(3).next_state_probs(np.ones((3, 4)) / 4)


# ---------------------------------------------------------------- beliefs
def test_update_matches_loop_and_set_counts():
    rng = np.random.default_rng(5)
    S, A, T = 6, 3, 200
    s, a, s2 = rng.integers(0, S, T), rng.integers(0, A, T), rng.integers(0, S, T)
    m = DirichletTransitionModel(S, A).update(s[:50], a[:50], s2[:50]).update(s[50:], a[50:], s2[50:])
    oracle = np.zeros((S, A, S))
    for i in range(T):
        oracle[s[i], a[i], s2[i]] += 1
    np.testing.assert_array_equal(m.counts, oracle)
    m2 = DirichletTransitionModel(S, A).set_counts(oracle)
    np.testing.assert_array_equal(m2.mean(), m.mean())
    with pytest.raises(ValueError, match="states"):
        m.update([S], [0], [0])
    with pytest.raises(ValueError, match="counts"):
        m.set_counts(np.zeros((S, A)))


def test_dirichlet_mean_closed_form_and_sample_moments():
    rng = np.random.default_rng(6)
    S, A = 4, 2
    counts = rng.integers(0, 6, size=(S, A, S))
    m = DirichletTransitionModel(S, A, alpha=0.5).set_counts(counts)
    post = counts + 0.5
    np.testing.assert_allclose(m.mean(), post / post.sum(-1, keepdims=True))
    draws = m.sample_many(20000, rng=rng)
    assert draws.shape == (20000, S, A, S)
    a0 = post.sum(-1, keepdims=True)
    mean = post / a0
    se = np.sqrt(mean * (1 - mean) / (a0 + 1) / 20000)
    assert np.all(np.abs(draws.mean(0) - mean) < 5 * se + 1e-12)


def test_dirichlet_sparse_draws_are_valid_and_reproducible():
    m = DirichletTransitionModel(5, 2, alpha=1e-3)
    d1 = m.sample_many(50, rng=np.random.default_rng(7))
    d2 = m.sample_many(50, rng=np.random.default_rng(7))
    d3 = m.sample_many(50, rng=np.random.default_rng(8))
    assert np.all(np.isfinite(d1)) and (d1 >= 0).all()
    np.testing.assert_allclose(d1.sum(-1), 1.0)
    np.testing.assert_array_equal(d1, d2)
    assert not np.array_equal(d1, d3)
    # tiny concentration: draws are (nearly) one-hot
    assert np.mean(d1.max(-1) > 0.99) > 0.9
    assert m.sample(rng=0).shape == (5, 2, 5)


def test_known_model():
    rng = np.random.default_rng(9)
    P = random_P(rng, 5, 2)
    m = KnownTransitionModel(P)
    m.update([0, 1], [1, 1], [2, 3])
    np.testing.assert_array_equal(m.mean(), P)
    np.testing.assert_array_equal(m.sample_many(3, rng=rng), np.stack([P] * 3))
    with pytest.raises(ValueError, match="P"):
        KnownTransitionModel(np.ones((3, 2, 3)))


@pytest.mark.parametrize("n", [float("nan"), float("inf"), 2.5, 0, True, "3", None])
@pytest.mark.parametrize("sparse", [False, True])
def test_sample_many_refuses_a_bad_number_of_draws_naming_n(n, sparse):
    """``int(n) != n`` gave Python's own "cannot convert float NaN to integer" (and a TypeError
    for a string); every bad ``n`` is now one ValueError naming the argument."""
    rng = np.random.default_rng(9)
    models = [DirichletTransitionModel(5, 2, sparse=sparse)]
    models += [] if sparse else [KnownTransitionModel(random_P(rng, 5, 2))]
    for m in models:
        with pytest.raises(ValueError, match=r"^n: expected an integer >= 1, got "):
            m.sample_many(n, rng=0)


# ---------------------------------------------------------------- correlated belief
def se_cov(coords, ell):
    d2 = ((coords[:, None, :] - coords[None, :, :]) ** 2).sum(-1)
    return np.exp(-0.5 * d2 / ell ** 2)


def right_mover(n):
    """n x n grid, both actions move one cell right (stay at the right edge)."""
    coords = grid_coords(n)
    S = n * n
    P = np.zeros((S, 2, S))
    for s, (r, c) in enumerate(coords):
        P[s, :, r * n + min(c + 1, n - 1)] = 1.0
    return coords, P


@pytest.fixture(scope="module")
def fitted_relative():
    from corrpriors.applications.transitions import CorrelatedTransitionModel

    coords, P = right_mover(4)
    cmap = displacement_category_map(coords, radius=1)
    m = CorrelatedTransitionModel(16, 2, se_cov(coords.astype(float), 3.0), category_map=cmap,
                                  max_iter=200, tol=1e-6)
    counts = np.zeros((16, 2, 16))
    observed = [0, 1, 4, 5]                                  # a 2x2 block in the top-left corner
    counts[observed] = 20 * P[observed]
    m.set_counts(counts)
    return m, P, observed


def test_correlated_generalises_shared_moves_to_unvisited_states(fitted_relative):
    m, _, _ = fitted_relative
    mean = m.mean()
    assert mean.shape == (16, 2, 16)
    np.testing.assert_allclose(mean.sum(-1), 1.0, atol=1e-10)
    unvisited_interior = [9, 10, 13, 14]
    # the shared move "one cell right" is predicted for states never visited
    assert np.all(mean[unvisited_interior, 0, np.array(unvisited_interior) + 1] > 0.5)
    dirichlet = DirichletTransitionModel(16, 2, alpha=1.0).set_counts(m.counts).mean()
    np.testing.assert_allclose(dirichlet[unvisited_interior, 0], 1 / 16)


def test_correlated_lazy_refit_counts_fits():
    from corrpriors.applications.transitions import CorrelatedTransitionModel

    coords = grid_coords(4)
    m = CorrelatedTransitionModel(16, 2, se_cov(coords.astype(float), 3.0),
                                  category_map=displacement_category_map(coords, 1), max_iter=30)
    m.update([0, 1], [0, 1], [1, 2])
    m.mean()
    assert m.n_fits_ == 2                                    # one fit per action
    m.mean(), m.sample(rng=0), m.sample_many(3, rng=1), m.category_probs()
    assert m.n_fits_ == 2                                    # no new data: no refit
    m.update([5], [1], [6])
    m.mean()
    assert m.n_fits_ == 3                                    # only action 1 changed
    m.set_counts(m.counts)                                   # same data: nothing to refit
    m.sample_many(2, rng=2)
    assert m.n_fits_ == 3
    m.update([], [], [])                                     # no transitions: no refit
    m.mean()
    assert m.n_fits_ == 3


def test_correlated_per_action_refit_and_action_mean():
    from corrpriors.applications.transitions import CorrelatedTransitionModel

    coords = grid_coords(4)
    m = CorrelatedTransitionModel(16, 2, se_cov(coords.astype(float), 3.0),
                                  category_map=displacement_category_map(coords, 1), max_iter=30)
    m.update([0, 1, 4], [0, 1, 1], [1, 2, 8])
    first = m.action_mean(1)
    assert m.n_fits_ == 1                                    # only action 1 fitted
    assert first.shape == (16, 16)
    np.testing.assert_allclose(first.sum(axis=1), 1.0)
    m.action_mean(1)
    assert m.n_fits_ == 1                                    # unchanged data: no refit
    full = m.mean()
    assert m.n_fits_ == 2                                    # action 0 fitted now, 1 skipped
    np.testing.assert_array_equal(full[:, 1, :], first)
    np.testing.assert_array_equal(full[:, 0, :], m.action_mean(0))
    with pytest.raises(ValueError, match="action"):
        m.action_mean(2)


def test_correlated_warm_refit_matches_cold_fit():
    from corrpriors.applications.transitions import CorrelatedTransitionModel

    coords, P = right_mover(3)
    rng = np.random.default_rng(10)
    Pn = 0.7 * P + 0.3 / 9
    counts1 = np.stack([rng.multinomial(5, Pn[s, a]) for s in range(9) for a in range(2)]).reshape(9, 2, 9)
    counts2 = counts1 + np.stack([rng.multinomial(3, Pn[s, a]) for s in range(9)
                                  for a in range(2)]).reshape(9, 2, 9)
    kw = {"covariance": se_cov(coords.astype(float), 2.0), "max_iter": 2000, "tol": 1e-10}
    warm = CorrelatedTransitionModel(9, 2, **kw).set_counts(counts1)
    warm.mean()
    warm.set_counts(counts2)
    cold = CorrelatedTransitionModel(9, 2, **kw).set_counts(counts2)
    np.testing.assert_allclose(warm.mean(), cold.mean(), atol=2e-4)
    np.testing.assert_allclose(warm.scale_, cold.scale_, rtol=1e-3)


def test_correlated_samples_valid_reproducible_and_centred(fitted_relative):
    m, _, observed = fitted_relative
    d1 = m.sample_many(400, rng=np.random.default_rng(11))
    d2 = m.sample_many(400, rng=np.random.default_rng(11))
    assert d1.shape == (400, 16, 2, 16)
    np.testing.assert_array_equal(d1, d2)
    assert (d1 >= 0).all()
    np.testing.assert_allclose(d1.sum(-1), 1.0, atol=1e-10)
    # well-observed states: draws concentrate near the (plug-in) mean
    mean = m.mean()
    np.testing.assert_allclose(d1.mean(0)[observed], mean[observed], atol=0.05)


def test_correlated_mc_mean_takes_its_randomness_from_mc_rng():
    # no hidden seed: probs_method="mc" draws from the explicit mc_rng (issue 12)
    from corrpriors.applications.transitions import CorrelatedTransitionModel

    rng = np.random.default_rng(3)
    counts = rng.multinomial(4, np.full(5, 0.2), size=(5, 2)).astype(float)
    cov = se_cov(np.arange(5.0)[:, None], 1.5)

    def model(mc_rng):
        return CorrelatedTransitionModel(5, 2, cov, probs_method="mc", mc_rng=mc_rng,
                                         max_iter=300).set_counts(counts)

    a, b, c = model(5), model(5), model(6)
    np.testing.assert_array_equal(a.mean(), b.mean())          # an int seed reproduces
    assert not np.array_equal(a.mean(), c.mean())
    np.testing.assert_array_equal(a.category_probs(), a.category_probs())  # int: same draws per call
    g = model(np.random.default_rng(1))
    assert not np.array_equal(g.category_probs(), g.category_probs())     # a Generator advances
    # oracle: E[pi(psi)] estimated from joint posterior draws instead of per-stick marginals
    np.testing.assert_allclose(a.mean(), a.sample_many(20000, rng=7).mean(0), atol=0.01)
    with pytest.raises(TypeError, match="mc_rng: expected None, an int"):
        CorrelatedTransitionModel(5, 2, cov, probs_method="mc", mc_rng="seed")


def test_correlated_identity_map_with_plenty_of_data_matches_frequencies():
    from corrpriors.applications.transitions import CorrelatedTransitionModel

    rng = np.random.default_rng(12)
    P = random_P(rng, 5, 2)
    counts = np.stack([rng.multinomial(3000, P[s, a]) for s in range(5)
                       for a in range(2)]).reshape(5, 2, 5)
    coords = np.arange(5.0)[:, None]
    m = CorrelatedTransitionModel(5, 2, se_cov(coords, 1.0), max_iter=500, tol=1e-8)
    m.set_counts(counts)
    np.testing.assert_allclose(m.mean(), counts / counts.sum(-1, keepdims=True), atol=0.01)
    with pytest.raises(ValueError, match="covariance"):
        CorrelatedTransitionModel(5, 2, np.eye(4))
    with pytest.raises(ValueError, match="probs_method"):
        CorrelatedTransitionModel(5, 2, np.eye(5), probs_method="median")


# ---------------------------------------------------------------- beliefs for an MDP in one call
def test_for_mdp_relative_by_default_on_integer_coordinates():
    from corrpriors.applications import CorrelatedTransitionModel
    from corrpriors.envs import from_gymnasium

    mdp = from_gymnasium(gymnasium.make("FrozenLake-v1", map_name="4x4"))
    belief = CorrelatedTransitionModel.for_mdp(mdp, lengthscale=1.5,
                                               category_order="lexicographic")
    want = displacement_category_map(grid_coords(4), 1)
    np.testing.assert_array_equal(belief.category_map.category, want.category)
    d2 = ((mdp.coordinates[:, None] - mdp.coordinates[None]) ** 2).sum(-1)
    np.testing.assert_allclose(belief.covariance[1.5].gram(), np.exp(-d2 / 1.5**2), atol=1e-12)
    assert belief.selection == "collapsed"
    em = CorrelatedTransitionModel.for_mdp(mdp, selection="em")
    assert em.selection is None and all(m.learn_scale for m in em.models_)
    both = CorrelatedTransitionModel.for_mdp(mdp, lengthscale=[1.0, 3.0])
    both.update([0, 1], [2, 2], [1, 2])
    both.refit()
    assert both.selected_[2]["candidate"] in (1.0, 3.0) and both.selected_[0] is not None
    with pytest.raises(ValueError, match="several candidates need selection"):
        CorrelatedTransitionModel.for_mdp(mdp, lengthscale=[1.0, 3.0], selection="em")
    wide = CorrelatedTransitionModel.for_mdp(mdp, radius=2, selection="fixed", scale=3.0)
    assert wide.n_categories == 5 * 5 + 1
    assert all(not m.learn_scale and m.scale == 3.0 and m.scale_prior is None
               for m in wide.models_)


def test_for_mdp_absolute_encoding_and_environments_without_a_model():
    from corrpriors.applications import CorrelatedTransitionModel
    from corrpriors.envs import env_info

    env = gymnasium.make("FrozenLake-v1", map_name="4x4")
    absolute = CorrelatedTransitionModel.for_mdp(env_info(env), encoding="absolute")
    assert absolute.category_map.is_identity and absolute.n_categories == 16
    # real-valued features: the absolute encoding is the default
    info = env_info(env, features=lambda s: [0.5 * s, np.sin(s)])
    assert CorrelatedTransitionModel.for_mdp(info).category_map.is_identity
    with pytest.raises(ValueError, match="mdp.coordinates: expected integer coordinates"):
        CorrelatedTransitionModel.for_mdp(info, encoding="relative")
    with pytest.raises(ValueError, match="encoding: expected 'relative' or 'absolute'"):
        CorrelatedTransitionModel.for_mdp(env_info(env), encoding="offset")
    with pytest.raises(ValueError, match="selection: expected"):
        CorrelatedTransitionModel.for_mdp(env_info(env), selection="magic")


def test_for_mdp_needs_coordinates():
    from corrpriors.applications import CorrelatedTransitionModel
    from corrpriors.mdp import TabularMDP

    mdp = TabularMDP(np.full((3, 2, 3), 1 / 3), np.zeros(3), 0.9)
    with pytest.raises(ValueError, match="has no state coordinates"):
        CorrelatedTransitionModel.for_mdp(mdp)


def test_beliefs_implement_the_protocol():
    from corrpriors.applications import CorrelatedTransitionModel, TransitionBelief

    assert isinstance(DirichletTransitionModel(3, 2), TransitionBelief)
    assert isinstance(KnownTransitionModel(np.full((3, 2, 3), 1 / 3)), TransitionBelief)
    assert isinstance(CorrelatedTransitionModel(3, 2, np.eye(3)), TransitionBelief)
    assert not isinstance(np.zeros(3), TransitionBelief)


def test_precision_beliefs_equal_covariance_beliefs_and_for_mdp_priors():
    import scipy.sparse as sp

    from corrpriors.applications.transitions import GMRF_FROM_STATES, CorrelatedTransitionModel
    from corrpriors.kernels import grid_precision

    rng = np.random.default_rng(2)
    S, A = 16, 2
    q = grid_precision((4, 4), length_scale=2.0)
    cov = np.linalg.inv(q.toarray())
    s, a = rng.integers(0, S, 80), rng.integers(0, A, 80)
    s2 = rng.integers(0, S, 80)
    opts = dict(learn_scale=True, tol=1e-12, max_iter=500)
    b1 = CorrelatedTransitionModel(S, A, precision=sp.csr_array(q), **opts).update(s, a, s2)
    b2 = CorrelatedTransitionModel(S, A, covariance=0.5 * (cov + cov.T), **opts).update(s, a, s2)
    np.testing.assert_allclose(b1.mean(), b2.mean(), atol=1e-7)
    np.testing.assert_allclose(b1.scale_, b2.scale_, rtol=1e-6)
    assert b1.sample_many(3, rng=0).shape == (3, S, A, S)
    with pytest.raises(ValueError, match="covariance, precision: expected exactly one"):
        CorrelatedTransitionModel(S, A)
    from corrpriors.mdp import TabularMDP

    coords = np.array([(i, j) for i in range(4) for j in range(4)], float)
    mdp = TabularMDP(np.full((S, A, S), 1.0 / S), np.zeros(S), 0.9, coordinates=coords)
    dense = CorrelatedTransitionModel.for_mdp(mdp, selection="fixed")
    gmrf = CorrelatedTransitionModel.for_mdp(mdp, selection="fixed", prior="gmrf")
    assert S < GMRF_FROM_STATES and dense.precision is None and gmrf.precision is not None
    with pytest.raises(ValueError, match="prior: expected 'auto', 'dense' or 'gmrf'"):
        CorrelatedTransitionModel.for_mdp(mdp, prior="sparse")


def test_nearest_first_order_keeps_the_model_and_orders_moves_by_length():
    from corrpriors.applications.transitions import CorrelatedTransitionModel
    from corrpriors.mdp import TabularMDP

    coords = np.array([(i, j) for i in range(4) for j in range(4)], float)
    S = len(coords)
    mdp = TabularMDP(np.full((S, 1, S), 1.0 / S), np.zeros(S), 0.9, coordinates=coords)
    near = CorrelatedTransitionModel.for_mdp(mdp, selection="fixed")
    lex = CorrelatedTransitionModel.for_mdp(mdp, selection="fixed", category_order="lexicographic")
    cn, cl = near.category_map.category, lex.category_map.category
    assert np.array_equal(cn < 0, cl < 0)                      # the same window per state
    assert cn[5, 5] == 0 and cl[5, 5] == 4                     # staying is first
    assert sorted(cn[5, [1, 4, 6, 9]]) == [1, 2, 3, 4]          # then the unit moves
    # the same next state for every category pair: a relabelling of the categories only
    pairs = {(int(a), int(b)) for a, b in zip(cn[cn >= 0], cl[cl >= 0])}
    assert len({a for a, _ in pairs}) == len(pairs) == 9
    with pytest.raises(ValueError, match="category_order"):
        CorrelatedTransitionModel.for_mdp(mdp, category_order="random")


def test_set_counts_refits_only_the_actions_whose_counts_changed():
    """Per-action data versions: set_counts with one action's counts changed refits that one only
    (with a wall-aware, censored map too, which no longer keeps copies of the counts)."""
    from corrpriors.applications.transitions import CorrelatedTransitionModel

    coords = grid_coords(4)
    for boundary in ("exclude", "stay"):
        m = CorrelatedTransitionModel(16, 3, se_cov(coords.astype(float), 3.0), max_iter=30,
                                      category_map=displacement_category_map(coords, 1, boundary=boundary))
        m.update([0, 1, 2], [0, 1, 2], [1, 2, 3])
        m.mean()
        assert m.n_fits_ >= 3
        before = m.n_fits_
        counts = m.counts
        counts[5, 2, 6] += 1
        m.set_counts(counts)
        m.mean()
        fitted = m.n_fits_ - before
        assert fitted >= 1 and m._fitted_versions.tolist() == m._action_versions.tolist()
        m.set_counts(counts)                                         # the same again: no refit
        m.mean()
        assert m.n_fits_ - before == fitted
        assert m._action_versions.tolist() == [1, 1, 2]


def test_calibrated_draws_are_the_core_calibrated_posterior_mapped_to_next_states():
    """draw_method="calibrated": every action's draws are its model's calibrated draws (EP
    integrated over the scale) mapped through the encoding, from the same random stream; the
    default "vi" is the mean-field q, unchanged; at a scale left open by scarce data the
    calibrated draws are wider."""
    from corrpriors.applications import CorrelatedTransitionModel
    from corrpriors.core.stick_breaking import psi_to_pi
    from corrpriors.envs import windy_gridworld
    from corrpriors.experiments.transfer import uniform_transitions
    from corrpriors.mdp import transition_counts

    mdp = windy_gridworld((5, 5))
    x = transition_counts(uniform_transitions(mdp, 30, rng=np.random.default_rng(3)), 25, 4)
    plain = dict(concentration=None, contamination_prior=None, distinct_prior=None, support_prior=None)
    vi = CorrelatedTransitionModel.for_mdp(mdp, **plain).set_counts(x)
    cal = CorrelatedTransitionModel.for_mdp(mdp, draw_method="calibrated", **plain).set_counts(x)
    draws = cal.sample_many(300, rng=7)
    gen = np.random.default_rng(7)
    expected = np.stack([cal._to_next_states(psi_to_pi(m.sample_psi(300, rng=gen, method="calibrated")), a)
                         for a, m in enumerate(cal.models_)], axis=2)
    np.testing.assert_allclose(draws, expected, rtol=0, atol=1e-12)
    vi_draws = vi.sample_many(300, rng=7)
    gen = np.random.default_rng(7)
    expected_vi = np.stack([vi._to_next_states(psi_to_pi(m.sample_psi(300, rng=gen)), a)
                            for a, m in enumerate(vi.models_)], axis=2)
    np.testing.assert_allclose(vi_draws, expected_vi, rtol=0, atol=1e-12)
    assert np.allclose(vi.mean(), cal.mean())   # the draws change, not the fit

    def width(d):
        return np.diff(np.quantile(d, [0.05, 0.95], axis=0), axis=0).mean()

    assert width(draws) > 1.5 * width(vi_draws)
    with pytest.raises(ValueError, match="draw_method: expected one of"):
        CorrelatedTransitionModel.for_mdp(mdp, draw_method="gibbs")


def test_for_mdp_refuses_a_window_wider_than_the_states_or_the_memory(monkeypatch):
    """A radius beyond the largest coordinate difference only adds empty categories: refused,
    naming radius (1,000 on a 10 x 10 grid ran to 24 GB before). The model's (S, K) arrays are
    estimated before any is built and refused beyond the memory this process may use; the
    estimate bounds what a fit allocates (traced: about 19 arrays per action, counted 24)."""
    from corrpriors._memory import MemoryEstimateError
    from corrpriors.applications.transitions._correlated import MODEL_ARRAYS_PER_ACTION
    from corrpriors.envs import goal_gridworld
    from memory_checks import traced_peak

    small = goal_gridworld((10, 10), rng=0)
    for r in (10, 1000):
        with pytest.raises(ValueError, match=r"^radius: expected at most 9 \(the largest coordinate difference"):
            CorrelatedTransitionModel.for_mdp(small, radius=r)
    assert CorrelatedTransitionModel.for_mdp(small, radius=9).category_map.n_categories >= 19 ** 2

    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "1G")
    with pytest.raises(MemoryEstimateError, match=r"^the transition model \(900 states x 4 actions x 3,4\d\d "
                                                  r"categories\) would need about 2\.\d+ GiB.*smaller radius"):
        CorrelatedTransitionModel.for_mdp(goal_gridworld((30, 30), rng=0), radius=29)

    monkeypatch.delenv("CORRPRIORS_MEMORY_LIMIT")
    mdp = goal_gridworld((14, 14), rng=0)

    def fit():
        belief = CorrelatedTransitionModel.for_mdp(mdp, radius=13, selection="fixed")
        states = np.random.default_rng(0).integers(mdp.n_states, size=200)
        belief.update(states, states % 4, states).mean()
        return belief

    belief, peak = traced_peak(fit)
    estimate = 8.0 * MODEL_ARRAYS_PER_ACTION * 4 * mdp.n_states * belief.category_map.n_categories
    assert 0.3 * estimate < peak < estimate, (peak, estimate)


def test_for_mdp_auto_prior_falls_back_to_the_gmrf_where_the_dense_prior_cannot_fit(monkeypatch):
    """With more than GMRF_MAX_CATEGORIES categories ``prior="auto"`` chose the dense kernel
    whatever S, and at 100,000 states ``Kernel.bind`` refused it (449 GiB). It now chooses the
    GMRF exactly where that check refuses the dense prior, and keeps dense wherever it fits.
    A chain of 400 states with a window of radius 15 (32 categories): the dense prior needs
    6 x 8 x 400^2 bytes = 7.32 MiB, the model's own arrays 4.69 MiB."""
    from corrpriors._memory import format_bytes
    from corrpriors.applications.transitions import GMRF_FROM_STATES, GMRF_MAX_CATEGORIES
    from corrpriors.experiments._gym_memory import belief_memory
    from corrpriors.kernels.base import DENSE_PRIOR_MATRICES
    from corrpriors.mdp import TabularMDP

    S, A = 400, 2
    assert format_bytes(8.0 * DENSE_PRIOR_MATRICES * S * S) == "7.32 MiB"
    P = np.zeros((S, A, S))
    P[np.arange(S), 0, np.maximum(np.arange(S) - 1, 0)] = 1.0
    P[np.arange(S), 1, np.minimum(np.arange(S) + 1, S - 1)] = 1.0
    mdp = TabularMDP(P, np.zeros(S), 0.9, coordinates=np.arange(S)[:, None])
    states = np.random.default_rng(0).integers(S, size=300)
    actions = states % A
    nxt = np.clip(states + 2 * actions - 1, 0, S - 1)

    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "6M")          # dense cannot fit
    belief = CorrelatedTransitionModel.for_mdp(mdp, radius=15, selection="fixed")
    assert S < GMRF_FROM_STATES and belief.n_categories == 32 > GMRF_MAX_CATEGORIES
    assert belief.precision is not None and belief.covariance is None
    mean = belief.update(states, actions, nxt).mean()
    assert mean.shape == (S, A, S) and np.allclose(mean.sum(-1), 1.0)
    assert mean[10, 1, 11] > 0.5                                   # it learned the chain
    gmrf = belief_memory("pg", S, A, 1, radius=15, prior="gmrf")
    assert belief_memory("pg", S, A, 1, radius=15) == gmrf        # the commands' estimate follows

    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "8M")          # dense fits (7.32 MiB): as before
    belief = CorrelatedTransitionModel.for_mdp(mdp, radius=15, selection="fixed")
    assert belief.precision is None and belief.covariance is not None
    dense = CorrelatedTransitionModel.for_mdp(mdp, radius=15, selection="fixed", prior="dense")
    np.testing.assert_array_equal(belief.update(states, actions, nxt).mean(),
                                  dense.update(states, actions, nxt).mean())
    assert belief_memory("pg", S, A, 1, radius=15) != gmrf
