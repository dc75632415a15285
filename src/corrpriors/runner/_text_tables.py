"""Strict reading of numeric text tables (CSV/TSV), the input format of ``corrpriors fit``.

The rules (also in ``corrpriors fit --help`` and the user guide):

* Records are split by :mod:`csv` with the file's delimiter (quotes work as usual); fields are
  stripped of surrounding whitespace. Empty lines and lines whose first field starts with
  ``#`` are skipped.
* A **number** is written in decimal: an optional sign, digits with an optional decimal point,
  an optional exponent (``-1``, ``2.5``, ``.5``, ``1e-3``). Nothing else is a number: no
  ``_`` digit separators (``1_0``), thousands separators, hexadecimal, non-ASCII digits, ``nan``
  or ``inf`` -- Python's ``float`` accepts several of these, and would read ``1_0`` as 10.
* The first record is a **header** when none of its fields reads as a number (in the
  permissive sense of Python's ``float``, so ``1_0`` or ``nan`` never make a row a header);
  every other record is data and holds numbers only.
* A **blank field** is an error wherever it is (``0.5,`` on the first line is not a header: it
  is an error naming the file and the line), and so is a first record that mixes numbers and
  text, a header whose length differs from the data rows', and a data row of another width.

Every error is one line naming the file (``where``) and the line number in the file.
"""

from __future__ import annotations

import csv
import io
import re

import numpy as np

#: A decimal number: sign, digits with an optional point, optional exponent (ASCII only).
NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)

_NUMBER_FORM = "decimal digits with an optional sign, point and exponent, e.g. -1.5e3"


class TableError(ValueError):
    """A text table breaks the rules of this module (one line, naming the file and line)."""


def is_number(field: str) -> bool:
    """Whether ``field`` (already stripped) is a number in the strict sense of this module."""
    return NUMBER.fullmatch(field) is not None


def _reads_as_number(field: str) -> bool:
    """Whether Python's permissive ``float`` accepts ``field`` (``1_0``, ``nan``, ``１``...)."""
    try:
        float(field)
    except ValueError:
        return False
    return True


def _records(text: str, delimiter: str, where: str) -> list[tuple[int, list[str]]]:
    """The kept records as (line number in the file, stripped fields)."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    out = []
    try:
        for fields in reader:
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue
            if fields[0].lstrip().startswith("#"):
                continue
            out.append((reader.line_num, [f.strip() for f in fields]))
    except csv.Error as exc:
        raise TableError(f"{where}: line {reader.line_num + 1}: cannot be read as "
                         f"{'tab' if delimiter == chr(9) else 'comma'}-separated text "
                         f"({exc})") from None
    return out


def _check_blank(line: int, fields: list[str], where: str) -> None:
    blank = [j + 1 for j, f in enumerate(fields) if not f]
    if blank:
        cols = ", ".join(map(str, blank[:5])) + (", ..." if len(blank) > 5 else "")
        raise TableError(f"{where}: line {line}: blank field in column{'s' if len(blank) > 1 else ''} "
                         f"{cols}; every field of a table must hold a number (or, in the "
                         f"header, a name)")


def _number(line: int, col: int, field: str, where: str) -> float:
    if is_number(field):
        return float(field)
    if _reads_as_number(field):
        lowered = field.lower().lstrip("+-")
        if lowered in ("nan", "inf", "infinity"):
            why = "is not a finite number"
        else:
            why = f"is not a plain number ({_NUMBER_FORM}; no '_' or other separators)"
    else:
        why = "is not a number"
    raise TableError(f"{where}: line {line}, column {col}: {field!r} {why}")


def parse_text_table(text: str, delimiter: str, where: str) -> tuple[np.ndarray, list[str] | None]:
    r"""A numeric table and its header from CSV/TSV text, by the rules of this module.

    Parameters
    ----------
    text : str
        The file's text (decoded).
    delimiter : str
        ``","`` or ``"\t"``.
    where : str
        How errors name the file (e.g. ``"--counts: data.csv"``).

    Returns
    -------
    values : ndarray of shape (R, W)
        The data rows (float64).
    header : list of str or None
        The header's names, or ``None`` without a header.

    Raises
    ------
    TableError
        Any breach of the rules (a ``ValueError``).
    """
    rows = _records(text, delimiter, where)
    if not rows:
        raise TableError(f"{where}: no data (the file is empty)")
    for line, fields in rows:
        _check_blank(line, fields, where)
    header = None
    first_line, first = rows[0]
    numeric = [_reads_as_number(f) for f in first]
    if not any(numeric):
        header, rows = first, rows[1:]
        if not rows:
            raise TableError(f"{where}: a header row (line {first_line}) but no data rows")
    elif not all(numeric):
        text_col = numeric.index(False) + 1
        raise TableError(f"{where}: line {first_line} mixes numbers and text (column "
                         f"{text_col}: {first[text_col - 1]!r}); a header row holds names "
                         f"only, a data row numbers only")
    width = len(rows[0][1])
    if header is not None and len(header) != width:
        raise TableError(f"{where}: the header (line {first_line}) has {len(header)} names, "
                         f"the data rows have {width} columns")
    values = np.empty((len(rows), width))
    for i, (line, fields) in enumerate(rows):
        if len(fields) != width:
            raise TableError(f"{where}: line {line} has {len(fields)} columns, the first data "
                             f"row has {width}")
        values[i] = [_number(line, j + 1, f, where) for j, f in enumerate(fields)]
    return values, header


__all__ = ["NUMBER", "TableError", "is_number", "parse_text_table"]
