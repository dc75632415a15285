"""Shared helpers of the plots: grid layouts, figure/axes creation, saving, grid decoration.

Plotting takes data only: arrays, a :class:`GridLayout` (or any object with the grid
attributes ``shape``, ``walls``, ``cells``, such as a grid-shaped
:class:`~corrpriors.mdp.TabularMDP`) and ``metrics.json`` records. It never builds an
environment and draws no random numbers.
"""

from __future__ import annotations

import dataclasses
import io
import pathlib
from typing import Any

import numpy as np

from .._fileio import atomic_write_bytes


@dataclasses.dataclass(frozen=True)
class GridLayout:
    """Where the states of a grid world sit.

    Attributes
    ----------
    walls : ndarray of shape (rows, cols)
        True for wall cells (not states).
    cells : ndarray of shape (S, 2)
        (row, col) of every state, in state order.
    action_vectors : ndarray of shape (A, 2), optional
        The (d_row, d_col) step of every action, for drawing policies as arrows.
    """

    walls: np.ndarray
    cells: np.ndarray
    action_vectors: np.ndarray | None = None

    def __post_init__(self) -> None:
        walls = np.asarray(self.walls, dtype=bool)
        cells = np.asarray(self.cells, dtype=np.int64)
        if walls.ndim != 2:
            raise ValueError(f"walls: expected shape (rows, cols), got {walls.shape}")
        if cells.ndim != 2 or cells.shape[1] != 2:
            raise ValueError(f"cells: expected shape (S, 2), got {cells.shape}")
        if cells.size and (cells.min() < 0 or np.any(cells.max(axis=0) >= walls.shape)):
            raise ValueError(f"cells: every (row, col) must lie on the {walls.shape} grid")
        object.__setattr__(self, "walls", walls)
        object.__setattr__(self, "cells", cells)
        if self.action_vectors is not None:
            vectors = np.asarray(self.action_vectors, dtype=np.float64)
            if vectors.ndim != 2 or vectors.shape[1] != 2 or not np.all(np.isfinite(vectors)):
                raise ValueError(f"action_vectors: expected finite (d_row, d_col) steps of shape (A, 2), "
                                 f"got shape {np.shape(self.action_vectors)}")
            object.__setattr__(self, "action_vectors", vectors)

    @classmethod
    def from_walls(cls, walls: Any, action_vectors: Any = None) -> GridLayout:
        """States = the non-wall cells in row-major order (the convention of ``TabularMDP``)."""
        walls = np.asarray(walls, dtype=bool)
        return cls(walls=walls, cells=np.argwhere(~walls), action_vectors=action_vectors)

    @property
    def shape(self) -> tuple[int, int]:
        """Grid size (rows, cols)."""
        return (int(self.walls.shape[0]), int(self.walls.shape[1]))

    @property
    def n_states(self) -> int:
        """Number of states S."""
        return int(self.cells.shape[0])

    def state_grid(self, values: Any, fill: float = np.nan) -> np.ndarray:
        """Scatter per-state ``values`` (ndarray of shape (S,)) onto an ndarray of shape (rows, cols)."""
        v = per_state(values, self.n_states, "values")
        grid = np.full(self.shape, fill, dtype=float)
        grid[self.cells[:, 0], self.cells[:, 1]] = v
        return grid


def as_layout(grid: Any) -> GridLayout:
    """Return a :class:`GridLayout` from a layout or a grid-shaped MDP (its ``walls`` and ``cells``)."""
    if isinstance(grid, GridLayout):
        return grid
    if getattr(grid, "shape", None) is None or getattr(grid, "cells", None) is None:
        raise ValueError("grid: expected a GridLayout or a grid-shaped TabularMDP (with `shape`), "
                         f"got {type(grid).__name__}")
    walls = getattr(grid, "walls", None)
    walls = np.zeros(grid.shape, dtype=bool) if walls is None else walls
    vectors = getattr(grid, "action_vectors", None)
    if vectors is not None and np.shape(vectors)[-1] != 2:
        vectors = None   # moves in more than two dimensions cannot be drawn on the grid
    return GridLayout(walls=walls, cells=grid.cells, action_vectors=vectors)


def new_axes(ax: Any = None, size: tuple[float, float] = (4.0, 4.0)):
    """Return ``(fig, ax)``; a fresh :class:`matplotlib.figure.Figure` when ``ax`` is None.

    Figures are built without pyplot, so nothing is registered globally and no window opens.
    """
    if ax is not None:
        return ax.figure, ax
    fig = new_figure(size)
    return fig, fig.add_subplot()


def new_figure(size: tuple[float, float]) -> Any:
    """Make a constrained-layout :class:`matplotlib.figure.Figure` (no pyplot)."""
    from matplotlib.figure import Figure

    return Figure(figsize=size, layout="constrained")


def save_figure(fig: Any, path_without_suffix: str | pathlib.Path, dpi: int = 150,
                formats: tuple[str, ...] = ("png", "pdf")) -> list[pathlib.Path]:
    """Write ``fig`` as ``<path>.png`` and ``<path>.pdf`` (atomically, creating parent folders).

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
    out = []
    for fmt in formats:
        path = base.with_name(base.name + "." + fmt)
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=dpi, bbox_inches="tight", metadata=_metadata(fmt))
        atomic_write_bytes(path, buf.getvalue())
        out.append(path)
    return out


def _metadata(fmt: str) -> dict | None:
    """Return fixed metadata, so the same figure gives the same file (no creation date)."""
    if fmt == "pdf":
        return {"CreationDate": None}
    if fmt == "png":
        return {"Software": None}
    return None


def per_state(values: Any, n_states: int, name: str) -> np.ndarray:
    """Validate a per-state vector of shape (S,)."""
    v = np.asarray(values, dtype=np.float64)
    if v.shape != (n_states,):
        raise ValueError(f"{name}: expected shape (S,) = ({n_states},), got {v.shape}")
    return v


def decorate_grid(ax: Any, shape: tuple[int, int], ticks: bool = False, labels: bool = True) -> None:
    """Thin cell borders, cell-centred limits, optional ticks, "column"/"row" axis labels."""
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
    if labels:
        ax.set_xlabel("grid column", fontsize="small")
        ax.set_ylabel("grid row", fontsize="small")


def log_ticks(ax: Any, x: Any, max_ticks: int = 8) -> None:
    """Label a log x axis at the data's x values (at most ``max_ticks``; else at 1, 2, 5 x 10^k).

    Matplotlib's default labels only the decades, so ``D = 50, 200`` would sit between
    unlabelled ticks.
    """
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator

    values = np.unique(np.asarray(x, dtype=float))
    values = values[np.isfinite(values) & (values > 0)]
    if values.size == 0:
        return
    if values.size <= max_ticks:
        ax.xaxis.set_major_locator(FixedLocator(values))
    else:
        ax.xaxis.set_major_locator(LogLocator(base=10.0, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}" if v >= 1 else f"{v:g}"))


def seeds_text(n_seeds: int) -> str:
    """``"1 seed"`` / ``"5 seeds"``."""
    return f"{n_seeds} seed{'s' if n_seeds != 1 else ''}"
