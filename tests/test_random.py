"""The library's one implementation of each random draw (``corrpriors._random``), against
independent oracles: a brute-force inverse CDF, chi-square frequencies, closed-form Dirichlet
moments and Beta marginals."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from corrpriors._random import as_generator, inverse_cdf, sample_categorical, sample_dirichlet


def _brute_inverse_cdf(p_row, u):
    """First category whose cumulative weight exceeds u * total (a plain Python loop)."""
    total = sum(p_row)
    acc = 0.0
    for k, pk in enumerate(p_row):
        acc += pk
        if u * total < acc:
            return k
    return len(p_row) - 1


@pytest.mark.parametrize("seed", range(5))
def test_inverse_cdf_matches_brute_force_for_rows_and_a_single_row(seed):
    rng = np.random.default_rng(seed)
    p = rng.random((40, 6)) * (rng.random((40, 6)) < 0.6)   # many zero-probability categories
    p[:, 2] += 0.1                                          # every row has a positive total
    u = rng.random(40)
    u[:3] = [0.0, np.nextafter(1.0, 0.0), 0.5]
    expected = [_brute_inverse_cdf(list(row), float(x)) for row, x in zip(p, u)]
    np.testing.assert_array_equal(inverse_cdf(np.cumsum(p, axis=1), u), expected)
    # the 1-d branch (binary search), with one row shared by many uniforms
    one = [_brute_inverse_cdf(list(p[0]), float(x)) for x in u]
    np.testing.assert_array_equal(inverse_cdf(np.cumsum(p[0]), u), one)
    assert inverse_cdf(np.cumsum(p[0]), u[5]).shape == ()


def test_inverse_cdf_never_selects_a_zero_probability_category():
    p = np.array([0.0, 0.3, 0.0, 0.7, 0.0, 0.0])
    u = np.concatenate([[0.0, np.nextafter(1.0, 0.0)], np.random.default_rng(0).random(5000)])
    for cdf in (np.cumsum(p), np.broadcast_to(np.cumsum(p), (u.size, p.size))):
        draws = inverse_cdf(cdf, u)
        assert set(np.unique(draws)) <= {1, 3}
    # a cumulative sum whose total falls short of 1 by round-off still ends at the last
    # positive category
    q = np.full(10, 0.1)
    assert inverse_cdf(np.cumsum(q), np.nextafter(1.0, 0.0)) == 9


def test_sample_categorical_chi_square_per_row():
    p = np.array([[0.1, 0.2, 0.3, 0.4], [0.7, 0.0, 0.25, 0.05], [0.0, 0.0, 0.0, 2.0]])
    n = 20000
    draws = sample_categorical(np.broadcast_to(p, (n,) + p.shape), rng=11)
    assert draws.shape == (n, 3) and draws.dtype == np.int64
    for s in range(2):
        q = p[s] / p[s].sum()
        observed = np.bincount(draws[:, s], minlength=4)
        pos = q > 0
        assert observed[~pos].sum() == 0
        assert stats.chisquare(observed[pos], n * q[pos]).pvalue > 1e-4
    assert np.all(draws[:, 2] == 3)   # unnormalised row: all mass on the last category


def test_sample_categorical_uses_one_uniform_per_row():
    # a loop drawing its own uniforms (a Gym step) consumes the stream like one call
    p = np.random.default_rng(0).dirichlet(np.ones(5), size=(4, 3))
    rng_a, rng_b = np.random.default_rng(5), np.random.default_rng(5)
    draws = sample_categorical(p, rng=rng_a)
    u = rng_b.random((4, 3))
    looped = [[inverse_cdf(np.cumsum(p[i, j]), u[i, j]) for j in range(3)] for i in range(4)]
    np.testing.assert_array_equal(draws, looped)
    assert rng_a.random() == rng_b.random()


@pytest.mark.parametrize("probs, match", [
    (np.array([[0.5, -0.1, 0.6]]), "non-negative"),
    (np.array([[0.5, np.nan]]), "finite"),
    (np.array([[0.0, 0.0]]), "positive total"),
    (np.zeros((2, 0)), "K >= 1"),
])
def test_sample_categorical_rejects_bad_probs(probs, match):
    with pytest.raises(ValueError, match=f"probs: .*{match}"):
        sample_categorical(probs, rng=0)


def _dirichlet_moments(alpha):
    a0 = alpha.sum()
    mean = alpha / a0
    return mean, mean * (1 - mean) / (a0 + 1)


@pytest.mark.parametrize("alpha", [np.array([1.0, 2.0, 5.0]),       # plain Gamma branch
                                   np.array([0.3, 2.0, 5.0, 0.05]),  # log-space branch
                                   np.full(4, 1e-3)])                # tiny: near one-hot
def test_sample_dirichlet_moments_match_closed_form(alpha):
    n = 40000
    draws = sample_dirichlet(alpha, n, rng=3)
    assert draws.shape == (n, alpha.size)
    assert np.isfinite(draws).all() and (draws >= 0).all()
    np.testing.assert_allclose(draws.sum(axis=-1), 1.0, rtol=0, atol=1e-12)
    mean, var = _dirichlet_moments(alpha)
    # mean: within 5 standard errors; variance: within 5 standard errors of the sample variance
    assert np.all(np.abs(draws.mean(0) - mean) <= 5 * np.sqrt(var / n))
    fourth = ((draws - mean) ** 4).mean(0)
    se_var = np.sqrt(np.maximum(fourth - var ** 2, 0) / n)
    assert np.all(np.abs(draws.var(0) - var) <= 5 * se_var + 1e-12)


@pytest.mark.parametrize("alpha", [np.array([0.05, 0.3, 0.2]), np.array([1.5, 3.0, 2.0])])
def test_sample_dirichlet_marginal_is_beta(alpha):
    # X_1 ~ Beta(alpha_1, alpha_0 - alpha_1): a Kolmogorov-Smirnov test against scipy
    x1 = sample_dirichlet(alpha, 5000, rng=8)[:, 0]
    assert stats.kstest(x1, stats.beta(alpha[0], alpha.sum() - alpha[0]).cdf).pvalue > 1e-4


def test_sample_dirichlet_tiny_concentrations_give_valid_simplex_points():
    alpha = np.full((6, 3), 1e-3)
    alpha[0, 0] = 5.0
    draws = sample_dirichlet(alpha, 200, rng=1)
    assert draws.shape == (200, 6, 3)
    assert not np.isnan(draws).any() and (draws >= 0).all()
    np.testing.assert_allclose(draws.sum(axis=-1), 1.0, rtol=0, atol=1e-12)
    # plain Gamma draws underflow here: the naive recipe gives 0 / 0 in some rows
    with np.errstate(invalid="ignore"):
        g = np.random.default_rng(1).standard_gamma(np.broadcast_to(alpha, (200, 6, 3)))
        assert np.isnan(g / g.sum(axis=-1, keepdims=True)).any()


def test_sample_dirichlet_reproducible_and_seed_sensitive():
    alpha = np.array([[0.5, 0.5, 2.0]])
    np.testing.assert_array_equal(sample_dirichlet(alpha, 5, rng=3), sample_dirichlet(alpha, 5, rng=3))
    assert not np.array_equal(sample_dirichlet(alpha, 5, rng=3), sample_dirichlet(alpha, 5, rng=4))


@pytest.mark.parametrize("alpha, n, match", [
    (np.array([1.0, 0.0]), 3, "alpha: expected finite positive"),
    (np.array([1.0, np.inf]), 3, "alpha: expected finite positive"),
    (np.array([]), 3, "alpha: expected a non-empty"),
    (np.array([1.0, 1.0]), 0, "n: expected an integer >= 1"),
    (np.array([1.0, 1.0]), 2.5, "n: expected an integer >= 1"),
])
def test_sample_dirichlet_rejects_bad_input(alpha, n, match):
    with pytest.raises(ValueError, match=match):
        sample_dirichlet(alpha, n, rng=0)


def test_as_generator_names_the_argument():
    with pytest.raises(TypeError, match="mc_rng: expected None, an int"):
        as_generator("seed", name="mc_rng")
    with pytest.raises(ValueError, match="rng: an integer seed must be non-negative"):
        as_generator(-1)
    g = np.random.default_rng(0)
    assert as_generator(g) is g
