"""``corrpriors sysid ENV_ID`` and ``corrpriors psrl ENV_ID`` on tiny maps: outputs, resume, errors."""

from __future__ import annotations

import json
import pathlib

import gymnasium
import pytest

from corrpriors.cli import main

pytestmark = pytest.mark.filterwarnings("ignore::corrpriors.exceptions.JitterWarning")

LAKE3 = '{"desc": ["SFF", "FHF", "FFG"], "is_slippery": true}'


def cli(capsys, *args):
    code = main([*args, "--no-progress", "--jobs", "1"])
    out, err = capsys.readouterr()
    return code, out, err


def only_metrics(root: pathlib.Path, name: str) -> tuple[pathlib.Path, dict]:
    [path] = (root / name).glob("*/metrics.json")
    return path.parent, json.loads(path.read_text())


def test_sysid_on_a_tiny_map_writes_the_reproduce_schema_a_figure_and_resumes(tmp_path, capsys):
    args = ["sysid", "FrozenLake-v1", "--env-kwargs", LAKE3, "--transitions", "20,60", "--n-seeds", "2",
            "--out", str(tmp_path)]
    code, out, err = cli(capsys, *args)
    assert code == 0, err
    folder, m = only_metrics(tmp_path, "sysid-FrozenLake-v1")
    assert folder.name.startswith("custom-")
    assert m["experiment"] == "sysid-FrozenLake-v1" and m["seeds"] == [0, 1]
    assert m["x"] == {"name": "transitions", "values": [20.0, 60.0]}
    block = m["metrics"]["hellinger"]
    assert block["better"] == "lower"
    assert list(block["methods"]) == ["pg", "pg_absolute", "dirichlet_sparse", "dirichlet_uniform"]
    for stats in block["methods"].values():
        assert len(stats["mean"]) == len(stats["std"]) == 2 and all(0 < v < 1 for v in stats["mean"])
    assert m["config"]["env_id"] == "FrozenLake-v1"
    assert json.loads(m["config"]["env_kwargs"]) == json.loads(LAKE3)
    assert m["run"]["overrides"]["transitions"] == [20, 60]
    assert (folder / "sysid-FrozenLake-v1-hellinger.png").stat().st_size > 10_000
    assert "custom 3x3 map" in out and "Summary:" in out

    code, out, _ = cli(capsys, *args, "--no-plot")   # the same command resumes: nothing recomputed
    assert code == 0 and "2 on disk, 0 to run" in out
    other = [*args[:3], '{"desc": ["SFF", "FHF", "FFG"], "is_slippery": false}', *args[4:6], "--n-seeds", "1"]
    code, out, _ = cli(capsys, *other, *args[8:], "--no-plot")
    assert code == 0 and "0 on disk, 1 to run" in out        # other kwargs: another folder
    assert len(list((tmp_path / "sysid-FrozenLake-v1").iterdir())) == 2


def test_psrl_on_a_tiny_map_with_known_and_learned_rewards(tmp_path, capsys):
    base = ["psrl", "FrozenLake-v1", "--env-kwargs", LAKE3, "--steps", "100", "--eval-every", "50",
            "--methods", "pg_sampling,dirichlet_sparse_mean", "--n-seeds", "1", "--out", str(tmp_path)]
    code, out, err = cli(capsys, *base)
    assert code == 0, err
    _, m = only_metrics(tmp_path, "psrl-FrozenLake-v1")
    assert m["x"] == {"name": "steps", "values": [0.0, 50.0, 100.0]}
    assert {k: v["better"] for k, v in m["metrics"].items()} == {
        "normalized_return": "higher", "success_probability": "higher"}
    assert list(m["metrics"]["normalized_return"]["methods"]) == ["pg_sampling", "dirichlet_sparse_mean"]
    assert m["config"]["learn_rewards"] is False
    code, out, err = cli(capsys, *base, "--learn-rewards")
    assert code == 0, err
    folders = sorted((tmp_path / "psrl-FrozenLake-v1").glob("*/metrics.json"))
    assert len(folders) == 2
    assert {json.loads(p.read_text())["config"]["learn_rewards"] for p in folders} == {False, True}
    assert len(list((tmp_path / "psrl-FrozenLake-v1").glob("*/psrl-FrozenLake-v1-curves.png"))) == 2
    code, out, err = cli(capsys, *base, "--rewards", "expected")
    assert code == 0, err
    configs = [json.loads(p.read_text())["config"]
               for p in sorted((tmp_path / "psrl-FrozenLake-v1").glob("*/metrics.json"))]
    assert sorted((c["learn_rewards"], c["rewards"]) for c in configs) == [
        (False, "expected"), (False, "transition"), (True, "transition")]
    # by default the schedule and the revisits (a plan at step 0, 50 and 100, and one per pair
    # that comes back doubled); --no-replan-on-revisit the schedule alone; on doubling, more (TSDE)
    def summaries():
        return [json.loads(p.read_text()) for p in (tmp_path / "psrl-FrozenLake-v1").glob("*/metrics.json")]

    assert all(m["config"]["replan_on_doubling"] is False and m["config"]["replan_on_revisit"] is True
               and m["extra"]["replan_rule"] == "revisit" for m in summaries())
    revisit = [m["extra"]["methods"]["pg_sampling"]["n_plans"][0] for m in summaries()
               if m["config"]["learn_rewards"] is False and m["config"]["rewards"] == "transition"]
    code, out, err = cli(capsys, *base, "--no-replan-on-revisit")
    assert code == 0, err
    fixed = [m for m in summaries() if m["config"]["replan_on_revisit"] is False]
    assert len(fixed) == 1 and fixed[0]["extra"]["replan_rule"] == "schedule"
    assert fixed[0]["extra"]["methods"]["pg_sampling"]["n_plans"] == [3.0]
    code, out, err = cli(capsys, *base, "--replan-on-doubling")
    assert code == 0, err
    tsde = [m for m in summaries() if m["config"]["replan_on_doubling"] is True]
    assert len(tsde) == 1 and tsde[0]["extra"]["replan_on_doubling"] is True
    assert tsde[0]["extra"]["replan_rule"] == "doubling"
    # (this 3 x 3 lake's first 100 steps: every rule replans more than the schedule, TSDE most)
    assert 3 < revisit[0] < tsde[0]["extra"]["methods"]["pg_sampling"]["n_plans"][0]


class Chain(gymnasium.Env):
    """Three states in a row with a published model but no coordinates the adapter knows."""

    observation_space = gymnasium.spaces.Discrete(3)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self):
        self.P = {s: {a: [(1.0, min(max(s + (1 if a else -1), 0), 2), float(s == 1 and a == 1), s == 1 and a == 1)]
                      for a in range(2)} for s in range(3)}
        self.initial_state_distrib = [1.0, 0.0, 0.0]

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.s = 0
        return 0, {}

    def step(self, a):
        _, self.s, r, done = self.P[self.s][a][0]
        return self.s, r, done, False, {}


class ChainWithoutModel(Chain):
    """The same environment, not publishing its model."""

    def __init__(self):
        super().__init__()
        self._table, self.P = self.P, None

    def step(self, a):
        _, self.s, r, done = self._table[self.s][a][0]
        return self.s, r, done, False, {}


@pytest.fixture()
def chain_id():
    env_id = "corrpriors_test/Chain-v0"
    gymnasium.register(env_id, entry_point=Chain, max_episode_steps=20)
    gymnasium.register("corrpriors_test/ChainWithoutModel-v0", entry_point=ChainWithoutModel)
    yield env_id
    gymnasium.registry.pop(env_id, None)
    gymnasium.registry.pop("corrpriors_test/ChainWithoutModel-v0", None)


def test_an_environment_without_coordinates_runs_the_dirichlet_methods(tmp_path, capsys, chain_id):
    code, _, err = cli(capsys, "psrl", chain_id, "--steps", "40", "--n-seeds", "1", "--out", str(tmp_path))
    assert code == 2
    assert err.strip().splitlines() == [
        f"corrpriors psrl: error: methods: pg_sampling, pg_mean, pg_absolute_sampling need state coordinates, "
        f"and none are known for {chain_id}; give them with --features module:function (or as the "
        f"environment's state_coordinates attribute) or run the Dirichlet methods only (--methods)"]
    code, out, err = cli(capsys, "psrl", chain_id, "--steps", "40", "--n-seeds", "1", "--out", str(tmp_path),
                         "--methods", "dirichlet_sparse_sampling,dirichlet_uniform_sampling")
    assert code == 0, err
    _, m = only_metrics(tmp_path, "psrl-corrpriors_test_Chain-v0")
    assert set(m["metrics"]) == {"normalized_return", "success_probability"}
    code, _, err = cli(capsys, "sysid", "corrpriors_test/ChainWithoutModel-v0", "--out", str(tmp_path))
    assert code == 2 and err.count("\n") == 1
    assert "corrpriors sysid: error: ENV_ID: corrpriors_test/ChainWithoutModel-v0: env: " in err
    assert "publishes no tabular model" in err


@pytest.mark.parametrize("args,message", [
    (["sysid", "NoSuchEnv-v0"], "ENV_ID: 'NoSuchEnv-v0' is not a usable Gymnasium id: Environment `NoSuchEnv` "
                                "doesn't exist."),
    (["psrl", "FrozenLake-v1", "--env-kwargs", "{map_name: 8x8}"], "--env-kwargs: expected a JSON object"),
    (["psrl", "FrozenLake-v1", "--env-kwargs", '["8x8"]'], "--env-kwargs: expected a JSON object {...} of keyword "
                                                           "arguments, got list"),
    (["sysid", "FrozenLake-v1", "--env-kwargs", '{"bogus": 1}'], "--env-kwargs: FrozenLake-v1 could not be made"),
    (["sysid", "CartPole-v1"], "ENV_ID: CartPole-v1 is not tabular: env.observation_space: expected a "
                               "gymnasium.spaces.Discrete space"),
    (["sysid", "FrozenLake-v1", "--transitions", "300,100"], "transitions: expected increasing values, got (300, 100)"),
    (["sysid", "FrozenLake-v1", "--transitions", "10,x"], "expected an integer, got 'x'"),
    (["sysid", "FrozenLake-v1", "--methods", "pg,bogus"], "methods: unknown 'bogus'; expected some of pg, pg_absolute"),
    (["psrl", "FrozenLake-v1", "--methods", "pg"],
     "methods: unknown 'pg' (did you mean pg_sampling or pg_mean?); expected some of pg_sampling"),
    (["psrl", "FrozenLake-v1", "--discount", "1"], "discount: expected a number in (0, 1), got 1.0"),
    (["psrl", "FrozenLake-v1", "--steps", "0"], "steps: expected an integer in [1, 1e7], got 0"),
    (["psrl", "FrozenLake-v1", "--set", "env_id=Taxi-v4"], "env_id, env_kwargs: this experiment is FrozenLake-v1"),
    (["psrl", "FrozenLake-v1", "--steps", "9", "--set", "steps=10"], "--steps and --set steps=...: give only one"),
    (["psrl", "FrozenLake-v1", "--set", "prior=sparse"],
     "prior: expected one of 'auto', 'dense', 'gmrf', got 'sparse'"),
    (["psrl", "FrozenLake-v1", "--learn-rewards", "--rewards", "expected"],
     "rewards: the learned rewards replace the known ones; got learn_rewards with rewards='expected'"),
    (["psrl", "FrozenLake-v1", "--set", "rewards=mean"],
     "rewards: expected one of 'transition', 'expected', got 'mean'"),
    (["psrl", "FrozenLake-v1", "--set", "terminals=all"], "terminals: expected one of 'known', 'observed', got 'all'"),
    (["sysid", "FrozenLake-v1", "--set", "other_pooling=-1"], "other_pooling: expected a number in [0, 1e6], got -1.0"),
    (["psrl", "FrozenLake-v1", "--set", "nonsense=1"], "nonsense: not a Config field of experiment psrl-FrozenLake-v1"),
    (["sysid", "FrozenLake-v1", "--seeds", "3-1"], "seeds: range '3-1' is reversed"),
])
def test_bad_input_is_one_line_and_exit_2_before_any_work(tmp_path, capsys, args, message):
    code, out, err = cli(capsys, *args, "--out", str(tmp_path / "out"))
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"corrpriors {args[0]}: error: ") and message in lines[0], err
    assert not (tmp_path / "out").exists()


def test_help_states_the_defaults(capsys):
    for command, phrases in (("sysid", ["100,300,1000,3000,10000", "N = 10 seeds, --quick 2", "--quick: 100,300,1000"]),
                             ("psrl", ["default: 5000; --quick: 500", "N = 5 seeds, --quick 2", "default: 50",
                                       "--learn-rewards", "default: pg_sampling, pg_mean, pg_absolute_sampling"])):
        with pytest.raises(SystemExit) as info:
            main([command, "--help"])
        assert info.value.code == 0
        text = " ".join(capsys.readouterr().out.split())
        for phrase in phrases:
            assert phrase in text, (command, phrase)


def test_sysid_figure_and_metrics_name_the_point_estimate_scored(tmp_path, capsys):
    """The figure says when every method is scored by its Hellinger-Bayes estimate (not the mean),
    and metrics.json records the estimate ``"auto"`` (the default) resolved to.
    """
    from corrpriors.experiments.gym_sysid import SysIdExperiment

    args = ["sysid", "FrozenLake-v1", "--env-kwargs", LAKE3, "--transitions", "20,60", "--n-seeds", "1",
            "--methods", "pg,dirichlet_sparse", "--no-plot"]
    titles, scored = {}, {}
    for kind in ("mean", "hellinger", "auto"):
        setting = [] if kind == "auto" else ["--set", f"point_estimate={kind}"]
        code, _, err = cli(capsys, *args, *setting, "--out", str(tmp_path / kind))
        assert code == 0, err
        _, m = only_metrics(tmp_path / kind, "sysid-FrozenLake-v1")
        assert m["config"]["point_estimate"] == kind
        scored[kind] = m["extra"]["point_estimate"]
        exp = SysIdExperiment("FrozenLake-v1")
        [spec] = exp.figures(exp.Config(point_estimate=kind), {}, m)
        titles[kind] = spec.figure._suptitle.get_text()
    assert scored == {"mean": "mean", "hellinger": "hellinger", "auto": "hellinger"}
    assert "Hellinger-Bayes" in titles["hellinger"] and "Hellinger-Bayes" not in titles["mean"]
    assert titles["auto"] == titles["hellinger"]

