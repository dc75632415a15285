"""Metric-against-x curves with spread bands, drawn from a ``metrics.json`` summary."""

from __future__ import annotations

import pathlib
from typing import Mapping, Sequence

import numpy as np

#: Default labels for the method names used by the experiments.
DEFAULT_LABELS = {
    "pg": "PG (absolute)",
    "pg_offset": "PG (relative)",
    "pg_absolute": "PG (absolute)",
    "dirichlet_uniform": "Dirichlet α=1",
    "dirichlet_sparse": "Dirichlet α=1e-3",
}


def _as_float(values: Sequence) -> np.ndarray:
    return np.array([np.nan if v is None else float(v) for v in values], dtype=float)


def plot_metric_curves(
    summary: Mapping,
    metric: str,
    ax=None,
    logx: bool = False,
    methods: Sequence[str] | None = None,
    labels: Mapping[str, str] | None = None,
    reference: float | None = None,
    band: str = "std",
):
    """Plot the mean curve of every method with a ±std band (the paper's Fig. 3 style).

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
        Legend labels per method (default: :data:`DEFAULT_LABELS`, else the method name).
    reference : float, optional
        Draw a dashed horizontal reference line (e.g. the optimal value).
    band : {"std", "sem", "none"}, default "std"
        Band half-width: the standard deviation over seeds, the standard error of the
        mean (std / sqrt(number of seeds)), or no band.

    Returns
    -------
    (fig, ax) : matplotlib Figure and Axes
    """
    from matplotlib.figure import Figure

    if metric not in summary["metrics"]:
        raise ValueError(f"metric: {metric!r} not in the summary (have {', '.join(summary['metrics'])})")
    if band not in ("std", "sem", "none"):
        raise ValueError(f"band: expected 'std', 'sem' or 'none', got {band!r}")
    block = summary["metrics"][metric]
    all_methods = list(block["methods"])
    methods = all_methods if methods is None else list(methods)
    unknown = [m for m in methods if m not in block["methods"]]
    if unknown:
        raise ValueError(f"methods: {unknown} not in the summary (have {all_methods})")
    names = dict(DEFAULT_LABELS)
    names.update(labels or {})

    if ax is None:
        fig = Figure(figsize=(5.0, 3.6), layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    x = _as_float(summary["x"]["values"])
    keep = x > 0 if logx else np.ones_like(x, dtype=bool)
    n_seeds = max(len(summary.get("seeds", [])), 1)
    for method in methods:
        mean = _as_float(block["methods"][method]["mean"])
        std = _as_float(block["methods"][method]["std"])
        (line,) = ax.plot(x[keep], mean[keep], marker="o", markersize=3, label=names.get(method, method))
        if band != "none":
            half = std if band == "std" else std / np.sqrt(n_seeds)
            ax.fill_between(
                x[keep], (mean - half)[keep], (mean + half)[keep], color=line.get_color(), alpha=0.2, linewidth=0
            )
    if reference is not None:
        ax.axhline(reference, color="k", linestyle="--", linewidth=1, label="reference")
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(summary["x"]["name"])
    better = block.get("better")
    ax.set_ylabel(f"{metric} ({better} is better)" if better else metric)
    ax.set_title(f"{summary.get('experiment', '')} ({n_seeds} seed{'s' if n_seeds != 1 else ''}, ±{band})"
                 if band != "none" else f"{summary.get('experiment', '')} ({n_seeds} seeds)")
    ax.grid(True, alpha=0.3)
    ax.legend(frameon=False, fontsize="small")
    return fig, ax


def save_png_pdf(fig, path_without_suffix: str | pathlib.Path, dpi: int = 150) -> list[pathlib.Path]:
    """Save ``fig`` as ``<path>.png`` and ``<path>.pdf``; return both paths."""
    from ._common import save_figure

    return save_figure(fig, path_without_suffix, dpi=dpi, formats=("png", "pdf"))


def plot_metric_figure(
    summary: Mapping,
    metric: str,
    path_without_suffix: str | pathlib.Path,
    log_panel: bool = False,
    **kwargs,
) -> list[pathlib.Path]:
    """One figure of :func:`plot_metric_curves` (plus a log-x panel), saved as .png and .pdf.

    Parameters
    ----------
    summary : mapping
        A ``metrics.json`` record.
    metric : str
        The metric to draw.
    path_without_suffix : path
        Output path without suffix.
    log_panel : bool, default False
        Add a second panel with a logarithmic x axis.
    **kwargs
        Passed on to :func:`plot_metric_curves`.

    Returns
    -------
    list of pathlib.Path
        The ``.png`` and ``.pdf`` written.
    """
    from matplotlib.figure import Figure

    if log_panel:
        fig = Figure(figsize=(10.0, 3.8), layout="constrained")
        axes = fig.subplots(1, 2)
        plot_metric_curves(summary, metric, ax=axes[0], **kwargs)
        plot_metric_curves(summary, metric, ax=axes[1], logx=True, **kwargs)
    else:
        fig, _ = plot_metric_curves(summary, metric, **kwargs)
    return save_png_pdf(fig, path_without_suffix)


__all__ = ["DEFAULT_LABELS", "plot_metric_curves", "plot_metric_figure", "save_png_pdf"]
