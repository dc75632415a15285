"""The transfer experiment's second figure: pg_transfer's similarities and PSRL over a task sequence."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .._methods import alpha_text
from .._methods import label as method_label
from .._methods import style as method_style
from ._common import new_figure
from ._curves import legend_outside

#: The similarity panel shows pg_transfer's similarity: drawn in pg_transfer's colour.
SIMILARITY_COLOUR = method_style("pg_transfer")["color"]

#: How the similarity panel's title names each ``similarity_criterion``.
CRITERION_NAMES = {"loo": "leave-one-out", "cv": "two-fold cross-validated",
                   "evidence": "by the collapsed bound"}


def transfer_figure(x: Sequence[float], similarity: Mapping[str, Any], psrl: Mapping[str, Any] | None, *,
                    labels: Mapping[str, str], x_label: str, environment: str,
                    criterion: str = "loo", fixed_similarity: float | None = None,
                    average: bool = False) -> Any:
    r"""Similarity against the target's data (left) and PSRL returns per task of a sequence (right).

    Parameters
    ----------
    x : sequence of float
        The target budgets.
    similarity : mapping
        ``{"median", "min", "max"}``: lists of ``pg_transfer``'s similarity at every budget
        (learned, fixed or the mean of its mixture's weights, as ``fixed_similarity`` and
        ``average`` say).
    psrl : mapping or None
        The ``psrl_sequence`` block of the summary (``eval_after_transitions``, ``variant``,
        ``policy`` and ``replan_every``, named in the panel's title, and ``methods``: per method
        ``return_after_eval_mean`` / ``_std`` over the tasks); ``None``: one panel.
    labels : mapping of str to str
        Legend label per method.
    x_label : str
        Label of the budgets' axis.
    environment : str
        Named in the title.
    criterion : {"loo", "cv", "evidence"}, default "loo"
        How the similarity was chosen (the experiment's ``similarity_criterion``), named in the
        left panel's title.
    fixed_similarity : float, optional
        The similarity the run kept instead of learning it (the experiment's ``similarity``):
        the left panel says so and names no criterion.
    average : bool, default False
        The run mixed over the similarities (``similarity_rule="average"``): the left panel
        shows the mean :math:`\rho` of the mixture's weights.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig = new_figure((12.0, 3.8) if psrl else (7.0, 3.8))   # 1 inch for the similarity panel's legend
    axes = fig.subplots(1, 2) if psrl else [fig.add_subplot()]
    ax = axes[0]
    xs = np.asarray(x, dtype=float)
    if similarity:
        med = np.asarray(similarity["median"], dtype=float)
        ax.plot(xs, med, marker="o", markersize=3, color=SIMILARITY_COLOUR, label="median over seeds")
        ax.fill_between(xs, np.asarray(similarity["min"], float), np.asarray(similarity["max"], float),
                        facecolor=SIMILARITY_COLOUR, alpha=0.2, edgecolor=SIMILARITY_COLOUR, linewidth=0.6,
                        label="range over seeds")
    ax.set_xscale("log")
    ax.minorticks_off()
    ax.set_xticks(xs, [f"{v:g}" for v in xs])
    if xs.size > 1:                 # the axis ends at the data
        ax.set_xlim(float(xs.min()), float(xs.max()))
    who = labels.get("pg_transfer") or method_label("pg_transfer")   # as the legends name it
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel(x_label)
    if criterion not in CRITERION_NAMES:
        raise ValueError(f"criterion: expected one of {tuple(CRITERION_NAMES)}, got {criterion!r}")
    if fixed_similarity is not None:
        ax.set_ylabel(f"similarity ρ of {who}")
        ax.set_title(f"task similarity fixed at ρ = {alpha_text(fixed_similarity)} (not learned)",
                     fontsize="medium")
    elif average:
        ax.set_ylabel(f"mean ρ of the mixture of {who}")
        ax.set_title(f"mixture over task similarities, weights learned\nfrom the data "
                     f"({CRITERION_NAMES[criterion]})", fontsize="medium")
    else:
        ax.set_ylabel(f"learned similarity ρ of {who}")
        ax.set_title(f"task similarity learned from the data ({CRITERION_NAMES[criterion]})",
                     fontsize="medium")
    ax.grid(True, alpha=0.3)
    legend_outside(ax)              # beside the panel: a similarity near 0 or 1 is not hidden
    if psrl:
        ax = axes[1]
        for i, (method, block) in enumerate(psrl["methods"].items()):
            mean = np.asarray(block["return_after_eval_mean"], dtype=float)
            std = np.asarray(block["return_after_eval_std"], dtype=float)
            tasks = np.arange(1, mean.size + 1)
            style = {"marker": "o", **method_style(method)}
            ax.errorbar(tasks + 0.06 * (i - 1.5), mean, yerr=std, markersize=4, capsize=3,
                        label=labels.get(method, method), **style)
        ax.set_xlabel("task in the sequence")
        ax.set_xticks(np.arange(1, mean.size + 1))
        ax.set_ylabel(f"return after {psrl['eval_after_transitions']} transitions\n"
                      "(fraction of the optimal return)")
        title = "PSRL over a sequence of tasks (mean ± std over seeds)"
        if psrl.get("policy"):   # the variant the curves are (a record before it was written: none); the
            title += (f"\nvariant {psrl.get('variant', '')}: {psrl['policy']}"     # layout wraps it to the panel
                      + (f", replanned every {psrl['replan_every']} transitions" if psrl.get("replan_every") else ""))
        ax.set_title(title, fontsize="medium")
        ax.grid(True, alpha=0.3)
        handles, names = ax.get_legend_handles_labels()
        legend_outside(fig, handles, names, reserve=1.6)
    fig.suptitle(environment, fontsize="medium")
    return fig


__all__ = ["transfer_figure"]
