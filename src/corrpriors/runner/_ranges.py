"""Declared valid ranges of experiment settings, checked before any work (``--set`` included).

Every experiment states, once, the range of every ``Config`` field in a table ``RANGES``
(field name -> constraint), in the manner of scikit-learn's ``_param_validation``::

    RANGES = {
        "radius": Interval(int, 1, 9, note="the tunnel world is 10 x 10"),
        "alpha_sparse": CONCENTRATION,
        "transitions": Each(Interval(int, 0, MAX_TRANSITIONS), min_len=1, increasing=True),
        "selection": Options("collapsed", "elbo-em"),
    }

The runner checks the table (:func:`check_ranges`) when it plans a run, before the experiment's
own ``check_config`` (which adds what depends on the environment, e.g. a radius against the
grid); the command line shows it (``--list-settings``). Each message names the field, the range
and the value: ``radius: expected an integer in [1, 9] (the tunnel world is 10 x 10), got
1000000000``.

The shared constants below state why the bounds are where they are.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import re
from collections.abc import Mapping
from typing import Any

from .._validation import MAX_SAMPLES, MAX_STEPS  # the library's own limits, re-exported

#: Dirichlet concentrations: above 1e-100 the log-space sampler's ``log(U) / alpha`` stays finite
#: (it needs alpha > 4e-307), and at most 1e12 keeps ``S * alpha`` and the Gamma draws finite for
#: any S the code handles while a count of one still changes a posterior mean (1e308 made every
#: row sum overflow: Hellinger 0.7071 at every T).
CONCENTRATION_RANGE = (1e-100, 1e12)
#: Length scales (in coordinate units) and prior scales: positive, finite, at most 1e6.
MAX_LENGTHSCALE = 1e6
#: Horizon of the exact horizon statistics: time grows linearly with it (S^2 per step and policy).
MAX_HORIZON = 100_000
#: Iteration caps of variational fits and samplers.
MAX_ITER = 1_000_000
#: Entries of a tuple-valued setting (a T grid, a list of methods).
MAX_ENTRIES = 1000


class Constraint:
    """A valid range of one setting: :meth:`check` raises ``ValueError``, :meth:`describe` says it."""

    def check(self, value: Any, name: str) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError


def _fmt(x: float) -> str:
    if isinstance(x, int) and abs(x) < 10**7:
        return f"{x:,}" if abs(x) >= 10_000 else str(x)
    text = f"{x:.0e}" if isinstance(x, int) else f"{x:g}"
    return text.replace("e+0", "e").replace("e+", "e").replace("e-0", "e-")


@dataclasses.dataclass(frozen=True)
class Interval(Constraint):
    """A number of ``kind`` (``int`` or ``float``) in an interval; ``None`` ends are open-ended.

    ``closed`` is ``"both"``, ``"left"``, ``"right"`` or ``"neither"``; ``note`` says why (shown
    in the message and in ``--list-settings``). Booleans are never numbers here; an ``int``
    interval takes only whole numbers and a ``float`` one only finite numbers.
    """

    kind: type
    low: float | None
    high: float | None
    closed: str = "both"
    note: str = ""

    def __post_init__(self) -> None:
        if self.kind not in (int, float):
            raise TypeError(f"kind: expected int or float, got {self.kind!r}")
        if self.closed not in ("both", "left", "right", "neither"):
            raise ValueError(f"closed: expected both, left, right or neither, got {self.closed!r}")

    def contains(self, value: Any) -> bool:
        """Whether ``value`` is a number of the kind inside the interval."""
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return False
        number = float(value)
        if not isinstance(value, numbers.Integral) and not math.isfinite(number):
            return False
        if self.kind is int and not isinstance(value, numbers.Integral) and not number.is_integer():
            return False                      # 3.0 is an integer, 3.5 is not
        x: float = number if self.kind is float or not isinstance(value, numbers.Integral) else int(value)
        below = self.low is not None and (x < self.low or (x == self.low and self.closed in ("right", "neither")))
        above = self.high is not None and (x > self.high or (x == self.high and self.closed in ("left", "neither")))
        return not (below or above)

    def describe(self) -> str:
        """``an integer in [1, 9]``, ``a number in (0, 1)``, ``a number >= 0``..."""
        what = "an integer" if self.kind is int else "a number"
        lo_in = self.closed in ("both", "left")
        hi_in = self.closed in ("both", "right")
        if self.low is not None and self.high is not None:
            text = f"{what} in {'[' if lo_in else '('}{_fmt(self.low)}, {_fmt(self.high)}{']' if hi_in else ')'}"
        elif self.low is not None:
            text = f"{what} {'>=' if lo_in else '>'} {_fmt(self.low)}"
        elif self.high is not None:
            text = f"{what} {'<=' if hi_in else '<'} {_fmt(self.high)}"
        else:
            text = f"{'an integer' if self.kind is int else 'a finite number'}"
        return f"{text} ({self.note})" if self.note else text

    def check(self, value: Any, name: str) -> None:
        """Raise ``ValueError`` naming ``name`` unless ``value`` is in the interval."""
        if not self.contains(value):
            raise ValueError(f"{name}: expected {self.describe()}, got {value!r}")


@dataclasses.dataclass(frozen=True)
class Options(Constraint):
    """One of a fixed set of strings (or other values)."""

    values: tuple
    note: str = ""

    def __init__(self, *values: Any, note: str = "") -> None:
        object.__setattr__(self, "values", tuple(values))
        object.__setattr__(self, "note", note)

    def describe(self) -> str:
        """``one of 'a', 'b'``."""
        text = "one of " + ", ".join(repr(v) for v in self.values)
        return f"{text} ({self.note})" if self.note else text

    def check(self, value: Any, name: str) -> None:
        """Raise ``ValueError`` unless ``value`` is one of the options."""
        if not any(value == v and type(value) is type(v) for v in self.values):
            raise ValueError(f"{name}: expected {self.describe()}, got {value!r}")


#: A number as ``--set`` writes one, in ASCII: float() also reads "０.５", " 0.5" and "0_5".
NUMBER_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
#: An integer as ``--set``, ``--seeds`` and the counts write one, in ASCII: int() also reads
#: "٣", "１", " 3" and "1_0".
INTEGER_TEXT = re.compile(r"[+-]?[0-9]+")


def number_from_text(text: str, kind: type = float) -> Any:
    """``kind(text)`` (``int`` or ``float``) of a number written in ASCII digits.

    ``int()`` and ``float()`` also read other scripts' digits ("٣", "１"), underscores ("1_0")
    and surrounding spaces; the command line takes :data:`INTEGER_TEXT` and :data:`NUMBER_TEXT`
    only, so that a setting is recorded as it was typed. The one parser of ``--set`` numbers,
    ``--seeds`` and the integer options.

    Raises
    ------
    ValueError
        ``"expected an integer"`` / ``"expected a number"`` (the caller adds the name and the
        value), ``"... written in ASCII digits"`` when Python would have read another spelling,
        ``"expected a finite number"`` for "inf" and "nan".
    """
    integer = kind is int
    what = "an integer" if integer else "a number"
    if isinstance(text, str) and (INTEGER_TEXT if integer else NUMBER_TEXT).fullmatch(text):
        return kind(text)
    try:
        value = kind(text)
    except (TypeError, ValueError):
        raise ValueError(f"expected {what}") from None
    if not integer and not math.isfinite(value):
        raise ValueError("expected a finite number")
    raise ValueError(f"expected {what} written in ASCII digits")


class OptionsOrNumber(Constraint):
    """One of a fixed set of strings, or a number (possibly written as text, in the ASCII digits
    of :data:`NUMBER_TEXT`) in an interval.
    """

    options: Options
    interval: Interval

    def __init__(self, options: tuple, interval: Interval) -> None:
        self.options = Options(*options)
        self.interval = interval

    def describe(self) -> str:
        """``one of 'a', 'b' or <the interval>``."""
        return f"{self.options.describe()} or {self.interval.describe()}"

    def check(self, value: Any, name: str) -> None:
        """Raise ``ValueError`` unless ``value`` is an option or a number in the interval."""
        if isinstance(value, str) and value in self.options.values:
            return
        if isinstance(value, str) and not NUMBER_TEXT.fullmatch(value):   # float() would take "０.５"
            raise ValueError(f"{name}: expected {' or '.join(map(repr, self.options.values))} or a value "
                             f"written in ASCII digits ({self.interval.describe()}), got {value!r}")
        try:
            number = float(value) if isinstance(value, str) else value
            self.interval.check(number, name)
        except (TypeError, ValueError):
            raise ValueError(f"{name}: expected {self.describe()}, got {value!r}") from None


@dataclasses.dataclass(frozen=True)
class Boolean(Constraint):
    """True or False."""

    def describe(self) -> str:
        """``true or false``."""
        return "true or false"

    def check(self, value: Any, name: str) -> None:
        """Raise ``ValueError`` unless ``value`` is a bool."""
        if not isinstance(value, bool):
            raise ValueError(f"{name}: expected true or false, got {value!r}")


@dataclasses.dataclass(frozen=True)
class Text(Constraint):
    """Any string of at most ``max_len`` characters (names, paths, JSON that is checked elsewhere)."""

    max_len: int = 100_000
    note: str = ""

    def describe(self) -> str:
        """``a string``."""
        return f"a string ({self.note})" if self.note else "a string"

    def check(self, value: Any, name: str) -> None:
        """Raise ``ValueError`` unless ``value`` is a short enough string."""
        if not isinstance(value, str):
            raise ValueError(f"{name}: expected a string, got {value!r}")
        if len(value) > self.max_len:
            raise ValueError(f"{name}: expected at most {self.max_len:,} characters, got {len(value):,}")


@dataclasses.dataclass(frozen=True)
class Each(Constraint):
    """A tuple whose every entry meets ``item``; its length in [min_len, max_len]; optionally increasing."""

    item: Constraint
    min_len: int = 0
    max_len: int = MAX_ENTRIES
    increasing: bool = False
    distinct: bool = False

    def describe(self) -> str:
        """``1 to 1,000 integers in [0, 1e7], increasing``."""
        if self.min_len == self.max_len:
            count = f"{self.min_len} values"
        else:
            count = f"{self.min_len} to {_fmt(self.max_len)} values"
        order = ", increasing" if self.increasing else (", distinct" if self.distinct else "")
        return f"{count}{order}, each {self.item.describe()}"

    def check(self, value: Any, name: str) -> None:
        """Raise ``ValueError`` naming the first entry out of range (or the length, or the order)."""
        if not isinstance(value, (tuple, list)):
            raise ValueError(f"{name}: expected comma-separated values ({self.describe()}), got {value!r}")
        if not self.min_len <= len(value) <= self.max_len:
            raise ValueError(f"{name}: expected {self.describe()}; got {len(value):,} values")
        if isinstance(self.item, Options):
            unknown = [v for v in value if not any(v == o and type(v) is type(o) for o in self.item.values)]
            if unknown:
                raise ValueError(unknown_entries(name, unknown, self.item.values))
        for i, v in enumerate(value):
            self.item.check(v, f"{name} (entry {i})")
        if self.increasing and any(b <= a for a, b in zip(value, value[1:])):
            raise ValueError(f"{name}: expected increasing values, got {tuple(value)}")
        if self.distinct and len(set(value)) != len(value):
            raise ValueError(f"{name}: expected each value at most once, got {tuple(value)}")


def unknown_entries(name: str, unknown: Any, known: Any) -> str:
    """One line naming every ``unknown`` entry of the list ``name``, with a hint for each where one fits.

    A name that only lacks a suffix of the known ones (a model without its variant: ``pg`` for
    ``pg_sampling`` and ``pg_mean``) is told the names it starts; another close to known names
    (a typo) the closest of them.
    """
    import difflib

    options = [str(o) for o in known]
    named = []
    for v in unknown:
        text = str(v)
        longer = [o for o in options if o.startswith(text + "_") and "_" not in o[len(text) + 1:]]
        close = longer or difflib.get_close_matches(text, options, n=2)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        named.append(f"{v!r}{hint}")
    return f"{name}: unknown {', '.join(named)}; expected some of {', '.join(options)}"


#: A Dirichlet concentration (see :data:`CONCENTRATION_RANGE`).
CONCENTRATION = Interval(float, *CONCENTRATION_RANGE, note="a concentration; beyond it sums overflow")
#: A positive length scale.
LENGTHSCALE = Interval(float, 0.0, MAX_LENGTHSCALE, closed="right")
#: A length scale where 0 means "chosen automatically".
LENGTHSCALE_OR_AUTO = Interval(float, 0.0, MAX_LENGTHSCALE, note="0 = the largest distance between two states")
#: A discount in (0, 1).
DISCOUNT = Interval(float, 0.0, 1.0, closed="neither")
#: A discount where 0 means the environment's own.
DISCOUNT_OR_ENV = Interval(float, 0.0, 1.0, closed="left", note="0 = the environment's")
#: A relative tolerance.
TOLERANCE = Interval(float, 0.0, 1.0, closed="neither")
#: An iteration cap.
ITERATIONS = Interval(int, 1, MAX_ITER)


def check_ranges(experiment: Any, config: Any) -> None:
    """Check every field of ``config`` that the experiment's ``RANGES`` table declares.

    Experiments without a table (third-party ones) are not checked here. Fields the table
    names but the config lacks are an error of the experiment.

    Raises
    ------
    ValueError
        The first field out of its range, as ``field: expected <range>, got <value>``.
    """
    table = getattr(experiment, "RANGES", None)
    if table is None:
        return
    if not isinstance(table, Mapping):
        raise TypeError(f"{getattr(experiment, 'NAME', experiment)}.RANGES: expected a dict of constraints")
    for field, constraint in table.items():
        if not hasattr(config, field):
            raise ValueError(f"{field}: declared in RANGES but not a field of the configuration")
        constraint.check(getattr(config, field), field)


def describe_ranges(experiment: Any, config: Any | None = None) -> list[str]:
    """One line per ``Config`` field: its name, its default (or ``config``'s value) and its valid range."""
    table = getattr(experiment, "RANGES", None) or {}
    config = config if config is not None else experiment.Config()
    lines = []
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        shown = ",".join(map(str, value)) if isinstance(value, tuple) else (str(value) if value != "" else "''")
        if len(shown) > 40:
            shown = shown[:37] + "..."
        constraint = table.get(field.name)
        lines.append(f"{field.name} = {shown}: {constraint.describe() if constraint else 'not checked'}")
    return lines


__all__ = [
    "CONCENTRATION",
    "CONCENTRATION_RANGE",
    "DISCOUNT",
    "DISCOUNT_OR_ENV",
    "INTEGER_TEXT",
    "ITERATIONS",
    "LENGTHSCALE",
    "LENGTHSCALE_OR_AUTO",
    "MAX_ENTRIES",
    "MAX_HORIZON",
    "MAX_ITER",
    "MAX_LENGTHSCALE",
    "MAX_SAMPLES",
    "MAX_STEPS",
    "TOLERANCE",
    "Boolean",
    "Constraint",
    "Each",
    "Interval",
    "Options",
    "Text",
    "check_ranges",
    "describe_ranges",
    "number_from_text",
    "unknown_entries",
]
