"""The page behind ``corrpriors report DIR``: one self-contained HTML page of a results folder.

Every ``metrics.json`` under ``DIR`` (any depth) becomes a section: where it is, the seeds and
settings, the figures (PNG embedded as data URIs, the PDF linked relative to the page), every
metric table (mean ± std per x and method), the claim checks with their verdicts and seed
counts, the notes, the configuration (values actually used; ``--set`` overrides marked) and a
link to the warnings log. The page loads nothing from the network, references only files
that exist, and is written atomically (default ``DIR/report.html``). It is also well-formed
XML (polyglot HTML), so any parser can check it.
"""

from __future__ import annotations

import base64
import html
import json
import os
import pathlib
from collections.abc import Iterable
from typing import Any

from .._fileio import atomic_write_bytes
from .._methods import migrate_summary
from .registry import EXPERIMENTS

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 72em; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.3em; border-bottom: 1px solid #ccc; margin-top: 2em; }
h3 { font-size: 1.05em; margin-top: 1.4em; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: right; vertical-align: top; }
th { background: #f2f2f2; } td.text, th.text { text-align: left; }
.holds { color: #0a6b2d; font-weight: bold; } .fails { color: #a30000; font-weight: bold; }
.indicative { color: #7a5b00; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-size: 0.9em; color: #444; } .wide { overflow-x: auto; }
"""


def find_results(root: pathlib.Path) -> list[pathlib.Path]:
    """Every ``metrics.json`` under ``root``, the paper's experiments first, then by path."""
    order = {name: i for i, name in enumerate(EXPERIMENTS)}
    found = []
    for path in sorted(pathlib.Path(root).rglob("metrics.json")):
        try:
            name = json.loads(path.read_text()).get("experiment", "")
        except (OSError, ValueError, AttributeError):
            continue
        found.append((order.get(name, len(order)), str(path), path))
    return [p for *_, p in sorted(found)]


def write_report(root: pathlib.Path, output: pathlib.Path | None = None) -> tuple[pathlib.Path, int]:
    """Build the page for ``root`` and write it atomically; return ``(path, number of sections)``."""
    root = pathlib.Path(root)
    output = pathlib.Path(output) if output is not None else root / "report.html"
    results = find_results(root)
    if not results:
        raise ValueError(f"no metrics.json under {root} (run corrpriors reproduce --out {root} first)")
    page = build_report(root, results, output.parent)
    atomic_write_bytes(output, page.encode("utf-8"))
    return output, len(results)


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _num(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _rel(path: pathlib.Path, base: pathlib.Path) -> str:
    return pathlib.Path(os.path.relpath(path, base)).as_posix()


def _anchor(path: pathlib.Path, root: pathlib.Path) -> str:
    text = _rel(path.parent, root)
    return "r-" + "".join(c if c.isalnum() else "-" for c in text)


def build_report(root: pathlib.Path, results: Iterable[pathlib.Path], base: pathlib.Path) -> str:
    """Return the HTML text; links are relative to ``base`` (the folder of the page)."""
    from .. import __version__

    results = list(results)
    parts = ["<!DOCTYPE html>", '<html lang="en">', "<head>",
             '<meta charset="utf-8" />', f"<title>corrpriors results: {_e(root)}</title>",
             f"<style>{_CSS}</style>", "</head>", "<body>",
             "<h1>corrpriors results</h1>",
             f"<p>Results folder <code>{_e(root)}</code>: {len(results)} result folder(s); "
             f"page written by corrpriors {_e(__version__)}. Claim verdicts are paper-scale only when a "
             "run used the paper's settings and seed count; otherwise they are indicative.</p>", "<ul>"]
    summaries = []
    for path in results:
        summary = migrate_summary(json.loads(path.read_text()))[0]   # old method names -> current, with a note
        summaries.append((path, summary))
        parts.append(f'<li><a href="#{_anchor(path, root)}">{_e(summary.get("experiment", "?"))}: '
                     f"{_e(_rel(path.parent, root))}</a></li>")
    parts.append("</ul>")
    for path, summary in summaries:
        parts += _section(path, summary, root, base)
    parts += ["</body>", "</html>"]
    return "\n".join(parts) + "\n"


def _section(path: pathlib.Path, summary: dict, root: pathlib.Path, base: pathlib.Path) -> list[str]:
    folder = path.parent
    run = summary.get("run", {}) if isinstance(summary.get("run"), dict) else {}
    seeds = summary.get("seeds", [])
    status = run.get("claims", "paper-scale (no run record: verdicts as recorded)")
    out = [f'<h2 id="{_anchor(path, root)}">{_e(summary.get("experiment", "?"))}</h2>',
           f'<p>Folder <a href="{_e(_rel(folder, base))}/">{_e(_rel(folder, root))}</a>; '
           f"{len(seeds)} seed(s) ({_e(_seed_text(seeds))}); settings: {_e(run.get('settings', 'unknown'))}"
           + (f"; configuration hash {_e(run['config_hash'])}" if "config_hash" in run else "")
           + f'; <a href="{_e(_rel(path, base))}">metrics.json</a>.</p>']
    warn = run.get("warnings", {})
    log = folder / str(warn.get("log", "warnings.log"))
    if warn:
        counts = ", ".join(f"{n} {c}" for c, n in warn.get("by_category", {}).items()) or "none"
        link = f' (<a href="{_e(_rel(log, base))}">full text</a>)' if log.is_file() else ""
        out.append(f"<p>Warnings collected: {_e(counts)}{link}.</p>")
    out += _figures(folder, run, base)
    out += _metric_tables(summary)
    out += _claims(summary, status, len(seeds))
    notes = summary.get("extra", {}).get("notes", []) if isinstance(summary.get("extra"), dict) else []
    if notes:
        out += ["<h3>Notes</h3>", "<ul>"] + [f"<li>{_e(n)}</li>" for n in notes] + ["</ul>"]
    out += _config_table(summary, run)
    return out


def _seed_text(seeds: list) -> str:
    if len(seeds) > 12:
        return f"{seeds[0]}, {seeds[1]}, ..., {seeds[-1]}"
    return ", ".join(str(s) for s in seeds)


def _figures(folder: pathlib.Path, run: dict, base: pathlib.Path) -> list[str]:
    entries = run.get("figures")
    if entries is None:  # an older record: every PNG in the folder, without captions
        entries = [{"files": [p.name, p.with_suffix(".pdf").name], "caption": p.stem}
                   for p in sorted(folder.glob("*.png"))]
    out = []
    for entry in entries:
        files = [folder / f for f in entry.get("files", [])]
        png = next((f for f in files if f.suffix == ".png" and f.is_file()), None)
        if png is None:
            continue
        data = base64.b64encode(png.read_bytes()).decode("ascii")
        links = " ".join(f'<a href="{_e(_rel(f, base))}">{_e(f.suffix[1:].upper())}</a>' for f in files if f.is_file())
        caption = entry.get("caption", png.stem)
        out += ["<figure>", f'<img src="data:image/png;base64,{data}" alt="{_e(caption)}" />',
                f"<figcaption><code>{_e(png.stem)}</code>: {_e(caption)} ({links})</figcaption>", "</figure>"]
    return out


def _metric_tables(summary: dict) -> list[str]:
    x = summary.get("x", {})
    xs = x.get("values", [])
    out = []
    for metric, block in summary.get("metrics", {}).items():
        methods = block.get("methods", {})
        out.append(f"<h3>{_e(metric)} ({_e(block.get('better', '?'))} is better): mean ± std over seeds</h3>")
        out.append('<div class="wide"><table>')
        out.append("<tr><th>" + _e(x.get("name", "x")) + "</th>"
                   + "".join(f"<th>{_e(m)}</th>" for m in methods) + "</tr>")
        for i, xv in enumerate(xs):
            cells = []
            for stats in methods.values():
                m, s = stats["mean"][i], stats["std"][i]
                cells.append(f"<td>{_num(m)} ± {_num(s)}</td>" if m is not None else "<td>n/a</td>")
            out.append(f"<tr><td>{_e(_num(xv))}</td>{''.join(cells)}</tr>")
        out.append("</table></div>")
    return out


def _claims(summary: dict, status: str, n_seeds: int) -> list[str]:
    claims = summary.get("extra", {}).get("claims", []) if isinstance(summary.get("extra"), dict) else []
    if not claims:
        return []
    judged = status.startswith("paper-scale")
    head = f"<h3>Claim checks ({n_seeds} seed(s); {_e(status)})</h3>"
    out = [head, "<table>", '<tr><th class="text">verdict</th><th class="text">claim</th>'
                            '<th class="text">numbers</th></tr>']
    for c in claims:
        holds = bool(c.get("holds"))
        if judged:
            word, cls = ("holds", "holds") if holds else ("does not hold", "fails")
        else:
            word, cls = ("met (indicative)", "indicative") if holds else ("not met (indicative)", "indicative")
        out.append(f'<tr><td class="text {cls}">{word}</td><td class="text">{_e(c.get("claim", ""))}</td>'
                   f'<td class="text">{_e(c.get("detail", ""))}</td></tr>')
    out.append("</table>")
    return out


def _config_table(summary: dict, run: dict) -> list[str]:
    config = summary.get("config", {})
    overrides = run.get("overrides", {})
    resolved = run.get("resolved", {})
    out = ["<h3>Configuration (values used)</h3>", "<table>",
           '<tr><th class="text">field</th><th class="text">value</th><th class="text">note</th></tr>']
    for key, value in config.items():
        notes = []
        if key in overrides:
            notes.append("set with --set")
        if key in resolved:
            notes.append(f"given as {json.dumps(resolved[key].get('given'))}, resolved")
        out.append(f'<tr><td class="text">{_e(key)}</td><td class="text">{_e(json.dumps(value))}</td>'
                   f'<td class="text">{_e("; ".join(notes))}</td></tr>')
    out.append("</table>")
    return out


__all__ = ["build_report", "find_results", "write_report"]
