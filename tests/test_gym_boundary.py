"""``for_mdp(boundary=...)``: intended moves truncated at the walls, in either category order."""

from __future__ import annotations

import dataclasses

import gymnasium
import numpy as np
import pytest

from corrpriors.applications.transitions import (
    CorrelatedTransitionModel,
    TruncatedCategoryMap,
    displacement_category_map,
    window_displacements,
)
from corrpriors.applications.transitions._categories import _nearest_first
from corrpriors.envs import from_gymnasium
from corrpriors.experiments import gym_psrl, gym_sysid
from corrpriors.runner._run import seed_generator


@dataclasses.dataclass
class _Grid:
    """What ``for_mdp`` reads of an MDP: sizes and integer coordinates of a rows x cols grid."""

    rows: int
    cols: int
    n_actions: int = 2

    @property
    def n_states(self) -> int:
        return self.rows * self.cols

    @property
    def coordinates(self) -> np.ndarray:
        return np.array([(r, c) for r in range(self.rows) for c in range(self.cols)], dtype=float)


def _brute_force_stay(coords: np.ndarray, q_window: np.ndarray) -> np.ndarray:
    """P[s, s'] of intended moves ``window_displacements(2, 1)`` with walls, by walking each move."""
    where = {tuple(c): i for i, c in enumerate(coords.astype(int).tolist())}
    P = np.zeros((len(coords), len(coords)))
    for s, c in enumerate(coords.astype(int)):
        for k, d in enumerate(window_displacements(2, 1)):
            P[s, where.get(tuple(c + d), s)] += q_window[s, k]
    return P


def _lex_to_nearest() -> np.ndarray:
    """``perm`` with ``q_nearest = q_lex[:, perm]`` (window categories; "other" stays last)."""
    disp = window_displacements(2, 1)
    order = np.lexsort((np.arange(len(disp)), np.abs(disp).sum(axis=1)))
    return np.r_[order, len(disp)]


def test_nearest_first_keeps_the_intended_moves_of_a_truncated_map():
    grid = _Grid(3, 4)
    coords = grid.coordinates
    lex = displacement_category_map(coords.astype(int), 1, boundary="stay")
    near = _nearest_first(lex, 2, 1)
    assert isinstance(near, TruncatedCategoryMap)
    perm = _lex_to_nearest()
    q = np.random.default_rng(0).dirichlet(np.ones(lex.n_categories), size=grid.n_states)
    q[:, -1] = 0.0                      # no "other" mass: the oracle walks the window moves only
    q /= q.sum(axis=1, keepdims=True)
    want = _brute_force_stay(coords, q[:, :-1])
    np.testing.assert_allclose(lex.next_state_probs(q), want, atol=1e-12)
    np.testing.assert_allclose(near.next_state_probs(q[:, perm]), want, atol=1e-12)
    counts = np.random.default_rng(1).integers(0, 5, size=(grid.n_states, grid.n_states)) * (want > 0)
    np.testing.assert_array_equal(near.impute(counts, q[:, perm]).sum(axis=1), counts.sum(axis=1))
    np.testing.assert_array_equal(near.valid, lex.valid[:, perm])


def test_for_mdp_nearest_and_lexicographic_stay_predict_the_same_model_from_the_same_moves():
    """The order is a permutation of the categories: the same category probabilities (permuted)
    give the same predicted P, including the "other" mass spread over the observed far jumps."""
    grid = _Grid(3, 3)
    rng = np.random.default_rng(2)
    counts = rng.integers(0, 4, size=(grid.n_states, grid.n_actions, grid.n_states))
    beliefs = {order: CorrelatedTransitionModel.for_mdp(
        grid, boundary="stay", category_order=order, selection="fixed", prior="dense",
        concentration=None, contamination_prior=None).set_counts(counts)
        for order in ("lexicographic", "nearest")}
    lex, near = beliefs["lexicographic"], beliefs["nearest"]
    assert isinstance(near.category_map, TruncatedCategoryMap)
    perm = _lex_to_nearest()
    q_lex = lex.category_probs()
    P_lex = lex.mean()
    far = near.category_map.far_destinations(counts.transpose(1, 0, 2))
    for a in range(grid.n_actions):
        other = near.category_map.other_weights(counts[:, a, :], far)
        P_near = near.category_map.next_state_probs(q_lex[a][:, perm], other)
        np.testing.assert_allclose(P_near, P_lex[:, a, :], atol=1e-10)
    # and with no data (uniform prior logits over the valid categories) the two beliefs agree
    empty = [CorrelatedTransitionModel.for_mdp(grid, boundary="stay", category_order=o,
                                               selection="fixed", prior="dense", learn_mean=None)
             for o in ("lexicographic", "nearest")]
    np.testing.assert_allclose(empty[0].mean(), empty[1].mean(), atol=1e-10)


def test_for_mdp_boundary_errors_name_the_argument():
    grid = _Grid(2, 3)
    with pytest.raises(ValueError, match="boundary.*'wall'"):
        CorrelatedTransitionModel.for_mdp(grid, boundary="wall")
    with pytest.raises(ValueError, match="boundary.*absolute"):
        CorrelatedTransitionModel.for_mdp(grid, encoding="absolute", boundary="stay")
    assert not isinstance(CorrelatedTransitionModel.for_mdp(grid).category_map, TruncatedCategoryMap)
    assert not isinstance(CorrelatedTransitionModel.for_mdp(grid, boundary="exclude").category_map,
                          TruncatedCategoryMap)
    assert isinstance(CorrelatedTransitionModel.for_mdp(grid, boundary="clip").category_map,
                      TruncatedCategoryMap)


def test_for_mdp_default_boundary_is_stay_on_grid_maps_only():
    """Grid maps (``mdp.shape`` set) keep the agent in place at their edges; Taxi's 4-D
    coordinates (passenger, destination) are no grid and keep the structural zeros."""
    lake = from_gymnasium(gymnasium.make("FrozenLake-v1", map_name="4x4"))
    cmap = CorrelatedTransitionModel.for_mdp(lake).category_map
    assert isinstance(cmap, TruncatedCategoryMap)
    # the corner (0, 0): the up, left and up-left moves (and staying) all lead back to state 0
    moves = window_displacements(2, 1)[_lex_to_nearest()[:-1]]      # in the nearest-first order
    stays = moves[cmap.destination[0] == 0]
    assert sorted(map(tuple, stays.tolist())) == [(-1, -1), (-1, 0), (-1, 1), (0, -1), (0, 0), (1, -1)]
    taxi = from_gymnasium(gymnasium.make("Taxi-v4"))
    assert not isinstance(CorrelatedTransitionModel.for_mdp(taxi).category_map, TruncatedCategoryMap)


@pytest.mark.parametrize("module", [gym_sysid, gym_psrl])
def test_gym_configs_take_and_check_boundary(module):
    exp = (module.SysIdExperiment if module is gym_sysid else module.PSRLExperiment)(
        "FrozenLake-v1", '{"desc": ["SF", "HG"], "is_slippery": true}')
    with pytest.raises(ValueError, match="boundary.*'wall'"):
        exp.check_config(dataclasses.replace(exp.Config(), boundary="wall"))
    assert exp.Config().boundary == "auto"
    for rule in ("auto", "exclude", "clip", "stay"):
        exp.check_config(dataclasses.replace(exp.Config(), boundary=rule))


def test_sysid_seed_with_stay_walls_runs_and_learns():
    exp = gym_sysid.SysIdExperiment("FrozenLake-v1", '{"desc": ["SFF", "FFF", "FHG"], "is_slippery": true}')
    config = exp.Config(transitions=(30, 300), methods=("pg",), boundary="stay")
    result = exp.run_seed(config, rng=seed_generator(exp.NAME, 0))
    curve = np.asarray(result.curves["hellinger"]["pg"])
    assert np.all(np.isfinite(curve)) and curve[-1] < curve[0]


def test_stay_walls_with_the_sparse_prior_give_a_model():
    lake = from_gymnasium(gymnasium.make("FrozenLake-v1", map_name="4x4"))
    data = np.random.default_rng(3).integers(0, 16, size=(3, 60))
    for prior in ("dense", "gmrf"):
        belief = CorrelatedTransitionModel.for_mdp(lake, prior=prior, selection="fixed")
        assert isinstance(belief.category_map, TruncatedCategoryMap)
        belief.update(data[0], data[1] % 4, data[2])
        P = belief.mean()
        assert np.all(np.isfinite(P))
        np.testing.assert_allclose(P.sum(axis=-1), 1.0, atol=1e-12)


def _deep_sea_random_walk(mdp, episodes: int, seed: int):
    """Transitions of uniformly random episodes of a DeepSea MDP: (states, actions, next)."""
    rng = np.random.default_rng(seed)
    out: list[tuple[int, int, int]] = []
    for _ in range(episodes):
        s = 0
        while not mdp.terminal[s]:
            a = int(rng.integers(2))
            s2 = int(rng.choice(mdp.n_states, p=mdp.transitions[s, a]))
            out.append((s, a, s2))
            s = s2
    return tuple(np.array(x) for x in zip(*out))


def test_deep_sea_declares_that_its_edges_clip_and_for_mdp_follows():
    """bsuite's DeepSea clips the column at the edges and still moves the agent down a row:
    ``mdp.boundary = "clip"``, which ``for_mdp`` takes unless told otherwise and ``from_gymnasium``
    keeps (not with features, whose coordinates are not the grid's)."""
    from corrpriors.envs import deep_sea

    for walls in (False, True):
        mdp = deep_sea(5, rng=0, walls=walls)
        assert mdp.boundary == "clip"
        moves = window_displacements(2, 1)[_lex_to_nearest()[:-1]]
        down_left = int(np.flatnonzero((moves == (1, -1)).all(axis=1))[0])
        cells = np.asarray(mdp.cells)
        s, below = (int(np.flatnonzero((cells == c).all(axis=1))[0]) for c in ((2, 0), (3, 0)))
        clip = CorrelatedTransitionModel.for_mdp(mdp).category_map
        stay = CorrelatedTransitionModel.for_mdp(mdp, boundary="stay").category_map
        assert clip.destination[s, down_left] == below       # "left" in column 0 goes down
        assert stay.destination[s, down_left] == s           # a grid's wall keeps the agent
    env = gymnasium.make("corrpriors/DeepSea-v0", size=5, walls=True)
    assert from_gymnasium(env).boundary == "clip"
    assert from_gymnasium(env, features=lambda s: [s, 2 * s]).boundary is None
    lake = from_gymnasium(gymnasium.make("FrozenLake-v1", map_name="4x4"))
    assert lake.boundary is None                             # the belief's default: "stay"


def test_tabular_mdp_boundary_is_checked():
    from corrpriors.mdp import TabularMDP

    P = np.full((2, 1, 2), 0.5)
    for bad in ("wrap", "", 1):
        with pytest.raises(ValueError, match="boundary"):
            TabularMDP(P, [0.0, 0.0], 0.9, boundary=bad)
    assert TabularMDP(P, [0.0, 0.0], 0.9, boundary="clip").boundary == "clip"


@pytest.mark.parametrize("seed", [3, 4])
def test_clipped_deep_sea_edges_do_not_teach_a_straight_down_move(seed):
    """DeepSea never moves an agent straight down except where "left" is clipped at column 0.
    Read as "stay" (the grid default) those transitions are direct "straight down" moves, which
    the kernel spreads to every cell (the cause of the slow walled DeepSea runs: draws then miss
    the diagonal); read as "clip" they are censored "down-left" moves and the predicted straight
    down move of the interior cells is several times smaller."""
    from corrpriors.envs import deep_sea

    mdp = deep_sea(8, rng=seed, walls=True)
    S, A, N = _deep_sea_random_walk(mdp, 30, seed)
    cells = [tuple(c) for c in np.asarray(mdp.cells).tolist()]
    index = {c: i for i, c in enumerate(cells)}
    interior = [(index[(r, c)], index[(r + 1, c)]) for r, c in cells if 0 < c and r < 8]
    down = {}
    for rule in ("clip", "stay"):
        belief = CorrelatedTransitionModel.for_mdp(mdp, boundary=rule).update(S, A, N)
        q = belief.category_probs()                           # (A, S, K): the shared moves
        base = np.stack([belief._to_next_states(q[a], a) for a in range(2)], axis=1)
        down[rule] = np.mean([base[s, :, s2] for s, s2 in interior])
    assert down["clip"] < 0.4 * down["stay"]
    assert down["stay"] > 0.08
