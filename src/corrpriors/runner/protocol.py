"""The experiment protocol: what an experiment provides and what one seed returns.

An experiment is any object -- usually a module -- with the attributes below. The runner
(:func:`corrpriors.experiments.run_experiment`, ``corrpriors reproduce``) does everything
else: seeds and their random streams, parallel workers, saving every finished seed (npz +
json, never pickle) in a folder named after the configuration, resuming, ``metrics.json``,
the claim checks' caveats, warnings, figures and the closing summary.

Adding an experiment
--------------------
Write one module (or one class instance, e.g. one per Gymnasium environment) that provides:

Required

``NAME`` : str
    Folder and registry name (``"system-id"``).
``DESCRIPTION`` : str
    One line for ``reproduce --list`` and the run header.
``X_NAME`` : str
    Short name of the x axis in ``metrics.json`` (``"transitions"``).
``METRICS`` : dict of str to {"lower", "higher"}
    Every metric curve a seed returns and which direction is better.
``PAPER_SEEDS``, ``QUICK_SEEDS`` : int
    Seed counts of a full and of a ``--quick`` run.
``Config`` : frozen dataclass
    Every setting, with the paper's values as defaults (``reproduce --set key=value``
    overrides any field; the field's annotation -- ``int``, ``float``, ``bool``, ``str``,
    ``tuple`` -- is how the value is parsed and checked).
``quick_config()`` -> Config
    Small settings that finish in seconds.
``x_values(config)`` -> list of float
    The x grid of every curve.
``run_seed(config, *, rng)`` -> :class:`SeedResult`
    One independent repetition, all randomness from the keyword-only ``rng`` (a
    ``numpy.random.Generator``; the runner passes it by keyword).

Optional

``ENVIRONMENT`` : str
    The environment as a reader should see it in figure titles (``"10x10 tunnel world"``).
``X_LABEL`` : str
    x-axis label in words with units (``"transitions observed (T)"``); default ``X_NAME``.
``METRIC_LABELS`` : dict of str to str
    y-axis label of every metric in words with units.
``METHOD_LABELS`` : dict of str to str
    Legend label of every method outside the method vocabulary (a plug-in's own methods); a
    vocabulary name always keeps its vocabulary label, in the figures as everywhere else.
``DEFAULT_LABEL`` : str
    Folder label of ``Config()`` when its defaults are not the paper's (default ``"paper"``).
``check_config(config)``
    Raise ``ValueError`` naming the field for an invalid config (called before any work).
``resolve_config(config)`` -> Config
    The config with every sentinel replaced by the value actually used (e.g. a length scale
    of 0 meaning "the largest distance"); recorded in ``metrics.json``.
``summarise_extra(config, results, metrics)`` -> dict
    Experiment-specific summaries from ``results`` (seed -> :class:`SeedResult`) and the
    mean/std ``metrics`` block; may hold ``"claims"`` (a list of :class:`Claim`) and
    ``"notes"`` (a list of one-line strings printed under the table).
``figures(config, results, summary)`` -> list of :class:`FigureSpec`
    The figures, drawn from arrays only (no environments rebuilt, no fixed seeds); the runner
    saves each as ``<name>.png`` and ``<name>.pdf``. Default: one curve figure per metric.

Register it with :func:`corrpriors.experiments.register` (a module, a dotted path or an
object); ``corrpriors reproduce NAME`` then runs it like the paper's experiments.

Examples
--------
A complete experiment (in a module ``toy.py``)::

    import dataclasses
    import numpy as np
    from corrpriors.runner import SeedResult

    NAME, DESCRIPTION, X_NAME = "toy", "a toy", "steps"
    METRICS = {"error": "lower"}
    PAPER_SEEDS, QUICK_SEEDS = 10, 2

    @dataclasses.dataclass(frozen=True)
    class Config:
        n_points: int = 5

    def quick_config():
        return Config(n_points=3)

    def x_values(config):
        return [float(i) for i in range(config.n_points)]

    def run_seed(config, *, rng):
        x = np.asarray(x_values(config))
        return SeedResult(curves={"error": {"a": 1 / (1 + x) + rng.normal(size=x.size)}})
"""

from __future__ import annotations

import dataclasses
import inspect
import pathlib
import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

#: Names of metrics, methods and extras: letters, digits, ``_ . -`` (they become file-safe keys).
_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")


def _check_name(name: Any, what: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ValueError(f"{what}: expected a name of letters, digits, '_', '.' or '-', got {name!r}")
    return name


def _plain_array(value: Any, what: str) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype == object:
        raise ValueError(f"{what}: expected a plain numeric or string array, got an object array")
    return arr


@dataclasses.dataclass(frozen=True)
class SeedResult:
    """Everything one seed of an experiment produced.

    Attributes
    ----------
    curves : dict of str to dict of str to ndarray
        ``curves[metric][method]``: ndarray of shape (len(x_values),), one value per x. Every
        metric of the experiment's ``METRICS`` must be present, with at least one method.
    extras : dict of str to ndarray
        Seed-level arrays for summaries and figures (e.g. ``"expert"``: ndarray of shape (S, A)).
    method_extras : dict of str to dict of str to ndarray
        Per-method arrays: ``method_extras[name][method]`` (e.g. the learned scale of each
        method along x).

    Notes
    -----
    Names are letters, digits, ``_``, ``.`` and ``-``. The arrays are stored as they are (an
    ``.npz`` without pickle), so object arrays are refused.
    """

    curves: Mapping[str, Mapping[str, np.ndarray]]
    extras: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)
    method_extras: Mapping[str, Mapping[str, np.ndarray]] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        def nested(block: Any, what: str, as_float: bool) -> dict[str, dict[str, np.ndarray]]:
            if not isinstance(block, Mapping):
                raise TypeError(f"{what}: expected a dict of dicts of arrays, got {type(block).__name__}")
            out: dict[str, dict[str, np.ndarray]] = {}
            for key, inner in block.items():
                _check_name(key, f"{what} key")
                if not isinstance(inner, Mapping):
                    raise TypeError(f"{what}[{key!r}]: expected a dict of method -> array, "
                                    f"got {type(inner).__name__}")
                out[key] = {}
                for method, arr in inner.items():
                    _check_name(method, f"{what}[{key!r}] method")
                    a = _plain_array(arr, f"{what}[{key!r}][{method!r}]")
                    out[key][method] = np.asarray(a, dtype=float) if as_float else a
            return out

        curves = nested(self.curves, "curves", as_float=True)
        if not isinstance(self.extras, Mapping):
            raise TypeError(f"extras: expected a dict of arrays, got {type(self.extras).__name__}")
        extras = {_check_name(k, "extras key"): _plain_array(v, f"extras[{k!r}]") for k, v in self.extras.items()}
        method_extras = nested(self.method_extras, "method_extras", as_float=False)
        object.__setattr__(self, "curves", curves)
        object.__setattr__(self, "extras", extras)
        object.__setattr__(self, "method_extras", method_extras)

    def methods(self, metric: str) -> list[str]:
        """Return the methods of ``metric``, in the order the experiment gave them."""
        return list(self.curves[metric])


@dataclasses.dataclass(frozen=True)
class Claim:
    """One of the paper's claims checked on a run.

    Attributes
    ----------
    claim : str
        The statement, in words.
    holds : bool
        Whether the run's numbers support it (a verdict only at paper scale; at quick or
        custom settings the runner labels it indicative).
    detail : str
        The numbers behind the verdict.
    """

    claim: str
    holds: bool
    detail: str


@dataclasses.dataclass(frozen=True)
class FigureSpec:
    """A figure to save, with its file stem and a caption.

    ``name`` is the file stem (``<experiment>-<what>``), ``figure`` the matplotlib figure and
    ``caption`` one line saying what it shows (printed in the closing summary and the report).
    """

    name: str
    figure: Any
    caption: str


@dataclasses.dataclass(frozen=True)
class SavedFigure:
    """A figure written by the runner: its files (``.png``, ``.pdf``) and its caption."""

    paths: tuple[pathlib.Path, ...]
    caption: str


@runtime_checkable
class Experiment(Protocol):
    """The required part of the experiment protocol (see the module docstring).

    Modules satisfy it structurally; so does any object with these attributes.
    """

    NAME: str
    DESCRIPTION: str
    X_NAME: str
    METRICS: Mapping[str, str]
    PAPER_SEEDS: int
    QUICK_SEEDS: int
    Config: type

    def quick_config(self) -> Any:
        """The small settings of ``--quick`` (a ``Config`` instance)."""

    def x_values(self, config: Any) -> Sequence[float]:
        """The x grid of every metric curve under ``config`` (e.g. numbers of transitions)."""

    def run_seed(self, config: Any, *, rng: np.random.Generator) -> SeedResult:
        """Run one seed with its own random stream; return the curves of every metric and method."""


REQUIRED_ATTRIBUTES = (
    "NAME", "DESCRIPTION", "X_NAME", "METRICS", "PAPER_SEEDS", "QUICK_SEEDS",
    "Config", "quick_config", "x_values", "run_seed",
)


class ExperimentUnavailable(RuntimeError):
    """The experiment's module is missing, fails to import or breaks the protocol."""


def validate_experiment(experiment: Any, name: str | None = None) -> None:
    """Raise :class:`ExperimentUnavailable` unless ``experiment`` follows the protocol."""
    label = getattr(experiment, "__name__", type(experiment).__name__)
    missing = [a for a in REQUIRED_ATTRIBUTES if not hasattr(experiment, a)]
    if missing:
        raise ExperimentUnavailable(
            f"experiment {label} lacks {', '.join(missing)} (see corrpriors.runner.protocol)"
        )
    metrics = experiment.METRICS
    if not isinstance(metrics, Mapping) or not metrics:
        raise ExperimentUnavailable(f"{label}.METRICS: expected a non-empty dict")
    bad = {m: b for m, b in metrics.items() if b not in ("lower", "higher")}
    if bad:
        raise ExperimentUnavailable(f"{label}.METRICS: 'better' must be 'lower' or 'higher', got {bad}")
    if not (isinstance(experiment.Config, type) and dataclasses.is_dataclass(experiment.Config)):
        raise ExperimentUnavailable(f"{label}.Config: expected a dataclass")
    _check_run_seed(experiment.run_seed, label)
    if name is not None and experiment.NAME != name:
        raise ExperimentUnavailable(f"{label}.NAME is {experiment.NAME!r} but it is registered as {name!r}")


def _check_run_seed(run_seed: Any, label: str) -> None:
    """Raise unless ``run_seed`` can be called as ``run_seed(config, rng=generator)``."""
    try:
        params = inspect.signature(run_seed).parameters
    except (TypeError, ValueError):  # a builtin or C callable: cannot inspect, trust it
        return
    if "rng" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    raise ExperimentUnavailable(
        f"{label}.run_seed: expected the signature run_seed(config, *, rng) (the runner passes the "
        f"generator as the keyword rng), got run_seed{inspect.signature(run_seed)}"
    )


def check_seed_result(experiment: Any, n_x: int, seed: int, result: Any) -> SeedResult:
    """Return ``result`` if it is a :class:`SeedResult` with every metric curve of shape (n_x,)."""
    name = experiment.NAME
    if not isinstance(result, SeedResult):
        raise TypeError(f"{name}.run_seed must return a SeedResult, got {type(result).__name__} (seed {seed})")
    for metric in experiment.METRICS:
        if not result.curves.get(metric):
            raise ValueError(
                f"{name}: seed {seed}: no curves for metric {metric!r} (got metrics {sorted(result.curves)})"
            )
        for method, curve in result.curves[metric].items():
            if curve.shape != (n_x,):
                raise ValueError(
                    f"{name}: seed {seed}: curves[{metric!r}][{method!r}] must have shape "
                    f"(len(x_values),) = ({n_x},), got {curve.shape}"
                )
    unknown = sorted(set(result.curves) - set(experiment.METRICS))
    if unknown:
        raise ValueError(f"{name}: seed {seed}: curves for metrics {unknown} not declared in METRICS")
    return result


def label_of(experiment: Any, attribute: str, key: str | None = None, default: str | None = None) -> str:
    """Return an optional label of the protocol (``X_LABEL``, ``METRIC_LABELS[key]``, ...) or ``default``."""
    value = getattr(experiment, attribute, None)
    if key is not None:
        value = value.get(key) if isinstance(value, Mapping) else None
    if isinstance(value, str) and value:
        return value
    return default if default is not None else (key or "")


def std_over_seeds(values: Any) -> np.ndarray:
    """The "± std over seeds" of a ``metrics.json`` record: the sample standard deviation over axis 0.

    ``ddof=1``, and 0 when ``values`` (ndarray of shape (n_seeds, ...)) holds a single seed.
    """
    values = np.asarray(values, dtype=float)
    return values.std(axis=0, ddof=1) if len(values) > 1 else np.zeros_like(values[0])


__all__ = [
    "Claim",
    "Experiment",
    "ExperimentUnavailable",
    "FigureSpec",
    "REQUIRED_ATTRIBUTES",
    "SavedFigure",
    "SeedResult",
    "check_seed_result",
    "label_of",
    "std_over_seeds",
    "validate_experiment",
]
