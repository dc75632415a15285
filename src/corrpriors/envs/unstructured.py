r"""An MDP without structure: random successors, no geometry (a test of when priors do harm).

Every (state, action) pair moves to ``n_successors`` distinct next states drawn uniformly at
random, with probabilities drawn from a flat Dirichlet; rewards :math:`R(s, a)` are uniform on
[0, 1). Nothing about one state tells anything about another, so a correlated prior can only
lose against independent beliefs -- the case its per-(state, action) layer must recognise
(:class:`~corrpriors.applications.CorrelatedTransitionModel`). The model has no coordinates;
:func:`state_index` gives the index as a one-dimensional coordinate ("index features").
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._memory import check_memory
from .._random import as_generator
from .._validation import check_int
from ..mdp._sparse import listed_transitions
from ..mdp.tabular import TabularMDP
from .gym import TabularEnv

__all__ = ["RandomMDPEnv", "random_mdp", "state_index"]


#: Most (state, action) rows :func:`random_mdp` draws (one Python-level draw per row).
MAX_RANDOM_ROWS = 2_000_000


def random_mdp(n_states: int = 50, n_actions: int = 4, n_successors: int = 3, *, rng: Any,
               discount: float = 0.95, sparse: bool | None = None) -> TabularMDP:
    """A random MDP: ``n_successors`` random next states per pair, flat-Dirichlet probabilities.

    Parameters
    ----------
    n_states, n_actions : int
        S >= 2 and A >= 1.
    n_successors : int
        Next states per (state, action), 1 <= n_successors <= S.
    rng : int, numpy.random.Generator or None
        Draws the model (required; an int fixes it).
    discount : float, default=0.95
    sparse : bool or None
        Build the transitions as a :class:`~corrpriors.mdp.SparseTransitions` (True), a dense
        array (False), or choose by size (None: sparse when the dense table would exceed
        :data:`~corrpriors.mdp.DENSE_LIMIT_BYTES`). Both hold the same numbers and draws.

    Returns
    -------
    TabularMDP
        ``transitions`` (S, A, S) with ``n_successors`` non-zero entries per row; ``rewards``
        (S, A) uniform on [0, 1); no coordinates.

    Examples
    --------
    >>> mdp = random_mdp(10, 2, 3, rng=0)
    >>> (mdp.transitions > 0).sum(axis=-1).tolist()[0]
    [3, 3]
    """
    for name, v, low in (("n_states", n_states, 2), ("n_actions", n_actions, 1),
                         ("n_successors", n_successors, 1)):
        check_int(v, name, low)
    S, A, k = int(n_states), int(n_actions), int(n_successors)
    if k > S:
        raise ValueError(f"n_successors: expected at most n_states = {S}, got {k}")
    if S * A > MAX_RANDOM_ROWS:
        raise ValueError(f"n_states: random_mdp draws each of the S * A = {S * A:,} rows in a Python loop; "
                         f"at most {MAX_RANDOM_ROWS:,} rows are allowed (minutes of work beyond that)")
    check_memory(8.0 * 3 * S * A * k + 8.0 * S * A, f"n_states: the random MDP with {S:,} states and "
                 f"{A:,} actions", "pass fewer states or actions")
    gen = as_generator(rng)
    cols = np.empty((S * A, k), dtype=np.int64)
    vals = np.empty((S * A, k))
    for row in range(S * A):                  # row s * A + a, in the order of the draws
        cols[row] = gen.choice(S, size=k, replace=False)
        vals[row] = gen.dirichlet(np.ones(k))
    P = listed_transitions(S, A, np.repeat(np.arange(S * A), k), cols.ravel(), vals.ravel(), sparse)
    R = gen.random((S, A))
    return TabularMDP(P, R, discount, name=f"random MDP (S={S}, A={A}, {k} successors)")


def state_index(env: Any) -> np.ndarray:
    """The state index as a coordinate: ``--features corrpriors.envs:state_index``.

    Parameters
    ----------
    env : gymnasium.Env
        With a Discrete observation space of S states.

    Returns
    -------
    ndarray of shape (S, 1)
        ``0, 1, ..., S - 1``.
    """
    return np.arange(int(env.observation_space.n), dtype=np.float64)[:, None]


class RandomMDPEnv(TabularEnv):
    """:func:`random_mdp` as a Gymnasium environment (``corrpriors/RandomMDP-v0``).

    Parameters
    ----------
    n_states, n_actions, n_successors : int
        As in :func:`random_mdp`.
    mdp_seed : int, default=0
        Seed of the model.
    discount : float, default=0.95
    """

    def __init__(self, n_states: int = 50, n_actions: int = 4, n_successors: int = 3,
                 mdp_seed: int = 0, discount: float = 0.95,
                 render_mode: str | None = None) -> None:
        check_int(mdp_seed, "mdp_seed", 0)
        super().__init__(random_mdp(n_states, n_actions, n_successors, rng=int(mdp_seed),
                                    discount=discount), render_mode=render_mode)
