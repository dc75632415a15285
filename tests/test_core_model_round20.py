"""Round-20 input checks of CorrelatedMultinomial and check_positive (audit items 2-6).

Each test names the call that used to be accepted (or gave an error not naming the argument).
"""

from __future__ import annotations

import numpy as np
import pytest

from corrpriors._validation import check_positive
from corrpriors.core import CorrelatedMultinomial

C = 4
COV = np.exp(-np.subtract.outer(np.arange(C, dtype=float), np.arange(C, dtype=float)) ** 2)
GOOD = np.array([[5, 1, 0], [4, 2, 0], [0, 0, 0], [1, 1, 4]])


@pytest.fixture(scope="module")
def fitted():
    return CorrelatedMultinomial(COV).fit(GOOD)


@pytest.mark.parametrize("cov, match", [
    (COV + 0.5j * np.eye(C), "covariance: .*complex"),      # imaginary part was dropped
    (COV + 0j, "covariance: .*complex"),
    (np.eye(C, dtype=bool), "covariance: .*boolean"),        # True was taken as 1.0
    ([[True, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]], "covariance: .*boolean"),
])
def test_complex_or_boolean_covariance_is_refused(cov, match):
    with pytest.raises(TypeError, match=match):
        CorrelatedMultinomial(cov).fit(GOOD)


def test_real_covariance_in_other_dtypes_still_fits_the_same():
    ref = CorrelatedMultinomial(COV).fit(GOOD).psi_mean_
    for cov in (COV.tolist(), COV.astype(np.float32).astype(np.float64), np.eye(C, dtype=int)):
        m = CorrelatedMultinomial(cov).fit(GOOD)
        assert np.all(np.isfinite(m.psi_mean_))
    np.testing.assert_array_equal(CorrelatedMultinomial(COV.tolist()).fit(GOOD).psi_mean_, ref)
    with pytest.raises(ValueError, match="covariance: expected a numeric"):
        CorrelatedMultinomial("abc").fit(GOOD)


@pytest.mark.parametrize("mean, error, match", [
    (["a", "b"], TypeError, "mean: "),                       # was "could not convert string to float"
    ([True, False], TypeError, "mean: .*boolean"),          # was accepted as [1.0, 0.0]
    (np.array([True, False]), TypeError, "mean: .*boolean"),
    ([0.5, 1 + 1j], TypeError, "mean: .*complex"),
])
def test_bad_mean_names_the_argument(mean, error, match):
    with pytest.raises(error, match=match):
        CorrelatedMultinomial(COV, mean=mean).fit(GOOD)


def test_numeric_mean_still_accepted():
    a = CorrelatedMultinomial(COV, mean=[0.0, -1.0]).fit(GOOD)
    b = CorrelatedMultinomial(COV, mean=np.array([[0.0, -1.0]] * C)).fit(GOOD)
    np.testing.assert_array_equal(a.psi_mean_, b.psi_mean_)
    np.testing.assert_array_equal(a.mean_, np.array([[0.0, -1.0]] * C))


@pytest.mark.parametrize("value", ["1", "1e-3", b"1", np.str_("2")])
def test_check_positive_refuses_strings(value):
    # float() used to convert them ("1" -> 1.0); ValueError like every other failure here
    with pytest.raises(ValueError, match=r"^scale: expected a positive number, got .*\(a string"):
        check_positive(value, "scale")
    with pytest.raises(ValueError, match=r"^tol: expected a positive number, got .*\(a string"):
        check_positive(value, "tol", strict=False)


def test_check_positive_still_takes_numbers():
    assert check_positive(2, "x") == 2.0
    assert check_positive(np.float32(0.5), "x") == 0.5
    assert check_positive(np.array(3.0), "x") == 3.0
    assert check_positive(0, "x", strict=False) == 0.0


@pytest.mark.parametrize("kw", [dict(scale="1"), dict(tol="1e-3")])
def test_model_refuses_string_scale_and_tol(kw):
    with pytest.raises(ValueError, match=f"^{next(iter(kw))}: .*a string"):
        CorrelatedMultinomial(COV, **kw).fit(GOOD)


@pytest.mark.parametrize("n", [True, np.bool_(True), False])
def test_sample_psi_and_sample_probs_refuse_bools(fitted, n):
    with pytest.raises(ValueError, match="n: expected a positive integer"):
        fitted.sample_psi(n, rng=0)
    with pytest.raises(ValueError, match="n: expected a positive integer"):
        fitted.sample_probs(n, rng=0)
    assert fitted.sample_probs(np.int64(2), rng=0).shape == (2, C, 3)


@pytest.mark.parametrize("method", ["vi", "gibbs", "calibrated"])
def test_credible_interval_checks_hyper_for_every_method(fitted, method):
    with pytest.raises(ValueError, match="hyper: expected one of"):
        fitted.credible_interval(0.9, method=method, hyper="foo", rng=0, n_samples=16)
    with pytest.raises(ValueError, match="hyper: expected one of"):
        fitted.credible_interval(0.9, method=method, hyper=None, rng=0, n_samples=16)


@pytest.mark.parametrize("flag", ["yes", "no", 1, 0, None])
def test_return_std_must_be_a_bool(fitted, flag):
    with pytest.raises(TypeError, match="return_std: expected True or False"):
        fitted.credible_interval(0.9, method="vi", return_std=flag, rng=0, n_samples=16)
    with pytest.raises(TypeError, match="return_std: expected True or False"):
        fitted.probs(return_std=flag)
    with pytest.raises(TypeError, match="return_std: expected True or False"):
        fitted.probs("mc", return_std=flag, rng=0)


def test_return_std_bools_unchanged(fitted):
    lo, hi, sd = fitted.credible_interval(0.9, method="vi", return_std=np.bool_(True), rng=0,
                                          n_samples=64)
    lo2, hi2, sd2 = fitted.credible_interval(0.9, method="vi", return_std=True, rng=0, n_samples=64)
    np.testing.assert_array_equal(sd, sd2)
    np.testing.assert_array_equal(fitted.probs(return_std=False), fitted.probs())
    assert len(fitted.credible_interval(0.9, method="vi", return_std=False, rng=0,
                                        n_samples=64)) == 2
