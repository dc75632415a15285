"""The strict CSV/TSV reader of ``corrpriors fit`` (issue 23, case 5 and item 7): header rule,
blank fields, strict numbers; a property-based comparison with an independent reference
(Python's csv module plus a strict decimal grammar written out here)."""

from __future__ import annotations

import csv
import io
import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corrpriors.cli import main
from corrpriors.runner._text_tables import TableError, parse_text_table

# ---------------------------------------------------------------- the reference, written out
_DIGITS = set("0123456789")


def _strict_decimal(field):
    """A hand-written recogniser of [+-]? (D+ (. D*)? | . D+) ([eE] [+-]? D+)? (ASCII digits),
    independent of the module's regular expression."""
    i, n = 0, len(field)
    if i < n and field[i] in "+-":
        i += 1
    start = i
    while i < n and field[i] in _DIGITS:
        i += 1
    int_digits = i - start
    frac_digits = 0
    if i < n and field[i] == ".":
        i += 1
        f0 = i
        while i < n and field[i] in _DIGITS:
            i += 1
        frac_digits = i - f0
    if int_digits == 0 and frac_digits == 0:
        return False
    if i < n and field[i] in "eE":
        i += 1
        if i < n and field[i] in "+-":
            i += 1
        e0 = i
        while i < n and field[i] in _DIGITS:
            i += 1
        if i == e0:
            return False
    return i == n


def _float_accepts(field):
    try:
        float(field)
        return True
    except ValueError:
        return False


def reference_read(text, delimiter=","):
    """('ok', values, header) or ('error', line) by the documented rules."""
    lines = text.split("\n")
    rows = []
    for number, raw in enumerate(lines, 1):  # the generated texts have no quoted newlines
        fields = next(csv.reader([raw], delimiter=delimiter), [])
        if not fields or (len(fields) == 1 and not fields[0].strip()):
            continue
        if fields[0].lstrip().startswith("#"):
            continue
        rows.append((number, [f.strip() for f in fields]))
    if not rows:
        return ("error", None)
    for number, fields in rows:
        if any(f == "" for f in fields):
            return ("error", number)
    header = None
    kinds = [_float_accepts(f) for f in rows[0][1]]
    if not any(kinds):
        header, rows = rows[0][1], rows[1:]
        if not rows:
            return ("error", None)
    elif not all(kinds):
        return ("error", rows[0][0])
    width = len(rows[0][1])
    if header is not None and len(header) != width:
        return ("error", None)
    values = []
    for number, fields in rows:
        if len(fields) != width:
            return ("error", number)
        row = []
        for f in fields:
            if not _strict_decimal(f):
                return ("error", number)
            row.append(float(f))
        values.append(row)
    return ("ok", np.array(values), header)


# ---------------------------------------------------------------- generated tables
_numbers = st.one_of(
    st.integers(-10 ** 6, 10 ** 6).map(str),
    st.floats(allow_nan=False, allow_infinity=False, width=64).map(repr),
    st.floats(-1e3, 1e3, allow_nan=False).map(lambda v: f"{v:.3e}"),
    st.sampled_from([".5", "5.", "+3", "-0", "1E5", "2e-3", "007"]),
)
_hostile = st.sampled_from(["1_0", "1,000", "0x1F", "nan", "NaN", "inf", "-Infinity", "1e",
                            "e5", ".", "+", "1.2.3", "\u0661", "\uff11", "12a", "--1", ""])
_words = st.text(alphabet="abcxyz_ ", min_size=1, max_size=6).filter(lambda s: s.strip())
_field = st.one_of(_numbers, _numbers, _numbers, _hostile, _words,
                   _numbers.map(lambda s: f"  {s} "))


@st.composite
def _tables(draw):
    width = draw(st.integers(1, 4))
    lines = []
    if draw(st.booleans()):
        lines.append(",".join(draw(st.lists(_words, min_size=width, max_size=width))))
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.integers(0, 9))
        if kind == 0:
            lines.append("# a comment, 1_0")
        elif kind == 1:
            lines.append("")
        else:
            w = width if kind > 2 else draw(st.integers(1, 5))
            lines.append(",".join(draw(st.lists(_field, min_size=w, max_size=w))))
    return "\n".join(lines) + draw(st.sampled_from(["", "\n"]))


@settings(max_examples=400, deadline=None)
@given(_tables())
def test_reader_agrees_with_the_reference(text):
    expected = reference_read(text)
    if expected[0] == "ok":
        values, header = parse_text_table(text, ",", "--counts: t.csv")
        assert header == expected[2]
        np.testing.assert_array_equal(values, expected[1].reshape(values.shape))
    else:
        with pytest.raises(TableError, match=r"^--counts: t\.csv: ") as info:
            parse_text_table(text, ",", "--counts: t.csv")
        if expected[1] is not None:
            assert re.search(rf"\bline {expected[1]}\b", str(info.value)), (text, info.value)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64),
                         min_size=3, max_size=3), min_size=1, max_size=6))
def test_numbers_round_trip_exactly(rows):
    """Every finite double written by repr (Python's shortest round-trip form) reads back
    bit for bit, in CSV and in TSV."""
    for delimiter in (",", "\t"):
        buf = io.StringIO()
        csv.writer(buf, delimiter=delimiter, lineterminator="\n").writerows(
            [[repr(v) for v in row] for row in rows])
        values, header = parse_text_table(buf.getvalue(), delimiter, "x")
        assert header is None
        np.testing.assert_array_equal(values, np.array(rows))


def test_reference_recogniser_matches_the_strict_grammar_on_samples():
    """The two recognisers (reference and module) agree on hand-picked edge cases."""
    from corrpriors.runner._text_tables import is_number

    for f in ["1", "-1", "+.5", "5.", "1e5", "1E+05", "1.e3", ".e3", "e3", "1_0", "\u0661",
              " 1", "1 ", "nan", "inf", "0x10", "1e", "1.2.3", "", "+", "-.", "00"]:
        assert is_number(f) == _strict_decimal(f), f
        if _strict_decimal(f):
            assert math.isfinite(float(f))


# ---------------------------------------------------------------- the cases of the issues
@pytest.mark.parametrize("text, line, what", [
    ("0.5,\n1,2\n", 1, "blank field in column 2"),           # issue 23 case 5: not a header
    ("a,b,c\n1,,2\n3,4,5\n", 2, "blank field in column 2"),
    ("1,2\n1_0,3\n", 2, "'1_0' is not a plain number"),      # read as 10 before
    ("1_0,2_0\n1,2\n", 1, "'1_0' is not a plain number"),    # never a header either
    ("x,1\n1,2\n", 1, "mixes numbers and text"),
    ("nan,1\n", 1, "'nan' is not a finite number"),
    ("a,b\n1,2\n3,x\n", 3, "column 2: 'x' is not a number"),
    ("a,b,c\n1,2\n", None, "the header (line 1) has 3 names, the data rows have 2 columns"),
    ("# c\n\n1,2\n\n3\n", 5, "line 5 has 1 columns"),
])
def test_each_rule_gives_one_line_naming_the_file_and_line(text, line, what):
    with pytest.raises(TableError) as info:
        parse_text_table(text, ",", "--predict-at: p.csv")
    msg = str(info.value)
    assert msg.startswith("--predict-at: p.csv: ") and "\n" not in msg
    assert what in msg
    if line is not None:
        assert f"line {line}" in msg


def test_header_quoted_fields_and_comments():
    text = '# made by hand\n"x","y"\n\n"1", 2.5\n# more\n-3,4e1\n'
    values, header = parse_text_table(text, ",", "f")
    assert header == ["x", "y"]
    np.testing.assert_array_equal(values, [[1.0, 2.5], [-3.0, 40.0]])


def _write(path, text):
    path.write_text(text)
    return str(path)


def test_predict_at_with_a_blank_first_field_is_refused(tmp_path, capsys):
    """Issue 23 case 5: ``0.5,`` on the first line of --predict-at was taken as a header, and
    the predictions were labelled with row ids shifted by one."""
    xy = _write(tmp_path / "coords.csv", "x,y\n" + "".join(f"{i},{j}\n" for i in range(3)
                                                          for j in range(3)))
    counts = _write(tmp_path / "counts.csv", "a,b\n" + "1,2\n" * 9)
    pred = _write(tmp_path / "new.csv", "0.5,\n1.5,1\n2,2\n")
    code = main(["fit", "--counts", counts, "--coords", xy, "--predict-at", pred,
                 "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert "new.csv: line 1: blank field in column 2" in err
    assert not (tmp_path / "out").exists()


def test_blank_in_the_first_counts_row_names_the_line(tmp_path, capsys):
    """Issue 23: a blank in the first counts row gave 'expected 24 rows ... got 25'."""
    xy = _write(tmp_path / "coords.csv", "".join(f"{i},{j}\n" for i in range(5) for j in range(5)))
    counts = _write(tmp_path / "counts.csv", "1,,2\n" + "1,2,3\n" * 24)
    code = main(["fit", "--counts", counts, "--coords", xy, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert "counts.csv: line 1: blank field in column 2" in err
    assert "expected" not in err


def test_underscore_digits_in_counts_are_an_error(tmp_path, capsys):
    """Issue 23: the field ``1_0`` was read as 10."""
    xy = _write(tmp_path / "coords.csv", "0\n1\n2\n")
    counts = _write(tmp_path / "counts.csv", "1,2\n1_0,3\n4,5\n")
    code = main(["fit", "--counts", counts, "--coords", xy, "--out", str(tmp_path / "out")])
    assert code == 2
    assert "counts.csv: line 2, column 1: '1_0' is not a plain number" in capsys.readouterr().err


def test_predictions_are_labelled_by_data_row(tmp_path):
    """With a header, 'row' counts data rows from 0 (the header and comments do not count)."""
    xy = _write(tmp_path / "coords.csv", "".join(f"{i},{j}\n" for i in range(3) for j in range(3)))
    counts = _write(tmp_path / "counts.csv", "1,2\n" * 9)
    pred = _write(tmp_path / "new.csv", "# new points\nx,y\n0.5,0.5\n9,9\n")
    assert main(["fit", "--counts", counts, "--coords", xy, "--predict-at", pred, "--quiet",
                 "--out", str(tmp_path / "out")]) == 0
    rows = list(csv.reader(open(tmp_path / "out" / "predictions.csv")))
    assert [r[0] for r in rows] == ["row", "0", "1"]
