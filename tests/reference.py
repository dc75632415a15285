"""Naive dense transcription of the paper's CAVI updates (oracle for tests and the benchmark).

Loop based, explicit inverses, no use of the observed sets: exactly the equations of section 3
and appendices A-B of Alt, Sosic & Koeppl (2019), with the printed typos corrected
(log|Sigma|, C(K-1)/2, 1/((K-1)C)). Slow on purpose; lives in tests only.
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln


def naive_counts_stats(counts):
    """b, kappa, x by explicit loops."""
    counts = np.asarray(counts, dtype=float)
    c, k = counts.shape
    b = np.zeros((c, k - 1))
    for i in range(c):
        for j in range(k - 1):
            b[i, j] = counts[i].sum() - counts[i, :j].sum()
    x = counts[:, :-1]
    return b, x - b / 2.0, x


def naive_pg_mean(b, w):
    """E[omega] = b tanh(w/2) / (2w), limit b/4 at w = 0."""
    out = np.zeros_like(np.asarray(w, dtype=float))
    for idx, wi in np.ndenumerate(w):
        bi = b[idx]
        out[idx] = bi / 4.0 if abs(wi) < 1e-8 else bi * np.tanh(wi / 2.0) / (2.0 * wi)
    return out


def naive_elbo(sigma, mu, lam, vs, w, b, kappa, x):
    """The paper's ELBO (typos corrected), with explicit inverses and log-determinants."""
    c, km1 = mu.shape
    sinv = np.linalg.inv(sigma)
    _, logdet_s = np.linalg.slogdet(sigma)
    total = 0.0
    for k in range(km1):
        _, logdet_v = np.linalg.slogdet(vs[k])
        dk = mu[:, k] - lam[:, k]
        total += -0.5 * logdet_s + 0.5 * logdet_v - 0.5 * np.trace(sinv @ vs[k]) \
            - 0.5 * dk @ sinv @ dk + 0.5 * c
        for i in range(c):
            total += (gammaln(b[i, k] + 1) - gammaln(x[i, k] + 1) - gammaln(b[i, k] - x[i, k] + 1)
                      - b[i, k] * np.log(2.0) + lam[i, k] * kappa[i, k]
                      - b[i, k] * np.log(np.cosh(w[i, k] / 2.0)))
    return total


def naive_cavi(counts, sigma_tilde, mean, *, scale=1.0, learn_scale=False, learn_mean=None,
               max_iter=1000, tol=1e-8):
    """Naive CAVI with the same order as the library: psi step, omega step, ELBO, M-step.

    Parameters
    ----------
    counts : ndarray of shape (C, K)
    sigma_tilde : ndarray of shape (C, C)
        The (already jittered) base covariance.
    mean : ndarray of shape (C, K - 1)
    scale : float
    learn_scale : bool
    learn_mean : None or "constant"

    Returns
    -------
    dict with psi_mean, psi_var, V (list of (C, C)), elbo_trace, scale, mean, n_iter
    """
    b, kappa, x = naive_counts_stats(counts)
    c, km1 = b.shape
    mu = np.array(mean, dtype=float, copy=True)
    if learn_mean == "constant":
        mu = np.repeat(mu.mean(axis=0)[None, :], c, axis=0)
    theta = float(scale)
    w = np.sqrt(theta * np.diag(sigma_tilde)[:, None] + mu ** 2)
    ew = naive_pg_mean(b, w)
    trace = []
    lam = np.zeros((c, km1))
    vs = [None] * km1
    for _ in range(max_iter):
        sigma = theta * sigma_tilde
        sinv = np.linalg.inv(sigma)
        for k in range(km1):
            vs[k] = np.linalg.inv(sinv + np.diag(ew[:, k]))
            lam[:, k] = vs[k] @ (kappa[:, k] + sinv @ mu[:, k])
        for k in range(km1):
            for i in range(c):
                w[i, k] = np.sqrt(vs[k][i, i] + lam[i, k] ** 2)
        ew = naive_pg_mean(b, w)
        trace.append(naive_elbo(sigma, mu, lam, vs, w, b, kappa, x))
        if len(trace) > 1 and abs(trace[-1] - trace[-2]) <= tol * abs(trace[-1]):
            break
        if len(trace) == max_iter:
            break
        if learn_scale:
            st_inv = np.linalg.inv(sigma_tilde)
            total = 0.0
            for k in range(km1):
                dk = mu[:, k] - lam[:, k]
                total += np.trace(st_inv @ (vs[k] + np.outer(dk, dk)))
            theta = total / (km1 * c)
        if learn_mean == "constant":
            sinv = np.linalg.inv(theta * sigma_tilde)
            one = np.ones(c)
            for k in range(km1):
                mu[:, k] = (one @ sinv @ lam[:, k]) / (one @ sinv @ one)
    psi_var = np.stack([np.diag(v) for v in vs], axis=1)
    return {"psi_mean": lam.copy(), "psi_var": psi_var, "V": [v.copy() for v in vs],
            "elbo_trace": np.asarray(trace), "scale": theta, "mean": mu, "n_iter": len(trace)}


def dense_posterior(sigma, mu, kappa, site):
    """The psi step by explicit inverses: V_k = (Sigma^-1 + diag e_k)^-1,
    lambda_k = V_k (kappa_k + Sigma^-1 mu_k), per stick, and the ELBO's per-stick numbers.

    Parameters
    ----------
    sigma : ndarray of shape (C, C)
        Prior covariance (scaled).
    mu, kappa, site : ndarray of shape (C, K - 1)
        Prior means, linear site terms and site precisions (0 where unobserved).

    Returns
    -------
    dict with lam, var (C, K - 1), V (list of (C, C)), trace_dv, quad, logdet_b, alpha
    """
    c, km1 = mu.shape
    sinv = np.linalg.inv(sigma)
    out = {"lam": np.empty((c, km1)), "var": np.empty((c, km1)), "V": [],
           "trace_dv": np.empty(km1), "quad": np.empty(km1), "logdet_b": np.empty(km1),
           "alpha": np.empty((c, km1))}
    for k in range(km1):
        v = np.linalg.inv(sinv + np.diag(site[:, k]))
        lam = v @ (kappa[:, k] + sinv @ mu[:, k])
        d = lam - mu[:, k]
        out["lam"][:, k], out["var"][:, k] = lam, np.diag(v)
        out["V"].append(v)
        out["trace_dv"][k] = np.sum(site[:, k] * np.diag(v))
        out["quad"][k] = d @ sinv @ d
        out["logdet_b"][k] = np.linalg.slogdet(sigma)[1] - np.linalg.slogdet(v)[1]
        out["alpha"][:, k] = sinv @ d
    return out


def naive_tilted(m, v, b, x):
    """log Z, mean and variance of N(psi; m, v) Bin(x; b, sigmoid(psi)) by adaptive quadrature."""
    from scipy import integrate, optimize
    from scipy.special import expit

    lb = gammaln(b + 1) - gammaln(x + 1) - gammaln(b - x + 1)
    mode = optimize.brentq(lambda p: (m - p) / v + x - b * expit(p), m + v * (x - b) - 1,
                           m + v * x + 1, xtol=1e-13)
    peak = -0.5 * (mode - m) ** 2 / v + x * mode - b * np.logaddexp(0, mode)

    def dens(p):
        return np.exp(-0.5 * (p - m) ** 2 / v + x * p - b * np.logaddexp(0, p) - peak)

    lo, hi = mode - 14 * np.sqrt(v), mode + 14 * np.sqrt(v)
    s = 1 / np.sqrt(1 / v + b * expit(mode) * (1 - expit(mode)))
    pts = [q for q in (mode - 10 * s, mode - s, mode, mode + s, mode + 10 * s) if lo < q < hi]
    kw = dict(points=pts, limit=400, epsabs=0, epsrel=1e-12)
    z = integrate.quad(dens, lo, hi, **kw)[0]
    m1 = integrate.quad(lambda p: (p - mode) * dens(p), lo, hi, **kw)[0] / z
    m2 = integrate.quad(lambda p: (p - mode - m1) ** 2 * dens(p), lo, hi, **kw)[0] / z
    return peak + np.log(z) - 0.5 * np.log(2 * np.pi * v) + lb, mode + m1, m2


def naive_ep(counts, sigma, mu, *, n_sweeps=60):
    """Sequential EP, site by site, with explicit inverses and quadrature moments; the log
    evidence as log prod_i Z~_i + log N(mu~; mu_O, Sigma_OO + S~^-1) (R & W 2006, 3.65).

    Parameters
    ----------
    counts : ndarray of shape (C, K)
    sigma : ndarray of shape (C, C)
        Prior covariance (scaled).
    mu : ndarray of shape (C, K - 1)

    Returns
    -------
    dict with mean, var, tau, nu (C, K - 1) and log_evidence
    """
    b, _, x = naive_counts_stats(counts)
    c, km1 = mu.shape
    tau, nu = np.zeros((c, km1)), np.zeros((c, km1))
    out = {"mean": np.empty((c, km1)), "var": np.empty((c, km1)), "log_evidence": 0.0}
    for k in range(km1):
        obs = [i for i in range(c) if b[i, k] > 0]
        log_zt = {}
        for _ in range(n_sweeps):
            for i in obs:
                v = np.linalg.inv(np.linalg.inv(sigma) + np.diag(tau[:, k]))
                lam = v @ (nu[:, k] + np.linalg.solve(sigma, mu[:, k]))
                cav_p = 1 / v[i, i] - tau[i, k]
                cav_m = (lam[i] / v[i, i] - nu[i, k]) / cav_p
                lz, mh, vh = naive_tilted(cav_m, 1 / cav_p, b[i, k], x[i, k])
                tau[i, k] = 1 / vh - cav_p
                nu[i, k] = mh / vh - cav_m * cav_p
                st = 1 / tau[i, k]
                log_zt[i] = (lz + 0.5 * np.log(2 * np.pi * (1 / cav_p + st))
                             + 0.5 * (nu[i, k] * st - cav_m) ** 2 / (1 / cav_p + st))
        v = np.linalg.inv(np.linalg.inv(sigma) + np.diag(tau[:, k]))
        out["mean"][:, k] = v @ (nu[:, k] + np.linalg.solve(sigma, mu[:, k]))
        out["var"][:, k] = np.diag(v)
        if obs:
            mt = nu[obs, k] / tau[obs, k]
            s = sigma[np.ix_(obs, obs)] + np.diag(1 / tau[obs, k])
            d = mt - mu[obs, k]
            out["log_evidence"] += (sum(log_zt.values()) - 0.5 * np.linalg.slogdet(2 * np.pi * s)[1]
                                    - 0.5 * d @ np.linalg.solve(s, d))
    out["tau"], out["nu"] = tau, nu
    return out
