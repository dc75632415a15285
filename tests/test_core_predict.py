"""Prediction at new covariates (CorrelatedMultinomial.predict_psi / predict_probs).

Oracle: the identity "predicting at new covariates = fitting with them appended as zero-count
rows" (a zero-count row adds no likelihood term, so it does not change the others' posterior).
"""

import numpy as np
import pytest

from corrpriors import CorrelatedMultinomial
from corrpriors.kernels import Matern52, SquaredExponential


def _data(seed=0, c=15, k=4):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 8, size=(c, 2))
    counts = rng.multinomial(6, [0.4, 0.3, 0.2, 0.1], size=c)
    counts[3] = 0
    counts[5, 1:] = 0
    x_new = rng.uniform(-1, 9, size=(7, 2))
    return x, counts, x_new


@pytest.mark.parametrize("kernel", [SquaredExponential(lengthscale=2.0), Matern52(lengthscale=3.0)])
@pytest.mark.parametrize("learn_mean", [None, "constant"])
def test_prediction_equals_fit_with_zero_count_rows(kernel, learn_mean):
    x, counts, x_new = _data()
    opts = dict(scale=1.7, learn_mean=learn_mean, tol=1e-14, max_iter=5000)
    m = CorrelatedMultinomial(kernel.bind(coords=x), **opts).fit(counts)
    mean, var = m.predict_psi(x_new)
    aug = np.vstack([counts, np.zeros((len(x_new), counts.shape[1]), int)])
    big = CorrelatedMultinomial(kernel.bind(coords=np.vstack([x, x_new])), **opts).fit(aug)
    assert big.jitter_ == m.jitter_
    np.testing.assert_allclose(mean, big.psi_mean_[len(x):], rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(var, big.psi_var_[len(x):], rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(m.predict_probs(x_new), big.probs()[len(x):], atol=1e-8)
    # at the training covariates the prediction is the fit itself
    mean_t, var_t = m.predict_psi(x)
    np.testing.assert_allclose(mean_t, m.psi_mean_, atol=1e-7)
    np.testing.assert_allclose(var_t, m.psi_var_, atol=1e-7)


def test_far_away_covariates_get_the_prior():
    x, counts, _ = _data(1)
    m = CorrelatedMultinomial(SquaredExponential(1.0).bind(coords=x), scale=2.0).fit(counts)
    mean, var = m.predict_psi(np.array([[1e3, 1e3]]))
    np.testing.assert_allclose(mean, m.mean_[:1], atol=1e-12)
    np.testing.assert_allclose(var, 2.0 * (1.0 + m.jitter_), rtol=1e-12)


def test_return_std_and_mc():
    x, counts, x_new = _data(2)
    m = CorrelatedMultinomial(SquaredExponential(2.0).bind(coords=x)).fit(counts)
    p, sd = m.predict_probs(x_new, return_std=True, rng=0, n_samples=4000)
    assert p.shape == sd.shape == (7, 4) and np.all(sd > 0)
    pmc = m.predict_probs(x_new, method="mc", rng=1, n_samples=20000)
    np.testing.assert_allclose(pmc.sum(1), 1.0)
    assert np.abs(pmc - p).max() < 0.2


def test_prediction_needs_coordinates_and_a_common_mean():
    x, counts, x_new = _data(3)
    plain = CorrelatedMultinomial(SquaredExponential(2.0).bind(coords=x).gram()).fit(counts)
    with pytest.raises(ValueError, match="new_covariates: prediction needs a model built on a kernel"):
        plain.predict_probs(x_new)
    m = CorrelatedMultinomial(SquaredExponential(2.0).bind(coords=x)).fit(counts)
    with pytest.raises(ValueError, match=r"new_covariates: expected D=2 columns .* got shape \(3, 3\)"):
        m.predict_probs(np.ones((3, 3)))
    varying = CorrelatedMultinomial(SquaredExponential(2.0).bind(coords=x),
                                    mean=np.random.default_rng(0).normal(size=(15, 3))).fit(counts)
    with pytest.raises(ValueError, match="new_mean: the fitted prior means vary"):
        varying.predict_probs(x_new)
    got = varying.predict_psi(x_new, new_mean=np.zeros(3))[0]
    assert got.shape == (7, 3)
