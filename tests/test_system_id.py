"""The system-identification experiment (paper Fig. 3a) through the runner."""

from __future__ import annotations

import json

import numpy as np
import pytest

from corrpriors.experiments import system_id
from corrpriors.runner._run import run_experiment
from figure_checks import check_experiment_figures

# run_seed called directly: the expected tiny-jitter warnings of smooth kernels (the runner counts them)
pytestmark = pytest.mark.filterwarnings("ignore::corrpriors.exceptions.JitterWarning")


def tiny_config():
    return system_id.Config(transitions=(0, 50, 400), lengthscales=(0.0,), scale_step=1.0, max_iter=10)


def test_random_walk_starts_in_the_corner_and_follows_the_model():
    from corrpriors.envs import tunnel_world

    mdp = tunnel_world()
    s, a, s2 = system_id.random_walk(mdp, 3000, np.random.default_rng(0))
    assert s[0] == 0 and np.all(s[1:] == s2[:-1])
    assert np.all(mdp.transitions[s, a, s2] > 0)
    # uniformly random actions
    freq = np.bincount(a, minlength=4) / a.size
    assert np.max(np.abs(freq - 0.25)) < 4 * np.sqrt(0.25 * 0.75 / a.size)


def test_cumulative_counts_are_prefix_counts():
    rng = np.random.default_rng(1)
    s, a, s2 = rng.integers(0, 5, 40), rng.integers(0, 2, 40), rng.integers(0, 5, 40)
    counts = system_id._cumulative_counts(5, 2, s, a, s2, [0, 7, 40])
    for T, X in zip([0, 7, 40], counts):
        ref = np.zeros((5, 2, 5), dtype=int)
        np.add.at(ref, (s[:T], a[:T], s2[:T]), 1)
        np.testing.assert_array_equal(X, ref)


def test_scale_search_climbs_to_the_lattice_maximum_of_the_collapsed_bound():
    from corrpriors.applications import CorrelatedTransitionModel
    from corrpriors.envs import tunnel_world

    mdp = tunnel_world()
    config = system_id.Config(transitions=(400,), lengthscales=(2.0,), scale_step=0.5, scale_range=(0.01, 300.0))
    s, a, s2 = system_id.random_walk(mdp, 400, np.random.default_rng(3))
    X = system_id._cumulative_counts(mdp.n_states, mdp.n_actions, s, a, s2, [400])[0]
    belief = system_id._selecting_model(config, mdp, "pg_absolute", [2.0])
    search = belief._searches[0][0][1]
    assert (search.j_min, search.j_max) == (-4, 4)  # 0.01 .. 100 in half decades (300 is off-lattice)
    est = belief.set_counts(X).mean()
    # brute force: every lattice scale for every action, same models at fixed scales
    kernel = system_id._kernels(mdp, [2.0])[0]
    grid = {}
    for j in range(search.j_min, search.j_max + 1):
        m = CorrelatedTransitionModel(
            mdp.n_states, mdp.n_actions, covariance=kernel, learn_scale=False, scale_prior=None,
            scale=10.0 ** (0.5 * j), max_iter=config.max_iter, tol=config.tol,
            **system_id._belief_options(config, mdp, "pg_absolute"))
        m.set_counts(X)
        grid[j] = [fit.collapsed_bound() for fit in m.refit().models_]
    profile = np.array([grid[j] for j in sorted(grid)])  # (J, A)
    best = 10.0 ** (0.5 * (profile.argmax(axis=0) + search.j_min))
    chosen = np.array([sel["scale"] for sel in belief.selected_])
    # the bound profile is unimodal here, so the climb finds the global lattice maximum
    np.testing.assert_allclose(chosen, best, rtol=1e-12)
    bound = sum(sel["value"] for sel in belief.selected_)
    assert bound == pytest.approx(profile.max(axis=0).sum(), rel=1e-6)
    for act in range(mdp.n_actions):
        np.testing.assert_array_equal(est[:, act, :], belief.action_mean(act))
    # it evaluated fewer (action, scale) pairs than the brute force
    assert belief.n_fits_ < profile.size


def test_config_validation():
    with pytest.raises(ValueError, match="selection"):
        system_id.check_config(system_id.Config(selection="evidence"))
    with pytest.raises(ValueError, match="scale_range"):
        system_id.check_config(system_id.Config(scale_range=(0.0, 1.0)))
    with pytest.raises(ValueError, match="scale_step"):
        system_id.check_config(system_id.Config(scale_step=0.0))


def test_elbo_em_selection_still_runs():
    config = system_id.Config(transitions=(0, 200), lengthscales=(2.0,), selection="elbo-em", max_iter=30)
    out = system_id.run_seed(config, rng=np.random.default_rng(0))
    for m in system_id.CORRELATED:
        assert np.all(out.method_extras["bound"][m] >= out.method_extras["elbo"][m] - 1e-8)
        assert out.curves["hellinger"][m].shape == (2,)


def test_crossing_interpolation():
    ts = np.array([0.0, 100.0, 200.0])
    assert system_id._interp_crossing(ts, np.array([1.0, 0.6, 0.2]), 0.4) == pytest.approx(150.0)
    assert system_id._interp_crossing(ts, np.array([1.0, 0.6, 0.5]), 0.4) is None


def test_quick_end_to_end_through_the_runner(tmp_path):
    config = tiny_config()
    report = run_experiment(system_id, config=config, n_seeds=2, jobs=2, out=tmp_path, progress=False, echo=None)
    summary = json.loads((report.out_dir / "metrics.json").read_text())
    assert summary["experiment"] == "system-id"
    # the sentinel length scale 0 is recorded as the one used: the largest distance, 9 sqrt(2) cells
    assert summary["config"]["lengthscales"] == [pytest.approx(9 * np.sqrt(2), rel=1e-15)]
    assert summary["extra"]["chosen_lengthscale"]["pg_absolute"]["mode"][1] == pytest.approx(9 * np.sqrt(2),
                                                                                            rel=1e-6)
    assert summary["x"] == {"name": "transitions", "values": [0.0, 50.0, 400.0]}
    assert summary["seeds"] == [0, 1]
    assert list(summary["metrics"]["hellinger"]["methods"]) == list(system_id.METHODS)
    for stats in summary["metrics"]["hellinger"]["methods"].values():
        assert len(stats["mean"]) == 3 and all(0.0 <= m <= 1.0 for m in stats["mean"])
    hel = summary["metrics"]["hellinger"]["methods"]
    # with no data the uniform Dirichlet is the uniform distribution; more data helps every model
    for m in system_id.METHODS:
        assert hel[m]["mean"][2] < hel[m]["mean"][0]
    assert {"claims", "data_efficiency"} <= set(summary["extra"]) or "claims" in summary["extra"]
    assert {p.suffix for p in report.figures} == {".png", ".pdf"}
    assert all(p.stat().st_size > 0 for p in report.figures)
    assert check_experiment_figures(system_id, report) == ["system-id-hellinger"]


def test_summarise_extra_data_efficiency_and_claims_on_known_curves():
    config = system_id.Config(transitions=(0, 500, 1000, 2000, 4000))
    curves = {
        "pg_absolute": [0.8, 0.7, 0.6, 0.5, 0.4],
        "pg": [0.5, 0.3, 0.2, 0.15, 0.1],
        "dirichlet_uniform": [0.8, 0.75, 0.7, 0.6, 0.5],      # never reaches 0.2
        "dirichlet_sparse": [0.8, 0.6, 0.4, 0.25, 0.15],      # reaches 0.2 half-way from 2000 to 4000
    }
    metrics = {"hellinger": {"better": "lower", "methods": {
        m: {"mean": c, "std": [0.01] * 5} for m, c in curves.items()}}}
    from corrpriors.runner import SeedResult

    seed = SeedResult(curves={"hellinger": {m: np.asarray(c) for m, c in curves.items()}})
    extra = system_id.summarise_extra(config, {0: seed}, metrics)
    eff = extra["data_efficiency"]
    assert eff["level"] == pytest.approx(0.2)
    assert eff["dirichlet_sparse"]["T"] == pytest.approx(3000.0)
    assert eff["dirichlet_sparse"]["ratio"] == pytest.approx(3.0)
    assert eff["dirichlet_uniform"]["T"] is None and "not reached" in eff["dirichlet_uniform"]["note"]
    claims = {c.claim: c.holds for c in extra["claims"]}
    assert claims["pg error clearly below both Dirichlet models at every T > 0"]
    assert claims["pg's advantage is largest for small T"]
    # pg_absolute is not below the sparse Dirichlet at T = 4000 (0.4 vs 0.15)
    assert not claims["pg_absolute error clearly below both Dirichlet models at every T > 0"]
    assert any(n.startswith("pg's error at T=1,000 (0.200): ") for n in extra["notes"])
    # the terminal table shows every T the claims and notes cite: 500 and 4,000 (ends), 1,000 (reference)
    assert extra["table_x"] == [500.0, 1000.0, 4000.0]


@pytest.mark.slow
def test_quick_config_through_the_cli(tmp_path):
    """`corrpriors reproduce system-id --quick` as a user runs it (about a minute on 2 cores)."""
    from corrpriors.cli import main

    assert main(["reproduce", "system-id", "--quick", "--out", str(tmp_path), "--no-progress"]) == 0
    [path] = (tmp_path / "system-id").glob("quick-*/metrics.json")
    summary = json.loads(path.read_text())
    assert summary["seeds"] == list(range(system_id.QUICK_SEEDS))
    assert summary["x"]["values"] == system_id.x_values(system_id.quick_config())
    hel = summary["metrics"]["hellinger"]["methods"]
    assert set(hel) == set(system_id.METHODS)
    assert (path.parent / "system-id-hellinger.png").is_file()
    assert (path.parent / "system-id-hellinger.pdf").is_file()
    # the relative encoding beats both Dirichlet models at every T > 0 (measured margins are > 0.3)
    for i in range(1, len(summary["x"]["values"])):
        best_dirichlet = min(hel["dirichlet_uniform"]["mean"][i], hel["dirichlet_sparse"]["mean"][i])
        assert hel["pg"]["mean"][i] < best_dirichlet


def test_claims_left_unchecked_are_noted():
    """A method the claims need that is not in the results is said in the notes, not silently skipped."""
    from corrpriors.runner.protocol import SeedResult

    config = system_id.Config(transitions=(0, 50, 400))
    curves = {"pg": np.array([0.5, 0.2, 0.1]), "dirichlet_uniform": np.array([0.5, 0.4, 0.3])}
    results = {0: SeedResult(curves={"hellinger": curves})}
    metrics = {"hellinger": {"methods": {m: {"mean": list(v), "std": [0.0] * 3} for m, v in curves.items()}}}
    extra = system_id.summarise_extra(config, results, metrics)
    assert len(extra["claims"]) == 2
    assert "pg_absolute claims not checked: no pg_absolute method in the results" in extra["notes"]
    only_pg = {"pg": curves["pg"]}
    extra = system_id.summarise_extra(config, {0: SeedResult(curves={"hellinger": only_pg})},
                                      {"hellinger": {"methods": {"pg": metrics["hellinger"]["methods"]["pg"]}}})
    assert extra["claims"] == []
    assert "claims not checked: no Dirichlet method in the results" in extra["notes"]


def test_pg_absolute_below_note_says_from_where_it_stays_below():
    """The note named the first T where pg_absolute's mean error was below dirichlet_sparse's, even when
    it rose above again later; it now names the T from which it stays below (and the first, if earlier)."""
    from corrpriors.runner import SeedResult

    config = system_id.Config(transitions=(0, 500, 1000, 2000, 4000))
    sparse = [0.8, 0.6, 0.4, 0.25, 0.15]

    def note(pg_absolute):
        curves = {"pg": [0.5, 0.3, 0.2, 0.15, 0.1], "pg_absolute": pg_absolute, "dirichlet_sparse": sparse}
        metrics = {"hellinger": {"better": "lower", "methods": {
            m: {"mean": c, "std": [0.01] * 5} for m, c in curves.items()}}}
        seed = SeedResult(curves={"hellinger": {m: np.asarray(c) for m, c in curves.items()}})
        notes = system_id.summarise_extra(config, {0: seed}, metrics)["notes"]
        return next(n for n in notes if n.startswith("pg_absolute"))

    # independent reading of the curves: below at 500, above at 1,000, below from 2,000 on
    assert note([0.8, 0.5, 0.45, 0.2, 0.1]) == \
        "pg_absolute is below dirichlet_sparse from T=2,000 on (first below at T=500)"
    assert note([0.8, 0.5, 0.3, 0.2, 0.1]) == "pg_absolute is below dirichlet_sparse from T=500 on"
    assert note([0.8, 0.5, 0.3, 0.2, 0.3]) == \
        "pg_absolute is below dirichlet_sparse at some T (first at T=500) but not at the last, T=4,000"
    assert note([0.8, 0.7, 0.6, 0.5, np.nan]) == "pg_absolute is never below dirichlet_sparse (on this grid)"
    assert note([0.8, 0.5, 0.3, 0.2, np.nan]).endswith("but not at the last, T=4,000")   # NaN: not below
