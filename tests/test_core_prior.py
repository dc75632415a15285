"""Conformance of every prior implementation with the prior protocol (corrpriors.core.prior).

Oracle: the psi step written with explicit inverses (``reference.dense_posterior``) on the
prior's own dense covariance. A new prior is added to ``PRIORS`` and must pass every test here.
"""

import numpy as np
import pytest

from corrpriors.core.priors.base import GaussianPrior, build_layout
from corrpriors.core.priors.dense import DenseCovariancePrior
from reference import dense_posterior


def _dense(rng, c):
    x = np.sort(rng.uniform(0.0, 6.0, c))
    cov = np.exp(-np.abs(x[:, None] - x[None, :]) / 1.5)  # well conditioned: exact oracle
    prior = DenseCovariancePrior(cov)
    return prior, prior.base


def _sparse(rng, c):
    import scipy.sparse as sp

    from corrpriors.core.priors.sparse import SparsePrecisionPrior

    # a random sparse SPD precision: a path graph plus a few random edges, diagonally dominant
    rows = np.arange(c - 1)
    extra = rng.choice(c, size=(3, 2))
    i = np.concatenate([rows, extra[:, 0]])
    j = np.concatenate([rows + 1, extra[:, 1]])
    keep = i != j
    w = sp.coo_array((rng.uniform(0.2, 1.0, keep.sum()), (i[keep], j[keep])), shape=(c, c))
    w = (w + w.T).tocsr()
    q = sp.diags_array(np.asarray(w.sum(axis=1)).ravel() + rng.uniform(0.1, 0.5, c)) - w
    prior = SparsePrecisionPrior(sp.csr_array(q))
    return prior, np.linalg.inv(q.toarray())


#: name -> factory(rng, C) returning (prior, its dense covariance Sigma_tilde)
PRIORS = {"dense": _dense, "sparse": _sparse}


def _problem(rng, c=9, km1=4):
    observed = rng.random((c, km1)) < 0.6
    observed[:, 1] = False          # an empty stick: exactly the prior
    observed[:, 3] = True           # a stick observed everywhere
    site = np.where(observed, 10.0 ** rng.uniform(-2, 2, (c, km1)), 0.0)
    kappa = np.where(observed, rng.normal(size=(c, km1)) * 2.0, 0.0)
    mu = rng.normal(size=(c, km1))
    return observed, site, kappa, mu


@pytest.fixture(params=sorted(PRIORS))
def prior_and_base(request):
    return PRIORS[request.param](np.random.default_rng(1), 9)


def test_implements_the_protocol(prior_and_base):
    prior, base = prior_and_base
    assert isinstance(prior, GaussianPrior) and prior.n_covariates == base.shape[0]
    np.testing.assert_allclose(prior.prior_variance(), np.diag(base), rtol=1e-12)
    np.testing.assert_allclose(prior.precision_ones(), np.linalg.solve(base, np.ones(9)),
                               rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("scale", [0.3, 1.7])
def test_psi_step_matches_explicit_inverses(prior_and_base, scale):
    prior, base = prior_and_base
    observed, site, kappa, mu = _problem(np.random.default_rng(2))
    layout = build_layout(observed)
    step = prior.psi_step(layout, scale, mu, kappa, layout.gather(site))
    ref = dense_posterior(scale * base, mu, kappa, site)
    np.testing.assert_allclose(step.psi_mean, ref["lam"], rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(step.psi_var[observed], ref["var"][observed], rtol=1e-7)
    np.testing.assert_allclose(step.trace_dv, ref["trace_dv"], rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(step.quad, ref["quad"], rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(step.logdet_b, ref["logdet_b"], rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(step.alpha, ref["alpha"], rtol=1e-6, atol=1e-7)
    # every variance: from the step's factors, and from a full step
    full = prior.complete_variances(layout, scale, layout.gather(site), step)
    np.testing.assert_allclose(full, ref["var"], rtol=1e-7, atol=1e-12)
    again = prior.psi_step(layout, scale, mu, kappa, layout.gather(site), full=True)
    assert again.complete
    np.testing.assert_allclose(again.psi_var, ref["var"], rtol=1e-7, atol=1e-12)


def test_complete_variances_recompute_when_the_factors_are_stale(prior_and_base):
    prior, base = prior_and_base
    observed, site, kappa, mu = _problem(np.random.default_rng(3))
    layout = build_layout(observed)
    step = prior.psi_step(layout, 1.0, mu, kappa, layout.gather(site))
    prior.psi_step(layout, 2.0, mu, kappa, 3.0 * layout.gather(site))  # overwrites factors
    full = prior.complete_variances(layout, 1.0, layout.gather(site), step)
    np.testing.assert_allclose(full, dense_posterior(base, mu, kappa, site)["var"], rtol=1e-7)


@pytest.mark.parametrize("gibbs", [False, True])
def test_posterior_draws_have_the_posterior_moments(prior_and_base, gibbs):
    prior, base = prior_and_base
    observed, site, kappa, mu = _problem(np.random.default_rng(4))
    ref = dense_posterior(1.3 * base, mu, kappa, site)
    m = 20_000
    if gibbs:  # the conditional of pseudo-observations kappa / e: centred at lambda
        pseudo = np.where(observed, kappa / np.where(observed, site, 1.0), 0.0)
        draws = prior.sample_posterior(1.3, mu, site, m, rng=np.random.default_rng(5),
                                       pseudo=pseudo)
    else:
        draws = prior.sample_posterior(1.3, ref["lam"], site, m, rng=np.random.default_rng(5))
    assert draws.shape == (m, 9, 4)
    se = np.sqrt(ref["var"] / m)
    assert np.all(np.abs(draws.mean(0) - ref["lam"]) < 5 * se)
    for k in range(4):
        cov = np.cov(draws[:, :, k].T)
        v = ref["V"][k]
        tol = 6 * np.sqrt((v ** 2 + np.outer(np.diag(v), np.diag(v))) / m)
        assert np.all(np.abs(cov - v) < tol)


def test_draws_are_reproducible(prior_and_base):
    prior, _ = prior_and_base
    observed, site, _, mu = _problem(np.random.default_rng(6))
    a = prior.sample_posterior(1.0, mu, site, 3, rng=np.random.default_rng(7))
    b = prior.sample_posterior(1.0, mu, site, 3, rng=np.random.default_rng(7))
    c = prior.sample_posterior(1.0, mu, site, 3, rng=np.random.default_rng(8))
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)



def test_dense_prior_without_the_check_is_the_same_prior():
    """check=False skips only the validation: the same structure and factor; a matrix that is
    not positive definite still fails in the factorisation."""
    from corrpriors.core.priors.dense import DenseCovariancePrior

    rng = np.random.default_rng(3)
    a = rng.standard_normal((12, 12))
    cov = a @ a.T + 0.5 * np.ones((12, 12))
    p1 = DenseCovariancePrior(cov, jitter=0.0)
    p2 = DenseCovariancePrior(cov, jitter=0.0, check=False)
    np.testing.assert_array_equal(p1.base, p2.base)
    np.testing.assert_array_equal(p1.chol, p2.chol)
    with pytest.raises(np.linalg.LinAlgError):
        DenseCovariancePrior(-cov, jitter=0.0, check=False)
    with pytest.raises(ValueError, match="covariance"):
        DenseCovariancePrior(-cov, jitter=0.0)
