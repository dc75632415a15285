"""Checks every figure of the package must pass (used by the figure and experiment tests).

- every axes has an x and a y label, every colour bar a label;
- every legend lies outside every data area (so it hides no curve, bar or reference line) and
  each entry's colour differs from the patch behind it (the legend's opaque frame, or whatever
  is under a transparent legend);
- titles, axis labels and legends do not overlap each other;
- the figure's text names the environment and the seed count (when given).
"""

from __future__ import annotations

import itertools

import numpy as np
from matplotlib.colors import to_rgba


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
