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


# ----------------------------------------------------------------------------- issue 22: each kind of defect


def _axes(size=(6.0, 4.0)):
    fig = Figure(figsize=size, layout="constrained")
    ax = fig.add_subplot()
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    return fig, ax


def test_decade_only_log_ticks_are_caught_and_log_ticks_label_the_data():
    from corrpriors.plotting._common import log_ticks

    fig, ax = _axes()
    ax.plot([10.0, 50.0, 200.0], [0.4, 0.3, 0.2], marker="o")
    ax.set_xscale("log")
    ax.set_xlim(10, 200)
    assert any("log x axis labels only" in p for p in figure_problems(fig))   # imitation-curves.png
    log_ticks(ax, [10.0, 50.0, 200.0])
    assert not any("log x axis" in p for p in figure_problems(fig))
    assert [t.get_text() for t in ax.get_xticklabels()] == ["10", "50", "200"]


def test_a_formula_typed_as_raw_text_is_caught():
    fig, ax = _axes()
    ax.plot([0, 1], [0, 1])
    ax.set_ylabel("value loss\n(||V_expert - V|| / ||V_expert||)")
    assert any("raw text" in p for p in figure_problems(fig))
    ax.set_ylabel("value loss\n" r"$\|V_{\rm expert} - V\|_2 \,/\, \|V_{\rm expert}\|_2$")
    assert not any("raw text" in p for p in figure_problems(fig))


def test_bars_from_zero_hiding_a_difference_are_caught():
    fig, ax = _axes()
    ax.bar([0, 1, 2], [0.92, 0.96, 1.0])                       # subgoal-metrics.png, absolute errors
    assert any("differences are invisible" in p for p in figure_problems(fig))


def test_bands_above_the_optimum_or_without_outline_are_caught():
    fig, ax = _axes()
    x = np.arange(5.0)
    ax.plot(x, [0.5, 0.9, 0.95, 1.0, 1.0], marker="o")
    ax.fill_between(x, [0.4, 0.8, 0.85, 0.9, 0.9], [0.6, 1.0, 1.05, 1.1, 1.1], alpha=0.2, linewidth=0)
    ax.axhline(1.0, linestyle="--", label="optimal policy", gid="bound")   # the optimum bounds the return
    ax.set_xlim(0, 4)
    problems = figure_problems(fig)
    assert any("above the optimum" in p for p in problems)     # psrl-grid-return.png
    assert any("no outline" in p for p in problems)            # psrl-queueing-return.png


def test_an_x_axis_beyond_the_data_is_caught():
    fig, ax = _axes()
    ax.plot(np.arange(21.0), np.ones(21), marker="o")            # data end at 20, margins reach 21
    assert any("beyond the data" in p for p in figure_problems(fig))


def test_coinciding_curves_must_stagger_their_markers():
    fig, ax = _axes()
    x = np.arange(6.0)
    for colour in ("C0", "C1", "C2"):                           # psrl-FrozenLake-v1-curves.png: flat at 0
        ax.plot(x, np.zeros(6), marker="o", color=colour, label=colour)
    ax.set_xlim(0, 5)
    assert any("coincide" in p for p in figure_problems(fig))
    s = {"experiment": "t", "x": {"name": "x", "values": x.tolist()}, "seeds": [0],
         "metrics": {"m": {"better": "higher", "methods": {
             m: {"mean": [0.0] * 6, "std": [0.0] * 6} for m in ("pg_absolute_sampling", "dirichlet_sparse_sampling",
                                                               "dirichlet_uniform_sampling")}}}}
    fig = curves_figure(s, "m", x_label="steps", y_label="score", environment="Toy")
    assert not any("coincide" in p for p in figure_problems(fig))
    marks = [line.get_markevery() for line in fig.axes[0].get_lines()]
    assert marks == [(0, 3), (1, 3), (2, 3)]


def test_a_log_panel_repeating_the_linear_one_is_caught():
    fig = Figure(figsize=(10, 4), layout="constrained")
    axes = fig.subplots(1, 2)
    for ax in axes:
        ax.plot([100.0, 300.0, 1000.0], [0.5, 0.4, 0.3], marker="o")
        ax.set_xlabel("T")
        ax.set_ylabel("error")
    axes[1].set_xscale("log")
    assert any("shows nothing its linear twin does not" in p for p in figure_problems(fig))
    s = {"experiment": "t", "x": {"name": "x", "values": [100.0, 300.0, 1000.0]}, "seeds": [0, 1],
         "metrics": {"m": {"better": "lower", "methods": {"pg": {"mean": [0.5, 0.4, 0.3], "std": [0.0] * 3}}}}}
    assert len(curves_figure(s, "m", x_label="T", y_label="e", environment="E", log_panel=True).axes) == 1


def test_text_too_small_at_report_size_is_caught():
    fig, ax = _axes(size=(17.0, 4.4))                           # subgoal-policies.png: 17 in, small text
    ax.plot([0, 1], [0, 1])
    ax.set_title("panel", fontsize="small")
    assert any("px high at 1000 px width" in p for p in figure_problems(fig))


def test_arrows_must_contrast_with_their_cells():
    from corrpriors.plotting import GridLayout, plot_policy

    layout = GridLayout.from_walls(np.zeros((3, 3), bool), action_vectors=[(-1, 0), (1, 0), (0, -1), (0, 1)])
    policy = np.tile([1.0, 0.0, 0.0, 0.0], (9, 1))
    errors = np.linspace(0.0, 1.0, 9)
    fig, ax = plot_policy(layout, policy, errors=errors, arrow_color="k", title="t")   # black on dark red
    assert any("arrows barely contrast" in p for p in figure_problems(fig))
    fig, ax = plot_policy(layout, policy, errors=errors, title="t")                     # auto: white there
    assert not any("contrast" in p for p in figure_problems(fig))


def test_a_method_in_a_foreign_colour_is_caught():
    fig, ax = _axes()
    ax.plot([0, 1], [0, 1], color="#ff7f0e", label=label("pg"))     # pg drawn in pg_absolute's orange
    ax.set_xlim(0, 1)
    legend_outside(ax)
    assert any("not the colour of pg" in p for p in figure_problems(fig))


def test_psrl_panels_name_the_variants_and_keep_the_bands_below_the_optimum():
    from corrpriors._methods import VARIANTS
    from corrpriors.plotting._psrl import psrl_curves_figure

    methods = {f"{m}_{v}": {"mean": [0.1, 0.9, 1.0], "std": [0.05, 0.2, 0.1]}
               for m in ("pg", "dirichlet_sparse") for v in ("sampling", "mean")}
    methods["dirichlet_sparse_mean"] = {"mean": [0.1, 0.2, 0.3], "std": [0.0, 0.1, 0.1]}
    s = {"experiment": "q", "x": {"name": "T", "values": [0.0, 50.0, 100.0]}, "seeds": [0, 1],
         "metrics": {"r": {"better": "higher", "methods": methods}}}
    fig = psrl_curves_figure(s, "r", environment="Grid", x_label="T", y_label="return", reference=1.0)
    assert figure_problems(fig, environment="Grid") == []
    titles = [ax.get_title() for ax in fig.axes]
    assert [t.split(":")[0] for t in titles] == ["sampling", "mean"]            # the names the terminal uses
    assert VARIANTS["sampling"].description.split()[0] in titles[0]


# ----------------------------------------------------------------------------- labels that fit their axes


def _words(text: str) -> str:
    return " ".join(text.split())


def test_a_label_longer_than_its_axes_is_caught():
    """Constrained layout makes room for a y label across its axis only: one longer than the axes
    runs past the axes' top, to the figure's edge (transfer-hellinger.png's y label)."""
    fig = Figure(figsize=(6, 3.8), layout="constrained")
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1])
    ax.set_xlim(0, 1)
    ax.set_xlabel("x")
    ax.set_ylabel("Hellinger distance to the target's true P(s' | s, a) and some more words here\n(mean)")
    problems = figure_problems(fig)
    assert any(p.startswith("y label") and "Hellinger distance" in p and "longer than its axes" in p for p in problems)
    assert any("Hellinger distance" in p and "reaches outside the figure" in p for p in problems)


def test_the_project_figures_wrap_a_label_to_its_axes_and_keep_groups_whole():
    from corrpriors.experiments import transfer as T

    label = T.METRIC_LABELS["hellinger"]
    fig = curves_figure(summary(), "m", x_label=T.X_LABEL, y_label=label, environment="Toy world")
    assert figure_problems(fig, environment="Toy world") == []
    got = fig.axes[0].get_ylabel()
    assert _words(got) == _words(label) and got != label                    # wrapped, no word lost
    assert "P(s' | s, a)" in got.split("\n") or any("P(s' | s, a)" in line for line in got.split("\n"))
    assert got.split("\n")[-1] == "(mean over states and actions)"          # its own line break kept
    # a larger figure needs no wrap: the label as given comes back
    fig.set_size_inches(7.0, 6.0)
    figure_problems(fig)
    assert fig.axes[0].get_ylabel() == label


def test_x_labels_and_titles_of_narrow_panels_do_not_run_into_each_other():
    from corrpriors.experiments._gym import panels_figure

    methods = {m: {"mean": [0.1 * i, 0.5, 0.9 - 0.1 * i], "std": [0.0, 0.1, 0.1]}
               for i, m in enumerate(("pg_sampling", "pg_mean", "pg_absolute_sampling", "dirichlet_sparse_mean"))}
    s = {"experiment": "psrl-x", "x": {"name": "steps", "values": [0.0, 50.0, 100.0]}, "seeds": [0],
         "config": {"concentration": "0.5", "contamination": "none", "support": "none"},
         "metrics": {k: {"better": "higher", "methods": methods} for k in ("a", "b", "c")}}
    fig = panels_figure(s, [(k, f"metric {k} of the greedy policy (fraction of the optimum)", None)
                            for k in ("a", "b", "c")],
                        x_label="environment steps taken by the agent", environment="Lake")
    assert figure_problems(fig, environment="Lake") == []
    legend = fig.legends[0]
    texts = [t.get_text() for t in legend.get_texts()]
    assert all(len(line) <= 40 for t in texts for line in t.split("\n"))     # long labels wrapped
    assert _words(texts[0]) == label("pg_sampling", s["config"])


def test_a_long_legend_widens_the_figure_not_the_panels():
    from corrpriors._methods import labels as method_labels

    def drawn(config):
        s = dict(summary(), config=config)
        s["metrics"]["m"]["methods"] = {m: s["metrics"]["m"]["methods"][k]
                                        for m, k in (("pg", "a"), ("pg_absolute", "b"))}
        fig = curves_figure(s, "m", x_label="steps", y_label="error", environment="Toy world")
        figure_problems(fig)
        return fig.get_figwidth(), fig.axes[0].get_window_extent().width / fig.dpi

    plain_width, plain_axes = drawn(None)
    gym = {"concentration": "0.5", "contamination": "none", "support": "none"}
    assert method_labels(["pg_absolute"], gym)["pg_absolute"] == \
        "PG absolute (the paper's) + per-pair layer (c fixed at 0.5; no contamination; no support hypothesis)"
    width, axes = drawn(gym)
    assert plain_width == 7.0 and width > plain_width
    assert axes > 0.95 * plain_axes                  # the panel keeps its width (the legend had 2.2 in)


def test_the_transfer_similarity_and_psrl_figure_passes():
    """Its similarity legend sat on the data (lower right, where a similarity near 0 is), its band
    had no outline, its log x axis reached past the budgets and its y label named pg_transfer."""
    from corrpriors.plotting._transfer import transfer_figure

    psrl = {"eval_after_transitions": 50, "variant": "mean", "replan_every": 50,
            "policy": "greedy on the optimal Q of the posterior-mean model",
            "methods": {m: {"return_after_eval_mean": [0.4, 0.6], "return_after_eval_std": [0.1, 0.1]}
                        for m in ("pg_transfer", "pg", "pg_pooled", "dirichlet_sparse")}}
    similarity = {"median": [0.1, 0.05, 0.02], "min": [0.0, 0.0, 0.0], "max": [0.3, 0.2, 0.1]}
    fig = transfer_figure([20, 80, 320], similarity, psrl, labels={}, x_label="transitions observed in the target",
                          environment="Transfer, 6x6 windy tunnel worlds")
    assert figure_problems(fig, environment="Transfer") == []
    assert "PG transfer" in _words(fig.axes[0].get_ylabel())


def test_curve_captions_name_the_panels_drawn():
    """The transfer caption said "(linear and log x)" on quick runs, whose three budgets draw no
    log panel (log_panel_useful needs four positive x over a decade)."""
    from corrpriors.experiments import transfer as T
    from corrpriors.plotting._curves import log_panel_useful, panels_note

    quick = T.x_values(T.quick_config())
    assert not log_panel_useful(quick) and panels_note(quick) == "linear x"
    full = T.x_values(T.Config())
    assert log_panel_useful(full) and panels_note(full) == "linear and log x"
