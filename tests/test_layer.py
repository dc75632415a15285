"""The per-(state, action) layer of the correlated transition belief, against oracles."""

import numpy as np
import pytest

from corrpriors.applications.transitions import CorrelatedTransitionModel, DirichletTransitionModel
from corrpriors.applications.transitions._layer import (
    CONCENTRATIONS,
    NO_LAYER_PRIOR,
    concentration_weights,
    contamination_posterior,
    expected_tables,
    layer_draws,
    layer_mean,
    log_evidence,
)
from corrpriors.envs import deep_sea
from corrpriors.envs.gridworld import dense_gridworld


def polya_urn_log_prob(counts, base, c):
    """Log probability of one observation sequence with these counts, by the urn's chain rule."""
    total, seen = 0.0, np.zeros_like(base, dtype=float)
    for k in np.repeat(np.arange(len(counts)), counts.astype(int)):
        total += np.log((c * base[k] + seen[k]) / (c + seen.sum()))
        seen[k] += 1
    return total


def crp_tables(n, alpha):
    """Expected tables of a Chinese restaurant with concentration alpha and n customers."""
    return sum(alpha / (alpha + i) for i in range(int(n)))


def test_log_evidence_is_the_polya_urn_probability():
    rng = np.random.default_rng(0)
    counts = np.array([[3, 0, 1, 0], [0, 0, 0, 0], [0, 5, 0, 2]], float)
    base = rng.dirichlet(np.ones(4), size=3)
    cs = np.array([0.05, 1.0, 30.0, np.inf])
    got = log_evidence(counts, base, cs)
    for c, value in zip(cs[:-1], got[:-1]):
        expected = sum(polya_urn_log_prob(n, b, c) for n, b in zip(counts, base))
        assert value == pytest.approx(expected, rel=1e-12)
    # c = inf: the multinomial likelihood of the sequence under the base itself
    assert got[-1] == pytest.approx(np.sum(np.where(counts > 0, counts * np.log(base), 0.0)))
    # and the finite values tend to it
    assert log_evidence(counts, base, [1e9])[0] == pytest.approx(got[-1], rel=1e-6)


def test_expected_tables_is_the_crp_expectation_rounded():
    counts = np.array([[1.0, 7.0, 0.0, 30.0]])
    base = np.array([[0.1, 0.2, 0.3, 0.4]])
    for c in (0.01, 0.5, 3.0, 100.0):
        t = expected_tables(counts, base, c)
        for k in range(4):
            if counts[0, k] == 0:
                assert t[0, k] == 0
                continue
            exact = crp_tables(counts[0, k], c * base[0, k])
            assert t[0, k] == np.clip(np.round(exact), 1, counts[0, k])
    np.testing.assert_array_equal(expected_tables(counts, base, np.inf), counts)
    assert np.all(expected_tables(counts, base, 1e-6)[counts > 0] == 1)   # one table each
    with pytest.raises(ValueError, match="concentration"):
        expected_tables(counts, base, 0.0)


def test_concentration_weights_prior_and_normalisation():
    w = concentration_weights(np.zeros(CONCENTRATIONS.size))
    assert w.sum() == pytest.approx(1.0)
    assert w[-1] == pytest.approx(NO_LAYER_PRIOR)              # c = inf: even prior odds
    np.testing.assert_allclose(w[:-1], (1 - NO_LAYER_PRIOR) / (CONCENTRATIONS.size - 1))
    v = np.arange(CONCENTRATIONS.size, dtype=float)
    w = concentration_weights(v)
    prior_finite = (1 - NO_LAYER_PRIOR) / (CONCENTRATIONS.size - 1)
    assert w[-1] / w[-2] == pytest.approx(np.exp(1.0) * NO_LAYER_PRIOR / prior_finite)
    assert w[1] / w[0] == pytest.approx(np.exp(1.0))
    with pytest.raises(ValueError, match="log_ev"):
        concentration_weights(np.zeros(3))


def test_contamination_posterior_by_hand():
    tables = np.array([[2.0, 0.0], [0.0, 1.0]])
    q = np.array([[1.0, 0.0], [0.5, 0.5]])
    eps = 0.2
    # table shares credited to the uniform component: eps U / ((1 - eps) q + eps U)
    share = np.array([0.1 / (0.8 + 0.1), 0.1 / (0.4 + 0.1)])
    a, b = contamination_posterior(tables, q, eps, (1.0, 2.0))
    assert a == pytest.approx(1.0 + 2 * share[0] + share[1])
    assert b == pytest.approx(2.0 + 3.0 - (2 * share[0] + share[1]))


def test_layer_draws_match_the_conjugate_dirichlet():
    rng = np.random.default_rng(1)
    counts = np.array([[4.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    base = np.array([[0.2, 0.5, 0.3], [0.6, 0.3, 0.1]])
    cs, w = np.array([2.0, np.inf]), np.array([0.7, 0.3])
    m = 40000
    draws = layer_draws(counts, np.broadcast_to(base, (m, 2, 3)), cs, w, rng=rng)
    np.testing.assert_allclose(draws.sum(-1), 1.0)
    mean = layer_mean(counts, base, cs, w)
    mc_se = draws.std(axis=0) / np.sqrt(m)
    assert np.all(np.abs(draws.mean(axis=0) - mean) <= 5 * mc_se + 1e-12)
    # c = 2 rows are Dir(2 base + n): the second moment of the first row's first entry
    alpha = 2 * base[0] + counts[0]
    a0 = alpha.sum()
    second = 0.7 * alpha[0] * (alpha[0] + 1) / (a0 * (a0 + 1)) + 0.3 * base[0, 0] ** 2
    assert (draws[:, 0, 0] ** 2).mean() == pytest.approx(second, abs=5 * (draws[:, 0, 0] ** 2).std() / np.sqrt(m))


def test_layer_mean_and_tables_match_their_sums_over_the_lattice():
    # the mean sums two numbers per row, the tables only the entries with counts: both against
    # the definitions, a table per concentration (zero, tiny, finite and infinite weights)
    from corrpriors.applications.transitions._layer import CONCENTRATIONS, _Layer, _table_means

    gen = np.random.default_rng(4)
    counts = gen.poisson(0.4, size=(30, 7)).astype(float)
    counts[::5] = 0.0
    base = gen.dirichlet(np.ones(7), size=30)
    pair = gen.dirichlet(np.ones(7), size=30)
    w = gen.dirichlet(np.ones(CONCENTRATIONS.size))
    w[3], w[5] = 0.0, 1e-13
    naive = sum(wl * (base if np.isinf(c) else (c * pair + counts) / (c + counts.sum(-1, keepdims=True)))
                for c, wl in zip(CONCENTRATIONS, w) if wl > 0)
    np.testing.assert_allclose(layer_mean(counts, base, CONCENTRATIONS, w, pair), naive, rtol=1e-13)
    layer = _Layer.build("auto", None, 1, 7, 1)
    t = sum(wl * _table_means(counts, base, float(c)) for c, wl in zip(CONCENTRATIONS, w) if wl > 1e-12)
    expected = np.where(counts > 0, np.clip(np.round(t), 1.0, counts), 0.0)
    np.testing.assert_array_equal(layer._tables(counts, base, w), expected)


def _grid_belief(**kw):
    mdp = dense_gridworld(shape=(4, 4), window=1)
    return mdp, CorrelatedTransitionModel.for_mdp(mdp, lengthscale=2.0, **kw)


def test_no_layer_is_the_plain_model_bit_for_bit():
    mdp, plain = _grid_belief(concentration=None, contamination_prior=None)
    ref = CorrelatedTransitionModel(plain.n_states, plain.n_actions,
                                    covariance=plain.covariance, category_map=plain.category_map,
                                    selection="collapsed")
    rng = np.random.default_rng(2)
    s = rng.integers(16, size=300)
    a = rng.integers(4, size=300)
    s2 = np.array([rng.choice(16, p=mdp.transitions[i, j]) for i, j in zip(s, a)])
    for b in (plain, ref):
        b.update(s, a, s2)
    np.testing.assert_array_equal(plain.mean(), ref.mean())
    np.testing.assert_array_equal(plain.sample_many(2, rng=5), ref.sample_many(2, rng=5))
    assert plain.concentration_weights_ is None and plain.contamination_ is None


def test_layer_learns_determinism_and_stochasticity():
    # deterministic DeepSea data: small concentrations; the gridworld's spread moves: large
    mdp = deep_sea(6, rng=0, walls=True)
    b = CorrelatedTransitionModel.for_mdp(mdp)
    rng = np.random.default_rng(0)
    live = np.flatnonzero(~mdp.terminal)
    s = rng.choice(live, size=400)
    a = rng.integers(2, size=400)
    b.update(s, a, mdp.transitions[s, a].argmax(-1))
    w, cs = b.concentration_weights_, b.concentrations_
    assert np.all(w @ np.where(np.isinf(cs), 1e6, cs) < 1.0)    # posterior mean c below 1
    eps = b.contamination_[0] / sum(b.contamination_)
    assert eps < 0.05                                         # the neighbours predict the moves
    assert b.contamination_absent_ > 0.9                      # ... so well: no contamination
    grid, g = _grid_belief()
    s = rng.integers(16, size=2000)
    a = rng.integers(4, size=2000)
    s2 = np.array([rng.choice(16, p=grid.transitions[i, j]) for i, j in zip(s, a)])
    g.update(s, a, s2)
    wg = g.concentration_weights_
    assert np.all(wg[:, g.concentrations_ < 10].sum(axis=1) < 0.01)


def test_layer_mean_and_draws_are_models():
    mdp = deep_sea(5, rng=1)
    b = CorrelatedTransitionModel.for_mdp(mdp)
    b.update([0, 0, 6], [0, 1, 1], [6, 5, 11])
    m = b.mean()
    np.testing.assert_allclose(m.sum(-1), 1.0)
    d1, d2 = b.sample_many(3, rng=7), b.sample_many(3, rng=7)
    np.testing.assert_array_equal(d1, d2)
    assert not np.array_equal(d1, b.sample_many(3, rng=8))
    np.testing.assert_allclose(d1.sum(-1), 1.0)
    np.testing.assert_allclose(b.action_mean(1), m[:, 1, :])
    # pairs seen again and again doing the same thing: the layer keeps that, whatever the base
    b.update(np.tile([0, 0, 6], 20), np.tile([0, 1, 1], 20), np.tile([6, 5, 11], 20))
    m = b.mean()
    assert min(m[0, 0, 6], m[0, 1, 5], m[6, 1, 11]) > 0.95


def test_layer_argument_validation():
    mdp = deep_sea(4, rng=0)
    with pytest.raises(ValueError, match="concentration"):
        CorrelatedTransitionModel.for_mdp(mdp, concentration="sometimes")
    with pytest.raises(ValueError, match="concentration"):
        CorrelatedTransitionModel.for_mdp(mdp, concentration=-1.0)
    with pytest.raises(TypeError, match="concentration"):
        CorrelatedTransitionModel.for_mdp(mdp, concentration=[1.0])
    with pytest.raises(ValueError, match="contamination_prior"):
        CorrelatedTransitionModel.for_mdp(mdp, contamination_prior=(1.0, 0.0))
    with pytest.raises(ValueError, match="layer_rounds"):
        CorrelatedTransitionModel.for_mdp(mdp, layer_rounds=0)


def test_fixed_small_concentration_behaves_like_a_dirichlet_around_the_base():
    # with a fixed c the posterior mean is (c B + n) / (c + N) around the correlated base B
    mdp = deep_sea(4, rng=2)
    b = CorrelatedTransitionModel.for_mdp(mdp, concentration=0.5, contamination_prior=None,
                                          distinct_prior=None, support_prior=None)
    d = DirichletTransitionModel(mdp.n_states, 2)
    b.update([0, 0, 0], [1, 1, 0], [5, 5, 4])
    d.update([0, 0, 0], [1, 1, 0], [5, 5, 4])
    base = np.stack([b._to_next_states(q, a) for a, q in enumerate(b.category_probs())], axis=1)
    n = b.counts
    expected = (0.5 * base + n) / (0.5 + n.sum(-1, keepdims=True))
    np.testing.assert_allclose(b.mean(), expected, rtol=1e-12)


def test_repel_by_hand():
    from corrpriors.applications.transitions._layer import repel

    base = np.array([[0.5, 0.25, 0.25], [0.2, 0.3, 0.5]])
    taken = np.array([[True, False, False], [True, True, True]])
    out = repel(base, taken, 0.5)
    np.testing.assert_allclose(out[0], np.array([0.25, 0.25, 0.25]) / 0.75)
    np.testing.assert_allclose(out[1], base[1])        # everything taken: unchanged
    np.testing.assert_allclose(repel(base, taken, 0.0), base)


def test_distinct_draws_oracle():
    from corrpriors.applications.transitions._layer import distinct_draws

    rng = np.random.default_rng(3)
    S, A, M = 30, 2, 400
    counts = np.zeros((S, A, S))
    base = np.zeros((M, S, A, S))
    base[..., :2] = 0.5                                # two possible outcomes, equally likely
    base[..., 2:] = 1e-12
    base /= base.sum(-1, keepdims=True)
    weights = np.array([[0.0, 1.0]] * A)               # c = 1e-3 always: one-hot draws
    cs = np.array([1.0, 1e-3])
    same = {}
    for delta in (0.0, 1.0):
        d = distinct_draws(counts, base, cs, weights, np.full(M, delta), rng=rng)
        np.testing.assert_allclose(d.sum(-1), 1.0)
        top = d.argmax(-1)                             # (M, S, A)
        same[delta] = np.mean(top[..., 0] == top[..., 1])
    assert same[1.0] == 0.0                            # without replacement: never the same
    assert abs(same[0.0] - 0.5) < 5 * np.sqrt(0.25 / (M * S))   # independent: half the time
    # c = inf: the draw is the base itself, whatever delta
    inf = distinct_draws(counts, base[:3], np.array([np.inf]), np.ones((A, 1)), np.ones(3), rng=rng)
    np.testing.assert_array_equal(inf, base[:3])


def test_distinct_mean_moves_mass_off_what_other_actions_do():
    mdp = deep_sea(4, rng=2)
    kw = dict(concentration=0.01, contamination_prior=None, support_prior=None)
    with_d = CorrelatedTransitionModel.for_mdp(mdp, distinct_prior=(50.0, 1.0), **kw)
    without = CorrelatedTransitionModel.for_mdp(mdp, distinct_prior=None, **kw)
    a_tried = 1
    s2 = int(mdp.transitions[0, a_tried].argmax())
    for b in (with_d, without):
        b.update([0] * 5, [a_tried] * 5, [s2] * 5)
    # action 0 of state 0 was never tried: with distinctness it avoids action 1's outcome
    assert with_d.mean()[0, 0, s2] < 0.2 * without.mean()[0, 0, s2]
    assert with_d.distinct_[0] > with_d.distinct_prior[0] - 1e-12
    with pytest.raises(ValueError, match="distinct_prior"):
        CorrelatedTransitionModel(mdp.n_states, 2, covariance=np.eye(mdp.n_states),
                                  distinct_prior=(1.0, 1.0))


def test_layer_needs_dense_storage():
    # sparse storage: an explicit layer is refused; for_mdp's defaults turn the layer off
    mdp = deep_sea(4, rng=0)
    with pytest.raises(ValueError, match="dense storage"):
        CorrelatedTransitionModel.for_mdp(mdp, sparse=True, concentration="auto")
    with pytest.raises(ValueError, match="dense storage"):
        CorrelatedTransitionModel.for_mdp(mdp, sparse=True, concentration=None,
                                          contamination_prior=(1.0, 1.0))
    b = CorrelatedTransitionModel.for_mdp(mdp, sparse=True)
    assert b.sparse and b.concentrations_ is None and b.contamination_ is None
    assert CorrelatedTransitionModel.for_mdp(mdp).concentrations_ is not None   # dense: on
    # the defaults compare equal to what they stand for (the signature reads as documented)
    import inspect

    params = inspect.signature(CorrelatedTransitionModel.for_mdp).parameters
    assert params["concentration"].default == "auto"
    assert params["distinct_prior"].default == (1.0, 1.0)


def test_layer_fits_in_parallel_give_the_serial_numbers():
    mdp = deep_sea(5, rng=3, walls=True)
    rng = np.random.default_rng(4)
    live = np.flatnonzero(~mdp.terminal)
    s = rng.choice(live, size=150)
    a = rng.integers(2, size=150)
    s2 = mdp.transitions[s, a].argmax(-1)
    beliefs = [CorrelatedTransitionModel.for_mdp(mdp, n_jobs=n) for n in (1, 2)]
    for b in beliefs:
        b.update(s, a, s2)
    np.testing.assert_array_equal(beliefs[0].mean(), beliefs[1].mean())
    np.testing.assert_array_equal(beliefs[0].concentration_weights_,
                                  beliefs[1].concentration_weights_)
    np.testing.assert_array_equal(beliefs[0].sample_many(2, rng=1),
                                  beliefs[1].sample_many(2, rng=1))
    assert beliefs[0].n_fits_ == beliefs[1].n_fits_ > 0


def test_cli_beliefs_keep_the_layer_default_on_sparse_storage():
    # corrpriors psrl/sysid's "auto": for_mdp's defaults, so a large (sparse) model still builds
    import dataclasses
    import types

    from corrpriors.applications.transitions import SPARSE_FROM_STATES
    from corrpriors.experiments._gym import make_belief
    from corrpriors.experiments.gym_psrl import PSRLConfig

    def grid(n):
        coords = np.stack(np.unravel_index(np.arange(n * n), (n, n)), 1).astype(float)
        return types.SimpleNamespace(n_states=n * n, n_actions=4, coordinates=coords, shape=(n, n))

    n = int(np.ceil(np.sqrt(SPARSE_FROM_STATES)))
    large = make_belief("pg", grid(n), PSRLConfig())
    assert large.sparse and large.concentrations_ is None
    assert make_belief("pg", grid(4), PSRLConfig()).concentrations_ is not None
    plain = dataclasses.replace(PSRLConfig(), concentration="none", contamination="none")
    assert make_belief("pg", grid(4), plain).concentrations_ is None
    with pytest.raises(ValueError, match="dense storage"):
        make_belief("pg", grid(n), dataclasses.replace(PSRLConfig(), concentration="2.0"))


def test_contamination_absent_is_the_bayes_factor_by_quadrature():
    from scipy.integrate import quad
    from scipy.stats import beta as beta_dist

    from corrpriors.applications.transitions._layer import NO_CONTAMINATION_PRIOR, contamination_absent

    rng = np.random.default_rng(3)
    q = rng.dirichlet(np.ones(5), size=4)
    t = np.array([[2, 0, 1, 0, 0], [0, 1, 0, 0, 0], [0, 0, 0, 3, 1], [1, 0, 0, 0, 0]], float)
    for prior in ((1.0, 1.0), (0.5, 4.0)):
        def integrand(e, prior=prior):
            return np.prod((1 - e + e / (5 * q[t > 0])) ** t[t > 0]) * beta_dist.pdf(e, *prior)
        bf = quad(integrand, 0, 1, limit=200)[0]
        p0 = NO_CONTAMINATION_PRIOR
        expected = p0 / (p0 + (1 - p0) * bf)
        got = contamination_absent(t, q, prior, grid=(np.arange(4000) + 0.5) / 4000)
        assert got == pytest.approx(expected, rel=1e-4)
    # many tables the neighbours predict well: epsilon = 0; one they cannot explain: not
    good = np.tile([[1.0, 0, 0]], (40, 1))
    assert contamination_absent(good, np.tile([[0.98, 0.01, 0.01]], (40, 1)), (1.0, 1.0)) > 0.95
    assert contamination_absent(good, np.tile([[0.0, 0.5, 0.5]], (40, 1)), (1.0, 1.0)) == 0.0


def _modes_probability(base, modes, delta, order):
    """P(the actions of one state take ``modes``) when they take them in ``order`` (draws' model)."""
    from corrpriors.applications.transitions._layer import repel

    p, taken = 1.0, np.zeros(base.shape[-1], dtype=bool)
    for a in order:
        p *= repel(base[a], taken, delta)[modes[a]]
        taken[modes[a]] = True
    return p


def test_distinct_log_likelihood_is_the_draws_probability_over_orders():
    import itertools

    from corrpriors.applications.transitions._layer import distinct_log_likelihood

    rng = np.random.default_rng(4)
    S, A = 4, 3
    base = rng.dirichlet(np.ones(S), size=(S, A))
    counts = np.zeros((S, A, S))
    counts[0, 0, 1], counts[0, 1, 2], counts[0, 2, 3] = 2, 1, 1      # distinct outcomes
    counts[1, 0, 2], counts[1, 2, 2] = 1, 3                          # two coincide
    counts[2, 1, 0] = 1                                              # one action: no evidence
    deltas = np.array([0.0, 0.3, 0.9])
    got = distinct_log_likelihood(counts, base, deltas)
    expected = np.zeros(3)
    for s, acts, modes in ((0, (0, 1, 2), {0: 1, 1: 2, 2: 3}), (1, (0, 2), {0: 2, 2: 2})):
        for k, d in enumerate(deltas):
            p = np.mean([_modes_probability(base[s], modes, d, order)
                         for order in itertools.permutations(acts)])
            expected[k] += np.log(p / np.prod([base[s, a, modes[a]] for a in acts]))
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


def test_distinct_posterior_needs_outcomes_the_base_cannot_tell_apart():
    from corrpriors.applications.transitions._layer import DELTAS, distinct_posterior

    S = 6
    counts = np.zeros((S, 2, S))
    counts[np.arange(S - 1), 0, np.arange(1, S)] = 1
    counts[np.arange(S - 1), 1, np.arange(S - 1)] = 1          # two different outcomes each
    sharp = np.zeros((S, 2, S))                                 # the base tells them apart
    sharp[np.arange(S - 1), 0, np.arange(1, S)] = 1
    sharp[np.arange(S - 1), 1, np.arange(S - 1)] = 1
    sharp[S - 1] = 1.0 / S
    shuffled = 0.5 * (sharp + sharp[:, ::-1])                   # DeepSea: 50/50 per action
    prior = (1.0, 1.0)
    mean = {name: distinct_posterior(counts, b, prior) @ DELTAS
            for name, b in (("sharp", sharp), ("shuffled", shuffled))}
    assert mean["sharp"] == pytest.approx(0.5, abs=1e-6)       # no evidence either way
    assert mean["shuffled"] > 0.6                              # distinct where a coincidence was likely
    same = counts.copy()
    same[np.arange(S - 1), 1] = same[np.arange(S - 1), 0]        # every state's actions coincide
    assert distinct_posterior(same, shuffled, prior) @ DELTAS < 0.2
