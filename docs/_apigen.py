"""Generate the API reference pages and the command-line help for the documentation.

Run by ``conf.py`` at the start of every build, so the reference always follows the code:

* ``docs/api/`` gets one page per public module listing every name in the module's
  ``__all__`` (classes, functions, then other objects), each with an autosummary stub
  generated from its docstring. A name re-exported by several modules is documented once,
  under the first module of :data:`MODULES`.
* ``docs/_generated/cli-<command>.txt`` holds ``corrpriors <command> --help``, and
  ``cli-commands.rst`` one section per sub-command for :doc:`cli`.

To document a new public module, add it to :data:`MODULES`.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import pkgutil
from pathlib import Path

from corrpriors._fileio import atomic_write_bytes

#: (module, page title, one line for the API index)
MODULES = [
    ("corrpriors", "corrpriors: models and inference",
     "The correlated multinomial model, the Dirichlet baseline, kernel selection, the "
     "stick-breaking transform, the Gibbs sampler and the warnings."),
    ("corrpriors.kernels", "corrpriors.kernels: covariance functions",
     "Stationary kernels, their sums, products and scalings, and distances between covariates."),
    ("corrpriors.applications", "corrpriors.applications: decision making",
     "Imitation learning, subgoal inference, transition models (system identification) and "
     "posterior-sampling RL."),
    ("corrpriors.mdp", "corrpriors.mdp: tabular MDPs",
     "The MDP record, planners, rollouts and evaluation metrics."),
    ("corrpriors.envs", "corrpriors.envs: environments",
     "The paper's grid worlds and queueing network, also registered with Gymnasium."),
    ("corrpriors.plotting", "corrpriors.plotting: figures",
     "Policy maps, value and error maps (matplotlib is imported only here)."),
    ("corrpriors.runner", "corrpriors.runner: running experiments",
     "The experiment protocol, the registry and the runner behind ``corrpriors reproduce``."),
    ("corrpriors.linalg", "corrpriors.linalg: linear algebra",
     "The jittered dense Cholesky and the sparse Cholesky with selected inversion."),
]


def _write_if_changed(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` unless it already holds it (keeps incremental builds fast)."""
    data = text.encode("utf-8")
    if path.exists() and path.read_bytes() == data:
        return
    atomic_write_bytes(path, data)


def _kind(obj: object) -> str:
    if inspect.isclass(obj):
        return "classes"
    if inspect.isfunction(obj) or inspect.isbuiltin(obj):
        return "functions"
    return "data"


def _attribute_doc(module_name: str, name: str) -> list[str]:
    """The ``#:`` comment documenting the module-level ``name`` in the package's sources."""
    from sphinx.pycode import ModuleAnalyzer

    module = importlib.import_module(module_name)
    candidates = [module_name]
    if hasattr(module, "__path__"):
        candidates += [m.name for m in pkgutil.walk_packages(module.__path__, module_name + ".")]
    for candidate in candidates:
        try:
            docs = ModuleAnalyzer.for_module(candidate).find_attr_docs()
        except Exception:  # noqa: BLE001  (no source: nothing to document)
            continue
        if ("", name) in docs:
            return [line for line in docs[("", name)] if line.strip()]
    return []


def _data_entry(module_name: str, name: str, obj: object) -> list[str]:
    value = " ".join(repr(obj).split())
    if len(value) > 70:
        value = f"<{type(obj).__name__}>"
    doc = _attribute_doc(module_name, name) or [f"A ``{type(obj).__name__}``."]
    return [f".. py:data:: {name}", f"   :value: {value}", "", *[f"   {d}" for d in doc], ""]


def public_names(module_name: str) -> list[str]:
    """The documented names of a module: its ``__all__`` without submodules and dunders."""
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    if names is None:
        raise ValueError(f"{module_name}: expected an __all__ listing its public names")
    return [n for n in names
            if not n.startswith("__") and not inspect.ismodule(getattr(module, n))]


def _module_page(module_name: str, title: str, seen: dict[int, str]) -> str:
    module = importlib.import_module(module_name)
    groups: dict[str, list[str]] = {"classes": [], "functions": [], "data": []}
    elsewhere: list[str] = []
    for name in sorted(public_names(module_name), key=str.lower):
        obj = getattr(module, name)
        key = id(obj)
        if key in seen and _kind(obj) != "data":
            elsewhere.append(f"``{name}`` (:obj:`{seen[key]}`)")
            continue
        seen[key] = f"{module_name}.{name}"
        groups[_kind(obj)].append(name)
    lines = [title, "=" * len(title), "", f".. automodule:: {module_name}",
             "   :no-members:", "", f".. currentmodule:: {module_name}", ""]
    headings = {"classes": "Classes", "functions": "Functions", "data": "Constants"}
    for kind, names in groups.items():
        if not names:
            continue
        if kind == "data":
            lines += [headings[kind], "-" * len(headings[kind]), ""]
            for n in names:
                lines += _data_entry(module_name, n, getattr(module, n))
            continue
        lines += [headings[kind], "-" * len(headings[kind]), "",
                  ".. autosummary::", "   :toctree: generated/", "",
                  *[f"   {n}" for n in names], ""]
    if elsewhere:
        lines += ["Also exported here: " + ", ".join(elsewhere) + ".", ""]
    return "\n".join(lines)


def write_api_pages(out_dir: Path) -> None:
    """Write ``index.rst`` and one page per module of :data:`MODULES` into ``out_dir``."""
    out_dir = Path(out_dir)
    seen: dict[int, str] = {}
    index = ["API reference", "=============", "",
             "Every public name of the package, generated from its docstring. The root",
             "package holds the model; the subpackages build decision making on top of it.", "",
             ".. toctree::", "   :maxdepth: 1", "", *[f"   {m}" for m, _, _ in MODULES], "",
             ".. list-table::", "   :widths: 30 70", ""]
    for module_name, title, blurb in MODULES:
        _write_if_changed(out_dir / f"{module_name}.rst", _module_page(module_name, title, seen))
        index += [f"   * - :doc:`{module_name}`", f"     - {blurb}"]
    _write_if_changed(out_dir / "index.rst", "\n".join(index) + "\n")


def _subcommand_parsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def write_cli_help(out_dir: Path, width: int = 88) -> None:
    """Write ``corrpriors --help`` and each ``corrpriors <command> --help`` as text files."""
    from corrpriors.cli import build_parser

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width)   # argparse wraps at the terminal width
    try:
        parser = build_parser()
        _write_if_changed(Path(out_dir) / "cli-corrpriors.txt", parser.format_help())
        sections = ["``corrpriors``", "-" * 14, "",
                    ".. literalinclude:: /_generated/cli-corrpriors.txt", "   :language: none", ""]
        for name, sub in _subcommand_parsers(parser).items():
            _write_if_changed(Path(out_dir) / f"cli-{name}.txt", sub.format_help())
            title = f"``corrpriors {name}``"
            sections += [f".. _cli-{name}:", "", title, "-" * len(title), "",
                         f".. literalinclude:: /_generated/cli-{name}.txt", "   :language: none", ""]
        _write_if_changed(Path(out_dir) / "cli-commands.rst", "\n".join(sections))
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def write_method_names(out_dir: Path) -> None:
    """Write the method vocabulary (:mod:`corrpriors._methods`) as an rst table, ``method-names.rst``.

    The docs include it, so the names, labels and colours a reader sees there are the ones every
    command, ``metrics.json`` and figure uses (nothing else spells them).
    """
    from corrpriors import _methods

    rows = [".. list-table::", "   :header-rows: 1", "   :widths: 18 22 10 50", "",
            "   * - name", "     - label in figures", "     - colour", "     - what it is"]
    for name, model in _methods.MODELS.items():
        rows += [f"   * - ``{name}``", f"     - {model.label}", f"     - ``{model.colour}``",
                 f"     - {model.description}"]
    named = [(n, m.concentration) for n, m in _methods.MODELS.items() if m.concentration is not None]
    if named:
        name, conc = named[-1]
        rows += ["", "A model named for its Dirichlet concentration (" + "; ".join(
                     f"``{n}``: α = {_methods.alpha_text(c.value)}, set by ``{c.setting}``" for n, c in named)
                 + ") keeps its name, colour and marker when a run sets another α; its label and description "
                 f"then state the α used (with ``--set {conc.setting}=1`` ``{name}`` is labelled "
                 f"{_methods.label(name, {conc.setting: 1.0})}) and the run's table says so under the numbers."]
    qualified: dict[tuple, tuple] = {}      # one entry per qualifier: it and every model it changes
    for n, m in _methods.MODELS.items():
        for q in m.qualifiers:
            key = (q.setting, q.values, q.number, q.label, q.requires, q.unless, q.note, q.given, q.own)
            qualified.setdefault(key, (q, []))[1].append(n)
    if qualified:
        rows += ["", "A model that a setting of the run changes keeps its name, colour and marker too; its label "
                 "and description then say what the setting changed, and the run's table and report say so "
                 "(the label's words are appended to the model's; words in parentheses share one pair):", ""]
        for q, names in qualified.values():
            values = [_methods.setting_text(v) for v in q.values] + (["<number>"] if q.number else [])
            value = values[0]
            when = "".join(f" with ``{k}={_methods.setting_text(v)}``" for k, v in q.requires) + "".join(
                f" unless ``{k}={_methods.setting_text(v)}``" for k, v in q.unless)
            rows += [f"* ``{q.setting}={' or '.join(values)}``{when} ({', '.join(f'``{n}``' for n in names)}): "
                     f"\"{q.label.format(value=value).strip()}\" -- {q.note.format(value=value)} "
                     f"({q.origin(value)})"]
    rows += ["", "Variants, appended as ``<model>_<variant>`` (same colour, their own line style):", "",
             ".. list-table::", "   :header-rows: 1", "   :widths: 18 22 10 50", "",
             "   * - suffix", "     - label", "     - line style", "     - what it does"]
    for name, variant in _methods.VARIANTS.items():
        if name:
            rows += [f"   * - ``_{name}``", f"     - {variant.label}", f"     - ``{variant.linestyle}``",
                     f"     - {variant.description}"]
    rows += ["", "Renamed in 0.3 (results written before are read under the new names, with a note):", ""]
    for experiment, mapping in _methods.LEGACY_NAMES.items():
        rows += [f"* ``{experiment}``: " + ", ".join(f"``{old}`` → ``{new}``" for old, new in mapping.items())]
    _write_if_changed(Path(out_dir) / "method-names.rst", "\n".join(rows) + "\n")

