r"""Run-time estimates of the Gymnasium commands, before the first seed: a cost model in the problem's size.

``corrpriors sysid`` and ``corrpriors psrl`` say what a run will cost before any seed runs
(the runner shows it above :data:`~corrpriors.runner._run.ESTIMATE_ABOVE` seconds of wall time
and records it in ``metrics.json`` always); after the first seed the measured cost replaces it.

The model counts the expensive operations of a seed and prices each by a power law in the
number of states :math:`S` (:math:`s = S / 10^4`), with constants measured on the development
machine (2 shared cores, ``time.process_time`` of one process, slippery FrozenLake maps
``generate_random_map(size=n, p=0.9, seed=7)`` of 12 x 12 to 316 x 316; see the docs' "Large
state spaces" page for the runs):

- a refit of a correlated belief (``pg``, relative encoding, GMRF prior from 500 states):
  :math:`A \cdot \frac{K - 1}{9} \cdot (c_0 + c_1 s^{b})` CPU seconds (:math:`K = (2r + 1)^D + 1`, counted as the
  memory estimate counts it: :func:`~._gym_memory.belief_categories`), :math:`c_1` by the scale
  selection (``collapsed`` and ``elbo`` climb a lattice of scales: several fits per action;
  ``fixed`` and ``em`` one), :math:`b` = :data:`FIT_EXPONENT` up to 10^4 states and
  :data:`FIT_EXPONENT_LARGE` above (:func:`fit_growth`); below 500 states (dense prior)
  :data:`DENSE_FIT_SECONDS` per action, and ``pg_absolute`` (K = S, dense prior)
  :data:`ABSOLUTE_FIT_SECONDS` :math:`(S / 500)^3` more;
- ``sysid``: one refit per T of the grid and per method (the Dirichlet beliefs cost next to
  nothing: :data:`TABLE_SECONDS` per (s, a) pair and T), plus reading the model;
- ``psrl``: per method, the exact optimal and uniform returns once (:data:`TRUE_PLAN_SECONDS`);
  at each of the :math:`1 + \lfloor T / R \rfloor` plans, ``n_samples`` posterior draws
  (``mean``: one posterior mean), each planned (:data:`PLAN_SECONDS` :math:`s^{1.2}`), and a
  refit before every plan but the first (the prior's), warm-started: below 2,000 states
  :data:`PSRL_REFIT_SHARE` of a full refit; with ``replan_on_doubling``
  :data:`DOUBLING_PLANS_PER_PAIR` more plans per pair (``replan_on_revisit``:
  :data:`REVISIT_PLANS_PER_PAIR`), each refitting one action; a scoring
  every ``eval_every`` steps and at the last step, and the exact horizon statistics of every
  policy scored (and of the optimal one): ``horizon`` steps of its state distribution
  (:func:`horizon_seconds`).
  A refit with at most 8 transitions per action factorises nothing (Woodbury updates from the
  prior's factor) and costs :math:`c_0` only.

The constants are rounded medians of those runs. Another machine runs the same work faster or
slower: the experiments' estimates multiply every part by :func:`machine_factor`, this machine's
CPU seconds of a small reference fit (:func:`probe_seconds`, about 50 ms once per process)
against :data:`PROBE_REFERENCE_SECONDS` (``CORRPRIORS_MACHINE_FACTOR`` sets the factor instead).
The CPU time of a real run still depends on the data (the number of psi steps of each fit) and
the machine's load: expect the estimate within a factor of about 3 (the tests check it on two
sizes). The wall time assumes the seeds share the workers evenly and a seed runs on one core.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import time
from collections.abc import Sequence

import numpy as np

from ._gym_memory import belief_categories

#: Growth exponent of a correlated refit in S up to 10^4 states (GMRF prior, sparse
#: factorisations; measured 1.06 between 50 x 50 and 100 x 100 FrozenLake maps with the collapsed
#: selection).
FIT_EXPONENT = 1.06
#: Growth exponent of a correlated refit in S above 10^4 states. A sparse factorisation of a
#: grid's precision costs S^1.5 flops (nested dissection); measured per psi step 1.1-1.2 (the
#: flops 1.4) from 100 x 100 to 316 x 316, but on FrozenLake maps the psi steps per fit grow too:
#: a fixed-scale refit of 10^4 to 10^5 states with T = S grew as S^1.75 (the 316 x 316 run priced
#: at S^1.06 took 5.7x its estimate), while the tunnel grid's collapsed refits with T = 10 S grew as
#: S^1.16. The middle, 1.5, puts the 150 x 150 (collapsed, 1.4x over) and the 316 x 316 (fixed,
#: 2.2x under) FrozenLake runs within the stated factor of 3.
FIT_EXPONENT_LARGE = 1.5
#: CPU seconds of one action's refit at S = 10^4, K = 10, by the scale selection (c_1).
FIT_SECONDS = {"collapsed": 40.0, "elbo": 40.0, "fixed": 9.0, "em": 9.0}
#: CPU seconds of one action's refit independent of S (c_0: the fixed costs of a fit).
FIT_OVERHEAD = 0.5
#: CPU seconds of one action's refit of ``pg`` with the dense prior (below 500 states).
#: Re-measured in round 9 with ``corrpriors sysid`` (five T, Hellinger estimates): at 0.5 the
#: model priced CliffWalking, FrozenLake 8 x 8 and 16 x 16 and Taxi-v4 at 3.7-4.8x their
#: measured CPU (2.5, 2.3, 4.3 and 44 s per seed); at 0.15, 1.4-2.7x.
DENSE_FIT_SECONDS = 0.15
#: CPU seconds of one action's refit of ``pg_absolute`` at 500 states (grows as S^3).
ABSOLUTE_FIT_SECONDS = 1.5
#: CPU seconds per (s, a) pair of a Dirichlet belief's mean, Hellinger error or draw.
TABLE_SECONDS = 2e-6
#: CPU seconds of one plan (policy iteration, sparse tables) at S = 10^4; grows as s^PLAN_EXPONENT.
PLAN_SECONDS = 2.0
#: Growth exponent of a plan in S.
PLAN_EXPONENT = 1.2
#: CPU seconds of planning on the true model at S = 10^4 (its optimal and uniform returns; its
#: table has a few next states per row where a belief's has K), as s^PLAN_EXPONENT.
TRUE_PLAN_SECONDS = 0.5
#: CPU seconds of a posterior draw of a correlated belief at S = 10^4 (per action), as s^FIT_EXPONENT.
DRAW_SECONDS = 0.1
#: CPU seconds per (s, a, s') entry of a correlated belief's refit with dense storage (below
#: ``SPARSE_FROM_STATES`` states) for its per-pair layer and sparse-support hypothesis, which work
#: on dense (S, A, S) tables: measured 1.5-2.3e-6 on FrozenLake 24 x 24 to 40 x 40 (T = 2,000;
#: 23 of the 27 CPU s of a 40 x 40 refit), 4.8e-6 at 16 x 16 (1.3 s in all).
LAYER_SECONDS_PER_ENTRY = 2e-6
#: The same for one posterior draw (the layer's Dirichlet rows): measured 4-5e-8 per entry.
LAYER_DRAW_SECONDS_PER_ENTRY = 5e-8
#: CPU seconds of reading the environment's model per state (Gymnasium's table, then ours).
LOAD_SECONDS_PER_STATE = 2e-4
#: CPU seconds of one exact scoring of a policy (its expected discounted return) at S = 10^4.
SCORE_SECONDS = 0.05
#: The exact horizon statistics (``horizon_stats``: E policies' state distributions pushed
#: ``horizon`` steps), in CPU seconds of the development machine. Measured with FrozenLake maps
#: ``generate_random_map(size=n, p=0.9, seed=7)`` of 4 x 4 to 200 x 200, E = 1 to 41 policies,
#: on a machine whose :func:`probe_seconds` read 0.0177 s (factor 0.31; the CPU seconds below are
#: those measured, divided by it): a dense model's step costs 1.6-2.5e-10 s per entry of the E
#: (S, S) matrices P_pi (S >= 64) plus about 1e-7 s per policy (what remains at 4 x 4) and
#: 3.3e-6 s per step for the batch; forming P_pi 2.5-4.4e-10 s per (s, a, s') entry and policy;
#: a sparse model's step (one sparse P_pi per policy) 6.3-7.7e-9 s per state and policy
#: (S = 2,500 to 40,000); forming P_pi 0.6-1.1e-7 s per state and policy.
HORIZON_DENSE_STEP_SECONDS = 7e-10
#: A dense model's step, per policy whatever S.
HORIZON_DENSE_POLICY_STEP_SECONDS = 3e-7
#: Per step of the dense batch, whatever its size (numpy's calls).
HORIZON_DENSE_STEP_OVERHEAD = 1e-5
#: Forming a dense P_pi, per (s, a, s') entry and policy.
HORIZON_DENSE_SETUP_SECONDS = 1.1e-9
#: A sparse model's step, per state and policy.
HORIZON_SPARSE_STEP_SECONDS = 2.3e-8
#: Forming a sparse P_pi, per state and policy.
HORIZON_SPARSE_SETUP_SECONDS = 3e-7


#: CPU seconds of :func:`probe_seconds` on the machine the constants above were measured on. Not
#: measured there (it was not kept): round 12 measured the probe at 0.0176-0.0181 s on a machine
#: that ran the slow tests' documented workloads (FrozenLake sysid seeds of 24 x 24 to 60 x 60,
#: CliffWalking PSRL seeds; ``tests/test_run_estimate.py``) 2.4-3.9x (median 3.2) faster than
#: their docstrings record from the development machine, so 0.0178 s x 3.2.
PROBE_REFERENCE_SECONDS = 0.057
#: :func:`machine_factor` is clipped to this range (a probe caught in a burst of load is not
#: believed further).
MACHINE_FACTOR_RANGE = (0.05, 20.0)
#: Environment variable that sets :func:`machine_factor` (a positive number) instead of the probe.
MACHINE_FACTOR_ENV = "CORRPRIORS_MACHINE_FACTOR"


def probe_seconds(repeat: int = 3) -> float:
    """CPU seconds of a fixed small fit: the least of ``repeat`` runs, with one BLAS thread.

    The fit is a correlated multinomial of 144 covariates (a 12 x 12 grid, squared-exponential
    covariance) and 9 categories on fixed counts (0-3 per category) -- the kind of work a belief's refit does
    (Cholesky factorisations, triangular solves and many small array operations).
    """
    import warnings

    from .._threads import blas_threads
    from ..core import CorrelatedMultinomial

    cells = np.array([(i, j) for i in range(12) for j in range(12)], dtype=np.float64)
    cov = np.exp(-((cells[:, None, :] - cells[None, :, :]) ** 2).sum(-1) / 8.0) + 1e-6 * np.eye(144)
    counts = (np.arange(144)[:, None] * 7 + np.arange(9)[None, :] * 3) % 4   # fixed, no randomness
    best = math.inf
    with blas_threads(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(max(int(repeat), 1)):
            tic = time.process_time()
            CorrelatedMultinomial(cov, max_iter=50, tol=1e-12).fit(counts)
            best = min(best, time.process_time() - tic)
    return best


@functools.lru_cache(maxsize=1)
def machine_factor() -> float:
    """CPU seconds on this machine per CPU second of the machine the constants were measured on.

    :func:`probe_seconds` / :data:`PROBE_REFERENCE_SECONDS`, clipped to
    :data:`MACHINE_FACTOR_RANGE`, measured once per process; the environment variable
    :data:`MACHINE_FACTOR_ENV` (a positive number) sets it instead.

    Raises
    ------
    ValueError
        If the environment variable is set but not a positive finite number.
    """
    text = os.environ.get(MACHINE_FACTOR_ENV)
    if text is not None:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{MACHINE_FACTOR_ENV}: expected a positive number, got {text!r}")
        return value
    lo, hi = MACHINE_FACTOR_RANGE
    return float(min(max(probe_seconds() / PROBE_REFERENCE_SECONDS, lo), hi))


def for_this_machine(cost: SeedCost) -> SeedCost:
    """``cost`` with every part multiplied by :func:`machine_factor`.

    The per-method figures of its description are those scaled parts (they were the development
    machine's before: a run whose total said 46 s per seed listed one method at 1 min 23 s).
    """
    f = machine_factor()
    parts = {k: v * f for k, v in cost.parts.items()}
    model = _describe(cost.head, parts) if cost.head else cost.model
    return SeedCost(float(sum(parts.values())), parts, f"{model}; x{f:.2g} for this machine's speed", cost.head)


@dataclasses.dataclass(frozen=True)
class SeedCost:
    """The model's CPU seconds of one seed, per part, and how it was priced (one line).

    ``head`` is the pricing's description without the per-method figures (``model`` is ``head``
    followed by them: :func:`for_this_machine` writes them again once scaled).
    """

    cpu: float
    parts: dict
    model: str
    head: str = ""


#: Parts of a seed's cost that are not a method's (not listed in the description).
_SHARED_PARTS = ("load", "optimal policy")


def _describe(head: str, parts: dict) -> str:
    """``head; m1 10 s, m2 <1 s``: the per-method CPU seconds of one seed."""
    return head + "; " + ", ".join(f"{m} {_short(v)}" for m, v in parts.items() if m not in _SHARED_PARTS)


def refit_seconds(model: str, n_states: int, n_actions: int, n_dims: int, *, radius: int = 1,
                  selection: str = "collapsed", prior: str = "auto", n_scales: int = 1,
                  observed: int | None = None) -> float:
    """CPU seconds of one refit of every action of a belief ``model`` (see the module docstring).

    ``n_scales`` candidate length scales multiply the correlated fits (each is tried). With at
    most :data:`~corrpriors.core.priors.sparse.LOW_RANK_MAX` ``observed`` transitions per action
    no stick of a GMRF prior is factorised (each is updated from the prior's factor by the
    Woodbury identity): the refit costs its overhead only.
    """
    from ..applications.transitions._correlated import GMRF_FROM_STATES, _auto_prior
    from ..core.priors.sparse import LOW_RANK_MAX

    S, A = float(n_states), float(n_actions)
    if model.startswith("dirichlet"):
        return TABLE_SECONDS * S * A
    K = belief_categories(model, n_states, n_dims, radius)
    layer = _layer_entries(n_states, n_actions) * LAYER_SECONDS_PER_ENTRY
    if model == "pg_absolute":
        return layer + n_scales * A * (DENSE_FIT_SECONDS + ABSOLUTE_FIT_SECONDS * (S / GMRF_FROM_STATES) ** 3)
    gmrf = prior == "gmrf" or (prior == "auto" and _auto_prior(n_states, int(min(K, 2.0 ** 62))) == "gmrf")
    if not gmrf:
        return layer + n_scales * A * (K - 1) / 9.0 * DENSE_FIT_SECONDS * max(1.0, (S / GMRF_FROM_STATES) ** 3)
    per = FIT_OVERHEAD
    if observed is None or observed > LOW_RANK_MAX * A:
        per += FIT_SECONDS.get(selection, FIT_SECONDS["collapsed"]) * fit_growth(n_states)
    return layer + n_scales * A * (K - 1) / 9.0 * per


def _layer_entries(n_states: int, n_actions: int) -> float:
    """(S, A, S) entries of the dense tables of a correlated belief's layer (0 with sparse storage)."""
    from ..applications.transitions._beliefs import _resolve_sparse

    return 0.0 if _resolve_sparse(None, n_states) else float(n_states) * n_actions * n_states


def fit_growth(n_states: int) -> float:
    """A correlated refit's cost at ``n_states`` relative to 10^4 states (:data:`FIT_EXPONENT`
    up to 10^4 states, :data:`FIT_EXPONENT_LARGE` above; continuous at 10^4).
    """
    s = float(n_states) / 1e4
    return s ** (FIT_EXPONENT if s <= 1.0 else FIT_EXPONENT_LARGE)


def plan_seconds(n_states: int) -> float:
    """CPU seconds of one plan on a model of ``n_states`` states."""
    return PLAN_SECONDS * (n_states / 1e4) ** PLAN_EXPONENT


def draw_seconds(model: str, n_states: int, n_actions: int, n_dims: int, *, radius: int = 1) -> float:
    """CPU seconds of one posterior draw (or mean) of every action's table."""
    S, A = float(n_states), float(n_actions)
    if model.startswith("dirichlet"):
        return TABLE_SECONDS * S * A
    K = belief_categories(model, n_states, n_dims, radius)
    return (A * (K - 1) / 9.0 * DRAW_SECONDS * (S / 1e4) ** FIT_EXPONENT + TABLE_SECONDS * S * A * K
            + LAYER_DRAW_SECONDS_PER_ENTRY * _layer_entries(n_states, n_actions))


def _base(method: str) -> str:
    for suffix in ("_sampling", "_mean"):
        if method.endswith(suffix):
            return method[: -len(suffix)]
    return method


def _words(n_states: int, n_actions: int, K: float, selection: str) -> str:
    return f"S={n_states:,}, A={n_actions}, K={K:,.0f}, {selection} scale"


#: Posterior draws priced per Hellinger-Bayes estimate of a correlated belief: the estimate stops
#: once its Monte-Carlo noise is small (:func:`~corrpriors.applications.transitions._hellinger.average_sqrt_draws`);
#: in antithetic pairs it stopped at its first batch (8 pairs, 16 draws) in every case measured
#: (FrozenLake 8 x 8 to 40 x 40, Taxi-v4, random MDPs), at most 256. (The value of
#: ``_hellinger.FIRST_DRAWS``, not imported: this module is read before any model code.)
HELLINGER_PRICED_DRAWS = 16


def sysid_seed_cost(n_states: int, n_actions: int, n_dims: int, methods: Sequence[str], transitions: Sequence[int],
                    *, radius: int = 1, selection: str = "collapsed", prior: str = "auto",
                    n_scales: int = 1, point_estimate: str = "mean") -> SeedCost:
    """CPU seconds of one ``corrpriors sysid`` seed: a refit and an error per T and method.

    With ``point_estimate="hellinger"`` a correlated method's estimate averages
    :data:`HELLINGER_PRICED_DRAWS` posterior draws per T (the Dirichlet beliefs' closed form
    costs about one table, as their mean).
    """
    n_t = len(transitions)
    parts = {"load": LOAD_SECONDS_PER_STATE * n_states}
    for m in methods:
        draws = HELLINGER_PRICED_DRAWS if point_estimate == "hellinger" and not m.startswith("dirichlet") else 1
        parts[m] = sum(refit_seconds(m, n_states, n_actions, n_dims, radius=radius, selection=selection,
                                     prior=prior, n_scales=n_scales, observed=int(t))
                       + draws * draw_seconds(m, n_states, n_actions, n_dims, radius=radius)
                       for t in transitions)
    K = belief_categories("pg", n_states, n_dims, radius)
    head = f"{n_t} refit{'s' if n_t != 1 else ''} per method, {_words(n_states, n_actions, K, selection)}"
    return SeedCost(float(sum(parts.values())), parts, _describe(head, parts), head)


#: Replans on doubling (TSDE) per (state, action) pair, priced on top of the schedule's: the
#: pairs visited for the first time and the doublings after. Measured, ``pg_sampling``:
#: CliffWalking 500 steps 0.10-0.16 of its 192 pairs, FrozenLake 8 x 8 1,000 steps 0.27-0.36 of
#: 256, a 16 x 16 map 1,000 steps 0.15 of min(steps, S A) = 1,000; about their middle is priced.
DOUBLING_PLANS_PER_PAIR = 0.2

#: Replans on revisits (``replan_on_revisit``: the doubling rule without the first visits) per
#: (state, action) pair, priced like :data:`DOUBLING_PLANS_PER_PAIR`. Measured, ``pg_sampling``,
#: of min(steps, S A): CliffWalking 500 steps 0.025, FrozenLake 8 x 8 1,000 steps 0.14, a
#: 16 x 16 map 0.052, Taxi-v4 0.097 (its agent loops along walls); priced at 0.1.
REVISIT_PLANS_PER_PAIR = 0.1


#: A PSRL refit's share of :func:`refit_seconds` below 2,000 states (dense storage): PSRL refits
#: are warm-started from the last fit and fold in a few transitions. Measured fit seconds per
#: refit against the price (at ``DENSE_FIT_SECONDS = 0.5``), 50-step schedule: CliffWalking
#: 0.054, FrozenLake 8 x 8 0.066, a 16 x 16 map 0.097, Taxi-v4 0.057; 24 x 24 (GMRF prior,
#: replanning on doubling) 0.087 per action refitted. Priced at 0.25 with the dense price at
#: 0.15 (before: priced in full, runs 5-18x over their estimate). Above 2,000 states the full
#: price stays (the 316 x 316 run was under its estimate).
PSRL_REFIT_SHARE = 0.25


def psrl_seed_cost(n_states: int, n_actions: int, n_dims: int, methods: Sequence[str], steps: int,
                   replan_every: int | str, eval_every: int | str, n_samples: int, *, radius: int = 1,
                   selection: str = "collapsed", prior: str = "auto", n_scales: int = 1,
                   doubling: bool = False, revisit: bool = False, horizon: int = 100,
                   sparse_model: bool | None = None) -> SeedCost:
    """CPU seconds of one ``corrpriors psrl`` seed: per method the plans, refits, draws and scorings.

    ``replan_every`` / ``eval_every`` of ``"episode"`` count one replan / scoring per 50 steps;
    ``doubling`` (replans when a pair's visits double) adds :data:`DOUBLING_PLANS_PER_PAIR`
    plans per pair, at most ``min(steps, S A)`` pairs, each refitting one action; ``revisit``
    (replans when a pair comes back doubled) :data:`REVISIT_PLANS_PER_PAIR` (none more with
    ``doubling``, whose replans include them). Refits cost
    :data:`PSRL_REFIT_SHARE` of :func:`refit_seconds` below 2,000 states. Every policy scored,
    and the optimal one, gets its horizon statistics over ``horizon`` steps
    (:func:`horizon_seconds`; ``sparse_model``: whether the environment's model is stored
    sparsely, None: as :func:`~corrpriors.envs.from_gymnasium` decides by size).
    """
    if sparse_model is None:
        from ..mdp._sparse import prefer_sparse

        sparse_model = prefer_sparse(int(n_states), int(n_actions))
    R = 50 if isinstance(replan_every, str) else max(1, int(replan_every))
    E = 50 if isinstance(eval_every, str) else max(1, int(eval_every))
    plans, scorings = 1 + int(steps) // R, 1 + -(-int(steps) // E)   # the last step is scored too
    extra = 0
    if doubling or revisit:
        per_pair = DOUBLING_PLANS_PER_PAIR if doubling else REVISIT_PLANS_PER_PAIR
        extra = min(int(steps) + 1 - plans,
                    int(round(per_pair * min(int(steps), int(n_states) * int(n_actions)))))
    share = PSRL_REFIT_SHARE if int(n_states) < 2000 else 1.0
    plan = plan_seconds(n_states)
    true_plan = TRUE_PLAN_SECONDS * (n_states / 1e4) ** PLAN_EXPONENT
    stats = functools.partial(horizon_seconds, n_states, n_actions, horizon=int(horizon),
                              sparse_model=bool(sparse_model))
    parts = {"load": LOAD_SECONDS_PER_STATE * n_states, "optimal policy": true_plan + stats(1)}
    for m in methods:
        base = _base(m)
        draws = int(n_samples) if m.endswith("_sampling") else 1

        def refit(observed: int, base: str = base) -> float:
            return share * refit_seconds(base, n_states, n_actions, n_dims, radius=radius, selection=selection,
                                         prior=prior, n_scales=n_scales, observed=observed)
        fits = sum(refit(k * R) for k in range(1, plans)) + extra * refit(int(steps)) / int(n_actions)
        draw = draw_seconds(base, n_states, n_actions, n_dims, radius=radius)
        parts[m] = (true_plan + fits + (plans + extra) * draws * (draw + plan)
                    + scorings * SCORE_SECONDS * (n_states / 1e4) + stats(scorings))
    K = belief_categories("pg", n_states, n_dims, radius)
    head = (f"{plans + extra} plans per method, {scorings:,} scorings (horizon {int(horizon):,}), "
            f"{_words(n_states, n_actions, K, selection)}")
    return SeedCost(float(sum(parts.values())), parts, _describe(head, parts), head)


def horizon_seconds(n_states: int, n_actions: int, n_policies: int, horizon: int, *,
                    sparse_model: bool) -> float:
    """CPU seconds of the exact horizon statistics of ``n_policies`` policies over ``horizon`` steps.

    A dense model forms the (E, S, S) transition matrices of the E policies and pushes their
    state distributions through them in one batch per step; a sparse model one sparse P_pi per
    policy (constants: :data:`HORIZON_DENSE_STEP_SECONDS` and the others next to it).
    """
    S, E, H = float(n_states), float(n_policies), float(horizon)
    if sparse_model:
        return E * S * (HORIZON_SPARSE_SETUP_SECONDS + H * HORIZON_SPARSE_STEP_SECONDS)
    return (E * S * S * (n_actions * HORIZON_DENSE_SETUP_SECONDS + H * HORIZON_DENSE_STEP_SECONDS)
            + E * H * HORIZON_DENSE_POLICY_STEP_SECONDS + H * HORIZON_DENSE_STEP_OVERHEAD)


def _short(seconds: float) -> str:
    from ..runner._run import duration

    return duration(seconds) if seconds >= 0.95 else "<1 s"


__all__ = [
    "ABSOLUTE_FIT_SECONDS",
    "DENSE_FIT_SECONDS",
    "DOUBLING_PLANS_PER_PAIR",
    "REVISIT_PLANS_PER_PAIR",
    "PSRL_REFIT_SHARE",
    "DRAW_SECONDS",
    "FIT_EXPONENT",
    "FIT_EXPONENT_LARGE",
    "FIT_OVERHEAD",
    "FIT_SECONDS",
    "HORIZON_DENSE_POLICY_STEP_SECONDS",
    "HORIZON_DENSE_SETUP_SECONDS",
    "HORIZON_DENSE_STEP_OVERHEAD",
    "HORIZON_DENSE_STEP_SECONDS",
    "HORIZON_SPARSE_SETUP_SECONDS",
    "HORIZON_SPARSE_STEP_SECONDS",
    "LAYER_DRAW_SECONDS_PER_ENTRY",
    "LAYER_SECONDS_PER_ENTRY",
    "LOAD_SECONDS_PER_STATE",
    "MACHINE_FACTOR_ENV",
    "MACHINE_FACTOR_RANGE",
    "PROBE_REFERENCE_SECONDS",
    "PLAN_EXPONENT",
    "PLAN_SECONDS",
    "SCORE_SECONDS",
    "TABLE_SECONDS",
    "TRUE_PLAN_SECONDS",
    "SeedCost",
    "draw_seconds",
    "fit_growth",
    "for_this_machine",
    "horizon_seconds",
    "machine_factor",
    "plan_seconds",
    "probe_seconds",
    "psrl_seed_cost",
    "refit_seconds",
    "sysid_seed_cost",
]
