"""A setting that changes what a method is shows in its label and description.

``corrpriors reproduce transfer --set layer=true`` gives ``pg``, ``pg_transfer`` and
``pg_pooled`` the per-(state, action) Dirichlet layer; ``--set similarity=<ρ>`` fixes
``pg_transfer``'s similarity instead of learning it; ``--set similarity_rule=average`` mixes
over the similarities instead of choosing one. The names, colours and markers stay (figures of
two runs stay comparable); ``metrics.json``'s labels and descriptions, the figures' legends, the
terminal table and the report must say what the setting changed (they said ``PG``, ``PG
transfer`` ... with the plain model's descriptions, and only the figure's title named the layer).
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from corrpriors import _methods
from corrpriors.experiments import transfer as T
from corrpriors.runner import registry
from figure_checks import keep_drawn_figures

PG_METHODS = ("pg_transfer", "pg", "pg_pooled")
LAYER_NOTE = ("pg_transfer, pg, pg_pooled: with the per-(state, action) Dirichlet layer (set by layer=true; "
              "the default layer=false is the plain correlated model)")


def _legend_entries(fig) -> list[tuple[str, str]]:
    """(text, colour as hex) of every legend entry of ``fig`` (axes and figure legends)."""
    from matplotlib.colors import to_hex

    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    return [(t.get_text(), to_hex(h.get_color())) for leg in legends
            for h, t in zip(leg.legend_handles, leg.get_texts()) if hasattr(h, "get_color")]


# ----------------------------------------------------------------------------- the label function


@pytest.mark.parametrize("config, want", [
    (T.Config(layer=True), {"pg": "PG + per-pair layer", "pg_transfer": "PG transfer + per-pair layer",
                            "pg_pooled": "PG pooled + per-pair layer"}),
    (T.Config(similarity="0.875"), {"pg_transfer": "PG transfer (ρ fixed at 0.875)"}),
    (T.Config(similarity_rule="average"), {"pg_transfer": "PG transfer (ρ averaged)"}),
    (T.Config(layer=True, similarity="0.5"), {"pg": "PG + per-pair layer", "pg_pooled": "PG pooled + per-pair layer",
                                              "pg_transfer": "PG transfer + per-pair layer (ρ fixed at 0.5)"}),
])
def test_the_label_says_what_the_setting_changed(config, want):
    from corrpriors.runner._io import config_to_json

    for form in (config, config_to_json(config)):          # the Config and its metrics.json form
        got = _methods.labels(T.METHODS, form)
        assert got == {**_methods.labels(T.METHODS), **want}
        for name in T.METHODS:
            default, changed = _methods.method(name), _methods.method(name, form)
            # one name, one colour, one line style and marker, whatever the setting
            assert (changed.name, changed.colour, changed.linestyle, changed.marker) == \
                   (default.name, default.colour, default.linestyle, default.marker)
            assert (changed == default) is (name not in want)
    described = _methods.describe(T.METHODS, config)
    if config.layer:
        for name in PG_METHODS:
            assert "per-(state, action) Dirichlet layer" in described[name]["description"]
            assert "(set by layer=true; the default layer=false is the plain correlated model)" in \
                described[name]["description"]
    if config.similarity != "learned":
        text = described["pg_transfer"]["description"]
        assert "learned from the data says" not in text                  # the default's words would be false
        assert f"fixed at ρ = {config.similarity}, not learned" in text and "set by similarity=" in text
    if config.similarity_rule == "average":
        text = described["pg_transfer"]["description"]
        assert "learned from the data says" not in text and "mixture of its fits" in text


@pytest.mark.parametrize("config", [T.Config(), {}, None, {"layer": False}, {"layer": "yes"}, {"layer": 1},
                                    {"similarity": "learned"}, {"similarity_rule": "one_se"},
                                    {"similarity_rule": "best"}, {"similarity": True}, {"similarity": "fixed"},
                                    # hand-edited records: no similarity of the lattice [0, 1) (they
                                    # gave "ρ fixed at 1e999", "ρ fixed at -3")
                                    {"similarity": "1e999"}, {"similarity": -3}, {"similarity": "1"},
                                    {"similarity": float("nan")}, {"similarity": float("inf")}])
def test_the_default_or_a_value_that_is_not_one_keeps_the_table(config):
    for name in T.METHODS:
        assert _methods.method(name, config) == _methods.method(name)


def test_the_rule_is_not_named_where_it_is_unused():
    """With a fixed similarity the rule is unused (MultiTaskTransitionModel): the label names the fixed ρ only."""
    fixed = {"similarity": 0.5, "similarity_rule": "average"}
    assert _methods.label("pg_transfer", fixed) == "PG transfer (ρ fixed at 0.5)"
    # a record written before `similarity` was a setting learned its similarity
    assert _methods.label("pg_transfer", {"similarity_rule": "average"}) == "PG transfer (ρ averaged)"


def test_the_terminal_notes_say_which_setting_changed_which_method():
    for unchanged in (T.Config(), None, {"layer": "yes"}, {"similarity_rule": "best"}):
        assert _methods.setting_notes(T.METHODS, unchanged) == []
    assert _methods.setting_notes(T.METHODS, T.Config(layer=True)) == [LAYER_NOTE]
    notes = _methods.setting_notes(T.METHODS, {"similarity": "0.875", "alpha_sparse": 1.0})
    assert notes == ["dirichlet_sparse: α = 1 (set by alpha_sparse; the name's own α is 1e-3)",
                     "pg_transfer: the task similarity fixed at ρ = 0.875, not learned (set by similarity=0.875; "
                     "the default similarity=learned learns it from the data)"]


#: The experiments each qualifier's setting is made for (a config of any other must not have it).
QUALIFIED = {"layer": ("transfer",), "similarity": ("transfer",), "similarity_rule": ("transfer",),
             "concentration": ("sysid", "psrl"), "contamination": ("sysid", "psrl"), "support": ("sysid", "psrl"),
             "dirichlet_alpha": ("imitation", "subgoal")}


def test_every_qualifier_matches_the_settings_of_its_experiments():
    """Each qualifier's setting belongs to the experiments it is made for, with the default it declares
    (or, where the experiment's default is itself a change, a ``given`` origin), and the values it
    labels are valid there; no other experiment has a setting of that name (a new one must decide
    whether the label applies to it)."""
    from corrpriors.experiments.gym_psrl import PSRLConfig, PSRLExperiment
    from corrpriors.experiments.gym_sysid import SysIdConfig, SysIdExperiment
    from corrpriors.runner._ranges import check_ranges

    qualifiers = [q for m in _methods.MODELS.values() for q in m.qualifiers]
    assert {q.setting for q in qualifiers} == set(QUALIFIED)
    configs = {"sysid": SysIdConfig(), "psrl": PSRLConfig(),
               **{n: registry.get_experiment(n).Config() for n in registry.EXPERIMENTS}}
    ranges = {"sysid": SysIdExperiment, "psrl": PSRLExperiment}
    for experiment, config in configs.items():
        fields = {f.name for f in dataclasses.fields(config)}
        assert {s for s in QUALIFIED if s in fields} == {s for s, where in QUALIFIED.items() if experiment in where}, \
            experiment
    for q in qualifiers:
        for experiment in QUALIFIED[q.setting]:
            default = configs[experiment]
            assert getattr(default, q.setting) == q.default or q.given, (q.setting, experiment)
            for name, _ in (*q.requires, *q.unless):
                assert hasattr(default, name), (q.setting, name)
            for value in q.values + ((0.5,) if q.number else ()):
                changed = dataclasses.replace(default, **{q.setting: value})
                if experiment == "transfer":
                    T.check_config(dataclasses.replace(T.quick_config(), **{q.setting: value}))
                else:
                    check_ranges(ranges.get(experiment) or registry.get_experiment(experiment), changed)
    # the table refuses a qualifier whose replaced words the description does not say
    with pytest.raises(ValueError, match="replaces"):
        _methods.Model("M", "a model", "#000000", "o", qualifiers=(
            _methods.Qualifier("x", False, values=(True,), label=" x", description="d", note="n", own="o",
                               replaces="words it lacks"),))


# ----------------------------------------------------------------------------- a run, end to end


def _transfer_run(tmp_path, monkeypatch, overrides):
    """A small quick transfer run (one seed, a two-task PSRL sequence) and the figures the runner drew."""
    from corrpriors.runner import _run

    drawn = keep_drawn_figures(monkeypatch)
    small = {"budgets": (20, 80), "psrl_transitions": 50, "psrl_eval": 50, "replan_every": 50}
    report = _run.run_experiment("transfer", quick=True, seeds=[0], overrides={**small, **overrides},
                                 jobs=1, out=tmp_path, progress=False, echo=None)
    record = json.loads(report.metrics_path.read_text(encoding="utf-8"))
    return record, drawn


@pytest.mark.parametrize("layer", [False, True])
def test_a_layered_run_records_draws_and_reports_the_layer(layer, tmp_path, monkeypatch):
    from corrpriors.runner._run import format_table
    from corrpriors.runner.report import write_report

    record, drawn = _transfer_run(tmp_path, monkeypatch, {"layer": layer})
    want = {m: _methods.MODELS[m].label + (" + per-pair layer" if layer else "") for m in PG_METHODS}
    for name in PG_METHODS:
        entry = record["methods"][name]
        assert entry["label"] == want[name]
        assert entry["colour"] == _methods.MODELS[name].colour and entry["marker"] == _methods.MODELS[name].marker
        assert ("set by layer=true" in entry["description"]) is layer
    # both figures' legends (the error curves and the PSRL panel), by the methods' colours
    legends = [e for fig in drawn for e in _legend_entries(fig)
               if e[0] not in ("median over seeds", "range over seeds")]   # the similarity panel's
    for name in PG_METHODS:
        texts = {text for text, colour in legends if colour == _methods.MODELS[name].colour}
        assert texts == {want[name]}, (name, legends)
    assert sum(text == want["pg"] for text, _ in legends) == 2                       # in both figures
    psrl_title = " ".join(drawn[1].axes[1].get_title().split())                    # the PSRL panel: its variant
    assert "variant mean: greedy on the optimal Q of the posterior-mean model, replanned every 50" in psrl_title
    table = format_table(record)
    assert (LAYER_NOTE.split(" (")[0] in table) is layer
    page = write_report(tmp_path).path.read_text(encoding="utf-8")
    for name in PG_METHODS:
        assert f'title="{name}">{want[name]}</th>' in page
    assert ("set by layer=true" in page) is layer
    assert "PSRL sequence (variant mean: greedy on the optimal Q of the posterior-mean model" in page


def test_an_old_layered_record_is_read_with_the_layer(tmp_path):
    from corrpriors.runner.report import write_report

    xs = [20.0, 80.0]
    stale = {m: _methods.method(m).as_json() for m in T.METHODS}                     # "PG", "PG transfer", ...
    old = {"experiment": "transfer", "vocabulary": _methods.VOCABULARY, "x": {"name": "T", "values": xs},
           "seeds": [0], "config": {"layer": True, "alpha_sparse": 1e-3}, "methods": stale,
           "metrics": {"hellinger": {"better": "lower", "methods": {
               m: {"mean": [0.2, 0.1], "std": [0.0, 0.0]} for m in T.METHODS}}}}
    record, note = _methods.migrate_summary(old)
    assert note is None
    assert record["methods"]["pg"]["label"] == "PG + per-pair layer"
    assert record["methods"]["dirichlet_sparse"] == stale["dirichlet_sparse"]
    assert any("'PG pooled' -> 'PG pooled + per-pair layer'" in n for n in record["extra"]["notes"])
    assert stale["pg"]["label"] == "PG"                                              # not modified
    folder = tmp_path / "transfer" / "custom-0"
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps(old), encoding="utf-8")
    page = write_report(tmp_path).path.read_text(encoding="utf-8")
    assert 'title="pg_transfer">PG transfer + per-pair layer</th>' in page
    assert "set by layer=true" in page


def test_a_record_whose_labels_claim_a_setting_its_config_lacks_is_relabelled():
    """An edited record with layer=false but the layer's labels: every PG method is read as the
    plain model (pg and pg_pooled kept "+ per-pair layer"; only pg_transfer was relabelled)."""
    layered = {m: _methods.method(m, {"layer": True}).as_json() for m in T.METHODS}
    old = {"experiment": "transfer", "vocabulary": _methods.VOCABULARY, "x": {"name": "T", "values": [20.0]},
           "seeds": [0], "config": {"layer": False, "similarity": "0.5"}, "methods": layered,
           "metrics": {"hellinger": {"better": "lower", "methods": {
               m: {"mean": [0.2], "std": [0.0]} for m in T.METHODS}}}}
    record, _ = _methods.migrate_summary(old)
    assert record["methods"]["pg"] == _methods.method("pg").as_json()
    assert record["methods"]["pg_pooled"] == _methods.method("pg_pooled").as_json()
    assert record["methods"]["pg_transfer"]["label"] == "PG transfer (ρ fixed at 0.5)"
    assert any("'PG pooled + per-pair layer' -> 'PG pooled'" in n for n in record["extra"]["notes"])


# ------------------------------------------------------------------- round 20: the policy α, pg_absolute's mean
@pytest.mark.parametrize("experiment, name, label", [("imitation", "dirichlet", "Dirichlet"),
                                                     ("subgoal", "dirichlet_subgoal", "Dirichlet subgoal")])
def test_dirichlet_alpha_shows_in_the_policy_models_label(experiment, name, label):
    """``--set dirichlet_alpha=1`` kept the label ``Dirichlet`` (and a description saying 1e-3), unlike the
    models named for an α; now the label states the α used, the name and the colour stay."""
    module = registry.get_experiment(experiment)
    default = module.Config()
    assert default.dirichlet_alpha == 1e-3
    assert _methods.method(name, default).label == label
    assert "α = 1e-3" in _methods.method(name, default).description
    for alpha, text in ((1.0, "1"), (0.5, "0.5"), (2.5e-4, "2.5e-4")):
        changed = dataclasses.replace(default, dirichlet_alpha=alpha)
        m = _methods.method(name, changed)
        assert m.label == f"{label} α={text}"
        assert m.description.count(f"α = {text} (set by dirichlet_alpha={text}") == 1
        assert "α = 1e-3 " not in m.description.split(" (set by")[0]
        assert m.colour == _methods.MODELS[name].colour
        assert _methods.label(name, {"dirichlet_alpha": alpha}) == m.label        # a record's config block
        assert _methods.setting_notes(module.METHODS, changed) == [
            f"{name}: α = {text} (set by dirichlet_alpha={text}; the default dirichlet_alpha=1e-3 is the α of "
            "dirichlet_sparse)"]
    for unchanged in (None, {"dirichlet_alpha": 1e-3}, {"dirichlet_alpha": True}, {"dirichlet_alpha": 0.0}):
        assert _methods.label(name, unchanged) == label


def test_pg_absolute_says_where_its_prior_mean_is_learned():
    """``pg_absolute`` is labelled the paper's, but PSRL's beliefs give it a learned constant mean."""
    from corrpriors.experiments import _psrl, system_id

    text = _methods.MODELS["pg_absolute"].description
    assert "a learned constant per stick in psrl-grid and psrl-queueing" in text
    assert "fixed uniform logits in system-id" in text
    assert system_id.Config().pg_learn_mean == "none"
    import inspect
    assert 'learn_mean="constant"' in inspect.getsource(_psrl.make_belief)
