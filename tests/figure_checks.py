"""Checks every figure of the package must pass (used by the figure and experiment tests).

- every axes has an x and a y label, every colour bar a label;
- every legend lies outside every data area (so it hides no curve, bar or reference line) and
  each entry's colour differs from the patch behind it (the legend's opaque frame, or whatever
  is under a transparent legend);
- titles, axis labels and legends do not overlap each other;
- after saving as :func:`corrpriors.plotting._common.save_figure` does, every text lies inside the
  figure, and no axis label or title is longer than its axes (constrained layout makes room
  for a label only across its axis: a longer one runs past its axes, to the figure's edge or
  into the next panel's);
- the figure's text names the environment and the seed count (when given);
- text is readable at report size: at least :data:`MIN_TEXT_PX` pixels high when the figure is
  shown :data:`REPORT_WIDTH_PX` pixels wide;
- axis labels hold no formula typed as raw text (``||V_expert||``; mathtext instead);
- a log x axis labels at least three ticks (or every data x), and is drawn only where it shows
  more than a linear one (at least 4 positive x values over at least a decade);
- the x axis of a curve plot ends at its data (no empty margin such as 21 for data ending at 20;
  error bars, whose caps need a margin, are exempt);
- bars that start at 0 differ visibly (by at least 10% of the y range), else a zoomed point plot;
- a spread band never crosses a reference line that bounds the metric (``gid="bound"``: the
  optimal policy's return), and is outlined
  in its line's colour (overlapping bands stay apart);
- coinciding curves (e.g. several baselines flat at 0) show their markers at different points, so
  none is hidden;
- arrows drawn over coloured cells contrast with them (WCAG ratio at least 3);
- the palette: a legend entry or line labelled with a method (or model) of the method vocabulary
  has that method's colour, and a full method label its variant's line style.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_rgba
from matplotlib.patches import Rectangle
from matplotlib.quiver import Quiver


def _rgb(color) -> np.ndarray | None:
    rgba = np.asarray(to_rgba(color))
    return None if rgba[3] == 0 else rgba[:3]


def _handle_colors(handle) -> list[np.ndarray]:
    out = []
    if hasattr(handle, "get_facecolor") and not hasattr(handle, "get_markerfacecolor"):
        fc = np.atleast_2d(handle.get_facecolor())
        out += [c for c in (_rgb(row) for row in fc) if c is not None]
    if hasattr(handle, "get_color") and hasattr(handle, "get_linestyle"):
        try:
            out.append(_rgb(handle.get_color()))
        except (ValueError, TypeError):
            pass
    return [c for c in out if c is not None]


def _is_colorbar(ax) -> bool:
    return getattr(ax, "_colorbar", None) is not None


def _shrink(bbox, px: float = 1.0):
    from matplotlib.transforms import Bbox

    return Bbox.from_extents(bbox.x0 + px, bbox.y0 + px, bbox.x1 - px, bbox.y1 - px)


def _backgrounds(fig, legend, bbox) -> list[np.ndarray]:
    frame = legend.get_frame()
    face = _rgb(frame.get_facecolor()) if legend.get_frame_on() else None
    if face is not None and (frame.get_alpha() is None or frame.get_alpha() > 0.9):
        return [face]
    behind = [_rgb(fig.get_facecolor())]
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        if bbox.overlaps(ax.get_window_extent(renderer)):
            behind.append(_rgb(ax.get_facecolor()))
            for patch in ax.patches:
                if bbox.overlaps(patch.get_window_extent(renderer)):
                    behind.append(_rgb(patch.get_facecolor()))
    return [b for b in behind if b is not None]


#: Width (pixels) at which the report shows a figure, and the least text height there.
REPORT_WIDTH_PX = 1000
MIN_TEXT_PX = 8.0


def _data_lines(ax):
    """The lines of ``ax`` drawn in data coordinates (not axhline/axvline), with at least 2 points."""
    return [line for line in ax.get_lines()
            if line.get_transform() == ax.transData and len(np.atleast_1d(line.get_xdata())) >= 2]


def _text_problems(fig, renderer) -> list[str]:
    out = []
    width_in = fig.get_figwidth()
    for text in fig.findobj(lambda a: hasattr(a, "get_fontsize") and hasattr(a, "get_text")):
        if not text.get_visible() or not text.get_text().strip():
            continue
        try:
            if not text.get_window_extent(renderer).width:
                continue
        except (RuntimeError, ValueError):
            continue
        px = text.get_fontsize() * REPORT_WIDTH_PX / (72.0 * width_in)
        if px < MIN_TEXT_PX:
            out.append(f"text {text.get_text()[:30]!r} is {px:.1f} px high at {REPORT_WIDTH_PX} px width "
                       f"(font {text.get_fontsize():.1f} pt on a {width_in:.1f} in figure)")
            break
    return out


def _raw_formula(label: str) -> bool:
    outside = re.sub(r"\$[^$]*\$", "", label)
    return "||" in outside or re.search(r"\b[A-Za-z]+_[A-Za-z]+\b", outside) is not None


def _axis_problems(ax, name: str, renderer) -> list[str]:
    out = []
    for label in (ax.get_xlabel(), ax.get_ylabel()):
        if _raw_formula(label):
            out.append(f"{name!r}: axis label {label!r} types a formula as raw text")
    lines = _data_lines(ax)
    xs = np.concatenate([np.asarray(line.get_xdata(), float) for line in lines]) if lines else np.array([])
    if ax.get_xscale() == "log":
        pos = np.unique(xs[np.isfinite(xs) & (xs > 0)])
        lo, hi = ax.get_xlim()
        ticks = [t for t, lab in zip(ax.get_xticks(), ax.get_xticklabels())
                 if lo * (1 - 1e-9) <= t <= hi * (1 + 1e-9) and lab.get_text().strip()]
        if len(ticks) < min(3, pos.size):
            out.append(f"{name!r}: log x axis labels only {len(ticks)} ticks for {pos.size} data x values")
        twins = [other for other in ax.figure.axes if other is not ax and other.get_xscale() == "linear"
                 and _same_curves(other, ax)]
        if twins and pos.size and (pos.size < 4 or pos[-1] / pos[0] < 10):
            out.append(f"{name!r}: a log x panel of {pos.size} points over a factor {pos[-1] / pos[0]:.3g} "
                       "shows nothing its linear twin does not")
    if lines and xs.size and not ax.images and not ax.patches and not _has_errorbars(ax):
        transform = (np.log10 if ax.get_xscale() == "log" else (lambda v: v))
        finite = xs[np.isfinite(xs) & ((xs > 0) if ax.get_xscale() == "log" else True)]
        if finite.size and finite.max() > finite.min():
            d0, d1 = transform(finite.min()), transform(finite.max())
            l0, l1 = (transform(v) for v in sorted(ax.get_xlim()))
            if (d0 - l0) > 0.01 * (d1 - d0) or (l1 - d1) > 0.01 * (d1 - d0):
                out.append(f"{name!r}: x axis {ax.get_xlim()} reaches beyond the data "
                           f"[{finite.min():g}, {finite.max():g}]")
    bars = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_y() == 0 and p.get_width() < 10]
    if len(bars) >= 2:
        heights = np.array([p.get_height() for p in bars])
        span = abs(np.subtract(*ax.get_ylim()))
        if span and (heights.max() - heights.min()) < 0.1 * span:
            out.append(f"{name!r}: bars from 0 differ by {heights.max() - heights.min():.3g}, under 10% of the "
                       f"y range {span:.3g}: the differences are invisible")
    out += _band_problems(ax, name, lines)
    out += _hidden_curves(ax, name, lines)
    out += _arrow_problems(ax, name)
    return out


def _has_errorbars(ax) -> bool:
    from matplotlib.container import ErrorbarContainer

    return any(isinstance(c, ErrorbarContainer) for c in ax.containers)


def _drawn_texts(fig):
    """Every visible, non-empty text of ``fig`` that is drawn (tick labels of ticks inside the view)."""
    hidden = set()
    for ax in fig.axes:
        for axis, limits in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            lo, hi = sorted(limits)
            tol = 1e-9 * abs(hi - lo)
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if not lo - tol <= tick.get_loc() <= hi + tol:
                    hidden |= {id(tick.label1), id(tick.label2)}
    return [t for t in fig.findobj(lambda a: hasattr(a, "get_text") and hasattr(a, "get_window_extent"))
            if id(t) not in hidden and t.get_visible() and str(t.get_text()).strip()]


def _saved_text_problems(fig) -> list[str]:
    """Text outside the figure, or axis labels and titles longer than their axes, once saved as the runner saves."""
    import inspect

    from corrpriors.plotting._common import save_figure

    dpi = inspect.signature(save_figure).parameters["dpi"].default
    old_dpi = fig.dpi
    fig.set_dpi(dpi)                       # laid out as the saved file is (the tight box only crops)
    try:
        fig.canvas.draw()
        return _text_extent_problems(fig, fig.canvas.get_renderer())
    finally:
        fig.set_dpi(old_dpi)
        fig.canvas.draw()


def _text_extent_problems(fig, renderer) -> list[str]:
    out = []
    frame = fig.bbox
    for text in _drawn_texts(fig):
        try:
            box = text.get_window_extent(renderer)
        except (RuntimeError, ValueError):
            continue
        if box.width and (box.x0 < frame.x0 - 1 or box.y0 < frame.y0 - 1 or box.x1 > frame.x1 + 1
                          or box.y1 > frame.y1 + 1):
            out.append(f"text {text.get_text()[:40]!r} reaches outside the figure ({box.bounds} vs {frame.bounds})")
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        span = ax.get_window_extent(renderer)
        for kind, artist, length, along in (("x label", ax.xaxis.label, span.width, "width"),
                                            ("y label", ax.yaxis.label, span.height, "height"),
                                            ("title", ax.title, span.width, "width")):
            if artist.get_visible() and artist.get_text().strip():
                size = getattr(artist.get_window_extent(renderer), along)
                if size > length + 1:
                    out.append(f"{kind} {artist.get_text()[:40]!r} is longer than its axes "
                               f"({size:.0f} > {length:.0f} px)")
    return out


def _same_curves(a, b) -> bool:
    """Whether axes ``a`` and ``b`` draw the same curves (same y values, x > 0 where one is log)."""
    ya = [np.asarray(line.get_ydata(), float) for line in _data_lines(a)]
    yb = [np.asarray(line.get_ydata(), float) for line in _data_lines(b)]
    if not ya or len(ya) != len(yb):
        return False
    return all(u.size >= v.size and np.allclose(u[u.size - v.size:], v, equal_nan=True) for u, v in zip(ya, yb))


def _band_problems(ax, name: str, lines) -> list[str]:
    out = []
    bands = [c for c in ax.collections if isinstance(c, PolyCollection) and not isinstance(c, Quiver)]
    refs = [line for line in ax.get_lines() if line not in lines and line.get_gid() == "bound"]
    for band in bands:
        width = np.atleast_1d(band.get_linewidth())
        edges = np.atleast_2d(band.get_edgecolor())
        if not (width.size and width.max() > 0 and edges.size and edges[:, 3].max() > 0):
            out.append(f"{name!r}: a spread band has no outline; overlapping bands cannot be told apart")
        for ref in refs:
            level = float(np.asarray(ref.get_ydata(), float)[0])
            ys = np.concatenate([np.asarray(line.get_ydata(), float) for line in lines]) if lines else []
            ys = np.asarray(ys)[np.isfinite(ys)]
            verts = np.concatenate([p.vertices[:, 1] for p in band.get_paths()]) if band.get_paths() else []
            verts = np.asarray(verts)[np.isfinite(verts)]
            tol = 1e-9 * max(1.0, abs(level))
            if ys.size and verts.size and ys.max() <= level + tol and verts.max() > level + tol:
                out.append(f"{name!r}: a band reaches {verts.max():.4g}, above the optimum {level:.4g}")
            if ys.size and verts.size and ys.min() >= level - tol and verts.min() < level - tol:
                out.append(f"{name!r}: a band reaches {verts.min():.4g}, below the optimum {level:.4g}")
    return out


def _marked(line) -> set:
    n = len(np.atleast_1d(line.get_xdata()))
    if line.get_marker() in (None, "", "None", " "):
        return set()
    every = line.get_markevery()
    if every is None:
        return set(range(n))
    if isinstance(every, tuple):
        start, step = every
        return set(range(start, n, step))
    if isinstance(every, int):
        return set(range(0, n, every))
    return set(np.arange(n)[every].tolist())


def _hidden_curves(ax, name: str, lines) -> list[str]:
    """Marked curves within 1% of the y axis of each other at every x hide each other unless staggered."""
    out = []
    tol = 0.01 * abs(np.subtract(*ax.get_ylim()))
    marked = [line for line in lines if line.get_marker() not in (None, "", "None", " ")]
    for a, b in itertools.combinations(marked, 2):
        xa, ya = np.asarray(a.get_xdata(), float), np.asarray(a.get_ydata(), float)
        xb, yb = np.asarray(b.get_xdata(), float), np.asarray(b.get_ydata(), float)
        if xa.shape == xb.shape and np.allclose(xa, xb) and np.allclose(ya, yb, atol=tol, equal_nan=True):
            ma, mb = _marked(a), _marked(b)
            if not ma or not mb or ma & mb:
                out.append(f"{name!r}: curves {a.get_label()!r} and {b.get_label()!r} coincide and the later "
                           "hides the earlier (no staggered markers)")
    return out


def _arrow_problems(ax, name: str) -> list[str]:
    from corrpriors.plotting._policy import contrast_ratio

    out = []
    images = [im for im in ax.images if np.asarray(im.get_array()).ndim == 3]
    for quiver in [c for c in ax.collections if isinstance(c, Quiver)]:
        for image in images:
            rgb = np.asarray(image.get_array(), float)[..., :3]
            if rgb.max() > 1.0:
                rgb = rgb / 255.0
            left, right, bottom, top = image.get_extent()
            rows, cols = rgb.shape[:2]
            row0, row_end = (top, bottom) if image.origin == "upper" else (bottom, top)
            offsets = np.asarray(quiver.get_offsets(), float)
            c = np.clip(np.floor((offsets[:, 0] - left) / (right - left) * cols).astype(int), 0, cols - 1)
            r = np.clip(np.floor((offsets[:, 1] - row0) / (row_end - row0) * rows).astype(int), 0, rows - 1)
            under = rgb[r, c]
            colours = np.atleast_2d(quiver.get_facecolor())[:, :3]
            colours = np.broadcast_to(colours, under.shape) if colours.shape[0] == 1 else colours
            ratio = contrast_ratio(colours, under)
            if ratio.min() < 3.0:
                out.append(f"{name!r}: {int(np.sum(ratio < 3.0))} arrows barely contrast with their cells "
                           f"(WCAG ratio down to {ratio.min():.2f}, below 3)")
    return out


def _palette_problems(fig) -> list[str]:
    from corrpriors import _methods

    by_label = {}
    for model, entry in _methods.MODELS.items():
        by_label.setdefault(entry.label, (entry.colour, None, model))
    for model in _methods.MODELS:
        for variant in _methods.VARIANTS:
            if variant:
                m = _methods.method(f"{model}_{variant}")
                by_label[m.label] = (m.colour, m.linestyle, m.name)
    out = []
    artists = [line for ax in fig.axes for line in ax.get_lines()]
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    pairs = [(str(a.get_label()), a) for a in artists]
    pairs += [(t.get_text(), h) for leg in legends for h, t in zip(leg.legend_handles, leg.get_texts())]
    models = sorted({entry.label for entry in _methods.MODELS.values()}, key=len, reverse=True)
    for text, artist in pairs:
        text = " ".join(text.split())                     # a wrapped legend entry reads as one line
        if text not in by_label:                          # a label a setting qualified: its model's colour
            model = next((m for m in models if text.startswith(m + " +") or text.startswith(m + " (")), None)
            if model is None:
                continue
            text = model
        if not hasattr(artist, "get_color"):
            continue
        colour, style, name = by_label[text]
        try:
            got = to_rgba(artist.get_color())
        except (TypeError, ValueError):
            continue
        if np.linalg.norm(np.subtract(got[:3], to_rgba(colour)[:3])) > 1e-3:
            out.append(f"{text!r} is drawn in {got[:3]}, not the colour of {name} ({colour})")
        drawn = artist.get_linestyle() if hasattr(artist, "get_linestyle") else None
        if style is not None and isinstance(drawn, str) and drawn not in ("None", "none", ""):
            want = {"-": "-", "--": "--", "-.": "-.", ":": ":"}[style]
            if artist.get_linestyle() != want:
                out.append(f"{text!r} has line style {artist.get_linestyle()!r}, not that of {name} ({want!r})")
    return out


def figure_problems(fig, environment: str | None = None, min_color_distance: float = 0.15) -> list[str]:
    """Every defect of ``fig`` found by the checks in the module docstring (empty: none)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    problems = []
    data_axes = [ax for ax in fig.axes if ax.get_visible() and not _is_colorbar(ax)]
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        name = ax.get_title() or "untitled axes"
        if _is_colorbar(ax):
            if not (ax.get_ylabel().strip() or ax.get_xlabel().strip()):
                problems.append("colour bar without a label")
            continue
        if not ax.get_xlabel().strip():
            problems.append(f"{name!r}: no x label")
        if not ax.get_ylabel().strip():
            problems.append(f"{name!r}: no y label")
        problems += _axis_problems(ax, name, renderer)
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    for legend in legends:
        bbox = legend.get_window_extent(renderer)
        for ax in data_axes:
            if _shrink(bbox).overlaps(ax.get_window_extent(renderer)):
                problems.append(f"a legend overlaps the data area of {ax.get_title() or 'an axes'!r}")
        backgrounds = _backgrounds(fig, legend, bbox)
        for handle, text in zip(legend.legend_handles, legend.get_texts()):
            for color in _handle_colors(handle):
                for bg in backgrounds:
                    if np.linalg.norm(color - bg) < min_color_distance:
                        problems.append(f"legend entry {text.get_text()!r}: "
                                        f"colour {[round(float(c), 2) for c in color]} "
                                        f"is invisible on the patch behind it {[round(float(c), 2) for c in bg]}")
    texts = []
    if fig._suptitle is not None and fig._suptitle.get_text():
        texts.append(("suptitle", fig._suptitle.get_window_extent(renderer)))
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        for kind, artist in (("title", ax.title), ("x label", ax.xaxis.label), ("y label", ax.yaxis.label)):
            if artist.get_text():
                texts.append((f"axes {i} {kind} {artist.get_text()[:30]!r}", artist.get_window_extent(renderer)))
    texts += [(f"legend {i}", leg.get_window_extent(renderer)) for i, leg in enumerate(legends)]
    for (a, ba), (b, bb) in itertools.combinations(texts, 2):
        if _shrink(ba).overlaps(_shrink(bb)):
            problems.append(f"{a} overlaps {b}")
    problems += _text_problems(fig, renderer)
    problems += _palette_problems(fig)
    problems += _saved_text_problems(fig)
    if environment is not None:
        words = " ".join([fig._suptitle.get_text() if fig._suptitle is not None else ""]
                         + [ax.get_title() for ax in fig.axes])
        if environment not in words:
            problems.append(f"no title names the environment {environment!r}")
        if "seed" not in words:
            problems.append("no title states the seed count")
    return problems


def check_experiment_figures(module, report) -> list[str]:
    """Redraw ``module``'s figures from the seeds ``report`` saved and check each; return the names."""
    import json

    from corrpriors.runner import _io

    config_json = json.loads((report.out_dir / "config.json").read_text())["config"]
    results = {s: _io.load_seed(report.out_dir / "seeds", s, experiment=module.NAME, config_json=config_json).result
               for s in report.summary["seeds"]}
    config = module.Config(**{k: tuple(v) if isinstance(v, list) else v for k, v in config_json.items()})
    specs = module.figures(config, results, report.summary)
    names = []
    for spec in specs:
        problems = figure_problems(spec.figure, environment=getattr(module, "ENVIRONMENT", None))
        assert not problems, f"{spec.name}: " + "; ".join(problems)
        assert spec.name.startswith(module.NAME + "-") and spec.caption
        names.append(spec.name)
    assert sorted(names) == sorted(p.stem for p in report.figures if p.suffix == ".png")
    return names


def keep_drawn_figures(monkeypatch) -> list:
    """Make the runner keep every figure it saves; return the list it appends them to."""
    from corrpriors.runner import _run

    drawn: list = []
    save = _run._figure_files

    def keep(specs, run_dir):
        drawn.extend(spec.figure for spec in specs)
        return save(specs, run_dir)

    monkeypatch.setattr(_run, "_figure_files", keep)
    return drawn
