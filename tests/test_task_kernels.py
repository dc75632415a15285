"""Task kernels: the correlation parametrisation, gradients vs finite differences, Kronecker
structure, the sparse Kronecker precision, and the joint multi-task model against oracles."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from corrpriors.core import CorrelatedMultinomial
from corrpriors.core.hyper_em import kernel_objective
from corrpriors.kernels import (
    Matern32,
    MultiTaskKernel,
    SquaredExponential,
    TaskCorrelation,
    grid_precision,
    kronecker_precision,
    task_coordinates,
)
from corrpriors.kernels.task import angles_from_correlation, correlation_from_angles, n_angles


def _grid(n):
    return np.array([(i, j) for i in range(n) for j in range(n)], dtype=float)


def _random_angles(rng, T):
    return rng.uniform(0.1, np.pi - 0.1, size=n_angles(T))


def _fd_check(kernel, X, h=1e-6, rtol=1e-6, atol=1e-8):
    G = kernel.gradient(X=X)
    theta = kernel.theta
    assert G.shape == (X.shape[0], X.shape[0], kernel.n_params)
    for p in range(kernel.n_params):
        e = np.zeros_like(theta)
        e[p] = h
        fd = (kernel.with_theta(theta + e)(X) - kernel.with_theta(theta - e)(X)) / (2 * h)
        np.testing.assert_allclose(G[..., p], fd, rtol=rtol, atol=atol,
                                   err_msg=kernel.hyperparameter_names[p])


@pytest.mark.parametrize("T", [1, 2, 3, 5])
def test_correlation_is_valid_and_angles_round_trip(T):
    rng = np.random.default_rng(T)
    a = _random_angles(rng, T)
    B = correlation_from_angles(a, T)
    np.testing.assert_allclose(np.diag(B), 1.0, rtol=0, atol=1e-15)
    np.testing.assert_allclose(B, B.T, rtol=0, atol=1e-15)
    assert np.linalg.eigvalsh(B)[0] > -1e-12
    np.testing.assert_allclose(angles_from_correlation(B), a, rtol=0, atol=1e-8)
    # the first column is cos(angle_i_0): pi / 2 is no correlation
    if T > 1:
        np.testing.assert_allclose(B[1, 0], np.cos(a[0]), rtol=1e-14)
        assert np.allclose(TaskCorrelation(T).correlation, np.eye(T))


def test_correlation_from_matrix_round_trip():
    C = np.array([[1.0, 0.8, 0.3], [0.8, 1.0, -0.2], [0.3, -0.2, 1.0]])
    k = TaskCorrelation.from_correlation(C)
    np.testing.assert_allclose(k.correlation, C, atol=1e-12)
    assert k.hyperparameter_names == ["angle_1_0", "angle_2_0", "angle_2_1"]
    # restricted to non-negative correlations, a negative entry is clipped into the bounds
    with pytest.warns(UserWarning, match="were clipped into them"):   # (said since round 20)
        k2 = TaskCorrelation.from_correlation(np.array([[1.0, -0.5], [-0.5, 1.0]]), angle_bounds=(0.05, np.pi / 2))
    assert k2.correlation[0, 1] == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("T", [2, 3, 4])
def test_task_correlation_gradient_matches_finite_differences(T):
    rng = np.random.default_rng(10 + T)
    k = TaskCorrelation(T, _random_angles(rng, T))
    X = rng.integers(T, size=(9, 1)).astype(float)
    _fd_check(k, X)


def test_multitask_kernel_is_the_kronecker_product():
    rng = np.random.default_rng(0)
    B = correlation_from_angles(_random_angles(rng, 3), 3)
    state = SquaredExponential(lengthscale=1.7)
    k = MultiTaskKernel(TaskCorrelation.from_correlation(B), state)
    S = _grid(3)
    X = task_coordinates([S, S, S])
    np.testing.assert_allclose(k(X), np.kron(B, state(S)), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(k.diag(X), np.ones(X.shape[0]))
    assert np.linalg.eigvalsh(k(X))[0] > -1e-10
    np.testing.assert_allclose(k.task_correlation(), B, atol=1e-12)
    # cross-covariances between two sets of (task, state) points
    Y = task_coordinates([S[:2]], task_descriptors=[[1.0]])
    np.testing.assert_allclose(k(X, Y), np.kron(B[:, [1]], state(S, S[:2])), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("make", [
    lambda: MultiTaskKernel(TaskCorrelation(3, [1.0, 0.7, 2.0]), SquaredExponential(lengthscale=1.3)),
    lambda: MultiTaskKernel(TaskCorrelation(2, [0.9], angle_bounds="fixed"), Matern32(lengthscale=2.0)),
    lambda: MultiTaskKernel(SquaredExponential(lengthscale=0.7), SquaredExponential(lengthscale=1.5)),
    lambda: (MultiTaskKernel(TaskCorrelation(2, [0.6]), SquaredExponential(lengthscale=1.0))
             + MultiTaskKernel(TaskCorrelation(2, angle_bounds="fixed"), SquaredExponential(lengthscale=3.0))),
    lambda: 0.5 * MultiTaskKernel(TaskCorrelation(2, [1.2]), SquaredExponential(lengthscale=1.0)),
    lambda: (MultiTaskKernel(TaskCorrelation(2, [0.6]), SquaredExponential(lengthscale=1.0))
             * MultiTaskKernel(TaskCorrelation(2, [2.0]), Matern32(lengthscale=3.0))),
])
def test_multitask_gradients_match_finite_differences(make):
    """Every hyper-parameter (task angles, state length scale), also inside sums and products."""
    k = make()
    rng = np.random.default_rng(3)
    S = rng.uniform(0, 3, size=(4, 2))
    if isinstance(getattr(k, "task_kernel", None), SquaredExponential):
        X = task_coordinates([S, S, S], task_descriptors=[[0.0], [0.5], [2.0]])
    else:
        X = task_coordinates([S, S])
    _fd_check(k, X)
    bound = k.bind(coords=X)
    np.testing.assert_allclose(bound.gram_gradient(), k.gradient(X=X), rtol=1e-12, atol=1e-14)


def test_kernel_em_objective_gradient_with_task_kernel():
    """The core's kernel M-step objective (appendix B gradient) through a task kernel."""
    rng = np.random.default_rng(4)
    kern = MultiTaskKernel(TaskCorrelation(3, [1.1, 0.8, 1.9]), SquaredExponential(lengthscale=1.4))
    bound = kern.bind(coords=task_coordinates([_grid(3)] * 3))
    c = bound.n_covariates
    a = rng.standard_normal((c, 2 * c))
    m_stat = a @ a.T / c
    eta = bound.theta
    val, grad = kernel_objective(eta, bound, 1.3, 1e-8, m_stat, 3)
    h = 1e-6
    for j in range(eta.size):
        e = np.zeros_like(eta)
        e[j] = h
        fd = (kernel_objective(eta + e, bound, 1.3, 1e-8, m_stat, 3)[0]
              - kernel_objective(eta - e, bound, 1.3, 1e-8, m_stat, 3)[0]) / (2 * h)
        assert grad[j] == pytest.approx(fd, rel=1e-5, abs=1e-6)
    assert np.isfinite(val)


def test_joint_model_learns_task_correlation_by_em():
    """EM through learn_kernel: monotone objective; identical tasks get a strong positive
    correlation, mirrored ones (logits negated) a strong negative one."""
    rng = np.random.default_rng(5)
    S = _grid(4)
    K = SquaredExponential(lengthscale=2.0)(S) + 1e-8 * np.eye(16)
    f = np.linalg.cholesky(K) @ rng.standard_normal((16, 2))
    logits_same = np.stack([f[:, 0]] * 2)                       # two identical tasks
    logits_diff = np.stack([f[:, 0], -f[:, 0]])                 # mirrored tasks
    out = []
    for logits in (logits_same, logits_diff):
        p = 1.0 / (1.0 + np.exp(-2.0 * logits))
        x1 = np.concatenate([rng.binomial(30, pt) for pt in p])
        counts = np.stack([x1, 30 - x1], 1)
        kern = MultiTaskKernel(TaskCorrelation(2), SquaredExponential(lengthscale=2.0, lengthscale_bounds="fixed"))
        model = CorrelatedMultinomial(kern.bind(coords=task_coordinates([S, S])), learn_kernel=True,
                                      learn_scale=True, max_iter=300, tol=1e-6).fit(counts)
        assert np.all(np.diff(model.objective_trace_) >= -1e-8 * np.abs(model.objective_trace_[1:]))
        out.append(model.kernel_.kernel.task_correlation()[0, 1])
    assert out[0] > 0.8
    assert out[1] < -0.8


def test_independent_tasks_equal_separate_fits():
    """B = I: the joint model is the separate single-task models (same scale and means)."""
    rng = np.random.default_rng(6)
    S = _grid(3)
    counts = rng.multinomial(4, [0.5, 0.3, 0.2], size=18)
    counts[[2, 11]] = 0
    kern = MultiTaskKernel(TaskCorrelation(2, angle_bounds="fixed"), SquaredExponential(lengthscale=1.5))
    joint = CorrelatedMultinomial(kern.bind(coords=task_coordinates([S, S])), scale=2.0, tol=1e-12,
                                  max_iter=2000).fit(counts)
    for t in range(2):
        single = CorrelatedMultinomial(SquaredExponential(lengthscale=1.5).bind(coords=S), scale=2.0,
                                       tol=1e-12, max_iter=2000).fit(counts[9 * t:9 * t + 9])
        np.testing.assert_allclose(joint.psi_mean_[9 * t:9 * t + 9], single.psi_mean_, atol=1e-7)
        np.testing.assert_allclose(joint.psi_var_[9 * t:9 * t + 9], single.psi_var_, atol=1e-7)


def test_kronecker_precision_matches_dense_inverse():
    rng = np.random.default_rng(7)
    B = correlation_from_angles(_random_angles(rng, 3), 3)
    Q = grid_precision((4, 4), length_scale=2.0)
    P = kronecker_precision(B, Q)
    assert sp.issparse(P) and P.shape == (48, 48)
    assert P.nnz <= 9 * Q.nnz
    dense = np.kron(B, np.linalg.inv(Q.toarray()))
    np.testing.assert_allclose(P.toarray(), np.linalg.inv(dense), rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("B", [np.eye(2, dtype=bool), [[1.0, False], [False, 1.0]]], ids=["array", "list"])
def test_kronecker_precision_refuses_a_boolean_task_correlation(B):
    # before: np.eye(2, dtype=bool) was read as the identity (two unrelated tasks) without a word
    with pytest.raises(TypeError, match="task_correlation: expected a correlation matrix of real numbers"):
        kronecker_precision(B, grid_precision((2, 2), length_scale=1.0))


def test_sparse_joint_fit_matches_dense_joint_fit():
    """The Kronecker sparse path and the dense Kronecker covariance give the same posterior."""
    rng = np.random.default_rng(8)
    B = np.array([[1.0, 0.7], [0.7, 1.0]])
    Q = grid_precision((3, 3), length_scale=2.0)
    counts = rng.multinomial(5, [0.6, 0.3, 0.1], size=18)
    counts[[0, 4, 13]] = 0
    dense = CorrelatedMultinomial(np.kron(B, np.linalg.inv(Q.toarray())), scale=1.5, tol=1e-12,
                                  max_iter=3000).fit(counts)
    sparse = CorrelatedMultinomial(precision=kronecker_precision(B, Q), scale=1.5, tol=1e-12,
                                   max_iter=3000).fit(counts)
    np.testing.assert_allclose(sparse.psi_mean_, dense.psi_mean_, atol=1e-6)
    np.testing.assert_allclose(sparse.psi_var_, dense.psi_var_, atol=1e-6)
    assert sparse.elbo_ == pytest.approx(dense.elbo_, abs=1e-6)


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="n_tasks"):
        TaskCorrelation(0)
    with pytest.raises(ValueError, match="angles: expected shape"):
        TaskCorrelation(3, [1.0])
    with pytest.raises(ValueError, match="angles: expected values in"):
        TaskCorrelation(2, [4.0])
    with pytest.raises(ValueError, match="angle_bounds"):
        TaskCorrelation(2, angle_bounds=(0.1, 4.0))
    with pytest.raises(ValueError, match="X: expected integer task indices"):
        TaskCorrelation(2)(np.array([[0.0], [2.0]]))
    with pytest.raises(ValueError, match="X: expected one column"):
        TaskCorrelation(2)(np.zeros((2, 2)))
    with pytest.raises(TypeError, match="task_kernel"):
        MultiTaskKernel(np.eye(2), SquaredExponential())
    with pytest.raises(ValueError, match="n_task_dims"):
        MultiTaskKernel(TaskCorrelation(2), SquaredExponential(), n_task_dims=0)
    with pytest.raises(ValueError, match="at least one state column"):
        MultiTaskKernel(TaskCorrelation(2), SquaredExponential())(np.zeros((3, 1)))
    with pytest.raises(TypeError, match="gradient needs X"):
        MultiTaskKernel(TaskCorrelation(2), SquaredExponential()).gradient(distances=np.zeros((2, 2)))
    with pytest.raises(ValueError, match="task_correlation: must be positive definite"):
        kronecker_precision(np.ones((2, 2)), np.eye(3))
    B = np.array([[1.0, 0.5], [0.5, 1.0]])
    with pytest.raises(ValueError, match="state_precision: must be positive definite, got diagonal entry -1 at state"):
        kronecker_precision(B, -np.eye(3))
    with pytest.raises(ValueError, match="state_precision: must be symmetric"):
        kronecker_precision(B, np.eye(3) + np.triu(np.ones((3, 3)), 1))
    with pytest.raises(ValueError, match="state_precision: contains NaN"):
        kronecker_precision(B, np.diag([1.0, np.nan, 1.0]))
    with pytest.raises(ValueError, match="state_precision: expected a square"):
        kronecker_precision(B, np.eye(3)[:2])
    with pytest.raises(ValueError, match="state_precision: expected a square"):
        kronecker_precision(B, np.zeros((0, 0)))
    with pytest.raises(ValueError, match="correlation: expected a symmetric matrix with a unit diagonal"):
        angles_from_correlation(np.array([[2.0, 0.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="state_coords"):
        task_coordinates(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="task_descriptors"):
        task_coordinates([np.zeros((3, 2))] * 2, task_descriptors=[[0.0]])
