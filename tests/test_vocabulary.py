"""One method vocabulary (issue 22): every experiment, command, metrics.json, figure and old result.

The table is :mod:`corrpriors._methods`; these tests walk every experiment and command and check
their method names against it, scan the package for any other table of labels, check that
``pg`` is the relative encoding everywhere, that results written under the old names (the
``system-id`` experiment's ``pg`` = absolute, ``pg_offset`` = relative) are read under the new
ones by their recorded version and with a note, and that a method has one colour in every figure.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import pathlib
import re

import numpy as np
import pytest

import corrpriors
from corrpriors import _methods
from corrpriors.runner import SeedResult, _io, registry
from corrpriors.runner._run import plan_run, run_plan

SRC = pathlib.Path(corrpriors.__file__).parent


def experiment_methods() -> dict[str, tuple]:
    """Every method name each experiment (paper and Gymnasium) can produce.

    Walks :data:`corrpriors.runner.registry.EXPERIMENTS` (an experiment added there is checked
    without editing this test) plus the Gymnasium commands' method lists.
    """
    from corrpriors.experiments import gym_psrl, gym_sysid

    out = {}
    for name in registry.EXPERIMENTS:
        module = registry.get_experiment(name)
        out[name] = tuple(module.METHODS) + tuple(getattr(module, "OPTIONAL_METHODS", ()))
    out["sysid"] = tuple(gym_sysid.METHODS)
    out["psrl"] = tuple(gym_psrl.ALL_METHODS)
    return out


def unknown_methods_message(found: dict[str, tuple]) -> str:
    """One line per method missing from the table, naming the experiment and what to add."""
    lines = []
    for experiment, methods in found.items():
        for m in methods:
            if not _methods.is_known(m):
                lines.append(f"experiment {experiment!r} produces method {m!r}, which is not in the vocabulary: "
                             f"add its model to corrpriors._methods.MODELS (label, description, colour, marker)"
                             f" or its suffix to VARIANTS (label, description, line style)")
    return "\n".join(lines)


def test_the_missing_method_message_names_the_method():
    message = unknown_methods_message({"transfer": ("pg", "pg_warmstart"), "deepsea": ("pg_mean",)})
    assert message.splitlines() == [message.splitlines()[0]]
    assert "'transfer' produces method 'pg_warmstart'" in message and "MODELS" in message


@pytest.mark.parametrize("name", sorted(experiment_methods()))
def test_every_experiment_produces_only_names_of_the_vocabulary(name):
    found = experiment_methods()[name]
    assert found, f"experiment {name!r} lists no methods"
    message = unknown_methods_message({name: found})
    assert not message, message
    # pg and pg_absolute mean the same models wherever the transitions are learned
    if name in ("system-id", "psrl-grid", "psrl-queueing", "sysid"):
        models = {_methods.split(m)[0] for m in found}
        assert {"pg", "pg_absolute", "dirichlet_uniform", "dirichlet_sparse"} <= models, name
    # the labels metrics.json carries are the table's
    for m, entry in _methods.describe(found).items():
        assert entry["label"] == _methods.method(m).label


def test_labels_colours_and_line_styles_are_unique():
    """Two models never share a label; two variants never share a line style or a label."""
    labels = [m.label for m in _methods.MODELS.values()]
    assert len(set(labels)) == len(labels), labels
    variants = [v for k, v in _methods.VARIANTS.items() if k]
    assert len({v.label for v in variants}) == len(variants)
    dashed = [v.linestyle for v in variants if v.linestyle != "-"]   # "-": a model alone or its one variant
    assert len(set(dashed)) == len(dashed), dashed


@pytest.mark.parametrize("command", sorted(__import__("corrpriors.cli", fromlist=["SUBCOMMANDS"]).SUBCOMMANDS))
def test_every_command_names_only_methods_of_the_vocabulary(command, capsys):
    from corrpriors.cli import main

    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = capsys.readouterr().out
    names = set(re.findall(r"\b(?:pg|dirichlet)[a-z_]*\b", text))
    unknown = sorted(n for n in names if not _methods.is_known(n))
    assert not unknown, f"`corrpriors {command} --help` names methods outside the vocabulary: {unknown}"
    assert "pg_offset" not in text and "PG (relative)" not in text


def _label_tables(path: pathlib.Path) -> list[str]:
    """Dict literals outside the vocabulary that map method names to labels (or colours)."""
    found = []
    names = {m for m in _methods.MODELS} | {f"{m}_{v}" for m in _methods.MODELS for v in _methods.VARIANTS if v}
    names |= {"pg_offset"}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Dict) and len(node.keys) >= 2:
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            values = [v for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
            if len(keys) >= 2 and set(keys) <= names and len(values) == len(node.values):
                found.append(f"{path.relative_to(SRC)}:{node.lineno}")
    return found


def test_no_module_but_the_vocabulary_spells_a_label():
    labels = {m.label for m in _methods.MODELS.values()}
    labels |= {_methods.method(f"{m}_{v}").label for m in _methods.MODELS for v in _methods.VARIANTS if v}
    labels = {lab for lab in labels if " " in lab or "α" in lab}   # "PG", "Dirichlet" are also plain words
    tables, spelled = [], []
    for path in SRC.rglob("*.py"):
        if path.name == "_methods.py":
            continue
        tables += _label_tables(path)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in labels:
                spelled.append(f"{path.relative_to(SRC)}:{node.lineno} {node.value!r}")
    assert tables == [] and spelled == []
    # and the protocol's optional METHOD_LABELS is only for names outside the vocabulary (plug-ins)
    for name in registry.EXPERIMENTS:
        assert not hasattr(registry.get_experiment(name), "METHOD_LABELS"), name


def test_the_checker_finds_a_label_table(tmp_path):
    path = SRC / "experiments" / "_zz_probe.py"
    source = 'LABELS = {"pg": "PG (relative)", "pg_offset": "PG, relative moves"}\n'
    try:
        path.write_text(source)
        assert _label_tables(path) == ["experiments/_zz_probe.py:1"]
    finally:
        path.unlink()


def test_pg_is_the_relative_encoding_in_system_id():
    from corrpriors.envs import tunnel_world
    from corrpriors.experiments import system_id

    mdp, config = tunnel_world(), system_id.Config()
    assert system_id._belief_options(config, mdp, "pg")["category_map"] is not None       # moves
    assert system_id._belief_options(config, mdp, "pg_absolute")["category_map"] is None  # next states
    assert system_id.METHODS[0] == "pg" and "pg_offset" not in system_id.METHODS


def test_split_and_styles():
    assert _methods.split("pg_absolute_sampling") == ("pg_absolute", "sampling")
    assert _methods.split("pg_subgoal_em") == ("pg_subgoal", "em")
    assert _methods.split("dirichlet_sparse") == ("dirichlet_sparse", "")
    with pytest.raises(ValueError, match="pg_offset"):
        _methods.split("pg_offset")
    a, b = _methods.method("pg_sampling"), _methods.method("pg_mean")
    assert a.colour == b.colour and a.linestyle != b.linestyle     # one model, two variants
    assert _methods.label("my_plugin_method") == "my_plugin_method"
    models = [m for m in _methods.MODELS if m not in ("dirichlet", "pg_imitation")]   # same model, same colour
    assert len({_methods.MODELS[m].colour for m in models}) == len(models)
    assert _methods.MODELS["dirichlet"].colour == _methods.MODELS["dirichlet_sparse"].colour
    assert _methods.MODELS["pg_imitation"].colour == _methods.MODELS["pg"].colour


def test_rename_text_is_simultaneous():
    mapping = _methods.LEGACY_NAMES["system-id"]
    text = "pg_offset beats pg; pg's error; pg_offset_x and dirichlet_sparse stay"
    assert _methods.rename_text(text, mapping) == "pg beats pg_absolute; pg_absolute's error; pg_offset_x and " \
                                                  "dirichlet_sparse stay"


# ----------------------------------------------------------------------------- old results


@dataclasses.dataclass(frozen=True)
class _Config:
    n: int = 3


class OldSystemId:
    """An experiment named like system-id whose seeds return the current names."""

    NAME, DESCRIPTION, X_NAME = "system-id", "stand-in for the vocabulary test", "transitions"
    METRICS = {"hellinger": "lower"}
    PAPER_SEEDS, QUICK_SEEDS = 2, 2
    Config = _Config

    def quick_config(self):
        return _Config()

    def x_values(self, config):
        return [0.0, 1.0, 2.0]

    def run_seed(self, config, *, rng):
        return SeedResult(curves={"hellinger": {"pg": np.full(3, 0.2), "pg_absolute": np.full(3, 0.6)}})


def _write_old_seed(seed_dir, seed, config_json):
    """A seed file as corrpriors 0.2 wrote it: no vocabulary version, pg = absolute, pg_offset = relative."""
    old = SeedResult(curves={"hellinger": {"pg": np.full(3, 0.6), "pg_offset": np.full(3, 0.2)}},
                     method_extras={"scale": {"pg": np.ones(3), "pg_offset": np.full(3, 2.0)}})
    _io.save_seed(seed_dir, seed, old, experiment="system-id", config_json=config_json, elapsed=1.0, cpu=1.0)
    path = seed_dir / f"seed-{seed}.json"
    meta = json.loads(path.read_text())
    del meta["vocabulary"]
    path.write_text(json.dumps(meta))


def test_old_seed_files_are_read_under_the_new_names(tmp_path):
    config_json = {"n": 3}
    _write_old_seed(tmp_path, 0, config_json)
    stored = _io.load_seed(tmp_path, 0, experiment="system-id", config_json=config_json)
    assert stored.renamed == {"pg": "pg_absolute", "pg_offset": "pg"}
    assert set(stored.result.curves["hellinger"]) == {"pg", "pg_absolute"}
    np.testing.assert_array_equal(stored.result.curves["hellinger"]["pg_absolute"], 0.6)   # the old pg
    np.testing.assert_array_equal(stored.result.curves["hellinger"]["pg"], 0.2)            # the old pg_offset
    np.testing.assert_array_equal(stored.result.method_extras["scale"]["pg"], 2.0)
    # a file of the current vocabulary is read as it is, whatever names it holds
    new = SeedResult(curves={"hellinger": {"pg": np.full(3, 0.2), "pg_absolute": np.full(3, 0.6)}})
    _io.save_seed(tmp_path, 1, new, experiment="system-id", config_json=config_json)
    again = _io.load_seed(tmp_path, 1, experiment="system-id", config_json=config_json)
    assert again.renamed == {} and json.loads((tmp_path / "seed-1.json").read_text())["vocabulary"] == 2
    np.testing.assert_array_equal(again.result.curves["hellinger"]["pg"], 0.2)
    # other experiments had no old names
    _write_old_seed(tmp_path / "o", 0, config_json)
    meta = json.loads((tmp_path / "o" / "seed-0.json").read_text())
    meta["experiment"] = "psrl-grid"
    (tmp_path / "o" / "seed-0.json").write_text(json.dumps(meta))
    assert _io.load_seed(tmp_path / "o", 0, experiment="psrl-grid", config_json=config_json).renamed == {}


def test_a_run_resumes_old_and_new_seeds_together_with_a_note(tmp_path):
    experiment = OldSystemId()
    plan = plan_run(experiment, out=tmp_path, n_seeds=2)
    (plan.run_dir / "seeds").mkdir(parents=True)
    _write_old_seed(plan.run_dir / "seeds", 0, plan.config_json)       # seed 0 from 0.2, seed 1 computed now
    said: list[str] = []
    report = run_plan(plan, jobs=1, progress=False, plot=False, echo=said.append)
    assert report.computed_seeds == (1,) and report.skipped_seeds == (0,)
    notes = [s for s in said if "old method names" in s]
    assert notes == ["  note: system-id: seed 0 written under the old method names; read as pg -> pg_absolute, "
                     "pg_offset -> pg"]
    methods = report.summary["metrics"]["hellinger"]["methods"]
    assert set(methods) == {"pg", "pg_absolute"}            # never a mix of old and new names
    assert methods["pg"]["mean"] == [0.2] * 3 and methods["pg"]["std"] == [0.0] * 3
    assert report.summary["methods"]["pg_absolute"]["label"] == _methods.method("pg_absolute").label


def test_an_old_metrics_json_is_migrated_for_the_report(tmp_path):
    from corrpriors.runner.report import write_report

    old = {
        "experiment": "system-id", "x": {"name": "transitions", "values": [0.0, 100.0]}, "seeds": [0, 1],
        "config": {"offset_radius": 3},
        "metrics": {"hellinger": {"better": "lower", "methods": {
            "pg": {"mean": [0.77, 0.76], "std": [0.0, 0.0]}, "pg_offset": {"mean": [0.57, 0.31], "std": [0.0, 0.0]}}}},
        "extra": {"claims": [{"claim": "pg_offset error clearly below", "holds": True, "detail": "pg vs pg_offset"}],
                  "notes": ["pg is below dirichlet_sparse from T=100"],
                  "chosen_lengthscale": {"pg": {"mode": [2.0]}, "pg_offset": {"mode": [2.0]}}},
        "run": {"settings": "quick", "claims": "paper-scale"},
    }
    record, note = _methods.migrate_summary(old)
    assert note == "system-id: metrics.json written under the old method names; read as pg -> pg_absolute, " \
                   "pg_offset -> pg"
    assert list(record["metrics"]["hellinger"]["methods"]) == ["pg_absolute", "pg"]
    assert record["metrics"]["hellinger"]["methods"]["pg"]["mean"] == [0.57, 0.31]
    assert record["extra"]["claims"][0] == {"claim": "pg error clearly below", "holds": True,
                                            "detail": "pg_absolute vs pg"}
    assert record["extra"]["notes"] == [note, "pg_absolute is below dirichlet_sparse from T=100"]
    assert set(record["extra"]["chosen_lengthscale"]) == {"pg", "pg_absolute"}
    assert record["vocabulary"] == 2 and record["methods"]["pg"]["label"] == _methods.label("pg")
    again, none = _methods.migrate_summary(record)          # a current record is left as it is
    assert none is None and again["metrics"] == record["metrics"]
    folder = tmp_path / "system-id" / "quick-0"
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps(old))
    page = write_report(tmp_path).path.read_text()
    assert "pg_absolute" in page and "old method names" in page
    assert page.count("pg_offset") == 1        # only in the note that says how the old names were read


# ----------------------------------------------------------------------------- one palette


def _summary(methods, xs=(0.0, 10.0, 100.0, 1000.0, 10000.0), metrics=("m",)):
    rng = np.random.default_rng(0)
    return {"experiment": "t", "x": {"name": "x", "values": list(xs)}, "seeds": [0, 1],
            "metrics": {metric: {"better": "lower", "methods": {
                m: {"mean": rng.uniform(0.2, 0.8, len(xs)).tolist(), "std": [0.01] * len(xs)} for m in methods}}
                for metric in metrics}}


def every_figure():
    """One figure of every kind a command draws, from synthetic records holding every method it shows."""
    from corrpriors.experiments import gym_psrl, gym_sysid, imitation, subgoal, system_id
    from corrpriors.experiments._gym import panels_figure
    from corrpriors.experiments._psrl import METHODS as PSRL
    from corrpriors.plotting._curves import curves_figure
    from corrpriors.plotting._imitation import imitation_curves_figure, subgoal_metrics_figure
    from corrpriors.plotting._psrl import psrl_curves_figure

    figs = {
        "system-id": curves_figure(_summary(system_id.METHODS), "m", x_label="T", y_label="error",
                                   environment="e", log_panel=True),
        "sysid": curves_figure(_summary(gym_sysid.METHODS), "m", x_label="T", y_label="error", environment="e"),
        "psrl-grid": psrl_curves_figure(_summary(PSRL), "m", environment="e", x_label="T", y_label="r"),
        "psrl": panels_figure(_summary(gym_psrl.ALL_METHODS, metrics=("normalized_return",)),
                              [("normalized_return", "r", 1.0)], x_label="steps", environment="e"),
        "imitation": imitation_curves_figure(_summary((*imitation.METHODS, *imitation.OPTIONAL_METHODS),
                                                      metrics=("hellinger", "value_loss")),
                                             environment="e", x_label="D", metric_labels=imitation.METRIC_LABELS),
        "subgoal": subgoal_metrics_figure(_summary((*subgoal.METHODS, *subgoal.OPTIONAL_METHODS),
                                                   xs=(24.0,), metrics=("hellinger", "value_loss")),
                                          list((*subgoal.METHODS, *subgoal.OPTIONAL_METHODS)), environment="e"),
    }
    return figs


def _drawn(fig):
    """(label, colour, line style) of every labelled line and legend entry of ``fig``."""
    from matplotlib.colors import to_hex

    out = []
    for ax in fig.axes:
        for line in ax.get_lines():
            if not str(line.get_label()).startswith("_"):
                out.append((str(line.get_label()), to_hex(line.get_color()), line.get_linestyle()))
    for legend in [ax.get_legend() for ax in fig.axes if ax.get_legend()] + list(fig.legends):
        for handle, text in zip(legend.legend_handles, legend.get_texts()):
            if hasattr(handle, "get_color"):
                out.append((text.get_text(), to_hex(handle.get_color()), None))
    return out


def test_a_method_has_one_colour_and_a_variant_one_line_style_in_every_figure():
    from figure_checks import figure_problems

    by_label = {m.label: m.colour for m in _methods.MODELS.values()}
    seen: dict[str, set] = {}
    for kind, fig in every_figure().items():
        assert figure_problems(fig) == [], kind
        for label, colour, style in _drawn(fig):
            if label in ("optimal policy",):
                continue
            seen.setdefault(label, set()).add(colour)
            name = next((m for m in [*_methods.MODELS, *(f"{a}_{v}" for a in _methods.MODELS
                                                         for v in _methods.VARIANTS if v)]
                         if _methods.method(m).label == label), None)
            assert name is not None, f"{kind}: legend label {label!r} is not in the vocabulary"
            assert colour == _methods.method(name).colour, (kind, label)
            if style is not None and _methods.split(name)[1]:
                assert style == _methods.method(name).linestyle, (kind, label)
    assert all(len(c) == 1 for c in seen.values()), seen
    # one model, one colour across commands: pg in system-id, sysid, the PSRL panels and imitation
    assert seen[_methods.label("pg")] == {_methods.MODELS["pg"].colour}
    assert by_label[_methods.label("pg_absolute")] == _methods.MODELS["pg_absolute"].colour


@pytest.mark.parametrize("name", list(registry.EXPERIMENTS))
def test_metrics_json_records_the_values_used_not_placeholders(name):
    """The report shows metrics.json's config: a sentinel ("" = MAP-EM, 0 = the environment's) never."""
    from corrpriors.runner._io import config_to_json

    module = registry.get_experiment(name)
    config = module.Config()
    resolve = getattr(module, "resolve_config", lambda c: c)
    used = config_to_json(resolve(config))
    assert not [k for k, v in used.items() if v == ""], used
    for key in ("discount", "lengthscale"):
        if key in used:
            assert used[key] > 0, (key, used[key])


def test_migrating_a_malformed_record_fails_only_on_its_vocabulary():
    """The report reads untrusted files: migration never crashes on a malformed record (the report's
    own checks then name the bad field); an unknown vocabulary version is a ValueError naming it."""
    for bad in ({"experiment": "system-id", "metrics": [1, 2], "extra": ["x"]},
                {"experiment": "system-id", "metrics": {"h": [1]}, "extra": {"notes": "text"}},
                {"experiment": "system-id", "metrics": {"h": {"methods": [1]}}, "vocabulary": 1}):
        record, note = _methods.migrate_summary(bad)
        assert note is not None and record["extra"]["notes"][0] == note and record["methods"] == {}
    with pytest.raises(ValueError, match="vocabulary"):
        _methods.migrate_summary({"experiment": "system-id", "vocabulary": "two"})
