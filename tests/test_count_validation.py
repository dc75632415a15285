"""Count validation at the public boundary (issue 11): every estimator rejects counts that
float64 cannot hold, complex numbers, ragged lists, masked arrays with masked cells and
non-numbers, naming the argument."""

from __future__ import annotations

import numpy as np
import pytest

from corrpriors._validation import MAX_EXACT_COUNT, check_counts
from corrpriors.applications.transitions import DirichletTransitionModel
from corrpriors.baselines import DirichletMultinomial
from corrpriors.core import CorrelatedMultinomial

COV = np.exp(-np.subtract.outer(np.arange(2.0), np.arange(2.0)) ** 2)


def _estimators():
    return [lambda c: CorrelatedMultinomial(COV).fit(c), lambda c: DirichletMultinomial().fit(c)]


@pytest.mark.parametrize("fit", _estimators())
@pytest.mark.parametrize("counts", [
    [[2.0 ** 53 + 2, 0.0], [1.0, 1.0]],  # float above 2**53
    np.array([[2 ** 53 + 1, 0], [1, 1]], dtype=np.int64),  # exact integer, would round down
    np.array([[2 ** 63, 0], [1, 1]], dtype=np.uint64),
    [[10 ** 20, 0], [1, 1]],  # Python ints beyond int64: object array
    [[1e17, 1e17], [1.0, 1.0]],  # the case: a positive ELBO before
])
def test_counts_above_2_to_53_are_rejected(fit, counts):
    with pytest.raises(ValueError,
                       match=r"counts: counts must be at most 2\*\*53 = 9007199254740992"):
        fit(counts)


@pytest.mark.parametrize("fit", _estimators())
def test_row_totals_above_2_to_53_are_rejected_and_2_to_53_accepted(fit):
    with pytest.raises(ValueError, match=r"counts: every row total must be at most 2\*\*53.*"
                                         r"row 1 sums to 9007199254740993"):
        fit(np.array([[1, 1], [2 ** 52, 2 ** 52 + 1]], dtype=np.int64))
    fit(np.array([[1, 1], [2 ** 52, 2 ** 52]], dtype=np.int64))  # exactly 2**53: accepted
    assert check_counts([[MAX_EXACT_COUNT, 0]]).max() == 2.0 ** 53


@pytest.mark.parametrize("fit", _estimators())
def test_complex_counts_are_rejected_not_truncated(fit):
    """Before: the imaginary part was silently dropped (ComplexWarning at most)."""
    with pytest.raises(TypeError, match="counts: expected real integer counts, got complex"):
        fit(np.array([[1 + 2j, 3], [1, 1]]))
    with pytest.raises(TypeError, match="counts: expected real integer counts, got complex"):
        fit(np.array([[1 + 0j, 3], [1, 1]]))


@pytest.mark.parametrize("fit", _estimators())
def test_ragged_counts_name_the_argument(fit):
    with pytest.raises(ValueError, match="counts: expected a rectangular array; the nested "
                                         "sequences have different lengths"):
        fit([[1, 2], [3]])


@pytest.mark.parametrize("fit", _estimators())
def test_masked_counts_are_rejected_unless_nothing_is_masked(fit):
    data = np.array([[1, 2], [3, 4]])
    with pytest.raises(TypeError, match=r"counts: masked arrays are not supported .*filled\(0\)"):
        fit(np.ma.masked_array(data, mask=[[False, True], [False, False]]))
    unmasked = fit(np.ma.masked_array(data, mask=False))
    np.testing.assert_array_equal(unmasked.counts_, data)


@pytest.mark.parametrize("fit", _estimators())
@pytest.mark.parametrize("counts,match", [
    (np.array([[True, False], [True, True]]), "counts: expected real integer counts, got a boolean"),
    ([["1", "2"], ["3", "4"]], "counts: expected a numeric array, got dtype <U1"),
    (np.array([[None, 1], [1, 1]], dtype=object), "counts: expected a numeric array, got dtype "
                                                  "object holding NoneType"),
    (np.array([[object(), 1], [1, 1]], dtype=object), "counts: expected a numeric array"),
    (np.array([["2026-01-01", "2026-01-02"]] * 2, dtype="datetime64[D]"),
     "counts: expected a numeric array, got dtype datetime64"),
])
def test_non_numeric_counts_are_type_errors(fit, counts, match):
    with pytest.raises(TypeError, match=match):
        fit(counts)


def test_object_arrays_of_numbers_are_accepted():
    counts = np.array([[1, 2], [3, 4.0]], dtype=object)
    np.testing.assert_array_equal(check_counts(counts), [[1.0, 2.0], [3.0, 4.0]])


def test_transition_counts_go_through_the_same_check():
    m = DirichletTransitionModel(2, 1)
    with pytest.raises(ValueError, match=r"counts: counts must be at most 2\*\*53"):
        m.set_counts(np.full((2, 1, 2), 1e17))
    with pytest.raises(TypeError, match="counts: expected real integer counts"):
        m.set_counts(np.ones((2, 1, 2), dtype=complex))
    with pytest.raises(ValueError, match="counts: counts must be non-negative"):
        m.set_counts(-np.ones((2, 1, 2)))
    m.set_counts(np.ones((2, 1, 2), dtype=np.int64))
