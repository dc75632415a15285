"""The Bayes point estimate under the squared Hellinger loss, q_j ∝ E[sqrt P_j]^2, of every belief.

Oracles: mpmath (log Gamma ratios, the Beta integral of sqrt p at tiny concentrations), Monte
Carlo over Dirichlet draws and over every belief's own ``sample_many``, the expected loss itself
(by Monte Carlo over posterior draws: the estimate must beat the mean and perturbations of
itself), and a deliberate breakage (mixing the components after squaring) that the Monte-Carlo
check rejects.
"""

from __future__ import annotations

import dataclasses
import types

import mpmath
import numpy as np
import pytest

from corrpriors._special import log_half_gamma_ratio
from corrpriors.applications.transitions import (
    CorrelatedTransitionModel,
    DirichletTransitionModel,
    KnownTransitionModel,
)
from corrpriors.applications.transitions._hellinger import (
    FIRST_DRAWS,
    HELLINGER_RTOL,
    average_sqrt_draws,
    dirichlet_sqrt_mean,
    from_sqrt_mean,
    monte_carlo_sqrt_mean,
    point_estimate,
)
from corrpriors.applications.transitions._layer import layer_draws, layer_sqrt_mean
from corrpriors.applications.transitions._support import (
    SupportTransitionModel,
    support_draws,
    support_sqrt_mean,
)
from corrpriors.mdp import hellinger


def _line_mdp(S: int = 8, A: int = 2, seed: int = 0) -> tuple:
    """A small MDP on a line (index coordinates) and 150 random transitions of it."""
    rng = np.random.default_rng(seed)
    P = np.zeros((S, A, S))
    for s in range(S):
        for a in range(A):
            nxt = rng.choice(S, size=2, replace=False)
            P[s, a, nxt] = rng.dirichlet(np.ones(2))
    mdp = types.SimpleNamespace(n_states=S, n_actions=A, coordinates=np.arange(S, dtype=float)[:, None])
    s = rng.integers(S, size=150)
    a = rng.integers(A, size=150)
    s2 = np.array([rng.choice(S, p=P[i, j]) for i, j in zip(s, a)])
    return mdp, P, (s, a, s2)


def _expected_loss(q: np.ndarray, draws: np.ndarray) -> float:
    """Monte-Carlo posterior expected squared Hellinger loss sum_j (sqrt q_j - sqrt P_j)^2."""
    return float(np.mean(np.sum((np.sqrt(q)[None] - np.sqrt(draws)) ** 2, axis=-1)))


# ----------------------------------------------------------------------------- closed forms


def test_log_half_gamma_ratio_matches_mpmath_from_tiny_to_huge_arguments():
    xs = np.array([1e-300, 1e-8, 0.3, 1.0, 14.9, 15.0, 15.1, 100.0, 1e6, 1e12, 1e100])
    got = log_half_gamma_ratio(xs)
    with mpmath.workdps(250):   # 1e100 + 0.5 needs more than 100 digits
        ref = [float(mpmath.loggamma(mpmath.mpf(x) + mpmath.mpf("0.5")) - mpmath.loggamma(mpmath.mpf(x)))
               for x in xs]
    np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-14)
    assert log_half_gamma_ratio(np.array(0.0)) == -np.inf


def test_dirichlet_sqrt_mean_matches_monte_carlo():
    rng = np.random.default_rng(0)
    alpha = np.array([[0.3, 2.0, 7.5, 0.05], [40.0, 1.0, 1.0, 1.0]])
    draws = rng.dirichlet(alpha[0], size=400_000), rng.dirichlet(alpha[1], size=400_000)
    for row, d in zip(alpha, draws):
        mc = np.sqrt(d).mean(axis=0)
        se = np.sqrt(d).std(axis=0) / np.sqrt(d.shape[0])
        assert np.all(np.abs(dirichlet_sqrt_mean(row) - mc) < 5 * se)


@pytest.mark.parametrize("a", [1e-3, 1e-8, 1e-100])
def test_dirichlet_sqrt_mean_tiny_concentrations_match_the_beta_integral(a):
    # P_j ~ Beta(a, b): E sqrt P_j = int p^(a - 1/2) (1 - p)^(b - 1) dp / B(a, b), by quadrature
    b = 2.5
    with mpmath.workdps(40):
        a_, b_ = mpmath.mpf(a), mpmath.mpf(b)
        # substitute p = u^(1/a'), a' = a + 1/2, to remove the endpoint singularity
        ap = a_ + mpmath.mpf("0.5")
        integral = mpmath.quad(lambda u: (1 - u ** (1 / ap)) ** (b_ - 1) / ap, [0, 1])
        ref = float(integral / mpmath.beta(a_, b_))
    got = dirichlet_sqrt_mean(np.array([a, b]))[0]
    assert got == pytest.approx(ref, rel=1e-10)
    assert got == pytest.approx(a * np.sqrt(np.pi) * np.exp(-log_half_gamma_ratio(np.array(a + b))),
                                rel=10 * a)      # the a -> 0 limit, up to O(a)
    assert dirichlet_sqrt_mean(np.array([0.0, b]))[0] == 0.0   # a structural zero


def test_dirichlet_sqrt_mean_and_from_sqrt_mean_refuse_bad_input():
    with pytest.raises(ValueError, match="alpha"):
        dirichlet_sqrt_mean(np.array([1.0, -1.0]))
    with pytest.raises(ValueError, match="alpha"):
        dirichlet_sqrt_mean(np.zeros(3))
    with pytest.raises(ValueError, match="r: "):
        from_sqrt_mean(np.zeros((2, 3)))


# ----------------------------------------------------------------------------- it is the Bayes estimate


def test_dirichlet_estimate_minimises_the_expected_hellinger_loss():
    rng = np.random.default_rng(1)
    counts = np.array([[[5.0, 0.0, 1.0, 0.0, 0.0, 2.0]]])
    belief = DirichletTransitionModel(6, 1, alpha=0.1).set_counts(np.tile(counts, (6, 1, 1)))
    est, mean = belief.hellinger_estimate()[0, 0], belief.mean()[0, 0]
    draws = belief.sample_many(100_000, rng=rng)[:, 0, 0]
    best = _expected_loss(est, draws)
    assert best < _expected_loss(mean, draws) - 1e-3
    for _ in range(30):                                    # any other point of the simplex loses
        other = 0.9 * est + 0.1 * rng.dirichlet(np.ones(6))
        assert best < _expected_loss(other, draws)
    # and the exact expected loss 2 - 2 sum sqrt(q_j) E sqrt(P_j) agrees with the Monte Carlo
    r = dirichlet_sqrt_mean(counts[0, 0] + 0.1)
    assert 2 - 2 * np.sum(np.sqrt(est) * r) == pytest.approx(best, abs=2e-3)


def test_support_estimate_minimises_the_expected_loss_over_its_own_draws():
    belief = SupportTransitionModel(7, 1)
    rng = np.random.default_rng(2)
    c = np.zeros((7, 1, 7))
    for s in range(7):
        c[s, 0, rng.choice(7, 2, replace=False)] = rng.integers(1, 5, size=2)
    belief.set_counts(c)
    est, mean = belief.hellinger_estimate(), belief.mean()
    draws = belief.sample_many(40_000, rng=rng)
    best = _expected_loss(est, draws)
    assert best < _expected_loss(mean, draws)
    for _ in range(20):
        assert best < _expected_loss(0.9 * est + 0.1 * rng.dirichlet(np.ones(7), size=(7, 1)), draws)


# ----------------------------------------------------------------------------- beliefs


def test_dirichlet_sparse_storage_matches_dense():
    rng = np.random.default_rng(3)
    counts = rng.poisson(0.3, size=(9, 2, 9)).astype(float)
    dense = DirichletTransitionModel(9, 2, alpha=0.01, sparse=False).set_counts(counts)
    sparse = DirichletTransitionModel(9, 2, alpha=0.01, sparse=True).set_counts(counts)
    table = sparse.hellinger_estimate()
    truth = rng.dirichlet(np.ones(9), size=(9, 2))
    np.testing.assert_allclose(table.hellinger_to(truth), hellinger(truth, dense.hellinger_estimate()),
                               rtol=1e-12)


def test_known_model_and_the_point_estimate_dispatch():
    P = np.random.default_rng(4).dirichlet(np.ones(4), size=(4, 2))
    known = KnownTransitionModel(P)
    np.testing.assert_array_equal(known.hellinger_estimate(), P)
    np.testing.assert_array_equal(point_estimate(known, "mean"), P)
    with pytest.raises(ValueError, match="point_estimate"):
        point_estimate(known, "median")

    class Bare:                          # only the protocol: the Monte-Carlo fallback
        n_states, n_actions = 4, 2

        def sample_many(self, n, *, rng):
            return DirichletTransitionModel(4, 2, alpha=0.5).sample_many(n, rng=rng)

    with pytest.raises(ValueError, match="rng"):
        point_estimate(Bare(), "hellinger")
    mc = point_estimate(Bare(), "hellinger", rng=5)
    np.testing.assert_array_equal(mc, from_sqrt_mean(monte_carlo_sqrt_mean(Bare(), rng=5)))
    exact = DirichletTransitionModel(4, 2, alpha=0.5).hellinger_estimate()   # 256 draws: rough
    np.testing.assert_allclose(mc, exact, atol=0.1)


def test_layer_sqrt_mean_matches_its_draws_and_mixing_after_squaring_is_caught():
    # fixed base: the layer's draws and its closed form must agree exactly in expectation
    rng = np.random.default_rng(6)
    S = 6
    counts = np.array([[3.0, 0, 0, 1, 0, 0], [0, 0, 0, 0, 0, 0], [0, 2, 0, 0, 0, 0]])
    base = rng.dirichlet(np.ones(S), size=3)
    lattice, weights = np.array([0.1, 3.0, np.inf]), np.array([0.5, 0.2, 0.3])
    M = 200_000
    draws = layer_draws(counts, np.broadcast_to(base, (M, 3, S)), lattice, weights, rng=rng)
    mc = np.sqrt(draws).mean(axis=0)
    se = np.sqrt(draws).std(axis=0) / np.sqrt(M)
    r = layer_sqrt_mean(counts, base, lattice, weights)
    assert np.all(np.abs(r - mc) < 5 * se + 1e-12)
    good = from_sqrt_mean(r)
    broken = sum(w * from_sqrt_mean(layer_sqrt_mean(counts, base, [c], [1.0]))
                 for c, w in zip(lattice, weights))          # mixed after squaring
    target = from_sqrt_mean(mc)
    assert np.abs(good - target).max() < 0.004
    assert np.abs(broken - target).max() > 0.02


def test_support_sqrt_mean_matches_its_draws():
    rng = np.random.default_rng(7)
    counts = np.array([[4.0, 0, 0, 1, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0], [0, 0, 1, 0, 0, 0, 0, 0]])
    pi = np.array([0.1, 0.5, 0.3, 0.1, 0, 0, 0, 0])
    draws = support_draws(counts, pi, 0.7, 200_000, rng=rng)
    mc, se = np.sqrt(draws).mean(axis=0), np.sqrt(draws).std(axis=0) / np.sqrt(draws.shape[0])
    assert np.all(np.abs(support_sqrt_mean(counts, pi, 0.7) - mc) < 5 * se + 1e-12)


def test_support_hypothesis_is_mixed_inside_the_expectation():
    # with the support weight forced to 1/2 (the evidence usually makes it 0 or 1), the
    # estimate must still match the belief's own draws, which pick a hypothesis per action
    mdp, _, data = _line_mdp()
    belief = CorrelatedTransitionModel.for_mdp(mdp, distinct_prior=None).update(*data)
    belief.refit()
    belief._layer.support_weights[:] = 0.5
    est = belief.hellinger_estimate(1000, rtol=0, rng=8)
    target = from_sqrt_mean(np.sqrt(belief.sample_many(6000, rng=9)).mean(axis=0))
    assert hellinger(target, est).max() < 0.01           # measured 0.004 (Monte-Carlo noise)
    # mixing the two hypotheses' estimates after squaring is a different estimate, and the
    # comparison with the draws rejects it
    layer_only = belief._layer.support_weights.copy()
    belief._layer.support_weights[:] = 0.0
    a = belief.hellinger_estimate(1000, rtol=0, rng=8)
    belief._layer.support_weights[:] = 1.0
    b = belief.hellinger_estimate(1000, rtol=0, rng=8)
    belief._layer.support_weights[:] = layer_only
    broken = 0.5 * a + 0.5 * b
    assert hellinger(target, broken).max() > 0.015       # measured 0.024


@pytest.mark.parametrize("variant", [pytest.param("default", marks=pytest.mark.slow),
                                     "layer_distinct", "layer", "no_layer"])
def test_correlated_estimate_matches_monte_carlo_over_its_own_draws(variant):
    # (here the support hypothesis takes ~0.99 of the weight: the "layer" variants switch it
    # off, so that the layer's Rao-Blackwellised path is what is compared)
    mdp, _, data = _line_mdp()
    kw = {"default": {}, "layer_distinct": {"support_prior": None},
          "layer": {"support_prior": None, "distinct_prior": None},
          "no_layer": {"concentration": None, "contamination_prior": None}}[variant]
    belief = CorrelatedTransitionModel.for_mdp(mdp, **kw).update(*data)
    est = belief.hellinger_estimate(1000, rtol=0, rng=8)
    draws = belief.sample_many(2500, rng=9)
    target = from_sqrt_mean(np.sqrt(draws).mean(axis=0))
    assert hellinger(target, est).max() < 0.012          # Monte-Carlo noise: about 0.005
    np.testing.assert_allclose(est.sum(axis=-1), 1.0)
    if variant == "layer_distinct":
        # the estimate is reproducible from its seed and beats the mean in expected loss
        np.testing.assert_array_equal(est, belief.hellinger_estimate(1000, rtol=0, rng=8))
        loss = np.mean(np.sum((np.sqrt(est)[None] - np.sqrt(draws)) ** 2, -1))
        loss_mean = np.mean(np.sum((np.sqrt(belief.mean())[None] - np.sqrt(draws)) ** 2, -1))
        assert loss < loss_mean


def test_correlated_estimate_needs_an_rng_and_dense_storage():
    mdp, _, data = _line_mdp()
    belief = CorrelatedTransitionModel.for_mdp(mdp).update(*data)
    with pytest.raises(ValueError, match="rng"):
        belief.hellinger_estimate()
    with pytest.raises(ValueError, match="n_draws|n:"):
        belief.hellinger_estimate(0, rng=1)
    sparse = CorrelatedTransitionModel.for_mdp(mdp, sparse=True).update(*data)
    with pytest.raises(ValueError, match="sparse storage"):
        sparse.hellinger_estimate(rng=1)
    with pytest.raises(ValueError, match="n_draws"):
        monte_carlo_sqrt_mean(belief, 0, rng=1)


def test_average_sqrt_draws_stops_where_the_noise_bound_first_meets_rtol():
    # rows r with additive noise of known spread: the rule must stop at the first doubling
    # (16, 32, 64, ...) where its own estimate of sum sigma^2 / (2 n |r|) over sum (1 - |r|)
    # is at most rtol, recomputed here from the same draws
    rng = np.random.default_rng(0)
    r = 0.9 * np.sqrt(rng.dirichlet(np.ones(5), size=(7, 3)))     # expected loss 0.1 per row
    pool = r[None] * (1.0 + 0.3 * rng.standard_normal((256, 7, 3, 5)))   # stops near 40 draws
    used = [0]

    def sqrt_draws(m):
        used[0] += m
        return pool[used[0] - m:used[0]]

    est, n = average_sqrt_draws(sqrt_draws, 256, rtol=0.01)
    expected = 256
    for k in (16, 32, 64, 128):
        x = pool[:k]
        m = x.mean(0)
        var = x.var(0, ddof=1).sum(-1)
        norm = np.sqrt((m ** 2).sum(-1))
        if np.sum(var / (2 * k * norm)) <= 0.01 * np.sum(1 - norm):
            expected = k
            break
    assert FIRST_DRAWS < n == expected < 256
    np.testing.assert_allclose(est, pool[:n].mean(0), rtol=1e-13)
    # rtol = 0 takes every draw; deterministic draws stop at the first batch
    assert average_sqrt_draws(lambda m: pool[:m], 100, rtol=0.0)[1] == 100
    assert average_sqrt_draws(lambda m: np.broadcast_to(r, (m, *r.shape)), 256)[1] == FIRST_DRAWS
    for bad in (-1.0, np.nan, np.inf):
        with pytest.raises(ValueError, match="rtol"):
            average_sqrt_draws(lambda m: pool[:m], 10, rtol=bad)
    with pytest.raises(TypeError, match="rtol"):
        average_sqrt_draws(lambda m: pool[:m], 10, rtol="0.01")
    with pytest.raises(ValueError, match="n_draws"):
        average_sqrt_draws(lambda m: pool[:m], 0)


@pytest.mark.parametrize("variant", ["no_layer", "layer_distinct"])
def test_adaptive_draws_cost_at_most_rtol_of_the_expected_loss(variant):
    # the early stop is a promise about the expected loss: against the optimum (4,000 draws),
    # the adaptive estimate's posterior expected loss (over 20,000 of the belief's own draws)
    # is at most about rtol higher. Measured (antithetic pairs): 16 draws at rtol = 1 %, 0.0-0.2 %
    # above; 48-128 draws at rtol = 0.1 %. Stopping at the first batch whatever the noise
    # fails the second rtol (0.3-0.6 % above, no layer).
    mdp, _, data = _line_mdp()
    kw = {"no_layer": {"concentration": None, "contamination_prior": None},
          "layer_distinct": {"support_prior": None}}[variant]
    belief = CorrelatedTransitionModel.for_mdp(mdp, **kw).update(*data)
    draws = belief.sample_many(20_000, rng=9)
    best = _expected_loss(belief.hellinger_estimate(4000, rtol=0, rng=1), draws)
    for rtol in (HELLINGER_RTOL, HELLINGER_RTOL / 10):
        for seed in range(3):
            est = belief.hellinger_estimate(rtol=rtol, rng=seed)
            assert _expected_loss(est, draws) <= best * (1 + 1.2 * rtol)
            assert FIRST_DRAWS <= belief.hellinger_draws_ <= 256
    assert belief.hellinger_draws_ > FIRST_DRAWS          # the smaller rtol needed more draws


def test_antithetic_pairs_mirror_about_the_posterior_mean():
    # the pairs' draws are draws of q(psi) (the mirror is about the fit's psi_mean: the moments
    # of P match independent draws'), and a pair's average has much less variance than two
    # independent draws' average (mirroring about 0 or the prior mean fails the first check)
    mdp, _, data = _line_mdp()
    belief = CorrelatedTransitionModel.for_mdp(mdp, concentration=None,
                                               contamination_prior=None).update(*data)
    belief.refit()
    both = belief._base_draws(4000, np.random.default_rng(0), mirrored=True)
    plain = belief._base_draws(8000, np.random.default_rng(1))
    for f in (np.asarray, np.sqrt, np.square):      # means of P, sqrt(P) and P^2 within 4.5 s.e.
        se = np.sqrt(f(plain).var(0) / 8000 + f(both).var(0) / 8000)
        assert np.all(np.abs(f(both).mean(0) - f(plain).mean(0)) <= 4.5 * se + 1e-12)
    pairs = belief._sqrt_values(4000, np.random.default_rng(2))
    independent = 0.5 * (np.sqrt(plain[:4000]) + np.sqrt(plain[4000:]))
    assert pairs.var(0).sum() < 0.2 * independent.var(0).sum()


def test_sampling_is_unchanged_by_the_refactoring_of_the_layer_draws():
    # sample_many draws the same numbers whether or not hellinger_estimate was called before
    mdp, _, data = _line_mdp()
    a = CorrelatedTransitionModel.for_mdp(mdp).update(*data)
    b = CorrelatedTransitionModel.for_mdp(mdp).update(*data)
    b.hellinger_estimate(10, rng=3)
    np.testing.assert_array_equal(a.sample_many(5, rng=11), b.sample_many(5, rng=11))


# ----------------------------------------------------------------------------- sysid option


def test_sysid_point_estimate_option_applies_to_every_method_and_auto_is_hellinger_when_dense():
    from corrpriors.experiments.gym_sysid import SysIdExperiment, resolve_point_estimate
    from corrpriors.runner._run import seed_generator

    exp = SysIdExperiment("FrozenLake-v1")
    base = exp.Config(transitions=(40, 150), methods=("dirichlet_sparse", "pg"))
    assert base.point_estimate == "auto" and exp.point_estimate(base) == "hellinger"
    means = dataclasses.replace(base, point_estimate="mean")
    mean = exp.run_seed(means, rng=seed_generator(exp.NAME, 0))
    again = exp.run_seed(means, rng=seed_generator(exp.NAME, 0))
    hell = exp.run_seed(dataclasses.replace(base, point_estimate="hellinger"),
                        rng=seed_generator(exp.NAME, 0))
    auto = exp.run_seed(base, rng=seed_generator(exp.NAME, 0))
    for m in base.methods:
        np.testing.assert_array_equal(mean.curves["hellinger"][m], again.curves["hellinger"][m])
        assert not np.array_equal(mean.curves["hellinger"][m], hell.curves["hellinger"][m])
        np.testing.assert_array_equal(auto.curves["hellinger"][m], hell.curves["hellinger"][m])
    # "auto" scores the means where a correlated belief stores sparsely (no dense draws)
    from corrpriors.applications.transitions import SPARSE_FROM_STATES

    assert resolve_point_estimate("auto", ("pg", "dirichlet_sparse"), SPARSE_FROM_STATES) == "mean"
    assert resolve_point_estimate("auto", ("pg",), SPARSE_FROM_STATES - 1) == "hellinger"
    assert resolve_point_estimate("auto", ("dirichlet_sparse",), 10 ** 6) == "hellinger"
    assert resolve_point_estimate("mean", ("pg",), 10) == "mean"
    # the Dirichlet curve is the closed-form Hellinger estimate of the same exploration's counts
    import gymnasium

    from corrpriors.envs import from_gymnasium, random_exploration

    env = gymnasium.make("FrozenLake-v1")
    mdp = from_gymnasium(env)
    data = random_exploration(env, 150, rng=seed_generator(exp.NAME, 0))
    rows = hell.extras["rows"]
    counts = np.zeros((16, 4, 16))
    np.add.at(counts, (data.states, data.actions, data.next_states), 1)
    est = from_sqrt_mean(dirichlet_sqrt_mean(counts + base.alpha_sparse))
    expected = hellinger(mdp.transitions, est)[rows].mean()
    assert hell.curves["hellinger"]["dirichlet_sparse"][1] == pytest.approx(expected, abs=1e-12)
    with pytest.raises(ValueError, match="point_estimate"):
        exp.check_config(dataclasses.replace(base, point_estimate="median"))


def test_support_setting_switches_off_only_the_support_hypothesis():
    from corrpriors.experiments._gym import make_belief
    from corrpriors.experiments.gym_psrl import PSRLConfig
    from corrpriors.experiments.gym_sysid import SysIdExperiment

    mdp, _, _ = _line_mdp()
    for config in (PSRLConfig(), SysIdExperiment("FrozenLake-v1").Config()):
        on = make_belief("pg", mdp, config)
        off = make_belief("pg", mdp, dataclasses.replace(config, support="none"))
        assert on.support_prior == 0.5 and off.support_prior is None
        assert off.concentrations_ is not None and off.distinct_ is not None   # layer kept
        assert off.contamination_ is not None
    with pytest.raises(ValueError, match="support"):
        SysIdExperiment("FrozenLake-v1").check_config(
            dataclasses.replace(SysIdExperiment("FrozenLake-v1").Config(), support="off"))


def test_transfer_belief_averages_its_own_mixture_draws():
    from corrpriors.applications.multitask import MultiTaskTransitionModel
    from corrpriors.envs import windy_task_family
    from corrpriors.experiments.transfer import uniform_transitions
    from corrpriors.mdp import transition_counts

    mdps, _ = windy_task_family(0.8, 2, rng=3, shape=(3, 3))
    belief = MultiTaskTransitionModel.for_mdps(mdps, lengthscale=2.0, similarities=(0.0, 0.9))
    rng = np.random.default_rng(0)
    belief.set_counts(0, transition_counts(uniform_transitions(mdps[0], 200, rng=rng), 9, 4))
    view = belief.task(1)                     # no data: a mixture over the similarities
    est = view.hellinger_estimate(400, rtol=0, rng=1)
    draws = view.sample_many(400, rng=1)      # the mixture's own draws, one batch
    assert len(set(np.round(draws[:, 0, 0, 0], 12))) > 1
    np.testing.assert_allclose(est, from_sqrt_mean(np.sqrt(draws).mean(axis=0)), atol=1e-12)
    np.testing.assert_allclose(est.sum(-1), 1.0)


def test_paper_system_id_point_estimate_option():
    from corrpriors.experiments import system_id

    config = system_id.Config(transitions=(60,), lengthscales=(2.0,), scale_step=0.5, max_iter=30,
                              tol=1e-4)
    mean = system_id.run_seed(config, rng=np.random.default_rng(0))
    hell = system_id.run_seed(dataclasses.replace(config, point_estimate="hellinger"),
                              rng=np.random.default_rng(0))
    for m in system_id.METHODS:
        assert not np.array_equal(mean.curves["hellinger"][m], hell.curves["hellinger"][m])
    # the Dirichlet rows: the closed form of the same walk's counts
    from corrpriors.envs import tunnel_world
    from corrpriors.mdp import mean_hellinger, transition_counts

    mdp = tunnel_world()
    walk = system_id.random_walk(mdp, 60, np.random.default_rng(0))
    counts = transition_counts(walk, mdp.n_states, mdp.n_actions)
    est = from_sqrt_mean(dirichlet_sqrt_mean(counts + config.alpha_sparse))
    assert hell.curves["hellinger"]["dirichlet_sparse"][0] == pytest.approx(
        mean_hellinger(mdp.transitions, est), abs=1e-12)
    with pytest.raises(ValueError, match="point_estimate"):
        system_id.check_config(dataclasses.replace(config, point_estimate="mode"))
