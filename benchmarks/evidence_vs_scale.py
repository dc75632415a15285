"""ELBO, collapsed bound and an importance-sampled log p(X) against the prior scale theta.

The numbers behind the README's note "variational EM collapses the scale on scarce data": the
tunnel world's absolute encoding (one action, the first T transitions of a random walk), the
squared-exponential kernel with length scale l, a fixed scale theta per row. For every theta the
model is fitted by CAVI; the table shows its ELBO, its collapsed bound E_q[log p(X|psi)] - KL and
an importance-sampling estimate of log p(X | theta) with q (covariance inflated 1.5x) as the
proposal, stick by stick on the observed covariates (a stochastic lower bound in expectation; the
effective sample sizes are printed).

    python benchmarks/evidence_vs_scale.py               # T = 526, l = 2
    python benchmarks/evidence_vs_scale.py --T 2000 --lengthscale 12.73
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings

import numpy as np
from scipy.special import gammaln, log_expit, logsumexp

from corrpriors.core import CorrelatedMultinomial
from corrpriors.core.stick_breaking import count_statistics
from corrpriors.envs import tunnel_world
from corrpriors.experiments.system_id import _cumulative_counts, random_walk
from corrpriors.kernels import SquaredExponential


def _log_normal(y: np.ndarray, mean: np.ndarray, chol: np.ndarray) -> np.ndarray:
    """log N(y; mean, L L^T) for rows y of shape (n, d)."""
    r = np.linalg.solve(chol, (y - mean).T)
    d = chol.shape[0]
    return -0.5 * (r ** 2).sum(0) - np.log(np.diag(chol)).sum() - 0.5 * d * np.log(2 * np.pi)


def importance_log_evidence(m: CorrelatedMultinomial, counts: np.ndarray, n: int,
                            rng: np.random.Generator, inflate: float = 1.5):
    """Sum over sticks of log mean_s p(x_k | psi_s) p(psi_s) / r(psi_s), r = N(lambda, inflate V)."""
    b, _ = count_statistics(counts)
    x = counts[:, :-1]
    sigma = m.covariance_ * m.scale_
    total, ess = 0.0, []
    for k in range(b.shape[1]):
        obs = np.flatnonzero(b[:, k] > 0)
        if obs.size == 0:
            continue
        prior = sigma[np.ix_(obs, obs)]
        site = m.result_.site_precision[obs, k]
        v = np.linalg.inv(np.linalg.inv(prior) + np.diag(site))   # dense: a diagnostic script
        v = 0.5 * (v + v.T)
        lam, mu = m.psi_mean_[obs, k], m.mean_[obs, k]
        chol_r = np.linalg.cholesky(inflate * v)
        psi = lam + rng.standard_normal((n, obs.size)) @ chol_r.T
        bb, xx = b[obs, k], x[obs, k]
        loglik = (gammaln(bb + 1) - gammaln(xx + 1) - gammaln(bb - xx + 1)
                  + xx * log_expit(psi) + (bb - xx) * log_expit(-psi)).sum(1)
        log_w = loglik + _log_normal(psi, mu, np.linalg.cholesky(prior)) - _log_normal(psi, lam, chol_r)
        total += logsumexp(log_w) - np.log(n)
        w = np.exp(log_w - log_w.max())
        ess.append(w.sum() ** 2 / (w ** 2).sum() / n)
    return float(total), float(np.min(ess)), float(np.median(ess))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--T", type=int, default=526, help="transitions of the random walk")
    p.add_argument("--lengthscale", type=float, default=2.0)
    p.add_argument("--action", type=int, default=0)
    p.add_argument("--draws", type=int, default=4000, help="importance draws per stick")
    p.add_argument("--scales", type=float, nargs="*", default=[1e-3, 1e-2, 0.1, 0.3, 1.0, 3.0, 10.0])
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    mdp = tunnel_world()
    coords = np.asarray(mdp.coordinates, dtype=float)
    s, a, s2 = random_walk(mdp, args.T, np.random.default_rng(0))
    counts = _cumulative_counts(mdp.n_states, mdp.n_actions, s, a, s2, [args.T])[0]
    counts = counts[:, args.action, :].astype(float)
    kernel = SquaredExponential(lengthscale=args.lengthscale).bind(coords=coords)
    rng = np.random.default_rng(1)
    print(f"{'theta':>8} {'ELBO':>10} {'collapsed':>10} {'IS log p':>10} {'ESS min/median':>15}")
    rows = []
    for theta in args.scales:
        m = CorrelatedMultinomial(kernel, scale=theta, max_iter=3000, tol=1e-10).fit(counts)
        lp, e_min, e_med = importance_log_evidence(m, counts, args.draws, rng)
        rows.append({"theta": theta, "elbo": m.elbo_, "collapsed": m.collapsed_bound(),
                     "is_log_evidence": lp, "ess_min": e_min, "ess_median": e_med})
        r = rows[-1]
        print(f"{theta:>8g} {r['elbo']:>10.2f} {r['collapsed']:>10.2f} {lp:>10.2f} "
              f"{e_min:>7.3f}/{e_med:.3f}", flush=True)
    for prior in (None, (2.0, 1.0)):
        m = CorrelatedMultinomial(kernel, learn_scale=True, scale_prior=prior, max_iter=5000,
                                  tol=1e-10).fit(counts)
        print(f"EM on the ELBO, scale prior {prior}: theta = {m.scale_:.3g} "
              f"({m.n_iter_} iterations, converged {m.converged_})")
        rows.append({"em_scale_prior": prior, "theta": m.scale_})
    print(json.dumps({"T": args.T, "lengthscale": args.lengthscale, "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
