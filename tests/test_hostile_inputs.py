"""Big or hostile inputs to the commands (issue 23, items 2-6): environments, ranges, sizes, messages, seeds.

Every case is a reproducer from the issue (or one of its kind) and failed on the commit before the fix.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import os
import pathlib
import re
import resource
import signal
import subprocess
import sys
import time

import gymnasium
import numpy as np
import pytest

import toy_experiment as toy
from corrpriors.cli import main
from memory_checks import traced_peak

pytestmark = pytest.mark.filterwarnings("ignore::corrpriors.exceptions.JitterWarning")

LAKE3 = '{"desc": ["SFF", "FHF", "FFG"], "is_slippery": true}'


def cli(capsys, *args):
    code = main([*args, "--no-progress", "--jobs", "1"])
    out, err = capsys.readouterr()
    return code, out, err


@contextlib.contextmanager
def bounded(seconds: int = 60, headroom: int = 4 * 2**30):
    """Fail (TimeoutError, MemoryError) instead of hanging or eating the machine: what the unfixed code did."""
    def alarm(signum, frame):
        raise TimeoutError(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, alarm)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    used = int(pathlib.Path("/proc/self/statm").read_text().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    cap = used + headroom if hard == resource.RLIM_INFINITY else min(used + headroom, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def big_lake(n: int) -> str:
    rows = ["S" + "F" * (n - 1)] + ["F" * n] * (n - 2) + ["F" * (n - 1) + "G"]
    return json.dumps({"desc": rows})


# ----------------------------------------------------------------------------- 2. environments


def test_an_environment_that_builds_differently_each_time_is_refused(tmp_path, capsys):
    from corrpriors.experiments.gym_sysid import SysIdExperiment

    with pytest.raises(ValueError, match="builds a different environment each time") as info:
        SysIdExperiment("FrozenLake-v1", {"map_name": None})
    hint = str(info.value).split("--env-kwargs '", 1)[1].rstrip("'")
    desc = json.loads(hint)["desc"]                  # the suggested map is a usable, fixed map
    assert len(desc) == 8 and all(len(row) == 8 for row in desc)
    SysIdExperiment("FrozenLake-v1", {"desc": desc})
    code, out, err = cli(capsys, "sysid", "FrozenLake-v1", "--quick", "--env-kwargs", '{"map_name": null}',
                         "--out", str(tmp_path))
    assert code == 2 and err.count("\n") == 1 and "builds a different environment each time" in err
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_the_table_digest_is_part_of_the_configuration_and_of_every_seed_record(tmp_path, capsys):
    from corrpriors.envs import from_gymnasium
    from corrpriors.experiments._gym import table_digest
    from corrpriors.experiments.gym_sysid import SysIdExperiment

    mdp = from_gymnasium(gymnasium.make("FrozenLake-v1", **json.loads(LAKE3)))
    exp = SysIdExperiment("FrozenLake-v1", LAKE3)
    assert exp.Config().env_digest == table_digest(mdp) == exp.env_digest
    other = from_gymnasium(gymnasium.make("FrozenLake-v1", desc=["SFF", "FHF", "FFG"], is_slippery=False))
    assert table_digest(other) != table_digest(mdp)
    code, out, err = cli(capsys, "sysid", "FrozenLake-v1", "--env-kwargs", LAKE3, "--transitions", "20,40",
                         "--methods", "dirichlet_sparse", "--n-seeds", "2", "--no-plot", "--out", str(tmp_path))
    assert code == 0, err
    [folder] = (tmp_path / "sysid-FrozenLake-v1").iterdir()
    for k in (0, 1):
        record = json.loads((folder / "seeds" / f"seed-{k}.json").read_text())
        assert record["config"]["env_digest"] == table_digest(mdp)
    assert json.loads((folder / "metrics.json").read_text())["config"]["env_digest"] == table_digest(mdp)
    assert json.loads((folder / "config.json").read_text())["config"]["env_digest"] == table_digest(mdp)

    # a seed recorded on another table is neither reused nor aggregated: the run refuses
    seed = folder / "seeds" / "seed-1.json"
    record = json.loads(seed.read_text())
    record["config"]["env_digest"] = "0" * 16
    seed.write_text(json.dumps(record))
    code, out, err = cli(capsys, "sysid", "FrozenLake-v1", "--env-kwargs", LAKE3, "--transitions", "20,40",
                         "--methods", "dirichlet_sparse", "--n-seeds", "2", "--no-plot", "--out", str(tmp_path))
    assert code == 2 and "env_digest" in err and "another configuration" in err


def test_a_seed_whose_environment_builds_another_table_fails_instead_of_mixing(monkeypatch):
    from corrpriors.experiments.gym_sysid import SysIdExperiment

    exp = SysIdExperiment("FrozenLake-v1", LAKE3)
    config = dataclasses.replace(exp.Config(transitions=(20,), methods=("dirichlet_sparse",)), env_digest="f" * 16)
    with pytest.raises(ValueError, match="env_digest: FrozenLake-v1 .* built the table [0-9a-f]{16} here, not the "
                                         "planned ffffffffffffffff"):
        exp.run_seed(config, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="env_digest: FrozenLake-v1's table has the digest"):
        exp.check_config(config)


@pytest.mark.parametrize("kwargs, warned", [
    ({"is_slippery": "no"}, "is_slippery=\"no\" is a str where FrozenLake-v1's default is the bool True"),
    ({"is_slippery": 0}, "is_slippery=0 is a int where FrozenLake-v1's default is the bool True"),
    ({"reward_schedule": [1, 0, 0]}, None),                        # a list for a tuple default is fine
    ({"is_slippery": False, "map_name": "8x8"}, None),
    ({"success_rate": 1}, None),                                   # an int for a float default is fine
])
def test_a_keyword_argument_of_another_type_than_the_default_is_warned(capsys, kwargs, warned):
    import warnings

    from corrpriors.exceptions import EnvironmentWarning
    from corrpriors.experiments.gym_psrl import PSRLExperiment

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        PSRLExperiment("FrozenLake-v1", kwargs)
    messages = [str(w.message) for w in caught if issubclass(w.category, EnvironmentWarning)]
    if warned is None:
        assert messages == []
    else:
        assert len(messages) == 1 and warned in messages[0]
    if kwargs == {"is_slippery": "no"}:
        code = main(["psrl", "FrozenLake-v1", "--env-kwargs", json.dumps(kwargs), "--list-settings"])
        err = capsys.readouterr().err
        assert code == 0 and err.startswith("corrpriors psrl: warning: --env-kwargs: is_slippery=\"no\"")
        assert "(use true or false)" in err


# ----------------------------------------------------------------------------- 3. ranges


def _experiments():
    from corrpriors.experiments.gym_psrl import PSRLExperiment
    from corrpriors.experiments.gym_sysid import SysIdExperiment
    from corrpriors.runner.registry import experiment_names, get_experiment

    out = [get_experiment(name) for name in experiment_names(include_extra=False)]
    return out + [SysIdExperiment("FrozenLake-v1"), PSRLExperiment("CliffWalking-v1")]


def test_every_setting_of_every_experiment_has_a_declared_range_its_defaults_meet():
    from corrpriors.runner._ranges import Constraint, check_ranges

    for exp in _experiments():
        fields = {f.name for f in dataclasses.fields(exp.Config)}
        assert set(exp.RANGES) == fields, (exp.NAME, fields ^ set(exp.RANGES))
        assert all(isinstance(c, Constraint) and c.describe() for c in exp.RANGES.values())
        check_ranges(exp, exp.Config())
        check_ranges(exp, exp.quick_config())


@pytest.mark.parametrize("args, message", [
    (["sysid", "FrozenLake-v1", "--set", "alpha_sparse=1e308"],
     "alpha_sparse: expected a number in [1e-100, 1e12] (a concentration; beyond it sums overflow), got 1e+308"),
    (["sysid", "FrozenLake-v1", "--set", "alpha_uniform=1e-320"], "alpha_uniform: expected a number in [1e-100"),
    (["sysid", "FrozenLake-v1", "--set", "radius=1000000000"], "radius: expected an integer in [1, 100]"),
    (["sysid", "FrozenLake-v1", "--set", "radius=4"],
     "radius: expected at most 3 (the largest coordinate difference of two states"),
    (["sysid", "FrozenLake-v1", "--transitions", "10,1000000000000"], "transitions (entry 1): expected an integer"),
    (["sysid", "FrozenLake-v1", "--set", "lengthscale=1e300"], "lengthscale: expected a number in (0, 1e6]"),
    (["psrl", "FrozenLake-v1", "--horizon", "1000000000000"],
     "horizon: expected an integer in [1, 100,000] (the exact statistics take S^2 work per step), got 1000000000000"),
    (["psrl", "FrozenLake-v1", "--steps", "1000000000000"], "steps: expected an integer in [1, 1e7]"),
    (["psrl", "FrozenLake-v1", "--samples", "1000000000"], "n_samples: expected an integer in [1, 10,000]"),
    (["psrl", "FrozenLake-v1", "--set", "alpha_sparse=1e308"], "alpha_sparse: expected a number in [1e-100, 1e12]"),
    (["reproduce", "psrl-grid", "--quick", "--set", "radius=1000000000"],
     "psrl-grid: --set radius: expected an integer in [1, 9] (the tunnel world is 10 x 10), got 1000000000"),
    (["reproduce", "psrl-queueing", "--quick", "--set", "radius=1000000000"], "radius: expected an integer in [1, 10]"),
    (["reproduce", "system-id", "--quick", "--set", "offset_radius=1000000000"], "offset_radius: expected an integer"),
    (["reproduce", "system-id", "--quick", "--set", "alpha_sparse=1e308"], "alpha_sparse: expected a number in"),
    (["reproduce", "psrl-grid", "--quick", "--set", "n_samples=100000000"], "n_samples: expected an integer in"),
    (["reproduce", "imitation", "--quick", "--set", "shape=100000,100000"],
     "shape (entry 0): expected an integer in [2"),
    (["reproduce", "imitation", "--quick", "--set", "n_rewards=0"], "n_rewards: expected an integer in [1, 100]"),
    (["reproduce", "imitation", "--quick", "--set", "shape=3,3", "--set", "n_rewards=9"],
     "n_rewards: expected fewer than the 9 cells of the 3 x 3 grid"),
    (["reproduce", "imitation", "--quick", "--set", "motion=teleport"],
     "motion: expected one of 'gaussian', 'cardinal'"),
    # Fig. 1 was dropped without a word when its D was not in the sweep
    (["reproduce", "imitation", "--quick", "--set", "n_demonstrations=10,20"],
     "figure_demonstrations: expected one of the sweep's n_demonstrations (10, 20), got 50"),
    (["reproduce", "subgoal", "--quick", "--set", "n_burnin=-1"], "n_burnin: expected an integer in [0, 1,000,000]"),
    (["reproduce", "subgoal", "--quick", "--set", "beta=0"], "beta: expected a number in (0, 1e6]"),
    (["reproduce", "psrl-grid", "--quick", "--set", "start=0,100"], "start (entry 1): expected an integer in [0, 9]"),
])
def test_out_of_range_settings_are_refused_before_any_work(tmp_path, capsys, args, message):
    start = time.process_time()
    with bounded():
        code, out, err = cli(capsys, *args, "--out", str(tmp_path / "out"))
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], err
    assert not (tmp_path / "out").exists()
    assert time.process_time() - start < 20


def test_list_settings_shows_every_field_and_its_range(capsys):
    assert main(["reproduce", "psrl-grid", "--list-settings"]) == 0
    out = capsys.readouterr().out
    assert "radius = 3: an integer in [1, 9] (the tunnel world is 10 x 10)" in out
    assert "alpha_sparse = 0.001: a number in [1e-100, 1e12]" in out
    assert main(["sysid", "FrozenLake-v1", "--list-settings"]) == 0
    out = capsys.readouterr().out
    assert "radius = 1: an integer in [1, 100]" in out and "env_digest = " in out
    assert main(["psrl", "FrozenLake-v1", "--list-settings"]) == 0
    assert "horizon = 100: an integer in [1, 100,000]" in capsys.readouterr().out


def test_the_library_refuses_overflowing_concentrations_and_huge_windows():
    from corrpriors._memory import MemoryEstimateError
    from corrpriors.applications.transitions import DirichletTransitionModel, displacement_category_map

    with pytest.raises(ValueError, match=r"alpha: expected alpha \* S <= 1e\+300"):
        DirichletTransitionModel(16, 4, alpha=1e308)
    belief = DirichletTransitionModel(16, 4, alpha=1e12)          # the largest declared: rows stay finite
    assert np.all(np.isfinite(belief.mean())) and np.allclose(belief.mean().sum(-1), 1)
    coords = np.stack(np.unravel_index(np.arange(16), (4, 4)), axis=1)
    spread = coords * 10**6                 # states a million cells apart: a radius that wide is allowed
    start = time.process_time()
    for boundary in ("exclude", "stay"):
        with pytest.raises(ValueError, match=r"^radius: expected at most 3 \(the largest coordinate difference"):
            displacement_category_map(coords, 10**9, boundary=boundary)
        with bounded(), pytest.raises(MemoryEstimateError, match="use a smaller radius"):
            displacement_category_map(spread, 10**6, boundary=boundary)
    assert time.process_time() - start < 5


# ----------------------------------------------------------------------------- 4. sizes


def test_a_map_read_densely_is_refused_up_front(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "200M")
    start = time.process_time()
    with bounded():
        code, out, err = cli(capsys, "sysid", "FrozenLake-v1", "--quick", "--env-kwargs", big_lake(38),
                             "--out", str(tmp_path))
    assert code == 2 and err.count("\n") == 1, err
    assert ("reading FrozenLake-v1's model (1,444 states, 4 actions: 63.6 MiB per dense (S, A, S) table, about 5 "
            "at once) would need about 318 MiB, more than the 200 MiB this process may use "
            "(CORRPRIORS_MEMORY_LIMIT); use a smaller map or state space") in err
    assert time.process_time() - start < 20


def test_a_bigger_map_is_read_sparsely_and_its_estimate_says_so(monkeypatch):
    """Above DENSE_LIMIT_BYTES the adapter reads sparsely: 40 x 40 fits in 200 MiB (dense would need 390 MiB)."""
    from corrpriors._memory import MemoryEstimateError
    from corrpriors.experiments._gym import load_env

    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "200M")
    env, mdp = load_env("FrozenLake-v1", big_lake(40))
    assert mdp.is_sparse and mdp.n_states == 1600
    env.close()
    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "2M")   # 19,192 listed entries at 256 bytes: 4.7 MiB
    with pytest.raises(MemoryEstimateError, match=r"read sparsely: 19,192 listed transitions\) would need about "
                                                  r"4.69 MiB, more than the 2 MiB"):
        load_env("FrozenLake-v1", big_lake(40))


def test_psrl_posterior_draws_are_counted_before_the_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "400M")
    with bounded():
        code, out, err = cli(capsys, "psrl", "FrozenLake-v1", "--quick", "--env-kwargs", big_lake(16),
                             "--samples", "1000", "--methods", "dirichlet_sparse_sampling", "--out", str(tmp_path))
    assert code == 2 and "would need about" in err and "fewer --samples" in err, err
    code, out, err = cli(capsys, "psrl", "FrozenLake-v1", "--env-kwargs", big_lake(16), "--samples", "1000",
                         "--methods", "dirichlet_sparse_mean", "--steps", "10", "--eval-every", "10",
                         "--n-seeds", "1", "--no-plot", "--out", str(tmp_path))
    assert code == 0, err                                    # the mean variant draws nothing


@pytest.mark.slow
def test_the_200_by_200_map_of_the_issue_builds_sparse_and_only_the_quadratic_method_is_refused(tmp_path):
    """40,000 states: read sparsely (about 100 MiB); pg and the Dirichlet beliefs fit in 6 GB, pg_absolute
    (an (S, S) kernel and (S, S - 1) stick parameters per action) is refused before any work."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (6 * 2**30, 6 * 2**30))

    env = {k: v for k, v in os.environ.items() if k != "CORRPRIORS_MEMORY_LIMIT"}
    script = ("import json, sys, dataclasses\n"
              "from corrpriors.experiments.gym_sysid import SysIdExperiment\n"
              "exp = SysIdExperiment('FrozenLake-v1', sys.argv[1])\n"
              "print(exp.n_states, exp._sparse_model)\n"
              "cfg = exp.quick_config()\n"
              "exp.check_config(dataclasses.replace(cfg, methods=('pg', 'dirichlet_sparse', 'dirichlet_uniform')))\n"
              "print('pg fits')\n"
              "exp.check_config(cfg)\n")
    proc = subprocess.run([sys.executable, "-c", script, big_lake(200)], capture_output=True, text=True,
                          timeout=600, preexec_fn=limit, env=env)
    assert proc.stdout.splitlines()[:2] == ["40000 True", "pg fits"], proc.stdout + proc.stderr[-2000:]
    assert "MemoryEstimateError: a seed of sysid on FrozenLake-v1" in proc.stderr, proc.stderr[-2000:]
    assert "methods pg, pg_absolute" in proc.stderr and "more than the 6 GiB" in proc.stderr
    # pg_absolute's (S, S - 1) stick parameters alone: 40,000^2 x 8 bytes x 4 actions = 48 GiB a copy
    # (the estimate fell from TiB to about 760 GiB once its prior followed for_mdp's "auto" rule,
    # which takes the sparse GMRF prior where a dense (S, S) kernel cannot fit)
    need = re.search(r"would need about ([0-9.,]+) (GiB|TiB)", proc.stderr)
    assert need and float(need[1].replace(",", "")) * (1024 if need[2] == "TiB" else 1) > 100
    assert "RLIMIT_AS" in proc.stderr and "MemoryError" not in proc.stderr.replace("MemoryEstimateError", "")


def test_sysid_runs_where_the_model_and_the_beliefs_are_sparse():
    """46 x 46 (2,116 states): a sparse model and sparse belief tables (their Hellinger distance is read
    on the truth's support; main's run_seed raised TypeError on BackgroundTransitions)."""
    from corrpriors.experiments import gym_sysid

    exp = gym_sysid.SysIdExperiment("FrozenLake-v1", big_lake(46))
    assert exp._sparse_model
    cfg = dataclasses.replace(exp.quick_config(), methods=("dirichlet_sparse",), transitions=(200,))
    exp.check_config(cfg)
    result = gym_sysid.run_seed(cfg, rng=np.random.default_rng(0))
    error = result.curves["hellinger"]["dirichlet_sparse"]
    assert error.shape == (1,) and 0.5 < error[0] < 1.0


@pytest.mark.slow
@pytest.mark.parametrize("n, method, kind", [(10, "pg_absolute", "auto"), (20, "pg", "auto"),
                                             (20, "pg", "mean"), (46, "dirichlet_sparse", "auto")])
def test_the_run_estimate_covers_what_a_seed_allocates(n, method, kind):
    """The estimate against tracemalloc's peak of one seed (after a warm-up that imports everything):
    dense storage with a dense prior (S = 100, K = 100; S = 400, K = 10) and sparse storage (2,116 states),
    scored by the default point estimate (the Hellinger-Bayes estimate's draws, on dense storage)
    and by the means."""
    from corrpriors.experiments import gym_sysid
    from corrpriors.experiments._gym_memory import run_memory

    warm = gym_sysid.SysIdExperiment("FrozenLake-v1", big_lake(4))
    gym_sysid.run_seed(dataclasses.replace(warm.quick_config(), methods=(method,), transitions=(50,)),
                       rng=np.random.default_rng(0))
    exp = gym_sysid.SysIdExperiment("FrozenLake-v1", big_lake(n))
    cfg = dataclasses.replace(exp.quick_config(), methods=(method,), transitions=(1000,), point_estimate=kind)
    _, peak = traced_peak(gym_sysid.run_seed, cfg, rng=np.random.default_rng(0))
    n_dims = exp.cost_settings(cfg)["n_dims"]
    estimate = run_memory(exp.n_states, exp.n_actions, n_dims, (method,), model_bytes=exp._model_bytes,
                          entries=exp._listed, radius=cfg.radius, prior=cfg.prior, observed=1000,
                          point_estimate=exp.point_estimate(cfg))
    assert peak <= estimate <= 8 * peak, (peak / 2**20, estimate / 2**20)


def test_the_memory_budget_is_the_smallest_limit(monkeypatch):
    from corrpriors._memory import MemoryEstimateError, check_memory, memory_budget, parse_size

    assert parse_size("6G") == 6 * 2**30 and parse_size("500M") == 500 * 2**20 and parse_size("1024") == 1024
    for bad in ("", "-1G", "lots", "0"):
        with pytest.raises(ValueError, match="CORRPRIORS_MEMORY_LIMIT"):
            parse_size(bad)
    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "1M")
    assert memory_budget() == (2**20, "CORRPRIORS_MEMORY_LIMIT")
    check_memory(2**20, "x", "y")
    with pytest.raises(MemoryEstimateError, match=r"^a thing would need about 1 MiB, more than the 1 MiB"):
        check_memory(2**20 + 1, "a thing", "do less")


# ----------------------------------------------------------------------------- 5. messages


def _lake():
    return gymnasium.make("FrozenLake-v1")


@pytest.mark.parametrize("edit, message", [
    (lambda u: u.P[0].__setitem__(0, [(1.0, None, 0.0, False)]),
     r"env.unwrapped.P\[0\]\[0\]: next state None \(entry \(1.0, None, 0.0, False\)\) is not a state index "
     r"in \[0, 15\]"),
    (lambda u: u.P[0].__setitem__(0, [(1.0, "3", 0.0, False)]),
     r"P\[0\]\[0\]: next state '3' \(entry .*\) is not a state index"),
    (lambda u: u.P[0].__setitem__(0, [(1.0, 2.5, 0.0, False)]), r"next state 2.5 .* is not a state index"),
    (lambda u: u.P[0].__setitem__(0, [("1", 1, 0.0, False)]), r"P\[0\]\[0\]: the probability '1' .* is not a number"),
    (lambda u: u.P[0].__setitem__(0, [(1.0, 1, None, False)]), r"P\[0\]\[0\]: the reward None .* is not a number"),
    (lambda u: u.P[0].__setitem__(0, [5]), r"P\[0\]\[0\]: expected entries \(prob, next_state, reward, terminated\)"),
    (lambda u: u.P[0].__setitem__(0, None), r"P\[0\]\[0\]: expected a list of entries"),
    (lambda u: setattr(u, "initial_state_distrib", np.where(np.arange(16) == 3, np.nan, u.initial_state_distrib)),
     r"env.unwrapped.initial_state_distrib: expected finite probabilities, got nan at state 3"),
    (lambda u: setattr(u, "initial_state_distrib", np.where(np.arange(16) == 2, -0.5, 1.5 * (np.arange(16) == 0))),
     r"initial_state_distrib: expected non-negative probabilities, got -0.5 at state 2"),
])
def test_a_broken_table_is_named_by_its_real_problem(edit, message):
    from corrpriors.envs import from_gymnasium

    env = _lake()
    edit(env.unwrapped)
    with pytest.raises(ValueError, match=message):
        from_gymnasium(env)


def test_env_ids_are_blamed_for_their_own_problems(tmp_path, capsys):
    gymnasium.register("corrpriors_hostile/Broken-v0", entry_point=_broken_env)
    try:
        cases = [
            (["../../x:Foo-v0"], "ENV_ID: '../../x:Foo-v0': expected module:Name-v0 with a Python module name"),
            (["no_such_module_zz:Foo-v0"], "ENV_ID: 'no_such_module_zz:Foo-v0': the module 'no_such_module_zz' "
                                           "named before ':' cannot be imported (ModuleNotFoundError"),
            (["a:b:Foo-v0"], "ENV_ID: 'a:b:Foo-v0': expected module:Name-v0"),
            (["corrpriors_hostile/Broken-v0"], "ENV_ID: corrpriors_hostile/Broken-v0 could not be made: "
                                               "RuntimeError: the constructor failed"),
            (["corrpriors_hostile/Broken-v0", "--env-kwargs", '{"size": 3}'],
             "--env-kwargs: corrpriors_hostile/Broken-v0 could not be made with {\"size\":3}"),
        ]
        for args, message in cases:
            code, out, err = cli(capsys, "sysid", *args, "--out", str(tmp_path))
            assert code == 2 and err.count("\n") == 1 and message in err, (args, err)
            assert "--env-kwargs" not in err or "--env-kwargs" in args
    finally:
        gymnasium.registry.pop("corrpriors_hostile/Broken-v0", None)


def _broken_env(**kwargs):
    raise RuntimeError("the constructor failed")


def test_an_empty_prediction_set_names_new_covariates():
    from corrpriors import CorrelatedMultinomial
    from corrpriors.kernels import SquaredExponential

    rng = np.random.default_rng(0)
    X = rng.random((8, 2))
    model = CorrelatedMultinomial(SquaredExponential(0.5).bind(coords=X)).fit(rng.integers(0, 5, (8, 3)))
    with pytest.raises(ValueError, match=r"^new_covariates: expected at least one point and one dimension, "
                                         r"got shape \(0, 2\)"):
        model.predict_probs(np.zeros((0, 2)))
    with pytest.raises(ValueError, match="^new_covariates: contains NaN"):
        model.predict_psi(np.full((1, 2), np.nan))
    with pytest.raises(TypeError, match="^new_covariates"):
        model.predict_psi(np.ones((1, 2)) * 1j)


# ----------------------------------------------------------------------------- 6. unusable seed files


def _tamper(npz_path: pathlib.Path, json_path: pathlib.Path, edit) -> None:
    """Rewrite a seed's arrays with ``edit`` and record the new checksum: valid checksum, unusable content."""
    with np.load(npz_path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    edit(arrays)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    npz_path.write_bytes(buf.getvalue())
    meta = json.loads(json_path.read_text())
    meta["sha256"] = hashlib.sha256(buf.getvalue()).hexdigest()
    json_path.write_text(json.dumps(meta))


@pytest.mark.parametrize("what, edit", [
    ("a curve one entry short", lambda a: a.__setitem__("curves/error/a", a["curves/error/a"][:-1])),
    ("a curve of another shape", lambda a: a.__setitem__("curves/score/a", a["curves/score/a"][:, None])),
    ("an array missing", lambda a: a.pop("curves/error/b")),
])
def test_an_unusable_seed_file_is_recomputed_with_a_note(tmp_path, capsys, toy_registered, what, edit):
    from corrpriors.runner import run_experiment

    kw = dict(quick=True, jobs=1, out=tmp_path, progress=False, plot=False)
    first = run_experiment(toy.NAME, echo=None, **kw)
    seed_dir = first.out_dir / "seeds"
    _tamper(seed_dir / "seed-1.npz", seed_dir / "seed-1.json", edit)
    said: list[str] = []
    again = run_experiment(toy.NAME, echo=said.append, **kw)
    assert again.computed_seeds == (1,) and again.skipped_seeds == (0,)
    lines = [line for text in said for line in text.splitlines()]
    starts = [i for i, line in enumerate(lines) if "note:" in line]
    assert len(starts) == 1, lines
    # the note, wrapped at 100 columns: its first line and the indented lines after it
    end = next((j for j in range(starts[0] + 1, len(lines)) if not lines[j].startswith("    ")), len(lines))
    note = " ".join(line.strip() for line in lines[starts[0]:end])
    assert "seed 1: the stored result is unusable (" in note and "recomputed" in note
    assert again.summary["metrics"] == first.summary["metrics"]       # the same numbers as before the tampering
    third = run_experiment(toy.NAME, echo=None, **kw)                # and the repaired folder resumes
    assert third.computed_seeds == ()


def test_the_relative_encoding_checks_its_coordinates_by_value():
    """Integers of order 1e300 were cast to int64 as one value and refused as not distinct; now
    the library names the magnitude, and a repeated state by its index (every entry point)."""
    import gymnasium

    from corrpriors.applications.transitions import (
        CorrelatedTransitionModel,
        displacement_category_map,
        window_category_map,
    )
    from corrpriors.envs import from_gymnasium

    huge = np.arange(32).reshape(16, 2) * 1e300
    repeated = np.stack(np.unravel_index(np.arange(16), (4, 4)), axis=1)
    repeated[7] = repeated[2]
    for build in (displacement_category_map, window_category_map):
        with pytest.raises(ValueError, match=r"^coordinates: expected distinct integer coordinates \(the "
                                             r"relative encoding\); they reach 3.1e\+301 in magnitude"):
            build(huge, 1)
        with pytest.raises(ValueError, match=r"states 2 and 7 share the coordinates \(0, 2\)$"):
            build(repeated, 1)
    lake = gymnasium.make("FrozenLake-v1", map_name="4x4")
    for sparse in (False, True):
        with pytest.raises(ValueError, match=r"^mdp.coordinates: expected distinct integer coordinates"):
            CorrelatedTransitionModel.for_mdp(from_gymnasium(lake, features=huge), sparse=sparse)


def test_window_maps_refuse_windows_beyond_memory_and_float_range():
    """(2 r + 1)^D with D = 700 overflowed Python's float power (OverflowError in the memory
    estimate); the window map (sparse storage) built its 3^D moves with no check at all."""
    from corrpriors._memory import MemoryEstimateError
    from corrpriors.applications.transitions import displacement_category_map, window_category_map

    coords = np.random.default_rng(0).integers(0, 3, size=(16, 700))
    coords[:, 0] = np.arange(16)
    for build in (displacement_category_map, window_category_map):
        for d in (50, 700):
            with bounded(), pytest.raises(MemoryEstimateError, match=rf"D = {d}, radius 1: \(2 radius \+ 1\)\^D = "):
                build(coords[:, :d], 1)
