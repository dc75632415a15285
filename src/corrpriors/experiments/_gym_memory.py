"""Memory estimates of the Gymnasium commands: refuse before allocating, in the form the code will use.

:func:`corrpriors.envs.from_gymnasium` reads a toy-text table densely up to
:data:`~corrpriors.mdp.DENSE_LIMIT_BYTES` of dense (S, A, S) table and sparsely beyond; the
beliefs store their counts and tables sparsely from
:data:`~corrpriors.applications.transitions.SPARSE_FROM_STATES` states on. Each estimate below
follows the same choice, so a 200 x 200 FrozenLake map (40,000 states) is read sparsely (about
100 MiB) and runs with the Dirichlet and relative-encoding beliefs, while the absolute encoding
on it (an (S, S) kernel and (S, S - 1) stick parameters: tens of GiB) is refused up front.

The constants are measured peaks (tracemalloc and maximum resident size, 50 x 50 and 100 x 100
FrozenLake maps) rounded up; a refusal names the estimate, the budget and what to do instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._memory import check_memory, format_bytes
from ..envs.gym import ENV_TABLE_BYTES_PER_ENTRY

#: Dense (S, A, S) float64 tables alive at once while the adapter reads a toy-text table densely
#: (P, the summed rewards, r and the fill-in temporaries; the two boolean tables count as a quarter).
LOAD_TABLES = 5.0
#: Peak bytes per listed entry ``(prob, next_state, reward, terminated)`` while the adapter reads a
#: table sparsely (Python lists of the entries, then the sorted arrays; measured 205-210 on 10^4
#: and 4 x 10^4 states, about 52 kept).
SPARSE_LOAD_BYTES_PER_ENTRY = 256.0
#: Dense (S, A, S) tables alive at once while a seed holds the model and fits a belief with dense
#: storage (counts, the posterior mean, the Hellinger distance's temporaries).
RUN_TABLES = 6.0
#: Further dense (S, A, S) tables of a correlated belief with dense storage: its per-pair layer's
#: and sparse-support hypothesis's temporaries beside the fit (tracemalloc peaks of one sysid seed
#: on FrozenLake maps with and without them: 6.8, 11.9 and 6.3 tables at S = 100, 400 and 900).
LAYER_TABLES = 12.0
#: Dense (S, A, S) arrays per posterior draw of one chunk that a correlated belief's
#: Hellinger-Bayes estimate holds at once (the base draws, their mixed bases, the layer's draws,
#: their conditional square-root values and the square of those; tracemalloc peaks of one sysid
#: seed on FrozenLake 20 x 20: 315 MiB above the means' with chunks of 13 draws of 4.9 MiB).
HELLINGER_ARRAYS = 5.0
#: Bytes of a seed beyond its tables and fits (modules imported on first use, the environment
#: object, the exploration data): the peak of a seed less the estimate's terms was 9-18 MiB
#: (sysid, FrozenLake 10 x 10 and 46 x 46).
SEED_OVERHEAD_BYTES = 32.0 * 2**20
#: Bytes per stored entry of a sparse table (a float64 value and an int32/int64 index, CSR).
SPARSE_ENTRY_BYTES = 16.0
#: (S, K) float64 arrays a correlated fit keeps per action (stick means, variances, Polya-Gamma
#: moments, counts, warm starts and their temporaries).
FIT_ARRAYS = 12.0
#: Arrays of sum_k |O_k|^2 floats in the factor workspace of a dense prior (the blocks of every
#: stick's observed states; measured three of 20 MiB at S = K = 100) and two for the temporaries.
DENSE_WORKSPACE_ARRAYS = 5.0
#: Bytes per state of a GMRF prior's sparse Cholesky factor per log2(S) (nested-dissection fill).
GMRF_BYTES_PER_STATE_LOG = 400.0


def dense_table_bytes(n_states: int, n_actions: int, n_tables: float = 1.0) -> float:
    """Bytes of ``n_tables`` dense float64 tables of shape (S, A, S)."""
    return 8.0 * n_tables * float(n_states) * n_actions * n_states


def check_dense_tables(n_states: int, n_actions: int, n_tables: float, what: str, alternative: str) -> None:
    """Refuse dense (S, A, S) tables that cannot fit, before allocating them (a ``MemoryEstimateError``)."""
    one = dense_table_bytes(n_states, n_actions)
    check_memory(dense_table_bytes(n_states, n_actions, n_tables),
                 f"{what} ({n_states:,} states, {n_actions} actions: {format_bytes(one)} per dense (S, A, S) "
                 f"table, about {n_tables:g} at once)", alternative)


def listed_entries(table: Any, n_states: int, n_actions: int) -> int | None:
    """Number of entries of a toy-text ``P[s][a]`` table (None if it cannot be counted: the adapter reports why)."""
    try:
        return sum(len(table[s][a]) for s in range(n_states) for a in range(n_actions))
    except Exception:  # noqa: BLE001 - a malformed table is the adapter's to describe
        return None


def env_entries(env: Any, n_states: int, n_actions: int) -> int | None:
    """Listed transitions of an environment's model, without building a table it does not hold: a
    :class:`~corrpriors.envs.TabularEnv`'s from its model (the non-zeros of a sparse one), else
    :func:`listed_entries` of ``env.unwrapped.P`` (None if there is none).
    """
    from ..envs.gym import TabularEnv
    from ..mdp._sparse import SparseTransitions

    u = getattr(env, "unwrapped", env)
    if isinstance(u, TabularEnv):
        P = u.mdp.transitions
        return int(P.nnz) if isinstance(P, SparseTransitions) else int(np.count_nonzero(P))
    table = getattr(u, "P", None)
    return None if table is None else listed_entries(table, n_states, n_actions)


def check_load_memory(env: Any, n_states: int, n_actions: int, what: str) -> None:
    """Refuse reading an environment's model that cannot fit, in the form the adapter will use.

    Dense when the (S, A, S) table is at most :data:`~corrpriors.mdp.DENSE_LIMIT_BYTES` (about
    :data:`LOAD_TABLES` such tables at once), else sparse (:data:`SPARSE_LOAD_BYTES_PER_ENTRY`
    per listed entry of ``env.unwrapped.P``).
    """
    from ..mdp._sparse import prefer_sparse

    if not prefer_sparse(n_states, n_actions):
        check_dense_tables(n_states, n_actions, LOAD_TABLES, what, "use a smaller map or state space")
        return
    entries = env_entries(env, n_states, n_actions)
    if entries is None:
        return
    check_memory(SPARSE_LOAD_BYTES_PER_ENTRY * entries,
                 f"{what} ({n_states:,} states, {n_actions} actions, read sparsely: {entries:,} listed transitions)",
                 "use a smaller map or state space")


def table_bytes(value: Any) -> float:
    """Bytes held by a dense or sparse table of a model (0 for None)."""
    if value is None:
        return 0.0
    matrix = getattr(value, "matrix", None)
    if matrix is not None and hasattr(matrix, "indptr"):
        return float(matrix.data.nbytes + matrix.indices.nbytes + matrix.indptr.nbytes)
    if hasattr(value, "fallback"):
        return float(sum(getattr(value, n).nbytes for n in ("indptr", "indices", "values", "arrival",
                                                             "arrival_known", "fallback", "inert")))
    return float(getattr(value, "nbytes", 0))


def _base_model(method: str) -> str:
    for suffix in ("_sampling", "_mean"):
        if method.endswith(suffix):
            return method[: -len(suffix)]
    return method


def belief_categories(model: str, n_states: int, n_dims: int, radius: int) -> float:
    """K, the categories of a correlated belief ``model``, as a float (``inf`` past the float range):
    ``pg_absolute`` has one per state, ``pg`` one per move of its window plus one,
    :math:`K = (2r + 1)^D + 1` (more than S when the window is wide). The memory and time
    estimates both count them here.
    """
    from ..applications.transitions._categories import window_size

    return float(n_states) if model == "pg_absolute" else window_size(n_dims, radius) + 1.0


def belief_memory(model: str, n_states: int, n_actions: int, n_dims: int, *, radius: int = 1,
                  prior: str = "auto", n_scales: int = 1, observed: int = 0, samples: int = 0) -> float:
    """Peak bytes of one belief ``model`` of a seed: its counts, fit, prior, mean and ``samples`` draws.

    Follows the code's choices: dense storage below
    :data:`~corrpriors.applications.transitions.SPARSE_FROM_STATES` states (dense (S, A, S)
    tables and, for ``pg``, the (S, S) category map built from (S, S, D) displacements and the
    (S, W, D) moves of its window), sparse above (observed cells, a window map of (S, W) and tables
    of S A K entries); ``pg`` has K = W + 1 categories, :math:`W = (2r + 1)^D` (more than S when
    the window is wide: 49 on the 16 states of FrozenLake 4x4 with radius 3), ``pg_absolute``
    has K = S categories (stick parameters of (S, S - 1) per action); the prior is a dense
    (S, S) kernel per candidate length scale, or a GMRF from
    :data:`~corrpriors.applications.transitions.GMRF_FROM_STATES` states with at most
    :data:`~corrpriors.applications.transitions.GMRF_MAX_CATEGORIES` categories or where the
    dense one cannot fit (``"auto"``).
    """
    from ..applications.transitions._beliefs import _resolve_sparse
    from ..applications.transitions._correlated import _auto_prior

    S, A = float(n_states), float(n_actions)
    dense_storage = not _resolve_sparse(None, n_states)   # the beliefs' own default
    if model.startswith("dirichlet"):
        if dense_storage:
            return dense_table_bytes(n_states, n_actions, RUN_TABLES + samples)
        table = SPARSE_ENTRY_BYTES * (S * A + observed)          # observed cells + background per row
        return table * (3 + samples)
    absolute = model == "pg_absolute"
    K = belief_categories(model, n_states, n_dims, radius)
    window = 0.0 if absolute else K - 1                        # W: the relative encoding's moves
    if prior == "auto":
        prior = _auto_prior(n_states, int(min(K, 2.0 ** 62)))
    # a dense prior: the (S, S) kernel per candidate and the factor workspace of every action's
    # sticks, each over its observed states (at most S, and about T / A of them are seen per action)
    seen = min(S, math.ceil(observed / A) if observed else S)
    prior_bytes = (8.0 * S * S * n_scales + DENSE_WORKSPACE_ARRAYS * 8.0 * A * (K - 1) * seen * seen
                   if prior == "dense" else GMRF_BYTES_PER_STATE_LOG * S * max(1.0, math.log2(S)) * n_scales)
    fit = FIT_ARRAYS * 8.0 * S * K * A
    if dense_storage:
        tables = dense_table_bytes(n_states, n_actions, RUN_TABLES + LAYER_TABLES + samples)
        # the (S, S) map from (S, S, D) displacements, and the (S, W, D) moves aimed at
        cmap = 0.0 if absolute else 8.0 * S * (S * (n_dims + 3) + window * (n_dims + 1))
        return tables + cmap + prior_bytes + fit
    table = SPARSE_ENTRY_BYTES * S * A * K                     # a mean or a draw: every category's entry
    cmap = 0.0 if absolute else 16.0 * S * K                   # the (S, W) window map
    return table * (2 + samples) + cmap + prior_bytes + fit + SPARSE_ENTRY_BYTES * observed


def hellinger_memory(n_states: int, n_actions: int) -> float:
    """Bytes a correlated belief with dense storage adds while it computes its Hellinger-Bayes
    estimate: :data:`HELLINGER_ARRAYS` arrays of one chunk of posterior draws (a chunk holds
    at most ``chunk_draws`` draws and, doubling from 16, at most half of the 256 draws).
    """
    from ..applications.transitions._hellinger import HELLINGER_DRAWS, chunk_draws

    size = int(n_states) * int(n_actions) * int(n_states)
    return HELLINGER_ARRAYS * 8.0 * size * min(chunk_draws(size), HELLINGER_DRAWS // 2)


def load_memory(n_states: int, n_actions: int, entries: int | None) -> float:
    """Bytes of reading a model: Gymnasium's own table of ``entries`` listed transitions and the
    adapter's peak (dense: :data:`LOAD_TABLES` (S, A, S) tables; sparse: per listed entry).
    """
    from ..mdp._sparse import prefer_sparse

    env_table = ENV_TABLE_BYTES_PER_ENTRY * (entries or 0)
    if not prefer_sparse(n_states, n_actions):
        return env_table + dense_table_bytes(n_states, n_actions, LOAD_TABLES)
    return env_table + SPARSE_LOAD_BYTES_PER_ENTRY * (entries or 0)


def run_memory(n_states: int, n_actions: int, n_dims: int, methods: Sequence[str], samples: int = 0, *,
               model_bytes: float | None = None, entries: int | None = None, radius: int = 1,
               prior: str = "auto", n_scales: int = 1, observed: int = 0,
               point_estimate: str = "mean") -> float:
    """Bytes a seed holds at its peak: reading the model (:func:`load_memory` of ``entries`` listed
    transitions), the model (``model_bytes``; default two dense tables), :data:`SEED_OVERHEAD_BYTES`
    and the largest of its beliefs (:func:`belief_memory`; the methods run one after the other),
    a correlated one with ``point_estimate="hellinger"`` plus :func:`hellinger_memory`.
    """
    from ..applications.transitions._beliefs import _resolve_sparse

    model = dense_table_bytes(n_states, n_actions, 2.0) if model_bytes is None else float(model_bytes)
    model += load_memory(n_states, n_actions, entries) + SEED_OVERHEAD_BYTES
    draws = (hellinger_memory(n_states, n_actions)
             if point_estimate == "hellinger" and not _resolve_sparse(None, n_states) else 0.0)
    beliefs = [belief_memory(_base_model(m), n_states, n_actions, n_dims, radius=radius, prior=prior,
                             n_scales=n_scales, observed=observed, samples=samples if m.endswith("_sampling") else 0)
               + (0.0 if m.startswith("dirichlet") else draws)
               for m in methods]
    return model + max(beliefs, default=0.0)


def scoring_memory(n_states: int, n_actions: int, n_scorings: int, *, sparse_model: bool, model_entries: int) -> float:
    """Bytes of the exact horizon statistics of ``n_scorings`` greedy policies at once.

    The (E, S, A) policies and, for a dense model, the (E, S, S) policy transition matrices; for a
    sparse model one sparse P_pi per policy (``model_entries / A`` entries, and its transpose).
    """
    per_policy = 8.0 * n_states * n_actions + (2 * SPARSE_ENTRY_BYTES * model_entries / max(n_actions, 1)
                                               if sparse_model else 16.0 * n_states * n_states)
    return float(n_scorings) * per_policy


__all__ = [
    "FIT_ARRAYS",
    "HELLINGER_ARRAYS",
    "GMRF_BYTES_PER_STATE_LOG",
    "DENSE_WORKSPACE_ARRAYS",
    "ENV_TABLE_BYTES_PER_ENTRY",
    "LAYER_TABLES",
    "LOAD_TABLES",
    "RUN_TABLES",
    "SEED_OVERHEAD_BYTES",
    "SPARSE_ENTRY_BYTES",
    "SPARSE_LOAD_BYTES_PER_ENTRY",
    "belief_memory",
    "check_dense_tables",
    "check_load_memory",
    "dense_table_bytes",
    "env_entries",
    "listed_entries",
    "load_memory",
    "run_memory",
    "scoring_memory",
    "table_bytes",
]
