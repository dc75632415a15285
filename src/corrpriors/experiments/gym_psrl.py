r"""``corrpriors psrl ENV_ID``: posterior-sampling RL on any discrete Gymnasium environment.

The agent (:class:`~corrpriors.applications.PSRLAgent`) runs on the real ``reset``/``step`` loop
(:func:`~corrpriors.applications.run_psrl`): it plans from its prior, acts greedily and folds the
new transitions into its belief every ``replan_every`` steps; terminal states are absorbing and
never enter the belief as data, and neither do restarts. Like the rewards, the terminal states
are read from the environment's table (``terminals="known"``, the default) or learned when a step
reports ``terminated`` (``"observed"``). Rewards are known -- :math:`r(s, a, s')` read from the
environment's model by :func:`~corrpriors.envs.from_gymnasium` -- or, with ``learn_rewards``,
learned by an independent Normal-Gamma posterior per (s, a) drawn together with the transitions.

At step 0, every ``eval_every`` steps and at the last step the current greedy policy is scored
exactly under the true model from the environment's start distribution:

``normalized_return``
    Its expected discounted return (discount ``discount``) rescaled so that the uniformly random
    policy scores 0 and the optimal policy 1.
``success_probability`` (environments with terminal states only)
    The probability that it reaches a goal state within ``horizon`` steps -- a goal being a
    terminal state entered with the highest reward (FrozenLake's G, not its holes; CliffWalking's
    goal; a delivered passenger in Taxi).
``horizon_return`` (unless it equals ``success_probability``, as on FrozenLake)
    Its expected undiscounted return over the first ``horizon`` steps (CliffWalking's optimum is -13).

Methods ``<model>_<variant>``: models ``pg`` (correlated prior, relative moves), ``pg_absolute``
(correlated prior, absolute next states), ``dirichlet_sparse`` (:math:`\alpha = 10^{-3}`),
``dirichlet_uniform`` (:math:`\alpha = 1`); variants ``sampling`` (greedy on the mean optimal Q
of ``n_samples`` posterior draws) and ``mean`` (greedy on the posterior-mean model's optimal Q).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._format import num, num_below
from ..runner._ranges import (
    DISCOUNT,
    MAX_HORIZON,
    MAX_SAMPLES,
    MAX_STEPS,
    Boolean,
    Each,
    Interval,
    Options,
    check_ranges,
)
from ..runner.protocol import FigureSpec, SeedResult
from ._gym import (
    GymConfig,
    GymExperiment,
    check_correlated,
    check_methods,
    check_model_settings,
    environment_ranges,
    goal_states,
    horizon_stats,
    load_configured_env,
    make_belief,
    method_stream,
    model_ranges,
    panels_figure,
    return_is_success,
)

KIND = "psrl"
MODELS = ("pg", "pg_absolute", "dirichlet_sparse", "dirichlet_uniform")
VARIANTS = ("sampling", "mean")
#: Every method the command knows.
ALL_METHODS = tuple(f"{m}_{v}" for m in MODELS for v in VARIANTS)
#: The methods run by default.
METHODS = ("pg_sampling", "pg_mean", "pg_absolute_sampling", "dirichlet_sparse_sampling",
           "dirichlet_sparse_mean", "dirichlet_uniform_sampling")
DEFAULT_STEPS = 5000
QUICK_STEPS = 500
DEFAULT_SEEDS = 5
QUICK_SEEDS = 2
#: normalized_return at or above 1 - this counts as optimal.
OPTIMAL_TOL = 1e-6


def split_method(method: str) -> tuple[str, str]:
    """``"pg_absolute_sampling"`` -> ``("pg_absolute", "sampling")``."""
    model, _, variant = method.rpartition("_")
    if model not in MODELS or variant not in VARIANTS:
        raise ValueError(f"method: expected one of {', '.join(ALL_METHODS)}, got {method!r}")
    return model, variant


@dataclasses.dataclass(frozen=True)
class PSRLConfig(GymConfig):
    """Settings of ``corrpriors psrl`` (the environment's ``Config`` defaults its ``env_id``).

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
    steps : int
        Environment steps T per run.
    eval_every : int
        Steps between two scorings of the greedy policy; the last step is scored too (``steps``
        need not be a multiple).
    replan_every : int
        Steps between two belief updates and replans (the longest interval with
        ``replan_on_doubling``).
    replan_on_doubling : bool
        Also replan as soon as a (state, action) pair's visits have more than doubled since the
        last replan, its first visit included (TSDE's rule; see
        :class:`~corrpriors.applications.PSRLAgent`), so that a plan refuted by the transition
        just seen is not followed on. Off by default: it costs up to a replan per new pair (the
        user guide's "Replanning on revisits (the default) and on doubling").
    replan_on_revisit : bool
        Also replan as soon as a pair visited since the last replan comes back with its visits
        doubled (:class:`~corrpriors.applications.PSRLAgent`'s ``replan_on_revisit``: the
        doubling rule without the pairs' first visits), so that a plan caught in a cycle -- a
        wall it keeps bumping into -- is not followed for the rest of the interval. On by
        default: measured (the same section), it takes most of the doubling rule's gain at a
        fraction of its replans. Implied by ``replan_on_doubling``.
    n_samples : int
        Posterior draws per replan (``sampling`` variants).
    discount : float
        Discount of planning and of ``normalized_return``, in (0, 1).
    learn_rewards : bool
        Learn the rewards (Normal-Gamma per (s, a)) instead of using the model's r(s, a, s').
    rewards : {"transition", "expected"}
        The known rewards (without ``learn_rewards``): ``"transition"`` -- the model's
        r(s, a, s'), averaged under each model the agent plans with; ``"expected"`` -- R(s, a)
        averaged under the *true* transitions, the known-R(s, a) setting of much of the PSRL
        literature. It tells the agent in advance what every action earns on average (on
        CliffWalking: which moves fall off the cliff), so it is the easier problem.
    terminals : {"known", "observed"}
        ``"known"``: the terminal states of the environment's table (the ``terminated`` flags
        of ``env.unwrapped.P``, read with the rewards) are known from the start;
        ``"observed"``: a state becomes a known terminal state when a step reports
        ``terminated`` on reaching it.
    horizon : int
        Steps H of ``success_probability`` and ``horizon_return``.
    methods : tuple of str
        ``<model>_<variant>`` names.
    alpha_sparse, alpha_uniform, lengthscale, radius, selection, prior, boundary, other_pooling
        Settings of the beliefs, as in ``corrpriors sysid``.
    concentration, contamination, features, support
        As in ``corrpriors sysid``.
    """

    _GYM_BASE = True

    env_id: str = ""
    env_kwargs: str = "{}"
    env_digest: str = ""
    steps: int = DEFAULT_STEPS
    eval_every: int = 50
    replan_every: int = 50
    replan_on_doubling: bool = False
    replan_on_revisit: bool = True
    n_samples: int = 10
    discount: float = 0.99
    learn_rewards: bool = False
    rewards: str = "transition"
    terminals: str = "known"
    horizon: int = 100
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


def x_values(config: Any) -> list[float]:
    """Return the scoring steps 0, E, 2E, ... and the last step, ``steps`` (as
    :func:`~corrpriors.applications.run_psrl` scores them).
    """
    steps = int(config.steps)
    x = list(range(0, steps + 1, int(config.eval_every)))
    return [float(t) for t in (x if x[-1] == steps else [*x, steps])]


def run_seed(config: PSRLConfig, *, rng: np.random.Generator) -> SeedResult:
    """Every method's PSRL run on the environment, scored every ``eval_every`` steps and at the last.

    All methods of a seed start from the same environment seed; each draws from its own stream.
    Curves: the environment's :func:`metric_names` per method, shape (len(x_values),). Per-method extras:
    ``expected_return`` (discounted, shape (E,)), ``regret`` (cumulative, at the scorings after
    step 0, shape (E - 1,); see :func:`~corrpriors.applications.run_psrl`), ``cpu_seconds``,
    ``fit_seconds``, ``n_fits``, ``n_plans`` (the agent's plans, the first included),
    ``episodes``, ``first_reward_episode`` and
    ``first_optimal_episode`` (NaN: never; shape (1,)). Seed extras: ``optimal_return``, ``uniform_return``,
    ``optimal_success``, ``optimal_horizon_return`` (shape (1,)).
    """
    from ..applications.psrl import PSRLAgent, run_psrl
    from ..mdp import policy_iteration

    env, mdp = load_configured_env(config)
    goals = goal_states(mdp)
    streams = method_stream(rng, tuple(config.methods))
    env_seed = int(rng.integers(2**32))
    known = mdp.expected_rewards() if config.rewards == "expected" else mdp.rewards
    terminal = mdp.terminal if config.terminals == "known" else None
    curves: dict[str, dict[str, np.ndarray]] = {m: {} for m in metric_names(mdp)}
    per: dict[str, dict[str, np.ndarray]] = {k: {} for k in (
        "expected_return", "cpu_seconds", "fit_seconds", "n_fits", "n_plans", "episodes", "regret",
        "first_reward_episode", "first_optimal_episode")}
    out: dict[str, Any] = {}
    for method in config.methods:
        model, variant = split_method(method)
        belief = make_belief(model, mdp, config)
        agent = PSRLAgent(belief, None if config.learn_rewards else known, config.discount,
                          variant=variant, n_samples=config.n_samples, replan_every=config.replan_every,
                          learn_rewards=bool(config.learn_rewards), terminal=terminal,
                          replan_on_doubling=bool(config.replan_on_doubling),
                          replan_on_revisit=bool(config.replan_on_revisit))
        cpu = time.process_time()
        out = run_psrl(env, agent, config.steps, rng=streams[method], eval_every=config.eval_every,
                       true_mdp=mdp, env_seed=env_seed)
        per["cpu_seconds"][method] = np.array([time.process_time() - cpu])
        success, ret = horizon_stats(mdp, out["policies"], goals, config.horizon)
        scores = {"normalized_return": out["normalized_return"], "success_probability": success,
                  "horizon_return": ret}
        for metric, block in curves.items():
            block[method] = scores[metric]
        per["expected_return"][method] = out["expected_return"]
        per["fit_seconds"][method] = np.array([float(getattr(belief, "fit_seconds_", 0.0))])
        per["n_fits"][method] = np.array([float(getattr(belief, "n_fits_", 0))])
        per["n_plans"][method] = np.array([float(agent.n_plans_)])
        per["episodes"][method] = np.array([float(np.sum(out["terminated"] | out["truncated"]))])
        per["regret"][method] = out["regret"][np.asarray(out["steps"][1:]) - 1]
        for key in ("first_reward_episode", "first_optimal_episode"):
            per[key][method] = np.array([float(out[key])])
    env.close()
    optimal_policy = policy_iteration(dataclasses.replace(mdp, discount=config.discount)).policy
    opt_success, opt_return = horizon_stats(mdp, optimal_policy[None], goals, config.horizon)
    extras = {"optimal_return": np.array([float(out["optimal_return"])]),
              "uniform_return": np.array([float(out["uniform_return"])]),
              "optimal_success": opt_success, "optimal_horizon_return": opt_return}
    return SeedResult(curves=curves, extras=extras, method_extras=per)


def metric_names(mdp: Any) -> dict[str, str]:
    """Name the metrics of an environment (and which direction is better).

    ``success_probability`` needs goal states; ``horizon_return`` is left out where it equals
    ``success_probability`` (rewards 1 for entering a goal, else 0).
    """
    goals = goal_states(mdp)
    names = {"normalized_return": "higher"}
    if goals.size:
        names["success_probability"] = "higher"
    if not return_is_success(mdp, goals):
        names["horizon_return"] = "higher"
    return names


def steps_to_optimal(x: list[float], curve: np.ndarray) -> tuple[float | None, float | None, float]:
    """When a normalised-return curve first reaches the optimum, and from when it stays there.

    Parameters
    ----------
    x : list of float
        The scoring steps.
    curve : ndarray of shape (len(x),)
        ``normalized_return`` of the greedy policy (optimal: at least ``1 - OPTIMAL_TOL``).

    Returns
    -------
    first : float or None
        First step at which the greedy policy is optimal (None: never).
    stays : float or None
        First step from which it is optimal at every later scoring (None: not at the end).
    share : float
        Fraction of the scorings from ``first`` on at which it is optimal (0 if never).
    """
    optimal = np.asarray(curve, dtype=float) >= 1.0 - OPTIMAL_TOL
    if not optimal.any():
        return None, None, 0.0
    i = int(np.argmax(optimal))
    not_optimal = np.flatnonzero(~optimal)
    if not_optimal.size == 0:
        stays: float | None = float(x[0])
    elif not_optimal[-1] == len(optimal) - 1:
        stays = None
    else:
        stays = float(x[not_optimal[-1] + 1])
    return float(x[i]), stays, float(optimal[i:].mean())


def _episode(extras: Mapping, key: str, method: str) -> float | None:
    """A per-seed episode count of ``extras`` (None: never, or not recorded by an older run)."""
    v = extras.get(key, {}).get(method)
    if v is None or not np.isfinite(float(np.asarray(v).ravel()[0])):
        return None
    return float(np.asarray(v).ravel()[0])


def _last(extras: Mapping, key: str, method: str) -> float | None:
    """The last value of a per-seed curve of ``extras`` (None if absent or empty)."""
    v = extras.get(key, {}).get(method)
    return None if v is None or np.size(v) == 0 else float(np.asarray(v).ravel()[-1])


def _span(values: list[float]) -> str:
    """``"a-b"`` (or ``"a"``) of steps: whole numbers, printed as such."""
    lo, hi = (f"{v:,.0f}" if float(v).is_integer() else num(v) for v in (min(values), max(values)))
    return lo if lo == hi else f"{lo}-{hi}"


class PSRLExperiment(GymExperiment):
    """``corrpriors psrl`` on one environment (an instance of the experiment protocol)."""

    KIND = KIND
    BASE_CONFIG = PSRLConfig
    X_NAME = "steps"
    PAPER_SEEDS = DEFAULT_SEEDS
    QUICK_SEEDS = QUICK_SEEDS
    X_LABEL = "environment steps taken by the agent"
    run_seed = staticmethod(run_seed)
    x_values = staticmethod(x_values)

    @property
    def DESCRIPTION(self) -> str:  # noqa: N802 - the protocol's name
        """One line for the run header."""
        return f"PSRL on {self.ENVIRONMENT}: normalised return of the greedy policy vs steps"

    def _setup(self, env: Any, mdp: Any) -> None:
        self._coordinates = mdp.coordinates
        self._mdp = mdp
        self._return_ranges: dict[float, tuple[float, float]] = {}
        self.METRICS = metric_names(mdp)
        self.METRIC_LABELS = {
            "normalized_return": "normalised return of the greedy policy\n(0 = uniformly random, 1 = optimal)",
            "success_probability": "probability of reaching the goal\nwithin the horizon (greedy policy)",
            "horizon_return": "expected return over the horizon\n(greedy policy, undiscounted)",
        }

    def quick_config(self) -> Any:
        """500 steps (seconds on the toy-text maps)."""
        return self.Config(steps=QUICK_STEPS)

    #: The valid range of every setting (checked before any work; ``--list-settings`` shows it).
    RANGES = {
        **environment_ranges(),
        "steps": Interval(int, 1, MAX_STEPS),
        "eval_every": Interval(int, 1, MAX_STEPS),
        "replan_every": Interval(int, 1, MAX_STEPS),
        "replan_on_doubling": Boolean(),
        "replan_on_revisit": Boolean(),
        "n_samples": Interval(int, 1, MAX_SAMPLES),
        "discount": DISCOUNT,
        "learn_rewards": Boolean(),
        "rewards": Options("transition", "expected"),
        "terminals": Options("known", "observed"),
        "horizon": Interval(int, 1, MAX_HORIZON, note="the exact statistics take S^2 work per step"),
        "methods": Each(Options(*ALL_METHODS), min_len=1, max_len=len(ALL_METHODS), distinct=True),
        **model_ranges(),
    }

    def check_config(self, config: Any) -> None:
        """Raise ``ValueError`` naming the field of an invalid ``config`` (ranges, environment, memory)."""
        self.check_environment(config)
        check_ranges(self, config)
        if config.learn_rewards and config.rewards != "transition":
            raise ValueError(f"rewards: the learned rewards replace the known ones; got "
                             f"learn_rewards with rewards={config.rewards!r}")
        check_methods(config.methods, ALL_METHODS)
        coords = self.coordinates(config)
        check_model_settings(config, coords)
        check_correlated(coords, tuple(config.methods), self.env_id)
        sampling = any(m.endswith("_sampling") for m in config.methods)
        self.check_run_memory(config, coords, samples=int(config.n_samples) if sampling else 0,
                              observed=int(config.steps),
                              scorings=len(x_values(config)))   # horizon_stats
        self.check_return_range(float(config.discount))

    def check_return_range(self, discount: float) -> None:
        """Raise ``ValueError`` naming ``discount`` if no policy beats the uniform one at it.

        The normalised return divides by the optimal policy's expected return minus the uniformly
        random policy's (:func:`~corrpriors.mdp.metrics.return_range`, what every seed scores by);
        where the reward is out of reach at this discount (a goal hundreds of slippery steps away at
        0.99) that difference vanishes and every seed would fail after its model is read -- so the
        configuration is refused here, before any seed. One optimal plan on the true model per
        discount (cached).
        """
        import dataclasses

        from ..mdp.metrics import return_range

        if discount not in self._return_ranges:
            self._return_ranges[discount] = return_range(dataclasses.replace(self._mdp, discount=discount))
        lo, hi = self._return_ranges[discount]
        if not hi - lo > 1e-12 * max(1.0, abs(hi)):
            raise ValueError(
                f"discount: at discount {discount:g} the optimal policy's expected return on {self.ENVIRONMENT} "
                f"({hi:.3g}) does not exceed the uniformly random policy's ({lo:.3g}): the reward is out of reach "
                "at this discount (or unreachable) and the normalised return every seed is scored by is undefined; "
                "use a discount closer to 1 (e.g. 0.999) or a smaller environment")

    def estimate_seed_cost(self, config: Any) -> Any:
        """The cost model's CPU seconds of one seed on this machine
        (:func:`~corrpriors.experiments._gym_time.psrl_seed_cost` x
        :func:`~corrpriors.experiments._gym_time.machine_factor`).
        """
        from ._gym_time import for_this_machine, psrl_seed_cost

        settings = self.cost_settings(config)
        cost = psrl_seed_cost(settings.pop("n_states"), settings.pop("n_actions"), settings.pop("n_dims"),
                              tuple(config.methods), int(config.steps), config.replan_every, config.eval_every,
                              int(config.n_samples), doubling=bool(config.replan_on_doubling),
                              revisit=bool(config.replan_on_revisit), horizon=int(config.horizon),
                              sparse_model=self._sparse_model, **settings)
        return for_this_machine(cost)

    def summarise_extra(self, config: Any, results: Mapping[int, SeedResult], metrics: dict) -> dict:
        """Per method: the step from which the greedy policy stays optimal (per seed), final scores, cost."""
        x = x_values(config)
        seeds = sorted(results)
        table: dict[str, Any] = {}
        notes = []
        for method in metrics["normalized_return"]["methods"]:
            found = [steps_to_optimal(x, results[s].curves["normalized_return"][method]) for s in seeds]
            cpu = float(np.mean([results[s].method_extras["cpu_seconds"][method][0] for s in seeds]))
            per_seed = [results[s].method_extras for s in seeds]
            table[method] = {"seeds": [int(s) for s in seeds],
                             "first_optimal_step": [f[0] for f in found],
                             "optimal_to_the_end_from_step": [f[1] for f in found],
                             "share_optimal_after_first": [f[2] for f in found],
                             "first_optimal_episode": [_episode(e, "first_optimal_episode", method)
                                                       for e in per_seed],
                             "first_reward_episode": [_episode(e, "first_reward_episode", method)
                                                      for e in per_seed],
                             "final_regret": [_last(e, "regret", method) for e in per_seed],
                             "n_plans": [_last(e, "n_plans", method) for e in per_seed],
                             "cpu_seconds_per_seed": cpu}
            first = [f[0] for f in found if f[0] is not None]
            stays = [f[1] for f in found if f[1] is not None]
            if first:
                share = float(np.mean([f[2] for f in found if f[0] is not None]))
                text = (f"optimal from step {_span(first)} in {len(first)}/{len(seeds)} seeds, then at "
                        f"{share:.0%} of the scorings; to the end in {len(stays)}/{len(seeds)}"
                        + (f" (from {_span(stays)})" if stays else ""))
            else:
                best = float(max(np.max(results[s].curves["normalized_return"][method]) for s in seeds))
                text = f"never optimal in {len(seeds)} seeds (highest {num_below(best, 1.0)})"
            plans = [p for p in table[method]["n_plans"] if p is not None]
            per_plan = f", {num(float(np.mean(plans)))} plans/seed" if plans else ""
            notes.append(f"{method}: {text}; {num(cpu)} CPU s/seed{per_plan}")
        extras = results[seeds[0]].extras
        reference = {"optimal_return": float(extras["optimal_return"][0]),
                     "uniform_return": float(extras["uniform_return"][0]),
                     "optimal_horizon_return": float(extras["optimal_horizon_return"][0])}
        if "success_probability" in metrics:
            reference["optimal_success_probability"] = float(extras["optimal_success"][0])
        notes.insert(0, f"optimal = normalised return within {OPTIMAL_TOL:g} of 1 (the optimal policy's); "
                        "the table rounds to 3 significant digits")
        notes.append("optimal policy: " + ", ".join(f"{k} {num(v)}" for k, v in reference.items())
                     + f" (discount {num(config.discount)}, horizon {config.horizon} steps)")
        tail = int(config.steps) % int(config.eval_every)
        notes.append(f"scored at step 0 and every {config.eval_every} steps"
                     + (f", and at the last step, {int(config.steps):,} ({tail} after the one before)" if tail else "")
                     + f"; final_regret is the cumulative regret at step {int(config.steps):,}")
        doubling = bool(config.replan_on_doubling)
        rule = "doubling" if doubling else "revisit" if config.replan_on_revisit else "schedule"
        notes.append(f"replans: every {config.replan_every} steps" + {
            "doubling": ", and when a state-action pair's visits double (TSDE)",
            "revisit": ", and when a state-action pair visited since the last replan comes back with its "
                       "visits doubled",
            "schedule": ""}[rule])
        return {"methods": table, "reference": reference, "replan_on_doubling": doubling, "replan_rule": rule,
                "notes": notes}

    def figures(self, config: Any, results: Mapping[int, SeedResult], summary: dict) -> list[FigureSpec]:
        """One figure: a panel per metric against steps, mean ± std over seeds, the optimal policy dashed."""
        ref = summary["extra"]["reference"]
        h = int(config.horizon)
        panels = {
            "normalized_return": (1.0, "normalised return of the greedy policy\n(0 = uniformly random, 1 = optimal)",
                                  "normalised discounted return"),
            "success_probability": (ref.get("optimal_success_probability"),
                                    f"probability of reaching the goal\nwithin {h} steps (greedy policy)",
                                    f"probability of reaching the goal within {h} steps"),
            "horizon_return": (ref["optimal_horizon_return"],
                               f"expected return over {h} steps\n(greedy policy, undiscounted)",
                               f"expected return over {h} steps"),
        }
        metrics = list(summary["metrics"])
        fig = panels_figure(summary, [(m, panels[m][1], panels[m][0]) for m in metrics], x_label=self.X_LABEL,
                            environment=self.ENVIRONMENT)
        what = ", ".join(panels[m][2] for m in metrics)
        return [FigureSpec(f"{self.NAME}-curves", fig,
                           f"PSRL on {self.ENVIRONMENT}: {what} of the greedy policy against steps, mean ± std "
                           "over seeds (the normalised return's bands clipped at 1, the optimal policy's); "
                           "dashed black: the optimal policy")]


__all__ = ["ALL_METHODS", "METHODS", "PSRLConfig", "PSRLExperiment", "run_seed",
           "metric_names", "split_method", "steps_to_optimal", "x_values"]
