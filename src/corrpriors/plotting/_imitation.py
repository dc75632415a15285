"""Figures of the imitation (paper Fig. 1) and subgoal (paper Fig. 2) experiments.

Everything is drawn from arrays handed in by the experiment (policies, counts, masks, a
:class:`~corrpriors.plotting.GridLayout`) and from the ``metrics.json`` record; no
environment is built and nothing is recomputed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .._format import num
from .._methods import label as method_label
from .._methods import record_labels
from .._methods import style as method_style
from ._common import GridLayout, new_figure, seeds_text
from ._curves import legend_outside, plot_metric_curves
from ._policy import DATA_GREY, REWARD_GREEN, WALL_BLACK, plot_policy


def plot_metric_points(summary: Mapping, methods: Sequence[str], x_index: int = 0, ax: Any = None,
                       metric_labels: Mapping[str, str] | None = None, legend: bool = True):
    """Every metric of every method at one x value: a point with ± s.e. over seeds, on a zoomed axis.

    Points rather than bars: bars must start at 0, and on a scale from 0 differences of a few
    per cent (0.92 against 1.0) disappear. Each method has its colour and marker of the method
    vocabulary (:mod:`corrpriors._methods`).

    Parameters
    ----------
    summary : mapping
        A ``metrics.json`` record.
    methods : sequence of str
        Methods per metric, in this order (left to right within a metric).
    x_index : int
        Which x value.
    ax : matplotlib.axes.Axes, optional
    metric_labels : mapping of str to str, optional
        Tick label of every metric (default: the name with spaces).
    legend : bool
        A framed legend to the right of the axes.

    Returns
    -------
    (fig, ax)
    """
    if ax is None:
        fig = new_figure((6.0, 4.0))
        ax = fig.add_subplot()
    fig = ax.figure
    metrics = list(summary["metrics"])
    n_seeds = max(len(summary.get("seeds", [])), 1)
    step = 0.7 / max(len(methods), 1)
    labels = record_labels(summary, methods)
    for j, metric in enumerate(metrics):
        block = summary["metrics"][metric]["methods"]
        for i, m in enumerate(methods):
            mean = float(block[m]["mean"][x_index])
            se = float(block[m]["std"][x_index] or 0.0) / np.sqrt(n_seeds)
            st = method_style(m)
            variant = st.get("linestyle", "-") != "-"   # a variant: open marker, its line style on the bar
            bars = ax.errorbar(j + (i - (len(methods) - 1) / 2) * step, mean, yerr=se, fmt=st.get("marker", "o"),
                               color=st.get("color"), markersize=7, capsize=4, linestyle="none",
                               markerfacecolor="white" if variant else st.get("color"),
                               label=labels[m] if j == 0 else None)
            for collection in bars[2]:
                collection.set_linestyle(st.get("linestyle", "-"))
    ax.set_xticks(range(len(metrics)))
    ax.set_xticklabels([(metric_labels or {}).get(m, m.replace("_", " ")) for m in metrics])
    ax.set_xlim(-0.5, len(metrics) - 0.5)
    ax.set_xlabel("metric (lower is better)")
    ax.set_ylabel("error, mean ± s.e. over seeds")
    ax.grid(True, axis="y", alpha=0.3)
    if legend:
        legend_outside(ax)
    return fig, ax


def _shading_legend(fig: Any, entries: Sequence[tuple[Any, str]]) -> None:
    """Draw a legend of the cell colours under the map panels."""
    from matplotlib.patches import Patch

    handles = [Patch(facecolor=color, edgecolor="0.3", label=label) for color, label in entries]
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize="small",
               frameon=True, framealpha=1.0)


def imitation_policies_figure(layout: GridLayout, expert: np.ndarray, estimates: Mapping[str, np.ndarray],
                              errors: Mapping[str, float], *, data_states: np.ndarray,
                              reward_states: np.ndarray, summary: Mapping, x_index: int, seed: int,
                              environment: str, metric_labels: Mapping[str, str] | None = None):
    """Fig. 1: the expert's and the estimated policies of one seed, and the metrics over seeds.

    Parameters
    ----------
    layout : GridLayout
    expert : ndarray of shape (S, A)
    estimates : mapping of str to ndarray of shape (S, A)
        ``{"dirichlet": ..., "pg": ...}`` at the figure's number of demonstrations.
    errors : mapping of str to float
        Mean Hellinger distance of each estimate to the expert (shown in the panel titles).
    data_states : ndarray of shape (S,)
        Demonstrations per state (grey where > 0).
    reward_states : ndarray of shape (S,)
        Reward cells (green in the expert panel).
    summary : mapping
        The ``metrics.json`` record (bars: mean ± s.e. over its seeds).
    x_index : int
        Index of the figure's number of demonstrations in ``summary["x"]``.
    seed : int
        The seed whose policies are drawn.
    environment : str
        Named in the title.
    metric_labels : mapping of str to str, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    d = float(summary["x"]["values"][x_index])
    n_seeds = len(summary["seeds"])
    fig = new_figure((10.0, 9.0))
    axes = fig.subplots(2, 2).ravel()
    no_reward = np.zeros(layout.n_states, bool)
    plot_policy(layout, expert, axes[0], reward_states=reward_states, title="(a) expert policy")
    labels = record_labels(summary, ("dirichlet", "pg"))
    for ax, meth, tag in ((axes[1], "dirichlet", "(b)"), (axes[2], "pg", "(c)")):
        plot_policy(layout, estimates[meth], ax, data_states=data_states, reward_states=no_reward,
                    title=f"{tag} {labels[meth]} estimate (H = {num(errors[meth])})")
    plot_metric_points(summary, ["dirichlet", "pg"], x_index=x_index, ax=axes[3], metric_labels=metric_labels)
    axes[3].set_title(f"(d) errors at D = {d:g}, over {seeds_text(n_seeds)}")
    _shading_legend(fig, [(REWARD_GREEN, "reward cell (panel a)"),
                          (DATA_GREY, f"state with demonstrations (panels b, c; D = {d:g})")])
    fig.suptitle(f"{environment}: policies of seed {seed} at D = {d:g} demonstrations\n"
                 f"(arrow = mean move; H = mean Hellinger distance to the expert)")
    return fig


def imitation_curves_figure(summary: Mapping, *, environment: str, x_label: str,
                            metric_labels: Mapping[str, str]):
    """Every metric against the number of demonstrations, mean ± s.e. over seeds.

    The x axis is logarithmic (labelled at every D) when the positive D span a decade or more.
    """
    metrics = list(summary["metrics"])
    xs = np.asarray([float(x) for x in summary["x"]["values"]])
    pos = xs[xs > 0]
    logx = bool(pos.size >= 2 and pos.max() / pos.min() >= 10)
    fig = new_figure((4.6 * len(metrics) + 2.0, 3.6))
    axes = np.atleast_1d(fig.subplots(1, len(metrics)))
    for ax, metric in zip(axes, metrics):
        plot_metric_curves(summary, metric, ax=ax, logx=logx, band="sem", x_label=x_label,
                           y_label=metric_labels.get(metric, metric), title="", legend=False)
    handles, names = axes[0].get_legend_handles_labels()
    legend_outside(fig, handles, names)
    fig.suptitle(f"{environment}: {seeds_text(len(summary['seeds']))}, mean ± standard error",
                 fontsize="medium")
    return fig


def subgoal_policies_figure(layout: GridLayout, expert: np.ndarray, counts: np.ndarray,
                            estimates: Mapping[str, np.ndarray], errors: Mapping[str, np.ndarray], *,
                            reward_states: np.ndarray, seed: int, environment: str):
    """Fig. 2: expert, data and the estimates of one seed coloured by their per-state error.

    Parameters
    ----------
    layout : GridLayout
    expert : ndarray of shape (S, A)
    counts : ndarray of shape (S, A)
        The demonstrated state-action pairs.
    estimates : mapping of str to ndarray of shape (S, A)
        Policy of every method (names of the method vocabulary, :mod:`corrpriors._methods`).
    errors : mapping of str to ndarray of shape (S,)
        Hellinger distance to the expert in every state, per method.
    reward_states : ndarray of shape (S,)
    seed : int
    environment : str

    Returns
    -------
    matplotlib.figure.Figure
    """
    counts = np.asarray(counts, dtype=float)
    methods = list(estimates)
    top = max(float(np.max(errors[m])) for m in methods)
    n_panels = 2 + len(methods)
    n_cols = 3
    n_rows = -(-n_panels // n_cols)
    fig = new_figure((11.0, 4.1 * n_rows + 0.8))
    grid = fig.subplots(n_rows, n_cols, squeeze=False).ravel()
    for ax in grid[n_panels:]:
        ax.set_visible(False)
    axes = grid[:n_panels]
    plot_policy(layout, expert, axes[0], reward_states=reward_states, title="(a) expert policy")
    seen = counts.sum(axis=1)
    emp = np.where(seen[:, None] > 0, counts / np.maximum(seen[:, None], 1), 1.0 / counts.shape[1])
    no_reward = np.zeros(layout.n_states, bool)
    plot_policy(layout, emp, axes[1], data_states=seen, reward_states=no_reward,
                title=f"(b) data set ({int(counts.sum())} pairs)")
    for ax, m, tag in zip(axes[2:], methods, "cdefgh"):
        err = np.asarray(errors[m], dtype=float)
        plot_policy(layout, estimates[m], ax, errors=err, error_max=top, reward_states=no_reward,
                    colorbar=(m == methods[-1]), error_label="Hellinger distance\nto the expert (per state)",
                    title=f"({tag}) {method_label(m)} (H = {num(err.mean())})")
    _shading_legend(fig, [(REWARD_GREEN, "reward cell (a)"), (DATA_GREY, "demonstrated state (b)"),
                          (WALL_BLACK, "wall")])
    fig.suptitle(f"{environment}: seed {seed}\n(arrow = mean move; colour in c-e = error per state; "
                 "H = its mean)")
    return fig


def subgoal_metrics_figure(summary: Mapping, methods: Sequence[str], *, environment: str,
                           metric_labels: Mapping[str, str] | None = None):
    """Draw both errors of every method, mean ± s.e. over seeds, one panel per metric (own y scale)."""
    metrics = list(summary["metrics"])
    fig = new_figure((3.2 * len(metrics) + 2.6, 4.0))
    axes = np.atleast_1d(fig.subplots(1, len(metrics)))
    for ax, metric in zip(axes, metrics):
        one = {**summary, "metrics": {metric: summary["metrics"][metric]}}
        plot_metric_points(one, methods, x_index=0, ax=ax, metric_labels=metric_labels, legend=False)
        ax.set_xlabel("")
        ax.set_xticks([])
        ax.set_xlabel((metric_labels or {}).get(metric, metric.replace("_", " ")) + " (lower is better)")
    handles, names = axes[0].get_legend_handles_labels()
    legend_outside(fig, handles, names)
    fig.suptitle(f"{environment}: {seeds_text(len(summary['seeds']))}, mean ± standard error")
    return fig


__all__ = [
    "imitation_curves_figure",
    "imitation_policies_figure",
    "plot_metric_points",
    "subgoal_metrics_figure",
    "subgoal_policies_figure",
]
