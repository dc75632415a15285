"""Imitation-learning estimator: counts, Dirichlet closed form, PG recovery of a smooth policy."""

from __future__ import annotations

import numpy as np
import pytest

from corrpriors.applications.imitation import (
    PolicyEstimator,
    demonstration_counts,
    state_kernel,
)


def _grid(n):
    yy, xx = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    return np.c_[yy.ravel(), xx.ravel()].astype(float)


def _smooth_policy(coords):
    """A policy that varies smoothly over the grid: logits linear in the coordinates."""
    c = (coords - coords.mean(0)) / coords.std(0)
    logits = np.c_[c[:, 0], c[:, 1], -c[:, 0], -c[:, 1]] * 1.5
    p = np.exp(logits - logits.max(1, keepdims=True))
    return p / p.sum(1, keepdims=True)


def _hellinger(p, q):
    return np.sqrt(0.5 * ((np.sqrt(p) - np.sqrt(q)) ** 2).sum(-1)).mean()


def _demos(policy, n, rng):
    s = rng.integers(0, policy.shape[0], n)
    u = rng.random(n)[:, None]
    a = (np.cumsum(policy[s], 1) < u).sum(1)
    return s, np.minimum(a, policy.shape[1] - 1)


def test_demonstration_counts_matches_loop():
    rng = np.random.default_rng(0)
    s, a = rng.integers(0, 7, 300), rng.integers(0, 3, 300)
    c = demonstration_counts(s, a, 7, 3)
    ref = np.zeros((7, 3), dtype=int)
    for si, ai in zip(s, a):
        ref[si, ai] += 1
    np.testing.assert_array_equal(c, ref)
    assert c.dtype.kind == "i"


def test_demonstration_counts_rejects_bad_input():
    with pytest.raises(ValueError, match="states"):
        demonstration_counts([0, 7], [0, 1], 7, 3)
    with pytest.raises(ValueError, match="actions"):
        demonstration_counts([0, 1], [0, 3], 7, 3)
    with pytest.raises(ValueError, match="equal length"):
        demonstration_counts([0, 1], [0], 7, 3)


def test_dirichlet_estimator_closed_form():
    counts = np.array([[3, 1, 0], [0, 0, 0], [2, 2, 2]])
    est = PolicyEstimator("dirichlet", alpha=0.5).fit(counts)
    ref = (counts + 0.5) / (counts + 0.5).sum(1, keepdims=True)
    np.testing.assert_allclose(est.policy_, ref, rtol=1e-12)
    np.testing.assert_allclose(PolicyEstimator("dirichlet", alpha=1e-3).fit(counts).policy_[1], 1 / 3)


def test_state_kernel_default_lengthscale_is_largest_distance():
    coords = _grid(4)
    k = state_kernel(coordinates=coords)
    d = np.sqrt(((coords[:, None] - coords[None]) ** 2).sum(-1))
    np.testing.assert_allclose(k.gram(), np.exp(-(d ** 2) / d.max() ** 2), rtol=1e-10, atol=1e-12)


def test_pg_recovers_smooth_policy_as_data_grows():
    rng = np.random.default_rng(1)
    coords = _grid(6)
    truth = _smooth_policy(coords)
    s, a = _demos(truth, 3000, rng)
    errors_pg, errors_dir = [], []
    for d in (20, 200, 3000):
        counts = demonstration_counts(s[:d], a[:d], 36, 4)
        pg = PolicyEstimator("pg", coordinates=coords, max_iter=500, tol=1e-7).fit(counts)
        errors_pg.append(_hellinger(truth, pg.policy_))
        errors_dir.append(_hellinger(truth, PolicyEstimator("dirichlet").fit(counts).policy_))
    assert errors_pg[0] > errors_pg[1] > errors_pg[2]
    assert errors_pg[2] < 0.08
    # with little data the correlated model generalises, the independent one cannot
    assert errors_pg[0] < errors_dir[0] and errors_pg[1] < errors_dir[1]


def test_policy_methods_and_samples_reproducible():
    rng = np.random.default_rng(2)
    coords = _grid(4)
    truth = _smooth_policy(coords)
    s, a = _demos(truth, 60, rng)
    est = PolicyEstimator("pg", coordinates=coords, max_iter=300).fit_demonstrations(s, a, 16, 4)
    plug = est.policy()
    np.testing.assert_allclose(plug, est.policy_)
    mc1 = est.policy("mc", n_samples=400, rng=5)
    mc2 = est.policy("mc", n_samples=400, rng=5)
    np.testing.assert_array_equal(mc1, mc2)
    np.testing.assert_allclose(mc1.sum(1), 1.0)
    assert _hellinger(plug, mc1) < 0.1
    draws = est.sample_policies(7, rng=np.random.default_rng(3))
    assert draws.shape == (7, 16, 4)
    np.testing.assert_allclose(draws.sum(-1), 1.0)
    again = est.sample_policies(7, rng=np.random.default_rng(3))
    np.testing.assert_array_equal(draws, again)
    assert np.isfinite(est.scale_) and est.scale_ > 0
    assert est.lengthscale_ == pytest.approx(np.sqrt(18))


def test_estimator_errors():
    with pytest.raises(ValueError, match="model"):
        PolicyEstimator("gp").fit(np.ones((3, 2)))
    with pytest.raises(ValueError, match="coordinates"):
        PolicyEstimator("pg").fit(np.ones((3, 2)))
    with pytest.raises(ValueError, match="fit"):
        PolicyEstimator("dirichlet").policy()
    with pytest.raises(ValueError, match="counts"):
        PolicyEstimator("dirichlet").fit(-np.ones((3, 2)))


def test_candidate_lengthscales_pick_the_best_elbo():
    from corrpriors.core.model import CorrelatedMultinomial

    rng = np.random.default_rng(4)
    coords = _grid(4)
    s, a = _demos(_smooth_policy(coords), 80, rng)
    counts = demonstration_counts(s, a, 16, 4)
    est = PolicyEstimator("pg", coordinates=coords, lengthscale=(1.0, 0.0), max_iter=300).fit(counts)
    np.testing.assert_allclose(sorted(est.elbo_by_lengthscale_), [1.0, np.sqrt(18)])
    best = max(est.elbo_by_lengthscale_, key=est.elbo_by_lengthscale_.get)
    assert est.lengthscale_ == best
    ref = CorrelatedMultinomial(covariance=state_kernel(coordinates=coords, lengthscale=best),
                                learn_scale=True, max_iter=300).fit(counts)
    np.testing.assert_allclose(est.policy_, ref.probs(), atol=1e-10)


def test_demonstration_counts_checks_the_table_size():
    """n_states=-1 was a numpy error ('minlength' must not be negative), 2.5 was cut to 2 under a
    message naming states, 10**12 x 10**6 a MemoryError."""
    for args, match in [((-1, 2), r"^n_states: expected an integer >= 1, got -1"),
                        ((0, 2), r"^n_states: expected an integer >= 1, got 0"),
                        ((2.5, 2), r"^n_states: expected an integer >= 1, got 2.5"),
                        ((3, True), r"^n_actions: expected an integer >= 1, got True"),
                        ((10**12, 10**6), r"^state_action_counts: the \(S, A\) int64 counts of "
                                          r"1,000,000,000,000 states x 1,000,000 actions would need about")]:
        with pytest.raises(ValueError, match=match):
            demonstration_counts([0], [1], *args)
    np.testing.assert_array_equal(demonstration_counts([1], [0], np.int64(2), 2.0), [[0, 0], [1, 0]])


def test_learn_scale_must_be_a_bool():
    """learn_scale="no" learned the scale: CorrelatedMultinomial truth-tested it."""
    for model in ("pg", "dirichlet"):
        with pytest.raises(TypeError, match="^learn_scale: expected True or False, got 'no'"):
            PolicyEstimator(model, coordinates=_grid(2), learn_scale="no").fit(np.ones((4, 2)))


def test_sample_policies_takes_an_integer_count(monkeypatch):
    est = PolicyEstimator("dirichlet").fit([[3, 1], [0, 0]])
    for bad in (2.7, True, 0):
        with pytest.raises(ValueError, match=r"^n: expected an integer >= 1, got "):
            est.sample_policies(bad, rng=0)
    assert est.sample_policies(2.0, rng=0).shape == (2, 2, 2)
    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "1M")
    with pytest.raises(ValueError, match=r"^sample_policies: 100,000 draws of an \(S, A\) = \(2, 2\) policy"):
        est.sample_policies(100_000, rng=0)


def test_warm_start_after_switching_from_dirichlet_fits_pg_from_scratch():
    """model 'dirichlet' -> 'pg' with warm_start=True raised AttributeError ('DirichletMultinomial'
    object has no attribute 'scale_'): the Dirichlet fit was taken for a PG one."""
    from corrpriors.core.model import CorrelatedMultinomial

    coords = _grid(3)
    counts = demonstration_counts(*_demos(_smooth_policy(coords), 40, np.random.default_rng(6)), 9, 4)
    est = PolicyEstimator("dirichlet", coordinates=coords, max_iter=200).fit(counts)
    est.model = "pg"
    est.fit(counts, warm_start=True)
    assert isinstance(est.model_, CorrelatedMultinomial)
    fresh = PolicyEstimator("pg", coordinates=coords, max_iter=200).fit(counts)
    np.testing.assert_array_equal(est.policy_, fresh.policy_)
    assert est.scale_ == fresh.scale_
    pg_model = est.model_                       # a PG fit is still warm-started in place
    est.fit(counts, warm_start=True)
    assert est.model_ is pg_model


def test_candidate_lengthscales_are_checked_naming_lengthscale():
    """lengthscale=[1.0, 'x'] failed with "could not convert string to float: 'x'"."""
    coords = _grid(2)
    for cands, match in [([1.0, "x"], r"^lengthscale\[1\]: expected a positive number, got 'x'"),
                         ([-2.0, 1.0], r"^lengthscale\[0\]: expected a finite non-negative number"),
                         ([1.0, float("nan")], r"^lengthscale\[1\]: expected a finite")]:
        with pytest.raises(ValueError, match=match):
            PolicyEstimator("pg", coordinates=coords, lengthscale=cands).fit(np.ones((4, 2)))


def test_learn_scale_docstring_says_plain_em_by_default():
    """The docstring said '(MAP-)EM with the core's default hyper-prior'; the core's default
    scale_prior is None, i.e. plain maximum-likelihood EM."""
    import inspect

    from corrpriors.core.model import CorrelatedMultinomial

    assert inspect.signature(CorrelatedMultinomial).parameters["scale_prior"].default is None
    doc = " ".join(PolicyEstimator.__doc__.split())
    assert "default hyper-prior" not in doc
    assert "plain maximum-likelihood EM" in doc and 'model_options={"scale_prior"' in doc
