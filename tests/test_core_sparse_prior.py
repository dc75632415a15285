"""The sparse-precision prior (issue 14) against the dense path with Sigma = Q^-1.

Oracle: the same model fitted by the dense prior on the explicit inverse of the GMRF precision.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from corrpriors import CorrelatedMultinomial, select_scale
from corrpriors.kernels import grid_precision


@pytest.fixture(scope="module")
def grid_problem():
    rng = np.random.default_rng(0)
    q = grid_precision((20, 20), length_scale=4.0)              # C = 400, alpha = 2
    cov = np.linalg.inv(q.toarray())
    psi = np.linalg.cholesky(cov) @ rng.standard_normal((400, 4))
    p = np.exp(np.concatenate([psi, np.zeros((400, 1))], axis=1))
    p /= p.sum(1, keepdims=True)
    n = rng.poisson(3.0, 400) * (rng.random(400) < 0.6)         # 40 % of the cells unobserved
    counts = np.stack([rng.multinomial(k, row) for k, row in zip(n, p)])
    return q, 0.5 * (cov + cov.T), counts


@pytest.mark.parametrize("kw", [{}, {"learn_scale": True}, {"learn_mean": "constant"},
                                {"learn_scale": True, "learn_mean": "constant",
                                 "scale_prior": (2.0, 1.0), "mean_prior_std": 2.0}])
def test_sparse_path_equals_dense_path(grid_problem, kw):
    q, cov, counts = grid_problem
    opts = dict(tol=1e-13, max_iter=3000, scale=0.7, **kw)
    sparse = CorrelatedMultinomial(precision=q, **opts).fit(counts)
    dense = CorrelatedMultinomial(cov, **opts).fit(counts)
    assert sparse.converged_ and dense.converged_
    np.testing.assert_allclose(sparse.psi_mean_, dense.psi_mean_, atol=1e-6)
    np.testing.assert_allclose(sparse.psi_var_, dense.psi_var_, atol=1e-6)
    assert sparse.elbo_ == pytest.approx(dense.elbo_, rel=1e-8)
    assert sparse.collapsed_bound() == pytest.approx(dense.collapsed_bound(), rel=1e-8)
    assert sparse.scale_ == pytest.approx(dense.scale_, rel=1e-6)
    np.testing.assert_allclose(sparse.mean_, dense.mean_, atol=1e-6)
    obj = sparse.objective_trace_
    assert np.all(np.diff(obj) >= -1e-9 * np.abs(obj[1:]))


@pytest.mark.parametrize("kw", [{}, {"learn_mean": "constant", "mean_prior_std": 2.0}])
def test_sticks_iterated_separately_reach_the_joint_optimum_for_fewer_updates(grid_problem,
                                                                               monkeypatch, kw):
    """The sparse prior's separate stick iterations (cavi.separable) against the joint iteration
    of the same model: the same optimum at a tight tolerance; at the default tolerance no worse
    an ELBO than the joint run's error allows, for fewer stick updates."""
    import corrpriors.core.cavi as cavi

    q, _, counts = grid_problem
    opts = dict(scale=3.0, **kw)
    split_tight = CorrelatedMultinomial(precision=q, tol=1e-13, max_iter=3000, **opts).fit(counts)
    split = CorrelatedMultinomial(precision=q, **opts).fit(counts)
    monkeypatch.setattr(cavi, "separable", lambda prior, options: False)
    joint_tight = CorrelatedMultinomial(precision=q, tol=1e-13, max_iter=3000, **opts).fit(counts)
    joint = CorrelatedMultinomial(precision=q, **opts).fit(counts)
    assert split_tight.converged_ and joint_tight.converged_ and split.converged_
    np.testing.assert_allclose(split_tight.psi_mean_, joint_tight.psi_mean_, atol=1e-5)
    np.testing.assert_allclose(split_tight.psi_var_, joint_tight.psi_var_, atol=1e-5)
    assert split_tight.elbo_ == pytest.approx(joint_tight.elbo_, rel=1e-10)
    assert split_tight.collapsed_bound() == pytest.approx(joint_tight.collapsed_bound(), rel=1e-9)
    best = joint_tight.elbo_
    assert best - split.elbo_ <= max(best - joint.elbo_, 1e-6 * abs(best))
    assert split.result_.n_stick_steps < joint.result_.n_stick_steps
    assert joint.result_.n_stick_steps == joint.n_psi_steps_ * 4


def test_selection_sampling_gibbs_and_warm_start(grid_problem):
    q, cov, counts = grid_problem
    sel_s = select_scale(CorrelatedMultinomial(precision=q), counts, step=0.5)
    sel_d = select_scale(CorrelatedMultinomial(cov), counts, step=0.5)
    assert sel_s.scale == sel_d.scale
    # the sparse prior iterates its sticks separately, each to the tolerance (1e-6): the two
    # paths agree to the fits' tolerance, not bit for bit (measured 1.9e-8 relative)
    assert sel_s.value == pytest.approx(sel_d.value, rel=1e-6)
    m = sel_s.model
    draws = m.sample_probs(2000, rng=1)
    assert draws.shape == (2000, 400, 5)
    np.testing.assert_allclose(draws.mean(0), m.probs(method="mc", n_samples=20000, rng=2),
                               atol=0.03)
    again = CorrelatedMultinomial(precision=q, scale=sel_s.scale, warm_start=True)
    again.fit(counts)
    n_cold = again.n_psi_steps_
    again.fit(counts)
    assert again.n_psi_steps_ < n_cold
    g = CorrelatedMultinomial(precision=q, scale=2.0).fit(counts)
    res = g.fit_gibbs(counts, n_samples=60, burn_in=20, rng=3)
    assert res.psi.shape == (60, 400, 4) and np.all(np.isfinite(res.psi))


def test_gibbs_with_a_precision_matches_the_dense_sampler_in_distribution():
    # 30 covariates on a path: Gibbs means under precision and covariance agree within MC error
    q = grid_precision((30,), length_scale=5.0)
    cov = np.linalg.inv(q.toarray())
    rng = np.random.default_rng(4)
    counts = rng.multinomial(6, [0.5, 0.3, 0.2], size=30)
    a = CorrelatedMultinomial(precision=q).fit_gibbs(counts, n_samples=1500, burn_in=100, rng=5)
    b = CorrelatedMultinomial(0.5 * (cov + cov.T)).fit_gibbs(counts, n_samples=1500,
                                                              burn_in=100, rng=6)
    se = np.sqrt(a.psi.var(0) / 150 + b.psi.var(0) / 150)   # ESS ~ 10 % of the draws
    assert np.all(np.abs(a.psi_mean() - b.psi_mean()) < 5 * se)


@pytest.mark.parametrize("precision,match", [
    (sp.csr_array(np.array([[2.0, 1.0], [0.0, 2.0]])), "precision: must be symmetric"),
    (sp.csr_array(np.array([[1.0, 2.0], [2.0, 1.0]])), "precision: expected a positive-definite"),
    (sp.csr_array(np.eye(3)), r"precision: expected shape \(C, C\) = \(2, 2\)"),
    (sp.csr_array(np.array([[np.nan, 0.0], [0.0, 1.0]])), "precision: contains NaN"),
    (np.ones((2, 3)), "precision: expected a square 2-D matrix"),
])
def test_bad_precision_raises(precision, match):
    with pytest.raises(ValueError, match=match):
        CorrelatedMultinomial(precision=precision).fit([[1, 2], [0, 3]])


@pytest.mark.parametrize("precision,match", [
    ("abc", "precision: expected a scipy.sparse matrix or a numeric"),
    (np.array([[2.0 + 1j, 0.0], [0.0, 2.0]]), "precision: expected real numbers, got complex"),
    (sp.csr_array(np.array([[2.0 + 1j, 0.0], [0.0, 2.0]])), "precision: expected real numbers, got complex"),
])
def test_precision_of_the_wrong_type_is_a_type_error(precision, match):
    """Complex precisions used to lose their imaginary part (a NumPy ComplexWarning at most)."""
    with pytest.raises(TypeError, match=match):
        CorrelatedMultinomial(precision=precision).fit([[1, 2], [0, 3]])


def test_exactly_one_of_covariance_and_precision():
    counts = [[1, 2], [0, 3]]
    with pytest.raises(ValueError, match="covariance, precision: expected exactly one"):
        CorrelatedMultinomial().fit(counts)
    with pytest.raises(ValueError, match="covariance, precision: expected exactly one"):
        CorrelatedMultinomial(np.eye(2), precision=np.eye(2)).fit(counts)
    with pytest.raises(ValueError, match="learn_kernel: a precision prior"):
        CorrelatedMultinomial(precision=np.eye(2), learn_kernel=True).fit(counts)
    # a dense ndarray precision works like the sparse one
    dense_q = np.array([[2.0, -0.5], [-0.5, 2.0]])
    a = CorrelatedMultinomial(precision=dense_q).fit(counts)
    b = CorrelatedMultinomial(precision=sp.csr_array(dense_q)).fit(counts)
    np.testing.assert_array_equal(a.psi_mean_, b.psi_mean_)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = CorrelatedMultinomial(np.linalg.inv(dense_q)).fit(counts)
    np.testing.assert_allclose(a.psi_mean_, c.psi_mean_, atol=1e-8)
