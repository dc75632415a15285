"""Shared helpers of the plots: grid layouts, figure/axes creation, saving, grid decoration.

Plotting takes data only: arrays, a :class:`GridLayout` (or any object with the grid
attributes ``shape``, ``walls``, ``cells``, such as a grid-shaped
:class:`~corrpriors.mdp.TabularMDP`) and ``metrics.json`` records. It never builds an
environment and draws no random numbers.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import pathlib
import re
import weakref
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
    """Make a constrained-layout :class:`matplotlib.figure.Figure` (no pyplot) whose labels fit their axes.

    The layout (:func:`fitted_layout`) wraps an axis label or a title longer than its axes (and
    a figure title wider than the figure) onto more lines and lays the figure out again, at
    every draw: constrained layout makes room for a label only across its axis, so a y label
    longer than its axes ran past the axes' top to the figure's edge, and x labels or titles
    longer than their panels ran into the next panel's.
    """
    from matplotlib.figure import Figure

    return Figure(figsize=size, layout=fitted_layout())


def mark_indicative(fig: Any, note: str) -> None:
    """Add ``note`` as the last line of ``fig``'s figure title (its own title if it has none).

    What a reader must know before trusting the figure -- that it comes from quick settings or
    a few seeds -- stays with the image, whatever the file is copied next to.
    """
    title = getattr(fig, "_suptitle", None)   # matplotlib keeps the Text of suptitle() there
    if title is not None and title.get_text():
        title.set_text(f"{title.get_text()}\n{note}")
    else:
        fig.suptitle(note, fontsize="medium")


#: Words of a label: a ``$...$`` formula and a short parenthesised group (``P(s' | s, a)``, ``(the
#: paper's)``; spaces inside) stay one word with what they touch.
_WORD = re.compile(r"\S*\$[^$]*\$\S*|[^\s(]*\([^()]{1,24}\)\S*|\S+")


def wrap_words(line: str, width: int) -> list[str]:
    """Greedy wrap of ``line`` at spaces into lines of at most ``width`` characters.

    A word longer than ``width`` gets a line of its own; formulas (``$...$``), short
    parenthesised groups and hyphenated words are never split.
    """
    out: list[str] = []
    for word in _WORD.findall(line):
        if out and len(out[-1]) + 1 + len(word) <= width:
            out[-1] += " " + word
        else:
            out.append(word)
    return out or [line]


def balanced_wrap(line: str, width: int) -> list[str]:
    """:func:`wrap_words` into as few lines as at ``width``, each as short as that allows (no orphan word)."""
    lines = wrap_words(line, width)
    while width > 1 and len(wrap_words(line, width - 1)) == len(lines):
        width -= 1
    return wrap_words(line, width)


def _length(text: Any, vertical: bool) -> float:
    """Extent of ``text`` (pixels) along its axis: height for a vertical (y) axis, else width."""
    box = text.get_window_extent()
    return float(box.height if vertical else box.width)


#: The text each wrapped Text had before :func:`fit_text` wrapped it, with the wrap it was given.
_UNWRAPPED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def fit_text(text: Any, length: float, vertical: bool = False) -> bool:
    """Re-wrap ``text`` (a matplotlib Text) at spaces until it spans at most ``length`` pixels.

    Every line of the text as it was set (its own line breaks kept; a wrap of an earlier draw
    is undone first) is wrapped at the same, largest, number of characters that fits; where no
    wrap fits, the narrowest one is kept. Returns whether the text changed.
    """
    if not text.get_visible() or not text.get_text().strip():
        return False
    current = text.get_text()
    original, wrapped = _UNWRAPPED.get(text, (current, None))
    if wrapped != current:                # never wrapped, or set again since
        original = current
    if _length(text, vertical) <= length + 1.0 and wrapped is None:
        return False
    lines = original.split("\n")
    candidates = [original] + [
        "\n".join(part for line in lines for part in wrap_words(line, width))
        for width in range(max(len(line) for line in lines) - 1, 7, -1)]
    candidates = list(dict.fromkeys(candidates))          # widest first, each once

    def fits(candidate: str) -> bool:
        text.set_text(candidate)
        return _length(text, vertical) <= length + 1.0

    first = next((i for i, candidate in enumerate(candidates) if fits(candidate)), len(candidates) - 1)
    if first:    # wrapped: the narrowest wrap with as many lines, so that no line is left with a word or two
        count = candidates[first].count("\n")
        text.set_text([c for c in candidates[first:] if c.count("\n") == count][-1])
    _UNWRAPPED[text] = (original, text.get_text())
    return text.get_text() != current


def fit_axes_texts(fig: Any) -> bool:
    """Wrap every axis label and title of ``fig`` longer than its axes, and a title wider than ``fig``.

    (:func:`fit_text`.) Returns whether any text changed (the layout is then computed again).
    """
    suptitle = getattr(fig, "_suptitle", None)   # matplotlib keeps the Text of suptitle() there
    changed = suptitle is not None and fit_text(suptitle, 0.98 * fig.bbox.width)
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        box = ax.get_window_extent()
        changed |= fit_text(ax.xaxis.label, box.width)
        changed |= fit_text(ax.yaxis.label, box.height, vertical=True)
        changed |= fit_text(ax.title, box.width)
    return changed


@functools.cache
def _fitted_engine_class() -> type:
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    class FittedLayoutEngine(ConstrainedLayoutEngine):
        """Constrained layout; a label or title longer than its axes is wrapped, then laid out again."""

        def execute(self, fig: Any) -> Any:
            result = super().execute(fig)
            for _ in range(2):            # a wrap can narrow the axes' margins and so change their size
                if not fit_axes_texts(fig):
                    break
                result = super().execute(fig)
            return result

    return FittedLayoutEngine


def fitted_layout() -> Any:
    """A constrained layout engine that fits the axis labels and titles to their axes (:func:`fit_axes_texts`)."""
    return _fitted_engine_class()()


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
        atomic_write_bytes(path, figure_bytes(fig, fmt, dpi))
        out.append(path)
    return out


def figure_bytes(fig: Any, fmt: str = "png", dpi: int = 150) -> bytes:
    """The file :func:`save_figure` writes for ``fig`` in format ``fmt`` (tight bounding box, fixed metadata)."""
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=dpi, bbox_inches="tight", metadata=_metadata(fmt))
    return buf.getvalue()


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
