"""The sparse-support prior (applications/transitions/_support.py) against brute force.

Oracles: enumeration over every support of a tiny state space (S = 5: all 31 non-empty
subsets), rejection sampling from the generative model, Monte Carlo over the posterior draws.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.special import gammaln

from corrpriors.applications.transitions._support import (
    SupportTransitionModel,
    fit_support,
    support_draws,
    support_hellinger_estimate,
    support_log_evidence,
    support_log_likelihood,
    support_mean,
    support_size_posterior,
)

S = 5
PI = np.array([0.15, 0.3, 0.35, 0.1, 0.1])
BETA = 0.7
ROWS = np.array([[0, 0, 0, 0, 0], [3, 0, 0, 0, 0], [2, 1, 0, 0, 0], [1, 0, 4, 0, 2],
                 [1, 1, 1, 1, 1], [0, 6, 0, 0, 1]], dtype=float)


def _brute(row, pi, beta):
    """(evidence, posterior mean, E sqrt P) of one row by enumerating every support."""
    n = np.asarray(row, float)
    N = n.sum()
    ev = 0.0
    mean = np.zeros(S)
    root = np.zeros(S)
    for k in range(1, S + 1):
        for Z in itertools.combinations(range(S), k):
            z = np.zeros(S, bool)
            z[list(Z)] = True
            if np.any(n[~z] > 0):
                continue
            prior = pi[k - 1] / math.comb(S, k)
            lik = math.exp(gammaln(k * beta) - gammaln(k * beta + N)
                           + np.sum(gammaln(n[z] + beta) - gammaln(beta)))
            w = prior * lik
            ev += w
            a = np.where(z, n + beta, 0.0)
            mean += w * a / a.sum()
            root += w * np.where(z, np.exp(gammaln(a + 0.5) - gammaln(np.where(z, a, 1.0))), 0.0) \
                * math.exp(gammaln(a.sum()) - gammaln(a.sum() + 0.5))
    return ev, mean / ev, root / ev


def test_predictive_and_evidence_match_enumeration_over_supports():
    mean = support_mean(ROWS, PI, BETA)
    for r, row in enumerate(ROWS):
        ev, m, root = _brute(row, PI, BETA)
        np.testing.assert_allclose(mean[r], m, rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(support_log_evidence(row, PI, BETA), math.log(ev), rtol=1e-10,
                                   atol=1e-12)
        h = root ** 2 / np.sum(root ** 2)
        np.testing.assert_allclose(support_hellinger_estimate(row, PI, BETA), h, rtol=1e-10)
    # pooled: the sum over the rows
    total = sum(math.log(_brute(row, PI, BETA)[0]) for row in ROWS)
    np.testing.assert_allclose(support_log_evidence(ROWS, PI, BETA), total, rtol=1e-12)


def test_likelihood_is_minus_inf_below_the_distinct_states_and_size_posterior_normalised():
    L = support_log_likelihood(ROWS, BETA)
    m = (ROWS > 0).sum(axis=1)
    for r in range(len(ROWS)):
        assert np.all(np.isneginf(L[r, : max(m[r] - 1, 0)]))
        assert np.all(np.isfinite(L[r, max(m[r] - 1, 0):]))
    post = support_size_posterior(ROWS, PI, BETA)
    np.testing.assert_allclose(post.sum(axis=1), 1.0)
    np.testing.assert_allclose(post[0], PI)          # no data: the prior
    np.testing.assert_allclose(support_mean(ROWS[:1], PI, BETA), np.full((1, S), 1 / S))


def test_predictive_matches_rejection_sampling_from_the_generative_model():
    gen = np.random.default_rng(5)
    target = np.array([2, 1, 0, 0, 0])
    M = 400_000
    k = gen.choice(np.arange(1, S + 1), size=M, p=PI)
    keys = gen.random((M, S))
    inside = np.argsort(np.argsort(keys, axis=1), axis=1) < k[:, None]
    g = np.where(inside, gen.standard_gamma(np.full((M, S), BETA)), 0.0)
    p = g / g.sum(axis=1, keepdims=True)
    cum = np.cumsum(p, axis=1)
    obs = np.zeros((M, S))
    for _ in range(3):
        j = np.minimum((cum < gen.random((M, 1))).sum(axis=1), S - 1)
        obs[np.arange(M), j] += 1
    keep = np.all(obs == target, axis=1)
    assert keep.sum() > 5000
    np.testing.assert_allclose(p[keep].mean(axis=0), support_mean(target, PI, BETA), atol=0.012)


def test_draws_have_the_predictive_as_mean_and_the_size_posterior():
    gen = np.random.default_rng(1)
    d = support_draws(ROWS, PI, BETA, 20_000, rng=gen)
    assert d.shape == (20_000, len(ROWS), S)
    np.testing.assert_allclose(d.sum(axis=-1), 1.0)
    assert np.all(d[:, ROWS > 0] > 0)                # the seen states are always in the support
    np.testing.assert_allclose(d.mean(axis=0), support_mean(ROWS, PI, BETA), atol=0.01)
    sizes = (d > 0).sum(axis=-1)                     # (M, R)
    post = support_size_posterior(ROWS, PI, BETA)
    for r in range(len(ROWS)):
        freq = np.bincount(sizes[:, r], minlength=S + 1)[1:] / sizes.shape[0]
        np.testing.assert_allclose(freq, post[r], atol=0.015)
    root = np.sqrt(d).mean(axis=0) ** 2
    np.testing.assert_allclose(root / root.sum(axis=-1, keepdims=True),
                               support_hellinger_estimate(ROWS, PI, BETA), atol=0.01)


def test_fit_maximises_the_pooled_evidence():
    gen = np.random.default_rng(3)
    rows = np.zeros((60, 8))
    for r in range(60):                              # every row: 2 successors
        z = gen.choice(8, 2, replace=False)
        rows[r, z] = gen.multinomial(int(gen.integers(0, 8)), gen.dirichlet([1, 1]))
    f = fit_support(rows)
    assert np.argmax(f.pi) == 1                      # size 2
    assert f.log_evidence == pytest.approx(support_log_evidence(rows, f.pi, f.beta))

    def objective(pi):   # the evidence plus the log Dirichlet(1/S) pseudo-count prior
        pi = pi / pi.sum()
        return support_log_evidence(rows, pi, f.beta) + np.sum(np.log(pi)) / 8

    for _ in range(20):                              # no other pi does better at that beta
        other = np.clip(f.pi * np.exp(0.3 * gen.standard_normal(8)), 1e-12, None)
        assert objective(other) <= objective(f.pi) + 1e-7
    # warm start (a refit after more data): from a fit of half the rows, the same optimum
    warm = fit_support(rows, start=fit_support(rows[:30]))
    assert warm.beta == f.beta
    assert warm.log_evidence == pytest.approx(f.log_evidence, abs=1e-3)
    far = fit_support(rows, start=fit_support(rows, betas=[100.0]))   # climbs from the edge
    assert far.beta == f.beta
    empty = fit_support(np.zeros((3, 8)))
    np.testing.assert_allclose(empty.pi, 1 / 8)


def test_fit_by_row_groups_matches_the_em_over_every_row():
    # fit_support runs its EM over the distinct (total, distinct states) of the rows; the EM over
    # every row (support_log_likelihood of each, one weight per row) must give the same fit
    from corrpriors.applications.transitions._support import BETAS, _em_pi

    gen = np.random.default_rng(5)
    S = 12
    rows = np.zeros((400, S))
    for r in range(400):
        k = int(gen.integers(1, 5))
        z = gen.choice(S, k, replace=False)
        rows[r, z] = gen.multinomial(int(gen.integers(0, 12)), gen.dirichlet(np.ones(k)))
    f = fit_support(rows)
    seen = rows[rows.sum(axis=-1) > 0]
    every_row = np.ones(seen.shape[0])
    best = max((( *_em_pi(support_log_likelihood(seen, b), np.full(S, 1 / S), 200, every_row), b)
                for b in BETAS), key=lambda t: t[1])
    assert f.beta == best[2]
    np.testing.assert_allclose(f.pi, best[0], rtol=1e-9, atol=1e-15)
    assert f.log_evidence == pytest.approx(best[1], rel=1e-12)
    assert len({(t, m) for t, m in zip(seen.sum(-1), (seen > 0).sum(-1))}) < seen.shape[0] / 5


def test_belief_mean_and_draws_and_bad_input():
    b = SupportTransitionModel(6, 2)
    np.testing.assert_allclose(b.mean(), 1 / 6)
    b.update([0, 0, 0, 1], [1, 1, 1, 0], [2, 2, 3, 5])
    m = b.mean()
    assert m.shape == (6, 2, 6)
    np.testing.assert_allclose(m.sum(axis=-1), 1.0)
    np.testing.assert_allclose(m[0, 1], support_mean(b.counts[0, 1], b.fit_.pi, b.fit_.beta))
    d = b.sample_many(3, rng=0)
    assert d.shape == (3, 6, 2, 6)
    np.testing.assert_allclose(b.sample(rng=np.random.default_rng(0)).sum(-1), 1.0)
    with pytest.raises(ValueError, match="beta"):
        support_mean(ROWS, PI, 0.0)
    with pytest.raises(ValueError, match="pi"):
        support_mean(ROWS, PI[:3], BETA)
    with pytest.raises(ValueError, match="pi"):
        support_mean(ROWS, [1, 0, 0, 0, 0], BETA)    # a row shows 4 distinct states
    with pytest.raises(ValueError, match="counts"):
        support_mean(-ROWS, PI, BETA)
    with pytest.raises(ValueError, match="betas"):
        fit_support(ROWS, betas=[0.0])
    with pytest.raises(ValueError, match="n"):
        support_draws(ROWS, PI, BETA, 0, rng=0)


# --- the support hypothesis inside the correlated belief's layer -----------------------------

def _random_mdp_belief(T, support_prior=0.5, seed=0, **kw):
    from corrpriors.applications.transitions import CorrelatedTransitionModel
    from corrpriors.envs.unstructured import random_mdp
    from corrpriors.mdp import TabularMDP

    mdp = random_mdp(12, 2, 2, rng=seed)
    mdp = TabularMDP(mdp.transitions, mdp.rewards, 0.9, coordinates=np.arange(12.0)[:, None])
    rng = np.random.default_rng(seed)
    s = rng.integers(12, size=T)
    a = rng.integers(2, size=T)
    s2 = np.array([rng.choice(12, p=mdp.transitions[i, j]) for i, j in zip(s, a)])
    b = CorrelatedTransitionModel.for_mdp(mdp, support_prior=support_prior, **kw)
    b.update(s, a, s2)
    return mdp, b, (s, a, s2)


def test_support_weight_is_the_posterior_of_the_two_hypotheses():
    from corrpriors.applications.transitions._layer import (
        CONCENTRATIONS,
        concentration_weights,
        support_log_factor,
        support_weights,
    )

    def support_weight(ev, concentrations, sup, p):   # one action
        return float(support_weights([support_log_factor(ev, concentrations, sup)], p)[0])

    gen = np.random.default_rng(0)
    ev = gen.normal(-40.0, 3.0, size=CONCENTRATIONS.size)
    prior = np.where(np.isinf(CONCENTRATIONS), 0.5, 0.5 / (CONCENTRATIONS.size - 1))
    layer = np.log(np.sum(prior * np.exp(ev)))
    for sup, p in ((-38.0, 0.5), (-45.0, 0.2), (-30.0, 0.9)):
        want = p * math.exp(sup) / (p * math.exp(sup) + (1 - p) * math.exp(layer))
        assert support_weight(ev, CONCENTRATIONS, sup, p) == pytest.approx(want, rel=1e-10)
    assert support_weight(ev, CONCENTRATIONS, -1e6, 0.5) == 0.0
    assert support_weight(ev, CONCENTRATIONS, 1e6, 0.5) == 1.0
    # the concentration weights are unchanged by the refactoring of their prior
    w = concentration_weights(ev, CONCENTRATIONS)
    np.testing.assert_allclose(w, prior * np.exp(ev) / np.sum(prior * np.exp(ev)))


@pytest.mark.parametrize("prior", [0.5, 0.2, 0.8])
def test_support_weights_are_exchangeable_over_actions(prior):
    # oracle: every configuration z of the A hypotheses, the Beta(2p, 2(1 - p)) prior of their
    # common probability integrated numerically
    import itertools

    from scipy import integrate

    from corrpriors.applications.transitions._layer import support_weights

    gen = np.random.default_rng(7)
    a0, b0 = 2 * prior, 2 * (1 - prior)
    for n_actions in (1, 2, 3, 5):
        x = gen.normal(scale=3.0, size=n_actions)
        post, total = np.zeros(n_actions), 0.0
        for z in itertools.product((0, 1), repeat=n_actions):
            z = np.array(z)
            k = int(z.sum())
            mass, _ = integrate.quad(lambda t, k=k, n=n_actions: t ** (a0 - 1 + k) * (1 - t) ** (b0 - 1 + n - k),
                                     0, 1, limit=200)
            w = mass * math.exp(float(z @ x))
            total += w
            post += w * z
        np.testing.assert_allclose(support_weights(x, prior), post / total, rtol=1e-8, atol=1e-12)
    # one action: the fixed prior p updated by its Bayes factor
    one = support_weights([1.3], prior)[0]
    assert one == pytest.approx(prior * math.exp(1.3) / (prior * math.exp(1.3) + 1 - prior), rel=1e-12)
    # an action without data follows the others (Laplace's rule for p = 1/2), where a fixed
    # prior per action would keep it at p
    w = support_weights([0.0, -60.0, -60.0, -60.0], prior)
    assert w[0] == pytest.approx(a0 / (a0 + b0 + 3), rel=1e-9) and np.all(w[1:] < 1e-20)
    w = support_weights([0.0, 60.0, 60.0, 60.0], prior)
    assert w[0] == pytest.approx((a0 + 3) / (a0 + b0 + 3), rel=1e-9) and np.all(w[1:] > 1 - 1e-12)


def test_layer_mean_mixes_the_layer_and_the_support_prior_by_their_weight():
    mdp, b, data = _random_mdp_belief(150)
    _, plain, _ = _random_mdp_belief(150, support_prior=None)
    w = b.support_weights_
    assert w.shape == (2,) and np.all((w >= 0) & (w <= 1))
    f = b._layer.support_fit
    counts = b.counts
    want = (1 - w[None, :, None]) * plain.mean() + w[None, :, None] * support_mean(counts, f.pi,
                                                                                  f.beta)
    np.testing.assert_allclose(b.mean(), want, rtol=1e-10, atol=1e-13)
    assert plain.support_weights_ is None


def test_random_mdp_picks_the_support_prior_a_grid_the_layer():
    from corrpriors.applications.transitions import CorrelatedTransitionModel
    from corrpriors.envs.gridworld import dense_gridworld

    _, b, _ = _random_mdp_belief(1500)
    assert np.all(b.support_weights_ > 0.9)
    d = b.sample_many(400, rng=3)                    # draws: the support prior's
    assert np.all(d[:, b.counts > 0] > 0)
    assert np.mean(np.sum(d > 1e-12, axis=-1) <= 3) > 0.9   # two successors (a few 3s)
    np.testing.assert_allclose(d.mean(axis=0), b.mean(), atol=0.05)
    grid = dense_gridworld(shape=(4, 4), window=1)
    g = CorrelatedTransitionModel.for_mdp(grid, support_prior=0.5)
    rng = np.random.default_rng(1)
    s = rng.integers(16, size=600)
    a = rng.integers(4, size=600)
    s2 = np.array([rng.choice(16, p=grid.transitions[i, j]) for i, j in zip(s, a)])
    g.update(s, a, s2)
    assert np.all(g.support_weights_ == 0.0)         # beyond float: the layer's, bit for bit
    plain = CorrelatedTransitionModel.for_mdp(grid, support_prior=None)
    plain.update(s, a, s2)
    np.testing.assert_array_equal(g.mean(), plain.mean())
    np.testing.assert_array_equal(g.sample_many(2, rng=5), plain.sample_many(2, rng=5))


def test_support_prior_argument_validation():
    from corrpriors.applications.transitions import CorrelatedTransitionModel
    from corrpriors.envs.gridworld import dense_gridworld

    grid = dense_gridworld(shape=(3, 3), window=1)
    for bad in (0.0, 1.0, 1.5, float("nan")):
        with pytest.raises(ValueError, match="support_prior"):
            CorrelatedTransitionModel.for_mdp(grid, support_prior=bad)
    with pytest.raises(TypeError, match="support_prior"):
        CorrelatedTransitionModel.for_mdp(grid, support_prior="yes")
    with pytest.raises(ValueError, match="support_prior"):
        CorrelatedTransitionModel.for_mdp(grid, support_prior=0.5, concentration=None)


def test_a_size_prior_that_cannot_hold_the_observed_states_is_refused():
    """pi with all its mass below a row's distinct next states: a ValueError naming pi (not a
    NaN posterior or a -inf evidence)."""
    from corrpriors.applications.transitions._support import support_log_evidence, support_size_posterior

    counts = np.array([[1.0, 1.0, 0.0, 0.0], [3.0, 0.0, 0.0, 0.0]])
    for f in (support_size_posterior, support_log_evidence):
        with pytest.raises(ValueError, match="^pi: gives no mass"):
            f(counts, [1.0, 0.0, 0.0, 0.0], 1.0)
        f(counts, [0.0, 1.0, 0.0, 0.0], 1.0)   # size 2 holds both rows


def test_an_untried_action_follows_what_the_others_say_about_structure():
    # CliffWalking's moves are predicted by the neighbours: after a walk that never tries "up",
    # that action's support hypothesis is at Laplace's 1/5, not the per-action prior 1/2 (with
    # which PSRL kept an untried action's teleporting draws for hundreds of steps)
    import gymnasium

    from corrpriors.applications.transitions import CorrelatedTransitionModel
    from corrpriors.envs import from_gymnasium, random_exploration

    env = gymnasium.make("CliffWalking-v1")
    mdp = from_gymnasium(env)
    d = random_exploration(env, 60, rng=np.random.default_rng(0))
    keep = d.actions != 0
    b = CorrelatedTransitionModel.for_mdp(mdp).update(d.states[keep], d.actions[keep], d.next_states[keep])
    w = b.support_weights_
    assert w[0] == pytest.approx(0.2, abs=1e-6) and np.all(w[1:] < 1e-6)
