"""Policy arrow maps on grid worlds (the paper's figures 1 and 2)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..mdp.checks import check_policy
from ._common import as_layout, decorate_grid, new_axes, per_state

#: Colours of the background layers.
DATA_GREY = (0.8, 0.8, 0.8)
REWARD_GREEN = (0.33, 0.66, 0.41)
WALL_BLACK = (0.0, 0.0, 0.0)


def policy_arrows(policy: Any, action_vectors: Any) -> np.ndarray:
    r"""Arrow of every state: the probability-weighted sum of the unit action moves.

    :math:`\mathbf v_s = \sum_a \pi(a \mid s)\, \mathbf u_a`, with :math:`\mathbf u_a` the
    (d_row, d_col) step of action ``a``. A uniform policy over the four cardinal moves gives
    a zero arrow; a deterministic one a unit arrow.

    Parameters
    ----------
    policy : array_like of shape (S, A)
    action_vectors : array_like of shape (A, 2)
        The (d_row, d_col) step of every action (for corrpriors' grid worlds
        :data:`corrpriors.envs.ACTION_VECTORS`, also ``mdp.action_vectors``).

    Returns
    -------
    ndarray of shape (S, 2)
        (d_row, d_col) per state.
    """
    pi = np.asarray(policy, dtype=np.float64)
    U = np.asarray(action_vectors, dtype=np.float64)
    if U.ndim != 2 or U.shape[1] != 2:
        raise ValueError(f"action_vectors: expected (d_row, d_col) steps of shape (A, 2), got {U.shape}")
    if pi.ndim != 2 or pi.shape[1] != U.shape[0]:
        raise ValueError(f"policy: expected shape (S, A) with A={U.shape[0]}, got {pi.shape}")
    return pi @ U


def relative_luminance(rgb: Any) -> np.ndarray:
    """WCAG relative luminance of sRGB colours (ndarray of shape (..., 3) in [0, 1]) -> shape (...)."""
    c = np.asarray(rgb, dtype=float)[..., :3]
    lin = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    return lin @ np.array([0.2126, 0.7152, 0.0722])


def contrast_ratio(a: Any, b: Any) -> np.ndarray:
    """WCAG contrast ratio (1 to 21) between colours ``a`` and ``b`` (ndarrays of shape (..., 3))."""
    la, lb = relative_luminance(a), relative_luminance(b)
    return (np.maximum(la, lb) + 0.05) / (np.minimum(la, lb) + 0.05)


def plot_policy(grid: Any, policy: Any, ax: Any = None, *, data_states: Any = None,
                reward_states: Any = None, errors: Any = None, error_max: float | None = None,
                error_cmap: str = "Reds", arrow_length: float = 0.8, colorbar: bool = False,
                error_label: str = "Hellinger distance to the expert policy",
                title: str | None = None, arrow_color: str = "auto", action_vectors: Any = None):
    """Policy arrow map on a grid, with background shading.

    Layers, bottom to top: white cells; grey cells for states with data (``data_states``) or,
    if ``errors`` is given, a red colour map of the per-cell error instead; green reward
    cells; black walls; one arrow per state (see :func:`policy_arrows`), drawn at
    ``arrow_length`` cells for a unit vector and centred on the cell.

    Parameters
    ----------
    grid : GridLayout or TabularMDP
        Where the states sit (a :class:`~corrpriors.plotting.GridLayout`, or a grid-shaped
        MDP); walls are drawn black.
    policy : array_like of shape (S, A)
        Action distributions.
    ax : matplotlib.axes.Axes, optional
        Draw into this axes (default: a new figure).
    data_states : array_like of shape (S,), optional
        Boolean mask (or counts; > 0 counts as True) of states with demonstration data.
    reward_states : array_like of shape (S,), optional
        Boolean mask of reward cells (default: ``grid.rewards > 0`` for an MDP with state
        rewards, none for a layout). Pass ``False``-filled to disable.
    errors : array_like of shape (S,), optional
        Per-state error (e.g. Hellinger distance to the expert), drawn with ``error_cmap``.
    error_max : float, optional
        Upper end of the error colour scale (default: the largest error, at least 1e-12).
    error_cmap : str
        Colour map name for ``errors``.
    arrow_length : float
        Drawn length (in cells) of a unit arrow.
    colorbar : bool
        Add a colour bar for ``errors``.
    error_label : str
        Label of that colour bar.
    title : str, optional
    arrow_color : str, default "auto"
    action_vectors : array_like of shape (A, 2), optional
        The (d_row, d_col) step of every action; default ``grid.action_vectors`` (set by the
        grid-world builders and carried by a :class:`~corrpriors.plotting.GridLayout`).

    Returns
    -------
    (fig, ax) : matplotlib Figure and Axes
    """
    import matplotlib as mpl

    layout = as_layout(grid)
    shape, walls, cells = layout.shape, layout.walls, layout.cells
    S = layout.n_states
    pi = check_policy(policy, S, int(getattr(grid, "n_actions", np.shape(policy)[-1])), "policy")
    if action_vectors is None:
        action_vectors = layout.action_vectors
    if action_vectors is None:
        raise ValueError("action_vectors: required to draw arrows (the (d_row, d_col) step of every "
                         "action); give it, or a grid whose action_vectors are set")
    vec = policy_arrows(pi, action_vectors)
    fig, ax = new_axes(ax)

    rgb = np.ones(shape + (3,))
    if data_states is not None:
        mask = per_state(data_states, S, "data_states") > 0
        rgb[cells[mask, 0], cells[mask, 1]] = DATA_GREY
    mappable = None
    if errors is not None:
        err = per_state(errors, S, "errors")
        top = float(error_max) if error_max is not None else max(float(np.max(err)), 1e-12)
        norm = mpl.colors.Normalize(vmin=0.0, vmax=top)
        cmap = mpl.colormaps[error_cmap]
        rgb[cells[:, 0], cells[:, 1]] = cmap(norm(err))[:, :3]
        mappable = mpl.cm.ScalarMappable(norm=norm, cmap=cmap)
    rewards = getattr(grid, "rewards", None)
    if reward_states is None:
        rew = rewards > 0 if rewards is not None and np.ndim(rewards) == 1 else np.zeros(S, dtype=bool)
    else:
        rew = per_state(reward_states, S, "reward_states") > 0
    rgb[cells[rew, 0], cells[rew, 1]] = REWARD_GREEN
    rgb[walls] = WALL_BLACK
    ax.imshow(rgb, origin="upper", interpolation="nearest")

    # quiver: x = column, y = row; the y axis points down (origin upper), so a step of
    # -1 row is drawn upwards with V = -d_row in 'uv' (screen) angles
    show = np.linalg.norm(vec, axis=1) > 1e-9
    if show.any():
        colours: Any = arrow_color
        if arrow_color == "auto":  # black on light cells, white on dark ones (e.g. a large error)
            under = rgb[cells[show, 0], cells[show, 1]]
            colours = np.where((relative_luminance(under) < 0.18)[:, None], 1.0, 0.0).repeat(3, axis=1)
        ax.quiver(cells[show, 1], cells[show, 0], vec[show, 1], -vec[show, 0], angles="uv",
                  scale_units="xy", scale=1.0 / arrow_length, pivot="middle", color=colours,
                  width=0.007, headwidth=4.0, headlength=4.0, headaxislength=3.5)
    decorate_grid(ax, shape)
    if mappable is not None and colorbar:
        cb = fig.colorbar(mappable, ax=ax, fraction=0.046, pad=0.04)
        cb.set_label(error_label)
    if title:
        ax.set_title(title)
    return fig, ax


__all__ = ["contrast_ratio", "policy_arrows", "plot_policy", "relative_luminance"]
