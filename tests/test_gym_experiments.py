"""The experiments behind ``corrpriors sysid ENV`` and ``corrpriors psrl ENV`` (issue 13, item 5).

Oracles: the horizon statistics against an exhaustive walk over the raw toy-text table
``env.unwrapped.P`` (not the adapter's model); the Hellinger curve of the uniform Dirichlet
against counts recomputed from the same exploration; configuration identity through pickling.
"""

from __future__ import annotations

import dataclasses
import json
import pickle

import gymnasium
import numpy as np
import pytest

from corrpriors.envs import from_gymnasium, random_exploration, reachable_states
from corrpriors.experiments._gym import (
    canonical_kwargs,
    env_label,
    file_safe,
    goal_states,
    horizon_stats,
    load_env,
    parse_env_kwargs,
    return_is_success,
)
from corrpriors.experiments.gym_psrl import PSRLExperiment, steps_to_optimal
from corrpriors.experiments.gym_sysid import SysIdExperiment
from corrpriors.runner import _config
from corrpriors.runner._run import run_experiment, seed_generator
from figure_checks import check_experiment_figures

pytestmark = [pytest.mark.filterwarnings("ignore::corrpriors.exceptions.JitterWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning:gymnasium")]

LAKE3 = {"desc": ["SFF", "FHF", "FFG"], "is_slippery": True}


# ----------------------------------------------------------------------------- horizon statistics


def walk_raw_table(env, policy, horizon):
    """Exact (P(goal within H), E[sum of H rewards]) by enumerating every path of the raw table."""
    u = env.unwrapped
    success, ret = 0.0, 0.0
    stack = [(int(np.argmax(u.initial_state_distrib)), 1.0, 0)]
    while stack:
        s, p, t = stack.pop()
        if t == horizon:
            continue
        for prob, s2, r, done in u.P[s][int(policy[s])]:
            if prob == 0:
                continue
            ret += p * prob * r
            if done:
                success += p * prob * (r == max_terminal_reward(u))
            else:
                stack.append((s2, p * prob, t + 1))
    return success, ret


def max_terminal_reward(u):
    return max(r for s in u.P for a in u.P[s] for _, _, r, done in u.P[s][a] if done)


@pytest.mark.parametrize("env_id,kwargs,horizon", [
    ("FrozenLake-v1", LAKE3, 6),
    ("FrozenLake-v1", {"map_name": "4x4", "is_slippery": True}, 5),
    ("CliffWalkingSlippery-v1", {}, 5),
    ("CliffWalking-v1", {}, 14),
])
def test_horizon_stats_match_an_exhaustive_walk_of_the_raw_table(env_id, kwargs, horizon):
    env = gymnasium.make(env_id, **kwargs)
    mdp = from_gymnasium(env)
    rng = np.random.default_rng(3)
    policies = rng.integers(mdp.n_actions, size=(3, mdp.n_states))
    if env_id == "CliffWalking-v1":   # the optimal path: 1 up, 11 right, 1 down = 13 steps, -13
        policies[0] = 1
        policies[0, 36], policies[0, 35] = 0, 2
    goals = goal_states(mdp)
    success, ret = horizon_stats(mdp, policies, goals, horizon)
    for e, pi in enumerate(policies):
        want_success, want_ret = walk_raw_table(env, pi, horizon)
        assert success[e] == pytest.approx(want_success, abs=1e-12)
        assert ret[e] == pytest.approx(want_ret, abs=1e-9)
    if env_id == "CliffWalking-v1":
        assert (success[0], ret[0]) == (pytest.approx(1.0), pytest.approx(-13.0))


def test_horizon_stats_of_a_stochastic_policy_average_the_deterministic_ones():
    mdp = from_gymnasium(gymnasium.make("FrozenLake-v1", **LAKE3))
    goals = goal_states(mdp)
    # over one step from the start, the statistics are linear in the start state's action probabilities
    a, b = np.zeros(9, int), np.zeros(9, int)
    b[0] = 2
    mixed = np.eye(4)[a] * 1.0
    mixed[0] = 0.5 * (np.eye(4)[0] + np.eye(4)[2])
    s_mix, r_mix = horizon_stats(mdp, mixed[None], goals, 1)
    s_ab, r_ab = horizon_stats(mdp, np.stack([a, b]), goals, 1)
    assert s_mix[0] == pytest.approx(s_ab.mean()) and r_mix[0] == pytest.approx(r_ab.mean())
    with pytest.raises(ValueError, match="policies"):
        horizon_stats(mdp, np.zeros((2, 5), int), goals, 3)


def test_goal_states_and_when_the_return_is_the_success_probability():
    lake = from_gymnasium(gymnasium.make("FrozenLake-v1", map_name="4x4"))
    np.testing.assert_array_equal(goal_states(lake), [15])          # G, not the holes
    assert return_is_success(lake, goal_states(lake))
    cliff = from_gymnasium(gymnasium.make("CliffWalking-v1"))
    np.testing.assert_array_equal(goal_states(cliff), [47])
    assert not return_is_success(cliff, goal_states(cliff))
    taxi = from_gymnasium(gymnasium.make("Taxi-v4"))
    assert goal_states(taxi).size and set(goal_states(taxi)) <= set(np.flatnonzero(taxi.terminal))
    import corrpriors.envs  # noqa: F401  (registers corrpriors/...)
    tunnel = from_gymnasium(gymnasium.make("corrpriors/TunnelWorld-v0"))
    assert goal_states(tunnel).size == 0 and not return_is_success(tunnel, goal_states(tunnel))


def test_reachable_states_leave_out_the_cliff():
    cliff = from_gymnasium(gymnasium.make("CliffWalking-v1"))
    reach = reachable_states(cliff)
    np.testing.assert_array_equal(np.flatnonzero(~reach), np.arange(37, 47))   # the cliff cells
    lake = from_gymnasium(gymnasium.make("FrozenLake-v1", map_name="8x8"))
    assert reachable_states(lake).all()
    with pytest.raises(TypeError, match="mdp: expected a TabularMDP"):
        reachable_states(np.eye(3))


def test_steps_to_optimal_first_reach_stay_and_share():
    x = [0, 50, 100, 150]
    assert steps_to_optimal(x, [0.2, 1.0, 0.9, 1.0]) == (50, 150, pytest.approx(2 / 3))
    assert steps_to_optimal(x, [0.2, 1.0, 1.0, 1.0]) == (50, 50, 1.0)
    assert steps_to_optimal(x, [1.0, 1.0, 1.0, 1.0]) == (0, 0, 1.0)
    assert steps_to_optimal(x, [0.5, 1.0, 1.0, 0.5]) == (50, None, pytest.approx(2 / 3))
    assert steps_to_optimal(x, [0.5, 0.9, 0.99, 0.5]) == (None, None, 0.0)


# ----------------------------------------------------------------------------- environments and identity


def test_env_kwargs_parsing_labels_and_folder_names():
    assert parse_env_kwargs(None) == {} and parse_env_kwargs(" ") == {}
    assert parse_env_kwargs('{"map_name": "8x8"}') == {"map_name": "8x8"}
    with pytest.raises(ValueError, match=r"--env-kwargs: expected a JSON object .* got '\{map'"):
        parse_env_kwargs("{map")
    with pytest.raises(ValueError, match="expected a JSON object .* got list"):
        parse_env_kwargs("[1, 2]")
    assert canonical_kwargs({"b": 1, "a": True}) == '{"a":true,"b":1}'
    assert env_label("FrozenLake-v1", {"map_name": "8x8", "is_slippery": True}) == \
        "FrozenLake-v1 (is_slippery=True, map_name=8x8)"
    assert env_label("FrozenLake-v1", LAKE3) == "FrozenLake-v1 (custom 3x3 map, is_slippery=True)"
    assert file_safe("corrpriors/TunnelWorld-v0") == "corrpriors_TunnelWorld-v0"


@pytest.mark.parametrize("env_id,kwargs,error,match", [
    ("NoSuchEnv-v0", {}, ValueError, r"ENV_ID: 'NoSuchEnv-v0' is not a usable Gymnasium id: Environment `NoSuchEnv`"),
    ("Taxi-v3", {}, ValueError, "deprecated. Please use `Taxi-v4`"),
    ("FrozenLake-v1", {"bogus": 1}, ValueError, r"--env-kwargs: FrozenLake-v1 could not be made with \{\"bogus\":1\}"),
    ("FrozenLake-v1", {"map_name": "9x9"}, ValueError, "could not be made .* KeyError"),
    ("CartPole-v1", {}, TypeError, "ENV_ID: CartPole-v1 is not tabular: env.observation_space: expected"),
    ("no_such_module:Env-v0", {}, ValueError, "No module named 'no_such_module'"),
])
def test_load_env_errors_are_one_line(env_id, kwargs, error, match):
    with pytest.raises(error, match=match) as info:
        load_env(env_id, kwargs)
    assert "\n" not in str(info.value)


def test_the_environment_is_part_of_the_configuration_and_survives_pickling():
    exp = SysIdExperiment("FrozenLake-v1", LAKE3)
    assert exp.NAME == "sysid-FrozenLake-v1"
    config = exp.Config()
    assert (config.env_id, json.loads(config.env_kwargs)) == ("FrozenLake-v1", LAKE3)
    assert pickle.loads(pickle.dumps(config)) == config
    again = pickle.loads(pickle.dumps(exp))
    assert again.Config is exp.Config and again.NAME == exp.NAME
    assert _config.settings_label(exp, config) == "default"
    assert _config.settings_label(exp, exp.quick_config()) == "quick"
    other = SysIdExperiment("FrozenLake-v1", dict(LAKE3, is_slippery=False))
    assert _config.run_folder_name(exp, config) != _config.run_folder_name(other, other.Config())
    with pytest.raises(ValueError, match="env_id, env_kwargs: this experiment is FrozenLake-v1"):
        exp.check_config(dataclasses.replace(config, env_id="Taxi-v4"))
    with pytest.raises(ValueError, match="transitions: expected increasing values"):
        exp.check_config(dataclasses.replace(config, transitions=(100, 50)))
    with pytest.raises(ValueError, match="methods: unknown 'pg_sampling'; expected some of pg, "):
        exp.check_config(dataclasses.replace(config, methods=("pg_sampling",)))


# ----------------------------------------------------------------------------- seeds


def test_sysid_dirichlet_curve_against_counts_of_the_same_exploration():
    exp = SysIdExperiment("CliffWalkingSlippery-v1")
    config = exp.Config(transitions=(30, 200), methods=("dirichlet_uniform", "dirichlet_sparse"),
                        point_estimate="mean")       # ("auto": their Hellinger-Bayes estimates)
    result = exp.run_seed(config, rng=seed_generator(exp.NAME, 0))
    env = gymnasium.make("CliffWalkingSlippery-v1")
    mdp = from_gymnasium(env)
    data = random_exploration(env, 200, rng=seed_generator(exp.NAME, 0))
    rows = [s for s in range(48) if s < 37]            # neither the cliff (37..46) nor the goal (47)
    np.testing.assert_array_equal(result.extras["rows"], rows)
    for i, T in enumerate((30, 200)):
        for method, alpha in (("dirichlet_uniform", 1.0), ("dirichlet_sparse", 1e-3)):
            counts = np.zeros((48, 4, 48))
            np.add.at(counts, (data.states[:T], data.actions[:T], data.next_states[:T]), 1)
            est = (counts + alpha) / (counts + alpha).sum(-1, keepdims=True)
            bc = np.sqrt(est[rows] * mdp.transitions[rows]).sum(-1)        # Bhattacharyya coefficient
            assert result.curves["hellinger"][method][i] == pytest.approx(np.sqrt(1 - bc).mean(), abs=1e-12)


def test_psrl_seed_is_reproducible_and_a_method_does_not_depend_on_the_others():
    exp = PSRLExperiment("FrozenLake-v1", LAKE3)
    assert list(exp.METRICS) == ["normalized_return", "success_probability"]   # return = success here
    config = exp.Config(steps=100, methods=("dirichlet_sparse_sampling", "pg_mean"))
    a = exp.run_seed(config, rng=seed_generator(exp.NAME, 4))
    b = exp.run_seed(config, rng=seed_generator(exp.NAME, 4))
    alone = exp.run_seed(dataclasses.replace(config, methods=("pg_mean",)), rng=seed_generator(exp.NAME, 4))
    for metric in exp.METRICS:
        for method in config.methods:
            np.testing.assert_array_equal(a.curves[metric][method], b.curves[metric][method])
        np.testing.assert_array_equal(a.curves[metric]["pg_mean"], alone.curves[metric]["pg_mean"])
    curve = a.curves["normalized_return"]["pg_mean"]
    assert curve.shape == (3,) and np.all(curve <= 1 + 1e-9)


def test_psrl_learned_rewards_and_cliff_metrics():
    exp = PSRLExperiment("CliffWalking-v1")
    assert list(exp.METRICS) == ["normalized_return", "success_probability", "horizon_return"]
    config = exp.Config(steps=100, methods=("dirichlet_sparse_mean",), learn_rewards=True, horizon=20)
    result = exp.run_seed(config, rng=seed_generator(exp.NAME, 0))
    assert result.extras["optimal_horizon_return"][0] == pytest.approx(-13.0)
    assert result.extras["optimal_success"][0] == pytest.approx(1.0)
    assert result.curves["horizon_return"]["dirichlet_sparse_mean"].shape == (3,)


def test_psrl_scores_the_last_step_and_reports_the_final_regret_there(tmp_path, monkeypatch):
    """Steps not a multiple of eval_every: the curves end at the last step and final_regret is the
    cumulative regret after it (before, 23 steps scored every 10 stopped at step 20, and 8 steps
    gave final_regret None)."""
    import corrpriors.applications.psrl as psrl

    runs = []

    def recording(*args, **kwargs):
        runs.append(run_psrl(*args, **kwargs))
        return runs[-1]

    run_psrl = psrl.run_psrl
    monkeypatch.setattr(psrl, "run_psrl", recording)
    exp = PSRLExperiment("FrozenLake-v1", LAKE3)
    for steps, x in ((23, [0.0, 10.0, 20.0, 23.0]), (8, [0.0, 8.0])):
        config = exp.Config(steps=steps, eval_every=10, replan_every=10, methods=("dirichlet_sparse_mean",))
        assert exp.x_values(config) == x
        report = run_experiment(exp, config=config, n_seeds=1, jobs=1, out=tmp_path, progress=False, echo=None,
                                plot=False)
        m = json.loads((report.out_dir / "metrics.json").read_text())
        assert m["x"]["values"] == x
        assert all(len(b["methods"]["dirichlet_sparse_mean"]["mean"]) == len(x) for b in m["metrics"].values())
        np.testing.assert_array_equal(runs[-1]["steps"], x)
        final = m["extra"]["methods"]["dirichlet_sparse_mean"]["final_regret"]
        assert final == [runs[-1]["regret"][steps - 1]]                # after the last step
        note = [n for n in m["extra"]["notes"] if n.startswith("scored at step 0")]
        assert note == [f"scored at step 0 and every 10 steps, and at the last step, {steps} ({steps % 10} after "
                        f"the one before); final_regret is the cumulative regret at step {steps}"]


# ----------------------------------------------------------------------------- through the runner


@pytest.mark.parametrize("kind", ["sysid", "psrl"])
def test_figures_pass_the_figure_checks(kind, tmp_path):
    if kind == "sysid":
        exp = SysIdExperiment("FrozenLake-v1", LAKE3)
        config = exp.Config(transitions=(20, 60), methods=("pg", "dirichlet_sparse"))
        names = [f"{exp.NAME}-hellinger"]
    else:
        exp = PSRLExperiment("CliffWalking-v1")
        config = exp.Config(steps=100, methods=("dirichlet_sparse_mean", "dirichlet_uniform_sampling"))
        names = [f"{exp.NAME}-curves"]
    report = run_experiment(exp, config=config, n_seeds=2, jobs=1, out=tmp_path, progress=False, echo=None)
    assert sorted(check_experiment_figures(exp, report)) == sorted(names)
    assert report.out_dir.parent.name == exp.NAME and report.out_dir.name.startswith("custom-")


def test_psrl_refuses_a_discount_at_which_no_policy_beats_the_uniform_one():
    """The normalised return is undefined where the reward is out of reach: refused before any
    seed (it used to fail in every seed after the model was read)."""
    exp = PSRLExperiment("FrozenLake-v1", {"desc": ["SH", "HG"], "is_slippery": False})   # goal walled off
    with pytest.raises(ValueError, match="^discount: .*does not exceed the uniformly random"):
        exp.check_config(exp.Config())
    lake = PSRLExperiment("FrozenLake-v1", LAKE3)
    lake.check_config(lake.Config(discount=0.5))   # reachable: accepted
    # the goal, a few steps away, is worth nothing at discount 1e-300
    with pytest.raises(ValueError, match="^discount: at discount 1e-300 .*does not exceed"):
        lake.check_config(lake.Config(discount=1e-300))
