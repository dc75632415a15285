"""The run-time estimate of ``corrpriors sysid`` / ``psrl`` before the first seed (issue 25, item 5)."""

from __future__ import annotations

import json
import time

import pytest

import toy_experiment as toy
from corrpriors.cli import main
from corrpriors.experiments import _gym_time
from corrpriors.runner._run import ModelEstimate, run_experiment


def test_the_estimate_is_said_before_any_seed_runs_and_recorded(tmp_path, monkeypatch, toy_registered):
    said: list[str] = []
    run_seed = toy.run_seed

    def spy(config, *, rng):
        said.append("<seed>")
        return run_seed(config, rng=rng)

    monkeypatch.setattr(toy, "run_seed", spy)
    monkeypatch.setattr(toy, "estimate_seed_cost", lambda config: _gym_time.SeedCost(
        600.0, {"a": 600.0}, "one big fit"), raising=False)
    report = run_experiment(toy.NAME, n_seeds=3, jobs=1, out=tmp_path, progress=False, plot=False,
                            echo=said.append)
    first = next(i for i, line in enumerate(said) if "estimate:" in line)
    assert first < said.index("<seed>")
    text = " ".join(line.strip() for line in said[first:said.index("<seed>")])
    assert "by the cost model, before any seed, 10 min 00 s CPU per seed; 3 seeds on 1 worker" in text
    assert "about 30 min 00 s CPU (3 x 10 min 00 s), 30 min 00 s wall (3 seeds in turn x 10 min 00 s)" in text
    assert "(CPU per seed by the model: one big fit)" in text
    record = report.summary["run"]["estimate"]
    assert record["cpu_seconds"] == 1800.0 and record["model"] == "one big fit"
    assert record["measured_cpu_seconds"] == pytest.approx(report.cpu_seconds)
    # seeds on disk: their measured cost, not the model
    said.clear()
    run_experiment(toy.NAME, n_seeds=4, jobs=1, out=tmp_path, progress=False, plot=False, echo=said.append)
    assert not any("model:" in line for line in said)


def test_a_small_estimate_is_logged_not_said(tmp_path, monkeypatch, toy_registered, caplog):
    monkeypatch.setattr(toy, "estimate_seed_cost", lambda config: _gym_time.SeedCost(
        1.0, {"a": 1.0}, "tiny"), raising=False)
    said: list[str] = []
    with caplog.at_level("INFO", logger="corrpriors.runner"):
        report = run_experiment(toy.NAME, n_seeds=2, jobs=1, out=tmp_path, progress=False, plot=False,
                                echo=said.append)
    assert not any("estimate:" in line for line in said), said
    assert any("1.0 s CPU per seed; 2 seeds" in r.getMessage() for r in caplog.records)
    assert report.summary["run"]["estimate"]["cpu_seconds"] == 2.0


def test_wall_time_shares_the_workers_and_lines_never_break_a_duration():
    est = ModelEstimate(5, 2, 100.0, "m")
    assert est.wall == 300.0 and ("1 min 40 s CPU per seed; 5 seeds on 2 workers, one core each: about 8 min 20 s "
                                  "CPU (5 x 1 min 40 s), 5 min 00 s wall (3 seeds in turn x 1 min 40 s)") in est.text()
    model = "2 plans per method, S=99,856, A=4, K=10, fixed scale; pg_sampling 1 min 39 s, dirichlet 1 min 15 s"
    for width in range(30, 100):
        est = ModelEstimate(1, 1, 202.0, model + " " + "x" * (width - 30))
        lines = est.lines()
        assert " ".join(line.strip() for line in lines) == est.text()
        for line in lines:
            assert not line.rstrip().endswith((" 1", " min", " 39", " 15", " 3")), lines


def test_sysid_on_a_tiny_map_says_no_estimate_but_records_it(tmp_path, capsys):
    code = main(["sysid", "FrozenLake-v1", "--env-kwargs", '{"desc": ["SFF", "FHF", "FFG"], "is_slippery": true}',
                 "--transitions", "20", "--seeds", "0", "--methods", "dirichlet_sparse", "--out", str(tmp_path),
                 "--no-progress", "--no-plot", "--jobs", "1"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "estimate:" not in out
    [path] = tmp_path.glob("sysid-FrozenLake-v1/*/metrics.json")
    record = json.loads(path.read_text())["run"]["estimate"]
    assert 0 < record["cpu_seconds"] < 1 and "1 refit per method" in record["model"]


def test_the_model_grows_with_the_size_and_the_settings():
    big = _gym_time.sysid_seed_cost(99_856, 4, 2, ("pg",), (10_000,))
    small = _gym_time.sysid_seed_cost(10_000, 4, 2, ("pg",), (10_000,))
    assert 28.0 < big.cpu / small.cpu < 33.0                      # S^1.5 above 10^4 states
    mid = _gym_time.sysid_seed_cost(5_000, 4, 2, ("pg",), (10_000,))
    assert 0.45 < mid.cpu / small.cpu < 0.5                       # S^1.06 below, with the overhead
    # continuous at 10^4 states: no jump where the exponent changes
    assert _gym_time.fit_growth(10_001) == pytest.approx(_gym_time.fit_growth(9_999), rel=1e-3)
    two = _gym_time.sysid_seed_cost(10_000, 4, 2, ("pg",), (1_000, 10_000))
    assert two.parts["pg"] == pytest.approx(2 * small.parts["pg"])
    fixed = _gym_time.sysid_seed_cost(10_000, 4, 2, ("pg",), (10_000,), selection="fixed")
    # the Hellinger-Bayes estimate: its first batch of posterior draws per T for a correlated
    # method (where it stopped in every case measured); the Dirichlet closed form costs a table
    from corrpriors.applications.transitions._hellinger import FIRST_DRAWS

    assert _gym_time.HELLINGER_PRICED_DRAWS == FIRST_DRAWS
    methods = ("pg", "dirichlet_sparse")
    means = _gym_time.sysid_seed_cost(500, 6, 3, methods, (100, 1_000))
    hell = _gym_time.sysid_seed_cost(500, 6, 3, methods, (100, 1_000), point_estimate="hellinger")
    draw = _gym_time.draw_seconds("pg", 500, 6, 3)
    assert hell.parts["pg"] - means.parts["pg"] == pytest.approx(
        2 * (_gym_time.HELLINGER_PRICED_DRAWS - 1) * draw)
    assert hell.parts["dirichlet_sparse"] == means.parts["dirichlet_sparse"]
    assert fixed.cpu < small.cpu / 3
    few = _gym_time.refit_seconds("pg", 10_000, 4, 2, observed=32)    # 8 per action: Woodbury only
    assert few == pytest.approx(4 * _gym_time.FIT_OVERHEAD)
    assert _gym_time.refit_seconds("pg", 10_000, 4, 2, observed=33) > 10 * few
    psrl = _gym_time.psrl_seed_cost(10_000, 4, 2, ("pg_sampling", "pg_mean"), 1000, 100, 100, 10)
    assert psrl.parts["pg_sampling"] > psrl.parts["pg_mean"]
    assert "11 plans per method" in psrl.model
    # replanning on doubling prices DOUBLING_PLANS_PER_PAIR plans per pair, at most one per step
    tsde = _gym_time.psrl_seed_cost(100, 4, 2, ("pg_sampling",), 1000, 50, 50, 10, doubling=True)
    extra = round(_gym_time.DOUBLING_PLANS_PER_PAIR * 400)
    assert f"{21 + extra} plans per method" in tsde.model
    assert tsde.parts["pg_sampling"] > _gym_time.psrl_seed_cost(100, 4, 2, ("pg_sampling",), 1000, 50, 50,
                                                                10).parts["pg_sampling"]
    few_steps = _gym_time.psrl_seed_cost(10_000, 4, 2, ("pg_mean",), 300, 50, 50, 1, doubling=True)
    assert f"{7 + round(_gym_time.DOUBLING_PLANS_PER_PAIR * 300)} plans per method" in few_steps.model
    # replanning on revisits prices REVISIT_PLANS_PER_PAIR; with doubling too, doubling's
    revisit = _gym_time.psrl_seed_cost(100, 4, 2, ("pg_sampling",), 1000, 50, 50, 10, revisit=True)
    assert f"{21 + round(_gym_time.REVISIT_PLANS_PER_PAIR * 400)} plans per method" in revisit.model
    both = _gym_time.psrl_seed_cost(100, 4, 2, ("pg_sampling",), 1000, 50, 50, 10, doubling=True, revisit=True)
    assert both.model == tsde.model


def _measured_and_predicted(n: int, transitions: int) -> tuple[float, float]:
    """pg's CPU seconds of one sysid seed on an n x n slippery map, measured and by the model."""
    from gymnasium.envs.toy_text.frozen_lake import generate_random_map

    from corrpriors.experiments.gym_sysid import SysIdExperiment
    from corrpriors.runner._run import seed_generator

    kwargs = {"desc": generate_random_map(size=n, p=0.9, seed=7), "is_slippery": True}
    exp = SysIdExperiment("FrozenLake-v1", kwargs)
    config = exp.Config(transitions=(transitions,), methods=("pg",), selection="fixed", prior="gmrf")
    predicted = exp.estimate_seed_cost(config).parts["pg"]
    result = exp.run_seed(config, rng=seed_generator(exp.NAME, 0))
    return float(result.method_extras["cpu_seconds"]["pg"][0]), predicted


@pytest.mark.slow
def test_the_model_predicts_the_measured_cpu_on_two_sizes():
    """Within 2x at 24 x 24, 40 x 40 and 60 x 60, and the ratio of the first and last within 1.6x.

    Measured on the shared development machine: 3.7-5.2 s (model 6.5 s), 25-27 s (model 27.6 s;
    the per-pair layer's dense tables: without their term the model said 7.3 s) and 8-14 s (model
    14.6 s, sparse storage) scored by means; since round 8 the default scores the dense maps by
    their Hellinger-Bayes estimates (16 draws): 6.5 s (model 8.5 s), 28-31 s (model 38.8 s; 50 s
    when 32 draws were priced, and a run measured below its half) and 10-15 s. With the same
    constants the test fails for a growth exponent below 0.6 or above 1.8 (the model's 1.06 was
    measured on 50 x 50 to 150 x 150 maps), or none.
    """
    small = _measured_and_predicted(24, 2000)
    mid = _measured_and_predicted(40, 2000)
    large = _measured_and_predicted(60, 2000)
    for measured, predicted in (small, mid, large):
        assert predicted / 2 < measured < 2 * predicted, (small, mid, large)
    ratio = (large[0] / small[0]) / (large[1] / small[1])
    assert 1 / 1.6 < ratio < 1.6, (small, large)


def test_psrl_refits_are_priced_at_their_warm_share():
    # below 2,000 states every refit costs PSRL_REFIT_SHARE of a full one; a replan on doubling
    # refits one action
    S, A, D = 100, 4, 2
    cost = _gym_time.psrl_seed_cost(S, A, D, ("pg_mean",), 100, 50, 50, 1)
    share = _gym_time.PSRL_REFIT_SHARE
    refits = share * sum(_gym_time.refit_seconds("pg", S, A, D, observed=t) for t in (50, 100))
    true_plan = _gym_time.TRUE_PLAN_SECONDS * (S / 1e4) ** _gym_time.PLAN_EXPONENT
    per_plan = _gym_time.draw_seconds("pg", S, A, D) + _gym_time.plan_seconds(S)
    stats = _gym_time.horizon_seconds(S, A, 3, 100, sparse_model=False)      # 3 scorings, horizon 100
    expected = true_plan + refits + 3 * per_plan + 3 * _gym_time.SCORE_SECONDS * S / 1e4 + stats
    assert cost.parts["pg_mean"] == pytest.approx(expected, rel=1e-12)
    tsde = _gym_time.psrl_seed_cost(S, A, D, ("pg_mean",), 100, 50, 50, 1, doubling=True)
    extra = round(_gym_time.DOUBLING_PLANS_PER_PAIR * 100)
    more = extra * (share * _gym_time.refit_seconds("pg", S, A, D, observed=100) / A + per_plan)
    assert tsde.parts["pg_mean"] == pytest.approx(expected + more, rel=1e-12)
    big = _gym_time.psrl_seed_cost(10_000, A, D, ("pg_mean",), 100, 50, 50, 1)
    assert big.parts["pg_mean"] > sum(_gym_time.refit_seconds("pg", 10_000, A, D, observed=t) for t in (50, 100))


def test_the_psrl_estimate_prices_the_horizon_statistics(monkeypatch, fresh_factor):
    """Every scoring's exact horizon statistics push a state distribution ``horizon`` steps: before,
    the estimate was the same for horizon 1 and 100,000 (3.4 s a seed on FrozenLake 4 x 4 with a
    scoring every step, whose horizon statistics take about 20 minutes at the 1.3e-7 s per policy
    and step measured there), and no long-run warning was said."""
    from corrpriors.experiments.gym_psrl import PSRLExperiment
    from corrpriors.runner._run import ESTIMATE_ABOVE

    monkeypatch.setenv(_gym_time.MACHINE_FACTOR_ENV, "1")
    exp = PSRLExperiment("FrozenLake-v1")
    cost = {h: exp.estimate_seed_cost(exp.Config(steps=100_000, eval_every=1, horizon=h,
                                                 methods=("dirichlet_sparse_mean",))) for h in (1, 100_000)}
    grown = cost[100_000].cpu - cost[1].cpu

    def stats(horizon):   # the method's 100,001 scorings and the optimal policy
        return sum(_gym_time.horizon_seconds(16, 4, e, horizon, sparse_model=False) for e in (100_001, 1))
    assert grown == pytest.approx(stats(100_000) - stats(1), rel=1e-12)
    assert cost[1].cpu < ESTIMATE_ABOVE < grown and "100,001 scorings (horizon 100,000)" in cost[100_000].model
    # a dense model: (E, S, S) per step; a sparse one: a P_pi per policy, linear in S
    dense = [_gym_time.horizon_seconds(s, 4, 10, 1000, sparse_model=False) for s in (500, 1000)]
    sparse = [_gym_time.horizon_seconds(s, 4, 10, 1000, sparse_model=True) for s in (5000, 10_000)]
    assert 3.5 < dense[1] / dense[0] < 4.0 and sparse[1] / sparse[0] == pytest.approx(2.0)
    assert _gym_time.psrl_seed_cost(10_000, 4, 2, ("pg_mean",), 100, 50, 50, 1).parts == \
        _gym_time.psrl_seed_cost(10_000, 4, 2, ("pg_mean",), 100, 50, 50, 1, sparse_model=True).parts


@pytest.mark.slow
def test_the_psrl_estimate_covers_long_horizon_statistics_on_two_sizes():
    """Measured seed CPU against the estimate where the horizon statistics are most of a seed.

    On this project's shared machine (factor 0.31): FrozenLake 8 x 8, 2,000 steps scored every 10
    at horizon 20,000: 4.1 s measured, 4.3 s estimated (0.14 s before the horizon was priced); a
    50 x 50 map (sparse model) at horizon 3,000, 1,000 steps scored every 20: horizon statistics
    2.5 s measured and modelled (the whole seed 3.7 s against 16 s: the model prices the
    Dirichlet agent's plans of 2,500 states at 10x what they cost).
    """
    from gymnasium.envs.toy_text.frozen_lake import generate_random_map

    from corrpriors.experiments.gym_psrl import PSRLExperiment
    from corrpriors.runner._run import seed_generator

    for kwargs, steps, every, horizon, within in (({"map_name": "8x8"}, 2000, 10, 20_000, 2.0),
                                                  ({"desc": generate_random_map(size=50, p=0.9, seed=7)},
                                                   1000, 20, 3000, 6.0)):
        exp = PSRLExperiment("FrozenLake-v1", json.dumps(kwargs))
        config = exp.Config(steps=steps, eval_every=every, horizon=horizon, methods=("dirichlet_sparse_mean",),
                            discount=0.999)
        predicted = exp.estimate_seed_cost(config).cpu
        t = time.process_time()
        exp.run_seed(config, rng=seed_generator(exp.NAME, 0))
        measured = time.process_time() - t
        assert predicted / within < measured < within * predicted, (exp.n_states, measured, predicted)


@pytest.mark.slow
@pytest.mark.parametrize("rule", ["schedule", "revisit", "doubling"])
def test_the_psrl_estimate_covers_a_cliffwalking_seed(rule):
    """Measured (CPU, pg_sampling, 500 steps) within 5x of the estimate, either side.

    Measured on the development machine: 1.2 s against 2.5 s with a replan every 50 steps,
    2.5-3.1 s against 7.4 s also replanning on doubling (before PSRL_REFIT_SHARE and the
    re-measured DENSE_FIT_SECONDS the model priced them at 21 and 144 s, which fails the test).
    Seconds-long runs vary: the bound is wide.
    """
    from corrpriors.experiments.gym_psrl import PSRLExperiment
    from corrpriors.runner._run import seed_generator

    exp = PSRLExperiment("CliffWalking-v1", {})
    config = exp.Config(steps=500, methods=("pg_sampling",), replan_on_doubling=rule == "doubling",
                        replan_on_revisit=rule != "schedule")
    predicted = exp.estimate_seed_cost(config).parts["pg_sampling"]
    result = exp.run_seed(config, rng=seed_generator(exp.NAME, 0))
    measured = float(result.method_extras["cpu_seconds"]["pg_sampling"][0])
    assert predicted / 5 < measured < 5 * predicted, (measured, predicted)


@pytest.fixture
def fresh_factor():
    _gym_time.machine_factor.cache_clear()
    yield
    _gym_time.machine_factor.cache_clear()


def test_the_machine_factor_scales_every_part(monkeypatch, fresh_factor):
    """The probe against its reference, clipped; the environment variable overrides it and a bad
    value names it; the experiments' estimates are the cost model's parts times the factor."""
    from corrpriors.experiments.gym_psrl import PSRLExperiment

    monkeypatch.delenv(_gym_time.MACHINE_FACTOR_ENV, raising=False)
    monkeypatch.setattr(_gym_time, "probe_seconds", lambda repeat=3: 2.0 * _gym_time.PROBE_REFERENCE_SECONDS)
    assert _gym_time.machine_factor() == pytest.approx(2.0)
    _gym_time.machine_factor.cache_clear()
    monkeypatch.setattr(_gym_time, "probe_seconds", lambda repeat=3: 1e6)
    assert _gym_time.machine_factor() == _gym_time.MACHINE_FACTOR_RANGE[1]
    for bad in ("0", "-1", "abc", "nan", "inf", ""):
        _gym_time.machine_factor.cache_clear()
        monkeypatch.setenv(_gym_time.MACHINE_FACTOR_ENV, bad)
        with pytest.raises(ValueError, match=_gym_time.MACHINE_FACTOR_ENV):
            _gym_time.machine_factor()
    _gym_time.machine_factor.cache_clear()
    monkeypatch.setenv(_gym_time.MACHINE_FACTOR_ENV, "2.5")
    assert _gym_time.machine_factor() == 2.5
    exp = PSRLExperiment("CliffWalking-v1", {})
    config = exp.Config(steps=500, methods=("pg_sampling", "dirichlet_sparse"))
    scaled = exp.estimate_seed_cost(config)
    settings = exp.cost_settings(config)
    raw = _gym_time.psrl_seed_cost(settings.pop("n_states"), settings.pop("n_actions"), settings.pop("n_dims"),
                                   tuple(config.methods), 500, config.replan_every, config.eval_every,
                                   int(config.n_samples), doubling=bool(config.replan_on_doubling),
                                   revisit=bool(config.replan_on_revisit), **settings)
    assert scaled.parts == pytest.approx({k: 2.5 * v for k, v in raw.parts.items()}, rel=1e-12)
    assert scaled.cpu == pytest.approx(2.5 * raw.cpu, rel=1e-12) and "x2.5" in scaled.model


def test_the_probe_is_a_small_positive_cpu_time():
    t = _gym_time.probe_seconds(repeat=1)
    assert 0 < t < 2.0


@pytest.mark.parametrize("n_states,n_dims,radius", [(16, 2, 3), (16, 2, 1), (64, 2, 5), (500, 1, 300), (10_000, 2, 2)])
def test_the_time_and_memory_estimates_count_the_same_categories(n_states, n_dims, radius):
    """The time estimate capped pg's categories at S (16 on FrozenLake 4x4 with radius 3) while
    the memory estimate, like the belief, counts the window's (2r + 1)^D moves plus one (50)."""
    from corrpriors.experiments._gym_memory import belief_categories

    K = belief_categories("pg", n_states, n_dims, radius)
    assert K == (2 * radius + 1) ** n_dims + 1
    cost = _gym_time.sysid_seed_cost(n_states, 4, n_dims, ("pg",), (100,), radius=radius)
    assert f"K={K:,.0f}," in cost.model
    one = _gym_time.refit_seconds("pg", n_states, 4, n_dims, radius=radius, prior="gmrf", observed=10**6)
    base = _gym_time.refit_seconds("pg", n_states, 4, n_dims, radius=0, prior="gmrf", observed=10**6)
    layer = _gym_time._layer_entries(n_states, 4) * _gym_time.LAYER_SECONDS_PER_ENTRY
    assert (one - layer) == pytest.approx((base - layer) * (K - 1))    # priced per category past the first
    assert belief_categories("pg_absolute", n_states, n_dims, radius) == n_states
