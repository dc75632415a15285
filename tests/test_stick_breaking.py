"""Hypothesis properties of the logistic stick-breaking map (core/stick_breaking.py).

Oracles: the inverse map, finite-difference Jacobians and a brute-force loop for the count
statistics.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from corrpriors.core.stick_breaking import (
    count_statistics,
    log_det_jacobian,
    log_probs,
    pi_to_psi,
    psi_to_pi,
    uniform_psi,
)


def psi_arrays(bound, max_k=8, max_batch=4):
    shapes = st.tuples(st.integers(1, max_batch), st.integers(1, max_k - 1))
    return shapes.flatmap(lambda s: arrays(np.float64, s, elements=st.floats(-bound, bound)))


@settings(max_examples=200, deadline=None)
@given(psi_arrays(30.0))
def test_round_trip_psi_pi_psi(psi):
    pi = psi_to_pi(psi)
    assert pi.dtype == np.float64
    back = pi_to_psi(pi)
    np.testing.assert_allclose(back, psi, rtol=1e-9, atol=1e-8)


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 9), st.integers(0, 2**32 - 1))
def test_round_trip_pi_psi_pi(K, seed):
    pi = np.random.default_rng(seed).dirichlet(np.full(K, 0.7), size=3)
    pi = np.clip(pi, 1e-300, None)
    pi /= pi.sum(-1, keepdims=True)
    np.testing.assert_allclose(psi_to_pi(pi_to_psi(pi)), pi, rtol=1e-9, atol=1e-15)


@settings(max_examples=300, deadline=None)
@given(psi_arrays(1e3))
def test_simplex_membership_at_extreme_psi(psi):
    pi = psi_to_pi(psi)
    assert pi.shape == psi.shape[:-1] + (psi.shape[-1] + 1,)
    assert np.all(np.isfinite(pi)) and np.all(pi >= 0) and np.all(pi <= 1)
    np.testing.assert_allclose(pi.sum(-1), 1.0, rtol=0, atol=1e-12)
    lp = log_probs(psi)
    assert not np.isnan(lp).any() and np.all(lp <= 1e-12)


def test_extreme_values_are_the_limits():
    psi = np.array([[1e3, 0.0], [-1e3, 1e3], [-1e3, -1e3]])
    np.testing.assert_allclose(psi_to_pi(psi), [[1, 0, 0], [0, 1, 0], [0, 0, 1]], atol=1e-300)
    np.testing.assert_allclose(psi_to_pi(uniform_psi(5)), np.full(5, 0.2), rtol=1e-14)


def _fd_log_det(psi, h=1e-5):
    """log |det d pi_{1:K-1} / d psi| by central differences of log pi (O(1) entries, so the
    differences stay accurate when pi is tiny): J = diag(pi) J_log."""
    n = psi.size
    J_log = np.empty((n, n))
    for j in range(n):
        e = np.zeros(n)
        e[j] = h
        J_log[:, j] = (log_probs(psi + e)[:-1] - log_probs(psi - e)[:-1]) / (2 * h)
    return np.sum(log_probs(psi)[:-1]) + np.linalg.slogdet(J_log)[1]


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 6).flatmap(lambda n: arrays(np.float64, (n,), elements=st.floats(-5, 5))))
def test_log_det_jacobian_matches_finite_differences(psi):
    assert log_det_jacobian(psi) == pytest.approx(_fd_log_det(psi), rel=1e-6, abs=1e-6)


def test_log_det_jacobian_batches():
    rng = np.random.default_rng(0)
    psi = rng.normal(size=(4, 3, 2))
    ld = log_det_jacobian(psi)
    assert ld.shape == (4, 3)
    np.testing.assert_allclose(ld[1, 2], _fd_log_det(psi[1, 2]), rtol=1e-6)


@settings(max_examples=200, deadline=None)
@given(st.tuples(st.integers(1, 5), st.integers(2, 6)).flatmap(
    lambda s: arrays(np.int64, s, elements=st.integers(0, 10**6))))
def test_count_statistics_vs_brute_force(counts):
    b, kappa = count_statistics(counts)
    C, K = counts.shape
    assert b.shape == kappa.shape == (C, K - 1)
    for c in range(C):
        N = int(counts[c].sum())
        for k in range(K - 1):
            bb = N - sum(int(counts[c, j]) for j in range(k))
            assert b[c, k] == bb
            assert kappa[c, k] == counts[c, k] - bb / 2
    # the counts come back from (b, kappa): x_ck = kappa_ck + b_ck / 2, N_c = b_c1
    np.testing.assert_array_equal(kappa + b / 2, counts[:, :-1])
    np.testing.assert_array_equal(b[:, 0], counts.sum(1))
    np.testing.assert_array_equal(b[:, -1] - counts[:, -2], counts[:, -1])


def _brute_pi_to_psi(p):
    """psi_k = log(p_k / sum_{j>k} p_j) by a loop, with the stick used up -> 0."""
    out = np.empty(p.size - 1)
    for k in range(p.size - 1):
        rest_k, rest_next = sum(p[k:]), sum(p[k + 1:])
        if rest_k == 0:
            out[k] = 0.0
        elif p[k] == 0:
            out[k] = -np.inf
        elif rest_next == 0:
            out[k] = np.inf
        else:
            out[k] = np.log(p[k]) - np.log(rest_next)
    return out


def test_pi_to_psi_round_trip_with_exact_zeros():
    # zeros at the end used to give log 0 - log 0 = NaN ([0.2, 0.8, 0, 0] -> [-1.39, inf, nan])
    rng = np.random.default_rng(20)
    for _ in range(300):
        K = int(rng.integers(2, 8))
        p = rng.dirichlet(np.full(K, 0.8))
        p[rng.random(K) < 0.5] = 0.0
        if p.sum() == 0:
            p[rng.integers(K)] = 1.0
        p /= p.sum()
        psi = pi_to_psi(p)
        assert not np.isnan(psi).any(), (p, psi)
        np.testing.assert_allclose(psi, _brute_pi_to_psi(p), rtol=1e-12, atol=1e-12)
        back = psi_to_pi(psi)
        np.testing.assert_array_equal(back == 0, p == 0)
        np.testing.assert_allclose(back, p, rtol=1e-12, atol=0)
    for p in ([1.0, 0.0, 0.0], [0.2, 0.8, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0]):
        np.testing.assert_array_equal(psi_to_pi(pi_to_psi(p)), p)
    np.testing.assert_array_equal(pi_to_psi([0.2, 0.8, 0.0, 0.0])[1:], [np.inf, 0.0])


def test_pi_to_psi_round_trip_at_extreme_psi():
    # |psi| up to 1e3: psi_to_pi underflows to exact zeros; the inverse must not give NaN
    rng = np.random.default_rng(21)
    psi = rng.uniform(-1e3, 1e3, size=(2000, 5))
    psi[::3, 0] = 800.0                       # everything on the first category
    pi = psi_to_pi(psi)
    assert (pi == 0).any()
    back = pi_to_psi(pi)
    assert not np.isnan(back).any()
    again = psi_to_pi(back)
    np.testing.assert_array_equal(again == 0, pi == 0)
    np.testing.assert_allclose(again, pi, rtol=1e-9, atol=1e-300)
    np.testing.assert_array_equal(psi_to_pi(pi_to_psi(psi_to_pi([800.0, 0.0]))), [1.0, 0.0, 0.0])


@pytest.mark.parametrize("bad, match", [
    ([np.nan, 0.5, 0.5], "pi: contains NaN"),
    ([1.0, 1.0, 2.0], "pi: rows must sum to one"),
    ([[0.5, 0.5], [0.3, 0.3]], "pi: rows must sum to one"),
    ([-0.1, 0.6, 0.5], "pi: probabilities must be non-negative"),
    ([np.inf, 0.0], "pi: contains NaN or infinite"),
])
def test_pi_to_psi_refuses_non_simplex(bad, match):
    with pytest.raises(ValueError, match=match):
        pi_to_psi(bad)
    with pytest.raises(TypeError, match="pi: "):
        pi_to_psi([0.5 + 0.5j, 0.5])
