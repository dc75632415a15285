"""``CorrelatedMultinomial.probs(return_std=True)`` (posterior standard deviations of the
probabilities under q, against quadrature and a direct computation) and ``fit(callback=)``."""

from __future__ import annotations

import numpy as np
import pytest

from corrpriors.core import CorrelatedMultinomial
from corrpriors.core.stick_breaking import psi_to_pi
from corrpriors.kernels import Matern52


def _fit(c, k, seed):
    rng = np.random.default_rng(seed)
    x = np.linspace(0.0, 3.0, c)[:, None]
    counts = rng.integers(0, 6, size=(c, k))
    return CorrelatedMultinomial(Matern52(1.0).bind(coords=x), learn_scale=True).fit(counts)


def _quadrature_moments(mean, var, n_nodes=120):
    """E[pi] and sd[pi] from independent 1-D Gaussian sticks: pi_k = s_k prod_{j<k} (1 - s_j),
    s = sigmoid(psi), so E[pi_k^a] = E[s_k^a] prod_{j<k} E[(1 - s_j)^a] (a = 1, 2)."""
    z, w = np.polynomial.hermite_e.hermegauss(n_nodes)
    w = w / w.sum()
    s = 1.0 / (1.0 + np.exp(-(mean[..., None] + np.sqrt(var)[..., None] * z)))  # (C, K-1, n)
    moments = []
    for a in (1, 2):
        es, er = (s ** a) @ w, ((1.0 - s) ** a) @ w
        rest = np.cumprod(er, axis=-1)
        m = np.concatenate([es[:, :1], es[:, 1:] * rest[:, :-1], rest[:, -1:]], axis=1)
        moments.append(m)
    return moments[0], np.sqrt(moments[1] - moments[0] ** 2)


def test_std_matches_quadrature():
    m = _fit(5, 4, seed=0)
    mean_q, sd_q = _quadrature_moments(m.psi_mean_, m.psi_var_)
    mean, sd = m.probs(method="mc", n_samples=400_000, rng=1, return_std=True)
    np.testing.assert_allclose(mean, mean_q, rtol=5e-3)
    np.testing.assert_allclose(sd, sd_q, rtol=1e-2)
    # plugin mean with the same standard deviations
    plug, sd2 = m.probs(n_samples=400_000, rng=1, return_std=True)
    np.testing.assert_array_equal(plug, m.probs())
    np.testing.assert_array_equal(sd2, sd)


def test_std_over_chunks_equals_one_pass():
    """Several chunks (n * C * (K-1) > 2**22): the merged deviations equal np.std of the same
    draws."""
    m = _fit(12, 3, seed=2)
    n = 200_000
    assert n > 2 ** 22 // m.psi_mean_.size  # several chunks
    mean, sd = m.probs(method="mc", n_samples=n, rng=7, return_std=True)
    z = np.random.default_rng(7).standard_normal((n,) + m.psi_mean_.shape)
    pi = psi_to_pi(m.psi_mean_ + np.sqrt(m.psi_var_) * z)
    np.testing.assert_allclose(mean, pi.mean(0), rtol=1e-12)
    np.testing.assert_allclose(sd, pi.std(0, ddof=1), rtol=1e-9, atol=1e-15)
    # the mean is the one probs(method="mc") always returned (same draws)
    np.testing.assert_array_equal(mean, m.probs(method="mc", n_samples=n, rng=7))


def test_std_is_reproducible_and_validated():
    m = _fit(4, 3, seed=3)
    a = m.probs(method="mc", n_samples=500, rng=11, return_std=True)
    b = m.probs(method="mc", n_samples=500, rng=np.random.default_rng(11), return_std=True)
    np.testing.assert_array_equal(a[1], b[1])
    with pytest.raises(ValueError, match="n_samples: expected a positive integer"):
        m.probs(n_samples=0, return_std=True)
    with pytest.raises(ValueError, match="method: expected 'plugin' or 'mc'"):
        m.probs(method="exact", return_std=True)


def test_fit_callback_sees_every_iteration():
    calls = []
    m = CorrelatedMultinomial(Matern52(1.0).bind(coords=np.arange(6.0)[:, None]),
                              learn_scale=True)
    m.fit(np.random.default_rng(0).integers(0, 5, (6, 3)),
          callback=lambda it, obj: calls.append((it, obj)))
    assert [c[0] for c in calls] == list(range(m.n_iter_))
    np.testing.assert_array_equal([c[1] for c in calls], m.objective_trace_)
