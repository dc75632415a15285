"""``pg`` and ``pg_absolute`` of ``corrpriors sysid`` / ``psrl`` say when they have the per-pair layer.

The paper's experiments run ``pg`` as the plain correlated model. The Gymnasium commands build
their beliefs with ``CorrelatedTransitionModel.for_mdp``'s defaults (``concentration``,
``contamination`` and ``support`` all ``auto``), which give the per-(state, action) Dirichlet
layer on dense storage (fewer than ``SPARSE_FROM_STATES`` states) and none on sparse storage.
Both were labelled ``PG`` with the plain model's description. The label, the description,
``metrics.json``, the figures, the terminal table and the report must say which model a run used,
decided from what the beliefs were built with (the environment's size included); names, colours
and markers stay.
"""

from __future__ import annotations

import itertools
import json
import types

import numpy as np
import pytest

from corrpriors import _methods
from corrpriors.experiments._gym import make_belief
from corrpriors.experiments.gym_psrl import PSRLConfig
from corrpriors.experiments.gym_sysid import SysIdConfig, SysIdExperiment
from figure_checks import keep_drawn_figures

pytestmark = [pytest.mark.filterwarnings("ignore::corrpriors.exceptions.JitterWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning:gymnasium")]

LAKE3 = {"desc": ["SFF", "FHF", "FFG"], "is_slippery": True}
LAYER_NOTE = "pg, pg_absolute: with the per-(state, action) Dirichlet layer, its concentration learned per action"
SETTINGS = list(itertools.product(("auto", "none", "0.5"), ("auto", "none"), ("auto", "none")))


def _grid(n: int) -> types.SimpleNamespace:
    """What ``for_mdp`` reads of an n x n grid MDP (no transitions are needed)."""
    coords = np.array([(i, j) for i in range(n) for j in range(n)])
    return types.SimpleNamespace(n_states=n * n, n_actions=4, coordinates=coords, shape=(n, n))


def _gym_config(config_class, concentration, contamination, support):
    return config_class(concentration=concentration, contamination=contamination, support=support)


# ----------------------------------------------------------------------------- labels follow the beliefs built


@pytest.mark.parametrize("n", [4, 45])          # 16 states: dense storage; 2,025: sparse
@pytest.mark.parametrize("concentration, contamination, support", SETTINGS)
def test_the_label_says_what_the_belief_was_built_with(n, concentration, contamination, support):
    """The oracle is the belief :func:`make_belief` builds: its layer parts decide the label."""
    from corrpriors.applications.transitions import SPARSE_FROM_STATES
    from corrpriors.experiments._gym import used_layer_settings

    mdp = _grid(n)
    assert (mdp.n_states >= SPARSE_FROM_STATES) is (n == 45)
    config = _gym_config(SysIdConfig, concentration, contamination, support)
    recorded = {**{k: getattr(config, k) for k in ("concentration", "contamination", "support")},
                **used_layer_settings(config, mdp.n_states)}
    for model in ("pg", "pg_absolute"):
        try:
            belief = make_belief(model, mdp, config)
        except ValueError:      # a fixed concentration on sparse storage (refused by check_config)
            assert n == 45 and concentration == "0.5"
            continue
        layer = belief.concentration is not None
        contaminated = belief.contamination_prior is not None
        supported = belief.support_prior is not None
        for name in (model, f"{model}_sampling", f"{model}_mean"):
            m = _methods.method(name, recorded)
            label, description = m.label, m.description
            assert ("+ per-pair layer" in label) is layer, (name, recorded, label)
            assert ("per-(state, action) Dirichlet layer" in description) is layer
            assert ("no per-pair layer, as in the paper" in description) is (not layer and not contaminated)
            assert ("+ contamination" in label) is (contaminated and not layer)
            assert ("no contamination" in label) is (layer and not contaminated)
            assert ("no support hypothesis" in label) is (layer and not supported)
            assert (f"c fixed at {concentration}" in label) is (layer and concentration == "0.5")
            # one name, one colour and marker, whatever the settings
            plain = _methods.method(name)
            assert (m.name, m.colour, m.linestyle, m.marker) == (plain.name, plain.colour, plain.linestyle,
                                                                 plain.marker)
            assert (m == plain) is (not layer and not contaminated)


@pytest.mark.parametrize("config_class", [SysIdConfig, PSRLConfig])
def test_the_default_run_is_labelled_with_the_layer(config_class):
    config = config_class()
    assert _methods.label("pg", config) == "PG + per-pair layer"
    assert _methods.label("pg_absolute_sampling", config) == "PG absolute (the paper's) + per-pair layer, sampling"
    assert _methods.label("dirichlet_sparse", config) == "Dirichlet α=1e-3"
    notes = _methods.setting_notes(config.methods, config)
    assert len(notes) == 1 and notes[0].startswith(LAYER_NOTE)
    assert "on fewer than 2,000 states" in notes[0]
    # on sparse storage the run records none: the table's plain PG, no note
    from corrpriors.experiments._gym import used_layer_settings

    assert used_layer_settings(config, 16) == {}
    used = used_layer_settings(config, 2000)
    assert used == {"concentration": "none", "contamination": "none", "support": "none"}
    assert _methods.label("pg", {**vars_of(config), **used}) == "PG"
    assert _methods.setting_notes(config.methods, {**vars_of(config), **used}) == []
    # the paper's model, asked for: plain, no note
    paper = config_class(concentration="none", contamination="none", support="none")
    assert _methods.label("pg", paper) == "PG" and _methods.setting_notes(paper.methods, paper) == []
    # Dirichlet methods only: nothing is resolved
    assert used_layer_settings(config_class(methods=("dirichlet_sparse",) if config_class is SysIdConfig
                                            else ("dirichlet_sparse_mean",)), 5000) == {}


def vars_of(config) -> dict:
    import dataclasses

    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}


def test_the_threshold_in_the_words_is_the_storage_threshold():
    from corrpriors.applications.transitions import SPARSE_FROM_STATES

    assert _methods.SPARSE_FROM_STATES_TEXT == f"{SPARSE_FROM_STATES:,}"


def test_a_fixed_concentration_on_sparse_storage_is_refused_before_any_work():
    """It failed in every seed (the layer needs dense storage); the label would have claimed a layer."""
    from corrpriors.experiments._gym import check_model_settings

    coords = _grid(45).coordinates
    with pytest.raises(ValueError, match=r"^concentration: a fixed concentration \(0.5\) .* 2,025 states"):
        check_model_settings(SysIdConfig(concentration="0.5"), coords)
    check_model_settings(SysIdConfig(concentration="0.5", methods=("dirichlet_sparse",)), coords)
    check_model_settings(SysIdConfig(concentration="0.5"), _grid(4).coordinates)
    for value in ("auto", "none"):
        check_model_settings(SysIdConfig(concentration=value), coords)


# ----------------------------------------------------------------------------- a run, end to end


def _legend_texts(fig) -> dict[str, set[str]]:
    """Legend text (a wrapped entry as one line) by line colour (hex) of every legend of ``fig``."""
    from matplotlib.colors import to_hex

    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    out: dict[str, set[str]] = {}
    for leg in legends:
        for h, t in zip(leg.legend_handles, leg.get_texts()):
            if hasattr(h, "get_color"):
                out.setdefault(to_hex(h.get_color()), set()).add(" ".join(t.get_text().split()))   # wrapped
    return out


@pytest.mark.parametrize("settings, want", [
    ({}, " + per-pair layer"),
    ({"contamination": "none", "support": "none"}, " + per-pair layer (no contamination; no support hypothesis)"),
    ({"concentration": "none", "contamination": "none", "support": "none"}, ""),
])
def test_a_sysid_run_records_draws_and_reports_the_model_it_used(settings, want, tmp_path, monkeypatch):
    from corrpriors.runner._run import format_table, run_experiment
    from corrpriors.runner.report import write_report

    drawn = keep_drawn_figures(monkeypatch)
    exp = SysIdExperiment("FrozenLake-v1", LAKE3)
    config = exp.Config(transitions=(10, 30), methods=("pg", "pg_absolute", "dirichlet_sparse"), **settings)
    report = run_experiment(exp, config=config, n_seeds=1, jobs=1, out=tmp_path, progress=False, echo=None)
    record = json.loads(report.metrics_path.read_text(encoding="utf-8"))
    labels = {"pg": "PG" + want, "pg_absolute": "PG absolute (the paper's)" + want,
              "dirichlet_sparse": "Dirichlet α=1e-3"}
    assert {n: e["label"] for n, e in record["methods"].items()} == labels
    for name in ("pg", "pg_absolute"):
        assert ("per-(state, action) Dirichlet layer" in record["methods"][name]["description"]) is bool(want)
        assert record["methods"][name]["colour"] == _methods.MODELS[name].colour
    legend = _legend_texts(drawn[0])
    for name, label in labels.items():
        assert legend[_methods.MODELS[name].colour] == {label}
    table = format_table(record)
    assert (LAYER_NOTE in " ".join(table.split())) is bool(want)
    assert ("without its contamination component" in table) is ("no contamination" in want)
    page = write_report(tmp_path).path.read_text(encoding="utf-8")
    for name, label in labels.items():
        assert f'title="{name}">{label.replace(chr(39), "&#x27;")}</th>' in page
    assert (LAYER_NOTE in page) is bool(want)


def test_a_run_on_sparse_storage_records_that_the_layer_was_off():
    """The environment's size decides: resolve_config records none where for_mdp dropped the layer."""
    exp = SysIdExperiment("FrozenLake-v1", LAKE3)
    config = exp.Config()
    assert exp.resolve_config(config) is config
    exp.n_states = 2500                     # as a 50 x 50 map would have (not built: seconds)
    used = exp.resolve_config(config)
    assert (used.concentration, used.contamination, used.support) == ("none", "none", "none")
    assert _methods.label("pg", used) == "PG"
    assert exp.resolve_config(exp.Config(concentration="none")).support == "none"
