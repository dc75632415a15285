"""Polya-Gamma moments and the guarded sampler.

Oracles: the series definition PG(b, c) = 1/(2 pi^2) sum_k g_k / ((k-1/2)^2 + c^2/(4 pi^2)),
g_k ~ Gamma(b, 1), summed numerically; sample moments within a few standard errors.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corrpriors.core.polya_gamma import pg_mean, pg_var, sample_pg


def series_moments(b, c, n_terms=200_000):
    """Mean and variance of PG(b, c) from the series, tails by the midpoint-rule integral."""
    k = np.arange(1, n_terms + 1) - 0.5
    z = abs(c) / (2 * np.pi)
    d = k**2 + z**2
    s1 = np.sum(1.0 / d[::-1])
    s2 = np.sum(1.0 / d[::-1] ** 2)
    # sum_{k > n} f(k - 1/2) ~ integral_n^inf f(x) dx  (midpoint rule, error O(n^-3))
    if z > 0:
        s1 += (np.pi / 2 - np.arctan(n_terms / z)) / z
    else:
        s1 += 1.0 / n_terms
    s2 += 1.0 / (3.0 * n_terms**3)
    return b * s1 / (2 * np.pi**2), b * s2 / (4 * np.pi**4)


@pytest.mark.parametrize("c", [0.0, 1e-7, 1e-4, 0.01, 0.5, 0.999, 1.0, 1.001, 3.0, 20.0, 200.0, -7.5])
@pytest.mark.parametrize("b", [1.0, 2.5])
def test_moments_match_series_definition(b, c):
    m, v = series_moments(b, c)
    assert pg_mean(b, c) == pytest.approx(m, rel=1e-8)
    assert pg_var(b, c) == pytest.approx(v, rel=1e-8)


def test_moments_limits_and_broadcasting():
    b = np.array([[1.0], [4.0]])
    c = np.array([0.0, 1e-12, 1e-3, 1e3, 1e6, -1e6])
    m = pg_mean(b, c)
    v = pg_var(b, c)
    assert m.shape == v.shape == (2, 6)
    np.testing.assert_allclose(m[:, 0], b[:, 0] / 4, rtol=1e-15)
    np.testing.assert_allclose(v[:, 0], b[:, 0] / 24, rtol=1e-15)
    np.testing.assert_allclose(m[:, 1], b[:, 0] / 4, rtol=1e-15)
    # large |c|: mean -> b / (2|c|), variance -> b / (2|c|^3) (sech^2 term vanishes)
    np.testing.assert_allclose(m[:, 4], b[:, 0] / 2e6, rtol=1e-12)
    np.testing.assert_allclose(v[:, 4], b[:, 0] / 2e18, rtol=1e-12)
    np.testing.assert_array_equal(m[:, 4], m[:, 5])
    assert np.all(np.isfinite(m)) and np.all(np.isfinite(v)) and np.all(v > 0)
    np.testing.assert_array_equal(pg_mean(0.0, 3.0), 0.0)


@settings(max_examples=200, deadline=None)
@given(b=st.floats(1e-3, 1e5), c=st.floats(-1e6, 1e6))
def test_pg_mean_property(b, c):
    m = float(pg_mean(b, c))
    v = float(pg_var(b, c))
    assert np.isfinite(m) and 0 < m <= b / 4 * (1 + 1e-15)
    assert np.isfinite(v) and 0 < v <= b / 24 * (1 + 1e-12)
    assert m == float(pg_mean(b, -c))


@given(c=st.floats(0, 1e-3))
def test_pg_mean_tends_to_b_over_4(c):
    assert float(pg_mean(2.0, c)) == pytest.approx(0.5 - 2.0 * c**2 / 48, rel=1e-12, abs=1e-15)


# Grid of the known-bad upstream regimes (polyagamma 2.0.2): b = 1 with c >= 180, b = 10-50 with
# c >= 50, b >= 100 with c = 1000 (NaN), small |c| with the alternate method, fractional b.
GRID_B = [1.0, 2.0, 10.0, 50.0, 100.0, 1000.0, 1e4]
GRID_C = [0.0, 0.5, 5.0, 50.0, 180.0, 1000.0, 1e4]
EXTRA = [(1.0, -180.0), (10.0, -50.0), (100.0, -1000.0), (2.0, -0.5), (1e4, -5.0),
         (0.3, 0.0), (0.7, 0.5), (2.7, 0.3), (3.7, 1.0), (7.5, 4.0), (2.7, 6.0), (150.5, 2.0),
         (199.0, 4.9), (200.0, 0.0), (250.0, 3.0)]


def test_sample_moments_over_grid():
    rng = np.random.default_rng(20261126)
    n = 3000
    cells = [(b, c) for b in GRID_B for c in GRID_C] + EXTRA
    b = np.repeat([bc[0] for bc in cells], n)
    c = np.repeat([bc[1] for bc in cells], n)
    x = sample_pg(b, c, rng=rng).reshape(len(cells), n)
    assert np.all(np.isfinite(x)) and np.all(x > 0)
    bb = np.array([bc[0] for bc in cells])
    cc = np.array([bc[1] for bc in cells])
    mean, var = pg_mean(bb, cc), pg_var(bb, cc)
    z = (x.mean(axis=1) - mean) / np.sqrt(var / n)
    bad = [(cells[i], round(float(z[i]), 1)) for i in np.flatnonzero(np.abs(z) > 4.5)]
    assert not bad, f"sample mean off by > 4.5 s.e. at (b, c): {bad}"
    ratio = x.var(axis=1, ddof=1) / var
    bad = [(cells[i], round(float(ratio[i]), 3)) for i in np.flatnonzero(np.abs(ratio - 1) > 0.2)]
    assert not bad, f"sample variance off by > 20 % at (b, c): {bad}"


def test_sample_pg_regimes_are_not_the_upstream_default():
    """b = 1, c = 180 was 57x too large upstream; our routing must give the right mean."""
    x = sample_pg(np.ones(2000), 180.0, rng=np.random.default_rng(1))
    assert abs(x.mean() / float(pg_mean(1.0, 180.0)) - 1) < 0.1


def test_sample_pg_seed_reproducibility_and_shapes():
    b = np.array([[0.0, 1.0, 2.5, 40.0, 300.0]])
    c = np.array([[1.0], [-8.0], [0.0]])
    x1 = sample_pg(b, c, rng=np.random.default_rng(5))
    x2 = sample_pg(b, c, rng=np.random.default_rng(5))
    x3 = sample_pg(b, c, rng=np.random.default_rng(6))
    assert x1.shape == (3, 5)
    np.testing.assert_array_equal(x1, x2)
    assert not np.array_equal(x1[:, 1:], x3[:, 1:])
    np.testing.assert_array_equal(x1[:, 0], 0.0)
    assert np.all(x1[:, 1:] > 0)
    assert sample_pg(3.0, 0.0, rng=7) == sample_pg(3.0, 0.0, rng=7)
    np.testing.assert_array_equal(sample_pg(np.zeros((2, 3)), 1.0, rng=0), np.zeros((2, 3)))


def test_sample_pg_normal_threshold_switch():
    rng = np.random.default_rng(2)
    n = 4000
    x = sample_pg(np.full(n, 300.0), 2.0, rng=rng, normal_threshold=np.inf)
    z = (x.mean() - pg_mean(300.0, 2.0)) / np.sqrt(pg_var(300.0, 2.0) / n)
    assert abs(z) < 4.5


@pytest.mark.parametrize("b, c, match", [
    (np.nan, 1.0, "b: contains NaN"),
    (1.0, np.nan, "c: contains NaN"),
    (-1.0, 1.0, "b: Polya-Gamma shapes must be >= 0"),
    (np.inf, 1.0, "b: contains infinite"),
    (1.0, np.inf, "c: contains infinite"),
    ("x", 1.0, "b: expected a real array"),
])
def test_bad_input_raises(b, c, match):
    with pytest.raises(ValueError, match=match):
        sample_pg(b, c, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match=match):
        pg_mean(b, c)
    with pytest.raises(ValueError, match=match):
        pg_var(b, c)


def test_bad_normal_threshold_raises():
    with pytest.raises(ValueError, match="normal_threshold"):
        sample_pg(1.0, 1.0, rng=0, normal_threshold=0.0)
