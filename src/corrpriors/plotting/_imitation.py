"""Figures of the imitation (paper Fig. 1) and subgoal (paper Fig. 2) experiments.

Both work on saved per-seed arrays (the ``extra__*`` keys written by
:mod:`corrpriors.experiments.imitation` / :mod:`corrpriors.experiments.subgoal`) and the
``metrics.json`` summary; nothing is recomputed except the (seed-independent) grid geometry.
"""

from __future__ import annotations

import pathlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from ._common import save_figure
from ._policy import plot_policy

LABELS = {
    "pg": "PG",
    "dirichlet": "Dirichlet",
    "pg_subgoal": "PG subgoal",
    "pg_imitation": "PG imitation",
    "dirichlet_subgoal": "Dirichlet subgoal",
}
COLORS = {"pg": "C0", "dirichlet": "C1", "pg_subgoal": "C0", "pg_imitation": "C2",
          "dirichlet_subgoal": "C1"}


def _figure(size):
    from matplotlib.figure import Figure

    return Figure(figsize=size, layout="constrained")


def plot_normalized_metrics(summary: Mapping, methods, x_index: int = 0, ax: Any = None,
                            reference: str | None = None):
    """Bar chart of every metric at one x value, normalised by a reference method.

    Parameters
    ----------
    summary : mapping
        A ``metrics.json`` record.
    methods : sequence of str
        Bars per metric, in this order.
    x_index : int
        Which x value.
    ax : matplotlib.axes.Axes, optional
    reference : str, optional
        Divide each metric by this method's mean (default: the largest mean among ``methods``,
        so the worst method is at 1).

    Returns
    -------
    (fig, ax)
    """
    if ax is None:
        fig = _figure((4.2, 3.2))
        ax = fig.add_subplot()
    fig = ax.figure
    metrics = list(summary["metrics"])
    n_seeds = max(len(summary.get("seeds", [])), 1)
    width = 0.8 / len(methods)
    for j, metric in enumerate(metrics):
        block = summary["metrics"][metric]["methods"]
        means = np.array([block[m]["mean"][x_index] for m in methods], dtype=float)
        stds = np.array([block[m]["std"][x_index] for m in methods], dtype=float)
        norm = block[reference]["mean"][x_index] if reference else np.nanmax(means)
        norm = norm if norm and np.isfinite(norm) else 1.0
        for i, m in enumerate(methods):
            ax.bar(j + (i - (len(methods) - 1) / 2) * width, means[i] / norm, width,
                   yerr=stds[i] / norm / np.sqrt(n_seeds), capsize=3, color=COLORS.get(m),
                   label=LABELS.get(m, m) if j == 0 else None)
    ax.set_xticks(range(len(metrics)))
    ax.set_xticklabels([m.replace("_", " ") for m in metrics])
    ax.set_ylabel("normalised metric (± s.e.)")
    ax.legend(frameon=False, fontsize=8)
    return fig, ax


def _imitation_world(config):
    """The grid geometry of the imitation world (the reward cells come from the seed files)."""
    from ..envs import goal_gridworld

    return goal_gridworld(shape=tuple(config.shape), n_rewards=0, motion=config.motion,
                          discount=config.discount, rng=0)


def plot_imitation_figures(config, seed_results: Mapping[int, Mapping[str, np.ndarray]],
                           summary: Mapping, out_dir: pathlib.Path) -> list[pathlib.Path]:
    """Fig. 1 (expert, Dirichlet and PG arrow maps at the figure's D, normalised metrics) and
    the metric curves over D.

    Parameters
    ----------
    config : corrpriors.experiments.imitation.Config
    seed_results : mapping of int to mapping of str to ndarray
    summary : mapping
        The ``metrics.json`` record.
    out_dir : pathlib.Path

    Returns
    -------
    list of pathlib.Path
        The written ``.png`` and ``.pdf`` files.
    """
    from ._curves import plot_metric_curves

    out_dir = pathlib.Path(out_dir)
    paths: list[pathlib.Path] = []
    seed = min(seed_results)
    res = seed_results[seed]
    mdp = _imitation_world(config)
    rewards = np.asarray(res["extra__rewards"]) > 0
    xs = [float(x) for x in summary["x"]["values"]]
    if "extra__figure__pg" in res:
        d_fig = float(config.figure_demonstrations)
        k = xs.index(d_fig)
        fig = _figure((13.0, 3.3))
        axes = fig.subplots(1, 4, gridspec_kw={"width_ratios": [1, 1, 1, 1.25]})
        expert = np.asarray(res["extra__expert"])
        data = np.asarray(res["extra__figure_counts"]).sum(axis=1)
        plot_policy(mdp, expert, axes[0], reward_states=rewards, title="(a) expert policy")
        for ax, meth, tag in ((axes[1], "dirichlet", "(b) Dirichlet"), (axes[2], "pg", "(c) PG")):
            est = np.asarray(res[f"extra__figure__{meth}"])
            h = float(np.mean(np.sqrt(0.5 * ((np.sqrt(expert) - np.sqrt(est)) ** 2).sum(1))))
            plot_policy(mdp, est, ax, data_states=data, reward_states=np.zeros(mdp.n_states, bool),
                        title=f"{tag} estimate (H = {h:.3f})")
        plot_normalized_metrics(summary, ["dirichlet", "pg"], x_index=k, ax=axes[3])
        axes[3].set_title(f"(d) normalised metrics, D = {d_fig:g}\n"
                          f"({len(summary['seeds'])} seeds; arrow maps: seed {seed})", fontsize=9)
        paths += save_figure(fig, out_dir / "imitation-fig1")
    fig = _figure((9.0, 3.4))
    axes = fig.subplots(1, 2)
    for ax, metric in zip(axes, summary["metrics"]):
        plot_metric_curves(summary, metric, ax=ax, logx=True, labels=LABELS, band="sem")
        ax.set_xlabel("demonstrations D")
        ax.set_ylabel(metric.replace("_", " "))
    paths += save_figure(fig, out_dir / "imitation-curves")
    return paths


def plot_subgoal_figures(config, seed_results: Mapping[int, Mapping[str, np.ndarray]],
                         summary: Mapping, out_dir: pathlib.Path) -> list[pathlib.Path]:
    """Fig. 2 (expert, data, the three estimates coloured by Hellinger distance) for the first
    seed, and the normalised metrics over all seeds.

    Parameters
    ----------
    config : corrpriors.experiments.subgoal.Config
    seed_results : mapping of int to mapping of str to ndarray
    summary : mapping
    out_dir : pathlib.Path

    Returns
    -------
    list of pathlib.Path
    """
    from ..envs import wall_world

    out_dir = pathlib.Path(out_dir)
    paths: list[pathlib.Path] = []
    seed = min(seed_results)
    res = seed_results[seed]
    mdp = wall_world()
    expert = np.asarray(res["extra__expert"])
    counts = np.asarray(res["extra__counts"], dtype=float)
    methods = ["pg_subgoal", "pg_imitation", "dirichlet_subgoal"]
    top = max(float(np.max(res[f"extra__cell_hellinger__{m}"])) for m in methods)
    fig = _figure((16.0, 3.6))
    axes = fig.subplots(1, 5)
    plot_policy(mdp, expert, axes[0], title="(a) expert policy")
    # data panel: at each visited state the empirical action distribution
    seen = counts.sum(axis=1)
    emp = np.where(seen[:, None] > 0, counts / np.maximum(seen[:, None], 1), 1.0 / counts.shape[1])
    plot_policy(mdp, emp, axes[1], data_states=seen,
                title=f"(b) data set ({int(counts.sum())} pairs)")
    for ax, m, tag in zip(axes[2:], methods, "cde"):
        err = np.asarray(res[f"extra__cell_hellinger__{m}"])
        plot_policy(mdp, np.asarray(res[f"extra__policy__{m}"]), ax, errors=err, error_max=top,
                    reward_states=np.zeros(mdp.n_states, bool), colorbar=(m == methods[-1]),
                    title=f"({tag}) {LABELS[m]} (H = {err.mean():.3f})")
    paths += save_figure(fig, out_dir / "subgoal-fig2")
    fig = _figure((4.4, 3.3))
    ax = fig.add_subplot()
    plot_normalized_metrics(summary, methods, x_index=0, ax=ax)
    ax.set_title(f"{len(summary['seeds'])} seeds, normalised by the worst method", fontsize=9)
    paths += save_figure(fig, out_dir / "subgoal-metrics")
    return paths


__all__ = ["plot_imitation_figures", "plot_normalized_metrics", "plot_subgoal_figures"]
