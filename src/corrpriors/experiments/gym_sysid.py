r"""``corrpriors sysid ENV_ID``: system identification on any discrete Gymnasium environment.

An agent picks every action uniformly at random, restarting whenever an episode ends
(:func:`corrpriors.envs.random_exploration`); restarts are not transitions, and terminal states
are never left. For every T on a grid the transition belief is fitted to the first T
transitions, and the error is the Hellinger distance between the true next-state distribution
:math:`P(\cdot \mid s, a)` (read exactly from the environment by
:func:`corrpriors.envs.from_gymnasium`) and the belief's point estimate, averaged over the
actions and the non-terminal states an episode can reach (:func:`corrpriors.envs.reachable_states`;
rows no episode can visit, such as CliffWalking's cliff cells, cannot be learned by any method).
The point estimate (``point_estimate``) is by default every method's Bayes estimate under the
squared Hellinger loss, :math:`\hat P_j \propto E[\sqrt{P_j}]^2` -- the estimate the reported
error asks for; the posterior mean (the paper's metric) with ``--set point_estimate=mean``, and
where a correlated belief stores sparsely (no dense posterior draws).

Methods (names are part of the ``metrics.json`` contract):

``pg``
    :meth:`~corrpriors.applications.CorrelatedTransitionModel.for_mdp` with the relative
    encoding: a next state is the displacement of its coordinates from the current state's
    (within ``radius``; farther jumps share one "other" category), so the same move is shared
    between neighbouring states; squared-exponential kernel of length scale ``lengthscale`` on
    the coordinates, the prior scale of every action chosen by the collapsed bound.
``pg_absolute``
    The same with absolute next-state categories (the paper's encoding).
``dirichlet_sparse``, ``dirichlet_uniform``
    Independent Dirichlet rows with :math:`\alpha = 10^{-3}` and :math:`\alpha = 1`.

Every belief is updated along the T grid in increasing order (the correlated ones warm-started).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._format import num
from ..runner._ranges import MAX_STEPS, Each, Interval, Options, check_ranges
from ..runner.protocol import FigureSpec, SeedResult
from ._gym import (
    GymConfig,
    GymExperiment,
    check_correlated,
    check_methods,
    check_model_settings,
    environment_ranges,
    load_configured_env,
    make_belief,
    method_stream,
    model_ranges,
)

KIND = "sysid"
METHODS = ("pg", "pg_absolute", "dirichlet_sparse", "dirichlet_uniform")
DEFAULT_TRANSITIONS = (100, 300, 1000, 3000, 10000)
QUICK_TRANSITIONS = (100, 300, 1000)
DEFAULT_SEEDS = 10
QUICK_SEEDS = 2


@dataclasses.dataclass(frozen=True)
class SysIdConfig(GymConfig):
    """Settings of ``corrpriors sysid`` (the environment's ``Config`` defaults its ``env_id``).

    Attributes
    ----------
    env_id : str
        The Gymnasium id.
    env_kwargs : str
        Keyword arguments of ``gymnasium.make`` as canonical JSON.
    env_digest : str
        Digest of the environment's table (P, rewards, terminal states), read when the
        experiment is made: results of different tables never share a folder, and a seed whose
        environment builds another table fails instead of mixing environments.
    transitions : tuple of int
        The T grid, increasing positive integers.
    methods : tuple of str
        Some of ``pg``, ``pg_absolute``, ``dirichlet_sparse``, ``dirichlet_uniform``.
    alpha_sparse, alpha_uniform : float
        Concentrations of the two Dirichlet baselines.
    lengthscale : float
        Length scale of the squared-exponential kernel, in coordinate units.
    radius : int
        Window half-width of the relative encoding.
    selection : {"collapsed", "elbo", "em", "fixed"}
        How the prior scale is chosen (see ``CorrelatedTransitionModel.for_mdp``).
    prior : {"auto", "dense", "gmrf"}
        The correlated prior: a dense squared-exponential kernel or a sparse GMRF precision
        (``"auto"``: GMRF from 500 states with at most 30 categories).
    boundary : {"auto", "exclude", "clip", "stay"}
        What a move of the relative encoding (``pg``) that would leave the state space means:
        a structural zero (``"exclude"``), the agent stays in place (``"stay"``, a grid's
        edges and walls) or is clipped to the box (``"clip"``); ``"auto"``: ``"stay"`` on
        grid maps, else ``"exclude"`` (see ``CorrelatedTransitionModel.for_mdp``).
    other_pooling : float
        Weight of the far jumps observed anywhere in the prior of where an unobserved far jump
        of the relative encoding leads (0: uniform over the far states; see
        ``CorrelatedTransitionModel.for_mdp``).
    concentration : str
        The correlated beliefs' per-(state, action) layer: ``"auto"`` (learned from the data),
        ``"none"`` (the paper's model, no layer) or a fixed positive number (see
        ``CorrelatedTransitionModel.for_mdp``).
    contamination : str
        ``"auto"``: the correlated beliefs give each pair a learned probability of a next state
        its neighbours do not predict (Beta(1, 1) prior); ``"none"``: they do not.
    features : str
        ``"module:function"``: ``function(env)`` returns the state coordinates, shape (S, D),
        instead of those the environment publishes; ``""``: the environment's own.
    support : str
        ``"auto"``: the correlated beliefs weigh a sparse-support hypothesis beside their
        per-pair layer (``CorrelatedTransitionModel.for_mdp``'s ``support_prior``); ``"none"``:
        they do not (the layer and everything else unchanged).
    point_estimate : {"auto", "mean", "hellinger"}
        The estimate scored, for *every* method alike: the posterior mean (the paper's metric),
        or the Bayes estimate under the squared Hellinger loss, P_j proportional to
        E[sqrt(P_j)]^2 (the beliefs' ``hellinger_estimate``: closed form for the Dirichlet
        rows, a Rao-Blackwellised Monte-Carlo average of posterior draws for the correlated
        beliefs, from 16 up to 256 until their noise costs at most 1 % of the expected loss,
        seeded per method from the seed's stream after the exploration). ``"auto"`` (default):
        ``"hellinger"`` -- the estimate the reported loss asks for -- wherever every method
        gives it (the correlated beliefs' draws are dense below ``SPARSE_FROM_STATES``
        states), else ``"mean"`` (:func:`resolve_point_estimate`); the results record which.
    """

    _GYM_BASE = True

    env_id: str = ""
    env_kwargs: str = "{}"
    env_digest: str = ""
    transitions: tuple = DEFAULT_TRANSITIONS
    methods: tuple = METHODS
    alpha_sparse: float = 1e-3
    alpha_uniform: float = 1.0
    lengthscale: float = 2.0
    radius: int = 1
    selection: str = "collapsed"
    prior: str = "auto"
    boundary: str = "auto"
    other_pooling: float = 1.0
    concentration: str = "auto"
    contamination: str = "auto"
    features: str = ""
    support: str = "auto"
    point_estimate: str = "auto"


def _hellinger(truth: Any, mean: Any) -> np.ndarray:
    """Hellinger distance per (s, a), ndarray of shape (S, A): a belief's sparse table (2,000 states
    on) reads itself on the truth's support; dense or ``mdp.SparseTransitions`` tables by ``hellinger``.
    """
    from ..mdp import hellinger

    if hasattr(mean, "hellinger_to"):
        return np.asarray(mean.hellinger_to(truth))
    return np.asarray(hellinger(truth, mean))


def run_seed(config: SysIdConfig, *, rng: np.random.Generator) -> SeedResult:
    """Hellinger error of every method at every T for one random exploration.

    Returns the curves ``hellinger[method]`` of shape (len(transitions),), the per-method extras
    ``cpu_seconds`` (shape (1,)) and, for the correlated methods, ``scale`` (the selected prior
    scales, geometric mean over actions, shape (len(transitions),)), and the seed extras
    ``episodes`` (episodes begun, shape (1,)) and ``rows`` (the states scored, shape (R,)).
    """
    from ..applications.transitions._hellinger import point_estimate
    from ..envs import random_exploration, reachable_states

    env, mdp = load_configured_env(config)
    ts = [int(t) for t in config.transitions]
    data = random_exploration(env, ts[-1], rng=rng)
    env.close()
    kind = resolve_point_estimate(config.point_estimate, config.methods, mdp.n_states)
    # the estimates' own streams, drawn after the data (the default "mean" draws nothing more)
    streams = method_stream(rng, tuple(config.methods)) if kind != "mean" else {}
    live = np.ones(mdp.n_states, bool) if mdp.terminal is None else ~np.asarray(mdp.terminal)
    rows = np.flatnonzero(reachable_states(mdp) & live)
    curves: dict[str, np.ndarray] = {}
    extras: dict[str, dict[str, np.ndarray]] = {"cpu_seconds": {}, "scale": {}}
    for method in config.methods:
        belief = make_belief(method, mdp, config)
        errors, scales, done = np.empty(len(ts)), np.empty(len(ts)), 0
        cpu = time.process_time()
        for i, T in enumerate(ts):
            belief.update(data.states[done:T], data.actions[done:T], data.next_states[done:T])
            done = T
            estimate = point_estimate(belief, kind, rng=streams.get(method))
            errors[i] = float(_hellinger(mdp.transitions, estimate)[rows].mean())
            if hasattr(belief, "scale_"):
                scales[i] = float(np.exp(np.mean(np.log(belief.scale_))))
        extras["cpu_seconds"][method] = np.array([time.process_time() - cpu])
        if hasattr(belief, "scale_"):
            extras["scale"][method] = scales
        curves[method] = errors
    episodes = 1 + int(np.sum(data.terminated[:-1] | data.truncated[:-1]))
    return SeedResult(curves={"hellinger": curves}, extras={"episodes": np.array([episodes]), "rows": rows},
                      method_extras={k: v for k, v in extras.items() if v})


def resolve_point_estimate(point_estimate: str, methods: Any, n_states: int) -> str:
    """The estimate a configuration scores: ``point_estimate`` itself, or for ``"auto"``
    ``"hellinger"`` when every method of ``methods`` gives it on ``n_states`` states (the
    correlated beliefs only with dense storage, below ``SPARSE_FROM_STATES``), else ``"mean"``.
    """
    from ..applications.transitions import SPARSE_FROM_STATES

    if point_estimate != "auto":
        return str(point_estimate)
    dense = not any(m.startswith("pg") for m in methods) or int(n_states) < SPARSE_FROM_STATES
    return "hellinger" if dense else "mean"


def check_point_estimate(config: SysIdConfig, n_states: int) -> None:
    """Raise ``ValueError`` naming ``point_estimate`` where a correlated method cannot give it.

    The correlated beliefs' Hellinger estimate averages dense posterior draws: not available with
    the sparse storage they use from ``SPARSE_FROM_STATES`` states on (``"auto"`` then scores
    the means).
    """
    from ..applications.transitions import SPARSE_FROM_STATES

    if config.point_estimate == "hellinger" and \
            resolve_point_estimate("auto", config.methods, n_states) != "hellinger":
        correlated = [m for m in config.methods if m.startswith("pg")]
        raise ValueError(f"point_estimate: 'hellinger' needs dense draws of {', '.join(correlated)}; "
                         f"this environment has {n_states} states (sparse storage from "
                         f"{SPARSE_FROM_STATES}); use 'auto', 'mean' or only the Dirichlet methods")


class SysIdExperiment(GymExperiment):
    """``corrpriors sysid`` on one environment (an instance of the experiment protocol)."""

    KIND = KIND
    BASE_CONFIG = SysIdConfig
    X_NAME = "transitions"
    METRICS = {"hellinger": "lower"}
    PAPER_SEEDS = DEFAULT_SEEDS
    QUICK_SEEDS = QUICK_SEEDS
    X_LABEL = "random transitions observed (T)"
    METRIC_LABELS = {"hellinger": "Hellinger distance to the true\nP(s' | s, a), mean over (s, a)"}
    run_seed = staticmethod(run_seed)

    @property
    def DESCRIPTION(self) -> str:  # noqa: N802 - the protocol's name
        """One line for the run header."""
        return f"system identification on {self.ENVIRONMENT}: Hellinger error vs transitions"

    def _setup(self, env: Any, mdp: Any) -> None:
        self._coordinates = mdp.coordinates

    def quick_config(self) -> Any:
        """Return a grid up to T = 1,000 (seconds on the toy-text maps)."""
        return self.Config(transitions=QUICK_TRANSITIONS)

    def x_values(self, config: Any) -> list[float]:
        """Return the T grid."""
        return [float(t) for t in config.transitions]

    #: The valid range of every setting (checked before any work; ``--list-settings`` shows it).
    RANGES = {
        **environment_ranges(),
        "transitions": Each(Interval(int, 1, MAX_STEPS), min_len=1, increasing=True),
        "methods": Each(Options(*METHODS), min_len=1, max_len=len(METHODS), distinct=True),
        **model_ranges(),
        "point_estimate": Options("auto", "mean", "hellinger"),
    }

    def check_config(self, config: Any) -> None:
        """Raise ``ValueError`` naming the field of an invalid ``config`` (ranges, environment, memory)."""
        self.check_environment(config)
        check_ranges(self, config)
        check_methods(config.methods, METHODS)
        coords = self.coordinates(config)
        check_model_settings(config, coords)
        check_correlated(coords, tuple(config.methods), self.env_id)
        check_point_estimate(config, self.n_states)   # coords may be None (no coordinates)
        self.check_run_memory(config, coords, observed=max(int(t) for t in config.transitions),
                              point_estimate=self.point_estimate(config))

    def estimate_seed_cost(self, config: Any) -> Any:
        """The cost model's CPU seconds of one seed on this machine
        (:func:`~corrpriors.experiments._gym_time.sysid_seed_cost` x
        :func:`~corrpriors.experiments._gym_time.machine_factor`).
        """
        from ._gym_time import for_this_machine, sysid_seed_cost

        settings = self.cost_settings(config)
        cost = sysid_seed_cost(settings.pop("n_states"), settings.pop("n_actions"), settings.pop("n_dims"),
                               tuple(config.methods), tuple(config.transitions),
                               point_estimate=self.point_estimate(config), **settings)
        return for_this_machine(cost)

    def point_estimate(self, config: Any) -> str:
        """The estimate ``config`` scores on this environment (:func:`resolve_point_estimate`)."""
        return resolve_point_estimate(config.point_estimate, config.methods, self.n_states)

    def summarise_extra(self, config: Any, results: Mapping[int, SeedResult], metrics: dict) -> dict:
        """Summarise the best method at every T, the error ratios to pg and the CPU time per method."""
        ts = [int(t) for t in config.transitions]
        methods = metrics["hellinger"]["methods"]
        mean = {m: np.asarray(methods[m]["mean"], dtype=float) for m in methods}
        best = [min(mean, key=lambda m: mean[m][i]) for i in range(len(ts))]
        cpu = {m: float(np.mean([r.method_extras["cpu_seconds"][m][0] for r in results.values()]))
               for m in methods}
        notes = [f"lowest mean error at T = {', '.join(num(t) for t in ts)}: {', '.join(best)}"]
        if "pg" in mean:
            for other in ("dirichlet_sparse", "dirichlet_uniform", "pg_absolute"):
                if other in mean:
                    ratio = mean[other] / mean["pg"]
                    notes.append(f"{other} / pg error ratio along T: " + ", ".join(num(v) for v in ratio))
        kind = self.point_estimate(config)
        if kind == "hellinger":
            notes.append("every method scored by its Hellinger-Bayes estimate (the Bayes estimate "
                         "under the squared Hellinger loss), not its mean")
        else:
            notes.append("every method scored by its posterior mean")
        notes.append("CPU s per seed: " + ", ".join(f"{m} {num(v)}" for m, v in cpu.items()))
        n_rows = int(np.mean([r.extras["rows"].size for r in results.values()]))
        notes.append(f"scored rows: {n_rows} reachable non-terminal states x all actions")
        return {"best_method": dict(zip(map(str, ts), best)), "cpu_seconds_per_seed": cpu,
                "point_estimate": kind,
                "scored_states": n_rows, "notes": notes}

    def figures(self, config: Any, results: Mapping[int, SeedResult], summary: dict) -> list[FigureSpec]:
        """Draw the error against T (linear and log x), mean ± std over seeds."""
        from ..plotting._curves import curves_figure
        from ._shared import ESTIMATE_NAMES, estimate_title

        kind = self.point_estimate(config)
        fig = curves_figure(summary, "hellinger", x_label=self.X_LABEL, y_label=self.METRIC_LABELS["hellinger"],
                            environment=estimate_title(self.ENVIRONMENT, kind), log_panel=True)
        return [FigureSpec(f"{self.NAME}-hellinger", fig,
                           f"error of the learned transition model ({ESTIMATE_NAMES[kind]}) on "
                           f"{self.ENVIRONMENT} against the number of random transitions observed, "
                           "mean ± std over seeds (linear and log x)")]


__all__ = ["METHODS", "SysIdConfig", "SysIdExperiment", "resolve_point_estimate", "run_seed"]
