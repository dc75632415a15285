"""What ``corrpriors sysid ENV`` and ``corrpriors psrl ENV`` share.

Loading any registered environment, the per-environment experiment object, goal states, the
exact horizon statistics, the beliefs and the figure.

An experiment on a Gymnasium environment is one *instance* of the experiment protocol
(:mod:`corrpriors.runner.protocol`) per environment id and keyword arguments. Its ``Config`` is a dataclass whose
first two fields are the ``env_id`` and the ``env_kwargs`` (canonical JSON) with that environment
as their defaults, so the environment is part of the configuration -- recorded in
``config.json`` and ``metrics.json`` and part of the results folder's hash -- and a ``--set``
cannot silently change it. Results go to ``OUT/<kind>-<env id>/<settings>-<hash>/``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..mdp._sparse import transition_entries, transition_reward_values
from ..runner._ranges import unknown_entries
from ._gym_memory import (
    LOAD_TABLES,
    RUN_TABLES,
    check_dense_tables,
    check_load_memory,
    dense_table_bytes,
    env_entries,
    run_memory,
    scoring_memory,
    table_bytes,
)
from ._shared import method_stream

#: Keyword arguments shown in full in titles up to this length; longer values are summarised.
_SHORT = 24


# ----------------------------------------------------------------------------- environments


def parse_env_kwargs(text: Any) -> dict:
    """Parse ``--env-kwargs``: a JSON object (``'{"map_name": "8x8"}'``), a dict, or None (``{}``).

    Raises
    ------
    ValueError
        Not valid JSON, or JSON that is not an object.
    """
    if text is None:
        return {}
    if isinstance(text, Mapping):
        value: Any = dict(text)
    elif isinstance(text, str):
        try:
            value = json.loads(text) if text.strip() else {}
        except json.JSONDecodeError as exc:
            raise ValueError(f"--env-kwargs: expected a JSON object such as '{{\"map_name\": \"8x8\"}}', got "
                             f"{text!r} ({exc.msg} at character {exc.pos})") from None
    else:
        raise TypeError(f"env_kwargs: expected a JSON string or a dict, got {type(text).__name__}")
    if not isinstance(value, dict):
        raise ValueError(f"--env-kwargs: expected a JSON object {{...}} of keyword arguments, got "
                         f"{type(value).__name__} {text!r}")
    return value


def canonical_kwargs(kwargs: Mapping) -> str:
    """Return the keyword arguments as canonical JSON (sorted keys, no spaces): the configuration's form."""
    try:
        return json.dumps(dict(kwargs), sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"env_kwargs: expected JSON-serialisable keyword arguments, got {kwargs!r} ({exc})") from None


def file_safe(env_id: str) -> str:
    """``env_id`` with every character but letters, digits, ``_ . -`` replaced by ``_`` (a folder name)."""
    return re.sub(r"[^A-Za-z0-9_.\-]", "_", env_id)


def _short(value: Any) -> str:
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        if len({len(v) for v in value}) == 1:
            return f"custom {len(value)}x{len(value[0])} map"
    text = str(value)
    return text if len(text) <= _SHORT else text[: _SHORT - 3] + "..."


def env_label(env_id: str, kwargs: Mapping) -> str:
    """Name the environment as a reader should see it: ``FrozenLake-v1 (map_name=8x8, is_slippery=True)``."""
    if not kwargs:
        return env_id
    parts = [_short(v) if isinstance(v, (list, tuple)) and _short(v).startswith("custom")
             else f"{k}={_short(v)}" for k, v in sorted(kwargs.items())]
    return f"{env_id} ({', '.join(parts)})"


def resolve_features(spec: str) -> Any:
    """Import the function of a ``--features module:function`` specification.

    Raises
    ------
    ValueError
        Not ``module:function``, the module cannot be imported or has no such callable.
    """
    if not isinstance(spec, str) or spec.count(":") != 1 or not all(spec.split(":")):
        raise ValueError(f"--features: expected module:function (e.g. mypackage.envs:coordinates), "
                         f"got {spec!r}")
    module_name, name = spec.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"--features: cannot import {module_name!r}: {_one_line(exc)}") from None
    func = getattr(module, name, None)
    if not callable(func):
        raise ValueError(f"--features: {module_name} has no function {name!r}")
    return func


def load_env(env_id: str, env_kwargs: str | Mapping | None = None,
             features: str = "") -> tuple[Any, Any]:
    """Make a registered environment and read its exact tabular model.

    Parameters
    ----------
    env_id : str
        Any id ``gymnasium.make`` accepts (``FrozenLake-v1``, ``corrpriors/TunnelWorld-v0``,
        ``module:Env-v0``).
    env_kwargs : str or mapping, optional
        Keyword arguments for ``gymnasium.make`` (JSON object or dict).
    features : str, default=""
        ``"module:function"``: the state coordinates are ``function(env)`` (an array of shape
        (S, D)) instead of those the environment publishes.

    Returns
    -------
    (env, mdp) : gymnasium.Env and TabularMDP
        The environment and :func:`corrpriors.envs.from_gymnasium` of it.

    Raises
    ------
    ValueError
        Unknown or deprecated id, keyword arguments the environment rejects, no published model,
        a model that is not a valid one (each message is one line naming the cause).
    TypeError
        Observation or action space not Discrete.
    """
    import gymnasium

    from .. import envs as _envs  # registers corrpriors/... ids
    from .._memory import MemoryEstimateError

    check_env_id(env_id)
    kwargs = parse_env_kwargs(env_kwargs)
    try:
        env = gymnasium.make(env_id, **kwargs)
    except gymnasium.error.Error as exc:
        raise ValueError(f"ENV_ID: {env_id!r} is not a usable Gymnasium id: {_one_line(exc)}") from None
    except ImportError as exc:
        raise ValueError(f"ENV_ID: {env_id!r}: {_one_line(exc)}") from None
    except MemoryEstimateError:   # the constructor's own size check: its message names the argument
        raise
    except Exception as exc:  # the environment's constructor rejected the keyword arguments
        if not kwargs:
            raise ValueError(f"ENV_ID: {env_id} could not be made: {type(exc).__name__}: {_one_line(exc)}") from None
        raise ValueError(f"--env-kwargs: {env_id} could not be made with {canonical_kwargs(kwargs)}: "
                         f"{type(exc).__name__}: {_one_line(exc)}") from None
    coords = None
    if features:
        func = resolve_features(features)
        try:
            coords = np.asarray(func(env), dtype=np.float64)
        except Exception as exc:  # the user's function failed
            raise ValueError(f"--features: {features}(env) failed: {type(exc).__name__}: "
                             f"{_one_line(exc)}") from None
    try:
        info = _envs.env_info(env)
        check_load_memory(env, info.n_states, info.n_actions, f"reading {env_id}'s model")
        mdp = _envs.from_gymnasium(env, features=coords)
    except TypeError as exc:
        env.close()
        raise TypeError(f"ENV_ID: {env_id} is not tabular: {_one_line(exc)}") from None
    except MemoryEstimateError:
        env.close()
        raise
    except ValueError as exc:
        env.close()
        raise ValueError(f"ENV_ID: {env_id}: {_one_line(exc)}") from None
    return env, mdp


#: A module name before the ``:`` of ``module:Id-v0`` (dotted Python identifiers).
_MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def check_env_id(env_id: Any) -> None:
    """Raise ``ValueError`` naming ENV_ID unless it is an id (``Name-v0``, ``ns/Name-v0``, ``module:Name-v0``).

    The module of ``module:Name-v0`` must be a dotted Python module name and importable; a path
    such as ``../../x:Foo-v0`` is refused here, not blamed on the keyword arguments.
    """
    if not isinstance(env_id, str) or not env_id.strip():
        raise ValueError(f"ENV_ID: expected a registered Gymnasium id such as FrozenLake-v1, got {env_id!r}")
    if ":" not in env_id:
        return
    module, _, name = env_id.partition(":")
    if not _MODULE_RE.match(module) or ":" in name or not name:
        raise ValueError(f"ENV_ID: {env_id!r}: expected module:Name-v0 with a Python module name (letters, "
                         f"digits, '_' and '.') before the ':', got {module!r}")
    try:
        importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - any failure of the user's module is reported as such
        raise ValueError(f"ENV_ID: {env_id!r}: the module {module!r} named before ':' cannot be imported "
                         f"({type(exc).__name__}: {_one_line(exc)})") from None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


# ----------------------------------------------------------------------------- sizes


# ----------------------------------------------------------------------------- one environment, one table


def table_digest(mdp: Any) -> str:
    """SHA-256 (first 16 hex digits) of the model's tables: P, the rewards and the terminal states.

    Two builds of an environment describe the same dynamics exactly when their digests agree.
    """
    h = hashlib.sha256()
    for name, value in (("P", mdp.transitions), ("r", mdp.rewards), ("terminal", mdp.terminal)):
        h.update(name.encode())
        for arr in _table_arrays(value):
            arr = np.ascontiguousarray(arr)
            h.update(f"{arr.dtype.str}{arr.shape}".encode())
            h.update(arr.tobytes())
    return h.hexdigest()[:16]


def _table_arrays(value: Any) -> list[np.ndarray]:
    """The arrays that define a dense or sparse table (the form is part of the digest: it follows the size)."""
    if value is None:
        return [np.zeros(0, dtype=np.bool_)]
    matrix = getattr(value, "matrix", None)            # SparseTransitions: its CSR (S A, S) matrix
    if matrix is not None and hasattr(matrix, "indptr"):
        return [np.asarray(matrix.indptr), np.asarray(matrix.indices), np.asarray(matrix.data)]
    if hasattr(value, "fallback"):                     # SparseTransitionRewards: listed values + rules
        return [np.asarray(getattr(value, name)) for name in
                ("indptr", "indices", "values", "arrival", "arrival_known", "fallback", "inert")]
    return [np.asarray(value)]


def _map_hint(env: Any) -> str:
    desc = getattr(getattr(env, "unwrapped", env), "desc", None)
    if desc is None:
        return ""
    try:
        rows = ["".join(c.decode() if isinstance(c, bytes) else str(c) for c in row) for row in np.asarray(desc)]
    except (TypeError, ValueError, UnicodeDecodeError):
        return ""
    text = json.dumps({"desc": rows}, separators=(",", ":"))
    return f"; to keep one map, pass it, e.g. the map drawn this time: --env-kwargs '{text[:400]}'" + (
        "..." if len(text) > 400 else "")


def build_environment(env_id: str, env_kwargs: str | Mapping | None = None) -> tuple[Any, Any, str]:
    """Make the environment twice and refuse if the two builds differ; return ``(env, mdp, digest)``.

    Raises
    ------
    ValueError
        The construction draws at random (FrozenLake with ``map_name`` null draws a new map each
        time): seeds of one configuration would run on different environments. The message says
        how to fix one map.
    """
    env, mdp = load_env(env_id, env_kwargs)
    digest = table_digest(mdp)
    again, mdp_again = load_env(env_id, env_kwargs)
    other = table_digest(mdp_again)
    again.close()
    if other != digest:
        hint = _map_hint(env)
        env.close()
        kwargs = canonical_kwargs(parse_env_kwargs(env_kwargs))
        raise ValueError(f"ENV_ID, --env-kwargs: {env_id} with {kwargs} builds a different environment each "
                         f"time (two builds gave tables {digest} and {other}): its constructor draws at random, "
                         f"so seeds of one run would use different environments{hint}")
    return env, mdp, digest


def load_configured_env(config: Any) -> tuple[Any, Any]:
    """Make ``config``'s environment for a seed and check that it is the planned one (its ``env_digest``).

    Raises
    ------
    ValueError
        The table built here differs from the one recorded in the configuration.
    """
    env, mdp = load_env(config.env_id, config.env_kwargs, getattr(config, "features", ""))
    expected = getattr(config, "env_digest", "")
    digest = table_digest(mdp)
    if expected and digest != expected:
        env.close()
        raise ValueError(f"env_digest: {config.env_id} with {config.env_kwargs} built the table {digest} here, "
                         f"not the planned {expected} (another Gymnasium version or a constructor that draws "
                         "at random); this seed is not computed on another environment")
    return env, mdp


def kwargs_type_warnings(env: Any, env_id: str, kwargs: Mapping) -> list[str]:
    """Say which keyword arguments have another type than the environment's default for them.

    ``{"is_slippery": "no"}`` is a string where FrozenLake's default is a bool: the environment
    takes it as given (a non-empty string is true), so the run would be slippery and labelled
    ``is_slippery=no``. Defaults come from the registration and the constructor's signature;
    ``None`` on either side, ints for floats and lists for tuples are not reported.
    """
    import inspect

    defaults: dict[str, Any] = {}
    try:
        cls = type(env.unwrapped)
        for name, param in inspect.signature(cls.__init__).parameters.items():
            if param.default is not inspect.Parameter.empty:
                defaults[name] = param.default
    except (TypeError, ValueError):  # pragma: no cover - an uninspectable constructor
        pass
    spec = getattr(env, "spec", None)
    registered = getattr(getattr(spec, "kwargs", None), "items", None)
    if spec is not None and registered is not None:
        try:
            import gymnasium

            defaults.update(gymnasium.spec(spec.id).kwargs)
        except Exception:  # noqa: BLE001 - a spec that cannot be looked up again: signature defaults only
            pass
    out = []
    for key, value in kwargs.items():
        default = defaults.get(key)
        if value is None or default is None or _same_kind(value, default):
            continue
        hint = " (use true or false)" if isinstance(default, bool) else ""
        out.append(f"--env-kwargs: {key}={json.dumps(value)} is a {type(value).__name__} where {env_id}'s default "
                   f"is the {type(default).__name__} {default!r}; the environment takes it as given{hint}")
    return out


def _same_kind(value: Any, default: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, (int, float)):
        return isinstance(value, (int, float)) and (isinstance(default, float) or isinstance(value, int))
    if isinstance(default, (list, tuple)):
        return isinstance(value, (list, tuple))
    return isinstance(value, type(default))


# ----------------------------------------------------------------------------- scores


def goal_states(mdp: Any) -> np.ndarray:
    """Return the goal states: the terminal states entered with the highest reward.

    FrozenLake's ``G`` (reward 1; holes pay 0), CliffWalking's goal, Taxi's delivered states.
    With state or state-action rewards every terminal state counts. Empty if the model has no
    terminal state (a continuing task).

    Returns
    -------
    ndarray of shape (G,)
        State indices.
    """
    if mdp.terminal is None or not np.any(mdp.terminal):
        return np.zeros(0, dtype=np.int64)
    terminal = np.flatnonzero(mdp.terminal)
    if mdp.rewards.ndim != 3:
        return terminal
    s, a, s2, _ = transition_entries(mdp.transitions)      # dense or sparse tables
    into = ~mdp.terminal[s] & mdp.terminal[s2]
    best_in = np.full(mdp.n_states, -np.inf)
    np.maximum.at(best_in, s2[into], transition_reward_values(mdp.rewards, s[into], a[into], s2[into]))
    entering = best_in[terminal]
    reached = np.isfinite(entering)
    if not reached.any():
        return terminal
    best = entering[reached].max()
    return terminal[reached & (entering >= best - 1e-12 * (1.0 + abs(best)))]


def return_is_success(mdp: Any, goals: Any) -> bool:
    """Whether every reward is 1 for entering a goal state and 0 otherwise (FrozenLake).

    Then the expected return over a horizon equals the probability of reaching a goal within it.
    """
    goals = np.asarray(goals, dtype=np.int64)
    if goals.size == 0 or mdp.rewards.ndim != 3:
        return False
    s, a, s2, _ = transition_entries(mdp.transitions)      # dense or sparse tables
    live = ~mdp.terminal_mask[s]
    expected = np.isin(s2[live], goals).astype(float)
    return bool(np.all(transition_reward_values(mdp.rewards, s[live], a[live], s2[live]) == expected))


def horizon_stats(mdp: Any, policies: Any, goals: Any, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    r"""Exact goal probability and expected return of policies over ``horizon`` steps.

    The state distribution starts at the model's start distribution (uniform without one) and is
    pushed through :math:`P_\pi` ``horizon`` times; terminal states are absorbing and pay nothing.

    Parameters
    ----------
    mdp : TabularMDP
        The true model.
    policies : array_like of int, shape (E, S), or of float, shape (E, S, A)
        Deterministic policies (an action per state) or action distributions per state.
    goals : array_like of int, shape (G,)
        Goal states (:func:`goal_states`).
    horizon : int
        Steps H.

    Returns
    -------
    success : ndarray of shape (E,)
        Probability that a goal state has been reached within H steps (0 without goals).
    ret : ndarray of shape (E,)
        Expected undiscounted sum of the first H rewards.
    """
    from ..mdp.checks import check_policy

    pi = check_policy(policies, mdp.n_states, mdp.n_actions, "policies", batch=True)
    if pi.ndim != 3:
        raise ValueError(f"policies: expected a batch of shape (E, S) or (E, S, A), got {np.shape(policies)}")
    S = mdp.n_states
    live = (~mdp.terminal_mask).astype(float)
    r_pi = np.einsum("esa,sa->es", pi, np.asarray(mdp.reward_matrix)) * live
    mu = mdp.initial_distribution
    d = np.tile(np.full(S, 1.0 / S) if mu is None else np.asarray(mu, dtype=float), (pi.shape[0], 1))
    total = np.zeros(pi.shape[0])
    step = absorbing_step(mdp, pi)
    for _ in range(int(horizon)):
        total += np.einsum("es,es->e", d, r_pi)
        d = step(d)
    return d[:, np.asarray(goals, dtype=np.int64)].sum(axis=1), total


def absorbing_step(mdp: Any, pi: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    r"""One step of state distributions under policies, terminal states absorbing.

    The model's rows of a terminal state are never used: a terminal state keeps its mass (the
    episode has ended), whatever the rows say -- a :class:`~corrpriors.envs.TabularEnv`'s model
    may list any row there, since planners take :math:`V = 0` at terminal states.

    Parameters
    ----------
    mdp : TabularMDP
        Dense or sparse.
    pi : ndarray of shape (E, S, A)
        Action distributions per state.

    Returns
    -------
    callable
        ``step(d)``: distributions d of shape (E, S) -> shape (E, S); for a sparse model one sparse
        :math:`P_\pi` per policy, no dense (S, S).
    """
    live = ~mdp.terminal_mask
    stay = (~live).astype(float)
    if mdp.is_sparse:
        P_pis = [mdp.transitions.policy_matrix(p, keep=live.astype(float)).T.tocsr() for p in pi]
        return lambda d: np.stack([P_T @ de for P_T, de in zip(P_pis, d)]) + d * stay
    P_pi = np.einsum("esa,sat->est", pi * live[:, None], np.asarray(mdp.transitions))
    return lambda d: np.einsum("es,est->et", d, P_pi) + d * stay


#: Metrics with a fixed range: their spread bands are cut to it.
BOUNDED_METRICS = {"success_probability": (0.0, 1.0)}


def panels_figure(summary: Mapping, panels: list[tuple[str, str, float | None]], *, x_label: str,
                  environment: str) -> Any:
    """One figure with a panel per metric (mean ± std over seeds) and one legend at the right.

    Parameters
    ----------
    summary : mapping
        A ``metrics.json`` record.
    panels : list of (metric, y label, reference level or None)
        The panels, left to right; the reference is drawn dashed as "optimal policy".
    x_label : str
        x-axis label in words.
    environment : str
        Named in the title, with the seed count.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from ..plotting._common import new_figure, seeds_text
    from ..plotting._curves import legend_outside, plot_metric_curves

    fig = new_figure((3.7 * len(panels) + 2.6, 3.9))
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (metric, y_label, level) in zip(axes, panels):
        plot_metric_curves(summary, metric, ax=ax, reference=level, reference_label="optimal policy",
                           x_label=x_label, y_label=y_label, title="", legend=False,
                           limits=BOUNDED_METRICS.get(metric),
                           reference_bounds=metric == "normalized_return")  # 1 = the optimal return
    handles, names = axes[0].get_legend_handles_labels()
    legend_outside(fig, handles, names, reserve=2.6)
    n_seeds = max(len(summary.get("seeds", [])), 1)
    fig.suptitle(f"{environment}: {seeds_text(n_seeds)}, mean ± std over seeds", fontsize="medium")
    return fig


#: The transition models, by the name the methods start with.
MODELS = ("pg", "pg_absolute", "dirichlet_sparse", "dirichlet_uniform")


def make_belief(model: str, mdp: Any, config: Any) -> Any:
    """Build the transition belief ``model`` for the environment ``mdp`` (fields of ``config`` as settings).

    ``pg``: :meth:`CorrelatedTransitionModel.for_mdp` with the relative encoding (moves as
    displacements within ``config.radius``); ``pg_absolute``: the absolute encoding (next states);
    both with a prior of length scale ``config.lengthscale`` on the state coordinates
    (``config.prior``: ``"auto"``, ``"dense"`` squared-exponential kernel or ``"gmrf"`` sparse
    precision) and the scale chosen by ``config.selection``; ``pg``'s moves out of the state space
    follow ``config.boundary`` (``"auto"``: ``for_mdp``'s default) and its far jumps share
    ``config.other_pooling``. ``dirichlet_sparse`` /
    ``dirichlet_uniform``: independent Dirichlet rows with ``config.alpha_sparse`` /
    ``config.alpha_uniform``.
    """
    from ..applications.transitions import CorrelatedTransitionModel, DirichletTransitionModel

    if model == "dirichlet_sparse":
        return DirichletTransitionModel(mdp.n_states, mdp.n_actions, alpha=config.alpha_sparse)
    if model == "dirichlet_uniform":
        return DirichletTransitionModel(mdp.n_states, mdp.n_actions, alpha=config.alpha_uniform)
    if model not in ("pg", "pg_absolute"):
        raise ValueError(f"model: expected one of {', '.join(MODELS)}, got {model!r}")
    relative = model == "pg"
    concentration = str(getattr(config, "concentration", "auto"))
    contamination = str(getattr(config, "contamination", "auto"))
    layer: dict[str, Any] = {}   # "auto": for_mdp's defaults (the layer off on sparse storage)
    if concentration != "auto":
        layer["concentration"] = None if concentration == "none" else float(concentration)
    if contamination == "none":
        layer["contamination_prior"] = None
    if str(getattr(config, "support", "auto")) == "none":
        layer["support_prior"] = None
    return CorrelatedTransitionModel.for_mdp(
        mdp, encoding="relative" if relative else "absolute", lengthscale=config.lengthscale,
        radius=config.radius, selection=config.selection, prior=config.prior,
        boundary=config.boundary if relative and config.boundary != "auto" else None,
        other_pooling=config.other_pooling, **layer)


#: The settings of the correlated beliefs' per-(state, action) layer (see :func:`used_layer_settings`).
LAYER_SETTINGS = ("concentration", "contamination", "support")


def used_layer_settings(config: Any, n_states: int) -> dict[str, str]:
    """The layer settings of ``config`` that :func:`make_belief` turns off on ``n_states`` states, as used.

    ``"auto"`` means what :meth:`CorrelatedTransitionModel.for_mdp`'s defaults do: on sparse
    storage (from :data:`~corrpriors.applications.transitions.SPARSE_FROM_STATES` states on)
    there is no layer, so ``concentration``, ``contamination`` and ``support`` were ``"none"``,
    and without a concentration the sparse-support hypothesis is dropped (``support`` was
    ``"none"``). Returns ``{setting: "none"}`` for every ``"auto"`` that was none (empty where
    every setting is what it says, or no correlated method runs), so that a run records, and
    labels its methods by, the model it used (:func:`corrpriors._methods.method`).
    """
    from ..applications.transitions import SPARSE_FROM_STATES

    if not any(str(m).startswith("pg") for m in getattr(config, "methods", ())):
        return {}
    sparse = int(n_states) >= SPARSE_FROM_STATES
    values = {name: str(getattr(config, name, "auto")) for name in LAYER_SETTINGS}
    used = dict(values)
    if sparse:
        used = {name: "none" if value == "auto" else value for name, value in used.items()}
    if used["concentration"] == "none" and used["support"] == "auto":
        used["support"] = "none"
    return {name: value for name, value in used.items() if value != values[name]}


def model_ranges() -> dict:
    """The ranges of the belief settings ``sysid`` and ``psrl`` share (``RANGES`` of both)."""
    from ..applications.transitions import BOUNDARY_RULES
    from ..runner._ranges import CONCENTRATION, LENGTHSCALE, Interval, Options, OptionsOrNumber, Text

    return {
        "alpha_sparse": CONCENTRATION,
        "alpha_uniform": CONCENTRATION,
        "lengthscale": LENGTHSCALE,
        "radius": Interval(int, 1, MAX_RADIUS, note="and at most the largest coordinate difference of two states"),
        "selection": Options("collapsed", "elbo", "em", "fixed"),
        "prior": Options("auto", "dense", "gmrf"),
        "boundary": Options("auto", *BOUNDARY_RULES),
        "other_pooling": Interval(float, 0.0, 1e6),
        "concentration": OptionsOrNumber(("auto", "none"), CONCENTRATION),
        "contamination": Options("auto", "none"),
        "support": Options("auto", "none"),
        "features": Text(max_len=500, note="module:function, or empty for the environment's coordinates"),
    }


def environment_ranges() -> dict:
    """The ranges of ``env_id``, ``env_kwargs`` and ``env_digest`` (checked against the environment too)."""
    from ..runner._ranges import Text

    return {"env_id": Text(max_len=500, note="a registered Gymnasium id"),
            "env_kwargs": Text(note="a JSON object"),
            "env_digest": Text(max_len=64, note="read from the environment's table")}


#: The largest window half-width of the relative encoding: (2 r + 1)^D categories.
MAX_RADIUS = 100


def check_model_settings(config: Any, coordinates: Any = None) -> None:
    """Raise ``ValueError`` naming the first invalid model setting of ``config``.

    Beyond :func:`model_ranges`, the relative encoding's ``radius`` must not exceed the largest
    coordinate difference between two states (``coordinates``, ndarray of shape (S, D)): a
    wider window only adds categories no transition can reach ((2 r + 1)^D of them). A fixed
    ``concentration`` needs the per-pair layer, hence dense storage: fewer than
    :data:`~corrpriors.applications.transitions.SPARSE_FROM_STATES` states when a correlated
    method runs (it failed in the seeds before).
    """
    for field, constraint in model_ranges().items():
        constraint.check(getattr(config, field), field)
    if coordinates is not None:
        from ..applications.transitions import SPARSE_FROM_STATES
        from ..applications.transitions._categories import check_radius

        check_radius(config.radius, coordinates)
        n_states = int(np.shape(coordinates)[0])
        correlated = any(str(m).startswith("pg") for m in config.methods)
        if correlated and n_states >= SPARSE_FROM_STATES and str(config.concentration) not in ("auto", "none"):
            raise ValueError(f"concentration: a fixed concentration ({config.concentration}) is the per-(state, "
                             f"action) layer's, which needs dense storage; this environment has {n_states:,} "
                             f"states (sparse storage from {SPARSE_FROM_STATES:,} on): use none (or auto, "
                             "which is none here)")


# ----------------------------------------------------------------------------- the experiment object


_CONFIG_CLASSES: dict[tuple, type] = {}


def config_class(base: type, env_id: str, env_kwargs: str, env_digest: str = "") -> type:
    """Return the ``Config`` of one environment: ``base`` with its id, keyword arguments and digest as defaults.

    One class per (base, id, kwargs, digest) in a process, so configurations compare equal after pickling.
    """
    key = (base.__module__, base.__qualname__, env_id, env_kwargs, env_digest)
    cls = _CONFIG_CLASSES.get(key)
    if cls is None:
        cls = dataclasses.make_dataclass(
            base.__name__,
            [("env_id", str, dataclasses.field(default=env_id)),
             ("env_kwargs", str, dataclasses.field(default=env_kwargs)),
             ("env_digest", str, dataclasses.field(default=env_digest))],
            bases=(base,), frozen=True)
        cls.__module__ = base.__module__
        cls.__doc__ = base.__doc__
        _CONFIG_CLASSES[key] = cls
    return cls


def _rebuild_config(module: str, name: str, values: dict) -> Any:
    base = getattr(importlib.import_module(module), name)
    return config_class(base, values["env_id"], values["env_kwargs"], values.get("env_digest", ""))(**values)


class GymConfig:
    """Mixin of the environment experiments' configs: pickled by value of their fields."""

    env_id: str
    env_kwargs: str
    env_digest: str

    def __reduce__(self) -> tuple:
        base = next(c for c in type(self).__mro__ if c.__dict__.get("_GYM_BASE"))
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        return _rebuild_config, (base.__module__, base.__qualname__, values)


class GymExperiment:
    """One environment's experiment (the protocol's attributes); subclasses set the kind.

    Parameters
    ----------
    env_id : str
        A registered Gymnasium id.
    env_kwargs : str or mapping, optional
        Keyword arguments for ``gymnasium.make`` (JSON object or dict).

    Raises
    ------
    ValueError, TypeError
        The environment cannot be made, is not tabular or publishes no model.
    """

    KIND = ""
    BASE_CONFIG: type = object
    X_NAME = ""
    METRICS: dict[str, str] = {}
    PAPER_SEEDS = 1
    QUICK_SEEDS = 1
    #: Folder label of ``Config()`` (the runner's default is "paper", which these are not).
    DEFAULT_LABEL = "default"

    def __init__(self, env_id: str, env_kwargs: str | Mapping | None = None) -> None:
        import warnings

        from ..exceptions import EnvironmentWarning

        kwargs = parse_env_kwargs(env_kwargs)
        env, mdp, digest = build_environment(env_id, kwargs)
        for message in kwargs_type_warnings(env, env_id, kwargs):
            warnings.warn(message, EnvironmentWarning, stacklevel=2)
        self.env_id = env_id
        self.env_kwargs = canonical_kwargs(kwargs)
        self.env_digest = digest
        self.n_states, self.n_actions = mdp.n_states, mdp.n_actions
        self._model_bytes = sum(table_bytes(v) for v in (mdp.transitions, mdp.rewards))
        self._sparse_model = bool(mdp.is_sparse)
        self._model_entries = (int(mdp.transitions.nnz) if mdp.is_sparse
                               else self.n_states * self.n_actions * self.n_states)
        self._listed = env_entries(env, self.n_states, self.n_actions)
        self.NAME = f"{self.KIND}-{file_safe(env_id)}"
        self.ENVIRONMENT = env_label(env_id, kwargs)
        self.Config = config_class(self.BASE_CONFIG, env_id, self.env_kwargs, digest)
        self._coordinates = mdp.coordinates
        self._setup(env, mdp)
        env.close()

    def _setup(self, env: Any, mdp: Any) -> None:
        """Per-kind checks and attributes that depend on the environment."""

    def coordinates(self, config: Any) -> Any:
        """The state coordinates the beliefs of ``config`` use, ndarray of shape (S, D) or None.

        The environment's own, or those of ``config.features`` (``module:function``).
        """
        features = getattr(config, "features", "")
        if not features:
            return self._coordinates
        env, mdp = load_env(self.env_id, self.env_kwargs, features)
        env.close()
        return mdp.coordinates

    def __reduce__(self) -> tuple:
        return type(self), (self.env_id, self.env_kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.env_id!r}, {self.env_kwargs!r})"

    def check_environment(self, config: Any) -> None:
        """Raise ``ValueError`` if ``config`` names another environment (or table) than this experiment's."""
        if (config.env_id, config.env_kwargs) != (self.env_id, self.env_kwargs):
            raise ValueError(f"env_id, env_kwargs: this experiment is {self.env_id} with {self.env_kwargs}; "
                             f"got {config.env_id} with {config.env_kwargs} (make another experiment instead)")
        if config.env_digest != self.env_digest:
            raise ValueError(f"env_digest: {self.env_id}'s table has the digest {self.env_digest}; got "
                             f"{config.env_digest!r} (the digest is read from the environment, not set)")

    def check_run_memory(self, config: Any, coords: Any, samples: int = 0, observed: int = 0,
                         scorings: int = 0, point_estimate: str = "mean") -> None:
        """Refuse a configuration whose seeds would not fit in memory, before any work.

        :func:`~corrpriors.experiments._gym_memory.run_memory` of the model as built (dense or
        sparse), the largest belief with ``samples`` posterior draws and ``observed`` transitions,
        plus :func:`~corrpriors.experiments._gym_memory.scoring_memory` of ``scorings`` greedy policies
        (and the Hellinger-Bayes estimate's draws with ``point_estimate="hellinger"``).
        ``coords`` (ndarray of shape (S, D) or None) are :meth:`coordinates` of ``config``, which
        the caller has already built (with ``features`` that builds the environment once more).
        """
        from .._memory import check_memory
        from ..applications.transitions._categories import window_size

        scales = np.atleast_1d(config.lengthscale).size
        n_dims = 0 if coords is None else int(np.asarray(coords).shape[1])
        need = run_memory(self.n_states, self.n_actions, n_dims, tuple(config.methods), samples,
                          model_bytes=self._model_bytes, entries=self._listed, radius=int(config.radius),
                          prior=str(config.prior), n_scales=int(scales), observed=int(observed),
                          point_estimate=point_estimate)
        if scorings:
            need += scoring_memory(self.n_states, self.n_actions, scorings, sparse_model=self._sparse_model,
                                   model_entries=self._model_entries)
        window = window_size(n_dims, int(config.radius))
        relative = any(m.startswith("pg") and not m.startswith("pg_absolute") for m in config.methods)
        wide = (f"the relative encoding (pg) has (2 radius + 1)^D = {window:.3g} moves of D = {n_dims} "
                f"coordinates, more than the states: use a smaller radius or fewer --features dimensions, or "
                if relative and window > self.n_states else "")
        check_memory(need, f"a seed of {self.KIND} on {self.ENVIRONMENT} ({self.n_states:,} states, "
                           f"{self.n_actions} actions; methods {', '.join(config.methods)})",
                     wide + "use a smaller state space" + (", fewer --samples" if samples else "")
                     + (", a larger --eval-every" if scorings else "") + " or other methods (the Dirichlet "
                     "beliefs and pg need no (S, S) arrays above 2,000 states; pg_absolute does)")


    def resolve_config(self, config: Any) -> Any:
        """``config`` with the layer settings the beliefs used on this environment (:func:`used_layer_settings`).

        Recorded in ``metrics.json``: the labels of ``pg`` and ``pg_absolute`` follow it
        (``PG + per-pair layer`` where the layer was on), and the report lists what ``"auto"``
        became as chosen by the run.
        """
        used = used_layer_settings(config, self.n_states)
        return dataclasses.replace(config, **used) if used else config

    def cost_settings(self, config: Any) -> dict:
        """The sizes and settings the cost model of a seed needs (:mod:`._gym_time`)."""
        coords = self.coordinates(config)
        return {"n_states": self.n_states, "n_actions": self.n_actions,
                "n_dims": 0 if coords is None else int(np.asarray(coords).shape[1]),
                "radius": int(config.radius), "selection": str(config.selection), "prior": str(config.prior),
                "n_scales": int(np.atleast_1d(config.lengthscale).size)}


def check_methods(methods: Any, known: tuple) -> None:
    """Raise ``ValueError`` unless ``methods`` is a non-empty tuple of distinct known names."""
    if not isinstance(methods, (tuple, list)) or not methods:
        raise ValueError(f"methods: expected a non-empty list of {', '.join(known)}, got {methods!r}")
    unknown = [m for m in methods if m not in known]
    if unknown:
        raise ValueError(unknown_entries("methods", unknown, known))
    if len(set(methods)) != len(methods):
        raise ValueError(f"methods: each method at most once, got {', '.join(methods)}")


def check_correlated(coords: Any, methods: tuple, env_id: str) -> None:
    """Raise ``ValueError`` if a correlated method lacks the state coordinates it needs.

    ``coords`` (ndarray of shape (S, D), or None when the environment has none) must exist for
    every ``pg`` method and be distinct integers of magnitude at most 2**53 for the relative
    encoding (:func:`~corrpriors.applications.transitions._categories.integer_coordinates_problem`).
    """
    pg = [m for m in methods if m.startswith("pg")]
    if not pg:
        return
    if coords is None:
        raise ValueError(f"methods: {', '.join(pg)} need state coordinates, and none are known for {env_id}; "
                         f"give them with --features module:function (or as the environment's "
                         f"state_coordinates attribute) or run the Dirichlet methods only (--methods)")
    relative = [m for m in pg if not m.startswith("pg_absolute")]
    if not relative:
        return
    from ..applications.transitions._categories import integer_coordinates_problem

    problem = integer_coordinates_problem(coords)
    if problem is not None:
        raise ValueError(f"methods: {', '.join(relative)} (relative moves) need distinct integer state coordinates "
                         f"(of magnitude at most 2**53); {env_id}'s are not: {problem}; give other --features "
                         f"or use the pg_absolute methods")


def positive_int(config: Any, *fields: str) -> None:
    """Raise ``ValueError`` naming the first of ``fields`` that is not a positive integer."""
    for field in fields:
        value = getattr(config, field)
        if isinstance(value, bool) or int(value) != value or value < 1:
            raise ValueError(f"{field}: expected a positive integer, got {value!r}")


__all__ = [
    "LOAD_TABLES",
    "MAX_RADIUS",
    "MODELS",
    "RUN_TABLES",
    "GymConfig",
    "GymExperiment",
    "LAYER_SETTINGS",
    "build_environment",
    "canonical_kwargs",
    "check_dense_tables",
    "check_env_id",
    "check_correlated",
    "check_methods",
    "check_model_settings",
    "config_class",
    "dense_table_bytes",
    "env_label",
    "environment_ranges",
    "file_safe",
    "goal_states",
    "absorbing_step",
    "horizon_stats",
    "kwargs_type_warnings",
    "load_configured_env",
    "load_env",
    "make_belief",
    "method_stream",
    "model_ranges",
    "panels_figure",
    "parse_env_kwargs",
    "positive_int",
    "return_is_success",
    "run_memory",
    "table_digest",
    "used_layer_settings",
]
