"""The one method vocabulary: every method name, its display label, description, colour and line style.

Every command, ``metrics.json``, terminal table, figure, report and doc page names a method by
the keys below; legends read their labels, colours and line styles from here and nothing else
spells them. A name is a *model* (:data:`MODELS`: what is believed, which gives the colour and
the marker) optionally followed by ``_<variant>`` (:data:`VARIANTS`: how it is used, which
gives the line style): ``pg_absolute_sampling`` is the model ``pg_absolute`` with the PSRL
variant ``sampling``.

``pg`` is the correlated prior with *relative* categories (a next state is the move from the
current one) -- the default everywhere; ``pg_absolute`` is the paper's absolute encoding
(categories = next states in index order).

Results written before this vocabulary (``corrpriors`` 0.2 and earlier) called the absolute
encoding ``pg`` and the relative one ``pg_offset`` in the ``system-id`` experiment.
:data:`LEGACY_NAMES` maps those names; seed files and ``metrics.json`` records carry
:data:`VOCABULARY` and are migrated on load by their recorded version (never guessed from their
content), with a one-line note (:func:`migration_note`).

Adding a method (a new experiment's model or variant) is one entry here: a :class:`Model` in
:data:`MODELS` (label, one-line description, a colour no other model uses unless it is the same
belief, a marker) or a :class:`Variant` in :data:`VARIANTS` (label, description, a line style no
other variant uses). Experiments list their names in ``METHODS`` (and ``OPTIONAL_METHODS``);
``tests/test_vocabulary.py`` checks every registered experiment against this table and names any
missing method, and the docs' table of names is generated from it.

This module imports nothing from matplotlib: colours are hex strings, line styles matplotlib's
short names, so the runner and the report can use it without drawing.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

#: Version of the method vocabulary recorded in seed files and ``metrics.json`` (absent: 1).
VOCABULARY = 2


@dataclasses.dataclass(frozen=True)
class Model:
    """A belief model: display label, one-line description, colour (hex) and marker."""

    label: str
    description: str
    colour: str
    marker: str


@dataclasses.dataclass(frozen=True)
class Variant:
    """How a model is used (e.g. a PSRL variant): display label, description and line style."""

    label: str
    description: str
    linestyle: str


@dataclasses.dataclass(frozen=True)
class Method:
    """One method name resolved against the table: model + variant."""

    name: str
    model: str
    variant: str
    label: str
    description: str
    colour: str
    linestyle: str
    marker: str

    def as_json(self) -> dict:
        """The record written to ``metrics.json`` (label, description, colour, line style, marker)."""
        return {"label": self.label, "model": self.model, "variant": self.variant,
                "description": self.description, "colour": self.colour, "linestyle": self.linestyle,
                "marker": self.marker}


MODELS: dict[str, Model] = {
    "pg": Model("PG", "the correlated prior (Pólya-Gamma VI), the default; for transitions its categories "
                "are moves relative to the current state", "#1f77b4", "o"),
    "pg_absolute": Model("PG absolute (the paper's)", "correlated prior, categories = next states in index "
                         "order (the paper's encoding)", "#ff7f0e", "s"),
    "dirichlet_uniform": Model("Dirichlet α=1", "independent Dirichlet posteriors, α = 1", "#2ca02c", "^"),
    "dirichlet_sparse": Model("Dirichlet α=1e-3", "independent Dirichlet posteriors, α = 1e-3", "#d62728", "v"),
    # imitation learning: policies, not transitions (categories = actions; no relative/absolute)
    "dirichlet": Model("Dirichlet", "independent Dirichlet policy posteriors (imitation; α = "
                       "Config.dirichlet_alpha, 1e-3 by default, hence the colour of dirichlet_sparse)",
                       "#d62728", "v"),
    # subgoal modelling
    "pg_imitation": Model("PG imitation", "the correlated policy prior of imitation learning, without subgoals "
                          "(imitation's pg, hence its colour)", "#1f77b4", "o"),
    "pg_subgoal": Model("PG subgoal", "subgoal model with correlated subgoal priors", "#9467bd", "D"),
    "dirichlet_subgoal": Model("Dirichlet subgoal", "subgoal model with independent Dir(α) subgoal priors",
                               "#8c564b", "P"),
    # transfer between environments
    "pg_transfer": Model("PG transfer", "correlated prior over (task, state): the target task borrows from "
                         "the source tasks as much as a task similarity learned from the data says",
                         "#e377c2", "X"),
    "pg_pooled": Model("PG pooled", "one correlated prior fitted to the data of all tasks as if they were one "
                       "task", "#17becf", "*"),
}

VARIANTS: dict[str, Variant] = {
    "": Variant("", "", "-"),
    "sampling": Variant("sampling", "greedy on the average optimal Q of posterior draws", "-"),
    "mean": Variant("mean", "greedy on the optimal Q of the posterior-mean model", "--"),
    "elbo": Variant("length scale by ELBO", "the length scale chosen by the ELBO among candidates", "-."),
    "em": Variant("scale by EM", "the prior scale learned by variational EM", ":"),
}

#: Old name -> new name, per experiment, for results written before :data:`VOCABULARY` 2.
LEGACY_NAMES: dict[str, dict[str, str]] = {
    "system-id": {"pg": "pg_absolute", "pg_offset": "pg"},
}


def split(name: str) -> tuple[str, str]:
    """Split a method name into ``(model, variant)``; raise ``ValueError`` for an unknown name."""
    if not isinstance(name, str):
        raise TypeError(f"method: expected a string, got {type(name).__name__}")
    if name in MODELS:
        return name, ""
    for variant in VARIANTS:
        if variant and name.endswith("_" + variant) and name[: -len(variant) - 1] in MODELS:
            return name[: -len(variant) - 1], variant
    raise ValueError(f"method: {name!r} is not in the method vocabulary (models {', '.join(MODELS)}, "
                     f"optionally followed by _{', _'.join(v for v in VARIANTS if v)})")


def is_known(name: str) -> bool:
    """Whether ``name`` is a model or a model with a known variant."""
    try:
        split(name)
    except (TypeError, ValueError):
        return False
    return True


def method(name: str) -> Method:
    """Resolve ``name`` (``"pg_absolute_sampling"``) to its label, description, colour and style."""
    model, variant = split(name)
    m, v = MODELS[model], VARIANTS[variant]
    label = m.label if not variant else f"{m.label}, {v.label}"
    description = m.description if not variant else f"{m.description}; {v.description}"
    return Method(name, model, variant, label, description, m.colour, v.linestyle, m.marker)


def label(name: str) -> str:
    """The display label of ``name``; an unknown name (a user's plug-in) is shown as it is."""
    return method(name).label if is_known(name) else name


def labels(names: Any) -> dict[str, str]:
    """``{name: label}`` for every name of ``names``."""
    return {n: label(n) for n in names}


def style(name: str) -> dict[str, str]:
    """Matplotlib keywords of ``name``'s line: ``color``, ``linestyle``, ``marker`` (empty if unknown)."""
    if not is_known(name):
        return {}
    m = method(name)
    return {"color": m.colour, "linestyle": m.linestyle, "marker": m.marker}


def describe(names: Any) -> dict[str, dict]:
    """The ``metrics.json`` block ``methods``: every known name of ``names`` with its table entry."""
    return {n: method(n).as_json() for n in names if is_known(n)}


# ----------------------------------------------------------------------------- old results


def renames(experiment: str, vocabulary: Any) -> dict[str, str]:
    """Old -> new names for a record of ``experiment`` written under ``vocabulary`` (None: version 1)."""
    version = 1 if vocabulary is None else vocabulary
    if version == VOCABULARY:
        return {}
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version < VOCABULARY:
        raise ValueError(f"vocabulary: expected a version from 1 to {VOCABULARY}, got {vocabulary!r}")
    return dict(LEGACY_NAMES.get(experiment, {}))


def rename_text(text: str, mapping: Mapping[str, str]) -> str:
    """Replace whole-word method names in ``text`` simultaneously (``pg`` -> ``pg_absolute`` and
    ``pg_offset`` -> ``pg`` in one pass, so no name is renamed twice).
    """
    if not mapping:
        return text
    pattern = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(
        re.escape(k) for k in sorted(mapping, key=len, reverse=True)) + r")(?![A-Za-z0-9_])")
    return pattern.sub(lambda m: mapping[m.group(1)], text)


def rename_keys(value: Any, mapping: Mapping[str, str], *, text: bool = False) -> Any:
    """Rename dict keys (at any depth) that are old method names; with ``text``, also words in strings."""
    if not mapping:
        return value
    if isinstance(value, Mapping):
        return {mapping.get(k, k) if isinstance(k, str) else k: rename_keys(v, mapping, text=text)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(rename_keys(v, mapping, text=text) for v in value)
    if text and isinstance(value, str):
        return rename_text(value, mapping)
    return value


def migration_note(experiment: str, mapping: Mapping[str, str], where: str) -> str:
    """One line saying that ``where`` was written under the old names and how they were read."""
    pairs = ", ".join(f"{old} -> {new}" for old, new in mapping.items())
    return f"{experiment}: {where} written under the old method names; read as {pairs}"


def migrate_summary(summary: Mapping) -> tuple[dict, str | None]:
    """Return a ``metrics.json`` record in the current vocabulary and a note (None if it already was).

    Method keys are renamed at any depth, and method names in the notes' and claims' text. The
    record's ``vocabulary`` becomes :data:`VOCABULARY`, its ``methods`` block is filled in and
    the note is added to ``extra["notes"]``.
    """
    record = dict(summary)
    mapping = renames(str(record.get("experiment", "")), record.get("vocabulary"))
    note = None
    if mapping:
        record = rename_keys(record, mapping, text=False)
        extra = record.get("extra")
        extra = dict(extra) if isinstance(extra, Mapping) else {}   # a malformed record stays readable
        for key in ("notes", "claims"):
            if key in extra:
                extra[key] = rename_keys(extra[key], mapping, text=True)
        note = migration_note(str(record.get("experiment", "")), mapping, "metrics.json")
        notes = extra.get("notes")
        extra["notes"] = [note, *(notes if isinstance(notes, list) else [])]
        record["extra"] = extra
    record["vocabulary"] = VOCABULARY
    names: list[str] = []
    metrics = record.get("metrics")
    for block in metrics.values() if isinstance(metrics, Mapping) else ():
        methods = block.get("methods") if isinstance(block, Mapping) else None
        names += [m for m in (methods if isinstance(methods, Mapping) else ()) if isinstance(m, str)
                  and m not in names]
    record.setdefault("methods", describe(names))
    return record, note


__all__ = [
    "LEGACY_NAMES",
    "MODELS",
    "Method",
    "Model",
    "VARIANTS",
    "VOCABULARY",
    "Variant",
    "describe",
    "is_known",
    "label",
    "labels",
    "method",
    "migrate_summary",
    "migration_note",
    "rename_keys",
    "rename_text",
    "renames",
    "split",
    "style",
]
