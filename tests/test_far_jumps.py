"""Far jumps ("other" transitions) pooled over states: where a fall or a reset leads."""

from __future__ import annotations

import dataclasses

import gymnasium
import numpy as np
import pytest

from corrpriors.applications import PSRLAgent
from corrpriors.applications.transitions import (
    CategoryMap,
    CorrelatedTransitionModel,
    displacement_category_map,
)
from corrpriors.envs import from_gymnasium
from corrpriors.experiments import gym_psrl


def grid_coords(rows: int, cols: int) -> np.ndarray:
    return np.array([(r, c) for r in range(rows) for c in range(cols)])


def naive_other_weights(cmap: CategoryMap, counts: np.ndarray, all_counts: np.ndarray) -> np.ndarray:
    """Transcription, one state at a time: w[s] ∝ n[s] + alpha + beta * pooled|outside(s), normalised."""
    S = cmap.n_states
    pooled = np.zeros(S)
    for a in range(all_counts.shape[0]):
        for s in range(S):
            for t in range(S):
                if cmap.outside[s, t]:
                    pooled[t] += all_counts[a, s, t]
    w = np.zeros((S, S))
    for s in range(S):
        out = np.flatnonzero(cmap.outside[s])
        if out.size == 0:
            continue
        base = pooled[out] / pooled[out].sum() if pooled[out].sum() > 0 else np.zeros(out.size)
        row = counts[s, out] + cmap.other_prior + cmap.other_pooling * base
        w[s, out] = row / row.sum()
    return w


@pytest.mark.parametrize("boundary", ["exclude", "stay"])
@pytest.mark.parametrize("beta", [0.0, 0.5, 3.0])
def test_pooled_other_weights_match_a_naive_transcription(boundary, beta):
    cmap = displacement_category_map(grid_coords(3, 4), 1, other_prior=0.05, boundary=boundary,
                                     other_pooling=beta)
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 3, size=(2, 12, 12)).astype(float)
    pooled = cmap.far_destinations(counts)
    for a in range(2):
        np.testing.assert_allclose(cmap.other_weights(counts[a], pooled),
                                   naive_other_weights(cmap, counts[a], counts), atol=1e-14)
    # without pooled counts (or with none observed) the weights are the per-state Dirichlet's
    np.testing.assert_allclose(cmap.other_weights(counts[0]), cmap.other_weights(counts[0], 0 * pooled))


def test_far_destinations_count_only_jumps_outside_the_window():
    cmap = displacement_category_map(grid_coords(1, 6), 1)
    counts = np.zeros((6, 6))
    counts[5, 0] = 2.0      # far: 5 -> 0
    counts[1, 0] = 7.0      # a unit move, inside the window
    counts[3, 0] = 1.0      # far: 3 -> 0
    np.testing.assert_array_equal(cmap.far_destinations(counts), [3, 0, 0, 0, 0, 0])


def test_one_fall_tells_the_unvisited_cells_where_theirs_lead():
    """A 3 x 6 grid whose bottom row is a cliff: stepping down from row 1 lands at the start.

    After falls observed from one cell only, the posterior mean of a cell never tried sends its
    far-jump mass mostly to the start with pooling, and spreads it uniformly without."""
    coords = grid_coords(3, 6)
    S, start, down = 18, 12, 0

    @dataclasses.dataclass
    class Grid:
        n_states: int = S
        n_actions: int = 1
        coordinates: np.ndarray = dataclasses.field(default_factory=lambda: coords.astype(float))

    counts = np.zeros((S, 1, S))
    for s in range(6, 12):
        if s == 8:
            counts[s, down, start] = 5          # the falls, from cell (1, 2) only
    for s in range(6):
        counts[s, down, s + 6] = 5              # row 0 moves down normally
    probs = {}
    for beta, layer in ((0.0, None), (1.0, None), (1.0, "auto")):
        belief = CorrelatedTransitionModel.for_mdp(Grid(), other_pooling=beta, boundary="exclude",
                                                   selection="fixed", prior="dense",
                                                   concentration=layer,
                                                   contamination_prior=layer and (1.0, 1.0))
        P = belief.set_counts(counts).mean()[:, down, :]
        far = belief.category_map.outside[10]
        probs[beta, layer] = P[10, start] / P[10, far].sum()          # cell (1, 4): never tried
    n_far = int(belief.category_map.outside[10].sum())
    assert probs[0.0, None] == pytest.approx(1.0 / n_far, rel=1e-9)
    assert probs[1.0, None] > 0.7
    # the layer's contamination keeps a share of every pair's mass uniform (5 falls are little
    # evidence that the neighbours predict), yet most of the far mass still goes to the start
    assert probs[1.0, "auto"] > 0.5
    with pytest.raises(ValueError, match="other_pooling"):
        displacement_category_map(coords, 1, other_pooling=-1.0)
    with pytest.raises(ValueError, match="other_pooling"):
        CategoryMap(np.tile(np.arange(3), (3, 1)), other_pooling=float("nan"))


def test_psrl_rewards_and_terminals_settings_reach_the_agent(monkeypatch):
    """``rewards="expected"`` hands the agent R(s, a) under the true model, the default r(s, a, s');
    ``terminals="known"`` (default) the table's terminal mask, ``"observed"`` none up front."""
    seen, terminals = [], []

    class Recording(PSRLAgent):
        def __init__(self, belief, rewards, *args, **kwargs):
            seen.append(np.asarray(rewards))
            terminals.append(kwargs.get("terminal"))
            super().__init__(belief, rewards, *args, **kwargs)

    monkeypatch.setattr("corrpriors.applications.psrl.PSRLAgent", Recording)
    for rewards, known in (("transition", "known"), ("expected", "observed")):
        config = gym_psrl.PSRLConfig(env_id="FrozenLake-v1", steps=20,
                                     eval_every=10, replan_every=10, methods=("dirichlet_sparse_mean",),
                                     rewards=rewards, terminals=known)
        gym_psrl.run_seed(config, rng=np.random.default_rng(0))
    truth = from_gymnasium(gymnasium.make("FrozenLake-v1"))
    np.testing.assert_array_equal(seen[0], truth.rewards)
    np.testing.assert_allclose(seen[1], np.einsum("sat,sat->sa", truth.transitions, truth.rewards))
    assert seen[0].shape == (16, 4, 16) and seen[1].shape == (16, 4)
    np.testing.assert_array_equal(terminals[0], truth.terminal)
    assert terminals[0].sum() == 5 and terminals[1] is None          # 4 holes and the goal


def test_far_jumps_tracked_by_update_equal_those_of_set_counts():
    """The belief keeps the pooled far jumps as transitions arrive; set_counts recounts them."""
    coords = grid_coords(3, 5)

    @dataclasses.dataclass
    class Grid:
        n_states: int = 15
        n_actions: int = 2
        coordinates: np.ndarray = dataclasses.field(default_factory=lambda: coords.astype(float))

    rng = np.random.default_rng(3)
    s, a, s2 = rng.integers(0, 15, 200), rng.integers(0, 2, 200), rng.integers(0, 15, 200)
    streamed = CorrelatedTransitionModel.for_mdp(Grid(), selection="fixed", prior="dense")
    for i in range(0, 200, 37):
        streamed.update(s[i:i + 37], a[i:i + 37], s2[i:i + 37])
    batch = CorrelatedTransitionModel.for_mdp(Grid(), selection="fixed", prior="dense")
    batch.set_counts(streamed.counts)
    np.testing.assert_array_equal(streamed._far, batch._far)
    assert streamed._far.sum() == streamed.category_map.outside[s, s2].sum() > 0
    np.testing.assert_allclose(streamed.mean(), batch.mean(), atol=1e-12)
