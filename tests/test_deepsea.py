"""DeepSea (bsuite's deep-exploration benchmark) and the random MDP without structure."""

import json
import warnings

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from corrpriors.envs import (
    DeepSeaEnv,
    deep_sea,
    deep_sea_right_actions,
    from_gymnasium,
    random_mdp,
    state_index,
)
from corrpriors.mdp import check_mdp, policy_iteration


def bsuite_step(row, col, action, right_action, size, deterministic, u=0.0):
    """A line-by-line transcription of bsuite's ``DeepSea._step`` (without the reward noise).

    ``u`` plays bsuite's ``self._rng.rand()`` of the stochastic variant. Returns
    ``(row, col, reward)`` after the step.
    """
    reward = 0.0
    action_right = action == right_action[row, col]
    if col == size - 1 and action_right:
        reward += 1.0
    if action_right:
        if u > 1 / size or deterministic:
            col = int(np.clip(col + 1, 0, size - 1))
        reward -= 0.01 / size
    else:
        col = int(np.clip(col - 1, 0, size - 1))
    row += 1
    return row, col, reward


@pytest.mark.parametrize("walls", [False, True])
@pytest.mark.parametrize("deterministic", [True, False])
def test_deep_sea_matches_bsuite_transcription(walls, deterministic):
    n = 5
    mdp = deep_sea(n, rng=3, deterministic=deterministic, walls=walls)
    check_mdp(mdp)
    right = deep_sea_right_actions(n, rng=3)
    index = {tuple(c): i for i, c in enumerate(mdp.cells.tolist())}
    for (r, c), s in index.items():
        if r == n:                                    # the terminal row: absorbing
            assert mdp.terminal[s] and np.all(mdp.transitions[s, :, s] == 1.0)
            continue
        for a in range(2):
            expected = np.zeros(mdp.n_states)
            # integrate bsuite's step over its uniform draw u (two outcomes at most)
            for u, w in ((0.0, 1.0 / n), (1.0, 1.0 - 1.0 / n)):
                r2, c2, reward = bsuite_step(r, c, a, right, n, deterministic, u)
                expected[index[(r2, c2)]] += w
            np.testing.assert_allclose(mdp.transitions[s, a], expected, atol=1e-15)
            assert mdp.rewards[s, a] == pytest.approx(reward)
    assert not mdp.terminal[0] and mdp.initial_distribution[0] == 1.0


def test_walls_keep_exactly_the_reachable_cells():
    full, walled = deep_sea(6, rng=1), deep_sea(6, rng=1, walls=True)
    assert (full.n_states, walled.n_states) == (6 * 6 + 6, 21 + 6)
    cells = walled.cells
    assert np.all((cells[:, 1] <= cells[:, 0]) | (cells[:, 0] == 6))
    # the same dynamics on the cells both have
    keep = [int(np.flatnonzero((full.cells == c).all(1))[0]) for c in cells.tolist()]
    np.testing.assert_array_equal(full.transitions[np.ix_(keep, [0, 1], keep)], walled.transitions)
    np.testing.assert_array_equal(full.rewards[keep], walled.rewards)
    # nothing leaves the reachable set: the walls only remove cells no episode enters
    np.testing.assert_allclose(walled.transitions.sum(-1), 1.0)


def test_optimal_return_and_mapping_seed():
    n = 8
    mdp = deep_sea(n, rng=0, discount=0.999)
    plan = policy_iteration(mdp)
    # the optimal policy goes right N times: 1 - move_cost, discounted
    expected = sum(-0.01 / n * 0.999 ** t for t in range(n)) + 0.999 ** (n - 1)
    assert plan.values[0] == pytest.approx(expected, rel=1e-9)
    a = deep_sea_right_actions(n, rng=5)
    np.testing.assert_array_equal(a, deep_sea_right_actions(n, rng=5))
    assert not np.array_equal(a, deep_sea_right_actions(n, rng=6))
    assert np.all(deep_sea_right_actions(n, rng=0, randomize_actions=False) == 1)


def test_deep_sea_bad_arguments():
    with pytest.raises(ValueError, match="size"):
        deep_sea(1, rng=0)
    with pytest.raises(ValueError, match="move_cost"):
        deep_sea(4, rng=0, move_cost=-1.0)
    with pytest.raises(ValueError, match="mapping_seed"):
        DeepSeaEnv(4, mapping_seed=-1)


@pytest.mark.parametrize("kwargs", [{}, {"deterministic": False, "walls": True, "size": 6}])
def test_registered_env_publishes_its_model_and_coordinates(kwargs):
    env = gymnasium.make("corrpriors/DeepSea-v0", **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped, skip_render_check=True)
    u = env.unwrapped
    mdp = from_gymnasium(env)
    np.testing.assert_array_equal(mdp.coordinates, u.state_coordinates)
    assert mdp.shape == u.mdp.shape
    # the toy-text table reads back to the same model
    table_model = from_gymnasium(_TableOnly(u))
    np.testing.assert_allclose(table_model.transitions, mdp.transitions, atol=1e-15)
    np.testing.assert_array_equal(table_model.terminal, mdp.terminal)
    # every episode lasts exactly N steps and starts in the top-left cell
    n = u.size
    for seed in range(3):
        obs, _ = env.reset(seed=seed)
        assert obs == 0
        for t in range(n):
            obs, _, term, trunc, _ = env.step(env.action_space.sample())
            assert term == (t == n - 1) and not trunc


class _TableOnly(gymnasium.Env):
    """Another environment exposing only a toy-text table (as a user's environment would)."""

    def __init__(self, inner):
        self.observation_space, self.action_space = inner.observation_space, inner.action_space
        self.P = inner.P
        self.initial_state_distrib = inner.initial_distribution
        self.state_coordinates = inner.state_coordinates


def test_stochastic_rewards_carry_bsuite_noise_at_the_ends_only():
    n = 4
    env = DeepSeaEnv(n, mapping_seed=2, deterministic=False)
    mdp = env.mdp
    cells = mdp.cells
    noisy = int(np.flatnonzero((cells == [n - 1, 0]).all(1))[0])
    quiet = int(np.flatnonzero((cells == [n - 1, 1]).all(1))[0])
    env.reset(seed=0)
    draws = {noisy: [], quiet: []}
    for s in draws:
        for _ in range(400):
            env.reset(options={"state": s})
            _, r, *_ = env.step(0)
            draws[s].append(r - mdp.rewards[s, 0])
    assert np.all(np.asarray(draws[quiet]) == 0.0)
    noise = np.asarray(draws[noisy])
    assert abs(noise.mean()) < 4 / np.sqrt(400) and abs(noise.std() - 1.0) < 0.15
    # the deterministic variant has none
    env = DeepSeaEnv(n, mapping_seed=2)
    env.reset(seed=0, options={"state": noisy})
    assert env.step(0)[1] == env.mdp.rewards[noisy, 0]


def test_random_mdp():
    mdp = random_mdp(20, 3, 4, rng=7)
    check_mdp(mdp)
    assert np.all((mdp.transitions > 0).sum(-1) == 4)
    np.testing.assert_array_equal(random_mdp(20, 3, 4, rng=7).transitions, mdp.transitions)
    assert mdp.coordinates is None
    with pytest.raises(ValueError, match="n_successors"):
        random_mdp(5, 2, 6, rng=0)
    env = gymnasium.make("corrpriors/RandomMDP-v0", n_states=12, mdp_seed=1)
    assert state_index(env).tolist() == [[float(i)] for i in range(12)]
    assert from_gymnasium(env).coordinates is None


def _study():
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "deepsea_study.py"
    spec = importlib.util.spec_from_file_location("deepsea_study", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_study_runs_and_its_criterion_is_bsuites(tmp_path, capsys):
    study = _study()
    out = study.run_one(4, True, "dirichlet_sparse", 0, cap=400, learn_rewards=False)
    assert out["learned"] is not None and out["first_treasure"] is not None
    assert out["learned"] >= out["first_treasure"]
    r = study.run_one(4, True, "pg", 1, cap=100, learn_rewards=False)
    assert r["learned"] is not None and r["learned"] <= 100
    jsonl = tmp_path / "d.jsonl"
    assert study.main(["--sizes", "4", "--walls", "walls", "--seeds", "0", "--methods",
                       "dirichlet_sparse", "--cap", "300", "--out", str(jsonl)]) == 0
    with pytest.raises(SystemExit):                          # a used --out needs --resume
        study.main(["--sizes", "4", "--walls", "walls", "--seeds", "0", "--methods",
                    "dirichlet_sparse", "--cap", "300", "--out", str(jsonl)])
    assert study.main(["--sizes", "4", "--walls", "walls", "--seeds", "0", "--methods",
                       "dirichlet_sparse", "--cap", "300", "--out", str(jsonl), "--resume"]) == 0
    assert len(jsonl.read_text().splitlines()) == 1          # the rerun resumed, ran nothing
    row = next(line for line in capsys.readouterr().out.splitlines() if "N=  4 cap 300" in line)
    assert "dirichlet_sparse" in row                         # the table's rows are per cap
    study.main(["--out", str(jsonl), "--plot", str(tmp_path / "d.png")])
    assert (tmp_path / "d.png").stat().st_size > 5000


def test_the_study_runs_agent_streams_per_mapping(tmp_path, capsys):
    """``--streams`` reruns every mapping with other agent random numbers (stream 0 is the run
    without it), a rerun resumes per stream, and the table shows the mappings' medians."""
    study = _study()
    plain = study.run_one(4, True, "dirichlet_sparse", 0, cap=400, learn_rewards=False)
    zero = study.run_one(4, True, "dirichlet_sparse", 0, cap=400, learn_rewards=False, stream=0)
    assert {k: plain[k] for k in ("learned", "first_treasure", "episodes")} == \
        {k: zero[k] for k in ("learned", "first_treasure", "episodes")}
    jsonl = tmp_path / "s.jsonl"
    argv = ["--sizes", "4", "--walls", "walls", "--seeds", "0-1", "--streams", "0-2",
            "--methods", "dirichlet_sparse", "--cap", "400", "--out", str(jsonl)]
    assert study.main(argv) == 0
    assert study.main(argv + ["--resume"]) == 0
    runs = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert sorted((r["seed"], r["stream"]) for r in runs) == [(s, k) for s in (0, 1) for k in range(3)]
    assert runs[0]["learned"] == plain["learned"]                 # seed 0, stream 0
    assert len({(r["learned"], r["first_treasure"]) for r in runs}) > 1   # other random numbers
    printed = capsys.readouterr().out.splitlines()[-1]
    medians = [np.median([r["learned"] for r in runs if r["seed"] == s]) for s in (0, 1)]
    assert f"{medians[0]:g}/3 {medians[1]:g}/3" in printed


def test_the_studys_comparison_uses_mapping_medians_and_paired_runs(capsys):
    study = _study()
    runs = {0: {0: (10, 99), 1: (50, 99), 2: (20, 99)}, 1: {0: (None, 99), 1: (5, 99)}}
    ref = {0: {0: (20, 99), 1: (20, 99), 2: (20, 99)}, 1: {0: (40, 99), 1: (40, 99)}}
    study._compare(runs, ref)
    out = capsys.readouterr().out
    # medians 20 / 20 (the mean would be 26.7) and inf / 40 (a run not learned is infinite); paired: 50 > 40, None
    assert "worst ratio of mapping medians inf (2 mappings)" in out
    assert "paired runs over 2x: 2 of 5" in out
    study._compare({0: runs[0]}, {0: ref[0]})
    assert "worst ratio of mapping medians 1.00 (1 mappings); paired runs over 2x: 1 of 3" in \
        capsys.readouterr().out


def test_the_studys_stochastic_criterion_counts_from_episode_100_as_bsuites():
    """bsuite's deep_sea_stochastic analysis ignores the first 100 episodes: a slip of "right"
    leaves the diagonal without a bad action, so early episodes can look "good" by luck."""
    study = _study()
    assert study.MIN_EPISODES_STOCHASTIC == 100
    for seed in range(3):
        r = study.run_one(4, True, "dirichlet_sparse", seed, cap=150, learn_rewards=False,
                          deterministic=False)
        assert r["learned"] is None or r["learned"] >= 100
        d = study.run_one(4, True, "dirichlet_sparse", seed, cap=150, learn_rewards=False)
        assert d["learned"] is not None and d["learned"] < 100   # deterministic: no minimum


def _old_deep_sea_table(size, rng, deterministic):
    """The dense loop deep_sea used before it listed its entries (a transcription)."""
    from corrpriors.envs.deepsea import deep_sea_right_actions

    n = size
    right = deep_sea_right_actions(n, rng=rng)
    index = np.arange((n + 1) * n).reshape(n + 1, n)
    S = (n + 1) * n
    P = np.zeros((S, 2, S))
    p_right = 1.0 if deterministic else 1.0 - 1.0 / n
    for r in range(n):
        for c in range(n):
            s = index[r, c]
            for a in range(2):
                if a == right[r, c]:
                    P[s, a, index[r + 1, min(c + 1, n - 1)]] += p_right
                    P[s, a, index[r + 1, c]] += 1.0 - p_right
                else:
                    P[s, a, index[r + 1, max(c - 1, 0)]] = 1.0
    P[index[n], :, index[n]] = 1.0
    return P


@pytest.mark.parametrize("deterministic", [True, False])
def test_deep_sea_tables_dense_and_sparse_hold_the_same_numbers(deterministic):
    """deep_sea lists its entries and builds a SparseTransitions above DENSE_LIMIT_BYTES (N >= 45)
    instead of a dense (S, 2, S) array (N = 316: 150 GiB before); dense and sparse tables equal
    the old dense loop bit for bit."""
    from corrpriors.envs import deep_sea
    from memory_checks import traced_peak

    want = _old_deep_sea_table(7, 3, deterministic)
    dense = deep_sea(7, rng=3, deterministic=deterministic, sparse=False).transitions
    sparse = deep_sea(7, rng=3, deterministic=deterministic, sparse=True).transitions
    np.testing.assert_array_equal(dense, want)
    np.testing.assert_array_equal(sparse.toarray(), want)
    big, peak = traced_peak(deep_sea, 200, rng=0, deterministic=deterministic)
    assert big.is_sparse and big.n_states == 201 * 200 and peak < 100 * 2**20, peak


def test_random_mdp_dense_and_sparse_hold_the_same_draws():
    from corrpriors.envs import random_mdp
    from memory_checks import traced_peak

    dense, sparse = (random_mdp(30, 3, 4, rng=5, sparse=flag) for flag in (False, True))
    np.testing.assert_array_equal(sparse.transitions.toarray(), dense.transitions)
    np.testing.assert_array_equal(sparse.rewards, dense.rewards)
    g = np.random.default_rng(5)                          # the old loop's draws, in its order
    for s in range(3):
        for a in range(3):
            cols, vals = g.choice(30, size=4, replace=False), g.dirichlet(np.ones(4))
            np.testing.assert_array_equal(dense.transitions[s, a, cols], vals)
    big, peak = traced_peak(random_mdp, 20_000, 2, 3, rng=0)      # dense: 6 GiB
    assert big.is_sparse and peak < 50 * 2**20, peak
