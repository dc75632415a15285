"""The page behind ``corrpriors report DIR``: one self-contained HTML page of a results folder.

Every ``metrics.json`` under ``DIR`` (any depth) becomes a section: where it is, the seeds and
settings, the figures (PNG embedded as data URIs, each file once and at most
:data:`MAX_EMBEDDED_BYTES` in all, the others and the PDF linked relative to the page), every
metric table (mean ± std per x and method, rounded to three significant digits, split into
several tables where the methods would not fit 1280 pixels), the claim checks (met / not met,
and whether the verdict is indicative), the notes, the configuration (the values the run used)
and a link to the warnings log.

Everything under ``DIR`` is untrusted (:mod:`._report_input`): every string is escaped (the
page is built only through :func:`_el`, which escapes text and attributes, and :class:`Markup`
is never made from file content), only regular files inside ``DIR`` are embedded or linked
(figures only as PNG and PDF files that start with their signature, the log only as
``warnings.log``; method labels of vocabulary names from the vocabulary), a
malformed ``metrics.json`` is skipped with a one-line reason (on the page and returned to the
caller), and the page is never written over an input or inside any run folder (under ``DIR``
or above the page's path). The page
loads nothing from the network, is written atomically and is well-formed XML (polyglot HTML),
so any parser can check it.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import math
import os
import pathlib
import re
import urllib.parse
from collections.abc import Iterable, Sequence
from typing import Any

from .._fileio import atomic_write_bytes, check_output_dir
from .._memory import format_bytes
from . import _config
from ._io import enclosing_run_folder
from ._report_input import (
    BIDI_CONTROLS,
    MAX_FIGURE_BYTES,
    Record,
    RefusedFile,
    UnusableRecord,
    find_records,
    read_inside,
    read_record,
    walk_results,
)
from .registry import EXPERIMENTS

#: Page width the tables are laid out for, in characters of the table font (1280 px screen).
TABLE_CHARACTERS = 118
#: At most this many method columns in one table.
MAX_METHOD_COLUMNS = 8
#: At most this many bytes of figures are embedded in one page (each file once); the others are linked.
MAX_EMBEDDED_BYTES = 64 * 2**20

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 72em; padding: 0 1em; color: #222;
       overflow-wrap: anywhere; }
h1 { font-size: 1.6em; } h2 { font-size: 1.3em; border-bottom: 1px solid #ccc; margin-top: 2em; }
h3 { font-size: 1.05em; margin-top: 1.4em; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: right; vertical-align: top; }
th { background: #f2f2f2; font-weight: 600; } td.text, th.text { text-align: left; }
td.num { white-space: nowrap; font-variant-numeric: tabular-nums; }
th.method { max-width: 11em; overflow-wrap: anywhere; }
.met { color: #0a6b2d; font-weight: bold; } .notmet { color: #b00020; font-weight: bold; }
.scale { font-size: 0.85em; padding: 0 0.4em; border-radius: 0.3em; white-space: nowrap; }
.indicative { color: #5a4a00; background: #fff3c4; } .paper { color: #00457a; background: #dcecff; }
.skipped { color: #b00020; } .refused { color: #b00020; font-size: 0.9em; }
figure { margin: 1em 0; } figure img { max-width: 100%; height: auto; border: 1px solid #ddd; }
figcaption { font-size: 0.9em; color: #444; } td.verdict { white-space: nowrap; }
.muted { color: #555; font-size: 0.9em; }
td.value { overflow-wrap: anywhere; max-width: 48em; }
"""


# ----------------------------------------------------------------------------- safe HTML


class Markup(str):
    """HTML built by :func:`_el` (already escaped); any other string is escaped when used."""


#: Characters XML forbids, C1 controls, and the bidirectional controls (which would reorder
#: what a reader sees: a file name reading ``gnp.exe`` as ``exe.png``); each becomes U+FFFD.
_BAD_CHARS = re.compile(f"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufffe\uffff\ud800-\udfff{BIDI_CONTROLS}]")


def _esc(value: Any) -> str:
    """Escape ``value`` for text or an attribute; characters XML forbids and bidirectional
    controls become U+FFFD (visible, and unable to reorder the text around them).
    """
    if isinstance(value, Markup):
        return value
    return html.escape(_BAD_CHARS.sub("\ufffd", str(value)), quote=True)


def _el(tag: str, *children: Any, **attrs: Any) -> Markup:
    """``<tag attrs>children</tag>``; text children and every attribute value are escaped.

    Attribute names come from the code only (``class_`` for ``class``); a child that is not
    :class:`Markup` is text. ``None`` children and attributes are left out.
    """
    parts = [f' {k.rstrip("_").replace("_", "-")}="{_esc(v)}"' for k, v in attrs.items() if v is not None]
    inner = "".join(_esc(c) for c in children if c is not None)
    return Markup(f"<{tag}{''.join(parts)}>{inner}</{tag}>")


def _void(tag: str, **attrs: Any) -> Markup:
    parts = [f' {k.rstrip("_").replace("_", "-")}="{_esc(v)}"' for k, v in attrs.items() if v is not None]
    return Markup(f"<{tag}{''.join(parts)} />")


def _join(items: Iterable[Any], sep: str = "") -> Markup:
    return Markup(_esc(sep).join(_esc(i) for i in items))


def _breakable(name: str) -> Markup:
    """A method name whose underscores may break a line (``<wbr />`` after each)."""
    return Markup(("_" + _void("wbr")).join(_esc(part) for part in name.split("_")))


def _href(path: pathlib.Path, base: pathlib.Path) -> str:
    """A relative URL from the page's folder ``base`` to ``path``, each segment percent-encoded.

    Encoding ``:`` means no segment can read as a URL scheme (``javascript:``).
    """
    rel = pathlib.Path(os.path.relpath(path, base)).as_posix()
    quoted = "/".join(urllib.parse.quote(seg, safe="") for seg in rel.split("/"))
    return quoted if quoted.startswith((".", "%")) or "/" in quoted else "./" + quoted


# ----------------------------------------------------------------------------- numbers


def format_number(value: float | None, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits (``n/a`` for None); scientific outside [1e-3, 1e5)."""
    if value is None or not math.isfinite(value):
        return "n/a"
    if value == 0:
        return "0"
    if not 1e-3 <= abs(value) < 1e5:
        return f"{value:.{digits - 1}e}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{value:.{decimals}f}"


def format_mean_std(mean: float | None, std: float | None, digits: int = 3) -> str:
    """``mean ± std``: the std to two significant digits, the mean to as many decimals (at most ``digits`` significant).

    So ``0.1412 ± 0.0473`` reads ``0.141 ± 0.047`` and ``-0.00251 ± 0.02944`` reads
    ``-0.003 ± 0.029``; a spread too small to show at the mean's precision is written
    ``<0.001`` (for three decimals), so ``0.752 ± 5.66e-06`` reads ``0.752 ± <0.001``. Outside
    [1e-3, 1e5) both are scientific with the mean's exponent, ``(1.23 ± 0.05)e+06``. A missing
    mean is ``n/a``; a missing std is left out.
    """
    if mean is None or not math.isfinite(mean):
        return "n/a"
    if std is None or not math.isfinite(std):
        return format_number(mean, digits)
    std = abs(std)
    if mean == 0 and std == 0:
        return "0 ± 0"
    if mean != 0 and not 1e-3 <= abs(mean) < 1e5:
        exponent = math.floor(math.log10(abs(mean)))
        m, s = mean / 10.0 ** exponent, std / 10.0 ** exponent
        return f"({m:.{digits - 1}f} ± {_small(s, digits - 1)})e{exponent:+03d}"
    decimals = []
    if mean != 0:
        decimals.append(digits - 1 - math.floor(math.log10(abs(mean))))
    if std > 0:
        decimals.append(1 - math.floor(math.log10(std)))
    d = min(max(0, min(decimals)), 12)
    return f"{mean:.{d}f} ± {_small(std, d)}"


def _small(std: float, decimals: int) -> str:
    if std == 0:
        return "0"
    text = f"{std:.{decimals}f}"
    if float(text) == 0:
        return "<" + (f"{10.0 ** -decimals:.{decimals}f}" if decimals else "1")
    return text


def _format_x(x: float | None) -> str:
    if x is None:
        return "n/a"
    return f"{x:g}" if abs(x) < 1e6 else f"{x:.3g}"


def _format_value(value: Any, depth: int = 0) -> str:
    """A configuration value as a person reads it: strings plain, lists comma-separated."""
    if depth > 4:
        return "..."
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value else "(empty)"
    if isinstance(value, int):
        return str(value) if abs(value) < 10**15 else f"{float(value):.6g}"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else "n/a"
    if isinstance(value, list):
        items = [_format_value(v, depth + 1) for v in value[:50]]
        return ", ".join(items) + (f", ... ({len(value)} values)" if len(value) > 50 else "") if items else "(none)"
    if isinstance(value, dict):
        items = [f"{k}: {_format_value(v, depth + 1)}" for k, v in list(value.items())[:50]]
        return "{" + ", ".join(items) + "}"
    return str(value)


# ----------------------------------------------------------------------------- the page


@dataclasses.dataclass(frozen=True)
class Skipped:
    """A ``metrics.json`` left out of the page, and why (one line)."""

    path: pathlib.Path
    reason: str


@dataclasses.dataclass(frozen=True)
class ReportResult:
    """What :func:`write_report` wrote: the page, the sections shown, what was skipped or refused."""

    path: pathlib.Path
    n_shown: int
    skipped: tuple[Skipped, ...]
    refused: tuple[str, ...]


def find_results(root: pathlib.Path) -> list[pathlib.Path]:
    """Every ``metrics.json`` under ``root`` (regular files, symlinked folders not followed), by path."""
    return find_records(pathlib.Path(root))


def read_results(root: pathlib.Path) -> tuple[list[Record], list[Skipped]]:
    """Read every ``metrics.json`` under ``root``: the usable records (paper's experiments first) and the skipped."""
    records, skipped, _ = _read_all(pathlib.Path(root))
    return records, skipped


def _read_all(root: pathlib.Path) -> tuple[list[Record], list[Skipped], list[pathlib.Path]]:
    root = root.resolve()
    paths, folders = walk_results(root)
    records, skipped = [], []
    for path in paths:
        try:
            records.append(read_record(path, root))
        except UnusableRecord as exc:
            skipped.append(Skipped(path, " ".join(str(exc).split())))
    order = {name: i for i, name in enumerate(EXPERIMENTS)}
    records.sort(key=lambda r: (order.get(r.experiment, len(order)), str(r.path)))
    return records, skipped, folders


def check_output(output: pathlib.Path, records: Sequence[Record], skipped: Sequence[Skipped],
                 run_folders: Sequence[pathlib.Path] = ()) -> None:
    """Refuse an output path that is an input of the page or lies inside a run folder.

    Run folders are those of the records (read or skipped) and ``run_folders`` (any folder
    holding a ``metrics.json``, a ``config.json`` or ``seeds/``: interrupted runs too), and any
    folder above the output that is a run folder (:func:`~._io.enclosing_run_folder`), inside ``DIR`` or not:
    ``-o`` never writes into another results folder's run. A path named ``metrics.json`` or
    ``config.json`` that exists is refused too.

    Raises
    ------
    ValueError
        One line naming the path and the run folder (or input) it would overwrite.
    """
    target = pathlib.Path(output)
    candidates = {target.parent.resolve() / target.name}
    if target.is_symlink():
        candidates.add(target.resolve())
    folders = ({r.folder.resolve() for r in records} | {s.path.parent.resolve() for s in skipped}
               | {pathlib.Path(f).resolve() for f in run_folders})
    inputs = {r.path.resolve() for r in records} | {s.path.resolve() for s in skipped}
    for r in records:
        inputs |= {p for f in r.figures for p in f.links} | ({r.warnings_log} if r.warnings_log else set())
    for path in candidates:
        if path in inputs:
            raise ValueError(f"-o {output}: is a file the report reads; it is never overwritten (choose another -o)")
        for folder in sorted(folders):
            if path.is_relative_to(folder):
                raise ValueError(f"-o {output}: lies inside the run folder {folder}, which holds results; "
                                 "write the page outside every run folder")
        # a run folder outside DIR (another configuration's results) is protected too
        enclosing = enclosing_run_folder(path.parent)
        if enclosing is not None:
            raise ValueError(f"-o {output}: lies inside the run folder {enclosing}, which holds results; "
                             "write the page outside every run folder")
        if path.name in _RUN_FILES and os.path.lexists(path):
            raise ValueError(f"-o {output}: is a run's {path.name}; it is never overwritten (choose another -o)")


#: Names of the files of a run folder the page is never written as.
_RUN_FILES = ("metrics.json", "config.json")


def write_report(root: pathlib.Path, output: pathlib.Path | None = None) -> ReportResult:
    """Build the page for ``root`` and write it atomically.

    Raises
    ------
    ValueError
        No ``metrics.json`` under ``root``, or ``output`` would overwrite an input or lies in a
        run folder (nothing is written).
    OSError
        ``output`` cannot be written; its folder, or a parent of it, exists and is not a
        directory (:class:`NotADirectoryError`, naming it).
    """
    root = pathlib.Path(root)
    output = pathlib.Path(output) if output is not None else root / "report.html"
    records, skipped, folders = _read_all(root)
    if not records and not skipped:
        raise ValueError(f"no metrics.json under {root} (run corrpriors reproduce --out {root} first)")
    check_output(output, records, skipped, folders)
    check_output_dir(output.parent)   # "afile is not a directory", not mkdir's "File exists"
    page = build_page(root, records, skipped, output.parent.resolve())
    atomic_write_bytes(output, page.encode("utf-8"))
    refused = tuple(f"{r.path.parent}: {why}" for r in records for why in r.refused)
    return ReportResult(output, len(records), tuple(skipped), refused)


def build_report(root: pathlib.Path, results: Iterable[pathlib.Path], base: pathlib.Path) -> str:
    """Return the HTML text of the ``metrics.json`` files ``results``; links relative to ``base``."""
    resolved = pathlib.Path(root).resolve()
    records, skipped = [], []
    for path in results:
        try:
            records.append(read_record(pathlib.Path(path).resolve(), resolved))
        except UnusableRecord as exc:
            skipped.append(Skipped(pathlib.Path(path), str(exc)))
    return build_page(root, records, skipped, pathlib.Path(base).resolve())


def build_page(root: pathlib.Path, records: Sequence[Record], skipped: Sequence[Skipped],
               base: pathlib.Path) -> str:
    """Return the HTML text: a table of contents, a section per record, the skipped folders."""
    from .. import __version__

    root_resolved = pathlib.Path(root).resolve()
    body: list[Any] = [
        _el("h1", "corrpriors results"),
        _el("p", "Results folder ", _el("code", str(root)), f": {len(records)} result folder(s) shown",
            f", {len(skipped)} skipped (see the end of the page)" if skipped else "",
            f"; page written by corrpriors {__version__}. A claim's verdict is paper-scale only when "
            "the run used the paper's settings and seed count (full-scale: the default settings of an "
            "experiment that is not the paper's); otherwise it is marked indicative."),
    ]
    toc = [_el("li", _el("a", f"{r.experiment}: {_rel(r.folder, root_resolved)}", href=f"#run-{i}"))
           for i, r in enumerate(records)]
    if skipped:
        toc.append(_el("li", _el("a", f"skipped: {len(skipped)} result folder(s)", href="#skipped")))
    if toc:
        body.append(_el("ul", *toc))
    embedder = _Embedder(MAX_EMBEDDED_BYTES)
    for i, record in enumerate(records):
        body.extend(_section(i, record, root_resolved, base, embedder))
    if skipped:
        body.append(_el("h2", "Skipped result folders", id="skipped"))
        body.append(_el("ul", *[_el("li", _el("code", _rel(s.path, root_resolved)), ": ",
                                        _el("span", s.reason, class_="skipped")) for s in skipped]))
    head = _el("head", _void("meta", charset="utf-8"), _el("title", f"corrpriors results: {root}"),
               _el("style", Markup(_CSS)))
    page = _el("html", head, _el("body", *_lines(body)), lang="en")
    return "<!DOCTYPE html>\n" + page + "\n"


def _lines(parts: Iterable[Any]) -> list[Markup]:
    return [Markup(_esc(p) + "\n") for p in parts]


def _rel(path: pathlib.Path, root: pathlib.Path) -> str:
    try:
        return pathlib.Path(path).resolve().relative_to(root).as_posix() or "."
    except ValueError:
        return str(path)


def _section(i: int, r: Record, root: pathlib.Path, base: pathlib.Path, embedder: _Embedder) -> list[Any]:
    n = len(r.seeds)
    facts: list[Any] = ["Folder ", _el("a", _rel(r.folder, root) + "/", href=_href(r.folder, base) + "/"),
                        f"; {n} seed{'s' if n != 1 else ''} ({_seed_text(r.seeds)})"]
    if r.settings:
        facts.append(f"; {r.settings} settings")
    if r.config_hash:
        facts += ["; configuration hash ", _el("code", r.config_hash)]
    facts += ["; ", _el("a", "metrics.json", href=_href(r.path, base)), "."]
    out: list[Any] = [_el("h2", r.experiment, id=f"run-{i}"), _el("p", *facts)]
    if r.warning_counts is not None:
        counts = ", ".join(f"{c} {k}" for k, c in r.warning_counts) or "none"
        link = [" (", _el("a", "full text", href=_href(r.warnings_log, base)), ")"] if r.warnings_log else []
        out.append(_el("p", f"Warnings collected: {counts}", *link, "."))
    if r.refused:
        out.append(_el("p", "Not shown (files that are not regular files inside the results folder): ",
                       "; ".join(r.refused), class_="refused"))
    out += _figures(r, base, embedder)
    for table in r.metrics:
        out += _metric_tables(table, r.x_name, r.xs)
    out += _claims(r)
    if r.notes:
        out += [_el("h3", "Notes"), _el("ul", *[_el("li", note) for note in r.notes])]
    out += _config_table(r)
    return out


def _seed_text(seeds: Sequence[int]) -> str:
    if len(seeds) > 12:
        return f"{seeds[0]}, {seeds[1]}, ..., {seeds[-1]}"
    return ", ".join(str(s) for s in seeds) or "none"


class _Embedder:
    """The figures a page embeds: each file at most once, at most :data:`MAX_EMBEDDED_BYTES` in all.

    A figure whose file the page already embeds points to it (``#fig-N``) rather than embed it
    again; one beyond the budget (or larger than :data:`MAX_FIGURE_BYTES`) is linked, and the
    page says why. So a record listing the same large PNG many times cannot blow the page up.
    """

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.used = 0
        self.seen: dict[pathlib.Path, str] = {}   # resolved file -> id of the figure embedding it
        self.count = 0

    def embed(self, path: pathlib.Path) -> tuple[str | None, str | None, str]:
        """``(data URI, id of an earlier figure, why not embedded)``: one of the first two, or neither."""
        if path in self.seen:
            return None, self.seen[path], ""
        try:
            size = os.stat(path, follow_symlinks=False).st_size
        except OSError:
            return None, None, "it cannot be read"
        if size > MAX_FIGURE_BYTES:
            return None, None, f"it is {format_bytes(size)}, more than the {format_bytes(MAX_FIGURE_BYTES)} embedded"
        if self.used + size > self.budget:
            return None, None, (f"the page already embeds {format_bytes(self.used)} of figures "
                                f"(at most {format_bytes(self.budget)})")
        try:
            data = read_inside(path, MAX_FIGURE_BYTES)
        except RefusedFile as exc:
            return None, None, str(exc)
        self.used += len(data)
        self.count += 1
        self.seen[path] = f"fig-{self.count}"
        return f"data:image/png;base64,{base64.b64encode(data).decode('ascii')}", None, ""


def _figures(r: Record, base: pathlib.Path, embedder: _Embedder) -> list[Any]:
    out = []
    for fig in r.figures:
        if fig.png is None:
            continue
        data, same_as, why = embedder.embed(fig.png)
        links = _join([_el("a", p.suffix[1:].upper() or p.name, href=_href(p, base)) for p in fig.links], " ")
        caption = fig.caption or fig.stem
        figcaption = _el("figcaption", _el("code", fig.stem), f": {caption} (", links, ")")
        if data is not None:
            out.append(_el("figure", _void("img", src=data, alt=caption), figcaption,
                           id=embedder.seen[fig.png]))
        elif same_as is not None:
            out.append(_el("figure", _el("p", "The same image as ", _el("a", "the figure above", href=f"#{same_as}"),
                                         " (embedded once).", class_="muted"), figcaption))
        else:
            out.append(_el("figure", _el("p", f"Not embedded: {why}; open it from the link below.",
                                         class_="muted"), figcaption))
    return out


def method_groups(methods: Sequence[Any], cells: Sequence[Sequence[str]], x_width: int,
                  budget: int = TABLE_CHARACTERS, most: int = MAX_METHOD_COLUMNS) -> list[list[int]]:
    """Split method columns, in order, into as few tables of balanced size as fit ``budget`` characters.

    A column is as wide as its widest number cell or its header (headers break after about
    14 characters, at underscores or spaces), plus padding; every table also holds the x column.
    """
    widths = [max([min(len(m.label), 14)] + [len(c) for c in cells[j]]) + 3 for j, m in enumerate(methods)]
    n = len(widths)
    for n_groups in range(1, n + 1):
        size = -(-n // n_groups)
        groups = [list(range(k, min(k + size, n))) for k in range(0, n, size)]
        if all(len(g) <= most and x_width + 3 + sum(widths[j] for j in g) <= budget for g in groups):
            return groups
    return [[j] for j in range(n)]


def _metric_tables(table: Any, x_name: str, xs: Sequence[float | None]) -> list[Any]:
    better = f" ({table.better} is better)" if table.better else ""
    heading = _el("h3", _el("code", table.name), f"{better}: mean ± std over seeds")
    if not table.methods:
        return [heading, _el("p", "no methods recorded", class_="muted")]
    cells = [[format_mean_std(m, s) for m, s in zip(row.mean, row.std)] for row in table.methods]
    x_texts = [_format_x(x) for x in xs]
    x_width = max([len(x_name)] + [len(t) for t in x_texts])
    groups = method_groups(table.methods, cells, x_width)
    out: list[Any] = [heading]
    for k, group in enumerate(groups):
        header = [_el("th", x_name, class_="text")]
        for j in group:
            method = table.methods[j]
            label = _breakable(method.label) if method.label == method.name else method.label
            header.append(_el("th", label, class_="method", title=method.name))
        rows = [_el("tr", *header)]
        for i, x in enumerate(x_texts):
            rows.append(_el("tr", _el("td", x, class_="num"), *[_el("td", cells[j][i], class_="num") for j in group]))
        caption = (_el("caption", f"methods {group[0] + 1}-{group[-1] + 1} of {len(table.methods)}",
                       class_="muted") if len(groups) > 1 else None)
        out.append(_el("table", caption, *rows, class_="metric", data_part=f"{k + 1}/{len(groups)}"))
    return out


def _claims(r: Record) -> list[Any]:
    if not r.claims:
        return []
    n = len(r.seeds)
    if _config.is_full_scale(r.status):
        paper = r.status is None or r.status == "paper-scale"
        scale = _el("span", "paper-scale" if paper else "full-scale", class_="scale paper")
        seeds = f"{n} seed{'s' if n != 1 else ''}"
        say = ("Verdicts as recorded (an older record without the run's settings)." if r.status is None
               else f"Verdicts at paper scale ({seeds}, the paper's settings)." if paper
               else f"Verdicts at full scale ({seeds}, the experiment's {r.settings or 'default'} settings, "
                    "which are not the paper's).")
    else:
        scale = _el("span", "indicative", class_="scale indicative")
        settings = f"{r.settings} settings" if r.settings else "settings other than the paper's"
        say = (f"Verdicts are indicative: {n} seed{'s' if n != 1 else ''} at {settings}; the paper-scale "
               "verdict needs the paper's settings and seed count (see the README).")
    out = [_el("h3", "Claim checks"), _el("p", say, class_="muted"),
           _el("tr", _el("th", "verdict", class_="text"), _el("th", "claim", class_="text"),
               _el("th", "numbers", class_="text"))]
    rows = []
    for c in r.claims:
        word, cls = ("met", "met") if c.holds else ("not met", "notmet")
        rows.append(_el("tr", _el("td", _el("span", word, class_=cls), " ", scale, class_="text verdict"),
                        _el("td", c.claim, class_="text"), _el("td", c.detail, class_="text")))
    return [out[0], out[1], _el("table", out[2], *rows, class_="claims")]


def _config_table(r: Record) -> list[Any]:
    if not r.config:
        return []
    rows = [_el("tr", _el("th", "setting", class_="text"), _el("th", "value used", class_="text"),
                _el("th", "note", class_="text"))]
    for key, value, note in r.config:
        rows.append(_el("tr", _el("td", _el("code", key), class_="text"),
                        _el("td", _format_value(value), class_="text value"), _el("td", note, class_="text")))
    return [_el("h3", "Configuration (the values the run used)"), _el("table", *rows, class_="config")]


__all__ = [
    "MAX_EMBEDDED_BYTES",
    "MAX_METHOD_COLUMNS",
    "Markup",
    "ReportResult",
    "Skipped",
    "TABLE_CHARACTERS",
    "build_page",
    "build_report",
    "check_output",
    "find_results",
    "format_mean_std",
    "format_number",
    "method_groups",
    "read_results",
    "write_report",
]
