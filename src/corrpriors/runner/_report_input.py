"""Reading a results folder for ``corrpriors report``: every file under it is untrusted input.

A results folder may come from anyone (a colleague's archive, a download), so nothing in it is
believed before it is checked:

* a file is read, embedded or linked only when it is a **regular file whose resolved path lies
  inside the results folder** (:func:`inside_file`): symlinks out of it, absolute paths,
  ``..`` components, devices and FIFOs are refused, and files are opened without following a
  final symlink and checked again on the open descriptor;
* ``metrics.json`` is parsed with a size cap, without ``NaN``/``Infinity`` constants, and a
  nesting too deep for the parser is a reason, not a crash;
* its content is checked against the record the runner writes (:func:`read_record`); a record
  that breaks it is **skipped with a one-line reason** naming the field, and the other runs
  are still reported.

What comes out are plain dataclasses of strings, numbers and checked paths; the page
(:mod:`corrpriors.runner.report`) escapes every string it prints.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pathlib
import re
import stat
from collections.abc import Iterator, Mapping
from typing import Any

from .._fileio import NotReadable, open_regular, read_regular
from .._methods import MODELS, VARIANTS, is_known, method, migrate_summary, setting_notes
from ._config import full_scale_status
from ._io import RUN_MARKERS as _RUN_MARKERS

#: Largest ``metrics.json`` read (the runner's are a few hundred kB).
MAX_RECORD_BYTES = 64 * 2**20
#: Largest figure embedded in the page (a larger one is linked).
MAX_FIGURE_BYTES = 32 * 2**20
#: The only figure files shown, and the first bytes each must start with: anything else
#: (an SVG or HTML file, which a browser would run, or a "PNG" that is not one) is refused.
FIGURE_SIGNATURES = {".png": b"\x89PNG\r\n\x1a\n", ".pdf": b"%PDF-"}
#: The only name a warnings log is linked under (what the runner writes).
WARNINGS_LOG = "warnings.log"

#: The bidirectional controls (embeddings, overrides, isolates, marks), as a regex character-class
#: body: they reorder the text around them (a file name ``gnp.exe`` shown as ``exe.png``).
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
#: Characters that would steer a terminal or reorder text when an untrusted string is printed:
#: C0 controls, DEL, C1 controls, and :data:`BIDI_CONTROLS`.
_UNSAFE_TERMINAL = re.compile(f"[\x00-\x1f\x7f-\x9f{BIDI_CONTROLS}]")


def visible(text: Any) -> str:
    r"""``str(text)`` with every control and bidirectional-control character written as an escape
    (``\x1b``, ``\u202e``), so a folder name or a key read from a results folder printed to a
    terminal can neither send it commands nor reorder what is shown.
    """
    def escape(match: re.Match) -> str:
        code = ord(match.group())
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return _UNSAFE_TERMINAL.sub(escape, str(text))


class UnusableRecord(ValueError):
    """A ``metrics.json`` that cannot be reported; ``str(exc)`` is one line naming the field."""


class RefusedFile(ValueError):
    """A path that is not a regular file inside the results folder; ``str(exc)`` says why."""


# ----------------------------------------------------------------------------- files


def inside_file(root: pathlib.Path, folder: pathlib.Path, name: Any) -> pathlib.Path:
    """Return the resolved path of ``folder / name`` if it is a regular file inside ``root``.

    Parameters
    ----------
    root : pathlib.Path
        The results folder, already resolved.
    folder : pathlib.Path
        The run folder the name is relative to (inside ``root``).
    name : str
        A relative path read from a results file (untrusted).

    Raises
    ------
    RefusedFile
        ``name`` is not a string, is absolute or has a ``..`` component; the resolved path
        lies outside ``root``; it does not exist or is not a regular file.
    FileNotFoundError
        Nothing is there (a figure not drawn, a log not written): not an attack.
    """
    if not isinstance(name, str) or not name or "\x00" in name:
        raise RefusedFile(f"expected a file name, got {_describe(name)}")
    rel = pathlib.PurePosixPath(name.replace("\\", "/"))
    if rel.is_absolute() or pathlib.PureWindowsPath(name).drive or ".." in rel.parts:
        raise RefusedFile(f"{name!r} is not a path inside the run folder (absolute or with '..')")
    path = folder / pathlib.Path(*rel.parts)
    if not os.path.lexists(path):
        raise FileNotFoundError(name)
    try:
        resolved = path.resolve(strict=True)
    except (OSError, RuntimeError):  # a dangling or looping symlink
        raise RefusedFile(f"{name!r} is a broken or looping link") from None
    if not resolved.is_relative_to(root):
        raise RefusedFile(f"{name!r} leads outside the results folder (to {resolved})")
    if not stat.S_ISREG(os.stat(resolved).st_mode):
        raise RefusedFile(f"{name!r} is not a regular file")
    return resolved


def read_inside(path: pathlib.Path, limit: int) -> bytes:
    """Read a file found by :func:`inside_file` (no final symlink followed, regular, at most ``limit`` bytes).

    Raises
    ------
    RefusedFile
        It changed into a link, a non-regular file, or is larger than ``limit``.
    """
    try:
        return read_regular(path, limit, follow_symlinks=False)
    except NotReadable as exc:   # TooLarge included
        raise RefusedFile(f"{path.name!r} {exc}") from None
    except OSError as exc:
        raise RefusedFile(f"{path.name!r} cannot be opened ({exc.strerror or exc})") from None


def find_records(root: pathlib.Path) -> list[pathlib.Path]:
    """Every ``metrics.json`` under ``root`` (any depth, symlinked folders not followed), by path."""
    return walk_results(root)[0]


def walk_results(root: pathlib.Path) -> tuple[list[pathlib.Path], list[pathlib.Path]]:
    """``metrics.json`` files and run folders under ``root``: folders holding one, a ``config.json`` or ``seeds/``.

    The walk keeps its own stack (a folder tree thousands of levels deep does not recurse),
    follows no symlinked folder and skips folders it cannot list. The run folders include
    interrupted runs (no ``metrics.json`` yet), which the report must not write into either.
    """
    found, folders = [], []
    stack = [str(root)]
    while stack:
        folder = stack.pop()
        marked = False
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    is_dir = entry.is_dir(follow_symlinks=False)
                    if entry.name == "metrics.json" and not is_dir:
                        found.append(pathlib.Path(entry.path))
                    marked = marked or entry.name in _RUN_MARKERS
                    if is_dir:
                        stack.append(entry.path)
        except OSError:
            continue
        if marked:
            folders.append(pathlib.Path(folder))
    return sorted(found), sorted(folders)


# ----------------------------------------------------------------------------- the record


@dataclasses.dataclass(frozen=True)
class MethodRow:
    """One method of a metric: its name, display label and mean/std per x (None: not available)."""

    name: str
    label: str
    mean: tuple[float | None, ...]
    std: tuple[float | None, ...]


@dataclasses.dataclass(frozen=True)
class MetricTable:
    """One metric: its name, which direction is better and every method."""

    name: str
    better: str
    methods: tuple[MethodRow, ...]


@dataclasses.dataclass(frozen=True)
class ClaimRow:
    """One claim check as recorded."""

    claim: str
    holds: bool
    detail: str


@dataclasses.dataclass(frozen=True)
class FigureRef:
    """A figure entry: the PNG to embed (or None), the other files to link, the caption, what was refused."""

    png: pathlib.Path | None
    links: tuple[pathlib.Path, ...]
    caption: str
    stem: str
    refused: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Record:
    """A checked ``metrics.json`` and the files of its run folder that may be shown."""

    path: pathlib.Path
    folder: pathlib.Path
    experiment: str
    seeds: tuple[int, ...]
    x_name: str
    xs: tuple[float | None, ...]
    metrics: tuple[MetricTable, ...]
    claims: tuple[ClaimRow, ...]
    notes: tuple[str, ...]
    config: tuple[tuple[str, Any, str], ...]
    settings: str | None
    config_hash: str | None
    status: str | None
    warning_counts: tuple[tuple[str, int], ...] | None
    warnings_log: pathlib.Path | None
    figures: tuple[FigureRef, ...]
    refused: tuple[str, ...]


def _describe(value: Any) -> str:
    """A short description of an untrusted value for a one-line reason."""
    if value is None:
        return "null"
    kind = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number"}.get(type(value), type(value).__name__)
    if isinstance(value, (dict, list)):
        return f"{kind} of {len(value)} item{'s' if len(value) != 1 else ''}"
    text = repr(value)
    return f"{kind} {text if len(text) <= 40 else text[:37] + '...'}"


def _fail(where: str, expected: str, got: Any) -> UnusableRecord:
    return UnusableRecord(f"{where}: expected {expected}, got {_describe(got)}")


def _get(block: Mapping, key: str, where: str, kinds: tuple[type, ...], expected: str,
         required: bool = True, default: Any = None) -> Any:
    if key not in block:
        if required:
            raise UnusableRecord(f"{where}{key}: missing")
        return default
    value = block[key]
    if not isinstance(value, kinds) or (bool not in kinds and isinstance(value, bool)):
        raise _fail(f"{where}{key}", expected, value)
    return value


def _number(value: Any, where: str) -> float | None:
    """A finite number, or None (null / NaN / infinite / too large: shown as n/a)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(where, "a number or null", value)
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise _fail(where, "a string", value)
    return value


def _reject_constant(name: str) -> Any:
    return None  # NaN, Infinity and -Infinity are read as "not available"


def parse_json(data: bytes) -> Any:
    """Parse untrusted JSON; raise :class:`UnusableRecord` with a one-line reason."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnusableRecord(f"not UTF-8 text (byte {exc.start})") from None
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise UnusableRecord("nested too deeply to read (not a metrics.json written by corrpriors)") from None
    except json.JSONDecodeError as exc:
        raise UnusableRecord(f"not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise UnusableRecord(f"not usable JSON ({' '.join(str(exc).split())[:120]})") from None


def read_record(path: pathlib.Path, root: pathlib.Path) -> Record:
    """Read and check one ``metrics.json`` (``root`` resolved); raise :class:`UnusableRecord`.

    Every field the page shows is checked for its type and shape; optional parts (the run
    record, claims, notes, figures) may be missing. The reason names the field, e.g.
    ``metrics.hellinger.methods.pg.mean: expected 5 numbers (one per x), got a list of 4 items``.
    """
    try:
        resolved = inside_file(root, path.parent, path.name)
        data = read_inside(resolved, MAX_RECORD_BYTES)
    except (RefusedFile, FileNotFoundError) as exc:
        raise UnusableRecord(f"metrics.json: {exc}") from None
    summary = parse_json(data)
    if isinstance(summary, dict):  # old method names -> current ones, with a note (by the recorded version)
        try:
            summary = migrate_summary(summary)[0]
        except (TypeError, ValueError) as exc:
            raise UnusableRecord(str(exc)) from None
    try:
        return _check(summary, path, root)
    except RecursionError:  # pragma: no cover - parse_json refuses what would recurse here
        raise UnusableRecord("nested too deeply to read") from None


def _check(summary: Any, path: pathlib.Path, root: pathlib.Path) -> Record:
    if not isinstance(summary, dict):
        raise _fail("the file", "a JSON object", summary)
    experiment = _get(summary, "experiment", "", (str,), "a name")
    if not experiment.strip():
        raise UnusableRecord("experiment: expected a name, got an empty string")
    seeds = _get(summary, "seeds", "", (list,), "a list of seed numbers")
    for i, s in enumerate(seeds):
        if isinstance(s, bool) or not isinstance(s, int) or s < 0:
            raise _fail(f"seeds[{i}]", "a non-negative integer", s)
    x = _get(summary, "x", "", (dict,), "an object with the x values")
    x_name = _get(x, "name", "x.", (str,), "a string", required=False, default="x")
    values = _get(x, "values", "x.", (list,), "a list of numbers")
    xs = tuple(_number(v, f"x.values[{i}]") for i, v in enumerate(values))
    metrics, label_notes = _metrics(summary, len(xs))
    extra = _get(summary, "extra", "", (dict,), "an object", required=False, default={})
    claims = tuple(_claims(_get(extra, "claims", "extra.", (list,), "a list of claims", required=False,
                                default=[])))
    notes = tuple(_text(n, f"extra.notes[{i}]") for i, n in enumerate(
        _get(extra, "notes", "extra.", (list,), "a list of strings", required=False, default=[])))
    run = _get(summary, "run", "", (dict,), "an object", required=False, default={})
    config = _config(summary, run)
    # what the configuration changed in the methods (as the terminal table says it), first
    notes = tuple(setting_notes([m.name for t in metrics for m in t.methods], dict(
        (key, value) for key, value, _ in config))) + label_notes + notes
    figures, refused = _figures(run, path.parent, root)
    counts, log = _warnings(run, path.parent, root, refused)
    return Record(
        path=path, folder=path.parent, experiment=experiment, seeds=tuple(seeds), x_name=x_name, xs=xs,
        metrics=metrics, claims=claims, notes=notes, config=config,
        settings=_get(run, "settings", "run.", (str,), "a string", required=False),
        config_hash=_get(run, "config_hash", "run.", (str,), "a string", required=False),
        status=_status(run),
        warning_counts=counts, warnings_log=log, figures=figures, refused=tuple(refused))


def _status(run: Mapping) -> str | None:
    """The record's claims status (``run.claims``), as the runner would write it today.

    Until round 19 a run at the default settings of an experiment whose defaults are not the
    paper's (``settings`` "default": transfer) was stamped "paper-scale"; such a record reads as
    that experiment's full-scale status, so the page does not call it the paper's.
    """
    status = _get(run, "claims", "run.", (str,), "a string", required=False)
    settings = run.get("settings")
    if status == "paper-scale" and isinstance(settings, str) and settings not in ("paper", ""):
        return full_scale_status(settings)
    return status


def _labels(summary: Mapping) -> dict[str, str]:
    """Display labels of methods recorded in ``metrics.json`` (``methods`` or ``method_labels``), if any."""
    out: dict[str, str] = {}
    table = summary.get("method_labels")
    if isinstance(table, dict):
        out.update({k: v for k, v in table.items() if isinstance(v, str) and v.strip()})
    methods = summary.get("methods")
    if isinstance(methods, dict):
        for name, entry in methods.items():
            label = entry.get("label") if isinstance(entry, dict) else None
            if isinstance(label, str) and label.strip():
                out[name] = label
    return out


def _vocabulary_label(name: str, config: Mapping | None) -> str:
    """The vocabulary's label of the known method ``name`` under the record's ``config``."""
    try:
        return method(name, config).label
    except Exception:   # a configuration value the vocabulary cannot read: the name's own label
        return method(name).label


def _vocabulary_labels(config: Mapping | None) -> set[str]:
    """Every label of the method vocabulary, by default and under ``config``."""
    names = [m if not v else f"{m}_{v}" for m in MODELS for v in VARIANTS]
    return {method(n).label for n in names} | {_vocabulary_label(n, config) for n in names}


class _Labeller:
    """The label the page shows for a method: one name means one model everywhere.

    A name of the method vocabulary always gets the vocabulary's label under the record's
    configuration (what the figures and the terminal show), whatever the record says. A
    recorded label (per metric, ``methods`` or ``method_labels``) is used only for a name
    outside the vocabulary (a plug-in's method), and not when it is the label of a vocabulary
    model: such a method is shown under its name, with a note.
    """

    def __init__(self, summary: Mapping) -> None:
        config = summary.get("config")
        self.config = config if isinstance(config, Mapping) else None
        self.recorded = _labels(summary)
        self.notes: dict[str, str] = {}
        self._known: set[str] | None = None

    def __call__(self, name: str, recorded: Any) -> str:
        if is_known(name):
            return _vocabulary_label(name, self.config)
        label = recorded if isinstance(recorded, str) and recorded.strip() else self.recorded.get(name, name)
        if label != name:
            if self._known is None:
                self._known = _vocabulary_labels(self.config)
            if label in self._known:
                self.notes.setdefault(name, f"method {name!r}: its recorded label {label!r} is the label of a "
                                            "model of the method vocabulary; shown under its name instead")
                return name
        return label


def _metrics(summary: Mapping, n_x: int) -> tuple[tuple[MetricTable, ...], tuple[str, ...]]:
    block = _get(summary, "metrics", "", (dict,), "an object of metrics")
    labeller = _Labeller(summary)
    tables = []
    for metric, entry in block.items():
        where = f"metrics.{metric}"
        if not isinstance(entry, dict):
            raise _fail(where, "an object", entry)
        better = _get(entry, "better", where + ".", (str,), "'lower' or 'higher'", required=False, default="")
        if better not in ("", "lower", "higher"):
            raise _fail(where + ".better", "'lower' or 'higher'", better)
        methods = _get(entry, "methods", where + ".", (dict,), "an object of methods")
        rows = []
        for name, stats in methods.items():
            w = f"{where}.methods.{name}"
            if not isinstance(stats, dict):
                raise _fail(w, "an object with mean and std", stats)
            cols = []
            for key in ("mean", "std"):
                seq = _get(stats, key, w + ".", (list,), f"a list of {n_x} numbers (one per x)")
                if len(seq) != n_x:
                    raise _fail(f"{w}.{key}", f"{n_x} numbers (one per x)", seq)
                cols.append(tuple(_number(v, f"{w}.{key}[{i}]") for i, v in enumerate(seq)))
            rows.append(MethodRow(name, labeller(name, stats.get("label")), cols[0], cols[1]))
        tables.append(MetricTable(metric, better, tuple(rows)))
    return tuple(tables), tuple(labeller.notes.values())


def _claims(claims: list) -> Iterator[ClaimRow]:
    for i, c in enumerate(claims):
        if not isinstance(c, dict):
            raise _fail(f"extra.claims[{i}]", "an object with claim, holds and detail", c)
        holds = _get(c, "holds", f"extra.claims[{i}].", (bool,), "true or false")
        yield ClaimRow(_get(c, "claim", f"extra.claims[{i}].", (str,), "a string"), holds,
                       _get(c, "detail", f"extra.claims[{i}].", (str,), "a string", required=False, default=""))


def _config(summary: Mapping, run: Mapping) -> tuple[tuple[str, Any, str], ...]:
    config = _get(summary, "config", "", (dict,), "an object", required=False, default={})
    overrides = _get(run, "overrides", "run.", (dict,), "an object", required=False, default={})
    resolved = _get(run, "resolved", "run.", (dict,), "an object", required=False, default={})
    rows = []
    for key, value in config.items():
        note = "set with --set" if key in overrides else ("chosen automatically by the run" if key in resolved else "")
        rows.append((key, value, note))
    return tuple(rows)


def _figures(run: Mapping, folder: pathlib.Path, root: pathlib.Path) -> tuple[tuple[FigureRef, ...], list[str]]:
    entries = _get(run, "figures", "run.", (list,), "a list of figures", required=False)
    refused: list[str] = []
    if entries is None:  # an older record: every PNG of the folder, without captions
        entries = [{"files": [p.name, p.with_suffix(".pdf").name], "caption": p.stem}
                   for p in sorted(folder.glob("*.png"))]
    out = []
    for i, entry in enumerate(entries):
        where = f"run.figures[{i}]"
        if not isinstance(entry, dict):
            raise _fail(where, "an object with files and caption", entry)
        files = _get(entry, "files", where + ".", (list,), "a list of file names")
        caption = _get(entry, "caption", where + ".", (str,), "a string", required=False, default="")
        png, links, bad = None, [], []
        for name in files:
            try:
                path = inside_file(root, folder, name)
            except FileNotFoundError:
                continue
            except RefusedFile as exc:
                bad.append(f"figure file {exc}")
                continue
            why = figure_problem(path)
            if why is not None:
                bad.append(f"figure file {name!r} {why}")
                continue
            if path.suffix.lower() == ".png" and png is None:
                png = path
            links.append(path)
        stem = png.stem if png is not None else (pathlib.PurePosixPath(str(files[0])).stem if files else "")
        refused += bad
        out.append(FigureRef(png, tuple(links), caption, stem, tuple(bad)))
    return tuple(out), refused


def figure_problem(path: pathlib.Path) -> str | None:
    """Why the figure file ``path`` (found by :func:`inside_file`) is not shown, or None.

    Only ``.png`` and ``.pdf`` files are shown, and only when their first bytes are the
    format's signature (the first 8 bytes are read, never the whole file): an SVG or HTML
    file would run its scripts when opened from the page, whatever its name.
    """
    suffix = path.suffix.lower()
    signature = FIGURE_SIGNATURES.get(suffix)
    if signature is None:
        return "is not a PNG or PDF file (only those are shown)"
    try:
        with open_regular(path, 2**62, follow_symlinks=False) as fh:
            head = fh.read(len(signature))
    except NotReadable as exc:
        return str(exc)
    except OSError as exc:
        return f"cannot be opened ({exc.strerror or exc})"
    if head != signature:
        return f"is not a {suffix[1:].upper()} file (it does not start with the {suffix[1:].upper()} signature)"
    return None


def _warnings(run: Mapping, folder: pathlib.Path, root: pathlib.Path,
              refused: list[str]) -> tuple[tuple[tuple[str, int], ...] | None, pathlib.Path | None]:
    warn = _get(run, "warnings", "run.", (dict,), "an object", required=False)
    if not warn:
        return None, None
    by_category = _get(warn, "by_category", "run.warnings.", (dict,), "an object of counts", required=False,
                       default={})
    counts = []
    for category, n in by_category.items():
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise _fail(f"run.warnings.by_category.{category}", "a count", n)
        counts.append((category, n))
    name = _get(warn, "log", "run.warnings.", (str,), "a file name", required=False, default=WARNINGS_LOG)
    if name != WARNINGS_LOG:   # a log is plain text under the runner's name; an .html or .svg would run
        refused.append(f"warnings log {name!r} is not named {WARNINGS_LOG} (not linked)")
        return tuple(counts), None
    try:
        log = inside_file(root, folder, name)
    except FileNotFoundError:
        log = None
    except RefusedFile as exc:
        refused.append(f"warnings log {exc}")
        log = None
    return tuple(counts), log


__all__ = [
    "ClaimRow",
    "FigureRef",
    "FIGURE_SIGNATURES",
    "MAX_FIGURE_BYTES",
    "MAX_RECORD_BYTES",
    "MethodRow",
    "MetricTable",
    "Record",
    "RefusedFile",
    "UnusableRecord",
    "WARNINGS_LOG",
    "figure_problem",
    "find_records",
    "visible",
    "walk_results",
    "inside_file",
    "parse_json",
    "read_inside",
    "read_record",
]
