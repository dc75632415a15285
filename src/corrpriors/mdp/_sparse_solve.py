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
  Richardson step shrinks the residual by a factor :math:`\gamma` at least, so the fallback
  always terminates.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..exceptions import ConvergenceWarning

#: ``solver="auto"`` uses the direct sparse LU up to this many states and the iterative solver above.
DIRECT_MAX_STATES = 5_000

#: BiCGSTAB iterations before the Richardson fallback takes over.
KRYLOV_MAX_ITER = 500

SOLVERS = ("auto", "direct", "iterative")


def check_solver(solver: str, tol: float) -> tuple[str, float]:
    """Validate the ``solver`` and ``tol`` arguments of the sparse policy evaluation."""
    if solver not in SOLVERS:
        raise ValueError(f"solver: expected one of {', '.join(SOLVERS)}, got {solver!r}")
    t = float(tol)
    if not (np.isfinite(t) and t > 0):
        raise ValueError(f"tol: expected a positive number, got {tol!r}")
    return solver, t


def _bicgstab(M: sp.csr_array, b: np.ndarray, x0: np.ndarray, atol: float) -> np.ndarray:
    try:
        x, _ = spla.bicgstab(M, b, x0=x0, rtol=0.0, atol=atol, maxiter=KRYLOV_MAX_ITER)
    except TypeError:  # pragma: no cover - scipy < 1.12 calls rtol "tol"
        x, _ = spla.bicgstab(M, b, x0=x0, tol=0.0, atol=atol, maxiter=KRYLOV_MAX_ITER)
    return np.asarray(x, dtype=np.float64)


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
        0 for the direct solve (round-off only), else the certified sup-norm error bound.
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
        return np.asarray(spla.spsolve(sp.csc_array(M), r), dtype=np.float64), 0.0
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
    cap = 10 + int(math.ceil(math.log(1e-300 + target(x) / max(err, 1e-300)) / math.log(gamma))) \
        if err > target(x) else 0
    for _ in range(min(max(cap, 0), 1_000_000)):   # Richardson: the residual shrinks by gamma
        if err <= target(x):
            break
        x = x + res
        res = r - M @ x
        err = float(np.max(np.abs(res)))
    if err > target(x):
        warnings.warn(f"policy evaluation: residual {err:.3g} above the target {target(x):.3g} "
                      f"(round-off floor reached?); the values are accurate to {err / (1 - gamma):.3g}",
                      ConvergenceWarning, stacklevel=3)
    return x, err / (1.0 - gamma)


__all__ = ["solve_policy_values", "check_solver", "DIRECT_MAX_STATES", "SOLVERS"]
