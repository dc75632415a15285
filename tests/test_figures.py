"""The figure checks themselves (each must catch the defect it is for) and the default figure.

Every experiment's figures are checked in its end-to-end test (``check_experiment_figures``).
"""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.figure import Figure

from corrpriors._methods import label
from corrpriors.plotting._curves import curves_figure, legend_outside
from figure_checks import figure_problems


def summary(n_seeds=2):
    return {
        "experiment": "t", "x": {"name": "x", "values": [0.0, 1.0, 2.0]}, "seeds": list(range(n_seeds)),
        "metrics": {"m": {"better": "lower", "methods": {
            "a": {"mean": [1.0, 0.5, 0.25], "std": [0.1, 0.2, 0.0]},
            "b": {"mean": [2.0, 1.0, 0.5], "std": [0.0, 0.1, 0.1]}}}},
    }


def test_the_old_subgoal_bar_legend_is_caught():
    """Frameless legend on the bars, orange swatch on an orange bar (the defect of the issue)."""
    fig = Figure(figsize=(4, 3))
    ax = fig.add_subplot()
    ax.bar([0, 1, 2], [1.0, 1.0, 1.0], color=["C0", "C2", "C1"], label=None, width=1.0)
    ax.bar([5], [0.0], color="C1", label="Dirichlet subgoal")
    ax.set_xlim(-0.5, 2.5)
    ax.set_xlabel("metric")
    ax.set_ylabel("normalised")
    ax.legend(frameon=False, loc="center right")
    problems = figure_problems(fig)
    assert any("overlaps the data area" in p for p in problems)
    assert any("'Dirichlet subgoal'" in p and "invisible" in p for p in problems)


def test_missing_labels_and_overlapping_text_are_caught():
    fig = Figure(figsize=(3, 2))
    ax = fig.add_subplot()
    im = ax.imshow(np.eye(3))
    fig.colorbar(im, ax=ax)
    ax.set_title("a title")
    problems = figure_problems(fig, environment="Tunnel world")
    assert "'a title': no x label" in problems and "'a title': no y label" in problems
    assert "colour bar without a label" in problems
    assert any("environment" in p for p in problems) and any("seed count" in p for p in problems)
    fig = Figure(figsize=(4, 2.2), layout="constrained")
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1])
    ax.set_xlabel("x")
    ax.set_ylabel("a y label that is far too long for this small axes and runs into the title")
    ax.set_title("a title long enough to span the whole width of the axes")
    assert any("overlaps" in p for p in figure_problems(fig))


def test_a_legend_outside_passes():
    fig = Figure(figsize=(5, 3), layout="constrained")
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1], color="C0", label="line")
    ax.bar([0.5], [0.5], color="C1", label="bar")
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    legend_outside(ax)
    assert figure_problems(fig) == []


@pytest.mark.parametrize("log_panel", [False, True])
def test_default_curve_figure_passes(log_panel):
    fig = curves_figure(summary(), "m", x_label="steps taken", y_label="error (units)",
                        environment="Toy world", log_panel=log_panel, reference=0.3, reference_label="optimum")
    assert figure_problems(fig, environment="Toy world") == []
    assert "2 seeds" in fig._suptitle.get_text()


def test_episode_axis_has_integer_ticks():
    """psrl-queueing's x axis counts episodes: no ticks at 2.5, 7.5."""
    from corrpriors.plotting._psrl import psrl_curves_figure

    s = {"experiment": "q", "x": {"name": "episodes", "values": [0.0, 1.0, 2.0, 3.0, 4.0]}, "seeds": [0, 1],
         "metrics": {"r": {"better": "higher", "methods": {
             f"{m}_{v}": {"mean": [0.0, 1.0, 2.0, 3.0, 4.0], "std": [0.0] * 5}
             for m in ("pg", "dirichlet_sparse") for v in ("sampling", "mean")}}}}
    fig = psrl_curves_figure(s, "r", environment="Queue", x_label="episodes", y_label="return", reference=5.0,
                             integer_x=True)
    assert figure_problems(fig, environment="Queue") == []
    for ax in fig.axes:
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks)
    # the legend lists each belief once and the optimal line, outside both panels
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == [label("pg"), label("dirichlet_sparse"), "optimal policy"]
