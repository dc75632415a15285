"""Hyper-parameter selection (corrpriors.core.selection) against brute force over the lattice."""

import numpy as np
import pytest

from corrpriors import CorrelatedMultinomial, ScaleSearch, select_kernel, select_scale
from corrpriors.applications import CorrelatedTransitionModel
from corrpriors.kernels import SquaredExponential


def _problem(seed=0, c=12, k=3, n=4):
    rng = np.random.default_rng(seed)
    x = np.arange(c, dtype=float)[:, None]
    cov = np.exp(-((x - x.T) ** 2) / 9.0)
    logits = np.linalg.cholesky(cov + 1e-9 * np.eye(c)) @ rng.standard_normal((c, k)) * 1.5
    p = np.exp(logits)
    p /= p.sum(1, keepdims=True)
    counts = np.stack([rng.multinomial(n, row) for row in p])
    return cov, counts


def _brute_force(cov, counts, criterion, step=0.25, low=1e-2, high=1e4):
    js = range(int(np.ceil(np.log10(low) / step)), int(np.floor(np.log10(high) / step)) + 1)
    values = {}
    for j in js:
        m = CorrelatedMultinomial(cov, scale=10.0 ** (j * step), tol=1e-10).fit(counts)
        values[10.0 ** (j * step)] = m.elbo_ if criterion == "elbo" else m.collapsed_bound()
    return values


@pytest.mark.parametrize("criterion", ["collapsed", "elbo"])
def test_select_scale_finds_the_lattice_maximum(criterion):
    cov, counts = _problem()
    values = _brute_force(cov, counts, criterion)
    scales = sorted(values)
    best = max(values, key=values.get)
    sel = select_scale(CorrelatedMultinomial(cov, tol=1e-10), counts, criterion=criterion)
    # The climb returns a local maximum of the lattice; on this problem the criterion is
    # unimodal along the lattice, so it must be the global one.
    i = scales.index(best)
    assert all(values[scales[j]] <= values[scales[j + 1]] + 1e-9 for j in range(i))
    assert sel.scale == pytest.approx(best, rel=1e-12)
    assert sel.value == pytest.approx(values[best], rel=1e-7)
    assert sel.model.scale_ == pytest.approx(best, rel=1e-12)


def test_climb_tries_the_smaller_scale_first_and_skips_the_larger():
    """From above the maximum the climb never fits the larger neighbour of its start; from below it
    climbs up; both end at the brute-force lattice maximum (this criterion is unimodal)."""
    cov, counts = _problem()
    values = _brute_force(cov, counts, "collapsed")
    best = max(values, key=values.get)
    j_best = round(np.log10(best) / 0.25)
    above = ScaleSearch(CorrelatedMultinomial(cov, tol=1e-10), start=10.0 ** ((j_best + 2) * 0.25))
    sel = above.select(counts)
    assert sel.scale == pytest.approx(best, rel=1e-12)
    assert sorted(above.models_) == [j_best - 1, j_best, j_best + 1, j_best + 2]   # not j_best + 3
    below = ScaleSearch(CorrelatedMultinomial(cov, tol=1e-10), start=10.0 ** ((j_best - 2) * 0.25))
    assert below.select(counts).scale == pytest.approx(best, rel=1e-12)
    assert sorted(below.models_) == [j_best - 3, j_best - 2, j_best - 1, j_best, j_best + 1]


def test_collapsed_and_elbo_disagree_on_scarce_data():
    # The ELBO's mean-field gap grows with the scale, so it prefers smaller scales.
    cov, counts = _problem(seed=2, n=2)
    by_elbo = select_scale(CorrelatedMultinomial(cov), counts, criterion="elbo")
    by_bound = select_scale(CorrelatedMultinomial(cov), counts, criterion="collapsed")
    assert by_elbo.scale < by_bound.scale


def test_scale_search_is_warm_and_reuses_fits():
    cov, counts = _problem(seed=1)
    search = ScaleSearch(CorrelatedMultinomial(cov), start=1.0)
    first = search.select(counts)
    n = search.n_fits_
    again = search.select(counts)
    assert search.n_fits_ == n            # same data: no refit at all
    assert again.scale == first.scale
    more = counts * 3
    warm = search.select(more)
    cold = ScaleSearch(CorrelatedMultinomial(cov), start=1e4)
    assert cold.select(more).scale == warm.scale
    assert search.n_fits_ - n < cold.n_fits_      # climbs from the previous choice


def test_select_kernel_with_scale_search_ranks_by_best_value():
    cov, counts = _problem(seed=2)
    candidates = {"smooth": cov, "independent": np.eye(cov.shape[0])}
    ranked = select_kernel(counts, candidates, criterion="collapsed", scale_search={})
    values = {name: select_scale(CorrelatedMultinomial(c), counts).value
              for name, c in candidates.items()}
    assert [name for name, _ in ranked] == sorted(values, key=lambda n: -values[n])
    assert ranked[0][1].collapsed_bound() == pytest.approx(max(values.values()), rel=1e-9)


def test_transition_model_selection_matches_offline_selection():
    rng = np.random.default_rng(4)
    S, A = 9, 2
    coords = np.array([(i, j) for i in range(3) for j in range(3)], float)
    P = rng.dirichlet(np.ones(S) * 0.5, size=(S, A))
    s = rng.integers(0, S, 60)
    a = rng.integers(0, A, 60)
    s2 = np.array([rng.choice(S, p=P[i, j]) for i, j in zip(s, a)])
    kernels = {l: SquaredExponential(lengthscale=l).bind(coords=coords) for l in (1.0, 3.0)}
    belief = CorrelatedTransitionModel(S, A, covariance=kernels, selection="collapsed",
                                       learn_mean=None)
    belief.update(s, a, s2)
    belief.refit()
    for act in range(A):
        x = belief.counts[:, act, :]
        offline = [(select_scale(CorrelatedMultinomial(k, learn_mean=None, mean_prior_std=3.0,
                                                       max_iter=100, tol=1e-6), x), name)
                   for name, k in kernels.items()]
        sel, name = max(offline, key=lambda t: t[0].value)
        chosen = belief.selected_[act]
        assert chosen["candidate"] == name
        assert chosen["scale"] == pytest.approx(sel.scale, rel=1e-12)
        assert chosen["value"] == pytest.approx(sel.value, rel=1e-9)
        assert belief.models_[act].scale_ == pytest.approx(sel.scale, rel=1e-12)


def test_selection_validation():
    cov, counts = _problem()
    est = CorrelatedMultinomial(cov)
    with pytest.raises(ValueError, match="criterion"):
        select_scale(est, counts, criterion="evidence")
    with pytest.raises(ValueError, match="low <= high"):
        select_scale(est, counts, low=10.0, high=1.0)
    with pytest.raises(ValueError, match="no lattice point"):
        select_scale(est, counts, low=1.1, high=1.2, step=1.0)
    with pytest.raises(ValueError, match="step"):
        select_scale(est, counts, step=0.0)
    with pytest.raises(ValueError, match="criterion"):
        CorrelatedTransitionModel(3, 1, np.eye(3), selection="evidence")
    with pytest.raises(TypeError, match="estimator"):
        ScaleSearch(np.eye(3))


def test_new_lattice_points_start_from_extrapolated_tilts():
    """A lattice point reached with two fitted neighbours on one side starts from their tilts
    extrapolated log-linearly; the fits still reach the fixed point of a cold, tight fit."""
    from corrpriors.core.selection import _extrapolated_start

    cov, counts = _problem(seed=3)
    fits = {j: CorrelatedMultinomial(cov, scale=10.0 ** (j * 0.25), tol=1e-12).fit(counts)
            for j in (0, 1)}
    start = _extrapolated_start(-1, {j: m.result_ for j, m in fits.items()})
    w0, w1 = fits[0].result_.w, fits[1].result_.w
    np.testing.assert_allclose(start.w, w0 * (w0 / w1), rtol=1e-12)
    np.testing.assert_array_equal(start.psi_mean, fits[0].result_.psi_mean)
    assert _extrapolated_start(2, {0: fits[0].result_}) is fits[0].result_
    # between the two fits (no neighbour on the far side): the nearest one, unchanged
    assert _extrapolated_start(-1, {0: fits[0].result_, -2: fits[1].result_}) is fits[0].result_
    # the extrapolated start is closer to the fixed point at j = -1 than the nearest fit's
    target = CorrelatedMultinomial(cov, scale=10.0 ** -0.25, tol=1e-12).fit(counts)
    assert np.linalg.norm(start.w - target.result_.w) < np.linalg.norm(w0 - target.result_.w)
    search = ScaleSearch(CorrelatedMultinomial(cov, tol=1e-10), start=10.0 ** 0.5)
    sel = search.select(counts)
    for j, m in search.models_.items():
        tight = CorrelatedMultinomial(cov, scale=10.0 ** (j * 0.25), tol=1e-13,
                                      max_iter=5000).fit(counts)
        assert m.result_.objective == pytest.approx(tight.result_.objective, rel=1e-9)
    assert sel.value == pytest.approx(max(_brute_force(cov, counts, "collapsed").values()),
                                      rel=1e-7)


def test_lattice_climb_finds_the_maximum_of_a_unimodal_function():
    """Against brute force on random unimodal functions (any start, peaks at and between the
    ends); a climb that stopped after the first neighbour would fail."""
    from corrpriors.core.selection import lattice_climb

    rng = np.random.default_rng(0)
    for _ in range(200):
        lo, hi = -int(rng.integers(0, 8)), int(rng.integers(0, 8))
        peak = rng.uniform(lo - 2, hi + 2)
        curv = rng.uniform(0.1, 3.0)
        calls = []

        def f(j, peak=peak, curv=curv, calls=calls):
            calls.append(j)
            return -curv * abs(j - peak) ** 1.5

        start = int(rng.integers(lo, hi + 1))
        best, values = lattice_climb(f, start, lo, hi)
        assert len(calls) == len(set(calls)) == len(values)   # each point evaluated once
        assert lo <= min(values) and max(values) <= hi
        assert best == max(range(lo, hi + 1), key=f)


def test_lattice_climb_on_a_single_point_and_a_plateau():
    from corrpriors.core.selection import lattice_climb

    assert lattice_climb(lambda j: 0.0, 3, 3, 3) == (3, {3: 0.0})
    best, values = lattice_climb(lambda j: 0.0, 0, -5, 5)   # ties: the start stays
    assert best == 0 and sorted(values) == [-1, 0, 1]


@pytest.mark.parametrize("step", [1e-4, 1e-320])
def test_a_lattice_of_more_than_ten_thousand_points_is_refused(step):
    """A climb fits and keeps a model per visited point: step=1e-4 took 3,369 fits and 31 s,
    1e-5 did not finish, 1e-320 overflowed; refused up front, naming step."""
    from corrpriors.core.selection import MAX_LATTICE_POINTS

    with pytest.raises(ValueError, match=r"^step: expected at most 10,000 lattice points"):
        ScaleSearch(CorrelatedMultinomial(np.eye(3)), step=step)
    ScaleSearch(CorrelatedMultinomial(np.eye(3)), step=6 / (MAX_LATTICE_POINTS - 1))   # the most allowed


def _saturated_case(mult):
    cov = np.exp(-np.subtract.outer(np.arange(6.0), np.arange(6.0)) ** 2 / 4)
    counts = np.array([[5, 1], [4, 2], [0, 0], [1, 4], [0, 6], [1, 5]]) * mult
    return cov, counts


def _converged(cov, counts, scale):
    """The criterion at ``scale`` iterated to a standstill (tol=0), the reference value."""
    model = CorrelatedMultinomial(covariance=cov, scale=scale, tol=0.0, max_iter=5000)
    return model.fit(counts).collapsed_bound()


def test_a_warm_start_from_a_wider_prior_reaches_the_converged_value():
    # an empty row and an all-failure row of 6e4 trials: under a wide prior the tilt of the
    # latter moves by ~1e-8 of itself per plain sweep, a long climb of small steady gains
    cov, counts = _saturated_case(10 ** 4)
    wide = CorrelatedMultinomial(covariance=cov, scale=1e10).fit(counts)
    warm = CorrelatedMultinomial(covariance=cov, scale=10 ** 9.5).fit(counts, init=wide.result_)
    assert warm.collapsed_bound() == pytest.approx(_converged(cov, counts, 10 ** 9.5), abs=1e-4)


def test_climb_records_converged_values_and_reaches_the_maximum_from_a_far_start():
    cov, counts = _saturated_case(10 ** 4)
    sel = select_scale(CorrelatedMultinomial(covariance=cov), counts, low=1e-4, high=1e12,
                       step=0.5, start=1e10)
    reference = {s: _converged(cov, counts, s) for s in sel.values}
    best = max(reference, key=reference.get)
    assert sel.scale == pytest.approx(best) and sel.scale == pytest.approx(10 ** 2.5)
    for s, v in sel.values.items():
        if s < 1e10:   # the start is a cold fit: its stopping is not the search's
            assert v == pytest.approx(reference[s], abs=2e-2), s


@pytest.mark.parametrize("bad, error", [({"criterion": "elbo"}, ValueError), ({"lo": 1.0}, ValueError),
                                        ([1], TypeError), ("low", TypeError)])
def test_select_kernel_rejects_a_bad_scale_search(bad, error):
    cov, counts = _problem()
    with pytest.raises(error, match=r"^scale_search: ") as info:
        select_kernel(counts, [cov], scale_search=bad)
    assert "\n" not in str(info.value)


def test_select_kernel_accepts_every_select_scale_lattice_argument():
    cov, counts = _problem()
    args = {"low": 0.1, "high": 10.0, "step": 0.5, "start": 1.0}
    (_, model), = select_kernel(counts, [cov], criterion="collapsed", scale_search=args)
    sel = select_scale(CorrelatedMultinomial(covariance=cov), counts, **args)
    assert model.scale == pytest.approx(sel.scale)
