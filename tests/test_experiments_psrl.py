"""The two PSRL experiments end to end through the runner (tiny configs; quick configs are slow)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from corrpriors.experiments import psrl_grid, psrl_queueing
from corrpriors.runner._run import run_experiment
from figure_checks import check_experiment_figures

# run_seed called directly: the expected tiny-jitter warnings of smooth kernels (the runner counts them)
pytestmark = pytest.mark.filterwarnings("ignore::corrpriors.exceptions.JitterWarning")


def tiny(module):
    if module is psrl_grid:
        return dataclasses.replace(psrl_grid.quick_config(), n_transitions=100, n_samples=2,
                                   max_iter=10)
    return dataclasses.replace(psrl_queueing.quick_config(), n_episodes=4, n_samples=2,
                               max_iter=10)


def check_run(module, config, tmp_path, seeds):
    report = run_experiment(module, config=config, seeds=seeds, jobs=1, out=tmp_path,
                            progress=False, echo=None)
    summary = json.loads(report.metrics_path.read_text())
    assert summary["experiment"] == module.NAME
    assert summary["x"]["values"] == module.x_values(config)
    metric = next(iter(module.METRICS))
    block = summary["metrics"][metric]
    assert block["better"] == "higher"
    assert set(block["methods"]) == set(config.methods)
    for m in config.methods:
        assert len(block["methods"][m]["mean"]) == len(module.x_values(config))
        assert np.all(np.isfinite(block["methods"][m]["mean"]))
    extra = summary["extra"]
    assert isinstance(extra["claims"], list) and extra["claims"]
    assert summary["config"]["discount"] == 0.9 and summary["run"]["resolved"]["discount"]["given"] == 0.0
    for c in extra["claims"]:
        assert set(c) == {"claim", "holds", "detail"}
    pngs = [p for p in report.figures if p.suffix == ".png"]
    assert pngs and all(p.exists() and p.stat().st_size > 0 for p in report.figures)
    assert check_experiment_figures(module, report) == [f"{module.NAME}-return"]
    return summary


def test_psrl_grid_tiny_end_to_end(tmp_path):
    config = tiny(psrl_grid)
    summary = check_run(psrl_grid, config, tmp_path, [0])
    block = summary["metrics"]["normalized_return"]["methods"]
    for m in config.methods:                    # normalised by the optimum: within (0, 1]
        mean = np.asarray(block[m]["mean"])
        assert np.all(mean > 0) and np.all(mean <= 1 + 1e-9)
    assert summary["extra"]["optimal_return"] > 0
    assert summary["config"]["lengthscale"] == summary["extra"]["lengthscale"]  # sentinel 0 resolved


def test_psrl_queueing_tiny_end_to_end(tmp_path):
    config = tiny(psrl_queueing)
    summary = check_run(psrl_queueing, config, tmp_path, [0])
    optimal = summary["extra"]["optimal_return"]
    for m in config.methods:                    # no policy beats the optimal one
        assert np.all(np.asarray(summary["metrics"]["expected_return"]["methods"][m]["mean"])
                      <= optimal + 1e-9)


def test_seed_is_reproducible():
    config = dataclasses.replace(tiny(psrl_grid), methods=("pg_sampling", "dirichlet_sparse_sampling"))
    a = psrl_grid.run_seed(config, rng=np.random.default_rng(3))
    b = psrl_grid.run_seed(config, rng=np.random.default_rng(3))
    for m in config.methods:
        np.testing.assert_array_equal(a.curves["normalized_return"][m], b.curves["normalized_return"][m])
    for name, block in a.method_extras.items():
        if "seconds" not in name:
            for m in block:
                np.testing.assert_array_equal(block[m], b.method_extras[name][m])


def test_method_names_and_validation():
    assert psrl_grid.split_method("pg_absolute_sampling") == ("pg_absolute", "sampling")
    assert psrl_grid.split_method("dirichlet_sparse_mean") == ("dirichlet_sparse", "mean")
    assert len(psrl_grid.METHODS) == 8
    with pytest.raises(ValueError, match="method"):
        psrl_grid.split_method("pg_greedy")
    assert psrl_grid.first_reach([0, 1, 2, 3], np.array([0.1, 0.95, 0.8, 0.92]), 0.9) == 3.0
    assert psrl_grid.first_reach([0, 1, 2], np.array([0.1, 0.5, 0.8]), 0.9) is None
    bad = [(psrl_grid, {"methods": ("pg_greedy",)}, "method"), (psrl_grid, {"n_transitions": 120}, "multiple"),
           (psrl_grid, {"discount": 1.5}, "discount"), (psrl_queueing, {"n_episodes": 0}, "n_episodes"),
           (psrl_queueing, {"max_iter": 2.5}, "max_iter"), (psrl_queueing, {"methods": ()}, "methods")]
    for module, change, message in bad:
        with pytest.raises(ValueError, match=message):
            module.check_config(dataclasses.replace(module.quick_config(), **change))


@pytest.mark.slow
@pytest.mark.parametrize("module", [psrl_grid, psrl_queueing])
def test_quick_configs_end_to_end(module, tmp_path):
    check_run(module, module.quick_config(), tmp_path, list(range(module.QUICK_SEEDS)))


def test_claims_check_names_no_method_when_none_reaches_the_level():
    from corrpriors.experiments._psrl import claims_check

    def entry(x):
        return {"transitions_to_level_mean_curve": x, "area_under_curve": 0.5}

    eff = {"level": 0.9, "level_fraction": 0.9,
           "methods": {"pg_mean": entry(200.0), "pg_absolute_mean": entry(None),
                       "dirichlet_sparse_mean": entry(None), "dirichlet_uniform_mean": entry(None)}}
    claims = claims_check(eff, tuple(eff["methods"]), "transitions", "grid", 2000.0)
    rel, absolute = claims
    assert rel.holds and not absolute.holds
    assert "best pg policy pg_mean at 200 transitions" in rel.detail
    assert "no Dirichlet policy within 2,000 transitions" in rel.detail
    assert "dirichlet_sparse_mean at" not in rel.detail
    assert "no pg_absolute policy within 2,000" in absolute.detail


# ----------------------------------------------------------------------------- claim logic on crafted curves
X = [0.0, 50.0, 100.0, 150.0, 200.0, 250.0, 300.0, 350.0, 400.0]


def crafted(curves: dict) -> dict:
    from corrpriors.runner.protocol import SeedResult

    extras = {name: {m: np.array([0.0]) for m in curves} for name in ("seconds", "cpu_seconds", "n_fits")}
    return {0: SeedResult(curves={"r": {m: np.asarray(v, dtype=float) for m, v in curves.items()}},
                          method_extras=extras, extras={"cpu_seconds": np.array([0.0])})}


def crafted_claims(curves: dict) -> dict:
    from corrpriors.experiments._psrl import psrl_extra

    return psrl_extra(X, crafted(curves), "r", tuple(curves), low=0.0, high=1.0, x_name="transitions",
                      domain="toy", x_max=400.0)


def reaching_at(i: int) -> list[float]:
    return [0.1] * i + [0.95] * (len(X) - i)


def test_censored_dirichlet_needs_pg_by_half_of_x_max():
    """No Dirichlet policy reaches the level within the run: its crossing is only known to be beyond x_max."""
    never = [0.1] * len(X)
    late = crafted_claims({"pg_mean": reaching_at(5), "dirichlet_sparse_mean": never})     # pg at 250 > 200
    assert [c.holds for c in late["claims"]] == [False, False]
    assert "only known to be beyond 400, so at most half of it is shown only by 200" in late["claims"][0].detail
    early = crafted_claims({"pg_mean": reaching_at(4), "dirichlet_sparse_mean": never})    # pg at 200
    assert [c.holds for c in early["claims"]] == [True, True]


def test_nan_curves_never_reach_the_level():
    from corrpriors.experiments._psrl import first_reach

    assert first_reach(X, np.full(len(X), np.nan), 0.9) is None
    assert first_reach([0, 1, 2], np.array([0.95, np.nan, 0.95]), 0.9) == 2.0
    failed = crafted_claims({"pg_mean": [np.nan] * len(X), "dirichlet_sparse_mean": reaching_at(8)})
    assert [c.holds for c in failed["claims"]] == [False, False]
    assert "pg_mean's mean curve not finite" in failed["claims"][0].detail
    # a failed Dirichlet fit does not make pg's claim met either
    failed = crafted_claims({"pg_mean": reaching_at(1), "dirichlet_sparse_mean": [np.nan] * len(X)})
    assert [c.holds for c in failed["claims"]] == [False, False]
    assert "dirichlet_sparse_mean's mean curve not finite" in failed["claims"][0].detail


def test_a_tie_at_the_first_evaluation_is_not_met():
    out = crafted_claims({"pg_mean": reaching_at(0), "dirichlet_sparse_mean": reaching_at(0)})
    assert [c.holds for c in out["claims"]] == [False, False]
    assert "undetermined: both reach it at the first evaluation" in out["claims"][0].detail
    ahead = crafted_claims({"pg_mean": reaching_at(0), "dirichlet_sparse_mean": reaching_at(2)})
    assert [c.holds for c in ahead["claims"]] == [True, True]


def test_claims_left_unchecked_are_noted():
    no_dirichlet = crafted_claims({"pg_mean": reaching_at(1), "pg_absolute_mean": reaching_at(2)})
    assert no_dirichlet["claims"] == []
    assert no_dirichlet["notes"] == ["Dirichlet claims not checked: no Dirichlet method in methods"]
    no_absolute = crafted_claims({"pg_mean": reaching_at(1), "dirichlet_sparse_mean": reaching_at(4)})
    assert len(no_absolute["claims"]) == 2
    assert no_absolute["notes"] == ["pg_absolute claims not checked: no pg_absolute method in methods"]


def test_a_method_gives_the_same_curve_whichever_other_methods_run():
    """Each method's random stream comes from its name (``method_stream``), not its position in
    ``methods``: a subset run reproduces the full run's curve of that method (before, the
    Dirichlet sampling policy got another stream when run alone)."""
    from corrpriors.experiments import psrl_grid

    both = psrl_grid.Config(n_transitions=100, n_samples=2,
                            methods=("dirichlet_uniform_sampling", "dirichlet_sparse_sampling"))
    alone = dataclasses.replace(both, methods=("dirichlet_sparse_sampling",))
    full = psrl_grid.run_seed(both, rng=np.random.default_rng(3))
    subset = psrl_grid.run_seed(alone, rng=np.random.default_rng(3))
    curve = full.curves["normalized_return"]["dirichlet_sparse_sampling"]
    np.testing.assert_array_equal(subset.curves["normalized_return"]["dirichlet_sparse_sampling"], curve)
    assert not np.array_equal(full.curves["normalized_return"]["dirichlet_uniform_sampling"], curve)


# ----------------------------------------------------------------------------- the claims' levels (round 20)
def queueing_results(curves: dict) -> dict:
    """Seed results of the queueing experiment with the given episode curves (x = 0..4)."""
    from corrpriors.runner.protocol import SeedResult

    extras = {name: {m: np.array([0.0]) for m in curves} for name in ("seconds", "cpu_seconds", "n_fits")}
    seed_extras = {"cpu_seconds": np.array([0.0]), "optimal_return": np.array([-75.82982986606655])}
    return {seed: SeedResult(curves={"expected_return": {m: np.asarray(v, dtype=float) for m, v in curves.items()}},
                             method_extras=extras, extras=seed_extras) for seed in (0, 1)}


def test_queueing_levels_start_from_the_random_policy_whichever_methods_run():
    """The gap the queueing claims close starts at the uniformly random policy's return on the true
    network, not at the worst episode-0 return among the methods that ran (which moved the levels
    and the verdicts with ``--set methods=...``: -78.47 / -78.20 / -78.04 for 8 / 4 / 2 methods)."""
    mdp = psrl_queueing._environment()
    P, R, gamma = np.asarray(mdp.transitions), np.asarray(mdp.reward_matrix), mdp.discount
    S = P.shape[0]
    # independent: the random policy's value by one linear solve, then its mean over start states
    P_pi, r_pi = P.mean(axis=1), R.mean(axis=1)
    uniform = float(np.linalg.solve(np.eye(S) - gamma * P_pi, r_pi).mean())
    optimal = -75.82982986606655
    config = dataclasses.replace(psrl_queueing.quick_config(), n_episodes=4)
    pg = [-97.0, -80.0, -77.0, -76.5, -76.0]
    sparse = [-94.0, -90.0, -86.0, -85.0, -84.0]
    worse = [-110.0, -100.0, -99.0, -98.0, -97.0]      # a bad prior policy that must not move the level
    runs = {
        "two": {"pg_sampling": pg, "dirichlet_sparse_sampling": sparse},
        "three": {"pg_sampling": pg, "dirichlet_sparse_sampling": sparse, "dirichlet_uniform_sampling": worse},
    }
    extras = {}
    for name, curves in runs.items():
        cfg = dataclasses.replace(config, methods=tuple(curves))
        extras[name] = psrl_queueing.summarise_extra(cfg, queueing_results(curves), {})
    for ex in extras.values():
        assert ex["uniform_return"] == pytest.approx(uniform, rel=1e-9)
        assert ex["efficiency_90pct"]["level"] == pytest.approx(uniform + 0.9 * (optimal - uniform), rel=1e-9)
        assert ex["efficiency_50pct"]["level"] == pytest.approx(uniform + 0.5 * (optimal - uniform), rel=1e-9)
        assert ex["efficiency_90pct"]["low"] == pytest.approx(uniform, rel=1e-9)
        assert "from the uniform random policy's return -96.2 to the optimum -75.8" in ex["claims"][0].detail
        assert "of the random-to-optimal gap" in ex["claims"][0].claim
    assert [c.holds for c in extras["two"]["claims"]] == [c.holds for c in extras["three"]["claims"]]
    assert [c.detail for c in extras["two"]["claims"]] == [c.detail for c in extras["three"]["claims"]]


def test_grid_claims_say_fraction_of_the_optimal_return():
    """psrl-grid's ``normalized_return`` is J / J*: its claims are "90% of the optimal return" (they
    said "of the way to the optimum", which is the (J - J_uniform) / (J* - J_uniform) reading)."""
    from corrpriors.runner.protocol import SeedResult

    curves = {"pg_mean": reaching_at(2), "dirichlet_sparse_mean": [0.1] * len(X)}
    config = dataclasses.replace(psrl_grid.quick_config(), n_transitions=400, methods=tuple(curves))
    assert psrl_grid.x_values(config) == X
    seed = crafted(curves)[0]
    seed = SeedResult(curves={"normalized_return": seed.curves["r"]}, method_extras=seed.method_extras,
                      extras={"cpu_seconds": np.array([0.0]), "optimal_return": np.array([2.0]),
                              "lengthscale": np.array([1.0])})
    claims = psrl_grid.summarise_extra(config, {0: seed}, {})["claims"]
    assert [c.claim.split(" in at most")[0] for c in claims] == [
        "pg: 90% of the optimal return", "pg: 50% of the optimal return"]
    assert all("of the way" not in c.claim + c.detail for c in claims)
    assert claims[0].detail.startswith("tunnel world, level 0.900: ")
