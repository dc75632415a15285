"""Round 20 fixes of the environment builders (task families, queueing network, DeepSea).

relabel_states with transition rewards, episode fields, walls and sparse tables; flags that
are not truth-tested; memory checks before the dense tables of the grid families; the wind
covariance factorised once per family; the queueing simulator's rates; argument checks.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from corrpriors._memory import MemoryEstimateError
from corrpriors.envs import (
    deep_sea,
    deep_sea_right_actions,
    lake_task_family,
    queueing_network,
    queueing_transitions,
    relabel_states,
    simulate_queueing,
    slippery_lake,
    smooth_wind,
    tunnel_world,
    wall_world,
    windy_gridworld,
    windy_task_family,
)
from corrpriors.envs.task_family import DAMPING_RANGE, DRIVE_RANGE, TARGET_DAMPING, TARGET_DRIVE
from corrpriors.mdp import SparseTransitionRewards, TabularMDP
from memory_checks import traced_peak


def _episode_value(P, R3, terminal, mu, discount, policy):
    """mu . V of a deterministic policy, by a linear solve: V = 0 at terminal states, else
    V(s) = sum_s' P(s'|s, a) (r(s, a, s') + discount V(s')), a = policy[s].
    """
    S = P.shape[0]
    Ps = P[np.arange(S), policy]                        # (S, S)
    rs = (Ps * R3[np.arange(S), policy]).sum(1)
    live = ~terminal
    A = np.eye(S) - discount * live[:, None] * Ps
    V = np.linalg.solve(A, np.where(live, rs, 0.0))
    return float(mu @ V)


# ---------------------------------------------------------------- M1: relabel_states
def test_relabel_moves_transition_rewards_terminal_and_initial_distribution():
    g = np.random.default_rng(4)
    S, A = 7, 3
    P = g.random((S, A, S)) ** 3
    P /= P.sum(-1, keepdims=True)
    R3 = g.normal(size=(S, A, S))
    terminal = np.zeros(S, dtype=bool)
    terminal[[2, 5]] = True
    mu = g.random(S)
    mu /= mu.sum()
    vec = g.normal(size=(A, 2))
    mdp = TabularMDP(P, R3, 0.8, terminal=terminal, initial_distribution=mu, action_vectors=vec)
    pi = g.permutation(S)
    out = relabel_states(mdp, pi)
    for s in range(S):
        for a in range(A):
            for t in range(S):
                assert out.transitions[pi[s], a, pi[t]] == P[s, a, t]
                assert out.rewards[pi[s], a, pi[t]] == R3[s, a, t]
    assert np.array_equal(out.terminal[pi], terminal)
    assert np.array_equal(out.initial_distribution[pi], mu)
    np.testing.assert_array_equal(out.action_vectors, vec)
    np.testing.assert_allclose(out.reward_matrix[pi], mdp.reward_matrix, rtol=1e-12, atol=1e-14)
    for _ in range(5):                                   # every policy keeps its expected return
        policy = g.integers(A, size=S)
        moved = np.empty_like(policy)
        moved[pi] = policy
        before = _episode_value(P, R3, terminal, mu, 0.8, policy)
        after = _episode_value(np.asarray(out.transitions), np.asarray(out.rewards), out.terminal,
                               out.initial_distribution, 0.8, moved)
        assert after == pytest.approx(before, rel=1e-12)


def test_relabel_keeps_walls_and_drops_the_grid_boundary():
    ww = wall_world()
    pi = np.random.default_rng(0).permutation(ww.n_states)
    out = relabel_states(ww, pi)        # used to fail: "shape/walls: ... 121 non-wall cells"
    assert np.array_equal(out.walls, ww.walls) and out.shape == ww.shape
    assert np.array_equal(out.cells, ww.cells)
    np.testing.assert_array_equal(out.action_vectors, ww.action_vectors)
    P, Q = np.asarray(ww.transitions), np.asarray(out.transitions)
    assert np.array_equal(Q[np.ix_(pi, np.arange(ww.n_actions), pi)], P)
    lake = slippery_lake((3, 3))
    assert lake.boundary == "stay" and relabel_states(lake, np.arange(9)[::-1].copy()).boundary is None


def test_relabel_sparse_transitions_match_the_dense_relabelling():
    sparse = tunnel_world((5, 5), sparse=True)
    dense = TabularMDP(sparse.transitions.toarray(), sparse.rewards, sparse.discount,
                       coordinates=sparse.coordinates, shape=sparse.shape)
    pi = np.random.default_rng(2).permutation(25)
    out = relabel_states(sparse, pi)    # used to raise TypeError (np.asarray of a sparse table)
    assert out.is_sparse
    np.testing.assert_array_equal(out.transitions.toarray(), np.asarray(relabel_states(dense, pi).transitions))
    np.testing.assert_array_equal(out.rewards, relabel_states(dense, pi).rewards)


def test_relabel_refuses_sparse_transition_rewards_by_name():
    S, A = 3, 1
    P = sp.csr_array(np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]))
    R = SparseTransitionRewards(S, A, [0, 1, 1, 1], [1], [2.0])
    mdp = TabularMDP(P, R, 0.9)
    with pytest.raises(ValueError, match=r"^mdp: its rewards are sparse transition rewards"):
        relabel_states(mdp, [2, 0, 1])


def test_relabelled_deep_sea_keeps_its_episode():
    ds = deep_sea(4, rng=0)
    pi = np.random.default_rng(1).permutation(ds.n_states)
    out = relabel_states(ds, pi)
    assert np.array_equal(out.terminal[pi], ds.terminal)
    assert np.array_equal(out.initial_distribution[pi], ds.initial_distribution)


# ---------------------------------------------------------------- M2: flags
@pytest.mark.parametrize("call", [
    lambda: queueing_network((2, 2), capped="no"),
    lambda: queueing_transitions((2, 2), capped="no"),
    lambda: simulate_queueing([0], [0], rng=0, buffers=(2, 2), capped="no"),
    lambda: queueing_network((2, 2), normalize_coordinates="no"),
    lambda: deep_sea(4, rng=0, randomize_actions="no"),
    lambda: deep_sea_right_actions(4, rng=0, randomize_actions="no"),
], ids=["network capped", "transitions capped", "simulate capped", "normalize_coordinates",
        "deep_sea randomize_actions", "right_actions randomize_actions"])
def test_flags_are_not_truth_tested(call):
    with pytest.raises(TypeError, match=r"^(capped|normalize_coordinates|randomize_actions): expected True or False"):
        call()


# ---------------------------------------------------------------- M3: memory
@pytest.mark.parametrize("build", [slippery_lake, windy_gridworld])
def test_huge_dense_grid_refused_before_building(build):
    with pytest.raises(MemoryEstimateError, match=r"^shape: .*\(400, 400\).*dense \(S, 4, S\) tables"):
        build((400, 400))


@pytest.mark.parametrize("family", [lake_task_family, windy_task_family])
def test_family_refused_when_its_tables_cannot_fit_together(family, monkeypatch):
    # 20 x 20: one table 5.1 MB, 10 sources + target + build: about 70 MB > 50 MiB
    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "50M")
    with pytest.raises(MemoryEstimateError, match=r"^shape: the (lake|windy) family .* fewer sources"):
        family(0.5, 10, rng=0, shape=(20, 20))


@pytest.mark.parametrize("relabel", [False, True])
@pytest.mark.parametrize("family", [lake_task_family, windy_task_family])
def test_family_estimate_bounds_the_traced_peak(family, relabel):
    n, shape = 4, (12, 12)
    S = shape[0] * shape[1]
    _, peak = traced_peak(family, 0.5, n, rng=1, shape=shape, relabel_sources=relabel)
    assert peak <= (n + 4) * 8 * 4 * S * S          # the estimate the check uses
    _, one = traced_peak(slippery_lake, shape)
    assert one <= 2 * 8 * 4 * S * S * 1.1          # two tables (small grid overhead within 10 %)


def test_windy_family_factorises_the_wind_covariance_once(monkeypatch):
    calls = []
    eigh = np.linalg.eigh

    def counting(a, *args, **kwargs):
        calls.append(a.shape)
        return eigh(a, *args, **kwargs)

    monkeypatch.setattr(np.linalg, "eigh", counting)
    windy_task_family(0.5, 5, rng=0, shape=(4, 5))
    assert calls == [(20, 20)]


def test_windy_family_winds_are_smooth_wind_draws_in_order():
    """The family's parameters equal the draws of smooth_wind and the uniforms, in the
    documented order, from one generator (bit for bit)."""
    shape, r = (4, 5), 0.3
    _, params = windy_task_family(r, 3, rng=11, shape=shape, wind_amplitude=0.7, wind_lengthscale=2.0)
    g = np.random.default_rng(11)
    w_t = smooth_wind(shape, rng=g, amplitude=0.7, lengthscale=2.0)
    for p in params[:-1]:
        w_own = smooth_wind(shape, rng=g, amplitude=0.7, lengthscale=2.0)
        assert p.heading == (1 - r) * g.uniform(-np.pi, np.pi)
        assert p.drive == r * TARGET_DRIVE + (1 - r) * g.uniform(*DRIVE_RANGE)
        assert p.damping == r * TARGET_DAMPING + (1 - r) * g.uniform(*DAMPING_RANGE)
        assert np.array_equal(p.wind, r * w_t + np.sqrt(1 - r * r) * w_own)
    assert np.array_equal(params[-1].wind, w_t)


# ---------------------------------------------------------------- M4: simulate_queueing rates
@pytest.mark.parametrize("kwargs, match", [
    (dict(service_rates=(-1.0, 2.0)), r"^service_rates: expected a finite non-negative rate"),
    (dict(arrival_rate=float("nan")), r"^arrival_rate: expected a finite non-negative rate"),
    (dict(arrival_rate=True), r"^arrival_rate: expected a finite non-negative rate"),
    (dict(service_rates=(1.0,)), r"^service_rates: expected two rates"),
    (dict(service_rates=(1.0, 1e19)), r"^arrival_rate, service_rates: expected rates at most"),
])
def test_simulate_queueing_checks_its_rates(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        simulate_queueing([0, 1], [0, 1], rng=0, **kwargs)


def test_simulate_queueing_draws_unchanged():
    """The simulator still draws q1, q2, q3 in that order from one generator."""
    s, a = np.array([0, 5, 17, 120]), np.array([0, 1, 1, 0])
    out = simulate_queueing(s, a, rng=3, capped=True)
    g = np.random.default_rng(3)
    q1, q2, q3 = g.poisson(1.0, size=4), g.poisson(3.0 * (a == 0)), g.poisson(2.0 * (a == 1))
    b1, b2 = np.divmod(s, 11)
    n1 = np.clip(b1 + q1 - q2, 0, 10)
    n2 = np.clip(b2 + np.minimum(q2, b1 + q1) - q3, 0, 10)
    assert np.array_equal(out, n1 * 11 + n2)


# ---------------------------------------------------------------- L1-L4: arguments
@pytest.mark.parametrize("density", [False, "0.1", None, float("nan"), 0.6])
def test_hole_density_checked_by_name(density):
    with pytest.raises((TypeError, ValueError), match=r"^hole_density: expected a real number in \[0, 0.5\]"):
        lake_task_family(0.5, 1, rng=0, shape=(4, 4), hole_density=density)


@pytest.mark.parametrize("cost", [True, "x", -0.1, float("inf")])
def test_deep_sea_move_cost_checked_by_name(cost):
    with pytest.raises((TypeError, ValueError), match=r"^move_cost: expected a finite number >= 0"):
        deep_sea(4, rng=0, move_cost=cost)


@pytest.mark.parametrize("dirs", [(0.0, 1.0, 2.0, 3.0), (False, True, 2, 3), np.array([True, False, True, True]),
                                  "0123", (0, 1, 2), 5])
def test_lake_directions_must_be_integers(dirs):
    with pytest.raises(ValueError, match=r"^directions: expected a permutation of the integers"):
        slippery_lake((2, 2), directions=dirs)


def test_lake_directions_accept_numpy_integers():
    a = slippery_lake((3, 3), directions=np.array([1, 0, 3, 2]))
    b = slippery_lake((3, 3), directions=(1, 0, 3, 2))
    assert np.array_equal(a.transitions, b.transitions)


@pytest.mark.parametrize("amp", [1e308, 1e101, float("inf")])
def test_huge_wind_amplitude_refused_by_name(amp):
    with pytest.raises(ValueError, match=r"^wind_amplitude: expected a finite non-negative number at most 1e\+100"):
        windy_task_family(0.5, 1, rng=0, shape=(3, 3), wind_amplitude=amp)
    with pytest.raises(ValueError, match=r"^amplitude: "):
        smooth_wind((3, 3), rng=0, amplitude=amp)


@pytest.mark.parametrize("kwargs", [dict(wind=np.full((4, 2), 1e308)), dict(drive=1e308)])
def test_overflowing_logits_refused_by_name(kwargs):
    with pytest.raises(ValueError, match=r"^wind, drive, damping: the move logits .* overflow"):
        windy_gridworld((2, 2), **kwargs)


def test_windy_off_grid_start_refused_without_goal():
    with pytest.raises(ValueError, match=r"^start: cell \(5, 5\) lies outside the grid"):
        windy_gridworld((2, 2), goal=False, start=(5, 5))
    assert windy_gridworld((2, 2), goal=False, start=(1, 1)).n_states == 4
