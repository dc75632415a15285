"""The imitation and subgoal experiments: seeds, summaries, claims, end to end through the runner."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from corrpriors.experiments import imitation, subgoal
from corrpriors.runner._run import run_experiment, seed_generator
from figure_checks import check_experiment_figures

# run_seed called directly: the expected tiny-jitter warnings of smooth kernels (the runner counts them)
pytestmark = pytest.mark.filterwarnings("ignore::corrpriors.exceptions.JitterWarning")

TINY_IMITATION = dataclasses.replace(imitation.quick_config(), n_demonstrations=(10, 50),
                                     max_iter=100, tol=1e-5, mc_samples=50)
TINY_SUBGOAL = dataclasses.replace(subgoal.quick_config(), n_burnin=4, n_samples=6,
                                   max_iter_per_sweep=3, imitation_max_iter=100)


def test_matching_data_size_interpolates_in_log_d():
    xs = [10, 100, 1000]
    curve = [0.5, 0.3, 0.1]
    assert imitation.matching_data_size(xs, 0.6, curve) == 10
    assert imitation.matching_data_size(xs, 0.3, curve) == pytest.approx(100)
    assert imitation.matching_data_size(xs, 0.4, curve) == pytest.approx(math.sqrt(10 * 100))
    assert math.isnan(imitation.matching_data_size(xs, 0.05, curve))


def test_protocol_attributes():
    for mod, methods in ((imitation, ("pg", "dirichlet")),
                         (subgoal, ("pg_subgoal", "pg_imitation", "dirichlet_subgoal"))):
        assert mod.METRICS == {"hellinger": "lower", "value_loss": "lower"}
        assert tuple(mod.METHODS) == methods
        json.dumps(dataclasses.asdict(mod.Config()))
        json.dumps(dataclasses.asdict(mod.quick_config()))
    assert imitation.x_values(imitation.Config()) == [10, 20, 50, 100, 200, 500, 1000]


def test_imitation_seed_shapes_and_reproducible():
    a = imitation.run_seed(TINY_IMITATION, rng=seed_generator("imitation", 0))
    b = imitation.run_seed(TINY_IMITATION, rng=seed_generator("imitation", 0))
    c = imitation.run_seed(TINY_IMITATION, rng=seed_generator("imitation", 1))
    for metric in imitation.METRICS:
        for meth in imitation.METHODS:
            v = a.curves[metric][meth]
            assert v.shape == (2,) and np.all(np.isfinite(v)) and np.all(v >= 0)
            np.testing.assert_array_equal(v, b.curves[metric][meth])
    # the reward cells (hence the expert) come from the seed's generator
    assert not np.array_equal(a.extras["rewards"], c.extras["rewards"])
    assert np.sum(a.extras["rewards"] > 0) == 3
    # Dirichlet error falls with data; PG better than Dirichlet at D = 10 on this seed
    hel = a.curves["hellinger"]
    assert hel["dirichlet"][1] < hel["dirichlet"][0]
    assert hel["pg"][0] < hel["dirichlet"][0]


def test_subgoal_seed_shapes_and_reproducible():
    a = subgoal.run_seed(TINY_SUBGOAL, rng=seed_generator("subgoal", 0))
    b = subgoal.run_seed(TINY_SUBGOAL, rng=seed_generator("subgoal", 0))
    n_pairs = TINY_SUBGOAL.n_trajectories * TINY_SUBGOAL.trajectory_length
    assert a.extras["counts"].sum() == n_pairs
    for metric in subgoal.METRICS:
        for meth in subgoal.METHODS:
            v = a.curves[metric][meth]
            assert v.shape == (1,) and np.isfinite(v[0])
            np.testing.assert_array_equal(v, b.curves[metric][meth])
    for meth in subgoal.METHODS:
        np.testing.assert_allclose(a.method_extras["policy"][meth].sum(1), 1.0)


@pytest.mark.parametrize("name,config", [("imitation", TINY_IMITATION), ("subgoal", TINY_SUBGOAL)])
def test_end_to_end_through_runner(tmp_path, name, config):
    report = run_experiment(name, config=config, n_seeds=2, jobs=1, out=tmp_path,
                            progress=False, echo=None)
    summary = json.loads((report.out_dir / "metrics.json").read_text())
    assert summary["experiment"] == name
    assert summary["seeds"] == [0, 1]
    assert set(summary["metrics"]) == {"hellinger", "value_loss"}
    mod = imitation if name == "imitation" else subgoal
    for block in summary["metrics"].values():
        assert set(block["methods"]) == set(mod.METHODS)
        for stats in block["methods"].values():
            assert len(stats["mean"]) == len(mod.x_values(config))
    claims = summary["extra"]["claims"]
    assert claims and all(isinstance(c["holds"], bool) and c["detail"] for c in claims)
    pngs = [p for p in report.figures if str(p).endswith(".png")]
    assert pngs and all(p.exists() and p.stat().st_size > 1000 for p in pngs)
    names = check_experiment_figures(mod, report)
    # the metric panel (plot_metric_points) shows absolute errors: no caption may call them relative
    captions = {f["files"][0]: f["caption"] for f in summary["run"]["figures"]}
    panel = f"{name}-policies.png" if name == "imitation" else f"{name}-metrics.png"
    assert "absolute" in captions[panel] and "mean ± standard error over seeds" in captions[panel]
    assert not any("relative to the wors" in c for c in captions.values()), captions
    assert sorted(names) == ([f"{name}-curves", f"{name}-policies"] if name == "imitation"
                             else [f"{name}-metrics", f"{name}-policies"])
    if name == "imitation":
        eff = summary["extra"]["data_efficiency"]["hellinger"]
        assert [r["D"] for r in eff] == list(config.n_demonstrations)
        # the recorded length scale is the one the estimator used (sentinel 0 resolved)
        assert summary["config"]["lengthscale"] == pytest.approx(summary["extra"]["pg_lengthscale"], rel=1e-15)
        assert summary["run"]["resolved"]["lengthscale"]["given"] == 0.0


def imitation_claims(pg: list, dirichlet: list) -> dict:
    """imitation's summarise_extra on two identical crafted seeds (D = 10, 50, 200)."""
    from corrpriors.runner.protocol import SeedResult

    config = imitation.Config(n_demonstrations=(10, 50, 200))
    curves = {"pg": np.array(pg, dtype=float), "dirichlet": np.array(dirichlet, dtype=float)}
    seed = SeedResult(curves={"hellinger": curves, "value_loss": curves},
                      method_extras={"scale": {"pg": np.ones(3)}, "lengthscale": {"pg": np.ones(3)}})
    results = {0: seed, 1: seed}
    metrics = {m: {"methods": {k: {"mean": list(v)} for k, v in curves.items()}} for m in imitation.METRICS}
    return imitation.summarise_extra(config, results, metrics)


def test_imitation_nan_error_makes_no_claim_met():
    """A failed pg fit (NaN error) is not 'Dirichlet never catches up': no claim is met on it."""
    extra = imitation_claims([math.nan, 0.5, 0.4], [0.45, 0.35, 0.2])
    assert not any(c.holds for c in extra["claims"])
    magnitude = extra["claims"][-1]
    assert "order of magnitude" in magnitude.claim
    assert "pg's mean hellinger not finite" in magnitude.detail
    assert "never reaches PG's error at D=[10.0]" not in magnitude.detail
    assert extra["data_efficiency"]["hellinger"][0]["note"] == "pg's error is not finite"
    # the same curves without the NaN: the order-of-magnitude claim is met through D=10's lower bound
    extra = imitation_claims([0.01, 0.5, 0.4], [0.45, 0.35, 0.2])
    assert extra["claims"][-1].holds
