"""The one method vocabulary: every method name, its display label, description, colour and line style.

Every command, ``metrics.json``, terminal table, figure, report and doc page names a method by
the keys below; legends read their labels, colours and line styles from here and nothing else
spells them. A name is a *model* (:data:`MODELS`: what is believed, which gives the colour and
the marker) optionally followed by ``_<variant>`` (:data:`VARIANTS`: how it is used, which
gives the line style): ``pg_absolute_sampling`` is the model ``pg_absolute`` with the PSRL
variant ``sampling``.

``pg`` is the correlated prior with *relative* categories (a next state is the move from the
current one) -- the default encoding everywhere; ``pg_absolute`` is the paper's absolute encoding
(categories = next states in index order). Both are the plain correlated model, the paper's,
unless a run's settings add the per-(state, action) layer: ``corrpriors sysid`` and ``psrl`` do
by default (``concentration=auto``) on fewer than 2,000 states, and say so in every label
(``PG + per-pair layer``; :data:`MODELS`' qualifiers below).

Results written under method vocabulary 1 (before this one; the package version stayed 0.1.0
throughout) called the absolute encoding ``pg`` and the relative one ``pg_offset`` in the
``system-id`` experiment.
:data:`LEGACY_NAMES` maps those names; seed files and ``metrics.json`` records carry
:data:`VOCABULARY` and are migrated on load by their recorded version (never guessed from their
content), with a one-line note (:func:`migration_note`).

A model named for a Dirichlet concentration (``dirichlet_sparse`` is α = 1e-3) records the
setting that can change it (:class:`Concentration`: ``alpha_sparse``). A run whose configuration
sets another α keeps the name, its colour and its marker, and its label and description state the
α used (``Dirichlet α=1`` for ``--set alpha_sparse=1``): :func:`method`, :func:`label`,
:func:`labels` and :func:`describe` take the configuration (a ``Config`` or the ``config`` block
of a ``metrics.json`` record): the runner writes those labels to ``metrics.json`` and the
figures take them from the record's configuration (:func:`record_labels`), so the terminal, the
record, the figures and the report agree. Without a configuration, or with the name's own α,
every label is the table's.

A setting that changes what a model *is* -- not only its numbers -- is a :class:`Qualifier` of
the model, handled the same way: the transfer experiment's ``layer=true`` gives ``pg``,
``pg_transfer`` and ``pg_pooled`` the per-(state, action) Dirichlet layer (labelled ``PG +
per-pair layer``, ...), ``similarity=<ρ>`` fixes ``pg_transfer``'s similarity (``PG transfer
(ρ fixed at 0.875)``) and ``similarity_rule=average`` mixes over the similarities (``PG transfer
(ρ averaged)``). The Gymnasium commands' ``concentration``, ``contamination`` and ``support``
do the same for ``pg`` and ``pg_absolute``: their default gives the layer (``PG + per-pair
layer``; the runs record ``none`` where the environment's size drops it), and switching a part
off says which (``PG + per-pair layer (no contamination)``). The imitation and subgoal
experiments' ``dirichlet_alpha`` qualifies ``dirichlet`` and ``dirichlet_subgoal``, whose labels
do not state their default α = 1e-3 (``--set dirichlet_alpha=1``: ``Dirichlet α=1``). Names, colours and markers stay,
so figures of two runs stay comparable; the terminal table says which setting changed which
model (:func:`setting_notes`).

Adding a method (a new experiment's model or variant) is one entry here: a :class:`Model` in
:data:`MODELS` (label, one-line description, a colour no other model uses unless it is the same
belief, a marker, the :class:`Concentration` its label states, if any, and the
:class:`Qualifier` settings that change it) or a :class:`Variant`
in :data:`VARIANTS` (label, description, a line style no other variant uses). Experiments list
their names in ``METHODS`` (and ``OPTIONAL_METHODS``); ``tests/test_vocabulary.py`` checks every
registered experiment against this table and names any missing method, and the docs' table of
names is generated from it.

This module imports nothing from matplotlib: colours are hex strings, line styles matplotlib's
short names, so the runner and the report can use it without drawing.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import re
from collections.abc import Mapping
from typing import Any

#: Version of the method vocabulary recorded in seed files and ``metrics.json`` (absent: 1).
VOCABULARY = 2


def alpha_text(value: float) -> str:
    """A concentration as labels write it: its shortest exact decimal, in powers of ten below 0.01.

    ``1e-3``, ``2.5e-4``, ``0.01``, ``0.5``, ``1``, ``30``; from 10,000 on in powers of ten too
    (``1e4``). The text reads back as the same float, so two different α never share a label.
    """
    x = float(value)
    if x != 0 and math.isfinite(x) and not 0.01 <= abs(x) < 1e4:
        for digits in range(17):
            text = f"{x:.{digits}e}"
            if float(text) == x:
                break
        mantissa, exponent = text.split("e")
        return f"{mantissa}e{int(exponent)}"
    text = repr(x)
    return text[:-2] if text.endswith(".0") else text


@dataclasses.dataclass(frozen=True)
class Concentration:
    """The Dirichlet concentration a model's name stands for, and the setting that can change it.

    Attributes
    ----------
    setting : str
        The ``Config`` field of the experiments that sets this model's α (``"alpha_sparse"``).
    value : float
        The α of the name: its label ends in ``α=<value>`` and its description says
        ``α = <value>`` (both checked when the table is built).
    """

    setting: str
    value: float

    def origin(self) -> str:
        """``"set by alpha_sparse; the name's own α is 1e-3"``: where another α came from."""
        return f"set by {self.setting}; the name's own α is {alpha_text(self.value)}"


_MISSING = object()


def _setting(config: Any, name: str) -> Any:
    """The value ``config`` (a ``Config`` or a mapping) gives the setting ``name`` (``_MISSING`` if none)."""
    if config is None:
        return _MISSING
    if isinstance(config, Mapping):
        return config.get(name, _MISSING)
    return getattr(config, name, _MISSING)


def _same(a: Any, b: Any) -> bool:
    """``a == b``, except that a bool equals only a bool (``True`` is not ``1``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    try:
        return bool(a == b)
    except Exception:   # an object whose == does not give a truth value: not the same
        return False


def _number(value: Any) -> float | None:
    """``value`` as a float if it is a number or a number written as text (not a bool), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def setting_text(value: Any) -> str:
    """A setting's value as ``--set`` writes it: ``true``, ``0.875``, ``average``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    number = _number(value)
    return alpha_text(number) if number is not None and math.isfinite(number) else str(value)


@dataclasses.dataclass(frozen=True)
class Qualifier:
    """A setting that changes what a model *is* in a run, and how its label and description say so.

    ``--set layer=true`` gives the transfer experiment's PG methods a per-(state, action) layer:
    the names stay (and so their colours and markers), the labels and descriptions say it.

    Attributes
    ----------
    setting : str
        The ``Config`` field (``"layer"``).
    default : object
        The value under which the model is the table's entry: the setting's default, unless
        the experiment's default itself changes the model (the ``concentration=auto`` of
        ``corrpriors sysid`` and ``psrl``: ``default`` is then ``"none"`` and ``given`` says
        where the value came from).
    values : tuple
        The values that change the model (``(True,)``; a bool matches only a bool).
    number : bool
        Also (or instead) any finite number, or a number written as text (``similarity=0.875``),
        within ``bounds``.
    bounds : tuple of (float, float)
        ``(low, high)``: a number outside ``[low, high)`` is not a value of the setting (a
        hand-edited record's ``similarity=-3``) and leaves the table's entry; empty: no bounds.
    label : str
        Appended to the label (``" + per-pair layer"``); ``{value}`` stands for the value. A
        label in parentheses (``" (no contamination)"``) joins the parentheses another
        qualifier's label ended in (``"PG + per-pair layer (c fixed at 0.5; no contamination)"``).
    description : str
        The description's words under the setting: they replace ``replaces`` in the model's
        description, or are appended after ``"; "`` when ``replaces`` is empty; ``{value}``
        as in ``label``. The origin (:meth:`origin`) follows in parentheses.
    note : str
        What the model is then, in a few words, for the terminal table's note (``{value}`` too).
    own : str
        What the default gives, completing "the default <setting>=<default> ..." in :meth:`origin`.
    replaces : str
        Words of the model's description that are false under the setting (checked to occur
        once, in the description or in another qualifier's, when the table is built); empty:
        nothing in it is false, the words are appended.
    requires : tuple of (str, object)
        Other settings that must have these values (or be missing) for this one to apply
        (``similarity_rule`` is unused when ``similarity`` is fixed).
    unless : tuple of (str, object)
        Other settings that must not have these values for this one to apply (``contamination=none``
        removes a part of the per-pair layer, which ``concentration=none`` has switched off).
    given : str
        Replaces :meth:`origin`'s "set by ..." where the value is (or can be) the experiment's
        default; ``{value}`` as in ``label``.
    """

    setting: str
    default: Any
    values: tuple = ()
    number: bool = False
    bounds: tuple = ()
    label: str = ""
    description: str = ""
    note: str = ""
    own: str = ""
    replaces: str = ""
    requires: tuple = ()
    unless: tuple = ()
    given: str = ""

    def applies(self, config: Any) -> str | None:
        """The value's text (:func:`setting_text`) when ``config`` sets a value that changes the model, else None.

        A configuration without the setting, with its default or with a value of another kind
        (``layer="yes"`` from a hand-written record) leaves the table's entry.
        """
        for name, want in self.requires:   # a record without the other setting had its default
            other = _setting(config, name)
            if other is not _MISSING and not _same(other, want):
                return None
        if any(_same(_setting(config, name), not_want) for name, not_want in self.unless):
            return None
        value = _setting(config, self.setting)
        if value is _MISSING or _same(value, self.default):
            return None
        if any(_same(value, v) for v in self.values):
            return setting_text(value)
        number = _number(value) if self.number else None
        if number is None or not math.isfinite(number) or number == _number(self.default):
            return None
        if self.bounds and not self.bounds[0] <= number < self.bounds[1]:
            return None
        return setting_text(number + 0.0)   # -0.0 reads as 0

    def origin(self, value: str) -> str:
        """``"set by layer=true; the default layer=false is the plain correlated model"`` (or ``given``)."""
        if self.given:
            return self.given.format(value=value)
        return f"set by {self.setting}={value}; the default {self.setting}={setting_text(self.default)} {self.own}"


@dataclasses.dataclass(frozen=True)
class Model:
    """A belief model: display label, one-line description, colour (hex), marker, concentration, qualifiers.

    ``concentration`` is set for a model whose label states its Dirichlet α; under a configuration
    with another α, :meth:`under` gives the label and description of the α used. ``qualifiers``
    are the settings that change what the model is (:class:`Qualifier`); under a configuration
    that sets one, :meth:`under` gives the label and description that say so.
    """

    label: str
    description: str
    colour: str
    marker: str
    concentration: Concentration | None = None
    qualifiers: tuple[Qualifier, ...] = ()

    def __post_init__(self) -> None:
        if self.concentration is not None:
            text = alpha_text(self.concentration.value)
            if not self.label.endswith(f" α={text}") or self.description.count(f"α = {text}") != 1:
                raise ValueError(f"Model {self.label!r}: a label ending in 'α={text}' and a description "
                                 f"saying 'α = {text}' once are expected of a model with concentration "
                                 f"{self.concentration}")
        if self.concentration is not None and self.qualifiers:
            raise ValueError(f"Model {self.label!r}: a label that ends in its α takes no qualifiers "
                             "(their words are appended to the label)")
        for q in self.qualifiers:
            if not q.label or not q.description or not q.note or not (q.own or q.given):
                raise ValueError(f"Model {self.label!r}: the qualifier of {q.setting!r} needs a label, a "
                                 "description, a note and what its default gives (own) or where its "
                                 "value came from (given)")
            texts = [self.description] + [o.description for o in self.qualifiers if o is not q]
            if q.replaces and not any(text.count(q.replaces) == 1 for text in texts):
                raise ValueError(f"Model {self.label!r}: the qualifier of {q.setting!r} replaces "
                                 f"{q.replaces!r}, which the description (or another qualifier's) must say once")

    def changes(self, config: Any) -> list[tuple[Qualifier, str]]:
        """The qualifiers ``config`` sets, each with its value's text (empty: the table's model)."""
        out = []
        for q in self.qualifiers:
            value = q.applies(config)
            if value is not None:
                out.append((q, value))
        return out

    def alpha(self, config: Any) -> float | None:
        """The α that ``config`` sets for this model where it differs from the name's, else None.

        ``config`` is an experiment's ``Config`` or a mapping (the ``config`` block of a
        ``metrics.json`` record); a configuration without the setting, or with a value that is
        not a number, leaves the name's α.
        """
        c = self.concentration
        if c is None or config is None:
            return None
        value = config.get(c.setting) if isinstance(config, Mapping) else getattr(config, c.setting, None)
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or float(value) == c.value:
            return None
        return float(value)

    def under(self, config: Any) -> Model:
        """Return the model with the label and description of the α and the qualifiers ``config``
        sets (itself if none).
        """
        c, alpha, changes = self.concentration, self.alpha(config), self.changes(config)
        if (c is None or alpha is None) and not changes:
            return self
        label, description = self.label, self.description
        if c is not None and alpha is not None:
            old, new = alpha_text(c.value), alpha_text(alpha)
            label = label[: -len(old)] + new
            description = description.replace(f"α = {old}", f"α = {new}") + f" ({c.origin()})"
            c = dataclasses.replace(c, value=alpha)
        opened = False   # whether the last qualifier's words ended in parentheses
        for q, value in changes:
            words = q.label.format(value=value)
            if opened and words.startswith(" (") and label.endswith(")"):
                words = "; " + words[2:]
                label = label[:-1]
            label += words
            opened = words.endswith(")")
            words = f"{q.description.format(value=value)} ({q.origin(value)})"
            description = (description.replace(q.replaces, words) if q.replaces and q.replaces in description
                           else f"{description}; {words}")
        return dataclasses.replace(self, label=label, description=description, concentration=c, qualifiers=())


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


#: The words of ``pg``'s and ``pg_absolute``'s descriptions that a per-pair layer makes false.
_PLAIN = "plain: no per-pair layer, as in the paper"
#: ``--set layer=true`` (the transfer experiment): every PG method with the per-(state, action)
#: Dirichlet layer of ``CorrelatedTransitionModel.for_mdp``; the model's own words follow.
_LAYER = Qualifier("layer", False, values=(True,), label=" + per-pair layer",
                   description="with the per-(state, action) Dirichlet layer: every pair may differ from "
                               "what its neighbours predict by as much as the data say",
                   note="with the per-(state, action) Dirichlet layer", own="is the plain correlated model",
                   replaces=_PLAIN)
#: The words of ``pg_transfer``'s description that a fixed or averaged similarity makes false.
_LEARNED = "as much as a task similarity learned from the data says"

#: The state count from which the beliefs store their counts sparsely and ``for_mdp``'s defaults
#: drop the per-pair layer (``applications.transitions.SPARSE_FROM_STATES``; checked by a test).
SPARSE_FROM_STATES_TEXT = "2,000"
#: The parts of the layer that ``contamination=none`` and ``support=none`` switch off.
_CONTAMINATION = "a learned probability that a pair's next state is not predicted by its neighbours at all"
_SUPPORT = ("a sparse-support hypothesis beside the layer, that every pair moves to a few states whatever its "
            "neighbours do")


def _gym_layer(concentration: str) -> str:
    """The description of the per-pair layer of ``corrpriors sysid`` / ``psrl`` with that concentration."""
    return ("with the per-(state, action) Dirichlet layer of CorrelatedTransitionModel.for_mdp: every pair may "
            f"differ from what its neighbours predict {concentration}; with {_CONTAMINATION}, {_SUPPORT}, and "
            "distinct outcomes for the actions of a state")


#: The settings ``concentration``, ``contamination`` and ``support`` of ``corrpriors sysid`` and
#: ``corrpriors psrl`` (the runs record the values the beliefs used: ``none`` where sparse storage
#: drops the layer). Their default, ``auto`` for all three, is the layered model.
_GYM_LAYER = (
    Qualifier("concentration", "none", values=("auto",), label=" + per-pair layer",
              description=_gym_layer("by as much as the data say (a concentration per action, learned)"),
              replaces=_PLAIN,
              note="with the per-(state, action) Dirichlet layer, its concentration learned per action",
              given="concentration={value}, the default of corrpriors sysid and psrl on fewer than "
                    f"{SPARSE_FROM_STATES_TEXT} states, where the counts are stored densely; concentration=none "
                    "is the plain correlated model, the paper's"),
    Qualifier("concentration", "auto", number=True, label=" + per-pair layer (c fixed at {value})",
              description=_gym_layer("as much as a concentration fixed at c = {value} lets it"),
              replaces=_PLAIN,
              note="with the per-(state, action) Dirichlet layer, its concentration fixed at c = {value}",
              own="learns it per action, and none is the plain correlated model"),
    Qualifier("contamination", "none", values=("auto",), label=" + contamination",
              description=f"no per-pair layer (concentration=none) but {_CONTAMINATION}, uniform over the states",
              replaces=_PLAIN,
              note="no per-pair layer, but a learned contamination probability",
              given="contamination={value}, the default, with concentration=none; contamination=none too gives "
                    "the plain correlated model", requires=(("concentration", "none"),)),
    Qualifier("contamination", "auto", values=("none",), label=" (no contamination)",
              description="no contamination component",
              note="the per-pair layer without its contamination component",
              own="learns the probability that a next state is not predicted by the neighbours",
              replaces=_CONTAMINATION, unless=(("concentration", "none"),)),
    Qualifier("support", "auto", values=("none",), label=" (no support hypothesis)",
              description="no sparse-support hypothesis",
              note="the per-pair layer without the sparse-support hypothesis",
              own="weighs it beside the layer", replaces=_SUPPORT, unless=(("concentration", "none"),)),
)

#: The words of ``dirichlet``'s and ``dirichlet_subgoal``'s descriptions that another ``dirichlet_alpha`` makes false.
_POLICY_ALPHA = "α = 1e-3"
#: ``--set dirichlet_alpha=<α>`` (imitation, subgoal): the Dirichlet policy / subgoal priors' α. The
#: labels do not state the default α (``Dirichlet``), so another α is appended (``Dirichlet α=1``).
_DIRICHLET_ALPHA = Qualifier("dirichlet_alpha", 1e-3, number=True, bounds=(math.ulp(0.0), math.inf),
                             label=" α={value}", description="α = {value}", note="α = {value}",
                             own="is the α of dirichlet_sparse",
                             replaces=_POLICY_ALPHA)

MODELS: dict[str, Model] = {
    "pg": Model("PG", f"the correlated prior (Pólya-Gamma VI), {_PLAIN}; for transitions its categories are "
                "moves relative to the current state (the default encoding)",
                "#1f77b4", "o", qualifiers=(_LAYER, *_GYM_LAYER)),
    "pg_absolute": Model("PG absolute (the paper's)", f"correlated prior, {_PLAIN}; categories = next states in "
                         "index order (the paper's encoding); prior mean: the paper's fixed uniform logits in "
                         "system-id (pg_learn_mean=none), but a learned constant per stick in psrl-grid and "
                         "psrl-queueing, as for pg", "#ff7f0e", "s",
                         qualifiers=_GYM_LAYER),
    "dirichlet_uniform": Model("Dirichlet α=1", "independent Dirichlet posteriors, α = 1", "#2ca02c", "^",
                               Concentration("alpha_uniform", 1.0)),
    "dirichlet_sparse": Model("Dirichlet α=1e-3", "independent Dirichlet posteriors, α = 1e-3", "#d62728", "v",
                              Concentration("alpha_sparse", 1e-3)),
    # imitation learning: policies, not transitions (categories = actions; no relative/absolute)
    "dirichlet": Model("Dirichlet", "independent Dirichlet policy posteriors (imitation; coloured as "
                       f"dirichlet_sparse, whose α is the default), {_POLICY_ALPHA}",
                       "#d62728", "v", qualifiers=(_DIRICHLET_ALPHA,)),
    # subgoal modelling
    "pg_imitation": Model("PG imitation", "the correlated policy prior of imitation learning, without subgoals "
                          "(imitation's pg, hence its colour)", "#1f77b4", "o"),
    "pg_subgoal": Model("PG subgoal", "subgoal model with correlated subgoal priors", "#9467bd", "D"),
    "dirichlet_subgoal": Model("Dirichlet subgoal", "subgoal model with independent Dir(α) subgoal priors, "
                               f"{_POLICY_ALPHA}", "#8c564b", "P",
                               qualifiers=(_DIRICHLET_ALPHA,)),
    # transfer between environments
    "pg_transfer": Model("PG transfer", "correlated prior over (task, state): the target task borrows from "
                         f"the source tasks {_LEARNED}", "#e377c2", "X", qualifiers=(
        dataclasses.replace(_LAYER, replaces="", description="with the per-(state, action) Dirichlet layer: its "
                            "base is the transfer prediction, and every pair also borrows the source tasks' counts "
                            "of that pair at a weight learned from the data"),
        Qualifier("similarity", "learned", number=True, bounds=(0.0, 1.0), label=" (ρ fixed at {value})",
                  description="as much as a task similarity fixed at ρ = {value}, not learned, says",
                  note="the task similarity fixed at ρ = {value}, not learned",
                  own="learns it from the data", replaces=_LEARNED),
        Qualifier("similarity_rule", "one_se", values=("average",), label=" (ρ averaged)",
                  description="through the mixture of its fits at the task similarities evaluated, weighted "
                              "by their scores on the target's data",
                  note="a mixture over the task similarities, none chosen", own="chooses one similarity",
                  replaces=_LEARNED, requires=(("similarity", "learned"),)),
    )),
    "pg_pooled": Model("PG pooled", "one correlated prior fitted to the data of all tasks as if they were one "
                       "task", "#17becf", "*", qualifiers=(
        dataclasses.replace(_LAYER, replaces="", description="with the per-(state, action) Dirichlet layer, "
                            "fitted to the summed data like the rest"),)),
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


def method(name: str, config: Any = None) -> Method:
    """Resolve ``name`` (``"pg_absolute_sampling"``) to its label, description, colour and style.

    Parameters
    ----------
    name : str
        A model, optionally followed by ``_<variant>``.
    config : Config or mapping, optional
        The run's configuration (or a ``metrics.json`` record's ``config`` block). Where it sets
        another concentration than the one the model's name stands for (``alpha_sparse=1`` for
        ``dirichlet_sparse``), the label and the description state the α used, and where it
        sets a qualifier of the model (``layer=true`` for ``pg``), they say what it changed;
        the name, colour, line style and marker stay.
    """
    model, variant = split(name)
    m, v = MODELS[model].under(config), VARIANTS[variant]
    label = m.label if not variant else f"{m.label}, {v.label}"
    description = m.description if not variant else f"{m.description}; {v.description}"
    return Method(name, model, variant, label, description, m.colour, v.linestyle, m.marker)


def label(name: str, config: Any = None) -> str:
    """The display label of ``name`` under ``config`` (see :func:`method`); an unknown name is shown as it is."""
    return method(name, config).label if is_known(name) else name


def labels(names: Any, config: Any = None) -> dict[str, str]:
    """``{name: label}`` for every name of ``names`` under ``config`` (see :func:`method`)."""
    return {n: label(n, config) for n in names}


def record_labels(record: Mapping, names: Any = None) -> dict[str, str]:
    """``{name: label}`` of a ``metrics.json`` record's methods, under the configuration it records.

    ``names`` defaults to every method of every metric of the record. The labels are the ones
    the runner wrote to the record's ``methods`` block (both come from :func:`labels` with the
    record's ``config``), so a figure drawn from a record names the methods as the record and
    the report do.
    """
    if names is None:
        metrics = record.get("metrics")
        names = list(dict.fromkeys(m for block in (metrics.values() if isinstance(metrics, Mapping) else ())
                                   if isinstance(block, Mapping) and isinstance(block.get("methods"), Mapping)
                                   for m in block["methods"]))
    config = record.get("config")
    return labels(names, config if isinstance(config, Mapping) else None)


def style(name: str) -> dict[str, str]:
    """Matplotlib keywords of ``name``'s line: ``color``, ``linestyle``, ``marker`` (empty if unknown)."""
    if not is_known(name):
        return {}
    m = method(name)
    return {"color": m.colour, "linestyle": m.linestyle, "marker": m.marker}


def concentration_notes(names: Any, config: Any) -> list[str]:
    """One line per model of ``names`` whose α ``config`` changes from the one its name stands for.

    ``["dirichlet_sparse: α = 1 (set by alpha_sparse; the name's own α is 1e-3)"]`` for a run
    with ``alpha_sparse=1``; empty under the names' own α (the terminal table of a default run
    is unchanged). The table names methods, not labels: this line says what a name meant there.
    """
    out: dict[str, str] = {}
    for name in names:
        if not is_known(name):
            continue
        model = split(name)[0]
        m = MODELS[model]
        alpha = m.alpha(config)
        if alpha is not None and m.concentration is not None and model not in out:
            out[model] = f"{model}: α = {alpha_text(alpha)} ({m.concentration.origin()})"
    return list(out.values())


def setting_notes(names: Any, config: Any) -> list[str]:
    """One line per change ``config`` makes to what the models of ``names`` are, for the terminal table.

    The lines of :func:`concentration_notes`, then one per qualifier (:class:`Qualifier`) set,
    naming every model it changes: ``["pg_transfer, pg, pg_pooled: with the per-(state, action)
    Dirichlet layer (set by layer=true; the default layer=false is the plain correlated
    model)"]`` for a transfer run with ``layer=true``. Empty in a default run.
    """
    lines = concentration_notes(names, config)
    changed: dict[str, list[str]] = {}
    for name in names:
        if not is_known(name):
            continue
        model = split(name)[0]
        for q, value in MODELS[model].changes(config):
            text = f"{q.note.format(value=value)} ({q.origin(value)})"
            if model not in changed.setdefault(text, []):
                changed[text].append(model)
    return lines + [f"{', '.join(models)}: {text}" for text, models in changed.items()]


def describe(names: Any, config: Any = None) -> dict[str, dict]:
    """The ``metrics.json`` block ``methods``: every known name of ``names`` with its entry under ``config``."""
    return {n: method(n, config).as_json() for n in names if is_known(n)}


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

    A ``methods`` entry whose label does not state the concentration or the qualifiers the
    record's ``config`` set (written before labels followed ``alpha_sparse`` and
    ``alpha_uniform``: ``Dirichlet α=1e-3`` for a run with ``alpha_sparse=1``; before they
    followed the transfer experiment's ``layer``, ``similarity`` and ``similarity_rule``: ``PG``
    for a run with ``layer=true``) gets the label and description of that configuration, and
    ``extra["notes"]`` says so.
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
    config = record.get("config") if isinstance(record.get("config"), Mapping) else None
    record.setdefault("methods", describe(names, config))
    relabelled = _relabel(record, config)
    if relabelled:
        extra = dict(record["extra"]) if isinstance(record.get("extra"), Mapping) else {}
        notes = extra.get("notes")
        extra["notes"] = [*(notes if isinstance(notes, list) else []),
                          "labels read as the configuration's settings: " + "; ".join(relabelled)]
        record["extra"] = extra
    return record, note


def _relabel(record: dict, config: Mapping | None) -> list[str]:
    """Give the ``methods`` entries of ``record`` the labels under ``config``; say which changed.

    Every known entry is compared, not only those the configuration changes: a record whose
    ``config`` says ``layer=false`` but whose labels say ``PG + per-pair layer`` is read as PG.
    """
    methods = record.get("methods")
    if config is None or not isinstance(methods, Mapping):
        return []
    changed, block = [], dict(methods)
    for name, entry in methods.items():
        if not (is_known(name) and isinstance(entry, Mapping)):
            continue
        m = method(name, config)   # every entry: a stored label may claim a setting the config lacks
        if entry.get("label") != m.label:
            changed.append(f"{name} {repr(entry.get('label'))[:60]} -> {m.label!r}")
            block[name] = {**entry, "label": m.label, "description": m.description}
    record["methods"] = block
    return changed


__all__ = [
    "Concentration",
    "LEGACY_NAMES",
    "MODELS",
    "Method",
    "Model",
    "Qualifier",
    "VARIANTS",
    "VOCABULARY",
    "Variant",
    "alpha_text",
    "concentration_notes",
    "describe",
    "is_known",
    "label",
    "labels",
    "method",
    "migrate_summary",
    "migration_note",
    "record_labels",
    "rename_keys",
    "rename_text",
    "renames",
    "setting_notes",
    "setting_text",
    "split",
    "style",
]
