"""Figures of the PSRL experiments (paper Figs. 3b and 4): learning curves per PSRL variant."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping

from .._methods import VARIANTS, record_labels, split
from ._common import new_figure, seeds_text
from ._curves import legend_outside, plot_metric_curves, stagger_coinciding


def variant_title(variant: str) -> str:
    """Panel title of a PSRL variant: its name (as the terminal and ``metrics.json`` call it) and what it does."""
    return "\n".join(textwrap.wrap(f"{variant}: {VARIANTS[variant].description}", 48, break_on_hyphens=False))


def psrl_curves_figure(summary: Mapping, metric: str, *, environment: str, x_label: str, y_label: str,
                       reference: float | None = None, reference_label: str = "optimal policy",
                       band: str = "std", integer_x: bool = False):
    """Mean learning curves with spread bands, one panel per PSRL variant, one shared legend.

    Parameters
    ----------
    summary : mapping
        A ``metrics.json`` record whose methods are named ``<model>_<variant>``.
    metric : str
        The metric to draw.
    environment : str
        Named in the title.
    x_label, y_label : str
        Axis labels in words, with units.
    reference : float, optional
        Level of the optimal policy (dashed line). No policy does better, so the spread bands
        are cut at it.
    reference_label : str
        Legend label of the reference line.
    band : {"std", "sem", "none"}
        Band half-width (see :func:`corrpriors.plotting._curves.plot_metric_curves`).
    integer_x : bool
        Integer x ticks (episodes).

    Returns
    -------
    matplotlib.figure.Figure
    """
    methods = list(summary["metrics"][metric]["methods"])
    variants = [v for v in ("sampling", "mean") if any(m.endswith("_" + v) for m in methods)]
    n = max(len(variants), 1)
    fig = new_figure((4.6 * n + 2.2, 4.0))
    axes = fig.subplots(1, n, squeeze=False)[0]
    for ax, variant in zip(axes, variants):
        chosen = [m for m in methods if m.endswith("_" + variant)]
        models = record_labels(summary, {split(m)[0] for m in chosen})  # the panel names the variant
        labels = {m: models[split(m)[0]] for m in chosen}
        plot_metric_curves(summary, metric, ax=ax, methods=chosen, labels=labels, band=band,
                           reference=reference, reference_label=reference_label, x_label=x_label,
                           y_label=y_label, title=variant_title(variant), legend=False, integer_x=integer_x,
                           reference_bounds=True)
    low = min(ax.get_ylim()[0] for ax in axes)
    high = max(ax.get_ylim()[1] for ax in axes)
    for ax in axes:  # the same y range in every panel (each keeps its own tick labels)
        ax.set_ylim(low, high)
        stagger_coinciding(ax)
    handles, names = axes[0].get_legend_handles_labels()
    legend_outside(fig, handles, names, reserve=2.2)
    n_seeds = max(len(summary.get("seeds", [])), 1)
    spread = {"std": " ± std over seeds", "sem": " ± standard error"}.get(band, "")
    fig.suptitle(f"{environment}: {seeds_text(n_seeds)}, mean{spread}", fontsize="medium")
    return fig


__all__ = ["psrl_curves_figure", "variant_title"]
