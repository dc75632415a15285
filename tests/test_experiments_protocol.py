"""Every paper experiment follows the typed protocol; no experiment imports a sibling; no
string-key grammar is left in the runner, the experiments or the plots."""

from __future__ import annotations

import dataclasses
import pathlib
import re
import typing

import pytest

import corrpriors.experiments as experiments
import corrpriors.plotting as plotting
from corrpriors.runner import EXPERIMENTS, Experiment, SeedResult, get_experiment
from corrpriors.runner._config import apply_overrides

EXPERIMENT_FILES = {name: module.rsplit(".", 1)[1] for name, module in EXPERIMENTS.items()}


@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_paper_experiment_follows_the_protocol(name):
    module = get_experiment(name)
    assert isinstance(module, Experiment)
    assert typing.get_type_hints(module.run_seed)["return"] is SeedResult
    for attr in ("ENVIRONMENT", "X_LABEL", "METRIC_LABELS", "figures", "resolve_config", "summarise_extra"):
        assert hasattr(module, attr), f"{name} lacks {attr}"
    assert set(module.METRIC_LABELS) == set(module.METRICS)
    for config in (module.Config(), module.quick_config()):
        resolved = module.resolve_config(config)
        assert type(resolved) is type(config)
        if hasattr(module, "check_config"):
            module.check_config(config)
    # every field can be set from the command line to its own value (types are parseable)
    base = module.quick_config()
    for field in dataclasses.fields(module.Config):
        value = getattr(base, field.name)
        text = ",".join(str(v) for v in value) if isinstance(value, tuple) else str(value)
        new, _ = apply_overrides(module, base, {field.name: text})
        assert getattr(new, field.name) == value, field.name


def test_experiments_import_no_sibling():
    folder = pathlib.Path(experiments.__file__).parent
    siblings = set(EXPERIMENT_FILES.values())
    for path in folder.glob("*.py"):
        text = path.read_text()
        for sibling in siblings - {path.stem}:
            assert not re.search(rf"from \.{sibling} import|import \.{sibling}\b|from \. import {sibling}", text), \
                f"{path.name} imports the experiment {sibling}"


def test_no_string_key_grammar_is_left():
    for package in (experiments, plotting):
        for path in pathlib.Path(package.__file__).parent.glob("*.py"):
            text = path.read_text()
            assert not re.search(r"extra__|\"__\"|'__'|f\"\{metric\}__|startswith\(metric \+ \"__\"\)", text), path.name
