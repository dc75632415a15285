"""One way to print a number, everywhere: terminal tables, notes, claims and the report.

Three significant digits (:data:`DIGITS`); thousands grouped from 1,000 on (``12,346``, at
most the integer's digits); a spread printed to the same decimal place as the value it goes
with (``0.0812±0.0031``, ``-75.8±2.1``), so a mean and its std never disagree on precision.
Text for people is wrapped at :data:`WIDTH` columns.
"""

from __future__ import annotations

import math
import textwrap
from typing import Any

#: Significant digits of every number shown to a person.
DIGITS = 3
#: Columns of terminal text.
WIDTH = 100


def _decimals(value: float, digits: int = DIGITS) -> int:
    """Decimal places that show ``value`` to ``digits`` significant digits (0 from 10**digits on)."""
    if value == 0 or not math.isfinite(value):
        return digits - 1
    return max(0, digits - 1 - int(math.floor(math.log10(abs(value)))))


def num(value: Any, digits: int = DIGITS) -> str:
    """``value`` to ``digits`` significant digits: ``0.0812``, ``0.752``, ``-75.8``, ``1.00``, ``12,346``.

    ``None`` prints ``n/a``; values below 1e-4 in magnitude (not 0) print in scientific notation.
    """
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    x = float(value)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x != 0 and abs(x) < 1e-4:
        return f"{x:.{digits - 1}e}"
    d = _decimals(x, digits)
    # rounding may carry into another digit (0.9996 -> 1.000): recompute on the rounded value
    rounded = round(x, d)
    if rounded != 0:
        d = _decimals(rounded, digits)
    return f"{x:,.{d}f}"


def num_below(value: float, bound: float, digits: int = DIGITS) -> str:
    """``value`` with as many significant digits as needed (at least ``digits``) to differ from ``bound``.

    ``num_below(0.9996, 1.0)`` is ``0.9996``, not the ``1.00`` that three digits would show.
    """
    for d in range(digits, 16):
        text = num(value, d)
        if float(text.replace(",", "")) != float(bound) or value == bound:
            return text
    return repr(float(value))


def mean_std(mean: Any, std: Any, digits: int = DIGITS) -> str:
    """``mean±std`` with the std at the mean's decimal place (``0.307±0.017``); ``nan`` if no mean."""
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "nan"
    text = num(mean, digits)
    if "e" in text:
        return f"{text}±{num(std or 0.0, digits)}"
    d = len(text.split(".")[1]) if "." in text else 0
    return f"{text}±{float(std or 0.0):,.{d}f}"


def wrap(text: str, indent: str = "", subsequent: str | None = None, width: int = WIDTH) -> list[str]:
    """Wrap ``text`` to ``width`` columns (first line after ``indent``, the rest after ``subsequent``)."""
    return textwrap.wrap(text, width=width, initial_indent=indent,
                         subsequent_indent=indent + "  " if subsequent is None else subsequent,
                         break_on_hyphens=False, break_long_words=False) or [indent]


__all__ = ["DIGITS", "WIDTH", "mean_std", "num", "num_below", "wrap"]
