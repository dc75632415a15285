"""Rules every public function follows (issue 12): randomness is a keyword-only ``rng``, and
library code has no hidden fixed seeds."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import pathlib
import pkgutil

import pytest

import corrpriors
import toy_experiment as toy
from corrpriors.runner.protocol import ExperimentUnavailable, validate_experiment

SRC = pathlib.Path(corrpriors.__file__).parent


def _public_callables():
    seen = set()
    for info in pkgutil.walk_packages(corrpriors.__path__, "corrpriors."):
        if any(part.startswith("_") for part in info.name.split(".")[1:]):
            continue
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name, None)
            if obj is None or id(obj) in seen:
                continue
            seen.add(id(obj))
            if inspect.isclass(obj):
                for attr, member in vars(obj).items():
                    if (not attr.startswith("_") or attr == "__init__") and callable(member):
                        yield f"{info.name}.{name}.{attr}", member
            elif callable(obj):
                yield f"{info.name}.{name}", obj


def _public_parameters():
    """``(qualname, parameters)`` of every public callable with a signature."""
    for qualname, fn in _public_callables():
        try:
            yield qualname, inspect.signature(fn).parameters
        except (TypeError, ValueError):
            continue


def test_rng_is_keyword_only_everywhere():
    offenders = []
    for qualname, params in _public_parameters():
        p = params.get("rng")
        if p is not None and p.kind is not inspect.Parameter.KEYWORD_ONLY:
            offenders.append(qualname)
    assert not offenders, f"rng must be keyword-only in: {offenders}"


#: Public parameters named ``seed`` that are not a source of randomness (the names of the
#: functions that may have one, and why): the rule below flags every other ``seed`` and
#: every ``random_state``.
SEED_PARAMETER_ALLOWED = {
    # Gymnasium's Env.reset(*, seed=None, options=None): the protocol every environment follows
    "corrpriors.envs.TabularEnv.reset": "Gymnasium's Env.reset API",
    # the runner's seed index (an int naming one run) from which it derives the generator
    "corrpriors.runner.seed_generator": "the index of a run, turned into its generator here",
    "corrpriors.runner.protocol.check_seed_result": "the index of the run, named in errors",
    "corrpriors.runner.fit.FitOptions.__init__": "the record of the fit command's --seed option",
}


def test_randomness_is_never_a_seed_or_random_state_parameter():
    """Randomness is a keyword-only ``rng`` (docs/development.rst): a public parameter named
    ``random_state`` or ``seed`` is a second spelling of it (``SubgoalPolicyEstimator`` took a
    constructor ``random_state`` whose default None made two identical fits differ)."""
    offenders = []
    for qualname, params in _public_parameters():
        for name in ("random_state", "seed"):
            if name in params and (name == "random_state" or qualname not in SEED_PARAMETER_ALLOWED):
                offenders.append(f"{qualname}({name})")
    assert not offenders, f"take randomness as a keyword-only rng, not: {offenders}"


def test_the_seed_allow_list_names_existing_parameters():
    public = dict(_public_parameters())
    for qualname in SEED_PARAMETER_ALLOWED:
        assert "seed" in public[qualname], qualname


def _fixed_seed_calls(tree: ast.AST):
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        for kw in node.keywords:
            if kw.arg in ("rng", "seed", "random_state") and isinstance(kw.value, ast.Constant) \
                    and isinstance(kw.value.value, int) and not isinstance(kw.value.value, bool):
                yield node.lineno, f"{name}({kw.arg}={kw.value.value})"
        if name in ("default_rng", "RandomState", "seed") and node.args and \
                isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, int):
            yield node.lineno, f"{name}({node.args[0].value})"


def test_no_hidden_fixed_seeds_in_library_code():
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for lineno, text in _fixed_seed_calls(tree):
            offenders.append(f"{path.relative_to(SRC)}:{lineno}: {text}")
    assert not offenders, "hidden fixed seeds:\n" + "\n".join(offenders)


def test_no_global_random_state():
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text()
        for needle in ("np.random.seed(", "np.random.rand(", "np.random.randn(",
                       "np.random.randint(", "np.random.choice(", "np.random.normal(",
                       "np.random.uniform(", "np.random.random(", "random.seed("):
            if needle in text:
                offenders.append(f"{path.relative_to(SRC)}: {needle}")
    assert not offenders, offenders


def test_experiment_run_seed_must_take_rng_by_keyword():
    # the runner calls run_seed(config, rng=generator): a registered experiment whose
    # run_seed names the generator otherwise is refused up front, naming the signature
    validate_experiment(toy, toy.NAME)

    @dataclasses.dataclass(frozen=True)
    class Bad:
        NAME = toy.NAME
        DESCRIPTION, X_NAME, METRICS = toy.DESCRIPTION, toy.X_NAME, toy.METRICS
        PAPER_SEEDS, QUICK_SEEDS, Config = toy.PAPER_SEEDS, toy.QUICK_SEEDS, toy.Config
        quick_config, x_values = staticmethod(toy.quick_config), staticmethod(toy.x_values)

        @staticmethod
        def run_seed(config, generator):
            return toy.run_seed(config, rng=generator)

    with pytest.raises(ExperimentUnavailable, match=r"run_seed\(config, \*, rng\).*generator"):
        validate_experiment(Bad(), toy.NAME)
