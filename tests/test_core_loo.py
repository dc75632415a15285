"""Approximate leave-one-out predictive probabilities (core.loo) against exact leave-one-out.

Oracles: for one and two covariates the exact posterior's normalisers by quadrature (one- and
two-dimensional, every stick separately: the sticks are independent a priori and in the
likelihood), and the leave-one-out predictive of an observation as the ratio of the evidence
with and without it. For one covariate EP is exact, so the EP cavities give the exact value;
for two, EP is close and the mean-field VI cavities are measurably worse (the test would fail
with them).
"""

import numpy as np
import pytest
from scipy import integrate
from scipy.special import expit

from corrpriors import CorrelatedMultinomial
from corrpriors.core.loo import entry_cavities, loo_log_predictive
from corrpriors.core.stick_breaking import count_statistics

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


def _log_z_1d(m, v, b, x):
    """log of the integral of N(psi; m, v) sigma(psi)^x sigma(-psi)^(b - x) (one sequence)."""
    def f(p):
        return np.exp(-0.5 * (p - m) ** 2 / v + x * np.log(expit(p)) + (b - x) * np.log(expit(-p)))

    sd = np.sqrt(v)
    return np.log(integrate.quad(f, m - 12 * sd, m + 12 * sd, limit=400, epsabs=0, epsrel=1e-11)[0]
                  / np.sqrt(2 * np.pi * v))


def _log_z_2d(mean, cov, b, x, n=801):
    """The same for two covariates, on a grid of n x n points over +-9 prior sds."""
    sd = np.sqrt(np.diag(cov))
    g = [np.linspace(mean[i] - 9 * sd[i], mean[i] + 9 * sd[i], n) for i in range(2)]
    p0, p1 = np.meshgrid(*g, indexing="ij")
    d = np.stack([p0 - mean[0], p1 - mean[1]], axis=-1)
    prec = np.linalg.inv(cov)
    log_f = -0.5 * np.einsum("...i,ij,...j->...", d, prec, d)
    for i, p in enumerate((p0, p1)):
        log_f = log_f + x[i] * np.log(expit(p)) + (b[i] - x[i]) * np.log(expit(-p))
    top = log_f.max()
    inner = integrate.simpson(np.exp(log_f - top), x=g[1], axis=1)
    total = integrate.simpson(inner, x=g[0])
    return top + np.log(total) - 0.5 * np.log(np.linalg.det(2 * np.pi * cov))


def _exact_loo(counts, mean, cov):
    """Exact per-covariate leave-one-out log predictive, shape (C,), for C = 1 or 2."""
    c, k = counts.shape

    def log_evidence(x):
        b, _ = count_statistics(x)
        total = 0.0
        for j in range(k - 1):
            if c == 1:
                total += _log_z_1d(mean[0, j], cov[0, 0], b[0, j], x[0, j])
            else:
                total += _log_z_2d(mean[:, j], cov, b[:, j], x[:, j])
        return total

    full = log_evidence(counts)
    out = np.zeros(c)
    for i, j in zip(*np.nonzero(counts)):
        less = counts.copy()
        less[i, j] -= 1
        out[i] += counts[i, j] * (full - log_evidence(less))
    return out


def _fit(counts, cov):
    model = CorrelatedMultinomial(cov, tol=1e-12, max_iter=5000).fit(counts)
    res = model.result_
    return res, res.mean, res.scale * np.asarray(res.covariance)


@pytest.mark.parametrize("counts, var", [([[3.0, 1.0, 2.0]], 2.0), ([[0.0, 7.0, 1.0, 1.0]], 0.3),
                                         ([[1.0, 0.0, 0.0]], 9.0), ([[40.0, 2.0, 0.0]], 1.0)])
def test_one_covariate_is_exact(counts, var):
    """With one covariate the EP cavity is the prior, so the value is the exact leave-one-out."""
    x = np.array(counts)
    res, mean, cov = _fit(x, np.array([[var]]))
    np.testing.assert_allclose(loo_log_predictive(res, x), _exact_loo(x, mean, cov), atol=1e-4)


@pytest.mark.parametrize("seed", range(3))
def test_two_covariates_are_close_to_exact_and_closer_than_the_vi_cavities(seed):
    rng = np.random.default_rng(seed)
    x = rng.multinomial(4, [0.5, 0.3, 0.2], size=2).astype(float)
    r = 0.9
    res, mean, cov = _fit(x, 2.0 * np.array([[1.0, r], [r, 1.0]]))
    exact = _exact_loo(x, mean, cov)
    ep_err = np.abs(loo_log_predictive(res, x) - exact).max()
    vi_err = np.abs(loo_log_predictive(res, x, cavities="vi") - exact).max()
    assert ep_err < 0.02
    assert vi_err > 3 * ep_err                      # the VI cavities are optimistic


def test_vi_cavities_divide_the_sites_out_of_the_marginals():
    """A direct computation: the marginal of the prior times every other covariate's site."""
    rng = np.random.default_rng(4)
    x = rng.multinomial(5, [0.4, 0.4, 0.2], size=5).astype(float)
    d = np.arange(5.0)
    cov = np.exp(-0.5 * (d[:, None] - d[None, :]) ** 2 / 4.0)
    model = CorrelatedMultinomial(cov, tol=1e-12, max_iter=5000).fit(x)
    res = model.result_
    mean, var = entry_cavities(res, x)
    prior = res.scale * np.asarray(res.covariance)
    _, kappa = count_statistics(x)
    for j in range(2):
        for c in range(5):
            keep = np.arange(5) != c
            site_p = np.where(keep, res.site_precision[:, j], 0.0)
            site_l = np.where(keep, kappa[:, j], 0.0)
            post_prec = np.linalg.inv(prior) + np.diag(site_p)
            post_cov = np.linalg.inv(post_prec)
            post_mean = post_cov @ (np.linalg.solve(prior, res.mean[:, j]) + site_l)
            assert var[c, j] == pytest.approx(post_cov[c, c], rel=1e-6)
            assert mean[c, j] == pytest.approx(post_mean[c], rel=1e-6, abs=1e-8)


def test_rows_without_data_score_zero_and_shapes_are_checked():
    x = np.array([[2.0, 1.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    d = np.arange(3.0)
    res = CorrelatedMultinomial(np.exp(-0.5 * (d[:, None] - d[None, :]) ** 2)).fit(x).result_
    out = loo_log_predictive(res, x)
    assert out.shape == (3,) and out[1] == 0.0 and np.all(out[[0, 2]] < 0)
    with pytest.raises(ValueError, match="counts"):
        loo_log_predictive(res, x[:, :2])
    for bad in (x - 1.5, np.where(x == 2.0, np.nan, x), x + 0.5):   # negative, NaN, fractional
        with pytest.raises(ValueError, match="counts"):
            loo_log_predictive(res, bad)
    with pytest.raises(ValueError, match="cavities"):
        loo_log_predictive(res, x, cavities="gibbs")
