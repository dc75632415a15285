"""Gymnasium integration with corrpriors' own TabularEnv: terminal rows, sparse models, argument checks."""

import numpy as np
import pytest

from corrpriors.envs import TabularEnv, from_gymnasium
from corrpriors.experiments._gym import goal_states, horizon_stats
from corrpriors.mdp import SparseTransitions, TabularMDP


def _chain_with_live_terminal_row(sparse):
    """0 -> 1 -> 2 (terminal goal); the model's row of 2 leads back to 0 and pays 5."""
    P = np.zeros((3, 1, 3))
    P[0, 0, 1] = P[1, 0, 2] = P[2, 0, 0] = 1.0
    r = np.zeros((3, 1, 3))
    r[1, 0, 2], r[2, 0, 0] = 1.0, 5.0
    table = SparseTransitions.from_dense(P) if sparse else P
    return TabularMDP(table, r, 0.9, terminal=np.array([False, False, True]),
                      initial_distribution=np.array([1.0, 0.0, 0.0]))


@pytest.mark.parametrize("sparse", [False, True])
def test_horizon_stats_never_step_out_of_a_terminal_row_of_a_tabularenv(sparse):
    # from_gymnasium keeps a TabularEnv's rows: the terminal row is not absorbing there
    mdp = from_gymnasium(TabularEnv(_chain_with_live_terminal_row(sparse)))
    goals = goal_states(mdp)
    assert goals.tolist() == [2]
    for horizon in (2, 3, 4, 7):
        success, ret = horizon_stats(mdp, np.zeros((1, 3), dtype=int), goals, horizon)
        assert success[0] == pytest.approx(1.0)     # reached at step 2, the episode has ended
        assert ret[0] == pytest.approx(1.0)         # the goal's own row pays nothing
    success, ret = horizon_stats(mdp, np.zeros((1, 3), dtype=int), goals, 1)
    assert success[0] == 0.0 and ret[0] == 0.0
