"""The exact queueing transition matrix against simulation and a scalar-loop reference."""

import numpy as np
import pytest
from scipy.stats import chi2, poisson

from corrpriors.envs import queueing_network, queueing_transitions, simulate_queueing


def loop_reference(B1, B2, lam, beta1, beta2, capped, b1, b2, a, qmax=60):
    """Sum over (q1, q2, q3) one by one (truncated far in the tail)."""
    r2 = beta1 if a == 0 else 0.0
    r3 = beta2 if a == 1 else 0.0
    row = np.zeros((B1 + 1, B2 + 1))
    p1 = poisson.pmf(np.arange(qmax), lam)
    p2 = poisson.pmf(np.arange(qmax), r2)
    p3 = poisson.pmf(np.arange(qmax), r3)
    for q1 in range(qmax):
        for q2 in range(qmax if r2 > 0 else 1):
            for q3 in range(qmax if r3 > 0 else 1):
                w = p1[q1] * p2[q2] * p3[q3]
                if w < 1e-300:
                    continue
                served = min(q2, b1 + q1) if capped else q2
                n1 = min(max(b1 + q1 - q2, 0), B1)
                n2 = min(max(b2 + served - q3, 0), B2)
                row[n1, n2] += w
    return row.ravel()


@pytest.mark.parametrize("capped", [False, True])
@pytest.mark.parametrize("b1,b2,a", [(0, 0, 0), (3, 7, 0), (3, 7, 1), (5, 0, 1), (0, 4, 0)])
def test_matches_loop_reference(capped, b1, b2, a):
    B1, B2 = 5, 4
    b1, b2 = min(b1, B1), min(b2, B2)
    P = queueing_transitions((B1, B2), 1.3, (2.5, 1.7), capped=capped)
    s = np.ravel_multi_index((b1, b2), (B1 + 1, B2 + 1))
    np.testing.assert_allclose(P[s, a], loop_reference(B1, B2, 1.3, 2.5, 1.7, capped, b1, b2, a),
                               atol=1e-14)


@pytest.fixture(scope="module")
def paper_mdp():
    return queueing_network()


def test_paper_defaults(paper_mdp):
    mdp = paper_mdp
    assert mdp.transitions.shape == (121, 2, 121)
    np.testing.assert_allclose(mdp.transitions.sum(-1), 1.0, atol=1e-13)
    b = mdp.coordinates.astype(int)
    np.testing.assert_array_equal(np.ravel_multi_index(b.T, (11, 11)), np.arange(121))
    np.testing.assert_array_equal(mdp.rewards, -b.sum(1))
    norm = queueing_network(normalize_coordinates=True)
    np.testing.assert_allclose(norm.coordinates, b / 10.0)
    assert mdp.shape == (11, 11)


def test_closed_form_cells(paper_mdp):
    P = paper_mdp.transitions
    # serving queue 2 from (0, 0): queue 2 stays 0, queue 1 gets Poisson(1) arrivals
    row = P[0, 1].reshape(11, 11)
    np.testing.assert_allclose(row[:10, 0], poisson.pmf(np.arange(10), 1.0), rtol=1e-12)
    assert row[10, 0] == pytest.approx(poisson.sf(9, 1.0), rel=1e-12)
    assert row[:, 1:].sum() == 0.0
    # serving queue 1 from (0, 0): P(b' = (0, 0)) = P(q1 <= q2, q2 = 0) = P(q1 = 0) P(q2 = 0)
    assert P[0, 0, 0] == pytest.approx(np.exp(-1.0) * np.exp(-3.0), rel=1e-12)


def test_uncapped_formula_moves_more_than_queue_one_holds(paper_mdp):
    """Paper's formula: from an empty network the served batch still reaches queue 2."""
    capped = queueing_network(capped=True)
    row_u = paper_mdp.transitions[0, 0].reshape(11, 11)
    row_c = capped.transitions[0, 0].reshape(11, 11)
    assert row_u[:, 1:].sum() > 0.5
    # uncapped: b2' = min(q2, 10), so P(b2' = 0) = P(q2 = 0)
    assert row_u[:, 0].sum() == pytest.approx(np.exp(-3.0), rel=1e-12)
    # capped: queue 2 receives min(q2, q1), so P(b2' = 0) = 1 - P(q1 >= 1) P(q2 >= 1)
    assert row_c[:, 0].sum() == pytest.approx(1 - (1 - np.exp(-1.0)) * (1 - np.exp(-3.0)), rel=1e-12)
    # queue 1 evolves identically in both variants
    np.testing.assert_allclose(row_c.sum(1), row_u.sum(1), atol=1e-15)


@pytest.mark.parametrize("capped", [False, True])
def test_matches_monte_carlo(paper_mdp, capped):
    mdp = paper_mdp if not capped else queueing_network(capped=True)
    rng = np.random.default_rng(12345)
    n = 100_000
    pairs = [(0, 0), (0, 1), (60, 0), (60, 1), (120, 0), (120, 1), (13, 0), (107, 1)]
    for s, a in pairs:
        ns = simulate_queueing(np.full(n, s), np.full(n, a), rng=rng, capped=capped)
        emp = np.bincount(ns, minlength=121)
        p = mdp.transitions[s, a]
        # chi-square goodness of fit on cells with expected count >= 5 (rest pooled)
        exp_counts = n * p
        big = exp_counts >= 5
        obs = np.append(emp[big], emp[~big].sum())
        exp = np.append(exp_counts[big], exp_counts[~big].sum())
        keep = exp > 0
        stat = np.sum((obs[keep] - exp[keep]) ** 2 / exp[keep])
        dof = keep.sum() - 1
        assert chi2.sf(stat, dof) > 1e-4, (s, a, stat, dof)
        # and never a sampled state with zero exact probability
        assert np.all(p[emp > 0] > 0)


def test_input_validation():
    with pytest.raises(ValueError, match="buffers"):
        queueing_network(buffers=(10,))
    with pytest.raises(ValueError, match="arrival_rate"):
        queueing_network(arrival_rate=-1.0)
    with pytest.raises(ValueError, match="service_rates"):
        queueing_network(service_rates=(3.0, np.nan))


try:
    from hypothesis import given, settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover
    given = None

if given is not None:

    @settings(max_examples=15, deadline=None)
    @given(B1=st.integers(0, 4), B2=st.integers(0, 4), lam=st.floats(0.0, 3.0),
           beta1=st.floats(0.0, 4.0), beta2=st.floats(0.0, 4.0), capped=st.booleans(),
           a=st.integers(0, 1), data=st.data())
    def test_random_networks_match_loop_reference(B1, B2, lam, beta1, beta2, capped, a, data):
        P = queueing_transitions((B1, B2), lam, (beta1, beta2), capped=capped)
        np.testing.assert_allclose(P.sum(-1), 1.0, atol=1e-13)
        b1 = data.draw(st.integers(0, B1))
        b2 = data.draw(st.integers(0, B2))
        s = np.ravel_multi_index((b1, b2), (B1 + 1, B2 + 1))
        ref = loop_reference(B1, B2, lam, beta1, beta2, capped, b1, b2, a, qmax=40)
        np.testing.assert_allclose(P[s, a], ref, atol=1e-13)


# ----------------------------------------------------------------------------- the old builder
def _old_truncated_pmf(rate, tail_mass=1e-30):
    if rate == 0.0:
        return np.ones(1)
    Q = int(np.ceil(rate))
    while poisson.sf(Q, rate) > tail_mass:
        Q += 1
    pmf = poisson.pmf(np.arange(Q + 1), rate)
    pmf[-1] += poisson.sf(Q, rate)
    return pmf


def _old_clip_out_pmf(y, rate, upper):
    if upper == 0:
        return np.ones(y.shape + (1,))
    m = np.arange(upper + 1)
    k = y[..., None] - m
    out = np.where(k >= 0, poisson.pmf(np.maximum(k, 0), rate), 0.0)
    out[..., 0] = np.where(y > 0, poisson.sf(y - 1, rate), 1.0)
    out[..., upper] = np.where(y >= upper, poisson.cdf(y - upper, rate), 0.0)
    return out


def old_queueing_table(buffers, arrival_rate, service_rates, capped):
    """The dense construction queueing_transitions used until round 18 (a transcription): every
    (q1, q2, b2') outcome of every state, summed into the (S, 2, S) table by one bincount."""
    B1, B2 = buffers
    S = (B1 + 1) * (B2 + 1)
    p1 = _old_truncated_pmf(arrival_rate)
    rates = ((service_rates[0], 0.0), (0.0, service_rates[1]))
    P = np.zeros((S, 2, S))
    for a in range(2):
        p2, r3 = _old_truncated_pmf(rates[a][0]), rates[a][1]
        b1, b2 = np.unravel_index(np.arange(S), (B1 + 1, B2 + 1))
        q1 = np.arange(p1.size)[None, :, None]
        q2 = np.arange(p2.size)[None, None, :]
        w = p1[None, :, None] * p2[None, None, :]
        x1 = b1[:, None, None] + q1
        nb1 = np.clip(x1 - q2, 0, B1)
        served = np.minimum(q2, x1) if capped else q2 + 0 * x1
        pb2 = _old_clip_out_pmf(b2[:, None, None] + served, r3, B2)
        weights = (w[..., None] * pb2).reshape(S, -1)
        target = (nb1[..., None] * (B2 + 1) + np.arange(B2 + 1)).reshape(S, -1)
        flat = (np.arange(S)[:, None] * S + target).ravel()
        P[:, a, :] = np.bincount(flat, weights=weights.ravel(), minlength=S * S).reshape(S, S)
    return P


OLD_BUILDER_CASES = [((10, 10), 1.0, (3.0, 2.0)), ((0, 0), 1.0, (3.0, 2.0)), ((0, 5), 1.3, (2.5, 1.7)),
                     ((5, 0), 1.3, (2.5, 1.7)), ((4, 3), 2.5, (0.0, 4.0)), ((3, 4), 0.0, (0.0, 0.0)),
                     ((40, 12), 3.0, (1.0, 6.0)), ((3, 34), 1.0, (3.0, 2.0))]


@pytest.mark.parametrize("capped", [False, True])
@pytest.mark.parametrize("buffers,arrival_rate,service_rates", OLD_BUILDER_CASES)
def test_tables_equal_the_old_dense_construction_bit_for_bit(buffers, arrival_rate, service_rates, capped):
    """The builder accumulates each cell in a window of next states per state instead of
    enumerating (q1, q2, every b2') for all states; dense and sparse tables hold the old numbers
    bit for bit wherever B2 is within the cut-off of q3 (34 at rate 2, 44 at rate 6)."""
    want = old_queueing_table(buffers, arrival_rate, service_rates, capped)
    dense = queueing_transitions(buffers, arrival_rate, service_rates, capped, sparse=False)
    sparse = queueing_transitions(buffers, arrival_rate, service_rates, capped, sparse=True)
    np.testing.assert_array_equal(dense, want)
    np.testing.assert_array_equal(sparse.toarray(), want)
    assert sparse.nnz == np.count_nonzero(want)


@pytest.mark.parametrize("capped", [False, True])
@pytest.mark.parametrize("buffers,arrival_rate,service_rates",
                         [((3, 35), 1.0, (3.0, 2.0)), ((12, 40), 0.7, (5.0, 0.3)), ((2, 120), 1.0, (3.0, 2.0))])
def test_beyond_the_cut_off_of_q3_entries_move_by_less_than_the_tail_mass(buffers, arrival_rate,
                                                                           service_rates, capped):
    """Served batches q3 are cut off like q1 and q2 (tail mass 1e-30 folded into the cut-off):
    beyond it (B2 > 34 at rate 2, > 20 at rate 0.3) the old table also listed every b2' down to
    the pmf's underflow (1e-308). No entry moves by 1e-30, none appears, rows still sum to one,
    and the table is smaller."""
    want = old_queueing_table(buffers, arrival_rate, service_rates, capped)
    got = queueing_transitions(buffers, arrival_rate, service_rates, capped, sparse=True)
    np.testing.assert_allclose(got.toarray(), want, rtol=0, atol=1e-30)
    assert not np.any((got.toarray() != 0) & (want == 0))
    assert got.nnz < np.count_nonzero(want)
    np.testing.assert_allclose(got.matrix.sum(axis=1), 1.0, atol=1e-14)


# ----------------------------------------------------------------------------- size and scaling
COUNT_CASES = [((10, 10), 1.0, (3.0, 2.0), False), ((0, 0), 1.0, (3.0, 2.0), True),
               ((0, 300), 1.0, (3.0, 2.0), True), ((150, 0), 1.0, (3.0, 2.0), False),
               ((12, 40), 0.7, (5.0, 0.3), True), ((90, 95), 1.0, (3.0, 2.0), False),
               ((97, 60), 1.0, (3.0, 2.0), True), ((60, 70), 1e-300, (1e-300, 5.0), False)]


@pytest.mark.parametrize("buffers,arrival_rate,service_rates,capped", COUNT_CASES)
def test_the_entries_are_counted_exactly_before_the_table_is_built(buffers, arrival_rate,
                                                                     service_rates, capped):
    """The memory check counts the table's non-zeros from a few representative states (rows
    away from the buffers' ends are translates): the count is the built table's, including
    products that underflow (rates 1e-300)."""
    from corrpriors.envs.queueing import _Network

    net = _Network(*buffers, arrival_rate, ((service_rates[0], 0.0), (0.0, service_rates[1])), capped, 1e-30)
    P = queueing_transitions(buffers, arrival_rate, service_rates, capped, sparse=True)
    assert net.entry_count() == P.nnz


@pytest.mark.parametrize("short", [7, 10_000])
def test_a_count_below_the_entries_still_builds_the_same_table(monkeypatch, short):
    import corrpriors.envs.queueing as queueing

    want = queueing_transitions((30, 25), sparse=True).matrix
    monkeypatch.setattr(queueing._Network, "entry_count", lambda self: want.nnz - short)
    got = queueing_transitions((30, 25), sparse=True).matrix
    for name in ("data", "indices", "indptr"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name))


def test_ten_thousand_states_build_in_bounded_memory():
    """10^4 states (15.5M entries): the old builder took 81 CPU s and 4.8 GB resident; now about
    1.5 s, with at most about 85 MiB beyond the table's 178 MiB traced."""
    from memory_checks import traced_peak

    mdp, peak = traced_peak(queueing_network, (99, 99))
    M = mdp.transitions.matrix
    table = M.data.nbytes + M.indices.nbytes + M.indptr.nbytes
    assert mdp.is_sparse and mdp.n_states == 10_000 and M.nnz == 15_528_566
    assert peak < table + 150 * 2**20, (peak, table)
    np.testing.assert_allclose(M.sum(axis=1), 1.0, atol=1e-13)


def test_networks_that_cannot_fit_are_refused_up_front_naming_the_argument(monkeypatch):
    import corrpriors.envs.queueing as queueing

    def never(*args, **kwargs):
        raise AssertionError("built although refused")

    monkeypatch.setattr(queueing, "_transition_table", never)
    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "1G")
    with pytest.raises(ValueError, match=r"buffers: the queueing network with buffers \(315, 315\) \(99,856 "
                                         r"states, 2 actions, 1[0-9,]+ transition probabilities above the "
                                         r"Poisson cut-offs, [0-9]+ per \(state, action\)\) would need about "
                                         r"2\.[0-9]+ GiB, more than the 1 GiB .*use smaller buffers"):
        queueing_network((315, 315))
    monkeypatch.delenv("CORRPRIORS_MEMORY_LIMIT")
    with pytest.raises(ValueError, match=r"buffers: .*\(10000000000, 10\).*at least one transition "
                                         r"probability per \(state, action\)"):
        queueing_network((10**10, 10))                      # refused before anything is counted
    with pytest.raises(ValueError, match=r"^sparse: the dense \(S, 2, S\) table .*\(3000, 3000\).*pass "
                                         r"sparse=None"):
        queueing_network((3000, 3000), sparse=False)
    with pytest.raises(ValueError, match=r"^arrival_rate, service_rates: .*\(1e\+12; 3, 2\).*use smaller rates"):
        queueing_network(arrival_rate=1e12)                # the cut-off search would take hours
    with pytest.raises(ValueError, match=r"^arrival_rate, service_rates: .*\(1; 1e\+300, 2\)"):
        queueing_network(service_rates=(1e300, 2.0))


def test_a_huge_rate_of_service_at_queue_two_empties_it():
    """q3 is only summed up to the fullest queue 2 (B2 + q2): its cut-off is not searched beyond
    (at rate 1e300 it would not end), and serving queue 2 empties it, as in the old builder."""
    P = queueing_transitions((10, 10), 1.0, (3.0, 1e300), sparse=False)
    np.testing.assert_array_equal(P, old_queueing_table((10, 10), 1.0, (3.0, 1e300), False))
    assert np.all(P[:, 1].reshape(121, 11, 11)[:, :, 1:] == 0)


def test_tail_mass_and_service_rates_are_checked():
    with pytest.raises(ValueError, match=r"tail_mass: expected a real number in \[0, 1\), got -1"):
        queueing_transitions(tail_mass=-1.0)               # the cut-off search never ended
    with pytest.raises(ValueError, match=r"tail_mass: .* got nan"):
        queueing_transitions(tail_mass=float("nan"))
    with pytest.raises(TypeError, match="tail_mass"):
        queueing_transitions(tail_mass="1e-30")
    with pytest.raises(ValueError, match=r"service_rates: expected two rates, got \(3.0, 2.0, 1.0\)"):
        queueing_network(service_rates=(3.0, 2.0, 1.0))
    with pytest.raises(ValueError, match=r"service_rates: expected two rates, got 3.0"):
        queueing_network(service_rates=3.0)
    # tail_mass = 0: the sums run to where the Poisson tail underflows, rows still sum to one
    P = queueing_transitions((3, 40), tail_mass=0.0, sparse=True)
    np.testing.assert_allclose(P.matrix.sum(axis=1), 1.0, atol=1e-13)
