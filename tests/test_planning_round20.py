"""Round 20: expected_return's start state, the sparse warm start's sweep cap."""

import numpy as np
import pytest

from corrpriors.mdp import SparseTransitions, TabularMDP, planning
from corrpriors.mdp.metrics import expected_return, normalized_return


def _chain():
    P = np.full((3, 2, 3), 1.0 / 3.0)
    return TabularMDP(P, np.arange(3.0), 0.5)


@pytest.mark.parametrize("start", [True, np.True_, np.array(True), 1.5, "1", np.float64(0.5)])
def test_expected_return_refuses_a_start_that_is_not_a_state(start):
    """Was taken as state 1 (True) or failed with int()'s own message ("1")."""
    mdp = _chain()
    with pytest.raises(ValueError, match=r"^start: expected a state, an integer in \[0, 2\]"):
        expected_return(mdp, np.zeros(3, dtype=int), start)
    with pytest.raises(ValueError, match=r"^start: "):
        normalized_return(mdp, np.zeros(3, dtype=int), start)


@pytest.mark.parametrize("start", [2, np.int64(2), 2.0, np.array(2)])
def test_expected_return_of_a_start_state_is_its_value(start):
    mdp = _chain()
    # V(s) = R(s) + 0.5 * mean(V), mean(V) = 1 / (1 - 0.5) = 2, so V(2) = 3
    assert expected_return(mdp, np.zeros(3, dtype=int), start) == pytest.approx(3.0, rel=1e-12)


def _ring(S, discount, seed=1):
    A, K = 3, 4
    rng = np.random.default_rng(seed)
    nxt = (np.arange(S)[:, None, None] + rng.integers(-2, 3, size=(S, A, K))) % S
    p = rng.random((S, A, K))
    p /= p.sum(-1, keepdims=True)
    R = rng.normal(size=(S, A))
    dense = np.zeros((S, A, S))
    np.add.at(dense, (np.arange(S)[:, None, None], np.arange(A)[None, :, None], nxt), p)
    return TabularMDP(SparseTransitions.from_entries(nxt, p), R, discount), TabularMDP(dense, R, discount)


def test_sparse_warm_start_stops_after_a_capped_number_of_sweeps(monkeypatch):
    """Was up to 100,000 value-iteration sweeps near discount one (74 s at 6,000 states and
    0.99999): the warm start only picks the first policy, the result is the same."""
    sparse, dense = _ring(200, 0.999999)
    calls = []
    backup = planning._backup

    def counting(*args, **kwargs):
        calls.append(1)
        return backup(*args, **kwargs)

    monkeypatch.setattr(planning, "_backup", counting)
    res = planning.policy_iteration(sparse)
    monkeypatch.undo()
    # the warm start's sweeps plus one backup per policy evaluation
    assert len(calls) <= planning.WARM_START_MAX_SWEEPS + 1 + res.n_iter
    assert res.converged
    exact = planning.policy_iteration(dense)      # dense: exact solves, no warm start
    np.testing.assert_array_equal(res.policy, exact.policy)
    np.testing.assert_allclose(res.values, exact.values, rtol=1e-8)
