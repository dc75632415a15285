"""The collapsed bound E_q[log p(X | psi)] - KL(q || p): quadrature accuracy, ELBO <= bound <=
log p(X) against an independent grid integral, and why it (not the ELBO) compares scales."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats
from scipy.special import gammaln, logsumexp

from corrpriors.core import CorrelatedMultinomial
from corrpriors.core.elbo import expected_softplus
from corrpriors.core.selection import select_kernel
from corrpriors.core.stick_breaking import log_probs


def _softplus_by_quad(m, s):
    f = lambda p: np.logaddexp(0.0, p) * stats.norm.pdf(p, m, s)  # noqa: E731
    lo, hi = m - 14 * s, m + 14 * s
    edges = [lo] + ([0.0] if lo < 0 < hi else []) + [hi]
    return sum(integrate.quad(f, a, b, epsabs=1e-14, epsrel=1e-13, limit=500)[0]
               for a, b in zip(edges[:-1], edges[1:]))


@pytest.mark.parametrize("s", [0.01, 0.3, 0.999, 1.0, 2.5, 6.0, 20.0])
def test_expected_softplus_matches_adaptive_quadrature(s):
    means = np.array([-35.0, -6.0, -1.0, 0.0, 0.7, 3.0, 12.0])
    got = expected_softplus(means, np.full_like(means, s * s))
    want = np.array([_softplus_by_quad(m, s) for m in means])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)


def _grid_log_evidence(counts, sigma, mu, half_width=30.0, n=1501):
    """log p(X) for C = 2, K = 2 by a dense 2-D grid integral."""
    grid = np.linspace(-half_width, half_width, n)
    g1, g2 = np.meshgrid(grid, grid, indexing="ij")
    psi = np.stack([g1, g2], -1)[..., None]
    nrow = counts.sum(-1)
    loglik = np.sum(gammaln(nrow + 1) - gammaln(counts + 1).sum(-1)
                    + np.sum(counts * log_probs(psi), axis=-1), axis=-1)
    diff = psi[..., 0] - mu
    sinv = np.linalg.inv(sigma)
    logprior = (-0.5 * np.einsum("...i,ij,...j->...", diff, sinv, diff)
                - 0.5 * np.linalg.slogdet(2 * np.pi * sigma)[1])
    return logsumexp(loglik + logprior) + 2 * np.log(grid[1] - grid[0])


def test_collapsed_bound_between_elbo_and_evidence_and_tighter_at_large_scale():
    counts = np.array([[3, 1], [0, 2]])
    base = np.array([[1.0, 0.6], [0.6, 1.0]])
    gaps_elbo, gaps_collapsed = [], []
    for theta in (0.1, 1.0, 10.0, 30.0):
        m = CorrelatedMultinomial(covariance=base, scale=theta, mean=np.array([0.0]),
                                  tol=1e-14, max_iter=5000).fit(counts)
        log_ev = _grid_log_evidence(counts, m.covariance_ * theta, 0.0)
        bound = m.collapsed_bound()
        assert m.elbo_ <= bound + 1e-10
        assert bound <= log_ev + 1e-8
        gaps_elbo.append(log_ev - m.elbo_)
        gaps_collapsed.append(log_ev - bound)
    # the mean-field gap grows with the scale; integrating omega out removes most of it
    assert np.all(np.diff(gaps_elbo) > 0)
    assert all(gc < 0.6 * ge for gc, ge in zip(gaps_collapsed[1:], gaps_elbo[1:]))


def _scarce_chain_problem(n=12, n_obs=10, seed=0, length=2.0):
    """Absolute next-state counts on a chain (mostly one step right), ten transitions."""
    rng = np.random.default_rng(seed)
    x = np.arange(n, dtype=float)
    cov = np.exp(-(x[:, None] - x[None]) ** 2 / length ** 2)
    P = np.zeros((n, n))
    for s in range(n):
        for d, p in ((-1, 0.1), (0, 0.1), (1, 0.8)):
            P[s, min(max(s + d, 0), n - 1)] += p
    counts = np.zeros((n, n), dtype=int)
    for s in rng.integers(0, n, n_obs):
        counts[s, rng.choice(n, p=P[s])] += 1
    return cov, counts


def test_elbo_prefers_tiny_scales_but_collapsed_bound_does_not():
    # The documented failure mode of variational EM: with scarce data the mean-field ELBO
    # peaks at a tiny prior scale, so EM drives theta towards 0, while the collapsed bound
    # (closer to log p(X)) peaks at a scale of order one.
    cov, counts = _scarce_chain_problem()
    scales = [1e-3, 0.1, 1.0, 3.0, 10.0]
    fits = [CorrelatedMultinomial(cov, scale=t, tol=1e-12, max_iter=3000).fit(counts)
            for t in scales]
    elbos = np.array([m.elbo_ for m in fits])
    bounds = np.array([m.collapsed_bound() for m in fits])
    assert int(np.argmax(elbos)) <= 1
    assert int(np.argmax(bounds)) in (2, 3)
    assert np.all(bounds >= elbos - 1e-10)
    em = CorrelatedMultinomial(cov, learn_scale=True, tol=1e-12, max_iter=5000).fit(counts)
    assert em.scale_ < 0.5
    candidates = {t: t * cov for t in scales}
    ranked = select_kernel(counts, candidates, criterion="collapsed", tol=1e-12, max_iter=3000)
    assert ranked[0][0] == scales[int(np.argmax(bounds))]
    assert select_kernel(counts, candidates, tol=1e-12, max_iter=3000)[0][0] <= 0.1
    with pytest.raises(ValueError, match="criterion"):
        select_kernel(counts, [cov], criterion="evidence")
    with pytest.raises(Exception, match="fit"):
        CorrelatedMultinomial(cov).collapsed_bound()
