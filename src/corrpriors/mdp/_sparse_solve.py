r"""Policy evaluation on sparse tables: :math:`(I - \gamma P_\pi) V = r_\pi` without dense S x S matrices.

Two solvers:

- ``"direct"``: sparse LU (SuperLU through :func:`scipy.sparse.linalg.spsolve`); exact to
  round-off; its fill-in grows with the table's bandwidth, so it is the default for small
  problems only.
- ``"iterative"``: BiCGSTAB from a warm start, then Richardson steps
  :math:`V \leftarrow V + (r_\pi - (I - \gamma P_\pi) V)` (= iterative policy evaluation)
  until the residual certifies the accuracy. Because :math:`P_\pi` is (sub-)stochastic,
  :math:`\lVert (I - \gamma P_\pi)^{-1} \rVert_\infty \le 1 / (1 - \gamma)`, hence

  .. math:: \lVert V - V^\pi \rVert_\infty \le
            \frac{\lVert r_\pi - (I - \gamma P_\pi) V \rVert_\infty}{1 - \gamma},

  and the solver stops once this bound is at most ``tol * max(1, ||V||_inf)``. Each
  Richardson step shrinks the residual by a factor :math:`\gamma` at least, so it needs about
  :math:`\log(\text{target} / \text{residual}) / \log \gamma` steps: millions near
  :math:`\gamma = 1` (3.5 million at :math:`\gamma = 0.99999`). It takes at most
  :data:`RICHARDSON_MAX_ITER`.

``"auto"`` uses the direct solve up to :data:`DIRECT_MAX_STATES` states and the iterative one
above, except that when BiCGSTAB leaves a residual that Richardson would need more than
:data:`AUTO_RICHARDSON_MAX` steps to certify (discounts near one), it switches to the sparse LU
if its estimated memory fits (:data:`LU_FILL_GUESS`): at 6,000 states and
:math:`\gamma = 0.99999`, 85-140 s and an error of 0.14 became 0.2 s and exact. A solve that
ends above its target (the step cap, or the round-off floor) warns with
:class:`~corrpriors.exceptions.ConvergenceWarning` naming the cause, and its error bound
exceeds ``tol`` (:func:`certified` is then False; the planners report ``converged=False``).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from .._memory import MemoryEstimateError, check_memory
from .._validation import check_real
from ..exceptions import ConvergenceWarning

#: ``solver="auto"`` uses the direct sparse LU up to this many states and the iterative solver above.
DIRECT_MAX_STATES = 5_000

#: BiCGSTAB iterations before the Richardson fallback takes over.
KRYLOV_MAX_ITER = 500

#: Most Richardson steps of one iterative solve.
RICHARDSON_MAX_ITER = 1_000_000

#: ``solver="auto"``: Richardson steps (estimated from the residual BiCGSTAB leaves and the
#: discount) above which the sparse LU is used instead, memory permitting.
AUTO_RICHARDSON_MAX = 10_000

#: Memory estimate of the sparse LU as a multiple of the non-zeros of :math:`I - \gamma P_\pi`
#: (16 bytes per stored factor entry), for the ``"auto"`` switch to it (a guess: SuperLU's fill-in
#: is not known before factorising; banded tables need far less, large 2-D grids about this).
LU_FILL_GUESS = 50

SOLVERS = ("auto", "direct", "iterative")


def check_solver(solver: str, tol: float) -> tuple[str, float]:
    """Validate the ``solver`` and ``tol`` arguments of the sparse policy evaluation."""
    if solver not in SOLVERS:
        raise ValueError(f"solver: expected one of {', '.join(SOLVERS)}, got {solver!r}")
    return solver, check_real(tol, "tol", 0.0, closed="neither", expected="a positive number")


def _bicgstab(M: sp.csr_array, b: np.ndarray, x0: np.ndarray, atol: float) -> np.ndarray:
    try:
        x, _ = spla.bicgstab(M, b, x0=x0, rtol=0.0, atol=atol, maxiter=KRYLOV_MAX_ITER)
    except TypeError:  # pragma: no cover - scipy < 1.12 calls rtol "tol"
        x, _ = spla.bicgstab(M, b, x0=x0, tol=0.0, atol=atol, maxiter=KRYLOV_MAX_ITER)
    return np.asarray(x, dtype=np.float64)


def certified(bound: float, values: np.ndarray, tol: float) -> bool:
    """Whether an error bound of :func:`solve_policy_values` meets its target ``tol * max(1, ||V||_inf)``."""
    scale = max(1.0, float(np.max(np.abs(values)))) if values.size else 1.0
    return bool(bound <= tol * scale * (1.0 + 1e-9))


def _direct(M: Any, r: np.ndarray) -> np.ndarray:
    return np.asarray(spla.spsolve(sp.csc_array(M), r), dtype=np.float64)


def _lu_fits(M: sp.csr_array) -> bool:
    """Whether the sparse LU of ``M`` fits the memory budget by the :data:`LU_FILL_GUESS` estimate."""
    try:
        check_memory(16.0 * LU_FILL_GUESS * M.nnz, "the sparse LU", "")
    except MemoryEstimateError:
        return False
    return True


def solve_policy_values(P_pi: sp.csr_array | spla.LinearOperator, r: np.ndarray, gamma: float, *, solver: str = "auto",
                        tol: float = 1e-10, x0: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    r"""Solve :math:`(I - \gamma P_\pi) V = r_\pi` for one policy.

    Parameters
    ----------
    P_pi : scipy.sparse.csr_array or scipy.sparse.linalg.LinearOperator of shape (S, S)
        Row sums at most one (terminal rows empty). An operator (a table known only through
        its products) is solved iteratively; ``solver="direct"`` then raises.
    r : ndarray of shape (S,)
        :math:`r_\pi`.
    gamma : float
        Discount in [0, 1).
    solver : {"auto", "direct", "iterative"}
        See the module docstring.
    tol : float
        Iterative solver: the certified bound on :math:`\lVert V - V^\pi\rVert_\infty`
        relative to :math:`\max(1, \lVert V\rVert_\infty)`.
    x0 : ndarray of shape (S,), optional
        Warm start of the iterative solver (e.g. the previous policy's values).

    Returns
    -------
    V : ndarray of shape (S,)
    error_bound : float
        0 for the direct solve (round-off only), else the certified sup-norm error bound
        (above ``tol * max(1, ||V||_inf)`` only after a :class:`ConvergenceWarning`).
    """
    S = r.shape[0]
    if gamma == 0.0:
        return r.copy(), 0.0
    if not sp.issparse(P_pi):
        if solver == "direct":
            raise ValueError("solver: 'direct' needs P_pi as a sparse matrix, got an operator")
        op = spla.aslinearoperator(P_pi)
        M: Any = spla.LinearOperator((S, S), matvec=lambda v: v - gamma * (op @ v),
                                     dtype=np.float64)
    elif solver == "direct" or (solver == "auto" and S <= DIRECT_MAX_STATES):
        M = sp.csr_array(sp.eye_array(S, format="csr") - gamma * P_pi)
        return _direct(M, r), 0.0
    else:
        M = sp.csr_array(sp.eye_array(S, format="csr") - gamma * P_pi)
    x = r.copy() if x0 is None else np.array(x0, dtype=np.float64)

    def target(v: np.ndarray) -> float:
        return (1.0 - gamma) * tol * max(1.0, float(np.max(np.abs(v))))

    res = r - M @ x
    err = float(np.max(np.abs(res)))
    if err > target(x):
        y = _bicgstab(M, r, x, atol=target(x))
        if np.all(np.isfinite(y)):
            res_y = r - M @ y
            if float(np.max(np.abs(res_y))) < err:
                x, res, err = y, res_y, float(np.max(np.abs(res_y)))
    need = 10 + int(math.ceil(math.log(1e-300 + target(x) / max(err, 1e-300)) / math.log(gamma))) \
        if err > target(x) else 0
    if solver == "auto" and need > AUTO_RICHARDSON_MAX and sp.issparse(M) and _lu_fits(M):
        try:
            y = _direct(M, r)
        except MemoryError:           # SuperLU ran out of memory: keep iterating
            pass
        else:
            if np.all(np.isfinite(y)):
                return y, 0.0
    steps, limit = 0, min(max(need, 0), RICHARDSON_MAX_ITER)
    while steps < limit and err > target(x):   # Richardson: the residual shrinks by gamma
        steps += 1
        x = x + res
        res = r - M @ x
        err = float(np.max(np.abs(res)))
    if err > target(x):
        cause = (f"the cap of {RICHARDSON_MAX_ITER:,} Richardson steps was reached (about {need:,} "
                 f"needed at discount {gamma:g}; solver='direct' solves exactly)"
                 if need > RICHARDSON_MAX_ITER else "the round-off floor was reached")
        warnings.warn(f"policy evaluation: residual {err:.3g} above the target {target(x):.3g} after "
                      f"{steps:,} Richardson steps: {cause}; the values are accurate to "
                      f"{err / (1 - gamma):.3g}", ConvergenceWarning, stacklevel=3)
    return x, err / (1.0 - gamma)


__all__ = ["solve_policy_values", "check_solver", "certified", "DIRECT_MAX_STATES", "SOLVERS",
           "RICHARDSON_MAX_ITER", "AUTO_RICHARDSON_MAX", "LU_FILL_GUESS"]
