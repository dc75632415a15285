"""Simulation-based calibration of the library's credible intervals (issue 24).

For every replication: draw the stick logits from the prior (dense squared-exponential kernel
or sparse GMRF precision on a side x side grid), draw the counts of every covariate from its
probabilities with a row total N taken from the regimes (0, 1, 5, 50: a random quarter of the
rows each), fit the model (at the true hyper-parameters, or learning them the default way), and
ask every inference method for its 50 % and 90 % central intervals of every pi_ck and for
``--rank-draws`` posterior draws. Reported per method, regime N and true scale theta:

* coverage: the fraction of the true pi_ck inside the interval (with a cluster-robust standard
  error: the entries of one replication are dependent), and the same for the entries whose
  posterior mean (by that method) is below 0.02;
* rank histograms: the rank of the true pi_ck among the method's draws (Talts et al. 2018),
  in 10 bins, with a cluster-robust Wald test of uniformity (chi-square, 9 degrees of freedom,
  replications as clusters) and the edge-bin ratio (mean of the two outer bins / 1/10);
* cost: CPU seconds per replication of the fit and of every method.

For the exact posterior every coverage is nominal and every rank histogram uniform whatever the
regime, the scale or the conditioning on the data (SBC); Gibbs is that check on the harness.

Methods (``--methods``): ``calibrated`` (``credible_interval()``'s default: EP with tilted
marginals, integrated over learned hyper-parameters), ``ep-gaussian`` (EP's Gaussian marginals),
``ep-plugin`` (EP with tilted marginals at the fitted hyper-parameters, no integration),
``psis`` (Pareto-smoothed importance sampling of the VI draws, Gibbs where khat > 0.7),
``vi`` (the mean-field q), ``gibbs`` (1,000 Polya-Gamma Gibbs draws after 250 burn-in sweeps).

Hyper-parameters (``--hyper``): ``true`` (fixed at the truth), ``scale`` (the scale learned:
``learn_scale=True``, started at 1), ``selected`` (the scale chosen by ``select_scale``, the
collapsed-bound lattice climb), ``all`` (scale and length scale learned:
``learn_scale=True, learn_kernel=True`` from length scale 1; dense prior only).

Run from the repository root::

    python benchmarks/calibration.py --quick                       # a few replications, seconds
    python benchmarks/calibration.py --prior dense --hyper true --reps 200
    python benchmarks/calibration.py --prior sparse --hyper scale --reps 200 --methods calibrated vi
    python benchmarks/calibration.py --cost                        # the cost floors

Writes ``<out>/calibration-<prior>-<hyper>-reps<R>-seed<S>[-quick][-<other settings>].json``
(``--out``, default ``benchmarks/out``; see :func:`output_name`: one file per configuration, none
overwrites another) and ``--cost`` writes ``<out>/calibration-cost.json``; ``--report`` prints the
docs' tables of the coverage files given and skips the cost file.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import chi2

ROOT = Path(__file__).resolve().parents[1]
LEVELS = (0.5, 0.9)
HYPER_MODES = ("true", "scale", "selected", "all")
SMALL = 0.02
N_BINS = 10


# --------------------------------------------------------------------------------- problem
@dataclass(frozen=True)
class Problem:
    """One simulation design.

    Attributes
    ----------
    side : int
        The covariates are the cells of a side x side grid (C = side^2).
    n_categories : int
        K.
    lengthscale : float
        Length scale of the prior (cells): SE kernel exp(-d^2/l^2), or the GMRF's.
    prior : {"dense", "sparse"}
    hyper : {"true", "scale", "selected", "all"}
    regimes : tuple of int
        Row totals N; each replication gives a random equal share of the rows each.
    """

    side: int = 8
    n_categories: int = 4
    lengthscale: float = 2.0
    prior: str = "dense"
    hyper: str = "true"
    regimes: tuple = (0, 1, 5, 50)

    def __post_init__(self) -> None:
        if self.prior not in ("dense", "sparse"):
            raise ValueError(f"prior: expected 'dense' or 'sparse', got {self.prior!r}")
        if self.hyper not in HYPER_MODES:
            raise ValueError(f"hyper: expected one of {HYPER_MODES}, got {self.hyper!r}")
        if self.hyper == "all" and self.prior == "sparse":
            raise ValueError("hyper: 'all' learns the kernel's length scale; the sparse prior "
                             "has none to learn")

    @property
    def n_covariates(self) -> int:
        """C."""
        return self.side * self.side

    def structure(self, lengthscale: float | None = None) -> dict[str, Any]:
        """Constructor arguments of the prior structure (``covariance=`` or ``precision=``)."""
        ls = self.lengthscale if lengthscale is None else lengthscale
        if self.prior == "sparse":
            from corrpriors.kernels import grid_precision

            return {"precision": grid_precision((self.side, self.side), length_scale=ls)}
        from corrpriors.kernels import SquaredExponential

        coords = np.array([(i, j) for i in range(self.side) for j in range(self.side)], float)
        return {"covariance": SquaredExponential(lengthscale=ls, lengthscale_bounds=(0.25, 16.0))
                .bind(coords=coords)}

    def fitted_model(self, theta: float, counts: np.ndarray) -> Any:
        """The model fitted the default way for this design's hyper-parameters."""
        from corrpriors import CorrelatedMultinomial, select_scale

        if self.hyper == "true":
            return CorrelatedMultinomial(**self.structure(), scale=theta).fit(counts)
        if self.hyper == "scale":
            return CorrelatedMultinomial(**self.structure(), learn_scale=True).fit(counts)
        if self.hyper == "selected":
            return select_scale(CorrelatedMultinomial(**self.structure()), counts).model
        return CorrelatedMultinomial(**self.structure(lengthscale=1.0), learn_scale=True,
                                     learn_kernel=True).fit(counts)


@dataclass(frozen=True)
class Replicate:
    """One simulated data set: counts (C, K), true probabilities (C, K), row totals (C,)."""

    counts: np.ndarray
    pi: np.ndarray
    totals: np.ndarray


def simulate(problem: Problem, theta: float, *, rng: np.random.Generator) -> Replicate:
    """Draw psi from the prior N(mu, theta Sigma), then the counts (module docstring)."""
    from corrpriors import CorrelatedMultinomial
    from corrpriors.core.stick_breaking import psi_to_pi, uniform_psi

    c, k = problem.n_covariates, problem.n_categories
    prior = CorrelatedMultinomial(**problem.structure())._prior(c)
    mu = np.repeat(uniform_psi(k)[None, :], c, axis=0)
    psi = prior.sample_posterior(theta, mu, np.zeros((c, k - 1)), 1, rng=rng)[0]
    pi = psi_to_pi(psi)
    share = -(-c // len(problem.regimes))
    totals = rng.permutation(np.repeat(np.array(problem.regimes), share)[:c])
    counts = np.stack([rng.multinomial(n, p) for n, p in zip(totals, pi)])
    return Replicate(counts, pi, totals)


# --------------------------------------------------------------------------------- methods
@dataclass
class MethodOutput:
    """What a method returns: intervals by level (each (C, K)), draws for the ranks (L, C, K),
    the posterior mean (C, K) and its CPU seconds.
    """

    intervals: dict
    draws: np.ndarray
    mean: np.ndarray
    seconds: float = 0.0
    info: dict = field(default_factory=dict)


def _from_mixture(mixture: Any, n_rank: int, n_samples: int, rng: np.random.Generator,
                  ) -> tuple[dict, np.ndarray, np.ndarray]:
    from corrpriors.core.marginals import probability_interval
    from corrpriors.core.stick_breaking import psi_to_pi

    intervals = {lv: probability_interval(mixture, lv, n_samples, rng=rng) for lv in LEVELS}
    mean = psi_to_pi(mixture.draw_psi(2048, rng=rng)).mean(axis=0)
    return intervals, psi_to_pi(mixture.draw_psi(n_rank, rng=rng, quasi=False)), mean


def m_calibrated(model: Any, rep: Replicate, n_rank: int, rng: np.random.Generator) -> MethodOutput:
    """``credible_interval()`` as a user calls it (EP, tilted, integrated where learned)."""
    from corrpriors.core.stick_breaking import psi_to_pi

    intervals = {lv: model.credible_interval(lv, rng=rng) for lv in LEVELS}
    post = model.calibrated_posterior()
    mean = psi_to_pi(post.marginals.draw_psi(2048, rng=rng)).mean(axis=0)
    draws = psi_to_pi(post.marginals.draw_psi(n_rank, rng=rng, quasi=False))
    info = {"grid_points": int(post.marginals.weights.size), "psi_steps": post.n_psi_steps}
    return MethodOutput(intervals, draws, mean, info=info)


def _ep_variant(tilted: bool, hyper: str) -> Callable:
    def run(model: Any, rep: Replicate, n_rank: int, rng: np.random.Generator) -> MethodOutput:
        from corrpriors.core.intervals import CalibrationOptions, calibrated_marginals, hyper_axes

        scale_on, kernel_on = hyper_axes(model.result_, hyper, bool(model.learn_scale),
                                         bool(model.learn_kernel))
        post = calibrated_marginals(rep.counts, model.result_, integrate_scale=scale_on,
                                    integrate_kernel=kernel_on,
                                    options=CalibrationOptions(tilted=tilted))
        return MethodOutput(*_from_mixture(post.marginals, n_rank, 1024, rng))

    return run


def m_vi(model: Any, rep: Replicate, n_rank: int, rng: np.random.Generator) -> MethodOutput:
    """``credible_interval(method="vi")``: the mean-field marginals."""
    from corrpriors.core.intervals import vi_marginals

    return MethodOutput(*_from_mixture(vi_marginals(model.result_), n_rank, 1024, rng))


def _quantile_output(pi: np.ndarray, n_rank: int) -> tuple[dict, np.ndarray, np.ndarray]:
    from corrpriors.core.marginals import central_interval

    intervals = {lv: central_interval(pi, lv) for lv in LEVELS}
    pick = np.linspace(0, pi.shape[0] - 1, n_rank).round().astype(int)  # thinned for ranks
    return intervals, pi[pick], pi.mean(axis=0)


def m_gibbs(model: Any, rep: Replicate, n_rank: int, rng: np.random.Generator) -> MethodOutput:
    """1,000 Gibbs draws after 250 burn-in sweeps at the fitted hyper-parameters."""
    pi = model.fit_gibbs(rep.counts, 1000, burn_in=250, rng=rng).pi
    return MethodOutput(*_quantile_output(pi, n_rank))


def m_psis(model: Any, rep: Replicate, n_rank: int, rng: np.random.Generator) -> MethodOutput:
    """PSIS of 2,000 VI draws per stick, resampled to 1,000; Gibbs where khat > 0.7."""
    from corrpriors.core.psis import psis_draws
    from corrpriors.core.stick_breaking import psi_to_pi

    out = psis_draws(rep.counts, model.result_, 1000, rng=rng)
    res = MethodOutput(*_quantile_output(psi_to_pi(out.psi), n_rank))
    res.info = {"khat": [float(k) for k in out.khat], "fallback": int(out.fallback.sum())}
    return res


METHODS: dict[str, Callable] = {
    "calibrated": m_calibrated,
    "ep-gaussian": _ep_variant(False, "auto"),
    "ep-plugin": _ep_variant(True, "fixed"),
    "psis": m_psis,
    "vi": m_vi,
    "gibbs": m_gibbs,
}


# --------------------------------------------------------------------------------- running
def run_replicate(problem: Problem, theta: float, methods: list[str], n_rank: int, *,
                  rng: np.random.Generator) -> dict[str, Any]:
    """Simulate, fit and ask every method; per-entry results of one replication."""
    rep = simulate(problem, theta, rng=rng)
    t0 = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = problem.fitted_model(theta, rep.counts)
    record: dict[str, Any] = {"theta": theta, "totals": rep.totals,
                              "fit_seconds": time.process_time() - t0,
                              "fitted_scale": float(model.scale_), "methods": {}}
    for name in methods:
        t0 = time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = METHODS[name](model, rep, n_rank, rng)
        out.seconds = time.process_time() - t0
        covered = {lv: (lo <= rep.pi) & (rep.pi <= hi) for lv, (lo, hi) in out.intervals.items()}
        ranks = np.sum(out.draws < rep.pi[None], axis=0)
        record["methods"][name] = {"covered": covered, "ranks": ranks, "mean": out.mean,
                                   "seconds": out.seconds, "info": out.info}
    return record


def _cluster_rate(hits: list, totals: list) -> tuple[float, float]:
    """Pooled rate and its cluster-robust standard error (one cluster per replication)."""
    a, n = np.asarray(hits, float), np.asarray(totals, float)
    if n.sum() == 0:
        return float("nan"), float("nan")
    p = a.sum() / n.sum()
    return float(p), float(np.sqrt(np.sum((a - p * n) ** 2)) / n.sum())


def rank_uniformity(hist: np.ndarray) -> tuple[float, float, float]:
    """Cluster-robust Wald test that rank histograms (R, B) come from uniform ranks.

    Returns the statistic (chi-square with B - 1 degrees of freedom under uniformity), its
    p-value and the edge-bin ratio (mean share of the two outer bins times B).
    """
    hist = np.asarray(hist, float)
    n_r = hist.sum(axis=1)
    keep = n_r > 0
    hist, n_r = hist[keep], n_r[keep]
    b = hist.shape[1]
    if hist.shape[0] < 2 * b:  # too few clusters to estimate the (B - 1)-dim covariance
        return float("nan"), float("nan"), float(hist[:, [0, -1]].sum() / n_r.sum() / 2 * b)
    total = n_r.sum()
    share = hist.sum(axis=0) / total
    resid = hist - n_r[:, None] / b  # null-centred, per cluster
    cov = resid.T @ resid / total ** 2
    d = (share - 1.0 / b)[:-1]
    stat = float(d @ np.linalg.lstsq(cov[:-1, :-1], d, rcond=None)[0])
    return stat, float(chi2.sf(stat, b - 1)), float((share[0] + share[-1]) / 2 * b)


def summarise(records: list[dict], problem: Problem, n_rank: int) -> dict[str, Any]:
    """Coverage, small-probability coverage, rank tests and costs per method, theta, regime."""
    out: dict[str, Any] = {}
    edges = np.linspace(0, n_rank + 1, N_BINS + 1)
    for theta in sorted({r["theta"] for r in records}):
        recs = [r for r in records if r["theta"] == theta]
        table: dict[str, Any] = {"fit_seconds": float(np.mean([r["fit_seconds"] for r in recs])),
                                 "fitted_scale_median": float(np.median(
                                     [r["fitted_scale"] for r in recs])), "methods": {}}
        for name in recs[0]["methods"]:
            row: dict[str, Any] = {"seconds": float(np.mean(
                [r["methods"][name]["seconds"] for r in recs]))}
            for lv in LEVELS:
                for n in problem.regimes:
                    hits = [r["methods"][name]["covered"][lv][r["totals"] == n].sum() for r in recs]
                    tot = [r["methods"][name]["covered"][lv][r["totals"] == n].size for r in recs]
                    row[f"cover{int(lv * 100)}_N{n}"] = _cluster_rate(hits, tot)
                small = [r["methods"][name]["mean"] < SMALL for r in recs]
                hits = [r["methods"][name]["covered"][lv][s].sum() for r, s in zip(recs, small)]
                row[f"cover{int(lv * 100)}_small"] = _cluster_rate(hits, [s.sum() for s in small])
                row["n_small"] = int(sum(s.sum() for s in small))
            for n in problem.regimes:
                hist = np.array([np.histogram(r["methods"][name]["ranks"][r["totals"] == n],
                                              bins=edges)[0] for r in recs])
                row[f"ranks_N{n}"] = rank_uniformity(hist)
            infos = [r["methods"][name]["info"] for r in recs if r["methods"][name]["info"]]
            if infos and "khat" in infos[0]:
                k = np.array([i["khat"] for i in infos], float)
                row["khat_over_0.7"] = float(np.mean(k[np.isfinite(k)] > 0.7))
            if infos and "grid_points" in infos[0]:
                row["grid_points_mean"] = float(np.mean([i["grid_points"] for i in infos]))
            table["methods"][name] = row
        out[str(theta)] = table
    return out


def print_tables(summary: dict, problem: Problem) -> None:
    """Markdown tables: coverage (50 % / 90 %) per regime, small probabilities, ranks, cost."""
    regimes = problem.regimes
    print(f"\n### prior={problem.prior}, hyper={problem.hyper}, C={problem.n_covariates}, "
          f"K={problem.n_categories}, lengthscale={problem.lengthscale}\n")
    print("| theta | method | " + " | ".join(f"50% N={n}" for n in regimes) + " | "
          + " | ".join(f"90% N={n}" for n in regimes)
          + " | small 50/90 (n) | rank p-values N=" + "/".join(map(str, regimes))
          + " | edge ratio | CPU ms |")
    print("|" + "---|" * (2 * len(regimes) + 6))
    for theta, table in summary.items():
        for name, row in table["methods"].items():
            cells = [f"{row[f'cover{lv}_N{n}'][0]:.3f}" for lv in (50, 90) for n in regimes]
            small = (f"{row['cover50_small'][0]:.2f}/{row['cover90_small'][0]:.2f} "
                     f"({row['n_small']})")
            pv = "/".join(f"{row[f'ranks_N{n}'][1]:.2f}" for n in regimes)
            edge = max(row[f"ranks_N{n}"][2] for n in regimes)
            print(f"| {theta} | {name} | " + " | ".join(cells)
                  + f" | {small} | {pv} | {edge:.2f} | {row['seconds'] * 1e3:.0f} |")
        print(f"| {theta} | (fit) | " + " | " * (2 * len(regimes) + 2)
              + f"| {table['fit_seconds'] * 1e3:.0f} |")


def rst_tables(summaries: list[dict]) -> str:
    """reStructuredText list-tables of the coverage from saved outputs, one per study (docs).

    Parameters
    ----------
    summaries : list of dict
        The JSON outputs of :func:`main` (``problem``, ``summary``, ``reps``).
    """
    lines = []
    for record in summaries:
        prob = record["problem"]
        regimes = "/".join(str(n) for n in prob["regimes"])
        lines += [f".. list-table:: {prob['prior']} prior, hyper-parameters {prob['hyper']} "
                  f"({record.get('reps', '?')} replications per theta)", "   :header-rows: 1",
                  "", "   * - theta", "     - method", f"     - 50 %, N = {regimes}",
                  f"     - 90 %, N = {regimes}", f"     - mean < {SMALL}: 50 % / 90 % (n)",
                  f"     - rank test p, N = {regimes}"]
        for theta, table in record["summary"].items():
            for name, row in table["methods"].items():
                cover = [" / ".join(f"{row[f'cover{lv}_N{n}'][0]:.3f}" for n in prob["regimes"])
                         for lv in (50, 90)]
                small = (f"{row['cover50_small'][0]:.2f} / {row['cover90_small'][0]:.2f} "
                         f"({row['n_small']})" if row["n_small"] else "-")
                ranks = " / ".join(f"{row[f'ranks_N{n}'][1]:.2f}" for n in prob["regimes"])
                lines += [f"   * - {theta}", f"     - {name}", f"     - {cover[0]}",
                          f"     - {cover[1]}", f"     - {small}", f"     - {ranks}"]
        lines.append("")
    return "\n".join(lines)


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (np.floating, np.integer, np.bool_)):
        return x.item()
    return x


def calibrate(problem: Problem, thetas: list[float], methods: list[str], reps: int,
              n_rank: int = 99, *, seed: int = 0, progress: bool = False) -> dict[str, Any]:
    """Run the study; returns ``{"problem", "summary", "records"}``."""
    for name in methods:
        if name not in METHODS:
            raise ValueError(f"methods: unknown method {name!r}; choose from {list(METHODS)}")
    streams = np.random.default_rng(seed).spawn(len(thetas))
    records = []
    for theta, stream in zip(thetas, streams):
        for i, rng in enumerate(stream.spawn(reps)):
            records.append(run_replicate(problem, theta, methods, n_rank, rng=rng))
            if progress and (i + 1) % 10 == 0:
                print(f"theta {theta}: {i + 1}/{reps}", file=sys.stderr, flush=True)
    return {"problem": asdict(problem), "summary": summarise(records, problem, n_rank),
            "records": records}


# --------------------------------------------------------------------------------- cost
def cost_study(repeat: int = 5, seed: int = 0) -> dict[str, Any]:
    """CPU seconds of the calibrated interval against its baselines, side by side.

    C = 64, K = 4 (dense, 8 x 8, theta 1): per fit (fixed scale, and learned), the VI fit,
    1,000 joint draws (``sample_probs``) and ``credible_interval()``, alternated, best of
    ``repeat``; C = 10^4, K = 5 (sparse, 100 x 100 GMRF, Poisson(2) counts per cell): the VI fit
    and ``credible_interval(n_samples=1000)`` at fixed scale. Ratios: the calibrated interval
    over (VI fit + 1,000 draws) at C = 64, over the VI fit at C = 10^4.
    """
    from corrpriors import CorrelatedMultinomial

    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {}
    small = Problem(side=8, n_categories=4)
    rep = simulate(small, 1.0, rng=rng)
    for label, kw in (("fixed scale", {}), ("learned scale", {"learn_scale": True})):
        times: dict[str, list] = {"fit": [], "1000 draws": [], "calibrated interval": []}
        for _ in range(repeat):
            t0 = time.process_time()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                m = CorrelatedMultinomial(**small.structure(), **kw).fit(rep.counts)
            t1 = time.process_time()
            m.sample_probs(1000, rng=rng)
            t2 = time.process_time()
            m.credible_interval(0.9, rng=rng)
            times["fit"].append(t1 - t0)
            times["1000 draws"].append(t2 - t1)
            times["calibrated interval"].append(time.process_time() - t2)
        best = {k: min(v) for k, v in times.items()}
        best["ratio to fit + 1000 draws"] = best["calibrated interval"] / (
            best["fit"] + best["1000 draws"])
        out[f"C=64, {label}"] = best
    q, counts = _sparse_problem(100, 5, rng)
    times = {"fit": [], "calibrated interval": []}
    for _ in range(max(1, repeat // 2)):
        t0 = time.process_time()
        m = CorrelatedMultinomial(precision=q).fit(counts)
        t1 = time.process_time()
        m.credible_interval(0.9, rng=rng, n_samples=1000)
        times["fit"].append(t1 - t0)
        times["calibrated interval"].append(time.process_time() - t1)
    best = {k: min(v) for k, v in times.items()}
    best["ratio to fit"] = best["calibrated interval"] / best["fit"]
    out["C=10000, sparse, fixed scale"] = best
    return out


def _sparse_problem(side: int, k: int, rng: np.random.Generator) -> tuple[Any, np.ndarray]:
    from corrpriors.core.priors.sparse import SparsePrecisionPrior
    from corrpriors.core.stick_breaking import psi_to_pi, uniform_psi
    from corrpriors.kernels import grid_precision

    q = grid_precision((side, side), length_scale=5.0)
    c = side * side
    mu = np.repeat(uniform_psi(k)[None, :], c, axis=0)
    psi = SparsePrecisionPrior(q).sample_posterior(1.0, mu, np.zeros((c, k - 1)), 1, rng=rng)[0]
    counts = np.stack([rng.multinomial(n, p) for n, p in zip(rng.poisson(2.0, c), psi_to_pi(psi))])
    return q, counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prior", choices=("dense", "sparse"), default="dense")
    parser.add_argument("--hyper", choices=HYPER_MODES, default="true")
    parser.add_argument("--theta", type=float, nargs="+", default=[0.5, 1.0, 4.0])
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--methods", nargs="+", default=["calibrated", "vi"],
                        choices=list(METHODS))
    parser.add_argument("--side", type=int, default=8)
    parser.add_argument("--categories", type=int, default=4)
    parser.add_argument("--lengthscale", type=float, default=2.0)
    parser.add_argument("--rank-draws", type=int, default=99)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="5 replications, side 5")
    parser.add_argument("--cost", action="store_true", help="the cost study only")
    parser.add_argument("--report", nargs="+", type=Path, default=None, metavar="JSON",
                        help="print the docs' tables from saved outputs and exit")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out")
    args = parser.parse_args(argv)
    if args.report:
        records = []
        for path in args.report:
            record = json.loads(path.read_text())
            if "problem" not in record:        # the --cost output: its table is printed by --cost
                print(f"{path}: not a coverage study (the --cost output?); skipped", file=sys.stderr)
                continue
            records.append(record)
        print(rst_tables(records))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    if args.cost:
        result = cost_study()
        print(json.dumps(result, indent=2))
        _write(args.out / "calibration-cost.json", result)
        return 0
    problem = Problem(side=5 if args.quick else args.side, n_categories=args.categories,
                      lengthscale=args.lengthscale, prior=args.prior, hyper=args.hyper)
    reps = 5 if args.quick else args.reps
    result = calibrate(problem, args.theta, args.methods, reps, args.rank_draws,
                       seed=args.seed, progress=True)
    print_tables(result["summary"], problem)
    _write(args.out / f"{output_name(args, parser, reps)}.json",
           {"problem": result["problem"], "summary": result["summary"], "reps": reps,
            "seed": args.seed, "methods": args.methods})
    return 0


def output_name(args: argparse.Namespace, parser: argparse.ArgumentParser, reps: int) -> str:
    """``calibration-<prior>-<hyper>-reps<R>-seed<S>[-quick]``, then every other setting that
    differs from its default (``-methods-a+b``, ``-theta-0.5+1``, ``-side6``, ...): no run
    overwrites another configuration's output."""
    parts = [f"calibration-{args.prior}-{args.hyper}-reps{reps}-seed{args.seed}"]
    if args.quick:
        parts.append("quick")                                  # (sets the side and the reps)
    if args.methods != parser.get_default("methods"):
        parts.append("methods-" + "+".join(args.methods))
    if args.theta != parser.get_default("theta"):
        parts.append("theta-" + "+".join(f"{t:g}" for t in args.theta))
    for opt in ("side", "categories", "lengthscale", "rank_draws"):
        if opt == "side" and args.quick:
            continue
        if getattr(args, opt) != parser.get_default(opt):
            parts.append(f"{opt.replace('_', '')}{getattr(args, opt):g}")
    return "-".join(parts)


def _write(path: Path, obj: Any) -> None:
    from corrpriors._fileio import atomic_write_bytes

    atomic_write_bytes(path, json.dumps(_jsonable(obj), indent=1).encode())


if __name__ == "__main__":
    sys.exit(main())
