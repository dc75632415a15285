"""Metric-against-x curves with spread bands, drawn from a ``metrics.json`` record (data only)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .._methods import record_labels
from .._methods import style as method_style
from ._common import balanced_wrap, log_ticks, new_figure, seeds_text

#: A log-x panel is drawn only when the positive x values are at least this many ...
LOG_PANEL_POINTS = 4
#: ... and span at least this ratio (one decade); otherwise it repeats the linear panel.
LOG_PANEL_RATIO = 10.0

_BANDS = {"std": "± std over seeds", "sem": "± standard error over seeds", "none": ""}


def _as_float(values: Sequence) -> np.ndarray:
    return np.array([np.nan if v is None else float(v) for v in values], dtype=float)


#: Legend entries longer than this many characters are wrapped onto more lines (at spaces).
LEGEND_WRAP = 40


def legend_outside(owner: Any, handles: list | None = None, labels: list | None = None, *,
                   reserve: float | None = None, **kwargs: Any) -> Any:
    """Draw a framed legend outside the data: right of an axes, or at the right of a figure.

    A legend placed this way never covers a curve, a bar or a reference line. An entry longer
    than :data:`LEGEND_WRAP` characters is wrapped onto more lines (:func:`balanced_wrap`). ``reserve`` (inches; a
    figure's legend only): the width the figure was sized to leave for its legend; a wider
    legend (longer method labels, e.g. ``PG + per-pair layer, sampling``) widens the figure by
    the difference instead of narrowing the panels.
    """
    from matplotlib.figure import Figure

    opts = {"fontsize": "small", "frameon": True, "framealpha": 1.0}
    opts.update(kwargs)
    if handles is None and not isinstance(owner, Figure):
        handles, labels = owner.get_legend_handles_labels()
    args = [] if handles is None else [handles, ["\n".join(balanced_wrap(str(text), LEGEND_WRAP))
                                                 for text in (labels or [])]]
    if not isinstance(owner, Figure):
        return owner.legend(*args, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, **opts)
    legend = owner.legend(*args, loc="outside right center", **opts)
    if reserve is not None:
        excess = legend.get_window_extent().width / owner.dpi + 0.1 - float(reserve)
        if excess > 0:
            width, height = owner.get_size_inches()
            owner.set_size_inches(width + excess, height)
    return legend


def plot_metric_curves(
    summary: Mapping,
    metric: str,
    ax: Any = None,
    logx: bool = False,
    methods: Sequence[str] | None = None,
    labels: Mapping[str, str] | None = None,
    reference: float | None = None,
    band: str = "std",
    *,
    reference_label: str = "reference",
    colors: Mapping[str, Any] | None = None,
    x_label: str | None = None,
    y_label: str | None = None,
    title: str | None = None,
    legend: bool = True,
    integer_x: bool = False,
    limits: tuple[float, float] | None = None,
    reference_bounds: bool = False,
):
    """Plot the mean curve of every method with a spread band (the paper's Fig. 3 style).

    Parameters
    ----------
    summary : mapping
        A ``metrics.json`` record (``x``, ``seeds``, ``metrics`` blocks).
    metric : str
        Which metric to draw (a key of ``summary["metrics"]``).
    ax : matplotlib.axes.Axes, optional
        Draw into this axes; a new figure is made when omitted.
    logx : bool, default False
        Logarithmic x axis (non-positive x values are left out).
    methods : sequence of str, optional
        The methods to draw, in this order (default: all, in the summary's order).
    labels : mapping of str to str, optional
        Legend labels per method (default: the method vocabulary, :mod:`corrpriors._methods`,
        under the record's ``config``, so a ``dirichlet_sparse`` run with ``alpha_sparse=1`` is
        "Dirichlet α=1"; a name outside it is shown as it is).
    reference : float, optional
        Draw a dashed horizontal reference line (e.g. the optimal value).
    band : {"std", "sem", "none"}, default "std"
        Band half-width: the standard deviation over seeds, the standard error of the
        mean (std / sqrt(number of seeds)), or no band.
    reference_label : str
        Legend label of the reference line.
    colors : mapping of str to colour, optional
        Line colour per method (default: the method vocabulary's, so a model has one colour in
        every figure; its variant gives the line style).
    x_label, y_label : str, optional
        Axis labels in words (default: the x name and the metric name of the record).
    title : str, optional
        Axes title (default: the experiment, the seed count and the band).
    legend : bool, default True
        Draw a framed legend outside the axes (on the right).
    integer_x : bool, default False
        Integer ticks only on the x axis (e.g. episodes).
    limits : (float, float), optional
        The range the metric can take (e.g. (0, 1) for a probability); the bands are cut to it.
    reference_bounds : bool, default False
        The reference is a bound no method can pass (the optimal policy's return): the bands
        are cut at it (above it when higher is better, else below), and the line is marked
        (``gid="bound"``) for the figure checks.

    Notes
    -----
    Methods whose mean curves coincide (e.g. several baselines flat at 0) would hide each
    other; each of them shows its marker at every k-th point, staggered (k = the number of
    coinciding curves), so every one stays visible. Every band is outlined in its line's
    colour, so overlapping bands stay apart. The x axis ends at the data.

    Returns
    -------
    (fig, ax) : matplotlib Figure and Axes
    """
    if metric not in summary["metrics"]:
        raise ValueError(f"metric: {metric!r} not in the summary (have {', '.join(summary['metrics'])})")
    if band not in _BANDS:
        raise ValueError(f"band: expected 'std', 'sem' or 'none', got {band!r}")
    block = summary["metrics"][metric]
    all_methods = list(block["methods"])
    methods = all_methods if methods is None else list(methods)
    unknown = [m for m in methods if m not in block["methods"]]
    if unknown:
        raise ValueError(f"methods: {unknown} not in the summary (have {all_methods})")
    names = record_labels(summary, methods)
    names.update(labels or {})

    if ax is None:
        fig = new_figure((6.4, 3.6))
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    x = _as_float(summary["x"]["values"])
    keep = x > 0 if logx else np.ones_like(x, dtype=bool)
    n_seeds = max(len(summary.get("seeds", [])), 1)
    means = {m: _as_float(block["methods"][m]["mean"]) for m in methods}
    if reference_bounds and reference is not None:
        bound = (-np.inf, float(reference)) if block.get("better") != "lower" else (float(reference), np.inf)
        limits = bound if limits is None else (max(limits[0], bound[0]), min(limits[1], bound[1]))
    for method in methods:
        mean = means[method]
        std = _as_float(block["methods"][method]["std"])
        kw: dict[str, Any] = {"marker": "o", **method_style(method)}
        if (colors or {}).get(method) is not None:
            kw["color"] = colors[method]  # type: ignore[index]
        (line,) = ax.plot(x[keep], mean[keep], markersize=4, label=names.get(method, method), **kw)
        if band != "none":
            half = std if band == "std" else std / np.sqrt(n_seeds)
            low, high = mean - half, mean + half
            if limits is not None:
                low, high = np.clip(low, *limits), np.clip(high, *limits)
            ax.fill_between(x[keep], low[keep], high[keep], facecolor=line.get_color(), alpha=0.12,
                            edgecolor=line.get_color(), linewidth=0.6, linestyle=line.get_linestyle())
    if reference is not None:
        ref = ax.axhline(reference, color="k", linestyle="--", linewidth=1, label=reference_label)
        if reference_bounds:
            ref.set_gid("bound")
    if keep.sum() > 1:
        ax.set_xlim(float(np.min(x[keep])), float(np.max(x[keep])))
    if logx:
        ax.set_xscale("log")
        log_ticks(ax, x[keep])
    if integer_x:
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(x_label or summary["x"]["name"])
    better = block.get("better")
    default_y = metric.replace("_", " ")
    ax.set_ylabel(y_label or (f"{default_y} ({better} is better)" if better else default_y))
    if title is None:
        extra = _BANDS[band]
        title = f"{summary.get('experiment', '')} ({seeds_text(n_seeds)}{', mean ' + extra if extra else ''})"
    ax.set_title(title, fontsize="medium")
    ax.grid(True, alpha=0.3)
    if legend:
        legend_outside(ax)
    stagger_coinciding(ax)
    return fig, ax


#: Curves closer than this fraction of the y axis at every x are drawn on top of each other.
COINCIDE = 0.015


def stagger_coinciding(ax: Any) -> None:
    """Stagger the markers of curves that coincide on the page, so that none hides another.

    Marked curves (a line with markers, in data coordinates) within :data:`COINCIDE` of the y
    axis's span of each other at every x are grouped (e.g. baselines flat near 0); member j of
    a group of k marks the points j, j + k, j + 2k, ... so the markers of all of them alternate
    along the shared line. Call it again after changing the y limits (shared panels).
    """
    lines = [line for line in ax.get_lines() if line.get_transform() == ax.transData
             and line.get_marker() not in (None, "", "None", " ") and len(line.get_xdata()) >= 2]
    tol = COINCIDE * abs(float(np.subtract(*ax.get_ylim())))
    groups: list[list[Any]] = []
    for line in lines:
        x, y = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
        for group in groups:
            gx, gy = np.asarray(group[0].get_xdata(), float), np.asarray(group[0].get_ydata(), float)
            if gx.shape == x.shape and np.allclose(gx, x) and np.allclose(gy, y, rtol=0.0, atol=tol, equal_nan=True):
                group.append(line)
                break
        else:
            groups.append([line])
    for group in groups:
        for j, line in enumerate(group):
            line.set_markevery((j, len(group)) if len(group) > 1 else None)


def log_panel_useful(x_values: Sequence) -> bool:
    """Whether a log-x panel shows more than the linear one: enough positive x over a decade or more."""
    x = _as_float(x_values)
    pos = np.unique(x[x > 0])
    return pos.size >= LOG_PANEL_POINTS and float(pos[-1] / pos[0]) >= LOG_PANEL_RATIO


def panels_note(x_values: Sequence) -> str:
    """What a :func:`curves_figure` with ``log_panel=True`` draws, for its caption: ``"linear and
    log x"`` when the log panel is drawn (:func:`log_panel_useful`), else ``"linear x"``.
    """
    return "linear and log x" if log_panel_useful(x_values) else "linear x"


def curves_figure(
    summary: Mapping,
    metric: str,
    *,
    x_label: str,
    y_label: str,
    environment: str,
    labels: Mapping[str, str] | None = None,
    log_panel: bool = False,
    band: str = "std",
    reference: float | None = None,
    reference_label: str = "reference",
    integer_x: bool = False,
):
    """Draw :func:`plot_metric_curves` in a figure (plus a log-x panel) with one legend.

    The title names the environment and the seed count; the framed legend sits at the right.

    Parameters
    ----------
    summary : mapping
        A ``metrics.json`` record.
    metric : str
        The metric to draw.
    x_label, y_label : str
        Axis labels in words, with units.
    environment : str
        Named in the title.
    labels : mapping of str to str, optional
        Legend labels per method.
    log_panel : bool, default False
        Add a second panel with a logarithmic x axis, where it shows more than the linear one
        (:func:`log_panel_useful`: at least 4 positive x values over at least a decade).
    band : {"std", "sem", "none"}
        Band half-width.
    reference : float, optional
        A dashed reference level (e.g. the optimal value).
    reference_label : str
        Its legend label.
    integer_x : bool
        Integer x ticks.

    Returns
    -------
    matplotlib.figure.Figure
    """
    n_seeds = max(len(summary.get("seeds", [])), 1)
    log_panel = log_panel and log_panel_useful(summary["x"]["values"])
    fig = new_figure((11.0, 3.8) if log_panel else (7.0, 3.8))
    axes = fig.subplots(1, 2) if log_panel else [fig.add_subplot()]
    kw: dict[str, Any] = dict(labels=labels, band=band, reference=reference, reference_label=reference_label,
              x_label=x_label, y_label=y_label, legend=False, integer_x=integer_x)
    plot_metric_curves(summary, metric, ax=axes[0], title="linear x axis" if log_panel else "", **kw)
    if log_panel:
        plot_metric_curves(summary, metric, ax=axes[1], logx=True, title="logarithmic x axis (x > 0)", **kw)
    handles, names = axes[0].get_legend_handles_labels()
    legend_outside(fig, handles, names, reserve=2.2)
    spread = _BANDS[band]
    fig.suptitle(f"{environment}: {seeds_text(n_seeds)}, mean{' ' + spread if spread else ''}",
                 fontsize="medium")
    return fig


__all__ = ["curves_figure", "legend_outside", "log_panel_useful", "plot_metric_curves", "stagger_coinciding"]
