r"""Cancellation-free special functions for log-likelihoods at large counts.

The binomial and Dirichlet-multinomial log-probabilities of counts near :math:`10^{15}` are sums
of terms of size :math:`10^{15}` (``gammaln`` values, :math:`\kappa\lambda`,
:math:`b\log\cosh(w/2)`) whose total is of order :math:`\log b`; evaluated term by term they
lose every digit. The functions here compute the small totals directly, each from quantities
that are themselves small or of one sign:

- :func:`stirlerr` and :func:`bd0` are C. Loader's saddle-point primitives (the ones behind R's
  ``dbinom``): :math:`\log\Gamma` minus its Stirling approximation, and the deviance term
  :math:`x\log(x/m) + m - x \ge 0`;
- :func:`log_binomial_at_mle` and :func:`binomial_deviance` split
  :math:`\log Bin(x; b, \sigma(\lambda))` into
  :math:`\log Bin(x; b, x/b) - b\,KL(x/b \,\|\, \sigma(\lambda))`, and
  :func:`log_binomial_coefficient` is :math:`\log\binom bx` without ``gammaln`` differences;
- :func:`log_cosh_half_gap` is :math:`\log\cosh(w/2) - \log\cosh(\lambda/2)` at
  :math:`w = \sqrt{v + \lambda^2}`, and :func:`softplus_gap` is the Jensen gap
  :math:`E[\log(1+e^\psi)] - \log(1+e^\lambda)` under :math:`N(\lambda, v)`; both are small
  and positive, and are computed as such (never as a difference of two large numbers);
- :func:`dirichlet_multinomial_logpmf` is the Polya log-probability in the same
  deviance form.

References
----------
C. Loader (2000), "Fast and accurate computation of binomial probabilities".
"""

from __future__ import annotations

import numpy as np
from scipy.special import erfcx, gammaln, log_ndtr, ndtr, xlogy

from ._typing import FloatArray

_HALF_LOG_2PI = 0.5 * np.log(2.0 * np.pi)

# Stirling series of log Gamma: B_2j / (2j (2j - 1)), j = 1..7 (the next term is < 1e-16
# relative at z = 15).
_STIRLING = np.array([1.0 / 12, -1.0 / 360, 1.0 / 1260, -1.0 / 1680, 1.0 / 1188,
                      -691.0 / 360360, 1.0 / 156])
_STIRLING_CUT = 15.0


def stirlerr(z: np.ndarray) -> FloatArray:
    r"""Error of Stirling's formula, :math:`\log\Gamma(z) - [(z - \tfrac12)\log z - z +
    \tfrac12\log 2\pi]` (equivalently :math:`\log z! - [(z + \tfrac12)\log z - z +
    \tfrac12\log 2\pi]`), for real :math:`z > 0`.

    The Stirling series above :math:`z = 15` (error below 1e-16 relative), ``gammaln``
    below (absolute error about 1e-15).

    Parameters
    ----------
    z : ndarray of shape (...)
        Positive arguments.

    Returns
    -------
    ndarray of shape (...)
    """
    z = np.asarray(z, dtype=float)
    big = z > _STIRLING_CUT
    zb = np.where(big, z, _STIRLING_CUT + 1.0)
    u = 1.0 / (zb * zb)
    series = _STIRLING[-1]
    for c in _STIRLING[-2::-1]:
        series = series * u + c
    series = series / zb
    zs = np.where(big, 1.0, z)
    direct = gammaln(zs) - (zs - 0.5) * np.log(zs) + zs - _HALF_LOG_2PI
    return np.where(big, series, direct)


# 1 / (2j + 3), j = 0..8: the tail of bd0's series sum_j 2 x v^(2j+1) / (2j+1) beyond j = 0,
# for |v| < 0.1 (the next term is below 1e-19 relative).
_BD0_SERIES = 1.0 / (2.0 * np.arange(9) + 3.0)
# Up to this |x - m| the one-line form x log1p((x - m)/m) - (x - m), whose cancellation costs
# about 3 eps |x - m| absolute, is used; beyond it the careful form.
_BD0_FAST_DELTA = 256.0
_ABOVE_MINUS_ONE = -1.0 + 2.0 ** -53
_UNDERFLOW_LOGIT = 700.0  # exp(-700) ~ 1e-304, still a normal float


def _bd0_careful(x: np.ndarray, m: np.ndarray, delta: np.ndarray) -> FloatArray:
    """bd0 to a few ulps: Loader's series near ``x = m``, ``x log1p(delta/m) - delta`` away."""
    total = x + m
    near = np.abs(delta) < 0.1 * total
    v = np.where(near, delta, 0.0) / np.where(near, total, 1.0)
    v2 = v * v
    poly = _BD0_SERIES[-1]
    for c in _BD0_SERIES[-2::-1]:
        poly = poly * v2 + c
    series = delta * v + 2.0 * x * v * v2 * poly
    pos_x, pos_m = x > 0, m > 0
    ratio = np.where(pos_x & pos_m, delta, 0.0) / np.where(pos_m, m, 1.0)
    far = np.where(pos_x, np.where(pos_m, x * np.log1p(ratio), np.inf), 0.0) - delta
    return np.where(near, series, far)


def bd0(x: np.ndarray, m: np.ndarray, delta: np.ndarray) -> FloatArray:
    r"""Loader's deviance term :math:`x\log(x/m) + m - x \ge 0`.

    The caller passes both :math:`m` and :math:`\delta = x - m`, each computed accurately
    (:math:`\delta` is the quantity that must not be formed by subtracting two large numbers).
    For :math:`|\delta| \le 256`: :math:`x\,\mathrm{log1p}(\delta/m) - \delta`, accurate to a
    few ulps of :math:`x|\log(x/m)| + |\delta|` (below 2e-13 absolute when the result is
    small). Beyond: Loader's series
    :math:`\delta v + 2x\sum_{j\ge1} v^{2j+1}/(2j+1)`, :math:`v = \delta/(x + m)`, where
    :math:`|v| < 0.1` (no cancellation), and the log1p form otherwise (its cancellation is
    then at most a factor 10). ``bd0(0, m, -m) = m``; ``m = 0 < x`` gives ``inf``.

    Parameters
    ----------
    x, m : ndarray of shape (...)
        Non-negative.
    delta : ndarray of shape (...)
        :math:`x - m`, same shape.

    Returns
    -------
    ndarray of shape (...)
    """
    x = np.asarray(x, dtype=float)
    m = np.asarray(m, dtype=float)
    delta = np.asarray(delta, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        # x = 0 < m: delta / m = -1, kept just above so that 0 * log1p(.) = 0; x = m = 0: nan,
        # dropped by fmax, likewise; m = 0 < x: inf (probability 0)
        out = np.asarray(x * np.log1p(np.fmax(delta / m, _ABOVE_MINUS_ONE)) - delta)
    fix = np.abs(delta) > _BD0_FAST_DELTA
    if fix.any():
        out[fix] = _bd0_careful(x[fix], m[fix], delta[fix])
    return out


def log_binomial_at_mle(b: np.ndarray, x: np.ndarray) -> FloatArray:
    r""":math:`\log Bin(x; b, x/b) = \log\binom{b}{x} + x\log\frac{x}{b} + (b-x)\log\frac{b-x}{b}`,
    the binomial log-probability at its maximising success probability (:math:`\le 0`).

    Loader's form :math:`s(b) - s(x) - s(b - x) - \tfrac12\log(2\pi x(b-x)/b)` with
    :math:`s` = :func:`stirlerr`; 0 where :math:`x = 0` or :math:`x = b` (also for
    :math:`b = 0`).

    Parameters
    ----------
    b, x : ndarray of shape (...)
        Integer-valued trials and successes, :math:`0 \le x \le b`.

    Returns
    -------
    ndarray of shape (...)
    """
    b = np.asarray(b, dtype=float)
    x = np.asarray(x, dtype=float)
    y = b - x
    inner = (x > 0) & (y > 0)
    bb, xx, yy = (np.where(inner, t, 1.0) for t in (b, x, y))
    val = (stirlerr(bb) - stirlerr(xx) - stirlerr(yy)
           - 0.5 * np.log(2.0 * np.pi * xx * (yy / bb)))
    return np.where(inner, val, 0.0)


def log_binomial_coefficient(b: np.ndarray, x: np.ndarray) -> FloatArray:
    r""":math:`\log\binom{b}{x}` to a few ulps for integers up to :math:`2^{53}`.

    :func:`log_binomial_at_mle` minus :math:`x\log\frac xb + (b-x)\log\frac{b-x}{b}` (two
    terms of one sign: no cancellation, unlike the difference of three ``gammaln`` values,
    which loses :math:`\epsilon\,b\log b` absolute).

    Parameters
    ----------
    b, x : ndarray of shape (...)
        Integer-valued, :math:`0 \le x \le b`.

    Returns
    -------
    ndarray of shape (...)
    """
    b = np.asarray(b, dtype=float)
    x = np.asarray(x, dtype=float)
    y = b - x
    bs = np.where(b > 0, b, 1.0)

    def xlog_share(c, rest):  # c log(c / b), through log1p(-rest / b) when c / b is near 1
        big = c > rest
        return np.where(big, c * np.log1p(-np.where(big, rest, 0.0) / bs), xlogy(c, c / bs))

    return log_binomial_at_mle(b, x) - xlog_share(x, y) - xlog_share(y, x)


def binomial_deviance(b: np.ndarray, x: np.ndarray, logit: np.ndarray) -> FloatArray:
    r""":math:`b\,KL(x/b \,\|\, \sigma(\lambda)) = \log Bin(x; b, x/b) - \log Bin(x; b,
    \sigma(\lambda)) \ge 0`.

    :math:`bd0(x, bp) + bd0(b - x, bq)` with :math:`p = \sigma(\lambda)`,
    :math:`q = \sigma(-\lambda)` (:func:`bd0`). :math:`\delta = x - bp = bq - (b - x)` is formed
    on the side of the smaller of :math:`bp, bq` (its rounding error is
    :math:`\epsilon b\sigma(-|\lambda|)`), so the result is accurate to a few ulps plus
    :math:`O(\epsilon|\delta|)` absolute -- backward stable, since
    :math:`\partial_\lambda` of the deviance is :math:`-\delta`. For :math:`|\lambda| > 700`, where
    :math:`\sigma(-|\lambda|)` underflows, the small side's term is taken in log space.

    Parameters
    ----------
    b, x, logit : ndarray of shape (...)
        Trials, successes (integer-valued, :math:`0 \le x \le b`) and the success logit
        :math:`\lambda`, same shape. Entries with :math:`b = 0` give 0.

    Returns
    -------
    ndarray of shape (...)
    """
    b = np.asarray(b, dtype=float)
    x = np.asarray(x, dtype=float)
    lam = np.asarray(logit, dtype=float)
    a = np.abs(lam)
    e = np.exp(-a)
    m_big = b / (1.0 + e)  # b sigma(|lambda|)
    m_small = m_big * e  # b sigma(-|lambda|), the smaller of bp and bq
    c_small = 0.5 * b - (x - 0.5 * b) * np.copysign(1.0, lam)  # the count on that side (exact)
    delta = c_small - m_small
    dev = np.asarray(bd0(c_small, m_small, delta) + bd0(b - c_small, m_big, -delta))
    under = a > _UNDERFLOW_LOGIT
    if under.any():  # sigma(-|lambda|) underflows: the small side's term in log space
        bu, cu, au = b[under], c_small[under], a[under]
        log_ratio = np.log(np.where(cu > 0, cu / np.where(bu > 0, bu, 1.0), 1.0)) + au
        dev[under] = (np.where(cu > 0, cu * log_ratio - cu, 0.0)
                      + bd0(bu - cu, bu, -cu))  # m_small ~ 0 next to c_small
    return dev


def log_cosh_half(w: np.ndarray) -> FloatArray:
    """Stable ``log(cosh(w / 2))`` for any real ``w``.

    Parameters
    ----------
    w : ndarray of shape (...)

    Returns
    -------
    ndarray of shape (...)
    """
    a = np.abs(np.asarray(w, dtype=float)) * 0.5
    return a + np.log1p(np.exp(-2.0 * a)) - np.log(2.0)


def log_cosh_half_gap(mean: np.ndarray, var: np.ndarray,
                      w: np.ndarray | None = None) -> FloatArray:
    r""":math:`\log\cosh(w/2) - \log\cosh(\lambda/2) \ge 0` at :math:`w = \sqrt{v + \lambda^2}`.

    With :math:`a = |\lambda|/2`, :math:`h = (w - |\lambda|)/2 = v / (2(w + |\lambda|))` (no
    subtraction), :math:`t = \tanh a` and :math:`E = e^h - 1`,
    :math:`\cosh(a + h)/\cosh a = \cosh h + t\sinh h = 1 + E\,\frac{E + t(E + 2)}{2(1 + E)}`,
    a sum of non-negative terms, so the gap is the ``log1p`` of the last product (relative
    accuracy a few ulps); for :math:`h > 350` it is :math:`h + \log\frac{1 + t}{2}`.

    Parameters
    ----------
    mean, var : ndarray of shape (...)
        :math:`\lambda` and :math:`v \ge 0`.
    w : ndarray of shape (...), optional
        :math:`\sqrt{v + \lambda^2}` (:func:`~corrpriors.core.elbo.optimal_tilts`), if
        already computed.

    Returns
    -------
    ndarray of shape (...)
    """
    lam = np.abs(np.asarray(mean, dtype=float))
    var = np.maximum(np.asarray(var, dtype=float), 0.0)
    if w is None:
        w = np.sqrt(var + lam * lam)
    h = 0.5 * var / np.maximum(w + lam, np.finfo(float).tiny)
    t = np.tanh(0.5 * lam)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.expm1(h)
        gap = np.log1p(e * ((e + t * (e + 2.0)) / (2.0 * (1.0 + e))))
    if h.max(initial=0.0) > 350.0:
        gap = np.where(h > 350.0, h + np.log(0.5 * (1.0 + t)), gap)
    return gap


# Jensen gap of softplus, narrow Gaussians: 64-point Gauss-Hermite (probabilists', weights
# summing to 1), folded onto its 32 positive nodes: the pair psi = lambda +- s z contributes
# log1p((sinh(s z / 2) / cosh(lambda / 2))^2) (no cancellation).
_GH_NODES, _GH_WEIGHTS = np.polynomial.hermite_e.hermegauss(64)
_GH_WEIGHTS = _GH_WEIGHTS / _GH_WEIGHTS.sum()
_GH_POS = _GH_NODES > 0
_GH_Z, _GH_W = _GH_NODES[_GH_POS], _GH_WEIGHTS[_GH_POS]

# Wide Gaussians: Gauss-Legendre (10 points) on panels of [0, 40], refined towards 0, for the
# truncated-normal expectations of 1 - rho(y), rho(y) = e^y log1p(e^-y) (see softplus_gap).
_GL_X, _GL_W = np.polynomial.legendre.leggauss(10)
_HALF_EDGES = np.concatenate([[0.0, 1 / 16, 1 / 8, 1 / 4, 1 / 2], np.arange(1.0, 41.0)])
_HALF_WIDTH = np.diff(_HALF_EDGES)
_HALF_NODES = (_HALF_EDGES[:-1, None] + 0.5 * _HALF_WIDTH[:, None] * (_GL_X + 1.0)).ravel()
_HALF_WEIGHTS = (0.5 * _HALF_WIDTH[:, None] * _GL_W).ravel()
_U = np.exp(-_HALF_NODES)
_ONE_MINUS_RHO = (_U - np.log1p(_U)) / _U  # 1 - rho(y), in [0, 1 - log 2], ~ e^-y / 2


def _normal_loss(a: np.ndarray) -> FloatArray:
    r""":math:`E[(Z - a)^+] = \varphi(a) - a\Phi(-a)` for :math:`a \ge 0` (positive, relative
    accuracy about :math:`a^2\epsilon`).
    """
    phi = np.exp(-0.5 * a * a) / np.sqrt(2.0 * np.pi)
    mills = np.sqrt(0.5 * np.pi) * erfcx(a / np.sqrt(2.0))  # Phi(-a) / phi(a)
    return np.where(a <= 1.0, phi - a * ndtr(-a), phi * (1.0 - a * mills))


def _truncated_rho_mean(mu: np.ndarray, s: np.ndarray) -> FloatArray:
    r""":math:`E[\rho(Y) \mid Y > 0]` for :math:`Y \sim N(\mu, s^2)`, :math:`s \ge 1`, as
    :math:`1 - E[1 - \rho(Y) \mid Y > 0]` (a value in :math:`[\log 2, 1]`).
    """
    z = (_HALF_NODES[None, :] - mu[:, None]) / s[:, None]
    log_dens = (-0.5 * z * z - np.log(s)[:, None] - _HALF_LOG_2PI
                - log_ndtr(mu / s)[:, None])
    return 1.0 - np.exp(log_dens) @ (_HALF_WEIGHTS * _ONE_MINUS_RHO)


def _softplus_gap_wide(m: np.ndarray, s: np.ndarray) -> FloatArray:
    r"""Jensen gap for :math:`m \ge 0`, :math:`s \ge 1`.

    :math:`\log(1+e^\psi) = \max(\psi, 0) + t(\psi)`, :math:`t(\psi) = \log(1 + e^{-|\psi|})`;
    :math:`E\max(\psi, 0) - m = s\,L(m/s)` (:func:`_normal_loss`), and with
    :math:`t(\psi) = e^{-|\psi|}\rho(|\psi|)` each half-line of :math:`E\,t(\psi)` is a shifted
    Gaussian mass times a truncated-normal mean of the bounded :math:`\rho`:
    :math:`E\,t = e^{-m + s^2/2}\Phi(\frac{m - s^2}{s})\bar\rho_+ +
    e^{m + s^2/2}\Phi(\frac{-m - s^2}{s})\bar\rho_-`. Every piece is relatively accurate, and for
    :math:`s \ge 1` the sum :math:`sL + E\,t - t(m)` cancels at most a few digits.
    """
    s2 = s * s
    mu_p, mu_m = m - s2, -m - s2
    e_t = (np.exp(-m + 0.5 * s2 + log_ndtr(mu_p / s)) * _truncated_rho_mean(mu_p, s)
           + np.exp(m + 0.5 * s2 + log_ndtr(mu_m / s)) * _truncated_rho_mean(mu_m, s))
    return s * _normal_loss(m / s) + e_t - np.log1p(np.exp(-m))


def softplus_gap(mean: np.ndarray, var: np.ndarray) -> FloatArray:
    r"""Jensen gap :math:`E[\log(1 + e^{\psi})] - \log(1 + e^{\lambda}) \ge 0` for
    :math:`\psi \sim N(\lambda, v)`, to about 1e-13 relative.

    Even in :math:`\lambda`. For :math:`v < 1`: 64-point Gauss-Hermite folded onto symmetric
    node pairs, whose sum is
    :math:`\mathrm{log1p}(4\sigma(\lambda)\sigma(-\lambda)\sinh^2(s z/2))` (positive terms, no
    cancellation). For :math:`v \ge 1` (where Gauss-Hermite converges slowly): the split of
    :func:`_softplus_gap_wide`.

    Parameters
    ----------
    mean, var : ndarray of shape (...)

    Returns
    -------
    ndarray of shape (...)
    """
    m = np.abs(np.asarray(mean, dtype=float)).ravel()
    v = np.maximum(np.asarray(var, dtype=float), 0.0).ravel()
    sd = np.sqrt(v)
    out = np.empty_like(m)
    narrow = v < 1.0
    if narrow.any():
        with np.errstate(over="ignore"):  # cosh(|lambda| / 2) = inf: the gap is 0
            ratio = np.sinh(0.5 * sd[narrow, None] * _GH_Z) / np.cosh(0.5 * m[narrow, None])
        out[narrow] = np.log1p(ratio * ratio) @ _GH_W
    wide = ~narrow
    if wide.any():
        out[wide] = _softplus_gap_wide(m[wide], sd[wide])
    return out.reshape(np.shape(mean))


def expected_softplus(mean: np.ndarray, var: np.ndarray) -> FloatArray:
    r""":math:`E[\log(1 + e^{\psi})]` for :math:`\psi \sim N(m, v)`:
    :math:`\log(1 + e^m)` plus :func:`softplus_gap`.

    Parameters
    ----------
    mean, var : ndarray of shape (...)

    Returns
    -------
    ndarray of shape (...)
    """
    return np.logaddexp(0.0, np.asarray(mean, dtype=float)) + softplus_gap(mean, var)


def dirichlet_multinomial_logpmf(x: np.ndarray, alpha: np.ndarray) -> FloatArray:
    r"""Row-wise Dirichlet-multinomial (Polya) log-probability, multinomial coefficient
    included, without cancellation for huge counts or concentrations.

    With :math:`t_k = \alpha_k + x_k`, :math:`A = \sum_k\alpha_k`, :math:`N = \sum_k x_k`,
    :math:`T = A + N` and :math:`\delta_k = (x_kA - \alpha_kN)/T`, substituting
    :math:`\log\Gamma(z) = (z - \tfrac12)\log z - z + \tfrac12\log 2\pi + s(z)`
    (:func:`stirlerr`) in every Gamma function, the linear terms cancel and the
    :math:`z\log z` terms combine into :math:`-\sum_k t_k KL(x_k/t_k \,\|\, N/T)`, which is
    :math:`-\sum_k [bd0(x_k, t_kN/T) + bd0(\alpha_k, t_kA/T)]` (:func:`bd0`, with
    :math:`x_k - t_kN/T = \delta_k = t_kA/T - \alpha_k`):

    .. math::

        \log p(x) = -\sum_k [bd0(x_k, t_kN/T) + bd0(\alpha_k, t_kA/T)]
          + \tfrac12\sum_{x_k > 0}\log\frac{\alpha_k}{t_k x_k} - \tfrac12\log\frac{A}{TN}
          + \frac{1 - K'}{2}\log 2\pi
          + s(N) + s(A) - s(T) + \sum_{x_k > 0}[s(t_k) - s(\alpha_k) - s(x_k)],

    :math:`K'` the number of non-zero counts. A row of zeros has log-probability 0.

    Parameters
    ----------
    x : ndarray of shape (C, K)
        Non-negative integer-valued counts (row totals up to :math:`2^{53}`).
    alpha : ndarray of shape (C, K)
        Positive concentrations with finite row sums.

    Returns
    -------
    ndarray of shape (C,)
    """
    x = np.asarray(x, dtype=float)
    alpha = np.asarray(alpha, dtype=float)
    n = x.sum(axis=1)
    a_sum = alpha.sum(axis=1)
    t_all = a_sum + n
    t = alpha + x
    delta = (x * a_sum[:, None] - alpha * n[:, None]) / t_all[:, None]
    dev = (bd0(x, t * (n / t_all)[:, None], delta)
           + bd0(alpha, t * (a_sum / t_all)[:, None], -delta)).sum(axis=1)
    pos = x > 0
    xs, ts = np.where(pos, x, 1.0), np.where(pos, t, 1.0)
    per_k = np.where(pos, 0.5 * (np.log(alpha / ts) - np.log(xs))
                     + stirlerr(ts) - stirlerr(np.where(pos, alpha, 1.0)) - stirlerr(xs), 0.0)
    nonzero = n > 0
    ns = np.where(nonzero, n, 1.0)
    whole = (-0.5 * (np.log(a_sum / t_all) - np.log(ns)) + (1.0 - pos.sum(axis=1)) * _HALF_LOG_2PI
             + stirlerr(ns) + stirlerr(a_sum) - stirlerr(t_all))
    return np.where(nonzero, -dev + per_k.sum(axis=1) + whole, 0.0)


def log_half_gamma_ratio(x: np.ndarray) -> FloatArray:
    r""":math:`\log[\Gamma(x + \tfrac12) / \Gamma(x)]` for real :math:`x \ge 0` (``-inf`` at 0).

    Below :math:`x = 15` a ``gammaln`` difference (absolute error about 1e-15; near 0 it is
    :math:`\log x + \log\sqrt\pi + O(x)`); above, from Stirling's formula,
    :math:`\tfrac12\log x + x[\mathrm{log1p}(1/(2x)) - 1/(2x)] + \mathrm{stirlerr}(x + \tfrac12)
    - \mathrm{stirlerr}(x)`, whose terms are all small: no digits are lost at large
    :math:`x`, where ``gammaln(x + 0.5) - gammaln(x)`` loses about :math:`\log_{10}(x \log x)`
    of them. :math:`E[\sqrt{p}]` of a Beta or Dirichlet component is a ratio of two of these.

    Parameters
    ----------
    x : ndarray of shape (...)
        Non-negative arguments.

    Returns
    -------
    ndarray of shape (...)
    """
    x = np.asarray(x, dtype=float)
    flat = x.ravel()
    out = np.full(flat.shape, -np.inf)
    big = flat > _STIRLING_CUT
    near = (flat > 0) & ~big
    xs = flat[near]                                 # each branch only where it is used
    out[near] = gammaln(xs + 0.5) - gammaln(xs)
    xb = flat[big]
    u = 0.5 / xb
    out[big] = 0.5 * np.log(xb) + xb * (np.log1p(u) - u) + stirlerr(xb + 0.5) - stirlerr(xb)
    return out.reshape(x.shape)


__all__ = ["stirlerr", "log_half_gamma_ratio", "bd0", "log_binomial_at_mle", "log_binomial_coefficient",
           "binomial_deviance", "log_cosh_half", "log_cosh_half_gap", "softplus_gap",
           "expected_softplus", "dirichlet_multinomial_logpmf"]
