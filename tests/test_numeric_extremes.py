"""Huge counts and huge concentrations: the special functions, the ELBO, the collapsed bound
and the Dirichlet-multinomial evidence against mpmath (issue 11, item 5).

Every oracle here is an independent high-precision evaluation of the *definition* (log Gamma
differences, log cosh, Gaussian integrals) at the same float inputs, never the cancellation-
free rearrangement under test.
"""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest

from corrpriors import _special as special
from corrpriors.baselines import DirichletMultinomial
from corrpriors.core import CorrelatedMultinomial
from corrpriors.core.elbo import expected_log_likelihood, likelihood_term, log_binomial_coefficients, optimal_tilts

TOP = 2.0 ** 53 - 1  # the largest count accepted below 2**53 that is odd
COUNTS = [1e6, 1e12, 1e15, TOP]


def _mpf(v) -> mp.mpf:
    return mp.mpf(float(v))


def _logc(b, x) -> mp.mpf:
    b, x = _mpf(b), _mpf(x)
    return mp.loggamma(b + 1) - mp.loggamma(x + 1) - mp.loggamma(b - x + 1)


def _rel(got, want) -> float:
    return float(abs(mp.mpf(float(got)) - want) / abs(want))


# ---------------------------------------------------------------- special functions
@pytest.mark.parametrize("z", [1e-8, 0.3, 1.0, 7.5, 15.0, 15.5, 100.25, 1e6, 1e15, TOP])
def test_stirlerr_matches_mpmath(z):
    with mp.workdps(60):
        want = mp.loggamma(_mpf(z)) - ((_mpf(z) - 0.5) * mp.log(_mpf(z)) - z
                                        + mp.log(2 * mp.pi) / 2)
        # 5e-13 relative = 3e-15 absolute at its smallest (z = 15, direct gammaln branch)
        assert _rel(special.stirlerr(np.array([z]))[0], want) < 5e-13


@pytest.mark.parametrize("x,m", [(0.0, 3.0), (5.0, 5.0000001), (1e15, 1e15 + 3.0),
                                 (1e15, 1.2e15), (3.0, 40.0), (TOP, TOP - 1e8),
                                 (2.0 ** 52, 2.0 ** 52 + 300.0), (7.0, 7.5)])
def test_bd0_matches_mpmath(x, m):
    with mp.workdps(50):
        xm, mm = _mpf(x), _mpf(m)
        want = (xm * mp.log(xm / mm) if x > 0 else 0) + mm - xm
        got = special.bd0(np.array([x]), np.array([m]), np.array([x - m]))[0]
        # the fast form is exact to 3 eps |x - m| absolute, the careful form to a few ulps
        assert abs(mp.mpf(got) - want) <= 1e-14 * want + 4e-16 * abs(x - m)


@pytest.mark.parametrize("b", [10.0, 1e6, 1e12, 1e15, TOP])
def test_log_binomial_coefficient_and_mle_form_match_mpmath(b):
    for x in [0.0, 1.0, np.floor(0.3 * b), np.floor(b / 2), b - 1.0, b]:
        with mp.workdps(60):
            want = _logc(b, x)
            got = special.log_binomial_coefficient(np.array([b]), np.array([x]))[0]
            assert abs(mp.mpf(got) - want) <= 1e-14 * max(abs(want), 1)
            xm, bm = _mpf(x), _mpf(b)
            at_mle = want + (xm * mp.log(xm / bm) if x > 0 else 0) + (
                (bm - xm) * mp.log((bm - xm) / bm) if x < b else 0)
            got = special.log_binomial_at_mle(np.array([b]), np.array([x]))[0]
            assert abs(mp.mpf(got) - at_mle) <= 1e-13 * max(abs(at_mle), 1)


@pytest.mark.parametrize("b", COUNTS)
def test_binomial_deviance_matches_mpmath(b):
    for x in [0.0, np.floor(0.3 * b), b]:
        p_hat = min(max(x / b, 1e-3), 1 - 1e-3)
        for lam in [np.log(p_hat / (1 - p_hat)) + 1e-9, 0.3, -2.0, 36.0, -40.0, -800.0]:
            with mp.workdps(60):
                p = 1 / (1 + mp.exp(-_mpf(lam)))
                log_bin = _logc(b, x) + _mpf(x) * mp.log(p) + (_mpf(b) - x) * mp.log(1 - p)
                xm, bm = _mpf(x), _mpf(b)
                at_mle = _logc(b, x) + (xm * mp.log(xm / bm) if x > 0 else 0) + (
                    (bm - xm) * mp.log((bm - xm) / bm) if x < b else 0)
                want = at_mle - log_bin
                delta = abs(_mpf(x) - _mpf(b) * p)
                got = special.binomial_deviance(np.array([b]), np.array([x]),
                                                np.array([lam]))[0]
                # relative to the log-probability it is subtracted from, plus the documented
                # backward error (lambda rounded, d dev / d lambda = -delta)
                err = abs(mp.mpf(got) - want)
                assert err <= 1e-13 * (abs(log_bin) + 1) + 1e-15 * delta


@pytest.mark.parametrize("lam,v", [(0.0, 1e-16), (0.3, 1e-16), (-5.0, 1e-10), (30.0, 1e-3),
                                   (1.0, 1.0), (0.0, 100.0), (2.0, 1e5), (37.0, 1e-17)])
def test_log_cosh_half_gap_matches_mpmath(lam, v):
    with mp.workdps(60):
        w = mp.sqrt(_mpf(v) + _mpf(lam) ** 2)
        want = mp.log(mp.cosh(w / 2)) - mp.log(mp.cosh(_mpf(lam) / 2))
        assert _rel(special.log_cosh_half_gap(np.array([lam]), np.array([v]))[0], want) < 1e-14


def _softplus_gap_mp(m, v):
    """E[softplus(m + s Z)] - softplus(m) = int_0^inf phi(z) log1p((sinh(sz/2)/cosh(m/2))^2) dz,
    scaled to O(1) so that mpmath's absolute tolerance is relative."""
    m, s = _mpf(m), mp.sqrt(_mpf(v))
    scale = min(s * s, 1 + s) / mp.cosh(m / 2) ** 2
    kink = abs(m) / s
    pts = sorted({0, 1, 2, 4, 8, 16, 40} | {float(kink + d / s) for d in (-2, -1, 0, 1, 2)
                                             if 0 < kink + d / s < 40})

    def f(z):
        return mp.npdf(z) * mp.log1p((mp.sinh(s * z / 2) / mp.cosh(m / 2)) ** 2) / scale

    return mp.quad(f, [mp.mpf(p) for p in pts]) * scale


_GAP_CASES = [(m, v) for m in (0.0, -3.0, 10.0, 37.0, 200.0)
              for v in (1e-18, 1e-4, 0.999, 1.0, 9.0, 1e4)]
_GAP_FAST = [(0.0, 1e-4), (-3.0, 0.999), (37.0, 1e-18), (0.0, 1.0), (10.0, 9.0), (37.0, 9.0),
             (-3.0, 1e4)]


def _check_softplus_gap(m, v):
    with mp.workdps(20):  # the integrand is scaled to O(1): 20 digits are plenty
        want = _softplus_gap_mp(m, v)
    assert _rel(special.softplus_gap(np.array([m]), np.array([v]))[0], want) < 1e-12


@pytest.mark.parametrize("m,v", _GAP_FAST)
def test_softplus_gap_matches_mpmath(m, v):
    _check_softplus_gap(m, v)


@pytest.mark.slow
@pytest.mark.parametrize("m,v", sorted(set(_GAP_CASES) - set(_GAP_FAST)))
def test_softplus_gap_matches_mpmath_full_grid(m, v):
    _check_softplus_gap(m, v)


def _dm_mp(x, a) -> mp.mpf:
    with mp.workdps(40 + int(np.log10(max(max(x), max(a), 1.0)))):
        n, big_a = mp.fsum(_mpf(v) for v in x), mp.fsum(_mpf(v) for v in a)
        out = mp.loggamma(n + 1) - mp.fsum(mp.loggamma(_mpf(v) + 1) for v in x)
        out += mp.loggamma(big_a) - mp.loggamma(big_a + n)
        return out + mp.fsum(mp.loggamma(_mpf(av) + _mpf(v)) - mp.loggamma(_mpf(av))
                             for v, av in zip(x, a))


@pytest.mark.parametrize("alpha", [1e-8, 0.5, 1.0, 1e3, 1e8, 1e12, 1e15, 1e18, 1e20, 1e100])
@pytest.mark.parametrize("row", [[30.0, 20.0, 50.0], [1e6, 0.0, 3.0], [1e15, 1e15, 7.0],
                                 [TOP - 2.0, 1.0, 1.0]])
def test_dirichlet_multinomial_evidence_alpha_sweep_matches_mpmath(alpha, row):
    x = np.array([row])
    want = _dm_mp(row, [alpha] * 3)
    got = DirichletMultinomial(alpha=alpha).fit(x).log_marginal_likelihood_
    assert _rel(got, want) < 1e-12


def test_dirichlet_multinomial_unequal_concentrations_match_mpmath():
    x = np.array([[30.0, 20.0, 50.0], [2.0 ** 52, 2.0 ** 52 - 9, 7.0], [0.0, 0.0, 0.0]])
    a = np.array([[1e20, 2e20, 3.3e19], [0.5, 2.0, 1e10], [1.0, 2.0, 3.0]])
    got = DirichletMultinomial(alpha=a).fit(x).log_marginal_likelihood_per_covariate_
    for g, row, arow in zip(got, x, a):
        want = _dm_mp(row, arow)
        assert abs(mp.mpf(g) - want) <= 1e-12 * max(abs(want), 1)


def test_issue_examples_dirichlet():
    """The issue's cases: 5 % off at 1e15 and exactly 0 at alpha = 1e20 before the fix."""
    x = np.array([[1e15, 1e15]])
    assert _rel(DirichletMultinomial(1.0).fit(x).elbo_, _dm_mp([1e15, 1e15], [1, 1])) < 1e-12
    x = np.array([[30.0, 20.0, 50.0]])
    for alpha in (1e15, 1e20):
        want = _dm_mp([30, 20, 50], [alpha] * 3)
        assert _rel(DirichletMultinomial(alpha).fit(x).elbo_, want) < 1e-12


# ---------------------------------------------------------------- ELBO terms at given inputs
def _lik_mp(b, x, lam, v):
    """sum [log C(b, x) - b log 2 + kappa lambda - b log cosh(w / 2)], w^2 = v + lambda^2."""
    total = mp.mpf(0)
    for bb, xx, ll, vv in zip(b, x, lam, v):
        w = mp.sqrt(_mpf(vv) + _mpf(ll) ** 2)
        total += (_logc(bb, xx) - _mpf(bb) * mp.log(2) + (_mpf(xx) - _mpf(bb) / 2) * _mpf(ll)
                  - _mpf(bb) * mp.log(mp.cosh(w / 2)))
    return total


@pytest.mark.parametrize("n", [3.0, 50.0] + COUNTS)
def test_likelihood_term_matches_mpmath(n):
    rng = np.random.default_rng(int(np.log2(n)))
    b = np.floor(n * rng.uniform(0.5, 1.0, size=6))
    x = np.floor(b * rng.uniform(0.0, 1.0, size=6))
    x[0], x[1] = 0.0, b[1]  # the one-sided rows
    p = np.clip(x / b, 1e-3, 1 - 1e-3)
    lam = np.log(p / (1 - p)) + rng.normal(size=6) / np.sqrt(n)
    var = rng.uniform(0.5, 2.0, size=6) / (n * p * (1 - p))
    kappa = x - 0.5 * b
    with mp.workdps(60):
        want = _lik_mp(b, x, lam, var)
        got = likelihood_term(b, kappa, lam, optimal_tilts(lam, var),
                              log_binomial_coefficients(b, x), psi_var=var)
        assert _rel(got, want) < 1e-10


@pytest.mark.parametrize("n", [50.0, 1e6, 1e15, TOP])
def test_expected_log_likelihood_matches_mpmath(n):
    b = np.array([n, n, np.floor(n / 3)])
    x = np.array([np.floor(0.3 * n), n, 0.0])
    lam = np.array([np.log(0.3 / 0.7) + 1e-9, np.log(n), -np.log(n)])
    var = np.array([5.0 / n, 0.5, 0.25])
    with mp.workdps(20):  # relative precision suffices for the (small, positive) gaps
        gaps = [_softplus_gap_mp(ll, vv) for ll, vv in zip(lam, var)]
    with mp.workdps(50):
        want = mp.mpf(0)
        for bb, xx, ll, gap in zip(b, x, lam, gaps):
            e_sp = mp.log1p(mp.exp(_mpf(ll))) + gap
            want += _logc(bb, xx) + _mpf(xx) * _mpf(ll) - _mpf(bb) * e_sp
        got = expected_log_likelihood(b, x, lam, var, log_binomial_coefficients(b, x))
        assert _rel(got, want) < 1e-10


# ---------------------------------------------------------------- fitted models
def _log_evidence_1d(b, x, var) -> mp.mpf:
    """log int N(psi; 0, var) Bin(x; b, sigma(psi)) dpsi by mpmath quadrature at the mode."""
    bm, xm, vm = _mpf(b), _mpf(x), _mpf(var)
    logc = _logc(b, x)

    def logf(p):
        return (logc + xm * p - bm * mp.log1p(mp.exp(p)) - p * p / (2 * vm)
                - mp.log(2 * mp.pi * vm) / 2)

    p = mp.log((xm + mp.mpf("0.5")) / (bm - xm + mp.mpf("0.5")))
    for _ in range(100):
        s = 1 / (1 + mp.exp(-p))
        h = -bm * s * (1 - s) - 1 / vm
        p -= (xm - bm * s - p / vm) / h
    sd, top = 1 / mp.sqrt(-h), logf(p)
    return top + mp.log(mp.quad(lambda t: mp.exp(logf(t) - top),
                                [p + k * sd for k in (-40, -12, -5, 0, 5, 12, 40)]))


def _elbo_1d_mp(b, x, lam, v, var0) -> tuple[mp.mpf, mp.mpf]:
    """(ELBO, collapsed bound) of C = 1, K = 2 with prior N(0, var0), at q = N(lam, v)."""
    kl = (mp.log(_mpf(var0) / _mpf(v)) + (_mpf(v) + _mpf(lam) ** 2) / _mpf(var0) - 1) / 2
    elbo = _lik_mp([b], [x], [lam], [v]) - kl
    with mp.workdps(20):
        gap = _softplus_gap_mp(lam, v)
    e_sp = mp.log1p(mp.exp(_mpf(lam))) + gap
    collapsed = _logc(b, x) + _mpf(x) * _mpf(lam) - _mpf(b) * e_sp - kl
    return elbo, collapsed


@pytest.mark.parametrize("n,frac", [(n, 0.3) for n in COUNTS] + [(1e6, 1.0), (TOP, 1.0)])
def test_fit_c1_elbo_and_bounds_against_mpmath(n, frac):
    """Before the fix: decreasing traces from 1e12, an ELBO above the bound at 1e15 and a
    positive ELBO from about 1e16. ``frac = 1``: every count in the first category."""
    b, x = float(n), float(np.floor(frac * n))
    m = CorrelatedMultinomial(np.eye(1), mean=np.array([0.0]), tol=1e-12,
                              max_iter=500).fit([[x, b - x]])
    trace = m.elbo_trace_
    assert np.all(np.diff(trace) >= -1e-12 * np.abs(trace[1:])), trace
    lam, v = float(m.psi_mean_[0, 0]), float(m.psi_var_[0, 0])
    with mp.workdps(40):
        elbo, collapsed = _elbo_1d_mp(b, x, lam, v, float(m.covariance_[0, 0]))
        log_ev = _log_evidence_1d(b, x, float(m.covariance_[0, 0]))
    assert _rel(m.elbo_, elbo) < 1e-9
    bound = m.collapsed_bound()
    assert _rel(bound, collapsed) < 1e-9
    tol = 1e-9 * abs(float(log_ev))
    assert m.elbo_ <= bound + tol and bound <= float(log_ev) + tol


def _log_evidence_2d(rows, cov) -> float:
    """log p(X) for C = 2, K = 2 by a 16 x 16 Gauss-Hermite rule in the whitened Laplace
    coordinates (mpmath arithmetic; the posterior is Gaussian to O(1/b))."""
    rows = [(_mpf(b), _mpf(x)) for b, x in rows]
    sig = mp.matrix([[_mpf(cov[0, 0]), _mpf(cov[0, 1])], [_mpf(cov[1, 0]), _mpf(cov[1, 1])]])
    prec = sig ** -1
    const = sum(_logc(b, x) for b, x in rows) - mp.log(4 * mp.pi ** 2 * mp.det(sig)) / 2

    def logf(p):
        quad = (p.T * prec * p)[0]
        return const + sum(x * p[i] - b * mp.log1p(mp.exp(p[i]))
                           for i, (b, x) in enumerate(rows)) - quad / 2

    p = mp.matrix([mp.log((x + mp.mpf("0.5")) / (b - x + mp.mpf("0.5"))) for b, x in rows])
    for _ in range(100):
        s = [1 / (1 + mp.exp(-p[i])) for i in range(2)]
        grad = mp.matrix([rows[i][1] - rows[i][0] * s[i] for i in range(2)]) - prec * p
        hess = -prec - mp.diag([rows[i][0] * s[i] * (1 - s[i]) for i in range(2)])
        p -= hess ** -1 * grad
    chol = mp.cholesky(-(hess ** -1))
    top = logf(p)
    nodes, weights = np.polynomial.hermite_e.hermegauss(16)
    total = mp.mpf(0)
    for z1, w1 in zip(nodes, weights):
        for z2, w2 in zip(nodes, weights):
            z = mp.matrix([z1, z2])
            total += w1 * w2 * mp.exp(logf(p + chol * z) - top + (z1 ** 2 + z2 ** 2) / 2)
    return float(top + mp.log(total) + mp.log(mp.det(chol)))


@pytest.mark.parametrize("n", COUNTS)
def test_fit_c2_correlated_trace_and_bound_order(n):
    cov = np.array([[1.0, 0.6], [0.6, 1.0]])
    counts = np.array([[np.floor(0.3 * n), n - np.floor(0.3 * n)],
                       [np.floor(0.6 * n), n - np.floor(0.6 * n)]])
    m = CorrelatedMultinomial(cov, mean=np.array([0.0]), tol=1e-12, max_iter=500).fit(counts)
    trace = m.elbo_trace_
    assert np.all(np.diff(trace) >= -1e-12 * np.abs(trace[1:])), trace
    with mp.workdps(40):
        log_ev = _log_evidence_2d([(r.sum(), r[0]) for r in counts], m.covariance_)
    bound = m.collapsed_bound()
    tol = 1e-9 * abs(log_ev)
    assert m.elbo_ < bound + tol and bound <= log_ev + tol
    assert log_ev - bound < 0.05  # q is close to the (nearly Gaussian) posterior


def test_counts_beyond_2_to_53_are_rejected_not_silently_wrong():
    """Before the fix: a positive ELBO (a bound on a log-probability) at 1e17 per cell."""
    with pytest.raises(ValueError, match=r"counts: counts must be at most 2\*\*53"):
        CorrelatedMultinomial(np.eye(1)).fit([[1e17, 1e17]])
    with pytest.raises(ValueError, match=r"counts: counts must be at most 2\*\*53"):
        DirichletMultinomial().fit([[1e17, 1e17]])
