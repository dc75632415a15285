"""Bad input to CorrelatedMultinomial raises ValueError naming the argument."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from corrpriors._validation import check_int, check_real, holds_bool
from corrpriors.baselines import DirichletMultinomial
from corrpriors.core import CorrelatedMultinomial
from corrpriors.exceptions import JitterWarning
from corrpriors.kernels import SquaredExponential

COV = np.exp(-np.subtract.outer(np.arange(3.0), np.arange(3.0)) ** 2 / 4.0)
GOOD = np.array([[1, 2, 0], [0, 0, 3], [2, 2, 2]])


def _fit(counts=GOOD, cov=COV, **kw):
    return CorrelatedMultinomial(covariance=cov, **kw).fit(counts)


@pytest.mark.parametrize("counts,match", [
    (np.array([[1, -2, 0], [0, 0, 3], [2, 2, 2]]), "counts: counts must be non-negative"),
    (np.array([[1, 2.5, 0], [0, 0, 3], [2, 2, 2]]), "counts: counts must be integers"),
    (np.array([[1, np.nan, 0], [0, 0, 3], [2, 2, 2]]), "counts: contains NaN"),
    (np.array([1, 2, 3]), "counts: expected a 2-D array"),
    (np.ones((3, 2, 2)), "counts: expected a 2-D array"),
    (np.array([[1], [2], [3]]), "counts: expected at least K=2"),
])
def test_bad_counts(counts, match):
    with pytest.raises(ValueError, match=match):
        _fit(counts=counts)


def test_string_counts_are_a_type_error():
    with pytest.raises(TypeError, match="counts: expected a numeric array"):
        _fit(counts=[["a", "b"], ["c", "d"], ["e", "f"]])


def test_integer_valued_floats_are_accepted():
    a = _fit(counts=GOOD.astype(float))
    b = _fit(counts=GOOD)
    np.testing.assert_allclose(a.psi_mean_, b.psi_mean_)


@pytest.mark.parametrize("cov,match", [
    (np.eye(4), r"covariance: expected shape \(3, 3\)"),
    (np.ones((3, 2)), "covariance: expected a square 2-D array"),
    (np.array([[1.0, 0.5, 0.0], [0.1, 1.0, 0.0], [0.0, 0.0, 1.0]]),
     "covariance: must be symmetric"),
    (np.array([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]]),
     "covariance: must be positive semi-definite"),
    (np.where(np.eye(3) > 0, np.nan, 0.1), "covariance: contains NaN"),
    (None, "covariance"),
])
def test_bad_covariance(cov, match):
    with pytest.raises(ValueError, match=match):
        _fit(cov=cov)


def test_rank_deficient_covariance_is_accepted_with_round_off_jitter_silently():
    # the core's one jitter rule: levels up to 1e-8 x mean diagonal are round-off protection
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitterWarning)
        m = _fit(cov=np.ones((3, 3)))
    assert 0 < m.jitter_ <= 1e-8
    np.testing.assert_allclose(m.covariance_, np.ones((3, 3)) + m.jitter_ * np.eye(3))
    assert np.all(np.isfinite(m.psi_mean_))
    # all-ones prior: the covariates share psi, so posterior means nearly coincide
    assert np.ptp(m.psi_mean_, axis=0).max() < 1e-3


def test_jitter_that_changes_the_prior_warns():
    # a PSD matrix (within the validation tolerance) with an eigenvalue of -2.7e-8 x largest:
    # 1e-10 .. 1e-8 fail, 1e-7 x mean diagonal is needed and reported
    q, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(3, 3)))
    cov = q @ np.diag([3.0, 1e-3, -2.7e-8]) @ q.T
    cov = 0.5 * (cov + cov.T)
    with pytest.warns(JitterWarning, match="rank deficient"):
        m = _fit(cov=cov)
    assert m.jitter_ == pytest.approx(1e-7 * np.mean(np.diag(cov)), rel=1e-9)


def test_well_conditioned_covariance_does_not_warn(recwarn):
    _fit()
    assert not [w for w in recwarn if issubclass(w.category, JitterWarning)]


@pytest.mark.parametrize("kw,match", [
    ({"mean": np.zeros(5)}, "mean: expected shape"),
    ({"mean": np.full((3, 2), np.nan)}, "mean: contains NaN"),
    ({"learn_mean": "global"}, "learn_mean: expected one of"),
    ({"max_iter": 0}, "max_iter: expected a positive integer"),
    ({"tol": -1.0}, "tol: expected a finite non-negative number"),
    ({"scale_prior": (2.0,)}, r"scale_prior: expected \(shape, rate\)"),
    ({"scale_prior": (2.0, -1.0)}, "scale_prior rate"),
    ({"mean_prior_std": 0.0}, "mean_prior_std"),
    ({"learn_kernel": True}, "learn_kernel: needs covariance to be a bound kernel"),
    ({"scale": 0.0}, "scale: expected a finite positive number"),
])
def test_bad_parameters(kw, match):
    with pytest.raises(ValueError, match=match):
        _fit(**kw)


def test_predictions_before_fit_raise():
    m = CorrelatedMultinomial(covariance=COV)
    with pytest.raises(ValueError, match="not fitted"):
        m.probs()
    m.fit(GOOD)
    with pytest.raises(ValueError, match="method: expected"):
        m.probs(method="median")


# ------------------------------------------------------------------ issue 11: extremes


@pytest.mark.parametrize("kw,match", [
    ({"mean_prior_std": 1e-300, "learn_mean": "constant"}, "mean_prior_std: expected a positive"),
    ({"scale_prior": 2.0, "learn_scale": True}, r"scale_prior: expected \(shape, rate\)"),
    ({"scale_prior": "ab", "learn_scale": True}, r"scale_prior: expected \(shape, rate\)"),
    ({"mean_prior_mean": [np.nan, 0.0]}, "mean_prior_mean: contains NaN"),
    ({"mean_prior_mean": [np.inf, 0.0], "learn_mean": "constant"},
     "mean_prior_mean: contains NaN or infinite"),
    ({"mean_prior_mean": [1e300, 0.0], "learn_mean": "constant", "mean_prior_std": 1.0},
     "mean_prior_mean: prior means of the stick logits must lie within"),
    ({"mean": [1e300, 0.0]}, "mean: prior means of the stick logits must lie within"),
    ({"scale": 1e30}, "scale: the prior variance of the stick logits.*usable range"),
    # a hyper-prior that pins the MAP scale to a bound of the usable range (it used to run
    # 5 iterations, pin the scale at 1e-150 and report an ELBO of garbage)
    ({"scale_prior": (1e-300, 1e300), "learn_scale": True}, "scale_prior: the Gamma.*outside"),
    ({"scale_prior": (1e20, 1e-10), "learn_scale": True}, "scale_prior: the Gamma.*outside"),
])
def test_extreme_hyper_parameters_raise_naming_the_argument(kw, match):
    with pytest.raises(ValueError, match=match):
        _fit(**kw)


def test_covariance_whose_variance_overflows_the_arithmetic_is_refused():
    with pytest.raises(ValueError, match=r"usable range.*scale <= 1e-185"):
        _fit(cov=COV * 1e200)
    # the same prior at a scale inside the range: fits, monotone
    m = _fit(cov=COV * 1e200, scale=1e-190)
    assert m.converged_ and np.all(np.diff(m.objective_trace_) >= 0)


def test_largest_usable_scale_gives_the_data_answer_monotonically():
    counts = np.array([[80, 10, 10], [70, 20, 10], [10, 10, 80]])
    near = _fit(counts=counts, scale=1e12, max_iter=3000)
    edge = _fit(counts=counts, scale=1e14, max_iter=3000)
    assert edge.converged_ and edge.result_.monotone
    np.testing.assert_allclose(edge.probs(), near.probs(), atol=1e-4)


def test_non_finite_objective_raises_instead_of_returning_nan():
    from corrpriors.core.cavi import CAVIOptions, run_cavi
    from corrpriors.core.priors.dense import DenseCovariancePrior

    class Broken(DenseCovariancePrior):
        def psi_step(self, *args, **kwargs):
            step = super().psi_step(*args, **kwargs)
            step.psi_mean[0, 0] = np.nan
            return step

    mean = np.zeros((3, 2))
    with pytest.raises(FloatingPointError, match="objective is not finite"):
        run_cavi(GOOD, Broken(COV), mean, CAVIOptions())


def test_learning_a_kernel_without_free_parameters_is_refused():
    from corrpriors.kernels import SquaredExponential

    kernel = SquaredExponential(lengthscale=1.0, lengthscale_bounds="fixed").bind(
        coords=np.arange(3.0)[:, None])
    with pytest.raises(ValueError, match="learn_kernel: every hyper-parameter of the kernel"):
        _fit(cov=kernel, learn_kernel=True)


@pytest.mark.parametrize("rng,exc,match", [(-1, ValueError, "rng: an integer seed must be"),
                                           (True, TypeError, "rng: expected None"),
                                           ("x", TypeError, "rng: expected None")])
def test_bad_rng_names_the_argument(rng, exc, match):
    m = _fit()
    with pytest.raises(exc, match=match):
        m.sample_probs(2, rng=rng)


def test_repr_shows_the_parameters_that_differ_from_the_defaults():
    from corrpriors import DirichletMultinomial

    assert repr(CorrelatedMultinomial(COV)) == "CorrelatedMultinomial(covariance=array(shape=(3, 3)))"
    text = repr(CorrelatedMultinomial(COV, learn_scale=True, scale=0.5))
    assert text == ("CorrelatedMultinomial(covariance=array(shape=(3, 3)), learn_scale=True, "
                    "scale=0.5)")
    assert repr(DirichletMultinomial(alpha=1e-3)) == "DirichletMultinomial(alpha=0.001)"


@pytest.mark.parametrize("make", [
    lambda X: __import__("corrpriors").kernels.SquaredExponential(lengthscale=1.0).bind(coords=X),
    lambda X: __import__("corrpriors").kernels.euclidean_distances(X),
])
def test_complex_coordinates_are_a_type_error(make):
    """Complex covariates used to lose their imaginary part (NumPy's ComplexWarning only)."""
    X = np.array([[0.0 + 1j, 0.0], [1.0, 0.0]])
    with pytest.raises(TypeError, match="expected real numbers, got complex"):
        make(X)


def test_check_real_converts_nothing_but_numbers():
    """check_real: numbers (numpy's too) as floats; bools, strings and None a TypeError naming the
    argument; NaN, infinities and values outside the interval (its open or closed ends) a
    ValueError."""
    assert check_real(np.float32(0.5), "x", 0.0, 1.0) == 0.5 and check_real(np.int64(1), "x", 0.0, 1.0) == 1.0
    assert type(check_real(1, "x")) is float
    for bad in (True, np.bool_(False), "0.5", None, [0.5], np.array(0.5)):
        with pytest.raises(TypeError, match=r"^x: expected a real number in \[0, 1\], got "):
            check_real(bad, "x", 0.0, 1.0)
    for bad in (np.nan, np.inf, -0.1, 1.5):
        with pytest.raises(ValueError, match=r"^x: expected a real number in \[0, 1\], got "):
            check_real(bad, "x", 0.0, 1.0)
    with pytest.raises(ValueError, match=r"^p: expected a real number in \(0, 1\), got 0"):
        check_real(0, "p", 0.0, 1.0, closed="neither")
    with pytest.raises(ValueError, match=r"^p: expected a probability, got 1.0"):
        check_real(1.0, "p", 0.0, 1.0, closed="left", expected="a probability")
    assert check_real(0.0, "p", 0.0, 1.0, closed="left") == 0.0



def test_check_int_takes_integers_of_any_size():
    """check_int: an int of any size is compared exactly (a 300-digit one raised numpy's TypeError
    'ufunc isfinite not supported' before) and shown cut to one short line."""
    assert check_int(np.int64(7), "n", 0, 10) == 7 and check_int(2**70, "n", 0) == 2**70
    for huge in (10**300, -(10**300)):
        with pytest.raises(ValueError, match=r"^n: expected an integer in \[0, 10\], got -?1000") as info:
            check_int(huge, "n", 0, 10)
        assert len(str(info.value)) < 220
    for bad in (True, 1.5, np.nan, np.inf, None, "3"):
        with pytest.raises(ValueError, match=r"^n: expected an integer >= 0, got "):
            check_int(bad, "n", 0)

def test_prior_means_beyond_a_million_are_refused():
    """Means of the stick logits are bounded by MAX_LOGIT = 1e6: far beyond it the fit lost the
    posterior variances (1e30: 0 against the prior's 1) without a word, the collapsed bound was
    NaN (1e16) and the Gibbs sampler did not return (1e50). At the bound the fit is exact: the
    first stick is saturated, so its Polya-Gamma expectations are b / (2 |mu|) (tanh = 1) and its
    posterior covariance is (Sigma^-1 + diag(b / 2e6))^-1 in closed form."""
    from corrpriors.core.model import MAX_LOGIT

    cov = np.exp(-np.subtract.outer(np.arange(4.0), np.arange(4.0)) ** 2)
    x = np.array([[5, 1, 0], [4, 2, 0], [0, 0, 0], [1, 1, 4]])
    for bad in (1e7, -1e16, 1e50):
        with pytest.raises(ValueError, match=r"^mean: prior means of the stick logits must lie within \+-1e\+06"):
            CorrelatedMultinomial(cov, mean=[bad, 0.0]).fit(x)
    m = CorrelatedMultinomial(cov, mean=[MAX_LOGIT, 0.0]).fit(x)
    b = x.sum(axis=1).astype(float)                 # every count reaches the first stick
    exact = np.diag(np.linalg.inv(np.linalg.inv(cov) + np.diag(b / (2.0 * MAX_LOGIT))))
    np.testing.assert_allclose(m.psi_var_[:, 0], exact, rtol=1e-8)
    assert np.isfinite(m.collapsed_bound()) and np.isfinite(m.elbo_)
    draws = m.fit_gibbs(x, 20, burn_in=5, rng=0)
    assert draws is not None


@pytest.mark.parametrize("flag", ["learn_scale", "learn_kernel"])
def test_flags_must_be_real_bools(flag):
    """learn_scale="no" learned the scale (bool("no") is True); 1 and None were truth-tested too."""
    for bad in ("no", "False", 1, 0, None, 0.0):
        with pytest.raises(TypeError, match=rf"^{flag}: expected True or False, got "):
            _fit(**{flag: bad})
    fixed = CorrelatedMultinomial(covariance=COV, learn_scale=np.bool_(False), scale=2.0).fit(GOOD)
    assert fixed.scale_ == 2.0


@pytest.mark.parametrize("call, error, match", [
    (lambda: _fit(counts=[[1, 2, 0], [0, True, 3], [2, 2, 2]]), TypeError,
     "counts: .* a sequence holding a boolean"),
    (lambda: _fit(counts=[[1, 2, 0], [0, 0, 3], np.array([True, True, False])]), TypeError,
     "counts: .* a sequence holding a boolean"),
    (lambda: DirichletMultinomial(alpha=[1.0, True]).fit(np.ones((3, 2), int)), ValueError,
     r"alpha: expected a positive number or array, got \[1.0, True\]"),
    (lambda: SquaredExponential(lengthscale=1.0).with_theta([0.0, np.True_]), TypeError,
     "theta: expected log hyper-parameters .* got booleans"),
], ids=["counts-list", "counts-row-array", "alpha", "theta"])
def test_a_boolean_inside_a_list_of_numbers_is_refused(call, error, match):
    # np.asarray([1.0, True]) is [1.0, 1.0]: the dtype alone cannot show the boolean, and before
    # this check such lists fitted with True counted as 1
    with pytest.raises(error, match=match):
        call()


def test_lists_of_plain_numbers_still_pass():
    assert holds_bool([[1.0, 2], (3, np.float64(4.0))], np.asarray([[1.0, 2], (3, 4.0)])) is False
    assert holds_bool(7, np.asarray(7)) is False
    fitted = DirichletMultinomial(alpha=[1.0, 2.0]).fit(np.ones((3, 2), int))
    np.testing.assert_allclose(fitted.posterior_alpha_, [[2.0, 3.0]] * 3)
