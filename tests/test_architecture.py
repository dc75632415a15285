"""The package's layering, kept by a test (docs/architecture.rst draws the layers).

Every ``import`` and ``from ... import`` in ``src/corrpriors`` -- at module level or inside a
function (lazy imports count) -- is resolved to the corrpriors subpackage it reaches, and each
subpackage may reach only the ones its layer allows. The checker itself is tested on sources that
break each rule.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

import corrpriors

SRC = pathlib.Path(corrpriors.__file__).parent

#: Shared primitives every layer may use (root-level private modules and the package root's
#: version/exceptions).
PRIMITIVES = {"_typing", "_validation", "_random", "_threads", "_fileio", "_memory", "_repr", "_special",
              "_deprecation", "_methods", "_format", "exceptions", "data"}

#: Layer -> the subpackages it may import (besides itself and the primitives).
ALLOWED = {
    "linalg": set(),
    "kernels": {"linalg"},
    "baselines": set(),
    "core": {"linalg", "kernels"},
    "mdp": set(),
    "envs": {"mdp"},
    "applications": {"core", "kernels", "baselines", "linalg", "mdp", "envs"},
    "plotting": {"mdp"},
    "experiments": {"core", "kernels", "baselines", "linalg", "mdp", "envs", "applications",
                    "plotting", "runner"},
    "runner": {"core", "kernels", "plotting", "data"},
    "cli": {"runner", "experiments"},
}

#: Modules of a layer that only re-export another layer's names under their old path.
ALIASES = {("experiments", "__init__")}


def _layer(parts: tuple[str, ...]) -> str:
    """The top-level unit of a module path inside corrpriors ('' for the package root)."""
    if not parts:
        return ""
    head = parts[0]
    return head[:-3] if head.endswith(".py") else head


def imported_layers(path: pathlib.Path, source: str | None = None) -> set[tuple[str, int]]:
    """``(layer, line)`` of every corrpriors module imported by the file at ``path``."""
    rel = path.relative_to(SRC).with_suffix("").parts
    package = rel[:-1]   # the package a relative import starts from (also for __init__.py)
    tree = ast.parse(source if source is not None else path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                target = base + tuple(node.module.split(".")) if node.module else base
                if not node.module:  # from . import x, y -> the submodules x, y (__version__: the root)
                    for alias in node.names:
                        dunder = alias.name.startswith("__")
                        found.add((_layer(target if dunder else target + (alias.name,)), node.lineno))
                    continue
            elif node.module and node.module.split(".")[0] == "corrpriors":
                target = tuple(node.module.split(".")[1:])
                if not target:
                    for alias in node.names:
                        found.add((_layer(() if alias.name.startswith("__") else (alias.name,)), node.lineno))
                    continue
            else:
                continue
            found.add((_layer(target), node.lineno))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "corrpriors":
                    found.add((_layer(tuple(parts[1:])), node.lineno))
    return found


def violations(path: pathlib.Path, source: str | None = None) -> list[str]:
    """Every import of ``path`` that its layer does not allow."""
    rel = path.relative_to(SRC).with_suffix("").parts
    layer = _layer(rel)
    if layer not in ALLOWED or (layer, rel[-1]) in ALIASES:
        return []
    allowed = ALLOWED[layer] | PRIMITIVES | {layer, ""}
    out = []
    for target, line in sorted(imported_layers(path, source)):
        if target == "":   # the package root's __version__ (harmless; its other names are the core's)
            continue
        if target not in allowed:
            out.append(f"{path.relative_to(SRC)}:{line}: {layer} imports {target}")
    return out


def test_every_module_respects_its_layer():
    found = [v for path in sorted(SRC.rglob("*.py")) for v in violations(path)]
    assert not found, "layering broken:\n" + "\n".join(found)


def test_every_subpackage_has_a_layer():
    units = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert units - {"data"} <= set(ALLOWED), units - set(ALLOWED)


def test_only_plotting_imports_matplotlib():
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        if _layer(path.relative_to(SRC).parts) == "plotting":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            if any(n.split(".")[0] == "matplotlib" for n in names):
                offenders.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert not offenders, offenders


@pytest.mark.parametrize("where,source,rule", [
    ("kernels/gmrf.py", "from ..core.priors import analysis_for\n", "kernels imports core"),
    ("kernels/gmrf.py", "def f():\n    from corrpriors.core import model\n", "kernels imports core"),
    ("linalg/sparse.py", "from ..kernels import grid_precision\n", "linalg imports kernels"),
    ("baselines/dirichlet.py", "from ..core.special import x\n", "baselines imports core"),
    ("core/model.py", "import corrpriors.mdp\n", "core imports mdp"),
    ("core/priors/dense.py", "from ...applications import transitions\n", "core imports applications"),
    ("plotting/_policy.py", "from ..envs.gridworld import ACTION_VECTORS\n", "plotting imports envs"),
    ("applications/psrl.py", "from ..runner import run_experiment\n", "applications imports runner"),
    ("mdp/planning.py", "from .. import runner\n", "mdp imports runner"),
    ("core/cavi.py", "from .. import plotting\n", "core imports plotting"),
])
def test_the_checker_catches_each_broken_rule(where, source, rule):
    """The rules bite: each source breaks one, at module level or inside a function."""
    found = violations(SRC / where, source)
    assert any(rule in v for v in found), found


def test_the_checker_accepts_allowed_imports():
    assert violations(SRC / "kernels/gmrf.py", "from ..linalg import analysis_for\n") == []
    assert violations(SRC / "core/priors/sparse.py", "from ...linalg import SparseCholesky\n") == []
    assert violations(SRC / "cli/reproduce.py", "from ..runner import _config\n") == []
    assert violations(SRC / "experiments/psrl_grid.py", "from ..runner.protocol import SeedResult\n") == []


@pytest.mark.parametrize("old,new,name", [
    ("corrpriors.core.prior", "corrpriors.core.priors.base", "GaussianPrior"),
    ("corrpriors.core.dense_prior", "corrpriors.core.priors.dense", "DenseCovariancePrior"),
    ("corrpriors.core.sparse_prior", "corrpriors.core.priors.sparse", "SparsePrecisionPrior"),
    ("corrpriors.core.sparse_prior", "corrpriors.linalg", "analysis_for"),
    ("corrpriors.core.sparse_prior", "corrpriors._validation", "check_precision"),
    ("corrpriors.core.linalg", "corrpriors.linalg.dense", "jittered_cholesky"),
    ("corrpriors.core.sparse_linalg", "corrpriors.linalg.sparse", "SparseCholesky"),
    ("corrpriors.core.special", "corrpriors._special", "softplus_gap"),
    ("corrpriors.experiments", "corrpriors.runner", "run_experiment"),
    ("corrpriors.experiments", "corrpriors.runner", "SeedResult"),
])
def test_moved_modules_still_import_with_a_deprecation_warning(old, new, name):
    """Every import path users had before the 0.2 layout works and names the new one."""
    import importlib

    with pytest.warns(DeprecationWarning, match=rf"{old.replace('.', '[.]')} moved to corrpriors[.]"):
        value = getattr(importlib.import_module(old), name)
    assert value is getattr(importlib.import_module(new), name)


def test_public_names_of_the_old_layout_still_import():
    """The names the root, core, applications and experiments packages exported before 0.2."""
    import corrpriors.applications as apps
    import corrpriors.core as core

    for module, names in [(core, ["CorrelatedMultinomial", "ScaleSearch", "SparsePrecisionPrior", "VIResult"]),
                          (apps, ["CorrelatedTransitionModel", "PSRLAgent", "run_psrl"]),
                          (corrpriors, ["CorrelatedMultinomial", "DirichletMultinomial", "run_gibbs"])]:
        for name in names:
            assert hasattr(module, name), (module.__name__, name)
    from corrpriors.cli import build_parser, main  # noqa: F401  (the console script's target)
    from corrpriors.experiments import psrl_grid, system_id  # noqa: F401

