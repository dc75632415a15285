"""Shared helpers of the grid plots: figure/axes creation, saving, grid decoration."""

from __future__ import annotations

import pathlib
from typing import Any

import numpy as np


def new_axes(ax: Any = None, size: tuple[float, float] = (4.0, 4.0)):
    """Return ``(fig, ax)``; a fresh :class:`matplotlib.figure.Figure` when ``ax`` is None.

    Figures are built without pyplot, so nothing is registered globally and no window opens.
    """
    if ax is not None:
        return ax.figure, ax
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, layout="constrained")
    return fig, fig.add_subplot()


def save_figure(fig: Any, path_without_suffix: str | pathlib.Path, dpi: int = 150,
                formats: tuple[str, ...] = ("png", "pdf")) -> list[pathlib.Path]:
    """Write ``fig`` as ``<path>.png`` and ``<path>.pdf`` (creating parent folders).

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    path_without_suffix : str or pathlib.Path
        Target path without extension.
    dpi : int
        Resolution of the raster format.
    formats : tuple of str
        File formats to write.

    Returns
    -------
    list of pathlib.Path
        The written files.
    """
    base = pathlib.Path(path_without_suffix)
    base.parent.mkdir(parents=True, exist_ok=True)
    out = []
    for fmt in formats:
        path = base.with_name(base.name + "." + fmt)
        fig.savefig(path, dpi=dpi, bbox_inches="tight")
        out.append(path)
    return out


def grid_of(mdp: Any) -> tuple[tuple[int, int], np.ndarray, np.ndarray]:
    """(shape, walls, cells) of a grid-shaped :class:`~corrpriors.mdp.TabularMDP`."""
    if getattr(mdp, "shape", None) is None or getattr(mdp, "cells", None) is None:
        raise ValueError("mdp: expected a grid-shaped TabularMDP (with `shape`), got one without")
    return mdp.shape, np.asarray(mdp.walls), np.asarray(mdp.cells)


def per_state(values: Any, n_states: int, name: str) -> np.ndarray:
    """Validate a per-state vector of shape (S,)."""
    v = np.asarray(values, dtype=np.float64)
    if v.shape != (n_states,):
        raise ValueError(f"{name}: expected shape (S,) = ({n_states},), got {v.shape}")
    return v


def decorate_grid(ax: Any, shape: tuple[int, int], ticks: bool = False) -> None:
    """Thin cell borders, cell-centred limits, optional ticks."""
    n_rows, n_cols = shape
    ax.set_xticks(np.arange(-0.5, n_cols, 1.0), minor=True)
    ax.set_yticks(np.arange(-0.5, n_rows, 1.0), minor=True)
    ax.grid(which="minor", color="0.75", linewidth=0.4)
    ax.tick_params(which="minor", length=0)
    if not ticks:
        ax.set_xticks([])
        ax.set_yticks([])
    ax.set_xlim(-0.5, n_cols - 0.5)
    ax.set_ylim(n_rows - 0.5, -0.5)
    ax.set_aspect("equal")
