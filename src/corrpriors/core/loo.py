r"""Approximate leave-one-out predictive probabilities of a fitted model, from its cavities.

The leave-one-out (LOO) log predictive probability of counts :math:`X` sums, over every
observation, the log probability of its category given all the other observations. Refitting
once per observation is too slow; for a latent Gaussian model each covariate's data enter the
posterior of its stick logits through one factor per entry, so the posterior *without* them is
a division (Vehtari, Mononen, Tolvanen, Sivula & Winther 2016):

* the **cavity** of entry :math:`(c, j)` is the marginal of :math:`\psi_{cj}` given the other
  covariates' data, :math:`N(\mu_-, v_-)`, the Gaussian approximation's marginal with the
  entry's Gaussian site divided out;
* the entry's own trials are then put back *exactly*: with :math:`b` trials and :math:`x`
  successes on the stick,
  :math:`Z(x, b) = \int N(\psi; \mu_-, v_-)\,\sigma(\psi)^x\sigma(-\psi)^{b-x}d\psi` (one
  sequence of the trials), by the tilted quadrature of :mod:`corrpriors.core.tilted`;
* an observation of covariate :math:`c` in category :math:`k` succeeds on stick :math:`k` and
  fails on the sticks before it, so its LOO predictive probability is

  .. math::

      p(k \mid c, X_{-1}) = \frac{Z_{ck}(x_{ck}, b_{ck})}{Z_{ck}(x_{ck} - 1, b_{ck} - 1)}
      \prod_{j<k}\frac{Z_{cj}(x_{cj}, b_{cj})}{Z_{cj}(x_{cj}, b_{cj} - 1)},

  exact given the cavities (the sticks are independent a posteriori).

The cavities come from expectation propagation started at the VI fit
(``cavities="ep"``, :func:`ep_cavities`) or from the VI fit itself (``"vi"``,
:func:`entry_cavities`: no extra work, but the mean-field sites are too precise, so the value is
optimistic -- on a 10 x 10 windy grid with 25 transitions by 2.9 nats at the most flexible prior
and by none at the stiffest, against refits without each observation -- which favours flexible
priors). Tested against exact leave-one-out by quadrature (``tests/test_core_loo.py``).
"""

from __future__ import annotations

import numpy as np

from .._special import log_binomial_coefficient
from .._typing import FloatArray
from .._validation import check_counts
from .ep import EPOptions, divide_sites
from .results import VIResult
from .stick_breaking import count_statistics
from .tilted import tilted_moments

#: Where :func:`loo_log_predictive` takes its cavities from.
CAVITIES = ("ep", "vi")

#: How :func:`ep_cavities` runs EP: to a tenth of a marginal standard deviation. One update
#: from the VI sites does most of the correction on small problems (two covariates: error
#: against exact leave-one-out 0.076 nats with the VI cavities, 0.011 after one update), but not
#: with many data (a lakes target with 800 transitions: a similarity's gain 3.4 nats too high);
#: ``tol=1e-2`` is within 0.4 nats of convergence to 1e-4 there.
LOO_EP_OPTIONS = EPOptions(tol=1e-2)


def entry_cavities(result: VIResult, counts: np.ndarray) -> tuple[FloatArray, FloatArray]:
    r"""Every stick logit's marginal without its covariate's data on that stick.

    The fit's :math:`q(\psi_{\cdot j})` is the prior times one Gaussian site per entry,
    :math:`\exp(\kappa_{cj}\psi - e_{cj}\psi^2/2)` (``site_precision`` :math:`e`); dividing
    the marginal :math:`N(m, v)` of :math:`\psi_{cj}` by it leaves what the other covariates
    say: :math:`\tau_- = 1/v - e_{cj}`, :math:`\mu_- = (m/v - \kappa_{cj})/\tau_-`.

    Parameters
    ----------
    result : VIResult
        A fit to ``counts``.
    counts : ndarray of shape (C, K)

    Returns
    -------
    mean, var : ndarray of shape (C, K - 1)
    """
    b, kappa = count_statistics(counts)
    var = np.asarray(result.psi_var, dtype=np.float64)
    site = np.where(b > 0, result.site_precision, 0.0)
    # positive up to round-off (the prior's share): at least 1e-9 of the marginal's precision
    return divide_sites(result.psi_mean, var, site, np.where(b > 0, kappa, 0.0), 1e-9 / var)


def _log_z(mean: np.ndarray, var: np.ndarray, b: np.ndarray, x: np.ndarray) -> FloatArray:
    r""":math:`\log\int N(\psi; m, v)\,\sigma(\psi)^x\sigma(-\psi)^{b-x}d\psi` (0 where
    ``b = 0``): the probability of one sequence of the entry's trials under the cavity, all
    entries (E,) in one call of the tilted quadrature.
    """
    out = np.zeros_like(mean)
    on = b > 0
    if np.any(on):
        z = tilted_moments(mean[on], var[on], b[on], x[on])
        out[on] = z.log_z - log_binomial_coefficient(b[on], x[on])
    return out


def ep_cavities(result: VIResult, counts: np.ndarray) -> tuple[FloatArray, FloatArray]:
    r"""Every observed stick logit's EP cavity at the fit's hyper-parameters.

    Expectation propagation (:func:`~corrpriors.core.ep.run_ep`) started from the VI fit's
    sites (:data:`LOO_EP_OPTIONS`); its cavity of an entry is what the other
    covariates say about it, with their data through EP's sites (closer to the exact posterior
    than the VI fit's, whose sites are too precise: the VI cavities make the leave-one-out
    predictive optimistic, the more so the more flexible the prior).

    Returns
    -------
    mean, var : ndarray of shape (C, K - 1)
        Zero and one off the observed entries.
    """
    from .cavi import CountData
    from .ep import run_ep

    data = CountData.from_counts(counts)
    if data.b_obs.size == 0:
        return np.zeros(result.psi_mean.shape), np.ones(result.psi_mean.shape)
    ep = run_ep(data, result.prior, result.scale, result.mean,
                data.layout.gather(result.site_precision), data.kappa_obs, LOO_EP_OPTIONS)
    return data.layout.scatter(ep.cavity_mean), data.layout.scatter(ep.cavity_var, fill=1.0)


def loo_log_predictive(result: VIResult, counts: np.ndarray, *, cavities: str = "ep") -> FloatArray:
    r"""Approximate leave-one-out log predictive probability of every covariate's counts.

    Parameters
    ----------
    result : VIResult
        A fit to ``counts``.
    counts : ndarray of shape (C, K)
        The non-negative integer counts of the fit, each unit one observation.
    cavities : {"ep", "vi"}, default "ep"
        :func:`ep_cavities` or :func:`entry_cavities` (module docstring).

    Returns
    -------
    ndarray of shape (C,)
        :math:`\sum_k x_{ck}\log p(k \mid c, X_{-1})`: every observation predicted from the
        others (module docstring).
    """
    if cavities not in CAVITIES:
        raise ValueError(f"cavities: expected one of {CAVITIES}, got {cavities!r}")
    x = check_counts(counts, "counts")
    if result.psi_mean.shape != (x.shape[0], x.shape[1] - 1):
        raise ValueError(f"counts: expected shape {(result.psi_mean.shape[0], result.psi_mean.shape[1] + 1)} "
                         f"of the fit, got {x.shape}")
    b, _ = count_statistics(x)
    hits = x[:, :-1]
    mean, var = (ep_cavities if cavities == "ep" else entry_cavities)(result, x)
    u = np.minimum(b, 1.0)                                  # the trial left out (0 without one)
    obs = b > 0
    hit, miss = obs & (hits > 0), obs & (hits < b)          # entries with a success, a failure
    # one quadrature call: every observed entry with all its trials, less a success, less a failure
    parts = (obs, hit, miss)
    z = _log_z(np.concatenate([mean[e] for e in parts]), np.concatenate([var[e] for e in parts]),
               np.concatenate([b[obs], (b - u)[hit], (b - u)[miss]]),
               np.concatenate([hits[obs], (hits - u)[hit], np.minimum(hits, b - u)[miss]]))
    full, less_hit, less_miss = np.split(z, np.cumsum([np.count_nonzero(e) for e in parts[:2]]))
    log_full = np.zeros_like(b)
    log_full[obs] = full
    log_hit, log_pass = np.zeros_like(b), np.zeros_like(b)  # (C, K-1)
    log_hit[hit] = log_full[hit] - less_hit
    log_pass[miss] = log_full[miss] - less_miss
    passed = np.concatenate([np.zeros((x.shape[0], 1)), np.cumsum(log_pass, axis=1)], axis=1)
    log_p = passed.copy()                                   # (C, K): sticks before k passed ...
    log_p[:, :-1] += log_hit                                # ... and stick k hit (not the last)
    return np.sum(np.where(x > 0, x * log_p, 0.0), axis=1)


__all__ = ["CAVITIES", "entry_cavities", "ep_cavities", "loo_log_predictive"]
