"""The transfer experiment and its task family: config checks, a tiny end-to-end seed, the
claims' logic, and the windy worlds' dynamics against a direct transcription."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from corrpriors.envs import lake_task_family, smooth_wind, windy_gridworld, windy_task_family
from corrpriors.envs import task_family as TF
from corrpriors.experiments import transfer as T
from corrpriors.mdp import check_mdp, mean_hellinger
from corrpriors.runner import SeedResult, get_experiment
from memory_checks import traced_peak


def _tiny():
    return dataclasses.replace(T.quick_config(), shape=(4, 4), n_sources=2, source_transitions=200,
                               budgets=(10, 40), psrl_tasks=2, psrl_transitions=50, psrl_eval=50,
                               replan_every=25, max_iter=60)


def test_windy_world_matches_a_direct_transcription():
    rng = np.random.default_rng(0)
    shape = (4, 5)
    wind = smooth_wind(shape, rng=rng)
    mdp = windy_gridworld(shape, wind, heading=0.4, drive=1.5, damping=0.7, goal=False)
    check_mdp(mdp)
    cells = [(i, j) for i in range(4) for j in range(5)]
    moves = [(-1, 0), (0, 1), (1, 0), (0, -1)]
    c, s = np.cos(0.4), np.sin(0.4)
    for state in (0, 7, 19):
        for a in range(4):
            v = np.array([c * moves[a][0] - s * moves[a][1], s * moves[a][0] + c * moves[a][1]])
            expected = np.zeros(20)
            weights = {}
            for dr in (-1, 0, 1):
                for dc in (-1, 0, 1):
                    weights[(dr, dc)] = np.exp(1.5 * (dr * (v[0] + wind[state, 0]) + dc * (v[1] + wind[state, 1]))
                                               - 0.7 * (dr * dr + dc * dc))
            z = sum(weights.values())
            r, col = cells[state]
            for (dr, dc), w in weights.items():
                nr, nc = r + dr, col + dc
                target = nr * 5 + nc if 0 <= nr < 4 and 0 <= nc < 5 else state
                expected[target] += w / z
            np.testing.assert_allclose(mdp.transitions[state, a], expected, atol=1e-12)


def test_tunnel_goal_and_family_relatedness():
    mdp = windy_gridworld((4, 4))
    assert mdp.transitions[15, :, 0].tolist() == [1.0] * 4 and mdp.reward_matrix[15, 0] == 1.0
    same, params = windy_task_family(1.0, 2, rng=1, shape=(5, 5))
    for m in same[:-1]:
        np.testing.assert_allclose(m.transitions, same[-1].transitions)
    assert params[-1].heading == 0.0 and params[-1].drive == 2.0
    far, _ = windy_task_family(0.0, 2, rng=1, shape=(5, 5))
    near, _ = windy_task_family(0.8, 2, rng=1, shape=(5, 5))
    gap = lambda ms: np.mean([mean_hellinger(ms[-1].transitions, m.transitions) for m in ms[:-1]])  # noqa: E731
    assert gap(near) < gap(far)
    a, _ = windy_task_family(0.5, 2, rng=7, shape=(4, 4))
    b, _ = windy_task_family(0.5, 2, rng=7, shape=(4, 4))
    np.testing.assert_array_equal(a[0].transitions, b[0].transitions)
    with pytest.raises(ValueError, match="relatedness"):
        windy_task_family(1.5, 2, rng=0)
    with pytest.raises(ValueError, match="wind"):
        windy_gridworld((3, 3), wind=np.zeros((4, 2)))
    with pytest.raises(ValueError, match="drive"):
        windy_gridworld((3, 3), drive=0.0)


@pytest.mark.parametrize("family", [windy_task_family, lake_task_family])
def test_task_families_check_their_arguments_before_drawing(family):
    """relatedness '0.5' and True were accepted ('abc' and None failed in float(), naming
    nothing), shape (2.7, 3.9) was cut to (2, 3), shape (1, 1) failed as "goal, start" in the
    windy family, and n_sources had no bound (10**9 ran without end)."""
    for bad in ("0.5", True, np.bool_(False), "abc", None):
        with pytest.raises(TypeError, match=r"relatedness: expected a real number in \[0, 1\]"):
            family(bad, 1, rng=0, shape=(3, 3))
    for bad in ((2.7, 3.9), (3, 3.5), ("3", "3"), (0, 3), (3,)):
        with pytest.raises(ValueError, match=r"shape: expected \(n_rows, n_cols\), two positive integers"):
            family(0.5, 1, rng=0, shape=bad)
    with pytest.raises(ValueError, match="shape: expected at least two cells"):
        family(0.5, 1, rng=0, shape=(1, 1))
    for bad in (TF.MAX_SOURCES + 1, 10 ** 9):
        with pytest.raises(ValueError, match=rf"n_sources: expected an integer in \[0, {TF.MAX_SOURCES}\]"):
            family(0.5, bad, rng=0, shape=(3, 3))
    mdps, _ = family(np.float64(0.5), 1, rng=0, shape=(np.int64(3), 3))   # numpy numbers are numbers
    assert len(mdps) == 2 and mdps[0].shape == (3, 3)
    same, _ = family(1, 1, rng=0, shape=(3, 3))
    again, _ = family(1.0, 1, rng=0, shape=(3, 3))
    np.testing.assert_array_equal(same[0].transitions, again[0].transitions)


def test_config_checks_name_the_field():
    base = T.quick_config()
    for field, value, match in (("relatedness", 1.5, "relatedness"), ("budgets", (10, 5), "budgets"),
                                ("prior_related", 1.0, "prior_related"), ("psrl_eval", 30, "psrl_eval"),
                                ("psrl_variant", "greedy", "psrl_variant"), ("shape", (2, 8), "shape"),
                                ("cv_scale", "fold", "cv_scale"),
                                ("source_impute_rounds", 0, "source_impute_rounds")):
        with pytest.raises(ValueError, match=match):
            T.check_config(dataclasses.replace(base, **{field: value}))
    assert get_experiment("transfer") is T


def test_the_search_settings_reach_the_transfer_model():
    """cv_scale, source_impute_rounds and full_scale are settings (part of the results' identity:
    rounds 7 and 12 changed their defaults, so a folder of the old rule is not resumed by the new
    one)."""
    mdps, _ = windy_task_family(0.8, 1, rng=0, shape=(4, 4))
    for criterion, cv_scale, rounds, full in (("cv", "climb", 3, "climb"), ("loo", "conditional", 1, "conditional")):
        config = dataclasses.replace(T.quick_config(), similarity_criterion=criterion, cv_scale=cv_scale,
                                     source_impute_rounds=rounds, full_scale=full)
        T.check_config(config)
        model = T._transfer_model(config, mdps)
        assert model.cv_scale == model.task(0)._search.cv_scale == cv_scale
        assert model.full_scale == model.task(0)._search.full_scale == full
        assert all(p.impute_rounds == rounds for p in model.pooled_)
    with pytest.raises(ValueError, match="full_scale"):
        T.check_config(dataclasses.replace(T.quick_config(), full_scale="free"))
    for settings in (dict(cv_scale="climb"), dict(cv_folds=3), dict(cv_folds=3, cv_scale="climb")):
        with pytest.raises(ValueError, match=r"^cv_(folds|scale).*: only used with similarity_criterion=cv"):
            T.check_config(dataclasses.replace(T.quick_config(), **settings))


def test_similarity_setting_fixes_pg_transfers_similarity():
    """similarity=<a lattice value> is pg_transfer's fixed_similarity (reported at every budget);
    "learned" leaves the search; a value off the lattice or a word names the field."""
    mdps, _ = windy_task_family(0.8, 1, rng=0, shape=(4, 4))
    assert T._transfer_model(T.quick_config(), mdps).fixed_similarity is None
    config = dataclasses.replace(_tiny(), n_sources=1, budgets=(10, 40), psrl_tasks=0, similarity="0.875")
    T.check_config(config)
    assert T._transfer_model(config, mdps).fixed_similarity == 0.875
    res = T.run_seed(config, rng=np.random.default_rng(1))
    np.testing.assert_array_equal(res.method_extras["similarity"]["pg_transfer"], [0.875, 0.875])
    for bad in ("0.3", "fixed", "1.0"):
        with pytest.raises(ValueError, match="similarity"):
            T.check_config(dataclasses.replace(T.quick_config(), similarity=bad))


def test_a_fixed_similarity_is_recorded_as_its_lattice_value(tmp_path):
    """--set similarity=-0.0 was recorded (and hashed) as typed: the label said "ρ fixed at -0"
    and the run had a folder of its own, apart from similarity=0; full-width digits were accepted
    and stored as typed. Now every spelling of a lattice value is its text; other forms are refused."""
    from corrpriors import _methods
    from corrpriors.runner._run import plan_run

    folders = {plan_run("transfer", overrides={"similarity": typed}, out=tmp_path).run_dir
               for typed in ("0", "-0.0", "0.0", "+0", "0e3")}
    assert len(folders) == 1
    for typed, text in [("-0.0", "0"), ("0.50", "0.5"), ("5e-1", "0.5"), (0.875, "0.875"), ("learned", "learned")]:
        assert T.Config(similarity=typed).similarity == text
        assert dataclasses.replace(T.quick_config(), similarity=typed).similarity == text
    for form in (T.Config(similarity="-0.0"), {"similarity": "-0.0"}):     # a run's, an edited record's
        assert _methods.label("pg_transfer", form) == "PG transfer (ρ fixed at 0)"
    for typed in ("\uff10.\uff15", " 0.5", "0.5\n"):        # float() reads them; --set does not
        with pytest.raises(ValueError, match="^similarity: expected 'learned' or a value .* ASCII digits"):
            T.check_config(dataclasses.replace(T.quick_config(), similarity=typed))


@pytest.mark.parametrize("setting", [{"similarity_rule": "average"}, {"similarity_rule": "best"},
                                     {"similarity_criterion": "cv"}, {"prior_related": 0.25}])
def test_a_fixed_similarity_refuses_the_search_settings_it_leaves_unused(setting):
    """similarity=<ρ> skips the search: a rule, criterion or prior other than the default would be
    unused yet recorded (its own folder, the report naming it), so it is refused up front (it was
    accepted); at their defaults, or with similarity=learned, they pass."""
    (name, value), = setting.items()
    fixed = dataclasses.replace(T.quick_config(), similarity="0.5", **setting)
    with pytest.raises(ValueError, match=f"^similarity, {name}: a fixed similarity is not chosen.*unused"):
        T.check_config(fixed)
    T.check_config(dataclasses.replace(T.quick_config(), similarity="0.5"))
    T.check_config(dataclasses.replace(fixed, similarity="learned"))


def test_layer_setting_reaches_every_pg_method():
    """layer=true gives pg_transfer, pg and pg_pooled for_mdp's per-pair layer (the transfer
    beliefs theirs, the sources none); off, none has one. A bad value names the field."""
    mdps, _ = windy_task_family(0.8, 1, rng=0, shape=(4, 4))
    for layer in (True, False):
        config = dataclasses.replace(T.quick_config(), layer=layer)
        model = T._transfer_model(config, mdps)
        assert (model.task(1)._own_layer is not None) is layer
        assert all((b._layer is not None) is layer for b in model.independent_)
        assert all(p._layer is None for p in model.pooled_)
        assert (T._single_model(config, mdps[0])._layer is not None) is layer
    with pytest.raises(ValueError, match="layer"):
        T.check_config(dataclasses.replace(T.quick_config(), layer="yes"))
    with pytest.raises(ValueError, match="similarity_rule, layer"):
        T.check_config(dataclasses.replace(T.quick_config(), layer=True, similarity_rule="average"))
    config = dataclasses.replace(_tiny(), n_sources=1, budgets=(10,), psrl_tasks=0, layer=True)
    res = T.run_seed(config, rng=np.random.default_rng(1))
    assert all(np.isfinite(c).all() for c in res.curves["hellinger"].values())


def test_psrl_methods_share_each_tasks_stream():
    """Common random numbers: on the first task of the sequence nothing can be borrowed, so
    pg_transfer, pg_pooled and pg hold the same belief and -- meeting the task with the same
    random stream -- get the same returns, to the bit. (With a stream per method, as before,
    identical models differed by stream noise: 0.70 against 0.60 over 20 seeds.) A sequence of
    one task has nothing to transfer and is refused."""
    config = dataclasses.replace(_tiny(), psrl_tasks=2)
    mdps = T._family(config, 1, np.random.default_rng(5))
    out = T._psrl_sequence(config, mdps, np.random.default_rng(7))
    first = out["pg"][0]
    assert out["pg"].shape == (2, 3) and np.ptp(out["pg"][0]) > 0      # the returns do move
    np.testing.assert_array_equal(out["pg_transfer"][0], first)
    np.testing.assert_array_equal(out["pg_pooled"][0], first)
    assert not np.array_equal(out["dirichlet_sparse"][0], first)       # another belief differs
    with pytest.raises(ValueError, match="psrl_tasks: expected 0 .* or at least 2"):
        T.check_config(dataclasses.replace(_tiny(), psrl_tasks=1))


def test_uniform_transitions_in_chunks_match_one_block(monkeypatch):
    """The next states are drawn a chunk of rows at a time (a budget of 10^7 transitions of a
    400-state task built a 30 GiB (n, S) array before): the draws are those of one block, the
    naive transcription below, whatever the chunk."""
    from corrpriors._random import inverse_cdf

    mdp = windy_task_family(0.5, 1, rng=0, shape=(4, 5))[0][0]
    P = np.asarray(mdp.transitions)

    def naive(n, seed):
        g = np.random.default_rng(seed)
        s, a = g.integers(P.shape[0], size=n), g.integers(P.shape[1], size=n)
        return s, a, inverse_cdf(np.cumsum(P[s, a], axis=1), g.random(n))

    want = naive(1001, 3)
    for chunk in (1, 7, 20 * 50, 2**20):
        monkeypatch.setattr(T, "_CHUNK_ENTRIES", chunk)
        got = T.uniform_transitions(mdp, 1001, rng=np.random.default_rng(3))
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


def test_uniform_transitions_memory_does_not_grow_with_n_times_s():
    mdp = windy_task_family(0.5, 1, rng=0, shape=(20, 20))[0][0]
    n = 100_000                      # one block: n x S x 8 bytes = 320 MB
    (s, a, s2), peak = traced_peak(T.uniform_transitions, mdp, n, rng=np.random.default_rng(0))
    assert s2.shape == (n,) and peak < 40e6, peak


def test_the_scale_lattice_reaches_the_transfer_search():
    """scale_step (the experiment's setting; --quick's 0.5) is every PG fit's lattice, the
    transfer beliefs' own search included (it kept 0.25 before)."""
    mdps, _ = windy_task_family(0.8, 1, rng=0, shape=(4, 4))
    for step in (0.5, 0.25, 1.0):
        model = T._transfer_model(dataclasses.replace(T.quick_config(), scale_step=step), mdps)
        assert model.scale_step == model.task(1)._search.step == step
        assert all(search.step == step for b in model.independent_ for searches in b._searches
                   for _, search in searches)


def test_a_seed_too_large_for_the_memory_is_refused_up_front(monkeypatch):
    """A 40 x 40 family needs about 19 GiB per seed (panel 1 measured 6.9 GiB with --quick's lattice):
    refused before any work, naming shape, when the process may use less."""
    from corrpriors._memory import MemoryEstimateError

    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "4G")
    with pytest.raises(MemoryEstimateError, match=r"^shape: a seed of transfer on 40x40 grids .* 18\.9 GiB"):
        T.check_config(dataclasses.replace(T.Config(), shape=(40, 40)))
    T.check_config(T.Config())                       # 10 x 10: about 310 MiB
    import corrpriors._memory

    monkeypatch.setattr(corrpriors._memory, "memory_budget", lambda: (64 * 2**30, "a 64 GiB machine"))
    T.check_config(dataclasses.replace(T.Config(), shape=(40, 40)))   # whatever this machine has


def test_seed_memory_bounds_the_traced_peak():
    """seed_memory is an upper bound of what a seed allocates, and not a loose one (numpy's
    allocations are traced; measured on an 18 x 18 family with --quick's lattice: 432 MiB
    against the estimate's 530)."""
    config = dataclasses.replace(T.quick_config(), shape=(18, 18), psrl_tasks=0)
    _, peak = traced_peak(T.run_seed, config, rng=np.random.default_rng(0))
    assert 0.6 * T.seed_memory(config) < peak < T.seed_memory(config), (peak, T.seed_memory(config))


def test_smallest_seed_runs():
    config = dataclasses.replace(_tiny(), n_sources=1, budgets=(10,), psrl_tasks=0)
    res = T.run_seed(config, rng=np.random.default_rng(1))
    assert set(res.curves["hellinger"]) == set(T.METHODS)
    assert not any(k.startswith("psrl") for k in res.extras)


@pytest.mark.slow
def test_tiny_seed_end_to_end():
    config = _tiny()
    res = T.run_seed(config, rng=np.random.default_rng(0))
    assert isinstance(res, SeedResult)
    assert set(res.curves["hellinger"]) == set(T.METHODS)
    for curve in res.curves["hellinger"].values():
        assert curve.shape == (2,) and np.all((curve >= 0) & (curve <= 1))
    sim = res.method_extras["similarity"]["pg_transfer"]
    assert sim.shape == (2,) and np.all((sim >= 0) & (sim < 1))
    assert res.extras["psrl_pg"].shape == (2, 3)
    assert res.extras["psrl_similarity"].shape == (2,)
    again = T.run_seed(config, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(again.curves["hellinger"]["pg_transfer"], res.curves["hellinger"]["pg_transfer"])


def _fake_results(config, curves, sims):
    n = len(config.budgets)
    return {s: SeedResult(curves={"hellinger": {m: np.asarray(c[s], float) for m, c in curves.items()}},
                          method_extras={"similarity": {"pg_transfer": np.full(n, sims[s])},
                                         "cpu_seconds": {m: np.ones(n) for m in T.METHODS}})
            for s in range(len(sims))}


def _metrics(results):
    methods = {}
    for m in T.METHODS:
        arr = np.stack([r.curves["hellinger"][m] for r in results.values()])
        methods[m] = {"mean": arr.mean(0).tolist(), "std": arr.std(0).tolist()}
    return {"hellinger": {"methods": methods}}


def test_claims_follow_the_numbers():
    related = dataclasses.replace(T.quick_config(), budgets=(10, 100), psrl_tasks=0, relatedness=0.8)
    good = {"pg_transfer": [[0.2, 0.15]] * 2, "pg": [[0.3, 0.15]] * 2, "pg_pooled": [[0.25, 0.2]] * 2,
            "dirichlet_sparse": [[0.9, 0.5]] * 2}
    res = _fake_results(related, good, [0.9, 0.9])
    extra = T.summarise_extra(related, res, _metrics(res))
    assert [c.holds for c in extra["claims"]] == [True, True, True]
    np.testing.assert_allclose(extra["paired"]["ratio_to_pg_max"], [0.2 / 0.3, 1.0])
    bad = dict(good, pg_transfer=[[0.35, 0.2]] * 2)
    res = _fake_results(related, bad, [0.9, 0.9])
    assert [c.holds for c in T.summarise_extra(related, res, _metrics(res))["claims"]] == [False, False, False]
    unrelated = dataclasses.replace(related, relatedness=0.0)
    res = _fake_results(unrelated, dict(good, pg_transfer=[[0.31, 0.15]] * 2), [0.0, 0.5])
    claims = T.summarise_extra(unrelated, res, _metrics(res))["claims"]
    assert [c.holds for c in claims] == [True, True]
    res = _fake_results(unrelated, dict(good, pg_transfer=[[0.33, 0.15]] * 2), [0.5, 0.5])
    assert [c.holds for c in T.summarise_extra(unrelated, res, _metrics(res))["claims"]] == [False, False]


@pytest.mark.parametrize("criterion, name", [("loo", "leave-one-out"), ("cv", "two-fold cross-validated"),
                                             ("evidence", "by the collapsed bound")])
def test_similarity_panel_names_the_criterion_used(criterion, name, monkeypatch):
    """The similarity panel's title says how the similarity was chosen (it said
    "cross-validated" whatever the criterion), and the experiment passes its own."""
    import matplotlib.pyplot as plt

    from corrpriors.plotting import _curves, _transfer

    summary = {"median": [0.5, 0.2], "min": [0.0, 0.0], "max": [0.9, 0.5]}
    fig = _transfer.transfer_figure([10, 100], summary, None, labels={}, x_label="T",
                                    environment="e", criterion=criterion)
    assert fig.axes[0].get_title() == f"task similarity learned from the data ({name})"
    plt.close("all")
    with pytest.raises(ValueError, match="criterion"):
        _transfer.transfer_figure([10, 100], summary, None, labels={}, x_label="T", environment="e",
                                  criterion="aic")
    seen = {}
    monkeypatch.setattr(_curves, "curves_figure", lambda *a, **k: None)
    monkeypatch.setattr(_transfer, "transfer_figure", lambda *a, **k: seen.update(k))
    config = dataclasses.replace(T.quick_config(), similarity_criterion=criterion)
    T.figures(config, {}, {"extra": {"similarity": summary}})
    assert seen["criterion"] == criterion


@pytest.mark.parametrize("how", ["learned", "fixed", "averaged"])
def test_the_similarity_is_called_what_it_is(how, monkeypatch):
    """With similarity=<ρ> the similarity is not learned, with similarity_rule=average it is the
    mixture's mean: the similarity panel, its caption, the notes and the claims say so (they
    said "learned" whatever the setting, and claimed a fixed similarity as a finding)."""
    import matplotlib.pyplot as plt

    from corrpriors.plotting import _curves

    setting = {"learned": {}, "fixed": {"similarity": "0.875"}, "averaged": {"similarity_rule": "average"}}[how]
    config = dataclasses.replace(T.quick_config(), budgets=(10, 100), psrl_tasks=0, relatedness=0.0, **setting)
    curves = {"pg_transfer": [[0.3, 0.15]] * 2, "pg": [[0.3, 0.15]] * 2, "pg_pooled": [[0.5, 0.3]] * 2,
              "dirichlet_sparse": [[0.9, 0.5]] * 2}
    res = _fake_results(config, curves, [0.875, 0.875] if how == "fixed" else [0.0, 0.1])
    extra = T.summarise_extra(config, res, _metrics(res))
    claims = [c.claim for c in extra["claims"]]
    first = extra["notes"][0]
    if how == "fixed":
        assert first == "similarity of pg_transfer, fixed at 0.875 (not learned)"
        assert not any("similarity" in c for c in claims)                     # the setting is no finding
    elif how == "averaged":
        assert first.startswith("mean similarity of pg_transfer's mixture over the similarities")
        assert any("the mean similarity of pg_transfer's mixture is about zero" in c for c in claims)
    else:
        assert first.startswith("learned similarity of pg_transfer (median over seeds) along T: ")
        assert any("the learned similarity is about zero" in c for c in claims)
    monkeypatch.setattr(_curves, "curves_figure", lambda *a, **k: None)
    summary = {"extra": {"similarity": extra["similarity"]}}
    spec = T.figures(config, res, summary)[1]
    title, ylabel = spec.figure.axes[0].get_title(), spec.figure.axes[0].get_ylabel()
    plt.close("all")
    # psrl_tasks=0: one panel, and the caption describes no right one (it said "right: PSRL ...")
    assert len(spec.figure.axes) == 1 and "right:" not in spec.caption and "PSRL" not in spec.caption
    if how == "fixed":
        assert title == "task similarity fixed at ρ = 0.875 (not learned)"
        assert "learned" not in ylabel and "learned similarity" not in spec.caption
        assert "fixed at 0.875 (not learned)" in spec.caption
    elif how == "averaged":
        # the method as the legends name it (the y label said pg_transfer, the code's name)
        assert title.startswith("mixture over task similarities") and ylabel == "mean ρ of the mixture of PG transfer"
    else:
        assert title == "task similarity learned from the data (leave-one-out)"
        assert spec.caption.startswith("left: pg_transfer's learned similarity against")


@pytest.mark.parametrize("variant, samples, words", [
    ("mean", 5, "variant mean: greedy on the optimal Q of the posterior-mean model"),
    ("sampling", 5, "variant sampling: greedy on the average optimal Q of 5 posterior draws"),
    ("sampling", 1, "variant sampling: greedy on the average optimal Q of 1 posterior draw")])
def test_the_psrl_panel_names_its_variant(variant, samples, words, monkeypatch):
    """The PSRL sequence's curves are one variant of PSRL (psrl_variant, psrl_samples): the
    panel's title, the figure's caption, the terminal note and metrics.json's psrl_sequence block
    say which (they named the methods only)."""
    import matplotlib.pyplot as plt

    from corrpriors.plotting import _curves

    config = dataclasses.replace(T.quick_config(), budgets=(10, 100), psrl_variant=variant, psrl_samples=samples)
    curves = {m: [[0.3, 0.15]] * 2 for m in T.METHODS}
    res = _fake_results(config, curves, [0.5, 0.5])
    evals = config.psrl_transitions // config.replan_every + 1
    for r in res.values():
        r.extras.update({f"psrl_{m}": np.full((config.psrl_tasks, evals), 0.5) for m in T.METHODS})
    extra = T.summarise_extra(config, res, _metrics(res))
    block = extra["psrl_sequence"]
    assert (block["variant"], block["replan_every"]) == (variant, 50)
    assert f"{block['variant']}: {block['policy']}" == words[len("variant "):]
    note = next(n for n in extra["notes"] if n.startswith("PSRL sequence"))
    assert note.startswith(f"PSRL sequence ({words}, replanned every 50 transitions), return after 50")
    monkeypatch.setattr(_curves, "curves_figure", lambda *a, **k: None)
    spec = T.figures(config, res, {"extra": extra})[1]
    title = " ".join(spec.figure.axes[1].get_title().split())
    plt.close("all")
    assert title == f"PSRL over a sequence of tasks (mean ± std over seeds) {words}, replanned every 50 transitions"
    assert f"; right: PSRL over a sequence of tasks ({words}), normalised return" in spec.caption


def test_claims_left_unchecked_are_noted():
    """Claims that need a method missing from the results are said in ``unchecked``, not silently skipped."""
    x = np.array([10.0, 100.0])
    curve = np.array([0.3, 0.1])
    unchecked: list[str] = []
    assert T._claims(T.Config(), x, {"pg": curve}, {}, np.zeros(2), unchecked) == []
    assert unchecked == ["claims not checked: no pg_transfer method in the results"]
    unchecked = []
    config = dataclasses.replace(T.Config(), relatedness=0.5)
    claims = T._claims(config, x, {"pg": curve, "pg_transfer": curve}, {"below_pg": np.ones(2)},
                       np.zeros(2), unchecked)
    assert len(claims) == 2
    assert unchecked == ["pg_pooled claim not checked: no pg_pooled method in the results"]


def test_psrl_panel_std_is_the_records_std():
    """The PSRL panel's "± std over seeds" is the sample std (ddof=1) like every other std in metrics.json."""
    config = T.Config()
    k = config.psrl_eval // config.replan_every
    values = [1.0, 2.0, 4.0]                       # the return after psrl_eval of task 0, per seed

    def seed(v):
        arr = np.zeros((config.psrl_tasks, k + 2))
        arr[0, k] = v
        return SeedResult(curves={"hellinger": {"pg": np.zeros(1)}}, extras={"psrl_pg": arr})

    block = T._psrl_summary(config, {i: seed(v) for i, v in enumerate(values)})
    std = block["methods"]["pg"]["return_after_eval_std"]
    assert std[0] == pytest.approx(np.std(values, ddof=1)) and std[1] == 0.0
    single = T._psrl_summary(config, {0: seed(3.0)})
    assert single["methods"]["pg"]["return_after_eval_std"] == [0.0] * config.psrl_tasks
