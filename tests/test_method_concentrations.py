"""A method named for its Dirichlet concentration is labelled with the α its run used.

``dirichlet_sparse`` stands for α = 1e-3 and ``dirichlet_uniform`` for α = 1, but every
transition experiment has the settings ``alpha_sparse`` (and most ``alpha_uniform``). A run with
``--set alpha_sparse=1`` keeps the name and the colour; its ``metrics.json`` labels, figure
legends, terminal table and report must say α = 1 (they said "Dirichlet α=1e-3"), while a
default run keeps every label as it was.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from corrpriors import _methods
from corrpriors.runner import registry
from figure_checks import keep_drawn_figures

#: The models named for a concentration: the setting that changes it, and the name's α.
SETTINGS = {"dirichlet_uniform": ("alpha_uniform", 1.0), "dirichlet_sparse": ("alpha_sparse", 1e-3)}


def _legend_entries(fig) -> list[tuple[str, str]]:
    """(text, colour as hex) of every legend entry of ``fig`` (axes and figure legends)."""
    from matplotlib.colors import to_hex

    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    return [(t.get_text(), to_hex(h.get_color())) for leg in legends
            for h, t in zip(leg.legend_handles, leg.get_texts()) if hasattr(h, "get_color")]


def _transition_configs() -> dict[str, object]:
    """The default ``Config`` of every experiment (paper and Gymnasium) with a concentration setting."""
    from corrpriors.experiments.gym_psrl import PSRLConfig
    from corrpriors.experiments.gym_sysid import SysIdConfig

    settings = {setting for setting, _ in SETTINGS.values()}
    out: dict[str, object] = {"sysid": SysIdConfig(), "psrl": PSRLConfig()}
    for name in registry.EXPERIMENTS:
        out[name] = registry.get_experiment(name).Config()
    return {k: c for k, c in out.items() if settings & {f.name for f in dataclasses.fields(c)}}


# ----------------------------------------------------------------------------- the label function


def test_alpha_text_is_short_exact_and_matches_the_table():
    cases = [(1e-3, "1e-3"), (1.0, "1"), (1, "1"), (0.5, "0.5"), (0.01, "0.01"), (5e-3, "5e-3"),
             (2.5e-4, "2.5e-4"), (30.0, "30"), (1e4, "1e4"), (0.1 + 0.2, "0.30000000000000004")]
    for value, text in cases:
        assert _methods.alpha_text(value) == text
        assert float(text) == value
    for name, (_, value) in SETTINGS.items():   # the table's labels are the label function's text of the α
        assert _methods.MODELS[name].label.endswith("α=" + _methods.alpha_text(value))


def test_every_label_that_states_an_alpha_names_its_setting():
    """A model whose label states α must say which setting changes it, or its label could lie."""
    stating = sorted(n for n, m in _methods.MODELS.items() if "α=" in m.label)
    declared = sorted(n for n, m in _methods.MODELS.items() if m.concentration is not None)
    assert stating == declared == sorted(SETTINGS)
    for name, (setting, value) in SETTINGS.items():
        assert _methods.MODELS[name].concentration == _methods.Concentration(setting, value)
    with pytest.raises(ValueError, match="α=1e-3"):
        _methods.Model("Dirichlet α=0.1", "α = 0.1", "#000000", "o", _methods.Concentration("alpha_sparse", 1e-3))


@pytest.mark.parametrize("name", ["dirichlet_sparse", "dirichlet_sparse_sampling", "dirichlet_uniform_mean"])
def test_the_label_states_the_alpha_the_config_sets(name):
    model = _methods.split(name)[0]
    setting, value = SETTINGS[model]
    default = _methods.method(name)
    changed = _methods.method(name, {setting: 0.25})
    assert "α=0.25" in changed.label and "α=" + _methods.alpha_text(value) not in changed.label
    assert "α = 0.25" in changed.description and setting in changed.description
    # one name, one colour, one line style and marker, whatever the α
    assert (changed.name, changed.colour, changed.linestyle, changed.marker) == \
           (default.name, default.colour, default.linestyle, default.marker)
    # the name's own α, no config, a config without the setting, or a value that is no number: the table's
    for config in ({setting: value}, None, {}, {"other": 1.0},
                   {setting: "1"}, {setting: True}):
        assert _methods.method(name, config) == default


def test_the_labels_of_alpha_sparse_1_say_alpha_1():
    from corrpriors.experiments import system_id

    used = system_id.Config(alpha_sparse=1.0)
    assert _methods.label("dirichlet_sparse", used) == "Dirichlet α=1"
    assert _methods.label("dirichlet_sparse", system_id.Config()) == "Dirichlet α=1e-3"
    assert _methods.labels(system_id.METHODS, used) == {**_methods.labels(system_id.METHODS),
                                                         "dirichlet_sparse": "Dirichlet α=1"}
    assert _methods.describe(["dirichlet_uniform"], {"alpha_uniform": 0.1})["dirichlet_uniform"]["label"] == \
        "Dirichlet α=0.1"


@pytest.mark.parametrize("name", sorted(_transition_configs()))
def test_every_experiment_with_an_alpha_setting_labels_it(name):
    """Each experiment's own Config (a dataclass) and its metrics.json form (a dict) give the α label."""
    from corrpriors.runner._io import config_to_json

    config = _transition_configs()[name]
    fields = {f.name for f in dataclasses.fields(config)}
    for model, (setting, _) in SETTINGS.items():
        if setting not in fields:
            continue
        assert _methods.label(model, config) == _methods.MODELS[model].label          # the default: as before
        changed = dataclasses.replace(config, **{setting: 0.5})
        assert _methods.label(model, changed) == "Dirichlet α=0.5"
        assert _methods.label(model, config_to_json(changed)) == "Dirichlet α=0.5"


# ----------------------------------------------------------------------------- a run, end to end


def _transfer_run(tmp_path, monkeypatch, overrides):
    """A quick transfer run (one seed, no PSRL sequence) and the figures the runner drew."""
    from corrpriors.runner import _run

    drawn = keep_drawn_figures(monkeypatch)
    report = _run.run_experiment("transfer", quick=True, seeds=[0], overrides={"psrl_tasks": 0, **overrides},
                                 jobs=1, out=tmp_path, progress=False, echo=None)
    record = json.loads(report.metrics_path.read_text(encoding="utf-8"))
    return report, record, drawn


@pytest.mark.parametrize("alpha", [None, 1.0])
def test_a_run_records_and_draws_the_alpha_it_used(alpha, tmp_path, monkeypatch):
    from corrpriors.runner._run import format_table
    from corrpriors.runner.report import write_report

    overrides = {} if alpha is None else {"alpha_sparse": alpha}
    report, record, drawn = _transfer_run(tmp_path, monkeypatch, overrides)
    want = "Dirichlet α=1e-3" if alpha is None else "Dirichlet α=1"
    entry = record["methods"]["dirichlet_sparse"]
    assert entry["label"] == want
    assert entry["colour"] == _methods.MODELS["dirichlet_sparse"].colour          # the name keeps its colour
    if alpha is None:                                                               # a default run: the table's entry
        assert entry == _methods.method("dirichlet_sparse").as_json()
    legends = [e for fig in drawn for e in _legend_entries(fig)]
    red = {text for text, colour in legends if colour == _methods.MODELS["dirichlet_sparse"].colour}
    assert red == {want}, legends                                                  # both figures' legends
    if alpha is not None:
        assert not any("α=1e-3" in text for text, _ in legends), legends
    table = format_table(record)
    assert ("dirichlet_sparse: α = 1 (set by alpha_sparse; the name's own α is 1e-3)" in table) == (alpha is not None)
    page = write_report(tmp_path).path.read_text(encoding="utf-8")
    assert f'title="dirichlet_sparse">{want}</th>' in page
    if alpha is not None:
        assert "α=1e-3" not in page


# ----------------------------------------------------------------------------- figures from a record


def _record(methods, config, metric="m"):
    xs = [0.0, 10.0, 100.0]
    return {"experiment": "t", "x": {"name": "x", "values": xs}, "seeds": [0, 1], "config": config,
            "metrics": {metric: {"better": "higher", "methods": {
                m: {"mean": [0.1 * (i + 1)] * 3, "std": [0.01] * 3} for i, m in enumerate(methods)}}}}


@pytest.mark.parametrize("config, want", [({"alpha_sparse": 1e-3, "alpha_uniform": 1.0}, "Dirichlet α=1e-3"),
                                          ({"alpha_sparse": 1.0, "alpha_uniform": 1.0}, "Dirichlet α=1"),
                                          ({"alpha_sparse": 0.02}, "Dirichlet α=0.02")])
def test_every_curve_figure_labels_the_alpha_of_its_record(config, want):
    from corrpriors.experiments._gym import panels_figure
    from corrpriors.experiments._psrl import METHODS as PSRL
    from corrpriors.experiments.gym_psrl import ALL_METHODS
    from corrpriors.experiments.system_id import METHODS as SYSID
    from corrpriors.plotting._curves import curves_figure
    from corrpriors.plotting._psrl import psrl_curves_figure

    red = _methods.MODELS["dirichlet_sparse"].colour
    figs = {
        "system-id": curves_figure(_record(SYSID, config), "m", x_label="T", y_label="e", environment="e"),
        "psrl-grid": psrl_curves_figure(_record(PSRL, config), "m", environment="e", x_label="T", y_label="r"),
        "psrl": panels_figure(_record(ALL_METHODS, config, "normalized_return"),
                              [("normalized_return", "r", 1.0)], x_label="steps", environment="e"),
    }
    for kind, fig in figs.items():
        entries = _legend_entries(fig)
        sparse = {text for text, colour in entries if colour == red}
        assert sparse and all(text.startswith(want) for text in sparse), (kind, entries)
        # the PSRL panels name the model only (the panel names the variant)
        if kind == "psrl-grid":
            assert sparse == {want}


# ----------------------------------------------------------------------------- records written before


def test_an_old_record_with_a_stale_label_is_read_with_the_alpha_it_used(tmp_path):
    from corrpriors.runner.report import write_report

    stale = _methods.method("dirichlet_sparse").as_json()                            # "Dirichlet α=1e-3"
    old = {**_record(["pg", "dirichlet_sparse"], {"alpha_sparse": 1.0}), "experiment": "transfer",
           "vocabulary": _methods.VOCABULARY, "methods": {"pg": _methods.method("pg").as_json(),
                                                           "dirichlet_sparse": stale}}
    record, note = _methods.migrate_summary(old)
    assert note is None and record["methods"]["dirichlet_sparse"]["label"] == "Dirichlet α=1"
    assert record["methods"]["dirichlet_sparse"]["colour"] == stale["colour"]
    assert record["methods"]["pg"] == old["methods"]["pg"]
    assert any("'Dirichlet α=1e-3' -> 'Dirichlet α=1'" in n for n in record["extra"]["notes"])
    assert old["methods"]["dirichlet_sparse"] is stale and stale["label"] == "Dirichlet α=1e-3"  # not modified
    again, _ = _methods.migrate_summary(record)                                     # a correct record: no note
    assert again["extra"]["notes"] == record["extra"]["notes"]
    default, _ = _methods.migrate_summary({**old, "config": {"alpha_sparse": 1e-3}})
    assert default["methods"] == old["methods"] and "extra" not in default
    folder = tmp_path / "transfer" / "custom-0"
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps(old), encoding="utf-8")
    page = write_report(tmp_path).path.read_text(encoding="utf-8")
    assert 'title="dirichlet_sparse">Dirichlet α=1</th>' in page
