"""Why PSRL on the queueing network is bimodal (issue 16): one ablation, many seeds.

Runs the ``psrl-queueing`` protocol (``corrpriors.experiments.psrl_queueing``) for the chosen
methods and seeds with one candidate cause removed, and saves per (seed, method) an npz with
the return curve, the policy after every replan, the visited states / actions, the learned
scales and the unconverged-refit counter after every replan (and, with ``--full``, the final
posterior-mean model).

Seed k uses the experiment's stream as it was when the study ran (``default_rng([k,
crc32("psrl-queueing")])``, the method's child of ``rng.spawn(8)``), so the study's recorded
numbers reproduce bit for bit; ``--ablation base`` is the experiment before the fix
(``corrpriors reproduce psrl-queueing --set boundary=exclude``) and ``--ablation clip`` after
it, in distribution. Since round 19 the experiment itself derives each method's stream from
the method's name (``corrpriors.experiments._shared.method_stream``), so its seeds draw other
numbers than this study's. The findings: ``docs/psrl_bimodality.rst``.

Usage (from the repository root)::

    PYTHONPATH=src OPENBLAS_NUM_THREADS=1 nice -n 10 python benchmarks/psrl_bimodality/study.py \
        --ablation base --seeds 1000-1019 --methods pg_sampling pg_mean

Results go to ``benchmarks/out/psrl_bimodality/<ablation>/`` (git-ignored), or, with other
settings, to ``<ablation>-episodes<E>[-full]/`` (:func:`run_folder`); existing files are skipped,
so an interrupted run resumes, and a run with other settings never reuses them. Progress is
appended to ``log.txt`` in that folder. (``analyse.py`` and ``diagnose.py`` read the default folder.)
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import pathlib
import sys
import time
import warnings
import zlib

import numpy as np

from corrpriors._fileio import atomic_write_bytes
from corrpriors.applications.psrl import PSRLAgent, run_psrl
from corrpriors.applications.transitions import CorrelatedTransitionModel, displacement_category_map
from corrpriors.applications.transitions._beliefs import _TransitionBelief
from corrpriors.core.stick_breaking import psi_to_pi
from corrpriors.exceptions import ConvergenceWarning, JitterWarning
from corrpriors.experiments import psrl_queueing as pq
from corrpriors.experiments.psrl_grid import METHODS, make_belief, se_covariance, split_method
from corrpriors.runner._run import parse_seeds  # noqa: F401 (also the sibling scripts' parser)

OUT = pathlib.Path(__file__).resolve().parents[1] / "out" / "psrl_bimodality"


# ----------------------------------------------------------------------------- beliefs
class InflatedBelief(CorrelatedTransitionModel):
    """Posterior draws with their deviation from the mean multiplied by ``inflate``."""

    inflate = 1.0

    def sample_many(self, n, *, rng):
        out = np.empty((n, self.n_states, self.n_actions, self.n_states))
        self.refit()
        for a, m in enumerate(self.models_):
            psi = m.sample_psi(n, rng=rng)
            psi = m.psi_mean_ + self.inflate * (psi - m.psi_mean_)
            out[:, :, a, :] = self._to_next_states(psi_to_pi(psi), a)
        return out


class ExactPredictiveBelief(CorrelatedTransitionModel):
    r"""Mean model :math:`E_q[\pi(\psi)]` (exact predictive) instead of :math:`\pi(\lambda)`.

    Under the mean-field :math:`q` the sticks are independent, so
    :math:`E_q[\pi_k] = E[\sigma(\psi_k)] \prod_{j<k} E[\sigma(-\psi_j)]` with 1-D Gaussian
    expectations, computed by 40-point Gauss-Hermite quadrature (the library's ``"mc"`` needs
    2,000 Monte-Carlo draws per refit: 6 CPU-minutes per seed).
    """

    nodes, weights = np.polynomial.hermite_e.hermegauss(40)

    def category_probs(self):
        self.refit()
        out = []
        for m in self.models_:
            psi = m.psi_mean_[..., None] + np.sqrt(m.psi_var_)[..., None] * self.nodes
            w = self.weights / self.weights.sum()
            up = (1.0 / (1.0 + np.exp(-psi))) @ w              # E[sigma(psi_ck)]
            pi = np.empty((up.shape[0], up.shape[1] + 1))
            rest = np.cumprod(1.0 - up, axis=1)
            pi[:, 0] = up[:, 0]
            pi[:, 1:-1] = up[:, 1:] * rest[:, :-1]
            pi[:, -1] = rest[:, -1]
            out.append(pi)
        return np.stack(out)


class GibbsBelief(CorrelatedTransitionModel):
    """Posterior draws from the Polya-Gamma Gibbs sampler (same prior, theta and means as VI).

    The chain starts at the VI means; ``burn_in`` sweeps, then every ``thin``-th sweep kept.
    """

    burn_in = 50
    thin = 5

    def sample_many(self, n, *, rng):
        out = np.empty((n, self.n_states, self.n_actions, self.n_states))
        self.refit()
        cat = self.category_map.aggregate(self._counts.transpose(1, 0, 2))
        for a, m in enumerate(self.models_):
            res = m.fit_gibbs(cat[a], n_samples=n, burn_in=self.burn_in, thin=self.thin, rng=rng)
            out[:, :, a, :] = self._to_next_states(res.pi, a)
        return out


class LatticeScaleBelief(_TransitionBelief):
    r"""theta per action chosen by the collapsed bound on a log lattice instead of EM.

    One fixed-scale :class:`CorrelatedTransitionModel` per lattice point
    :math:`\theta_j = 10^{j\,step}` (created on first use, then warm-started from its own
    previous fit, lazily refitted per action); per action a hill climb from the previous
    choice (the system-identification experiment's ``_ScaleSearch``).
    """

    def __init__(self, S, A, make, step=0.25, lo=0.01, hi=100.0):
        super().__init__(S, A)
        self._make, self.step = make, step
        self.j_min = int(np.ceil(np.log10(lo) / step - 1e-9))
        self.j_max = int(np.floor(np.log10(hi) / step + 1e-9))
        self.models: dict[int, CorrelatedTransitionModel] = {}
        self.chosen = [0] * A
        self._seen = None
        self.n_unconverged_ = 0
        self.n_fits_ = 0

    def _bound(self, j, a):
        if j not in self.models:
            self.models[j] = self._make(10.0 ** (j * self.step))
        m = self.models[j]
        if m._version != self._version:
            m.set_counts(self._counts)
            m._version = self._version
        before = m.n_fits_
        m.refit([a])
        if m.n_fits_ > before:
            self.n_fits_ += 1
            self.n_unconverged_ += int(not m.models_[a].converged_)
        return float(m.models_[a].collapsed_bound())

    def refit(self):
        if self._seen == self._version:
            return self
        for a in range(self.n_actions):
            j = self.chosen[a]
            values = {j: self._bound(j, a)}
            for nb in (j - 1, j + 1):
                if self.j_min <= nb <= self.j_max:
                    values[nb] = self._bound(nb, a)
            while True:
                best = max(values, key=values.get)
                if best == j:
                    break
                d = 1 if best > j else -1
                j = best
                if not self.j_min <= j + d <= self.j_max:
                    break
                if j + d not in values:
                    values[j + d] = self._bound(j + d, a)
            self.chosen[a] = j
        self._seen = self._version
        return self

    @property
    def scale_(self):
        self.refit()
        return np.array([10.0 ** (j * self.step) for j in self.chosen])

    def mean(self):
        self.refit()
        return np.stack([self.models[j].action_mean(a) for a, j in enumerate(self.chosen)], axis=1)

    def sample_many(self, n, *, rng):
        self.refit()
        out = np.empty((n, self.n_states, self.n_actions, self.n_states))
        for a, j in enumerate(self.chosen):
            m = self.models[j]
            out[:, :, a, :] = m._to_next_states(m.models_[a].sample_probs(n, rng=rng), a)
        return out


class ClipBelief(_TransitionBelief):
    r"""Relative encoding whose categories are the *intended* displacements, truncated at the box.

    Category ``k`` of state ``s`` leads to ``clip(coords[s] + d_k, 0, B)`` (the queue's
    :math:`(\cdot)_0^B`, a grid's walls), so no category is a structural zero and a boundary
    observation is *censored*: it is compatible with every displacement that truncates to it.
    Fitting imputes the latent displacement of censored observations by sampling from the
    current fit (stochastic EM, one imputation per refit; integer counts for the PG model);
    next states beyond every displacement of the window go to an "other" category as before.
    """

    def __init__(self, S, A, coords, radius, cov, rng, **kw):
        from corrpriors.applications.transitions import window_displacements
        from corrpriors.core.model import CorrelatedMultinomial

        super().__init__(S, A)
        coords = np.asarray(coords, dtype=np.int64)
        hi = coords.max(axis=0)
        disp = window_displacements(coords.shape[1], radius)
        self.Kw = len(disp)
        dest = np.clip(coords[:, None, :] + disp[None], 0, hi)            # (S, Kw, D)
        index = {tuple(c): i for i, c in enumerate(coords)}
        self.target = np.array([[index[tuple(c)] for c in row] for row in dest])   # (S, Kw)
        self.reach = np.zeros((S, S), dtype=bool)
        self.reach[np.arange(S)[:, None], self.target] = True
        self.valid = np.ones((S, self.Kw + 1), dtype=bool)
        self.valid[:, -1] = (~self.reach).any(axis=1)
        self.rng = rng
        kw.setdefault("mean_prior_std", 3.0)
        self.models_ = [CorrelatedMultinomial(cov, warm_start=True, **kw) for _ in range(A)]
        self._fitted = [-1] * A
        self.n_unconverged_ = 0
        self.n_fits_ = 0

    def _q(self, a):
        m = self.models_[a]
        if not hasattr(m, "result_"):
            q = self.valid.astype(float)
        else:
            q = np.where(self.valid, psi_to_pi(m.psi_mean_), 0.0)
        return q / q.sum(axis=1, keepdims=True)

    def _impute(self, a):
        S, Kw = self.n_states, self.Kw
        n = self._counts[:, a, :]
        x = np.zeros((S, Kw + 1))
        q = self._q(a)
        for s, s2 in zip(*np.nonzero(n)):
            c = int(n[s, s2])
            if not self.reach[s, s2]:
                x[s, -1] += c
                continue
            ks = np.flatnonzero(self.target[s] == s2)
            if ks.size == 1:
                x[s, ks[0]] += c
            else:
                p = q[s, ks] + 1e-12
                x[s, ks] += self.rng.multinomial(c, p / p.sum())
        return x

    def refit(self):
        for a in range(self.n_actions):
            if self._fitted[a] == self._version:
                continue
            self.models_[a].fit(self._impute(a), warm_start=True)
            self.n_fits_ += 1
            self.n_unconverged_ += int(not self.models_[a].converged_)
            self._fitted[a] = self._version
        return self

    @property
    def scale_(self):
        self.refit()
        return np.array([m.scale_ for m in self.models_])

    def _to_next(self, q, a):
        S, Kw = self.n_states, self.Kw
        q = np.where(self.valid, q, 0.0)
        q = q / q.sum(axis=-1, keepdims=True)
        lead = q.shape[:-2]
        qf = q.reshape((-1, S, Kw + 1))
        out = np.zeros((qf.shape[0], S, S))
        flat = (np.arange(S)[:, None] * S + self.target).ravel()
        n_o = np.where(~self.reach, self._counts[:, a, :] + 0.01, 0.0)
        z = n_o.sum(axis=1, keepdims=True)
        w = np.divide(n_o, z, out=np.zeros_like(n_o), where=z > 0)
        for i in range(qf.shape[0]):
            out[i] = np.bincount(flat, weights=qf[i, :, :Kw].ravel(), minlength=S * S).reshape(S, S)
            out[i] += qf[i, :, -1:] * w
        return out.reshape(lead + (S, S))

    def mean(self):
        self.refit()
        return np.stack([self._to_next(psi_to_pi(m.psi_mean_), a)
                         for a, m in enumerate(self.models_)], axis=1)

    def sample_many(self, n, *, rng):
        self.refit()
        out = np.empty((n, self.n_states, self.n_actions, self.n_states))
        for a, m in enumerate(self.models_):
            out[:, :, a, :] = self._to_next(m.sample_probs(n, rng=rng), a)
        return out


class OracleRowsBelief(_TransitionBelief):
    """A belief whose rows ``P[s, a, :]`` for ``s`` in ``rows`` are replaced by the truth
    (diagnostic: removes the model's error in one region of the state space alone)."""

    def __init__(self, inner, truth, rows):
        super().__init__(inner.n_states, inner.n_actions)
        self.inner, self.truth, self.rows = inner, truth, np.asarray(rows)

    def update(self, s, a, s2):
        self.inner.update(s, a, s2)
        return super().update(s, a, s2)

    def __getattr__(self, name):  # scale_, n_unconverged_, models_ of the inner belief
        if name in ("inner", "truth", "rows"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def mean(self):
        P = self.inner.mean()
        P[self.rows] = self.truth[self.rows]
        return P

    def sample_many(self, n, *, rng):
        P = self.inner.sample_many(n, rng=rng)
        P[:, self.rows] = self.truth[self.rows]
        return P


# ----------------------------------------------------------------------------- ablations
def _state_grid(mdp):
    c = np.round(np.asarray(mdp.coordinates)).astype(int)
    return c[:, 0], c[:, 1]


ABLATIONS = {
    "base": "the experiment as it is (MAP-EM theta, radius 5 + other, max_iter 20, plug-in, M = 10)",
    "converge": "refits to convergence (max_iter 2000, tol 1e-8)",
    "radius7": "window radius 7 (0.2% of the true mass in 'other')",
    "radius10": "window radius 10: no 'other' category at all",
    "collapsed": "theta per action by the collapsed bound on a 0.25-decade lattice in [0.01, 100]",
    "fixed1": "theta fixed at 1 (no scale learning)",
    "mc": "exact (Monte-Carlo) predictive E_q[pi(psi)] for the mean variant instead of pi(lambda)",
    "exact": "exact predictive E_q[pi(psi)] (quadrature) for the mean variant instead of pi(lambda)",
    "draws50": "M = 50 posterior draws per replan",
    "draws1": "M = 1 posterior draw per replan (classic PSRL)",
    "inflate2": "posterior draws with twice the VI spread around the mean",
    "gibbs": "posterior draws from the Gibbs sampler (burn-in 50 from the VI mean, thin 5)",
    "ls02": "kernel length scale 0.2 (2 queue slots) instead of sqrt(0.5) (7 slots)",
    "nomean": "prior means fixed at the uniform logits (no learned constant mean)",
    "capped": "environment with the batch moved to queue 2 capped by queue 1's content",
    "clip": "boundary='clip': intended moves truncated at the buffers, censored data imputed (EM)",
    "clip_converge": "clip + refits to convergence",
    "clip_collapsed": "clip + theta by the collapsed bound on the lattice",
    "clip_stoch": "prototype of clip with stochastic imputation (one draw per refit)",
    "oracle_b1zero": "truth in the rows b1 = 0 (diagnostic)",
    "oracle_boundary": "truth in the boundary rows b1 in {0, 10} or b2 in {0, 10} (diagnostic)",
    "oracle_unvisited": "truth in the rows never visited by the run so far (diagnostic)",
}


def build(ablation: str, mdp, cov, cmap_default, config, model: str, seed: int = 0):
    """(belief, n_samples, config) of ``model`` under ``ablation``."""
    n_samples = config.n_samples
    cmap = cmap_default
    if ablation in ("converge", "clip_converge"):
        config = dataclasses.replace(config, max_iter=2000, tol=1e-8)
    if ablation in ("radius7", "radius10"):
        radius = int(ablation[len("radius"):])
        cmap = displacement_category_map(np.round(mdp.coordinates).astype(int), radius)
    if ablation == "draws50":
        n_samples = 50
    if ablation == "draws1":
        n_samples = 1
    if not model.startswith("pg"):
        return make_belief(model, mdp, cov, cmap, config), n_samples
    from corrpriors.applications.transitions import identity_category_map

    S, A = mdp.n_states, mdp.n_actions
    cm = cmap if model == "pg" else identity_category_map(S)
    kw = dict(category_map=cm, learn_scale=config.learn_scale, learn_mean="constant",
              max_iter=config.max_iter, tol=config.tol)
    if ablation == "clip_stoch":
        seed_rng = np.random.default_rng([int(seed), 16])   # imputation stream
        kw2 = {k: v for k, v in kw.items() if k != "category_map"}
        return ClipBelief(S, A, np.round(mdp.coordinates), config.radius, cov,
                          rng=seed_rng, scale_prior=(2.0, 1.0), **kw2), n_samples
    if ablation.startswith("clip"):
        kw["category_map"] = cm = displacement_category_map(
            np.round(mdp.coordinates).astype(int), config.radius, boundary="clip")
    if ablation in ("collapsed", "clip_collapsed"):
        def make(theta):
            return CorrelatedTransitionModel(S, A, cov, **{**kw, "learn_scale": False}, scale=theta)
        return LatticeScaleBelief(S, A, make), n_samples
    if ablation == "nomean":
        kw["learn_mean"] = None
    if ablation == "fixed1":
        kw["learn_scale"] = False
    cls = CorrelatedTransitionModel
    if ablation == "mc":
        kw["probs_method"] = "mc"
    if ablation == "inflate2":
        cls = type("Inflated2", (InflatedBelief,), {"inflate": 2.0})
    if ablation == "gibbs":
        cls = GibbsBelief
    if ablation == "exact":
        cls = ExactPredictiveBelief
    belief = cls(S, A, cov, **kw)
    if ablation.startswith("oracle_"):
        b1, b2 = _state_grid(mdp)
        if ablation == "oracle_b1zero":
            rows = np.flatnonzero(b1 == 0)
        elif ablation == "oracle_boundary":
            rows = np.flatnonzero((b1 == 0) | (b1 == b1.max()) | (b2 == 0) | (b2 == b2.max()))
        else:
            rows = None
        belief = OracleRowsBelief(belief, mdp.transitions, rows if rows is not None else [])
        belief.dynamic_unvisited = rows is None
    return belief, n_samples


class RecordingAgent(PSRLAgent):
    """PSRLAgent that records the policy, scales and unconverged refits after every plan."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.log_policy, self.log_scale, self.log_unconv = [], [], []

    def plan(self, *, rng):
        b = self.belief
        if getattr(b, "dynamic_unvisited", False):   # oracle in the rows not visited so far
            self._flush()
            b.rows = np.flatnonzero(b.counts.sum(axis=(1, 2)) == 0)
        pol = super().plan(rng=rng)
        self.log_policy.append(pol.copy())
        if hasattr(b, "scale_"):
            self.log_scale.append(np.asarray(b.scale_, float))
            self.log_unconv.append(float(b.n_unconverged_))
        return pol


def run_one(seed: int, method: str, ablation: str, config, full: bool) -> dict:
    """Run ``method`` on seed ``seed`` under ``ablation``; arrays to save."""
    rng = np.random.default_rng([int(seed), zlib.crc32(pq.NAME.encode())])
    stream = rng.spawn(len(METHODS))[METHODS.index(method)]
    if ablation == "capped":
        from corrpriors.envs import queueing_network

        mdp = queueing_network(capped=True)
    else:
        mdp = pq._environment()
    if ablation == "ls02":
        config = dataclasses.replace(config, lengthscale=0.2)
    coords = np.asarray(mdp.coordinates, dtype=float)
    span = coords.max(axis=0) - coords.min(axis=0)
    normalised = (coords - coords.min(axis=0)) / np.where(span > 0, span, 1.0)
    cov = se_covariance(normalised, config.lengthscale)
    cmap = displacement_category_map(np.round(coords).astype(int), config.radius)
    empty = int(np.flatnonzero((coords == coords.min(axis=0)).all(axis=1))[0])
    model, variant = split_method(method)
    belief, n_samples = build(ablation, mdp, cov, cmap, config, model, seed)
    agent = RecordingAgent(belief, mdp.reward_matrix, mdp.discount, variant=variant,
                           n_samples=n_samples, replan_every=config.episode_length)
    cpu = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitterWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = run_psrl(mdp.transitions, agent, config.n_episodes * config.episode_length, empty,
                       rng=stream, eval_every=config.episode_length)
    out = {
        "expected_return": res["expected_return"],
        "optimal_return": np.asarray(res["optimal_return"]),
        "states": res["states"].astype(np.int16),
        "actions": res["actions"].astype(np.int8),
        "policies": np.array(agent.log_policy, dtype=np.int8),
        "q_values": agent.q_values_,
        "cpu_seconds": np.array([time.process_time() - cpu]),
    }
    if agent.log_scale:
        out["scales"] = np.array(agent.log_scale)
        out["n_unconverged"] = np.array(agent.log_unconv)
        out["n_fits"] = np.array([float(getattr(belief, "n_fits_", np.nan))])
    if full:
        out["mean_model"] = belief.mean().astype(np.float32)
    return out


def run_folder(ablation: str, episodes: int = 100, full: bool = False) -> pathlib.Path:
    """Where a configuration's per-seed files go: ``OUT/<ablation>`` for the defaults (100
    episodes, not ``--full``), else ``OUT/<ablation>-episodes<E>[-full]``. Existing files are
    reused (skipped), so a run with other settings must never find them.
    """
    parts = [ablation]
    parts += [f"episodes{episodes}"] if episodes != 100 else []
    parts += ["full"] if full else []
    return OUT / "-".join(parts)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ablation", required=True, choices=sorted(ABLATIONS))
    p.add_argument("--seeds", required=True, help="e.g. 1000-1019 or 0-9,50")
    p.add_argument("--methods", nargs="+", default=["pg_sampling", "pg_mean"])
    p.add_argument("--episodes", type=int, default=100)
    p.add_argument("--full", action="store_true", help="also save the final mean model")
    args = p.parse_args(argv)
    try:
        seeds = parse_seeds(args.seeds)
    except ValueError as exc:
        p.error(str(exc))
    for m in args.methods:
        split_method(m)
    config = dataclasses.replace(pq.Config(), n_episodes=args.episodes)
    folder = run_folder(args.ablation, args.episodes, args.full)
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "log.txt"
    for seed in seeds:
        for method in args.methods:
            path = folder / f"seed-{seed}-{method}.npz"
            if path.exists():
                continue
            out = run_one(seed, method, args.ablation, config, args.full)
            buf = io.BytesIO()
            np.savez_compressed(buf, **out)
            atomic_write_bytes(path, buf.getvalue())
            line = (f"{time.strftime('%H:%M:%S')} {args.ablation} seed {seed} {method}: "
                    f"final {out['expected_return'][-1]:.2f} cpu {out['cpu_seconds'][0]:.1f}s")
            with open(log, "a") as fh:
                fh.write(line + "\n")
            print(line, flush=True)


if __name__ == "__main__":
    sys.exit(main())
