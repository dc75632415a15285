"""Per-state heat maps: values, errors, and the queueing network's state space."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._common import as_layout, decorate_grid, new_axes, per_state


def plot_state_values(grid: Any, values: Any, ax: Any = None, *, cmap: str = "viridis",
                      vmin: float | None = None, vmax: float | None = None, colorbar: bool = True,
                      label: str | None = None, title: str | None = None,
                      origin: str = "upper", ticks: bool = False):
    """Heat map of one value per state on the MDP's grid (walls black).

    Parameters
    ----------
    grid : GridLayout or TabularMDP
        Where the states sit (a layout or a grid-shaped MDP).
    values : array_like of shape (S,)
        E.g. state values, errors, action probabilities.
    ax : matplotlib.axes.Axes, optional
    cmap : str
        Colour map name; walls use its "bad" colour, set to black.
    vmin, vmax : float, optional
        Colour limits.
    colorbar : bool
    label : str, optional
        Colour-bar label.
    title : str, optional
    origin : {"upper", "lower"}
        Where row 0 is drawn.
    ticks : bool
        Show integer row/column ticks.

    Returns
    -------
    (fig, ax) : matplotlib Figure and Axes
    """
    import matplotlib as mpl

    layout = as_layout(grid)
    shape = layout.shape
    image = layout.state_grid(per_state(values, layout.n_states, "values"))
    cm = mpl.colormaps[cmap].with_extremes(bad="black")
    fig, ax = new_axes(ax)
    im = ax.imshow(np.ma.masked_invalid(image), cmap=cm, vmin=vmin, vmax=vmax, origin=origin,
                   interpolation="nearest")
    decorate_grid(ax, shape, ticks=ticks, labels=not ticks)
    if origin == "lower":
        ax.set_ylim(-0.5, shape[0] - 0.5)
    if colorbar:
        cb = fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
        cb.set_label(label or "value")
    if title:
        ax.set_title(title)
    return fig, ax


def plot_error_map(grid: Any, errors: Any, ax: Any = None, *, vmax: float | None = None,
                   label: str = "Hellinger distance", **kwargs: Any):
    """Per-state error (e.g. Hellinger distance to the expert) in red, from 0 to ``vmax``.

    Parameters
    ----------
    grid : GridLayout or TabularMDP
    errors : array_like of shape (S,)
    ax : matplotlib.axes.Axes, optional
    vmax : float, optional
        Upper colour limit (default: the largest error).
    label : str
    **kwargs
        Passed to :func:`plot_state_values`.

    Returns
    -------
    (fig, ax) : matplotlib Figure and Axes
    """
    kwargs.setdefault("cmap", "Reds")
    return plot_state_values(grid, errors, ax, vmin=0.0, vmax=vmax, label=label, **kwargs)


def plot_queueing_states(grid: Any, values: Any, ax: Any = None, *, cmap: str = "viridis",
                         label: str | None = None, title: str | None = None,
                         vmin: float | None = None, vmax: float | None = None,
                         colorbar: bool = True):
    """Draw the queueing network's state space as a (B1 + 1) x (B2 + 1) image.

    Rows are :math:`b_1` (queue 1, increasing upwards), columns :math:`b_2` (queue 2), so the
    empty network sits in the lower-left corner.

    Parameters
    ----------
    grid : GridLayout or TabularMDP
        The network's state grid (:func:`corrpriors.envs.queueing_network` has
        ``shape`` = (B1 + 1, B2 + 1)).
    values : array_like of shape (S,)
        One value per state, e.g. ``policy[:, 0]`` (probability of serving queue 1) or V.
    ax : matplotlib.axes.Axes, optional
    cmap, label, title, vmin, vmax, colorbar
        As in :func:`plot_state_values`.

    Returns
    -------
    (fig, ax) : matplotlib Figure and Axes
    """
    fig, ax = plot_state_values(grid, values, ax, cmap=cmap, vmin=vmin, vmax=vmax,
                                colorbar=colorbar, label=label, title=title, origin="lower",
                                ticks=True)
    ax.set_xlabel("$b_2$ (queue 2)")
    ax.set_ylabel("$b_1$ (queue 1)")
    return fig, ax


def plot_queueing_policy(grid: Any, policy: Any, ax: Any = None, **kwargs: Any):
    """Probability of serving queue 1 in every queue state (see :func:`plot_queueing_states`).

    Parameters
    ----------
    grid : GridLayout or TabularMDP
    policy : array_like of shape (S, 2)
    ax : matplotlib.axes.Axes, optional
    **kwargs
        Passed to :func:`plot_queueing_states`.

    Returns
    -------
    (fig, ax) : matplotlib Figure and Axes
    """
    pi = np.asarray(policy, dtype=np.float64)
    n_states = as_layout(grid).n_states
    if pi.shape != (n_states, 2):
        raise ValueError(f"policy: expected shape (S, 2) = ({n_states}, 2), got {pi.shape}")
    kwargs.setdefault("cmap", "coolwarm")
    kwargs.setdefault("label", "P(serve queue 1)")
    return plot_queueing_states(grid, pi[:, 0], ax, vmin=0.0, vmax=1.0, **kwargs)


__all__ = ["plot_state_values", "plot_error_map", "plot_queueing_states", "plot_queueing_policy"]
