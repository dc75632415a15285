"""The model-agnostic fixed-point driver (corrpriors.core.fixed_point) on toy problems.

Oracle: maximising a strictly concave quadratic f(x) = -x'Ax/2 + b'x by Gauss-Seidel coordinate
ascent (monotone, converges to A^-1 b); Anderson acceleration must reach the same point in fewer
evaluations with a non-decreasing trace.
"""

from dataclasses import dataclass

import numpy as np
import pytest

from corrpriors.core.fixed_point import FixedPointOptions, maximise


@dataclass
class Ev:
    x: np.ndarray
    objective: float


def _quadratic(n=12, seed=0, cond=50.0):
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    a = q @ np.diag(np.geomspace(1.0, cond, n)) @ q.T
    b = rng.normal(size=n)

    def evaluate(x):
        return Ev(x.copy(), float(-0.5 * x @ a @ x + b @ x))

    def update(ev):  # one Gauss-Seidel sweep: every coordinate maximised in turn
        x = ev.x.copy()
        for i in range(n):
            x[i] += (b[i] - a[i] @ x) / a[i, i]
        return x

    return a, b, evaluate, update


@pytest.mark.parametrize("acceleration", [None, "anderson"])
def test_reaches_the_maximiser_with_a_monotone_trace(acceleration):
    a, b, evaluate, update = _quadratic()
    opts = FixedPointOptions(max_iter=5000, tol=1e-15, acceleration=acceleration)
    trace = maximise(evaluate, update, np.zeros(len(b)), opts)
    assert trace.converged and trace.monotone
    np.testing.assert_allclose(trace.best.x, np.linalg.solve(a, b), atol=1e-6)
    assert np.all(np.diff(trace.objectives) >= 0.0)


def test_anderson_needs_fewer_evaluations_than_plain_ascent():
    _, b, evaluate, update = _quadratic(cond=200.0)
    x0 = np.zeros(len(b))
    plain = maximise(evaluate, update, x0, FixedPointOptions(5000, 1e-14, None))
    fast = maximise(evaluate, update, x0, FixedPointOptions(5000, 1e-14, "anderson"))
    assert fast.n_evaluations < plain.n_evaluations / 2
    assert fast.best.objective == pytest.approx(plain.best.objective, rel=1e-10)


def test_rejected_extrapolations_fall_back_to_the_plain_step():
    # An update that makes Anderson's least-squares model wrong (a non-linear, discontinuous
    # map) still gives a non-decreasing trace: rejected proposals cost evaluations only.
    _, b, evaluate, update = _quadratic(seed=3)

    def rough(ev):
        x = update(ev)
        return x + 0.3 * np.sign(np.sin(40.0 * x)) * np.abs(x - ev.x)

    trace = maximise(evaluate, rough, np.zeros(len(b)),
                     FixedPointOptions(300, 1e-14, "anderson", memory=3))
    assert np.all(np.diff(trace.objectives) >= 0.0)
    assert trace.n_evaluations > len(trace.objectives)  # some proposals were rejected


def test_advance_gives_the_plain_step_without_the_round_trip():
    _, b, evaluate, update = _quadratic()
    calls = []

    def advance(ev):
        calls.append(1)
        x = update(ev)
        return x, evaluate(x)

    opts = FixedPointOptions(50, 1e-15, None)
    a1 = maximise(evaluate, update, np.zeros(len(b)), opts)
    a2 = maximise(evaluate, update, np.zeros(len(b)), opts, advance=advance)
    assert a1.objectives == a2.objectives and len(calls) == a2.n_evaluations - 1


def test_non_finite_objective_raises():
    _, b, evaluate, update = _quadratic()

    def broken(ev):
        x = update(ev)
        x[0] = np.inf
        return x

    with pytest.raises(FloatingPointError, match="not finite"):
        maximise(evaluate, broken, np.zeros(len(b)), FixedPointOptions(50, 1e-12, None))
    with pytest.raises(FloatingPointError, match="starting point"):
        maximise(evaluate, update, np.full(len(b), np.nan), FixedPointOptions(50, 1e-12, None))


def test_a_decreasing_plain_step_is_never_reported_as_converged():
    _, b, evaluate, update = _quadratic()
    state = {"n": 0}

    def worse_once(ev):
        state["n"] += 1
        x = update(ev)
        return x * 0.5 if state["n"] == 3 else x  # step 3 lowers the objective

    trace = maximise(evaluate, worse_once, np.zeros(len(b)), FixedPointOptions(2000, 1e-12, None))
    assert not trace.monotone and not trace.converged
    assert np.any(np.diff(trace.objectives) < 0)


def test_budget_and_option_validation():
    _, b, evaluate, update = _quadratic()
    trace = maximise(evaluate, update, np.zeros(len(b)), FixedPointOptions(4, -1.0, "anderson"))
    assert trace.n_evaluations == 4 and not trace.converged
    with pytest.raises(ValueError, match="acceleration"):
        FixedPointOptions(acceleration="newton")
    with pytest.raises(ValueError, match="max_iter"):
        FixedPointOptions(max_iter=0)
    with pytest.raises(ValueError, match="tol"):
        FixedPointOptions(tol=float("nan"))
    with pytest.raises(ValueError, match="memory"):
        FixedPointOptions(memory=0)


def test_steady_small_gains_are_a_slow_climb_not_convergence():
    # x <- 100 + 0.999 (x - 100) on f(x) = -1e3 - 1e-7 (x - 100)^2: every gain (2e-6) is
    # below tol * |f| = 1e-5 from the first step, yet the rest of the climb is 1e-3 = 100 tol |f|
    # (x is 100 away from the maximiser, the gains shrink only by 0.999^2 a step)
    def evaluate(x):
        return Ev(x.copy(), float(-1e3 - 1e-7 * (x[0] - 100.0) ** 2))

    def update(ev):
        return 100.0 + 0.999 * (ev.x - 100.0)

    trace = maximise(evaluate, update, np.zeros(1), FixedPointOptions(50, 1e-8, None))
    assert not trace.converged and len(trace.objectives) == 50
    assert np.all(np.diff(trace.objectives) < 1e-8 * 1e3)   # the old rule stopped at once
    fast = maximise(evaluate, lambda ev: 100.0 + 0.1 * (ev.x - 100.0), np.zeros(1),
                    FixedPointOptions(50, 1e-8, None))
    assert fast.converged and len(fast.objectives) < 10   # shrinking gains still stop


def test_stall_advice_with_a_zero_tolerance():
    from corrpriors.core.fixed_point import stall_advice

    advice = stall_advice(-1.0 / np.arange(1.0, 30.0), 0.0, 29)
    assert advice.more is None and advice.max_iter == 290
