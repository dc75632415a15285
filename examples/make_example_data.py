"""Generate the shipped example data set (deterministic): a random walk on a 5x5 grid.

Each of the C = 25 cells is a covariate; the K = 5 categories are the observed displacement of
one step (stay, up, down, left, right). The walker picks a direction uniformly; a move into the
outer wall leaves it where it is ("stay"), and in the windy right-hand column it is blown
up with probability 0.5. Neighbouring cells therefore share their outcome distributions,
which is what a correlation prior exploits.

Run from the repository root:

    python examples/make_example_data.py

It writes ``src/corrpriors/data/counts.csv`` (25 x 5 counts, with a header) and
``src/corrpriors/data/coords.csv`` (25 x 2 cell coordinates).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

SIDE = 5
N_STEPS = 400
SEED = 20191208
CATEGORIES = ("stay", "up", "down", "left", "right")
MOVES = {1: (0, 1), 2: (0, -1), 3: (-1, 0), 4: (1, 0)}  # category -> (dx, dy)


def simulate(n_steps: int = N_STEPS, seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(counts (25, 5), coords (25, 2))`` of the random walk."""
    rng = np.random.default_rng(seed)
    counts = np.zeros((SIDE * SIDE, len(CATEGORIES)), dtype=np.int64)
    x, y = SIDE // 2, SIDE // 2
    for _ in range(n_steps):
        cell = x * SIDE + y
        action = int(rng.integers(1, 5))
        if x == SIDE - 1 and rng.random() < 0.5:  # windy column
            action = 1
        dx, dy = MOVES[action]
        nx, ny = x + dx, y + dy
        if 0 <= nx < SIDE and 0 <= ny < SIDE:
            counts[cell, action] += 1
            x, y = nx, ny
        else:
            counts[cell, 0] += 1
    coords = np.array([(i, j) for i in range(SIDE) for j in range(SIDE)], dtype=float)
    return counts, coords


def main() -> None:
    """Write the CSV files next to the package."""
    counts, coords = simulate()
    out = Path(__file__).resolve().parents[1] / "src" / "corrpriors" / "data"
    out.mkdir(parents=True, exist_ok=True)
    np.savetxt(out / "counts.csv", counts, fmt="%d", delimiter=",", header=",".join(CATEGORIES),
               comments="")
    np.savetxt(out / "coords.csv", coords, fmt="%g", delimiter=",", header="x,y", comments="")
    print(f"wrote {out / 'counts.csv'} {counts.shape} and {out / 'coords.csv'} {coords.shape}")


if __name__ == "__main__":
    main()
