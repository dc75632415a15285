"""The slippery-lake task family: dynamics against a direct transcription, the relatedness's
three parts (slip, directions, holes) at its ends, layouts with a path, bad input, and the
transfer experiment's ``family`` setting."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from corrpriors.envs import lake_task_family, slippery_lake
from corrpriors.envs.task_family import TARGET_SLIP, _path_exists
from corrpriors.experiments import transfer as T
from corrpriors.mdp import check_mdp, mean_hellinger

UP, RIGHT, DOWN, LEFT = (-1, 0), (0, 1), (1, 0), (0, -1)
DIRS = [UP, RIGHT, DOWN, LEFT]


def _transcribed(shape, holes, slip, directions, start, goal):
    """P(s' | s, a) cell by cell, written out from the rules in plain loops."""
    n_rows, n_cols = shape
    S = n_rows * n_cols
    P = np.zeros((S, 4, S))
    for r in range(n_rows):
        for c in range(n_cols):
            s = r * n_cols + c
            for a in range(4):
                if (r, c) in holes or (r, c) == goal:
                    P[s, a, start[0] * n_cols + start[1]] = 1.0
                    continue
                intended = DIRS[directions[a]]
                sideways = [d for d in DIRS if d[0] * intended[0] + d[1] * intended[1] == 0]
                for (dr, dc), p in [(intended, 1 - slip)] + [(d, slip / 2) for d in sideways]:
                    i, j = r + dr, c + dc
                    if not (0 <= i < n_rows and 0 <= j < n_cols):
                        i, j = r, c                       # off the grid: stay
                    if (i, j) in holes:
                        i, j = start                      # into a hole: back to the start
                    P[s, a, i * n_cols + j] += p
    return P


@pytest.mark.parametrize("slip, directions", [(0.2, (0, 1, 2, 3)), (2 / 3, (2, 0, 3, 1)), (0.0, (1, 0, 3, 2))])
def test_lake_matches_a_direct_transcription(slip, directions):
    shape, holes = (4, 5), [(1, 1), (2, 3), (0, 4)]
    mdp = slippery_lake(shape, holes, slip, directions, goal=(3, 2), start=(3, 0))
    check_mdp(mdp)
    expected = _transcribed(shape, set(holes), slip, directions, (3, 0), (3, 2))
    np.testing.assert_allclose(mdp.transitions, expected, atol=1e-15)
    assert mdp.reward_matrix[17, 0] == 1.0 and mdp.reward_matrix.sum() == 4.0
    assert mdp.boundary == "stay" and mdp.shape == shape
    mask = np.zeros(20, bool)
    mask[[6, 13, 4]] = True                               # the same holes as a boolean mask
    np.testing.assert_array_equal(slippery_lake(shape, mask, slip, directions, goal=(3, 2), start=(3, 0)).transitions,
                                  mdp.transitions)


def test_lake_rejects_bad_input_naming_it():
    for kwargs, match in ((dict(slip=1.5), "slip"), (dict(slip=np.nan), "slip"),
                          (dict(directions=(0, 1, 2, 2)), "directions"), (dict(directions=(0, 1)), "directions"),
                          (dict(holes=[(0, 0)]), "holes"), (dict(holes=[(5, 1)]), "holes"),
                          (dict(holes=np.zeros(7, bool)), "holes"), (dict(holes=[1, 2, 3]), "holes"),
                          (dict(goal=(0, 0)), "goal, start")):
        with pytest.raises(ValueError, match=match):
            slippery_lake((3, 3), **kwargs)
    with pytest.raises(ValueError, match="relatedness"):
        lake_task_family(-0.1, 2, rng=0)
    with pytest.raises(ValueError, match="hole_density"):
        lake_task_family(0.5, 2, rng=0, hole_density=0.9)
    with pytest.raises(TypeError, match="relabel_sources"):
        lake_task_family(0.5, 2, rng=0, relabel_sources="yes")


def test_family_ends_and_layouts():
    # r = 1: every source is the target
    same, params = lake_task_family(1.0, 3, rng=3, shape=(6, 6), hole_density=0.2)
    for m in same[:-1]:
        np.testing.assert_array_equal(m.transitions, same[-1].transitions)
    assert params[-1].slip == TARGET_SLIP and params[-1].directions == (0, 1, 2, 3)
    # r = 0: slips, directions and layouts drawn afresh (over many sources, not the target's)
    far, fparams = lake_task_family(0.0, 60, rng=4, shape=(6, 6), hole_density=0.2)
    slips = np.array([p.slip for p in fparams[:-1]])
    assert 0 <= slips.min() and slips.max() <= 2 / 3 and abs(slips.mean() - 1 / 3) < 0.07
    assert np.mean([p.directions == (0, 1, 2, 3) for p in fparams[:-1]]) < 0.2        # 1/24 expected
    target_holes = fparams[-1].holes
    agree = np.mean([np.mean(p.holes == target_holes) for p in fparams[:-1]])
    chance = np.mean(target_holes) * 0.2 + np.mean(~target_holes) * 0.8
    assert abs(agree - chance) < 0.05
    # every layout joins start and goal; the relatedness orders the sources' distance
    for p in fparams:
        assert _path_exists(p.holes, (6, 6), 0, 35) and not p.holes[[0, 35]].any()
    near, _ = lake_task_family(0.8, 60, rng=4, shape=(6, 6), hole_density=0.2)
    gap = lambda ms: np.mean([mean_hellinger(ms[-1].transitions, m.transitions) for m in ms[:-1]])  # noqa: E731
    assert gap(near) < 0.6 * gap(far)
    # the same rng gives the same family; relabelling moves the sources' dynamics only
    again, _ = lake_task_family(0.5, 2, rng=7, shape=(4, 4))
    twice, _ = lake_task_family(0.5, 2, rng=7, shape=(4, 4))
    np.testing.assert_array_equal(again[0].transitions, twice[0].transitions)
    relab, _ = lake_task_family(0.5, 2, rng=7, shape=(4, 4), relabel_sources=True)
    np.testing.assert_array_equal(relab[-1].transitions, again[-1].transitions)
    assert not np.array_equal(relab[0].transitions, again[0].transitions)


def test_path_exists_on_small_layouts():
    holes = np.zeros(9, bool)
    assert _path_exists(holes, (3, 3), 0, 8)
    holes[[2, 4, 6]] = True                               # the anti-diagonal cuts (0, 0) from (2, 2)
    assert not _path_exists(holes, (3, 3), 0, 8)
    holes[4] = False
    assert _path_exists(holes, (3, 3), 0, 8)


def test_experiment_runs_on_the_lake_family():
    config = dataclasses.replace(T.quick_config(), family="lake", shape=(4, 4), n_sources=1,
                                 source_transitions=200, budgets=(10,), psrl_tasks=0, max_iter=60)
    res = T.run_seed(config, rng=np.random.default_rng(1))
    assert set(res.curves["hellinger"]) == set(T.METHODS)
    lake = T._family(config, 1, np.random.default_rng(0))
    windy = T._family(dataclasses.replace(config, family="windy"), 1, np.random.default_rng(0))
    assert lake[-1].name == "SlipperyLake" and windy[-1].name == "WindyTunnelWorld"
    assert "slippery lakes" in T._title(config)
    for field, value in (("family", "ocean"), ("hole_density", 0.5)):
        with pytest.raises(ValueError, match=field):
            T.check_config(dataclasses.replace(config, **{field: value}))
