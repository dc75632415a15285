r"""Planning in tabular MDPs: value / policy iteration, exact evaluation, goal planning.

All planners are vectorised and accept a *batch* of transition tensors of shape
(M, S, A, S) (e.g. M posterior samples of the dynamics) in place of the MDP's own
(S, A, S) tensor; results then carry the same leading batch axis.

Sparse tables work everywhere a dense one does: an MDP built with a
:class:`~corrpriors.mdp.SparseTransitions`, or ``transitions=`` given as a
SparseTransitions, a scipy sparse array of shape (S·A, S) (row ``s * A + a``) or a list of M
of them (a batch). Backups are sparse mat-vecs; policy evaluation solves
:math:`(I - \gamma P_\pi) V = r_\pi` with sparse LU for small problems and an iterative
solver with a certified error bound above :data:`~corrpriors.mdp._sparse_solve.DIRECT_MAX_STATES`
states (``solver=`` and ``tol=`` choose, see :func:`policy_evaluation`); no dense S x S
matrix is formed. On small problems dense and sparse planning agree to round-off.

Any other table that implements the :class:`TransitionOperator` protocol (expected next-state
values and policy operators, e.g. a belief's posterior mean or draw that is a sparse part plus
background profiles, :class:`~corrpriors.applications.BackgroundTransitions`) is accepted the
same way, alone or in a list, and planned by the same sparse code; without an MDP object,
:func:`policy_iteration_operator` plans it. Transition rewards :math:`r(s, a, s')` under such a
table also need its ``entries(rows, cols)``.

Conventions
-----------
- Bellman backup: :math:`Q(s, a) = R(s, a) + \gamma \sum_{s'} P(s' \mid s, a) V(s')`,
  with state rewards :math:`R(s)` broadcast over actions and transition rewards
  :math:`r(s, a, s')` averaged under the dynamics being planned with (a sampled model gives
  its own :math:`R(s, a)`).
- Terminal states (``mdp.terminal``) are absorbing with no reward: :math:`V(s) = 0` and
  :math:`Q(s, a) = 0` there, whatever the dynamics say about their rows.
- Greedy policies are returned as (S, A) stochastic matrices. By default ties
  (Q-values within ``atol`` of the state's maximum) share the probability evenly;
  ``ties="first"`` puts all mass on the lowest tied action index.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .._memory import check_memory
from .._threads import single_blas_thread
from .._validation import as_real_array, check_int, check_real
from ..exceptions import ConvergenceWarning
from ._sparse import SparseTransitions
from ._sparse_solve import certified, check_solver, solve_policy_values
from .checks import check_discount, check_policy, check_transitions
from .tabular import TabularMDP


@runtime_checkable
class TransitionOperator(Protocol):
    r"""What the planners need of a transition table :math:`P(s' \mid s, a)` that is not dense.

    :class:`~corrpriors.mdp.SparseTransitions` implements it, and so can tables that exist
    only as an operator (e.g. a sparse part plus background profiles).

    Attributes
    ----------
    n_states, n_actions : int
        S and A.
    """

    @property
    def n_states(self) -> int:
        """S."""

    @property
    def n_actions(self) -> int:
        """A."""

    def expect(self, values: Any) -> np.ndarray:
        r""":math:`\sum_{s'} P(s' \mid s, a) V(s')` for values of shape (S,): shape (S, A)."""

    def policy_matrix(self, policy: np.ndarray, keep: np.ndarray | None = None) -> Any:
        r""":math:`P_\pi` of a policy (S, A), rows scaled by ``keep`` (S,): a scipy sparse
        array or a :class:`scipy.sparse.linalg.LinearOperator` of shape (S, S).
        """


@dataclass(frozen=True)
class PlanningResult:
    """Output of an infinite-horizon planner.

    Attributes
    ----------
    values : ndarray of shape (..., S)
        Optimal state values :math:`V^*`.
    q_values : ndarray of shape (..., S, A)
        Optimal action values :math:`Q^*`.
    policy : ndarray of shape (..., S, A)
        Greedy policy w.r.t. ``q_values`` (ties split evenly).
    n_iter : int
        Iterations used (sweeps for value iteration, improvements for policy iteration).
    converged : bool
        Whether the stopping criterion was met before ``max_iter`` (policy iteration on a sparse
        table: and the last policy evaluation met its accuracy target ``tol``; an iterative
        evaluation that could not warns with a :class:`~corrpriors.exceptions.ConvergenceWarning`).
    """

    values: np.ndarray
    q_values: np.ndarray
    policy: np.ndarray
    n_iter: int
    converged: bool


@dataclass(frozen=True)
class FiniteHorizonResult:
    """Output of :func:`finite_horizon`.

    Attributes
    ----------
    values : ndarray of shape (H + 1, ..., S)
        ``values[t]`` is the optimal value with ``H - t`` steps to go (``values[H]`` are the
        terminal values).
    q_values : ndarray of shape (H, ..., S, A)
        Optimal action values at step ``t``.
    policy : ndarray of shape (H, ..., S, A)
        Greedy (non-stationary) policy at step ``t``.
    """

    values: np.ndarray
    q_values: np.ndarray
    policy: np.ndarray


# ----------------------------------------------------------------------------- internals
def _model(mdp: TabularMDP, transitions: Any,
           rewards: Any = None) -> tuple[Any, np.ndarray, float, Any]:
    """Dynamics (dense, sparse or a list of sparse), expected rewards (zero at terminal states), discount, mask.

    The mask ``keep`` (None without terminal states) zeroes the future of terminal states.
    ``rewards`` (..., S, A) replaces the MDP's expected rewards (e.g. sampled ones).
    """
    if not isinstance(mdp, TabularMDP):
        raise TypeError(f"mdp: expected a TabularMDP, got {type(mdp).__name__}")
    if transitions is None:
        P = mdp.transitions
    else:
        P = check_transitions(transitions, "transitions", batch=True, allow_sparse=True)
        shape = _shape(P[0] if isinstance(P, list) else P)
        if tuple(shape[-3:]) != mdp.transitions.shape:
            raise ValueError(f"transitions: expected shape (..., S, A, S) = (..., "
                             f"{mdp.n_states}, {mdp.n_actions}, {mdp.n_states}), got {shape}")
    if rewards is None:
        R = mdp.expected_rewards(None if transitions is None else P)
    else:
        R = as_real_array(rewards, "rewards").astype(np.float64)
        if R.ndim < 2 or R.shape[-2:] != (mdp.n_states, mdp.n_actions) or \
                not np.all(np.isfinite(R)):
            raise ValueError(f"rewards: expected finite values of shape (..., S, A) = (..., "
                             f"{mdp.n_states}, {mdp.n_actions}), got shape {R.shape}")
    keep = None
    if mdp.terminal is not None and mdp.terminal.any():
        keep = (~mdp.terminal).astype(np.float64)
        R = R * keep[:, None]
    return P, R, mdp.discount, keep


def _shape(P: Any) -> tuple[int, ...]:
    """Shape (..., S, A, S) of a dense table, (S, A, S) of any other (a TransitionOperator)."""
    if isinstance(P, np.ndarray):
        return P.shape
    return (int(P.n_states), int(P.n_actions), int(P.n_states))


def _lead(P: Any) -> tuple[int, ...]:
    """Batch axes of checked dynamics: (M,) for a list of tables, those of a dense array."""
    return (len(P),) if isinstance(P, list) else _shape(P)[:-3]


def _pick(x: Any, m: int, base_ndim: int) -> Any:
    """Model ``m``'s slice of ``x`` if it carries a leading batch axis, else ``x``."""
    return x if x is None or np.ndim(x) <= base_ndim else x[m]


def _expect(P: Any, V: np.ndarray) -> np.ndarray:
    """E[V(s') | s, a]; P (S, A, S), (..., S, A, S) or sparse, V (..., S) -> (..., S, A)."""
    if isinstance(P, SparseTransitions) or (not isinstance(P, np.ndarray) and V.ndim == 1):
        return P.expect(V)
    if not isinstance(P, np.ndarray):   # another TransitionOperator: (S,) -> (S, A) only
        out = np.stack([P.expect(v) for v in V.reshape(-1, V.shape[-1])])
        return out.reshape(V.shape[:-1] + out.shape[-2:])
    S, A = P.shape[-3], P.shape[-2]
    if P.ndim == 3:
        flat = V.reshape(-1, S)
        out = flat @ P.reshape(S * A, S).T
        return out.reshape(V.shape[:-1] + (S, A))
    lead = np.broadcast_shapes(P.shape[:-3], V.shape[:-1])
    out = np.matmul(P.reshape(P.shape[:-3] + (S * A, S)), V[..., :, None])
    return out.reshape(lead + (S, A))


def _backup(P, R, gamma, V, keep=None):
    future = _expect(P, V)
    if keep is not None:
        future = future * keep[..., None]
    return R + gamma * future


def _evaluate_sparse(P: TransitionOperator, R: np.ndarray, gamma: float, pi: np.ndarray,
                     keep: Any, solver: str, tol: float, x0: Any = None) -> tuple[np.ndarray, float, bool]:
    """Values of policies ``pi`` (..., S, A) (or integer actions (..., S)) on one sparse model
    (any :class:`TransitionOperator`).

    ``R`` (..., S, A), ``keep`` (S,) or (..., S) and ``x0`` (..., S) broadcast against the batch
    axes of ``pi``; returns the values (..., S), the largest certified error bound and whether
    every solve met its target (:func:`~corrpriors.mdp._sparse_solve.certified`).
    """
    S, A = P.n_states, P.n_actions
    det = np.issubdtype(pi.dtype, np.integer)
    lead = np.broadcast_shapes(pi.shape[:-1] if det else pi.shape[:-2], R.shape[:-2],
                               () if keep is None else np.shape(keep)[:-1])
    pib = np.broadcast_to(pi, lead + pi.shape[-1:] if det else lead + (S, A))
    Rb = np.broadcast_to(R, lead + (S, A))
    kb = None if keep is None else np.broadcast_to(keep, lead + (S,))
    x0b = None if x0 is None else np.broadcast_to(x0, lead + (S,))
    V = np.empty(lead + (S,))
    worst, ok = 0.0, True
    for idx in np.ndindex(*lead):
        p = np.eye(A)[pib[idx]] if det else pib[idx]
        k = None if kb is None else kb[idx]
        r_pi = np.sum(p * Rb[idx], axis=-1)
        V[idx], err = solve_policy_values(P.policy_matrix(p, k), r_pi, gamma, solver=solver, tol=tol,
                                          x0=None if x0b is None else x0b[idx])
        worst = max(worst, err)
        ok = ok and certified(err, V[idx], tol)
    return V, worst, ok


def _evaluate_deterministic(P, R, gamma, actions, keep=None, solver="auto", tol=1e-10, x0=None):
    """Exact values of deterministic policies ``actions`` (..., S) by a batched linear solve.

    Returns the values, an error bound (0 except for iterative sparse solves) and whether the
    solves met their target.
    """
    if not isinstance(P, np.ndarray):
        return _evaluate_sparse(P, R, gamma, actions, keep, solver, tol, x0)
    S = P.shape[-1]
    lead = actions.shape[:-1]
    idx = actions[..., :, None, None]
    Pb = P if P.ndim - 3 == len(lead) else np.broadcast_to(P, lead + P.shape[-3:])
    P_pi = np.take_along_axis(Pb, idx, axis=-2)[..., 0, :]            # (..., S, S)
    Rb = np.broadcast_to(R, lead + R.shape[-2:])
    r_pi = np.take_along_axis(Rb, actions[..., None], axis=-1)[..., 0]  # (..., S)
    if keep is not None:
        P_pi = P_pi * keep[..., :, None]
    M = np.eye(S) - gamma * P_pi
    return np.linalg.solve(M, r_pi[..., None])[..., 0], 0.0, True


def _policy_iteration(P, R, gamma, actions, keep=None, max_iter=1000, solver="auto", tol=1e-10,
                      V=None):
    """Howard's policy iteration from ``actions``; ``V`` warm-starts the first (iterative)
    evaluation. Returns the values, Q-values, evaluations, whether the policy is stable and
    whether its last evaluation met the solver's target (False only after a sparse iterative
    solve warned).
    """
    n_iter, converged, accurate = 0, False, True
    Q = None
    for _ in range(max_iter):
        n_iter += 1
        V, err, accurate = _evaluate_deterministic(P, R, gamma, actions, keep, solver, tol, V)
        Q = _backup(P, R, gamma, V, keep)
        best = Q.max(axis=-1)
        current = np.take_along_axis(Q, actions[..., None], axis=-1)[..., 0]
        # switch only on a strict improvement (avoids cycling between tied actions); with an
        # iterative evaluation accurate to err, Q is accurate to gamma * err
        improve = current < best - np.maximum(1e-12 * (1.0 + np.abs(best)), 2.0 * gamma * err)
        if not improve.any():
            converged = True
            break
        actions = np.where(improve, Q.argmax(axis=-1), actions)
    return V, Q, n_iter, converged, accurate


#: Sparse policy iteration without an initial policy starts from the greedy policy of value
#: iteration run to an absolute accuracy of this fraction of max |R(s, a)|.
WARM_START_RTOL = 1e-3
#: ... or for at most this many sweeps: the warm start only picks the first policy (policy
#: iteration converges from any), and near discount one the tolerance took up to 100,000 sweeps
#: (policy iteration at 6,000 states, discount 0.99999: 34 CPU s before the cap, 4.2 s with it;
#: a 316 x 316 FrozenLake at 0.99 reaches the tolerance first, 4.1 s either way, where a cap of
#: 50 sweeps took 16 s and 272 evaluations instead of 8).
WARM_START_MAX_SWEEPS = 1000


def _warm_start(P: Any, R: np.ndarray, gamma: float, keep: Any, actions: np.ndarray) -> np.ndarray:
    """Greedy actions after cheap value-iteration sweeps (sparse tables only).

    From the immediate-reward policy, Howard's iterations spread value about one step per
    improvement (300 improvements on a 316 x 316 FrozenLake maze); value-iteration sweeps cost
    one mat-vec each instead of a linear solve, so they carry the values across the state
    space first and policy iteration only polishes. The sweeps stop at
    :data:`WARM_START_RTOL` or after :data:`WARM_START_MAX_SWEEPS`; the result is the same
    optimal policy.
    """
    models = P if isinstance(P, list) else [P]
    out = actions.copy()
    for m, p in enumerate(models):
        Rm = _pick(R, m, 2) if isinstance(P, list) else R
        tol = WARM_START_RTOL * max(float(np.max(np.abs(Rm))), 1e-300)
        _, Q, _, _ = _value_iteration(p, Rm, gamma, np.zeros(p.n_states), tol, WARM_START_MAX_SWEEPS,
                                      keep)
        if isinstance(P, list):
            out[m] = Q.argmax(axis=-1)
        else:
            out = np.broadcast_to(Q.argmax(axis=-1), actions.shape).copy()
    return out


def _value_iteration(P, R, gamma, V, tol, max_iter, keep=None):
    converged = gamma == 0.0
    n_iter = 0
    factor = gamma / (1.0 - gamma) if gamma > 0 else 0.0
    for _ in range(max_iter):
        n_iter += 1
        V_new = _backup(P, R, gamma, V, keep).max(axis=-1)
        delta = float(np.max(np.abs(V_new - V))) if V_new.size else 0.0
        V = V_new
        if factor * delta <= tol:
            converged = True
            break
    Q = _backup(P, R, gamma, V, keep)
    return Q.max(axis=-1), Q, n_iter, converged


# ----------------------------------------------------------------------------- public API
@single_blas_thread
def q_values(mdp: TabularMDP, values: Any, transitions: Any = None) -> np.ndarray:
    r"""One Bellman backup: :math:`Q(s,a) = R(s,a) + \gamma \sum_{s'} P(s'|s,a) V(s')`.

    Parameters
    ----------
    mdp : TabularMDP
        Rewards and discount (and transitions unless ``transitions`` is given).
    values : array_like of shape (S,) or (..., S)
        State values :math:`V` (taken as 0 at terminal states).
    transitions : array_like of shape (S, A, S) or (M, S, A, S), or sparse, optional
        Dynamics to use instead of ``mdp.transitions`` (a SparseTransitions, a scipy sparse
        array of shape (S·A, S), or a list of M of them).

    Returns
    -------
    ndarray of shape (..., S, A)
        Zero at terminal states.
    """
    P, R, gamma, keep = _model(mdp, transitions)
    V = as_real_array(values, "values").astype(np.float64)
    if V.ndim < 1 or V.shape[-1] != mdp.n_states:
        raise ValueError(f"values: expected shape (..., S) with S={mdp.n_states}, got {V.shape}")
    if not np.all(np.isfinite(V)):
        raise ValueError("values: contains NaN or infinite values")
    if keep is not None:
        V = V * keep            # a terminal state has no future, whatever ``values`` says
    if isinstance(P, list):
        return np.stack([_backup(p, _pick(R, m, 2), gamma, _pick(V, m, 1), keep)
                         for m, p in enumerate(P)])
    return _backup(P, R, gamma, V, keep)


@single_blas_thread
def value_iteration(mdp: TabularMDP, transitions: Any = None, *, tol: float = 1e-10,
                    max_iter: int = 100_000, initial_values: Any = None) -> PlanningResult:
    r"""Optimal values by value iteration (vectorised over a batch of models).

    Stops when :math:`\frac{\gamma}{1-\gamma}\lVert V_{k+1} - V_k\rVert_\infty \le` ``tol``,
    which bounds :math:`\lVert V_{k+1} - V^*\rVert_\infty` by ``tol``. For a batch the
    criterion uses the worst model.

    Parameters
    ----------
    mdp : TabularMDP
    transitions : array_like of shape (S, A, S) or (M, S, A, S), or sparse, optional
        Dynamics to plan with instead of ``mdp.transitions`` (e.g. M posterior samples; a
        SparseTransitions, a scipy sparse array of shape (S·A, S) or a list of M of them).
        A list is solved model by model, each to ``tol``.
    tol : float
        Sup-norm accuracy of the returned values.
    max_iter : int
        Sweep cap; hitting it issues a :class:`~corrpriors.exceptions.ConvergenceWarning`.
    initial_values : array_like of shape (S,) or (M, S), optional
        Warm start (default: zeros).

    Returns
    -------
    PlanningResult
        ``values`` (..., S), ``q_values`` (..., S, A), greedy ``policy`` (..., S, A).
    """
    tol = check_real(tol, "tol", 0.0, expected="a finite number >= 0")
    max_iter = check_int(max_iter, "max_iter", 1)
    P, R, gamma, keep = _model(mdp, transitions)
    lead = _lead(P)
    V0 = np.zeros(lead + (mdp.n_states,)) if initial_values is None else \
        _warm_values(initial_values, lead + (mdp.n_states,))
    if isinstance(P, list):
        runs = [_value_iteration(p, _pick(R, m, 2), gamma, V0[m], float(tol), int(max_iter), keep)
                for m, p in enumerate(P)]
        V, Q = np.stack([r[0] for r in runs]), np.stack([r[1] for r in runs])
        n_iter, conv = max(r[2] for r in runs), all(r[3] for r in runs)
    else:
        V, Q, n_iter, conv = _value_iteration(P, R, gamma, V0, float(tol), int(max_iter), keep)
    if not conv:
        warnings.warn(f"value_iteration: no convergence to tol={tol} in {max_iter} sweeps",
                      ConvergenceWarning, stacklevel=2)
    return PlanningResult(V, Q, greedy_policy(Q), n_iter, conv)


def _warm_values(values: Any, shape: tuple[int, ...]) -> np.ndarray:
    """``initial_values`` broadcast to ``shape`` (finite), or a ``ValueError`` naming it."""
    V0 = np.asarray(values, dtype=np.float64)
    try:
        V0 = np.broadcast_to(V0, shape)
    except ValueError:
        raise ValueError(f"initial_values: expected shape (S,) or {shape}, got {V0.shape}") from None
    if not np.all(np.isfinite(V0)):
        raise ValueError("initial_values: expected finite values")
    return V0


@single_blas_thread
def policy_iteration(mdp: TabularMDP, transitions: Any = None, *, initial_policy: Any = None,
                     max_iter: int = 1000, rewards: Any = None, solver: str = "auto",
                     tol: float = 1e-10) -> PlanningResult:
    r"""Optimal values by Howard's policy iteration with exact (linear-solve) evaluation.

    Parameters
    ----------
    mdp : TabularMDP
    transitions : array_like of shape (S, A, S) or (M, S, A, S), or sparse, optional
        Dynamics to plan with instead of ``mdp.transitions`` (a SparseTransitions, a scipy
        sparse array of shape (S·A, S) or a list of M of them).
    initial_policy : array_like of int, shape (S,) or (M, S), optional
        Starting deterministic policy (default: greedy w.r.t. the immediate reward; for sparse
        tables greedy w.r.t. a value iteration to :data:`WARM_START_RTOL` times the largest
        reward, at most :data:`WARM_START_MAX_SWEEPS` sweeps, which saves most improvement
        steps on large state spaces).
    max_iter : int
        Cap on policy improvements.
    rewards : array_like of shape (S, A) or (M, S, A), optional
        Expected rewards to plan with instead of the MDP's (e.g. M posterior draws, planned
        together with M drawn ``transitions``).
    solver, tol
        Sparse tables: how each policy is evaluated (see :func:`policy_evaluation`); the dense
        path always solves exactly.

    Returns
    -------
    PlanningResult
        Exact values of the final policy; ``n_iter`` counts evaluations.

    Notes
    -----
    An action is switched only if it improves the Q-value by more than 1e-12 (relative),
    which prevents cycling among tied actions; the loop ends after a finite number of steps.
    With an iterative sparse evaluation accurate to :math:`\epsilon` the margin is at least
    :math:`2\gamma\epsilon`, so only true improvements switch.
    """
    solver, tol = check_solver(solver, tol)
    max_iter = check_int(max_iter, "max_iter", 1)
    P, R, gamma, keep = _model(mdp, transitions, rewards)
    lead = np.broadcast_shapes(_lead(P), R.shape[:-2])
    if initial_policy is None:
        actions = np.broadcast_to(R.argmax(axis=-1), lead + (mdp.n_states,)).copy()
        if not isinstance(P, np.ndarray):   # sparse tables (or a list of them)
            actions = _warm_start(P, R, gamma, keep, actions)
    else:
        actions = np.asarray(initial_policy)
        if not np.issubdtype(actions.dtype, np.integer):
            raise ValueError("initial_policy: expected integer actions of shape (S,)")
        check_policy(actions, mdp.n_states, mdp.n_actions, "initial_policy", batch=True)
        actions = np.broadcast_to(actions, lead + (mdp.n_states,)).copy()
    if isinstance(P, list):
        runs = [_policy_iteration(p, _pick(R, m, 2), gamma, actions[m], keep, int(max_iter), solver, tol)
                for m, p in enumerate(P)]
        V, Q = np.stack([r[0] for r in runs]), np.stack([r[1] for r in runs])
        n_iter, stable, accurate = max(r[2] for r in runs), all(r[3] for r in runs), all(r[4] for r in runs)
    else:
        V, Q, n_iter, stable, accurate = _policy_iteration(P, R, gamma, actions, keep, int(max_iter),
                                                           solver, tol)
    if not stable:
        warnings.warn(f"policy_iteration: policy still changing after {max_iter} iterations",
                      ConvergenceWarning, stacklevel=2)
    return PlanningResult(V, Q, greedy_policy(Q), n_iter, stable and accurate)


@single_blas_thread
def policy_iteration_operator(transitions: TransitionOperator, rewards: Any, discount: float, *,
                              terminal: Any = None, initial_policy: Any = None,
                              initial_values: Any = None, max_iter: int = 1000,
                              solver: str = "auto", tol: float = 1e-10) -> PlanningResult:
    r""":func:`policy_iteration` on a table given as a :class:`TransitionOperator` (no MDP object).

    The same Howard iteration, tie rule and warm start as :func:`policy_iteration` on a sparse
    table (it runs the same code); a policy's values are solved iteratively with the certified
    bound of :func:`policy_evaluation` (``"direct"`` needs :math:`P_\pi` as a sparse matrix).

    Parameters
    ----------
    transitions : TransitionOperator
        Of shape (S, A, S), e.g. a :class:`~corrpriors.mdp.SparseTransitions` or a
        :class:`~corrpriors.applications.BackgroundTransitions` posterior draw.
    rewards : array_like of shape (S,) or (S, A)
        Expected rewards (state rewards are broadcast over actions).
    discount : float
        In [0, 1).
    terminal : array_like of bool, shape (S,), optional
        Absorbing states with no reward and no future.
    initial_policy : array_like of int, shape (S,), optional
        Default: greedy after value-iteration sweeps, as in :func:`policy_iteration`.
    initial_values : array_like of shape (S,), optional
        Warm start of the first evaluation.
    max_iter, solver, tol
        As for :func:`policy_iteration`.

    Returns
    -------
    PlanningResult
        ``values`` (S,), ``q_values`` (S, A), ``policy`` (S, A), ``n_iter``, ``converged``.
    """
    if not isinstance(transitions, TransitionOperator) or isinstance(transitions, np.ndarray):
        raise TypeError(f"transitions: expected a TransitionOperator (n_states, n_actions, "
                        f"expect, policy_matrix), got {type(transitions).__name__}")
    solver, tol = check_solver(solver, tol)
    max_iter = check_int(max_iter, "max_iter", 1)
    S, A = int(transitions.n_states), int(transitions.n_actions)
    R = as_real_array(rewards, "rewards").astype(np.float64)
    if R.shape == (S,):
        R = np.repeat(R[:, None], A, axis=1)
    if R.shape != (S, A) or not np.all(np.isfinite(R)):
        raise ValueError(f"rewards: expected finite values of shape (S,) or (S, A) = ({S},) or "
                         f"({S}, {A}), got shape {np.shape(rewards)}")
    gamma = check_discount(discount)
    keep = None
    if terminal is not None:
        t = np.asarray(terminal)
        if t.shape != (S,) or t.dtype != bool:
            raise ValueError(f"terminal: expected a boolean mask of shape (S,) = ({S},), got "
                             f"dtype {t.dtype}, shape {t.shape}")
        if t.any():
            keep = (~t).astype(np.float64)
            R = R * keep[:, None]
    V0 = None
    if initial_values is not None:
        V0 = np.asarray(initial_values, dtype=np.float64)
        if V0.shape != (S,) or not np.all(np.isfinite(V0)):
            raise ValueError(f"initial_values: expected finite values of shape (S,) = ({S},), "
                             f"got shape {V0.shape}")
    if initial_policy is None:
        actions = _warm_start(transitions, R, gamma, keep, R.argmax(axis=-1))
    else:
        actions = np.asarray(initial_policy)
        if not np.issubdtype(actions.dtype, np.integer):
            raise ValueError("initial_policy: expected integer actions of shape (S,)")
        check_policy(actions, S, A, "initial_policy")
        actions = actions.astype(np.int64)
    V, Q, n_iter, stable, accurate = _policy_iteration(transitions, R, gamma, actions, keep,
                                                       int(max_iter), solver, tol, V0)
    if not stable:
        warnings.warn(f"policy_iteration_operator: policy still changing after {max_iter} "
                      f"iterations", ConvergenceWarning, stacklevel=2)
    return PlanningResult(V, Q, greedy_policy(Q), n_iter, stable and accurate)


#: (S, S) float64 matrices per (policy, model) pair at the peak of :func:`policy_evaluation` on a
#: dense table (:math:`P_\pi`, :math:`I - \gamma P_\pi` and its LU factor), besides one identity;
#: measured with tracemalloc: 3.04-3.22 per pair on dense 10 x 10 and 20 x 20 grid worlds.
EVALUATION_MATRICES = 3


@single_blas_thread
def policy_evaluation(mdp: TabularMDP, policy: Any, transitions: Any = None, *,
                      solver: str = "auto", tol: float = 1e-10) -> np.ndarray:
    r"""Exact values of a (stochastic) policy: solve :math:`(I - \gamma P_\pi) V = r_\pi`.

    Parameters
    ----------
    mdp : TabularMDP
    policy : array_like of shape (S, A) or (..., S, A), or integer actions (S,) / (..., S)
        Row-stochastic action distributions or deterministic actions.
    transitions : array_like of shape (S, A, S) or (M, S, A, S), or sparse, optional
        Dynamics to use instead of ``mdp.transitions`` (a SparseTransitions, a scipy sparse
        array of shape (S·A, S) or a list of M of them).
    solver : {"auto", "direct", "iterative"}
        Sparse tables only (a dense table is always solved by dense LU): ``"direct"`` -- sparse
        LU, exact to round-off; ``"iterative"`` -- BiCGSTAB with a Richardson fallback until
        the residual certifies :math:`\lVert V - V^\pi\rVert_\infty \le`
        ``tol`` :math:`\cdot \max(1, \lVert V\rVert_\infty)`; ``"auto"`` -- direct up to
        :data:`~corrpriors.mdp._sparse_solve.DIRECT_MAX_STATES` states, iterative above, and
        direct again where the iterative solve would need more than
        :data:`~corrpriors.mdp._sparse_solve.AUTO_RICHARDSON_MAX` Richardson steps (discounts
        near one) and the sparse LU's estimated memory fits. An iterative solve that cannot
        reach ``tol`` warns with a :class:`~corrpriors.exceptions.ConvergenceWarning` naming why.
    tol : float
        Relative accuracy of the iterative solver (see ``solver``).

    Returns
    -------
    ndarray of shape (..., S)
        :math:`V^\pi`, with the batch axes of ``policy`` and ``transitions`` broadcast.

    Raises
    ------
    corrpriors._memory.MemoryEstimateError
        A ``ValueError`` naming ``policy``: on a dense table, the (S, S) systems of the batch
        (:data:`EVALUATION_MATRICES` per policy and model) would not fit in the memory this
        process may use; raised before they are allocated.
    """
    solver, tol = check_solver(solver, tol)
    P, R, gamma, keep = _model(mdp, transitions)
    pi = check_policy(policy, mdp.n_states, mdp.n_actions, "policy", batch=True)
    if isinstance(P, list):
        lead = np.broadcast_shapes((len(P),), pi.shape[:-2])
        pib = np.broadcast_to(pi, lead + pi.shape[-2:])
        return np.stack([_evaluate_sparse(p, _pick(R, m, 2), gamma, pib[m], keep, solver, tol)[0]
                         for m, p in enumerate(P)])
    if not isinstance(P, np.ndarray):   # SparseTransitions or another TransitionOperator
        return _evaluate_sparse(P, R, gamma, pi, keep, solver, tol)[0]
    n_pairs = int(np.prod(np.broadcast_shapes(pi.shape[:-2], P.shape[:-3])))
    S = mdp.n_states
    check_memory(8.0 * S * S * (EVALUATION_MATRICES * n_pairs + 1),
                 f"policy_evaluation: {n_pairs:,} dense (S, S) systems of {S:,} states",
                 "policy: evaluate fewer policies (or models) at a time, or give the table as a "
                 "SparseTransitions (no S x S matrix)")
    P_pi = np.einsum("...sa,...sat->...st", pi, P)
    if keep is not None:
        P_pi = P_pi * keep[:, None]
    r_pi = np.sum(pi * R, axis=-1)
    r_pi = np.broadcast_to(r_pi, P_pi.shape[:-1])
    M = np.eye(mdp.n_states) - gamma * P_pi
    return np.linalg.solve(M, r_pi[..., None])[..., 0]


def greedy_policy(q: Any, ties: str = "split", atol: float = 1e-10) -> np.ndarray:
    """Greedy policy as a stochastic matrix.

    Parameters
    ----------
    q : array_like of shape (..., S, A)
        Action values.
    ties : {"split", "first"}
        ``"split"``: all actions within ``atol`` of the state's maximum share the mass
        evenly; ``"first"``: one-hot on the lowest-index maximiser.
    atol : float
        Absolute tie tolerance for ``"split"``.

    Returns
    -------
    ndarray of shape (..., S, A)
    """
    Q = as_real_array(q, "q").astype(np.float64)
    if Q.ndim < 2:
        raise ValueError(f"q: expected shape (..., S, A), got {Q.shape}")
    if not np.all(np.isfinite(Q)):
        raise ValueError("q: contains NaN or infinite values")
    if ties == "first":
        return np.eye(Q.shape[-1])[Q.argmax(axis=-1)]
    if ties != "split":
        raise ValueError(f"ties: expected 'split' or 'first', got {ties!r}")
    best = Q >= Q.max(axis=-1, keepdims=True) - atol
    return best / best.sum(axis=-1, keepdims=True)


def normalize_q(q: Any) -> np.ndarray:
    r"""Rescale Q-values per state to [0, 1] (the subgoal model of Šošić et al., 2018).

    :math:`\tilde Q(s, a) = (Q(s, a) - \min_b Q(s, b)) / (\max_b Q(s, b) - \min_b Q(s, b))`;
    states where all actions have equal value get :math:`\tilde Q(s, \cdot) = 1`.

    Parameters
    ----------
    q : array_like of shape (..., S, A)

    Returns
    -------
    ndarray of shape (..., S, A)
    """
    Q = np.asarray(q, dtype=np.float64)
    lo = Q.min(axis=-1, keepdims=True)
    hi = Q.max(axis=-1, keepdims=True)
    span = hi - lo
    return np.divide(Q - lo, span, out=np.ones_like(Q), where=span > 0)


def _softmax(x: np.ndarray, axis: int, beta: float = 1.0) -> np.ndarray:
    """Softmax of ``beta * x`` along ``axis``, as ``exp(beta * (x - max x))``: no overflow for any
    finite ``x`` and ``beta`` (``beta * x`` alone overflows at beta = 1e308).
    """
    z = x - x.max(axis=axis, keepdims=True)
    if beta != 1.0:
        with np.errstate(over="ignore"):   # beta * (x - max) <= 0; -inf is a weight of exactly 0
            z *= beta
    np.exp(z, out=z)
    z /= z.sum(axis=axis, keepdims=True)
    return z


def boltzmann_policy(q: Any, beta: float, normalize: bool = False,
                     action_axis: int = 1) -> np.ndarray:
    r"""Softmax (Boltzmann) policy :math:`\pi(a \mid s) \propto \exp(\beta\, \tilde Q(s, a))`.

    Parameters
    ----------
    q : array_like of shape (S, A) or (S, A, G)
        Action values; (S, A, G) holds one Q-table per goal, as from :func:`goal_q_values`.
    beta : float
        Inverse temperature :math:`\beta \ge 0` (``0`` gives the uniform policy).
    normalize : bool
        If True, :math:`\tilde Q` is Q rescaled to [0, 1] per state (and goal) over the
        actions: :math:`(Q - \min_a Q) / (\max_a Q - \min_a Q)`, or 1 where all actions tie
        (see :func:`normalize_q`); otherwise :math:`\tilde Q = Q`.
    action_axis : int
        Axis holding the actions (1 for both layouts above).

    Returns
    -------
    ndarray of the shape of ``q``
        Probabilities summing to one along ``action_axis``. Computed as
        :math:`\exp(\beta (\tilde Q - \max_a \tilde Q))`, normalised: exact for any finite
        ``q`` and ``beta`` (a huge ``beta`` gives the greedy policy, ties split evenly).
    """
    b = float(beta)
    if not np.isfinite(b) or b < 0:
        raise ValueError(f"beta: expected a finite non-negative number, got {beta!r}")
    Q = as_real_array(q, "q").astype(np.float64)
    if Q.ndim < 2:
        raise ValueError(f"q: expected shape (S, A) or (S, A, G), got {Q.shape}")
    if not np.all(np.isfinite(Q)):
        raise ValueError("q: contains NaN or infinite values")
    if normalize:
        Q = np.moveaxis(normalize_q(np.moveaxis(Q, action_axis, -1)), -1, action_axis)
    if b == 0.0:
        Q = np.zeros_like(Q)
    return _softmax(Q, axis=action_axis, beta=b)


#: (S, A) float64 tables per goal alive at the peak of :func:`goal_q_values` (measured with
#: tracemalloc: 6.3 on sparse 20 x 20 and 30 x 30 grid worlds, 4 actions).
GOAL_TABLES = 7
#: (S, S) float64 matrices per goal at the peak of :func:`goal_q_values` on a dense table (the
#: policies' transition matrices, :math:`I - \gamma P_\pi` and its LU factor; measured: 3.1-3.2
#: per G S^2 with the tables on dense 10 x 10 and 14 x 14 grid worlds).
GOAL_DENSE_MATRICES = 3


@single_blas_thread
def goal_q_values(mdp: TabularMDP, goals: Any = None, *, terminal: bool = False,
                  transitions: Any = None, warm_start_sweeps: int = 50,
                  max_iter: int = 1000) -> np.ndarray:
    r"""Optimal Q-values for every goal state at once.

    For goal :math:`g` the reward is :math:`R_g(s) = \mathbb 1[s = g]` (the MDP's own
    rewards are ignored); the dynamics and discount are the MDP's.

    - ``terminal=False`` (default, as in the public companion code of the paper): the goal is
      an ordinary state; the agent keeps collecting 1 each time it is in :math:`g`.
    - ``terminal=True``: the episode ends once :math:`g` is reached; reward 1 is paid on
      leaving :math:`g` and nothing afterwards (:math:`V_g(g) = 1`).

    All goals are solved together: a few batched value-iteration sweeps (one matrix product
    (S·A, S) @ (S, G) per sweep) give a warm-start policy for batched policy iteration with
    exact linear-solve evaluation, so the result is exact (to round-off).

    Parameters
    ----------
    mdp : TabularMDP
    goals : array_like of int, shape (G,), optional
        Goal states (default: all S states, G = S).
    terminal : bool
        Goal handling, see above.
    transitions : array_like of shape (S, A, S) or sparse, optional
        Dynamics instead of ``mdp.transitions`` (a SparseTransitions or a scipy sparse array of
        shape (S·A, S)).
    warm_start_sweeps : int
        Value-iteration sweeps before policy iteration.
    max_iter : int
        Cap on policy-iteration steps.

    Returns
    -------
    ndarray of shape (S, A, G)
        ``Q[s, a, g]``.

    Raises
    ------
    corrpriors._memory.MemoryEstimateError
        A ``ValueError`` naming ``goals``: the G (S, A) tables (and, for a dense table, the G
        (S, S) policy matrices of the exact evaluation) would not fit in the memory this
        process may use (:data:`GOAL_TABLES`, :data:`GOAL_DENSE_MATRICES`); raised before
        they are allocated. All S goals of 100,000 states need about 2 TiB.
    """
    P, _, gamma, mdp_keep = _model(mdp, transitions)
    if isinstance(P, list) or len(_shape(P)) != 3:
        shape = f"a batch of {len(P)}" if isinstance(P, list) else _shape(P)
        raise ValueError(f"transitions: expected shape (S, A, S) for goal planning, got {shape}")
    S, A = mdp.n_states, mdp.n_actions
    g = np.arange(S) if goals is None else np.asarray(goals)
    if g.ndim != 1 or not np.issubdtype(g.dtype, np.integer) or (g < 0).any() or (g >= S).any():
        raise ValueError(f"goals: expected a 1-D array of state indices in [0, {S - 1}], got {goals!r}")
    G = g.size
    dense = isinstance(P, np.ndarray)
    check_memory(8.0 * G * S * (GOAL_TABLES * A + (GOAL_DENSE_MATRICES * S if dense else 0)),
                 f"goal_q_values: {G:,} goals x {S:,} states x {A:,} actions"
                 + (" (a dense table: G (S, S) policy matrices)" if dense else ""),
                 "goals: plan for fewer goal states at a time (the default is all S)")
    R = np.zeros((G, S, A))
    R[np.arange(G), g, :] = 1.0
    keep = None
    if terminal:
        keep = np.ones((G, S))
        keep[np.arange(G), g] = 0.0
    if mdp_keep is not None:   # the MDP's own terminal states end the episode too
        keep = mdp_keep * (np.ones((G, S)) if keep is None else keep)
        R = R * mdp_keep[:, None]
    V = np.zeros((G, S))
    _, Q, _, _ = _value_iteration(P, R, gamma, V, tol=0.0, max_iter=max(int(warm_start_sweeps), 1),
                                  keep=keep)
    _, Q, _, conv, _ = _policy_iteration(P, R, gamma, Q.argmax(axis=-1), keep=keep,
                                      max_iter=int(max_iter))
    if not conv:
        warnings.warn("goal_q_values: policy iteration did not converge", ConvergenceWarning,
                      stacklevel=2)
    return np.moveaxis(Q, 0, -1)


#: (..., S, A) float64 tables per step at the peak of :func:`finite_horizon` (the Q-values, the
#: greedy policy and its tie mask; measured with tracemalloc: 2.7-2.8 per step with the (S,)
#: values on 10 x 10 to 30 x 30 grid worlds over 200 steps).
HORIZON_TABLES = 3


@single_blas_thread
def finite_horizon(mdp: TabularMDP, horizon: int, *, discount: float | None = None,
                   terminal_values: Any = None, transitions: Any = None) -> FiniteHorizonResult:
    r"""Backward induction over ``horizon`` steps.

    :math:`V_H = V_{\text{term}}`, :math:`Q_t = R + \gamma P V_{t+1}`, :math:`V_t = \max_a Q_t`.

    Parameters
    ----------
    mdp : TabularMDP
    horizon : int
        Number of decisions H >= 1.
    discount : float, optional
        Discount in [0, 1] (default: ``mdp.discount``; 1 is allowed here).
    terminal_values : array_like of shape (S,), optional
        :math:`V_H` (default zeros).
    transitions : array_like of shape (S, A, S) or (M, S, A, S), or sparse, optional
        Dynamics instead of ``mdp.transitions`` (a SparseTransitions, a scipy sparse array of
        shape (S·A, S) or a list of M of them).

    Returns
    -------
    FiniteHorizonResult

    Raises
    ------
    corrpriors._memory.MemoryEstimateError
        A ``ValueError`` naming ``horizon``: the H (..., S, A) Q-values and greedy policies
        (:data:`HORIZON_TABLES` per step) would not fit in the memory this process may use;
        raised before they are allocated.
    """
    P, R, gamma, keep = _model(mdp, transitions)
    if discount is not None:
        gamma = check_discount(discount, "discount", allow_one=True)
    H = check_int(horizon, "horizon", 1)
    lead = _lead(P)
    S = mdp.n_states
    n_models = int(np.prod(lead))
    check_memory(8.0 * H * n_models * S * (HORIZON_TABLES * mdp.n_actions + 1),
                 f"finite_horizon: {H:,} steps x {n_models:,} model(s) x {S:,} states x "
                 f"{mdp.n_actions:,} actions (values, Q-values and greedy policies of every step)",
                 "horizon: plan over fewer steps, or use value_iteration for a stationary policy")
    VT = np.zeros(S) if terminal_values is None else \
        as_real_array(terminal_values, "terminal_values").astype(np.float64)
    try:
        np.broadcast_to(VT, lead + (S,))
    except ValueError:
        batch = f" or the batch's {lead + (S,)}" if lead else ""
        raise ValueError(f"terminal_values: expected shape (S,) = ({S},){batch}, got {VT.shape}") from None
    if not np.all(np.isfinite(VT)):
        raise ValueError("terminal_values: contains NaN or infinite values")
    V = np.empty((H + 1,) + lead + (S,))
    Q = np.empty((H,) + lead + (S, mdp.n_actions))
    V[H] = VT
    for t in range(H - 1, -1, -1):
        if isinstance(P, list):
            Q[t] = np.stack([_backup(p, _pick(R, m, 2), gamma, V[t + 1, m], keep) for m, p in enumerate(P)])
        else:
            Q[t] = _backup(P, R, gamma, V[t + 1], keep)
        V[t] = Q[t].max(axis=-1)
    return FiniteHorizonResult(V, Q, greedy_policy(Q))


__all__ = ["PlanningResult", "FiniteHorizonResult", "TransitionOperator", "q_values",
           "value_iteration", "policy_iteration", "policy_iteration_operator", "policy_evaluation",
           "greedy_policy", "normalize_q",
           "boltzmann_policy", "goal_q_values", "finite_horizon"]
