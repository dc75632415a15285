"""Validation of tabular MDP ingredients: transition tensors, rewards, policies.

All checks raise :class:`ValueError` with a message that names the argument, the
expected shape and what arrived; stochasticity errors report the worst row.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from .._validation import as_real_array

#: Absolute tolerance for "sums to one".
ROW_ATOL = 1e-8

#: Rows accepted within :data:`ROW_ATOL` whose sums are further than this from one are divided by
#: their sums (:func:`stochastic_rows`): a row summing to 1 + 5e-9 under a discount of 1 - 1e-10
#: made the planners return -2e8 for a value of 1e10. Closer rows are the rounding of a normalised
#: row and keep their numbers bit for bit (dense and sparse tables stay equal).
RESCALE_ATOL = 1e-12


def check_transitions(transitions: Any, name: str = "transitions", batch: bool = False,
                      atol: float = ROW_ATOL, allow_sparse: bool = False) -> Any:
    """Validate a transition tensor ``P[s, a, s']``.

    Parameters
    ----------
    transitions : array_like of shape (S, A, S), or (..., S, A, S) when ``batch``
        Next-state distributions; every row ``P[..., s, a, :]`` must be a probability vector.
        With ``allow_sparse`` also a :class:`~corrpriors.mdp.SparseTransitions`, a scipy sparse
        array of shape (S*A, S) (row s*A + a, column s'), any other
        :class:`~corrpriors.mdp.planning.TransitionOperator` (e.g. a belief's
        :class:`~corrpriors.applications.BackgroundTransitions` mean or draw) or, with
        ``batch``, a list of them.
    name : str
        Argument name used in error messages.
    batch : bool
        Accept leading batch axes.
    atol : float
        Tolerance on the row sums.
    allow_sparse : bool
        Accept sparse tables (otherwise they raise a TypeError saying a dense one is needed).

    Returns
    -------
    ndarray of shape (S, A, S) or (..., S, A, S), TransitionOperator, or list of them
        The tensor as float64, every row whose sum is more than :data:`RESCALE_ATOL` from one
        divided by its sum (so accepted rows sum to one to rounding: a row summing to
        1 + 5e-9 under a discount near 1 would otherwise give values of the wrong sign); a
        scipy sparse array as a SparseTransitions (rescaled the same way), other sparse tables
        as they are (a list for a sparse batch).

    Raises
    ------
    TypeError
        Complex, string or other non-real entries (never cut to their real part).
    """
    from ._sparse import SparseTransitions, is_sparse_table
    from .planning import TransitionOperator

    def is_table(t: Any) -> bool:   # sparse, or any other table given as an operator
        return is_sparse_table(t) or isinstance(t, TransitionOperator)

    many = batch and isinstance(transitions, (list, tuple)) and len(transitions) > 0 and \
        all(is_table(t) for t in transitions)
    if is_table(transitions) or many:
        if not allow_sparse:
            raise TypeError(f"{name}: this needs a dense (S, A, S) array, got a sparse table; "
                            f"use .toarray() if it fits in memory")

        def one(t: Any, label: str) -> Any:
            return SparseTransitions(t, name=label, atol=atol) if sp.issparse(t) else t

        if not many:
            return one(transitions, name)
        out = [one(t, f"{name}[{i}]") for i, t in enumerate(transitions)]
        shapes = {(t.n_states, t.n_actions, t.n_states) for t in out}
        if len(shapes) != 1:
            raise ValueError(f"{name}: the sparse tables of a batch must have one shape (S, A, S), got "
                             f"{sorted(shapes)}")
        return out
    P = _real_float_array(transitions, name)
    if P.ndim != 3 and not (batch and P.ndim >= 3):
        want = "(..., S, A, S)" if batch else "(S, A, S)"
        raise ValueError(f"{name}: expected shape {want}, got {P.shape}")
    if P.shape[-1] != P.shape[-3]:
        raise ValueError(f"{name}: expected shape (S, A, S) with equal first and last axes, "
                         f"got {P.shape}")
    if P.shape[-1] < 1 or P.shape[-2] < 1:
        raise ValueError(f"{name}: needs at least one state and one action, got {P.shape}")
    if not np.all(np.isfinite(P)):
        raise ValueError(f"{name}: contains NaN or infinite values")
    if (P < 0).any():
        idx = np.unravel_index(np.argmin(P), P.shape)
        raise ValueError(f"{name}: probabilities must be non-negative, found {P[idx]:g} at index "
                         f"{tuple(int(i) for i in idx)}")
    sums = P.sum(axis=-1)
    dev = np.abs(sums - 1.0)
    if (dev > atol).any():
        idx = np.unravel_index(np.argmax(dev), dev.shape)
        raise ValueError(f"{name}: every row P[s, a, :] must sum to one; worst row "
                         f"{tuple(int(i) for i in idx)} (..., s, a) sums to "
                         f"{sums[idx]:.12g}")
    return stochastic_rows(P, sums)


def stochastic_rows(P: np.ndarray, sums: np.ndarray | None = None) -> np.ndarray:
    """``P`` (..., S) with every row whose sum is more than :data:`RESCALE_ATOL` from one divided
    by its sum (a new array; ``P`` itself when no row is). Rows must have positive sums;
    ``sums`` (...,) are the row sums if already known.
    """
    divisors = row_divisors(P.sum(axis=-1) if sums is None else sums)
    return P if divisors is None else P / divisors[..., None]


def row_divisors(sums: np.ndarray) -> np.ndarray | None:
    """What :func:`stochastic_rows` divides each row by, given the row ``sums`` (...,): the sum
    where it is more than :data:`RESCALE_ATOL` from one (and positive), else 1; None when no row
    needs it. The one rule for dense and sparse tables.
    """
    off = (np.abs(sums - 1.0) > RESCALE_ATOL) & (sums > 0)
    return np.where(off, sums, 1.0) if off.any() else None


def _real_float_array(x: Any, name: str) -> np.ndarray:
    """``x`` as a float64 array; complex, strings and other non-reals raise a TypeError naming
    ``name`` (:func:`corrpriors._validation.as_real_array`), unconvertible objects a ValueError.
    """
    arr = as_real_array(x, name)
    try:
        return np.asarray(arr, dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"{name}: expected a numeric array, got {type(x).__name__} ({exc})") from None


def check_rewards(rewards: Any, n_states: int, n_actions: int, name: str = "rewards") -> Any:
    """Validate rewards R(s) (S,), R(s, a) (S, A) or r(s, a, s') (S, A, S); return float64.

    A :class:`~corrpriors.mdp.SparseTransitionRewards` (validated when built) is returned as
    is after a shape check.
    """
    from ._sparse import SparseTransitionRewards

    if isinstance(rewards, SparseTransitionRewards):
        if rewards.shape != (n_states, n_actions, n_states):
            raise ValueError(f"{name}: expected transition rewards of shape (S, A, S) = ({n_states}, "
                             f"{n_actions}, {n_states}), got {rewards.shape}")
        return rewards
    R = _real_float_array(rewards, name)
    if R.shape not in ((n_states,), (n_states, n_actions), (n_states, n_actions, n_states)):
        raise ValueError(f"{name}: expected shape (S,) = ({n_states},), (S, A) = "
                         f"({n_states}, {n_actions}) or (S, A, S) = ({n_states}, {n_actions}, "
                         f"{n_states}), got {R.shape}")
    if not np.all(np.isfinite(R)):
        raise ValueError(f"{name}: contains NaN or infinite values")
    return R


def check_discount(discount: Any, name: str = "discount", allow_one: bool = False) -> float:
    """Validate a discount factor in [0, 1) (or [0, 1] when ``allow_one``); strings and booleans
    are refused, not converted (``'0.9'`` is not 0.9).
    """
    number = isinstance(discount, (int, float, np.integer, np.floating)) or (
        isinstance(discount, np.ndarray) and discount.ndim == 0 and discount.dtype.kind in "iuf")
    if isinstance(discount, (bool, np.bool_)) or not number:
        raise ValueError(f"{name}: expected a number in [0, 1), got {discount!r}")
    try:
        g = float(discount)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a number in [0, 1), got {discount!r}") from None
    upper_ok = g <= 1.0 if allow_one else g < 1.0
    if not (np.isfinite(g) and g >= 0.0 and upper_ok):
        want = "[0, 1]" if allow_one else "[0, 1)"
        raise ValueError(f"{name}: expected a number in {want}, got {discount!r}")
    return g


def check_policy(policy: Any, n_states: int, n_actions: int, name: str = "policy",
                 batch: bool = False, atol: float = ROW_ATOL) -> np.ndarray:
    """Validate a policy and return it as a stochastic matrix.

    Parameters
    ----------
    policy : array_like
        Either a stochastic matrix of shape (S, A) (rows are action distributions) or a
        deterministic policy of integer actions of shape (S,). With ``batch``, leading axes
        are allowed: (..., S, A) or integer (..., S).
    n_states, n_actions : int
        Expected S and A.

    Returns
    -------
    ndarray of shape (S, A) or (..., S, A)
        Row-stochastic float64 matrix (a deterministic policy becomes one-hot).
    """
    arr = np.asarray(policy)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise ValueError(f"{name}: expected a numeric array, got dtype {arr.dtype}")
    if arr.dtype.kind == "c":
        raise TypeError(f"{name}: expected real probabilities or integer actions, got complex dtype "
                        f"{arr.dtype} (the imaginary part would be lost)")
    if np.issubdtype(arr.dtype, np.integer):
        if arr.ndim < 1 or arr.shape[-1] != n_states or (arr.ndim > 1 and not batch):
            raise ValueError(f"{name}: a deterministic policy must have shape (S,) = ({n_states},), "
                             f"got {arr.shape}")
        if (arr < 0).any() or (arr >= n_actions).any():
            raise ValueError(f"{name}: actions must lie in [0, {n_actions - 1}], found "
                             f"{arr.min()}..{arr.max()}")
        return np.eye(n_actions)[arr]
    arr = arr.astype(np.float64)
    if arr.ndim < 2 or arr.shape[-2:] != (n_states, n_actions) or (arr.ndim > 2 and not batch):
        raise ValueError(f"{name}: expected shape (S, A) = ({n_states}, {n_actions}) (or integer "
                         f"actions of shape (S,)), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or infinite values")
    if (arr < -atol).any():
        raise ValueError(f"{name}: probabilities must be non-negative, found {arr.min():g}")
    dev = np.abs(arr.sum(axis=-1) - 1.0)
    if (dev > atol).any():
        idx = np.unravel_index(np.argmax(dev), dev.shape)
        raise ValueError(f"{name}: rows must sum to one; worst state {tuple(int(i) for i in idx)} "
                         f"sums to {arr.sum(axis=-1)[idx]:.12g}")
    return arr


def check_distribution(distribution: Any, n_states: int, name: str = "distribution") -> np.ndarray:
    """Validate a distribution over the S states; return it as float64 of shape (S,).

    Parameters
    ----------
    distribution : array_like of shape (S,)
        Non-negative entries summing to one (within 1e-8).
    n_states : int
        S.
    name : str
        Argument name used in error messages.

    Returns
    -------
    ndarray of shape (S,)
    """
    arr = _real_float_array(distribution, name)
    if arr.shape != (n_states,):
        raise ValueError(f"{name}: expected a distribution of shape (S,) = ({n_states},), got "
                         f"shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise ValueError(f"{name}: expected finite probabilities, got {arr[bad]} at state {bad}"
                         f" ({int((~np.isfinite(arr)).sum())} non-finite entries)")
    if (arr < 0).any():
        bad = int(np.argmin(arr))
        raise ValueError(f"{name}: expected non-negative probabilities, got {arr[bad]:g} at state {bad}")
    if abs(arr.sum() - 1.0) > ROW_ATOL:
        raise ValueError(f"{name}: probabilities must sum to one, got {arr.sum():.12g}")
    return arr


def check_mdp(mdp: Any) -> None:
    """Re-validate a :class:`~corrpriors.mdp.TabularMDP` (stochastic rows, finite rewards, shapes).

    Raises
    ------
    ValueError
        If any ingredient is invalid.
    """
    from ._sparse import SparseTransitions

    T = mdp.transitions
    P = SparseTransitions(T.matrix) if isinstance(T, SparseTransitions) else check_transitions(T)
    check_rewards(mdp.rewards, P.shape[0], P.shape[1])
    check_discount(mdp.discount)
    if mdp.coordinates is not None:
        C = np.asarray(mdp.coordinates)
        if C.ndim != 2 or C.shape[0] != P.shape[0]:
            raise ValueError(f"coordinates: expected shape (S, D) with S={P.shape[0]}, got {C.shape}")
    if mdp.initial_distribution is not None:
        check_distribution(mdp.initial_distribution, P.shape[0], "initial_distribution")


__all__ = ["check_transitions", "check_rewards", "check_discount", "check_policy",
           "check_distribution", "check_mdp", "row_divisors", "stochastic_rows", "ROW_ATOL", "RESCALE_ATOL"]
