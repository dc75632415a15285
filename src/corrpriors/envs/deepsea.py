r"""DeepSea, bsuite's benchmark of deep exploration (Osband et al. 2019), as a tabular MDP.

An :math:`N \times N` grid; the agent starts in the top-left cell (row 0, column 0) and falls
one row per step, so every episode lasts exactly :math:`N` steps. In every cell one of the two
actions moves it one column to the right and the other one column to the left (clipped to the
grid); which action index is "right" is drawn per cell (``randomize_actions``), so neither the
index nor its neighbours' tell the agent anything. Moving right costs
:math:`\text{move\_cost} / N`; moving right in the last column pays 1. The only episode with a
positive return goes right at every step: a uniformly random policy finds it with probability
:math:`2^{-N}`, so dithering exploration needs about :math:`2^N` episodes.

The stochastic variant (``deterministic=False``): "right" succeeds with probability
:math:`1 - 1/N` (otherwise the agent falls straight down, still paying the move cost), and the
rewards of the bottom row's two end cells carry N(0, 1) noise (its mean, 0, is what the model
holds; :class:`DeepSeaEnv` adds the noise).

The states (as bsuite defines the environment, with the end of an episode made explicit):

- the cells (row, col), :math:`0 \le \text{row}, \text{col} < N`, in row-major order;
- one terminal row below the grid, (N, col), where the falling agent lands after its N-th step
  (terminal: absorbing, no reward, :math:`V = 0`).

``walls=True`` keeps only the cells an episode can enter (col <= row, and the terminal row):
the same environment with :math:`N(N + 1)/2 + N` instead of :math:`N^2 + N` states, declared
as a grid with walls (``shape``, ``walls``), as a user who lists the reachable states builds
it. ``coordinates`` are the (row, col) of every state.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._memory import check_memory
from .._random import as_generator
from .._validation import check_bool, check_int, check_real
from ..mdp._sparse import listed_transitions
from ..mdp.tabular import TabularMDP
from .gym import TabularEnv

__all__ = ["DeepSeaEnv", "deep_sea", "deep_sea_right_actions"]


def _check_size(size: Any) -> int:
    n = check_int(size, "size", 2)
    check_memory(8.0 * 6 * (n + 1) * n, f"size: the deep sea of size {n:,} ({n:,} x {n:,} grid)",
                 "pass a smaller size")
    return n


def deep_sea_right_actions(size: int, *, rng: Any, randomize_actions: bool = True) -> np.ndarray:
    """The action index that moves right in every cell, as bsuite draws it.

    Parameters
    ----------
    size : int
        N.
    rng : int, numpy.random.Generator or None
        The mapping's randomness (bsuite's ``mapping_seed``).
    randomize_actions : bool, default=True
        False: action 1 moves right everywhere (bsuite's debugging mode, not DeepSea).

    Returns
    -------
    ndarray of shape (N, N)
        0 or 1 per cell (row, col).
    """
    n = _check_size(size)
    if not check_bool(randomize_actions, "randomize_actions"):   # "no" is not False
        return np.ones((n, n), dtype=np.int64)
    return as_generator(rng).integers(2, size=(n, n)).astype(np.int64)


def deep_sea(size: int = 10, *, rng: Any, deterministic: bool = True, move_cost: float = 0.01,
             randomize_actions: bool = True, walls: bool = False,
             discount: float = 0.99, sparse: bool | None = None) -> TabularMDP:
    r"""Build DeepSea of size N as a :class:`~corrpriors.mdp.TabularMDP`.

    Parameters
    ----------
    size : int, default=10
        N (>= 2): rows and columns of the grid, and the length of every episode.
    rng : int, numpy.random.Generator or None
        Draws which action moves right in every cell (required; an int fixes the mapping,
        bsuite's ``mapping_seed``).
    deterministic : bool, default=True
        False: "right" succeeds with probability 1 - 1/N (else the agent falls straight down).
    move_cost : float, default=0.01
        bsuite's ``unscaled_move_cost``: moving right costs ``move_cost / N``, so the optimal
        episode returns ``1 - move_cost`` (deterministic variant).
    randomize_actions : bool, default=True
        False: action 1 is "right" in every cell (not DeepSea; for debugging).
    walls : bool, default=False
        Keep only the cells an episode can enter (col <= row) as states; the others are walls
        of the grid ``shape``.
    discount : float, default=0.99
        :math:`\gamma` of the returned model.
    sparse : bool or None
        Build the transitions as a :class:`~corrpriors.mdp.SparseTransitions` (True), a dense
        array (False), or choose by size (None: sparse when the dense table would exceed
        :data:`~corrpriors.mdp.DENSE_LIMIT_BYTES`, from N = 42). Both hold the same numbers.

    Returns
    -------
    TabularMDP
        ``transitions`` (S, A = 2, S); ``rewards`` :math:`R(s, a)` of shape (S, 2) (the
        expected reward of the step, the move cost included); ``terminal`` (the row below the
        grid); ``initial_distribution`` (the top-left cell); ``coordinates`` (S, 2) as
        (row, col); ``shape`` (N + 1, N) and ``walls``; ``boundary="clip"`` (a move off the
        grid is clipped to its column and still goes down a row, as in bsuite; beliefs that
        share moves between states read it, see
        :meth:`~corrpriors.applications.CorrelatedTransitionModel.for_mdp`).

    Examples
    --------
    >>> mdp = deep_sea(4, rng=0)
    >>> mdp.n_states, mdp.n_actions, int(mdp.terminal.sum())
    (20, 2, 4)
    >>> deep_sea(4, rng=0, walls=True).n_states
    14
    """
    n = _check_size(size)
    deterministic, walls = check_bool(deterministic, "deterministic"), check_bool(walls, "walls")
    move_cost = check_real(move_cost, "move_cost", 0.0, expected="a finite number >= 0")   # True is not 1
    right = deep_sea_right_actions(n, rng=rng, randomize_actions=randomize_actions)
    rows, cols = np.meshgrid(np.arange(n + 1), np.arange(n), indexing="ij")
    wall = np.zeros((n + 1, n), dtype=bool)
    if walls:
        wall[:n] = cols[:n] > rows[:n]
    index = np.full((n + 1, n), -1, dtype=np.int64)
    index[~wall] = np.arange(int((~wall).sum()))
    S = int((~wall).sum())
    R = np.zeros((S, 2))
    p_right = 1.0 if deterministic else 1.0 - 1.0 / n
    to_row: list[int] = []                    # the (S·A, S) table's entries, row s * 2 + a
    to_col: list[int] = []
    to_p: list[float] = []
    for r in range(n):
        for c in range(n):
            s = index[r, c]
            if s < 0:
                continue
            for a in range(2):
                if a == right[r, c]:
                    to_row += [2 * s + a, 2 * s + a]
                    to_col += [index[r + 1, min(c + 1, n - 1)], index[r + 1, c]]
                    to_p += [p_right, 1.0 - p_right]
                    R[s, a] = -move_cost / n + (1.0 if c == n - 1 else 0.0)
                else:
                    to_row.append(2 * s + a)
                    to_col.append(index[r + 1, max(c - 1, 0)])
                    to_p.append(1.0)
    terminal = np.zeros(S, dtype=bool)
    terminal[index[n]] = True
    for t in index[n]:                        # absorbing: P[t, a, t] = 1
        to_row += [2 * t, 2 * t + 1]
        to_col += [t, t]
        to_p += [1.0, 1.0]
    P = listed_transitions(S, 2, to_row, to_col, to_p, sparse)
    start = np.zeros(S)
    start[0] = 1.0
    coords = np.argwhere(~wall).astype(np.float64)
    kind = "deterministic" if deterministic else "stochastic"
    return TabularMDP(P, R, discount, coordinates=coords, shape=(n + 1, n), walls=wall,
                      name=f"DeepSea N={n} ({kind}{', reachable cells' if walls else ''})",
                      terminal=terminal, initial_distribution=start, boundary="clip")



class DeepSeaEnv(TabularEnv):
    """DeepSea as a Gymnasium environment (registered as ``corrpriors/DeepSea-v0``).

    A :class:`~corrpriors.envs.TabularEnv` of :func:`deep_sea` that starts every episode in
    the top-left cell and ends it (``terminated``) after N steps; the stochastic variant adds
    bsuite's N(0, 1) noise to the rewards of the bottom row's two end cells
    (``env.unwrapped.mdp`` holds their mean, 0). Observations are state indices;
    ``env.unwrapped.state_coordinates`` are their (row, col) and ``env.unwrapped.P`` the
    toy-text table of the model.

    Parameters
    ----------
    size : int, default=10
        N.
    mapping_seed : int, default=0
        Seed of the per-cell action mapping (bsuite's ``mapping_seed``).
    deterministic, move_cost, randomize_actions, walls, discount
        As in :func:`deep_sea`.

    Attributes
    ----------
    right_action : ndarray of shape (N, N)
        The action index that moves right in every cell (row, col).

    Examples
    --------
    >>> import gymnasium
    >>> import corrpriors.envs
    >>> env = gymnasium.make("corrpriors/DeepSea-v0", size=5, mapping_seed=3)
    >>> env.reset(seed=0)[0], env.unwrapped.state_coordinates[0].tolist()
    (0, [0.0, 0.0])
    """

    def __init__(self, size: int = 10, mapping_seed: int = 0, deterministic: bool = True,
                 move_cost: float = 0.01, randomize_actions: bool = True, walls: bool = False,
                 discount: float = 0.99, render_mode: str | None = None) -> None:
        check_int(mapping_seed, "mapping_seed", 0)
        n = _check_size(size)
        self.right_action = deep_sea_right_actions(n, rng=int(mapping_seed),
                                                   randomize_actions=randomize_actions)
        mdp = deep_sea(n, rng=int(mapping_seed), deterministic=deterministic,
                       move_cost=move_cost, randomize_actions=randomize_actions, walls=walls,
                       discount=discount)
        super().__init__(mdp, 0, render_mode=render_mode)
        self.size = n
        cells = np.asarray(mdp.cells)
        noisy = (cells[:, 0] == n - 1) & np.isin(cells[:, 1], (0, n - 1))
        self._noisy = noisy & (not deterministic)

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict[str, Any]]:
        """Take ``action``; return (next state, reward, terminated, False, {})."""
        s = self.state
        s2, reward, terminated, truncated, info = super().step(action)
        if s is not None and self._noisy[s]:
            reward += float(self.np_random.standard_normal())
        return s2, reward, terminated, truncated, info
