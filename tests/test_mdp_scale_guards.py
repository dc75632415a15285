"""Public functions of corrpriors.mdp at 10^5 states: a dense array that cannot fit is refused
up front, with one line naming the argument that asks for it and what to use instead, before
anything big is allocated. The budget is set with ``CORRPRIORS_MEMORY_LIMIT`` so that nothing
big is ever allocated here.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import scipy.sparse as sp

from corrpriors._memory import MemoryEstimateError
from corrpriors.mdp import state_action_counts, transition_counts
from memory_checks import traced_peak

S_BIG, A_BIG = 100_000, 4


@pytest.fixture
def budget_16g(monkeypatch):
    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "16G")


def few_transitions(S, A, n=1000, seed=0):
    rng = np.random.default_rng(seed)
    s = rng.integers(S, size=n)
    return s, rng.integers(A, size=n), np.minimum(s + 1, S - 1)


def test_transition_counts_refuses_the_dense_tensor_at_100k_states(budget_16g):
    """The default ``sparse=False`` asked numpy for 8 S^2 A bytes (298 GiB here) and died in a
    MemoryError, or was killed. Now refused before any allocation, pointing at sparse."""
    data = few_transitions(S_BIG, A_BIG)
    start = time.monotonic()

    def refused():
        with pytest.raises(MemoryEstimateError, match=(
                r"^transition_counts\(sparse=False\): the dense \(S, A, S\) int64 counts of 100,000 "
                r"states x 4 actions would need about 298 GiB, more than the 16 GiB this process may "
                r"use \(CORRPRIORS_MEMORY_LIMIT\); pass sparse=True .* or sparse=None")) as info:
            transition_counts(data, S_BIG, A_BIG)
        return info.value

    err, peak = traced_peak(refused)
    assert time.monotonic() - start < 1.0 and peak < 2**20
    assert isinstance(err, ValueError) and "\n" not in str(err)

    for sparse in (True, None):                     # what the message offers works
        counts, peak = traced_peak(transition_counts, data, S_BIG, A_BIG, sparse=sparse)
        assert isinstance(counts, sp.csr_array) and counts.shape == (S_BIG * A_BIG, S_BIG)
        assert counts.sum() == 1000 and peak < 16 * 2**20    # (S A + 1) row pointers: 3.05 MiB


def test_transition_counts_stays_dense_wherever_the_tensor_fits(monkeypatch):
    """No change of type for the sizes that worked: the check refuses exactly above the budget."""
    S, A = 100, 2                                    # 8 x 100 x 2 x 100 = 156 KiB
    data = few_transitions(S, A)
    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "200K")
    dense = transition_counts(data, S, A)
    assert isinstance(dense, np.ndarray) and dense.shape == (S, A, S) and dense.dtype == np.int64
    np.testing.assert_array_equal(dense.reshape(S * A, S), transition_counts(data, S, A, sparse=True).toarray())
    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "150K")
    with pytest.raises(MemoryEstimateError, match=r"about 156 KiB, more than the 150 KiB .*sparse=True"):
        transition_counts(data, S, A)
    auto = transition_counts(data, S, A, sparse=None)      # None: sparse where dense cannot fit
    assert isinstance(auto, sp.csr_array)
    np.testing.assert_array_equal(auto.toarray(), dense.reshape(S * A, S))
    monkeypatch.delenv("CORRPRIORS_MEMORY_LIMIT")
    assert isinstance(transition_counts(data, S, A, sparse=None), np.ndarray)   # 156 KiB < 64 MiB


@pytest.mark.parametrize("fn, data", [(transition_counts, few_transitions(5, 2)),
                                      (state_action_counts, few_transitions(5, 2)[:2])])
@pytest.mark.parametrize("n_states, n_actions, bad", [(0, 2, "n_states"), (5.5, 2, "n_states"),
                                                      ("5", 2, "n_states"), (5, True, "n_actions"),
                                                      (5, -1, "n_actions")])
def test_count_sizes_are_checked_by_name(fn, data, n_states, n_actions, bad):
    with pytest.raises(ValueError, match=rf"^{bad}: expected an integer >= 1, got"):
        fn(data, n_states, n_actions)


def test_state_action_counts_refuses_an_absurd_size(budget_16g):
    """(S, A) is small at 10^5 states (3 MiB); a wrong S of 10^12 is refused, not allocated."""
    data = few_transitions(S_BIG, A_BIG)[:2]
    assert state_action_counts(data, S_BIG, A_BIG).sum() == 1000
    with pytest.raises(MemoryEstimateError, match=r"^state_action_counts: the \(S, A\) int64 counts of "
                                                  r"1,000,000,000,000 states x 4 actions would need about 29\.1 TiB"):
        state_action_counts(data, 10**12, A_BIG)
