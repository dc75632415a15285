r"""Knowledge transfer between related tasks: multi-task transition beliefs and policies.

Several tasks share a state space and an encoding (for example grid worlds with the same kind of
motion noise but different wind): every task has its own count models (one
:class:`~corrpriors.core.model.CorrelatedMultinomial` per action for transitions, one over the
actions for a policy), and a task with little data borrows from the others as much as the data
say the tasks are alike.

The model
---------
For one count model of task :math:`t` (covariates = states, sticks :math:`k`), let the *source*
be the single-task model fitted to the other tasks' data pooled, with posterior means
:math:`\lambda^{S}_k` and learned constant means :math:`\mu^S_k`, and
:math:`\bar d_k = \lambda^S_k - \mu^S_k\mathbf 1` its deviation field. The prior of task
:math:`t` is

.. math::

    \psi^{(t)}_{\cdot k} \sim N\big(m_k\mathbf 1 + \rho\,\bar d_k,\; \theta\tilde\Sigma\big),
    \qquad m_k \sim N\big((1-\rho)\,m^0_k + \rho\,\mu^S_k,\; \tau_0^2(1-\rho^2)\big),

with :math:`m^0_k, \tau_0` the single-task model's hyper-prior of the constant (uniform logits, 3)
and the **task similarity** :math:`\rho \in [0, 1)`. This is the conditional of task :math:`t` in
a joint Gaussian model in which its field and constant correlate by :math:`\rho` with the
source's -- the product kernel :math:`B \otimes \tilde\Sigma` of
:class:`~corrpriors.kernels.MultiTaskKernel` with :math:`B = [[1, \rho], [\rho, 1]]` -- when the
source is known (the other tasks have plenty of data); :math:`\theta` is the variance left
unexplained. :math:`\rho \to 1` pins task :math:`t` to the source (what pooling all data does,
but with a deviation field of its own); :math:`\rho = 0` is no transfer, and the task then keeps
its single-task model.

Learning the similarity
-----------------------
:math:`\rho` is one number per task, shared by its count models, chosen on the lattice
:data:`SIMILARITY_GRID` by the task's **leave-one-out log predictive probability** -- every
transition predicted by the full-data model at :math:`\rho` without it
(:func:`~corrpriors.core.loo.loo_log_predictive`: the cavity approximation with EP cavities, no
refit per transition; Vehtari et al. 2016) -- plus a prior on :math:`\rho`: probability
``prior_related`` (default 1/2) that the task is related to the others, spread over the
lattice, the rest on :math:`\rho = 0` (:class:`TransferSearch`). At :math:`\rho = 0` it uses
the same family's model (constants integrated out, no source), so that it measures what the
source adds; and it transfers only when the best similarity's objective exceeds
:math:`\rho = 0`'s by more than one standard error of their difference
(``similarity_rule="one_se"``; the paired per-covariate differences), so the task borrows only
when its data clearly say the source predicts them. A task without any data of its own gets the
mixture over the lattice with the prior's weights (there is nothing to compare; see
:class:`MultiTaskTransitionModel`). Every model is fitted at the joint model's conditional scale
:math:`\theta = \theta_S(1 - \rho^2)`, with :math:`\theta_S` the source's scale (chosen by its
collapsed bound; :math:`\theta_S` itself at :math:`\rho = 0`, the task's marginal in the joint
model), so that the similarities are compared as the joint model's correlations; the model the
task keeps is the full-data fit at the chosen similarity, the one the criterion scored.

Until round 15 the criterion was the **two-fold cross-validated** log predictive probability
(``similarity_criterion="cv"``: each half predicted by the models fitted to the other half, a
pseudo-Bayes factor, Geisser & Eddy 1979; ``cv_scale``, ``full_scale`` and ``cv_folds`` apply
to it). Training on half the data values a prior at half the data, so it favoured more transfer
than the full data need; leave-one-out measures it at the data the task has. Measured in the
transfer experiment at relatedness 0 (windy family, 40 seeds of three sets): the median
similarity 0 at every budget (two-fold: up to 0.875 at 25 target transitions) and the worst
seed 1.10x the single-task model's error (two-fold: 1.36x); the price is some of the gain at
the smallest budgets on one of two related seed sets ("Round 15" in the user guide's transfer
measurements). The approximation matters: with the VI fit's own cavities (``cavities="vi"``)
the leave-one-out value is optimistic by up to 3 nats for a flexible prior and not at all for
a stiff one, which kept :math:`\rho = 0` on 4 and 8 of 16 related seeds.
(Measured in the transfer experiment, seeds 600-607, for the two-fold criterion: with
:math:`\rho = 0`'s folds climbing their own scale against the conditional scale above 0, the
median similarity at relatedness 0 rose to 0.375 at 100 target transitions; with
:math:`\theta_S` at :math:`\rho = 0` it stays 0.)
The evidence itself (the collapsed bound with the constants integrated out,
``similarity_criterion="evidence"``) is the other option, and it is not the default for a
measured reason: with few data it is dominated by the Occam factor of the vague
hyper-prior of the single-task constants (:math:`\tau_0 = 3`), so *any* informative prior --
also a model of unrelated tasks -- beats :math:`\rho = 0` by several nats (in the transfer
experiment at relatedness 0, 5 of 8 seeds chose :math:`\rho \ge 0.75` from 25 target
transitions on, up to 23 % worse than the single-task model).

The per-(state, action) layer
-----------------------------
Tasks whose beliefs have the layer of
:meth:`~corrpriors.applications.CorrelatedTransitionModel.for_mdp` (``concentration``,
``contamination_prior``, ...; its defaults, and so :meth:`MultiTaskTransitionModel.for_mdps`'s
since round 13) keep it in their transfer beliefs. At :math:`\rho = 0` the transfer belief is the
task's single-task belief, layer and all. Above 0 the layer's base :math:`Q` is the transfer
prediction: the layer alternates table counts and fits as for a single task
(:mod:`~corrpriors.applications.transitions._layer`), and every fit is the transfer model at
the chosen similarity and its conditional scale (:meth:`TransferSearch.select` with
``similarity=``); its hyper-parameters (concentrations, contamination, ...) are learned from
the task's data (the concentrations also from the borrowed pair counts below). The similarity
is chosen first, on the task's observed counts, by the same cross-validation as without the
layer. The source stays the *plain* correlated model of
the other tasks' counts: a source's pair is direct evidence about the task's same pair, not
one piece of evidence about its neighbours, so its counts are not reduced to table counts
(measured on slippery lakes, relatedness 0.8, 2 seeds: with the sources' own layer the
Hellinger error at 25 target transitions was 1.20 times the plain transfer belief's; with the
plain source 1.00). The sources' *per-pair* detail beyond what the correlated field carries
enters the pairs' Dirichlets: the other tasks' counts at a pair, times a weight
:math:`\eta`, are observed before the task's own (a power prior, as for the far jumps),

.. math::

    P^{(t)}_{sa} \mid n, n^S \sim \mathrm{Dir}\big(c_a B_{sa} + \eta\, n^S_{sa} + n_{sa}\big),

and the concentrations' posterior learns from both. :math:`\eta` is one number per task on the
lattice :data:`PAIR_WEIGHTS` times :math:`\rho` (prior 1/2 on 0), chosen by the layer's
evidence of the task's counts given the borrowed ones
(:func:`~corrpriors.applications.transitions._layer.borrowed_log_evidence`, summed over the
actions). A fixed :math:`\eta = \rho` over-borrowed where tasks differ cell by cell (lakes at
relatedness 0.5: 1.12 times the single-task error at 800 target transitions); the evidence
borrows where the pairs agree (see the user guide, "Transfer: measurements, round by round",
round 13).

The cost of a task's belief does not grow with the number of tasks: the fit of its pooled
source (one single-task fit with one censored-count round, about 15 CAVI fits), the
cross-validated search (per similarity evaluated -- typically 4 to 7 -- one fit per count model
and fold at the conditional scale) and the full-data fits at the chosen similarity (scale
climbs, censored-count rounds). On 4 tasks of 100 states with 2000 transitions per source and
200 for the target (``benchmarks/bench_transfer.py``, one BLAS thread) the target's belief
costs about one single-task fit of a source task and every task's belief about 6 times (about
400 CAVI fits: 15 % the sources, half the searches; 7.5 and 8.4 times at 64 and 144 states),
within a budget of ten single-task fits. Before round 7 -- every fold climbing its scale, the
sources with three rounds -- it was 2.1 and 14-20 times (about 890 fits).

Why not the joint model's EM
----------------------------
The exact joint model over (task, state) covariates with a free-form learned
:class:`~corrpriors.kernels.TaskCorrelation` works with the core's kernel-learning EM (and a
Kronecker sparse precision, :func:`~corrpriors.kernels.kronecker_precision`), but it is much
slower: every psi step factorises all tasks' covariates together, and EM learns the similarity
of a task with little data in hundreds of steps (measured on 4 tasks of 100 states: 300 EM
iterations, 190 CPU s, against 0.06 s for a single-task fit; the data-poor task's correlation
had moved from 0 to 0.35 of the true 0.8). See the user guide ("Transfer between related tasks").
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from .._threads import single_blas_thread
from .._typing import FloatArray, SeedLike
from .._validation import as_real_array, check_counts, check_int, check_positive, check_real
from .transitions import CorrelatedTransitionModel

__all__ = ["CV_SCALES", "FULL_SCALES", "MAX_CV_FOLDS", "PAIR_WEIGHTS", "SIMILARITY_CRITERIA", "SIMILARITY_GRID",
           "SIMILARITY_RULES", "MultiTaskPolicyEstimator", "MultiTaskTransitionModel", "SourceField",
           "TransferSearch", "TransferSelection", "average_weights", "similarity_log_prior", "split_counts",
           "transfer_hyper_prior"]

#: The similarities :math:`\rho` of the lattice climbed by :class:`TransferSearch`: 0 (no
#: transfer), then steps of a quarter up to 0.75 and halving distances to 1.
SIMILARITY_GRID = (0.0, 0.25, 0.5, 0.75, 0.875, 0.9375, 0.96875, 0.984375, 0.9921875, 0.99609375)

#: The weights :math:`\eta` a transfer belief with a per-pair layer may give the other tasks'
#: counts at its pairs, as fractions of its similarity :math:`\rho` (module docstring, "The
#: per-(state, action) layer"); 0 has prior probability 1/2, the others share the rest.
PAIR_WEIGHTS = (0.0, 0.125, 0.25, 0.5, 1.0)

#: The most folds a similarity's cross-validation may have (``cv_folds``): every fold adds a fit
#: (with ``cv_scale="climb"`` a climb) per count model and similarity evaluated and holds its own
#: split of the counts, so 50 folds already cost 25 times the default two; the transfer
#: experiment's ``cv_folds`` setting has the same bound.
MAX_CV_FOLDS = 50


@dataclasses.dataclass(frozen=True)
class SourceField:
    r"""What one count model of a task borrows from its related tasks.

    Attributes
    ----------
    deviation : ndarray of shape (C, K - 1)
        :math:`\bar d`: the source model's posterior mean minus its constant mean.
    constant : ndarray of shape (K - 1,)
        :math:`\mu^S`: its constant mean.
    n_sources : int
        How many related tasks' data the source pools.
    scale : float or None
        :math:`\theta_S`, the source model's scale (None: unknown). A task without data of its
        own takes :math:`\theta_S(1 - \rho^2)`, the variance the joint model leaves unexplained.
    """

    deviation: FloatArray
    constant: FloatArray
    n_sources: int
    scale: float | None = None

    def __post_init__(self) -> None:
        d = np.array(self.deviation, dtype=np.float64)
        c = np.array(self.constant, dtype=np.float64).reshape(-1)
        if d.ndim != 2 or c.shape != (d.shape[1],):
            raise ValueError(f"deviation, constant: expected shapes (C, K - 1) and (K - 1,), got "
                             f"{d.shape} and {c.shape}")
        if not (np.all(np.isfinite(d)) and np.all(np.isfinite(c))):
            raise ValueError("deviation, constant: contain NaN or infinite values")
        n_sources = check_int(self.n_sources, "n_sources", low=1)   # (True is not 1, 'a' not a count)
        for name, arr in (("deviation", d), ("constant", c)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)
        object.__setattr__(self, "n_sources", n_sources)
        if self.scale is not None:
            object.__setattr__(self, "scale", check_positive(self.scale, "scale"))

    @classmethod
    def from_model(cls, model: Any, n_sources: int = 1) -> SourceField:
        """The field of a fitted single-task model of the related tasks' pooled data.

        Parameters
        ----------
        model : CorrelatedMultinomial
            Fitted with constant prior means.
        n_sources : int
            How many tasks' data it pools.

        Returns
        -------
        SourceField
        """
        mean = np.asarray(model.mean_)
        scale = getattr(model, "scale_", None)
        return cls(np.asarray(model.psi_mean_) - mean, mean.mean(axis=0), n_sources,
                   float(model.scale if scale is None else scale))


def transfer_hyper_prior(similarity: float, source: SourceField | None, default_mean: Any,
                         default_std: float) -> tuple[FloatArray, float]:
    r"""Hyper-prior :math:`N(m_0, \tau^2)` of a task's constant means at similarity :math:`\rho`.

    :math:`m_0 = (1-\rho)\,m^0 + \rho\,\mu^S`, :math:`\tau = \tau_0\sqrt{1-\rho^2}` (module
    docstring); the single-task hyper-prior at :math:`\rho = 0` or without a source.

    Parameters
    ----------
    similarity : float
        :math:`\rho` in [0, 1).
    source : SourceField or None
    default_mean : array_like of shape (K - 1,)
        :math:`m^0` (finite; the shape of ``source.constant`` when there is a source).
    default_std : float
        :math:`\tau_0` (finite, > 0).

    Returns
    -------
    mean : ndarray of shape (K - 1,)
    std : float
    """
    rho = float(similarity)
    if not 0.0 <= rho < 1.0:
        raise ValueError(f"similarity: expected a value in [0, 1), got {similarity!r}")
    tau0 = check_positive(default_std, "default_std")
    m0 = as_real_array(default_mean, "default_mean", allow_bool=False).astype(np.float64)
    want = None if source is None else source.constant.shape
    if m0.ndim != 1 or (want is not None and m0.shape != want) or not np.all(np.isfinite(m0)):
        shape = "(K - 1,)" if want is None else f"(K - 1,) = {want}, the source's constant's"
        raise ValueError(f"default_mean: expected finite numbers of shape {shape}, got shape {m0.shape}"
                         + ("" if np.all(np.isfinite(m0)) else " with NaN or infinite values"))
    if source is None or rho == 0.0:
        return m0.copy(), tau0
    return (1.0 - rho) * m0 + rho * source.constant, tau0 * math.sqrt(1.0 - rho * rho)


#: How :class:`TransferSearch` compares similarities: ``"loo"`` (the default since round 15), the
#: approximate leave-one-out log predictive probability of the task's counts
#: (:func:`~corrpriors.core.loo.loo_log_predictive`, EP cavities) under the full-data fit at the
#: joint model's conditional scale; ``"cv"``, the two-fold cross-validated log predictive
#: probability (a pseudo-Bayes factor; the default before); ``"evidence"``, the collapsed bound
#: with the constants integrated out.
SIMILARITY_CRITERIA = ("loo", "cv", "evidence")


def split_counts(counts: Any, n_folds: int = 2) -> tuple[FloatArray, ...]:
    """Split a count matrix into ``n_folds`` parts, deterministically and as evenly as possible.

    Every cell's count ``n`` gives ``n // n_folds`` to each part; the remaining units of the
    cells go to the parts in turn (one rotation over all cells in row-major order): with two
    folds, the cells with an odd count give their last unit alternately to the first and the
    second half.

    Parameters
    ----------
    counts : array_like of shape (C, K)
        Non-negative integer counts (checked: negative, fractional, NaN and non-numeric counts
        raise, naming ``counts``).
    n_folds : int, default 2

    Returns
    -------
    tuple of ndarray of shape (C, K)
        ``n_folds`` parts that sum to ``counts``.
    """
    k = check_int(n_folds, "n_folds", low=2)
    x = check_counts(counts, "counts", min_categories=1)
    flat = np.rint(x).astype(np.int64).ravel()
    base, rest = flat // k, flat % k
    parts = [base.copy() for _ in range(k)]
    cells = np.repeat(np.arange(flat.size), rest)           # one entry per remaining unit
    for f in range(k):
        np.add.at(parts[f], cells[f::k], 1)
    out = [p.reshape(x.shape).astype(np.float64) for p in parts[:-1]]
    return (*out, x - sum(out))


def _cv_folds(x: np.ndarray, n_folds: int) -> list[tuple[FloatArray, FloatArray]]:
    """(training counts, held-out counts) of every fold of :func:`split_counts`'s parts.

    Fold ``f`` holds out part ``(f + 1) % n_folds`` (with two folds: fold 0 trains on the first
    half and predicts the second, fold 1 the reverse).
    """
    parts = split_counts(x, n_folds)
    held = [parts[(f + 1) % n_folds] for f in range(n_folds)]
    return [(np.asarray(x, dtype=np.float64) - h if n_folds > 2 else parts[f], h)
            for f, h in enumerate(held)]


#: How :class:`TransferSearch` picks a similarity from the cross-validated scores: ``"one_se"``,
#: the best similarity if its score exceeds :math:`\rho = 0`'s by more than one standard error
#: of their difference, else 0 (a one-standard-error guard on the choice that matters, transfer
#: or not; Breiman et al. 1984, Hastie, Tibshirani & Friedman 2009, sec. 7.10); ``"best"``, the
#: best score; ``"average"`` (transition beliefs without a per-pair layer), no choice: the
#: mixture of the full-data fits at the similarities the search evaluated, weighted by
#: :func:`average_weights` (pseudo-Bayesian model averaging, Yao et al. 2018) with
#: :math:`\rho = 0`'s score raised by one standard error of its difference to the best (the
#: one-standard-error guard made soft).
SIMILARITY_RULES = ("one_se", "best", "average")

#: Mixture weights below this are dropped by :func:`average_weights` (the rest renormalised).
AVERAGE_PRUNE = 1e-3


def average_weights(values: dict, similarities: Sequence[float], zero_bonus: float = 0.0) -> FloatArray:
    r"""Pseudo-Bayesian model-averaging weights of the similarities from their objectives.

    :math:`w_i \propto \exp(v_i + b\,[\rho_i = 0])` over the similarities evaluated,
    :math:`v_i` the objective of :class:`TransferSearch` (the cross-validated log predictive
    probability plus the log prior of :math:`\rho_i`) and :math:`b` ``zero_bonus`` (the
    search's ``zero_bonus_``: one standard error of the best's gain over :math:`\rho = 0`, so
    that transfer gets weight as far as its gain exceeds its noise -- the one-standard-error
    rule made soft); weights below :data:`AVERAGE_PRUNE` are set to 0 and the rest
    renormalised; similarities not evaluated get 0.

    Parameters
    ----------
    values : dict of float to float
        Objective of every similarity evaluated (``TransferSearch.choose``'s second output).
    similarities : sequence of float
        The lattice.
    zero_bonus : float, default 0
        Added to :math:`\rho = 0`'s objective (non-negative).

    Returns
    -------
    ndarray of shape (len(similarities),)
    """
    grid = list(similarities)
    w = np.zeros(len(grid))
    if not values:
        raise ValueError("values: expected the objective of at least one similarity")
    if any(rho not in grid for rho in values) or not all(math.isfinite(v) for v in values.values()):
        raise ValueError(f"values: expected finite objectives of similarities of the lattice {tuple(grid)}, "
                         f"got {values!r}")
    if not (math.isfinite(zero_bonus) and zero_bonus >= 0.0):
        raise ValueError(f"zero_bonus: expected a finite number >= 0, got {zero_bonus!r}")
    shifted = {rho: v + (zero_bonus if rho == 0.0 else 0.0) for rho, v in values.items()}
    top = max(shifted.values())
    for rho, v in shifted.items():
        w[grid.index(rho)] = math.exp(v - top)
    w /= w.sum()
    w[w < AVERAGE_PRUNE] = 0.0
    return w / w.sum()

#: The scale of :class:`TransferSearch`'s cross-validation fits at a similarity :math:`\rho`:
#: ``"conditional"``, the joint model's conditional scale :math:`\theta_S(1 - \rho^2)` of the
#: source's scale :math:`\theta_S` (:math:`\theta_S` itself at :math:`\rho = 0`; one fit per
#: fold, model and similarity); ``"climb"``, each fold's own climb of the collapsed bound over the
#: scale lattice (at least three fits).
CV_SCALES = ("conditional", "climb")
#: The scales of the full-data fits a task keeps (:class:`TransferSearch`'s ``full_scale``).
FULL_SCALES = ("conditional", "climb")


def _check_option(value: Any, name: str, options: tuple[str, ...]) -> str:
    """``value`` if it is one of ``options``, else a ``ValueError`` naming ``name``."""
    if value not in options:
        raise ValueError(f"{name}: expected one of {options}, got {value!r}")
    return str(value)


#: The defaults of the search's settings: a setting that cannot have an effect under the
#: active criterion (or with a fixed similarity) is refused unless at its default
#: (:func:`_check_used_settings`).
_SEARCH_DEFAULTS = {"similarity_criterion": "loo", "similarity_rule": "one_se", "prior_related": 0.5,
                    "cv_folds": 2, "cv_scale": "conditional", "full_scale": "conditional"}


def _check_used_settings(criterion: str, *, similarity_rule: str = "one_se", cv_folds: int = 2,
                         cv_scale: str = "conditional", full_scale: str = "conditional",
                         fixed_similarity: float | None = None,
                         prior_related: float | None = 0.5) -> None:
    """Refuse a search setting that is not at its default yet cannot have any effect.

    (Checked values.) ``cv_folds`` is used only by ``similarity_criterion="cv"``; with a
    ``fixed_similarity`` nothing is chosen, so the criterion, the rule and ``prior_related`` are
    unused too. (``"evidence"`` always takes the best objective and climbs its full-data fits'
    scale, whatever ``similarity_rule`` and ``full_scale`` say: documented, not refused, since
    ``"best"`` and ``"climb"`` ask for what it does.) A ``ValueError`` names the setting; the
    same holds for ``cv_scale``, which only ``"cv"`` uses.
    """
    d = _SEARCH_DEFAULTS
    if fixed_similarity is not None:
        why = f"fixed_similarity={fixed_similarity} (no similarity is chosen)"
        for name, value, extra in (
                ("similarity_criterion", criterion, " (the kept fits' scale follows full_scale alone)"),
                ("similarity_rule", similarity_rule, ""),
                ("prior_related", prior_related, " (a task without data takes the fixed similarity's "
                                                 "conditional prior alone)")):
            if value != d[name]:
                raise ValueError(f"{name}: unused with {why}, got {name}={value!r}{extra}; leave the "
                                 f"default {d[name]!r} or set fixed_similarity=None")
    if criterion != "cv" and cv_folds != d["cv_folds"]:
        raise ValueError(f"cv_folds: only used with similarity_criterion='cv', got cv_folds={cv_folds} "
                         f"with {criterion!r}; leave the default {d['cv_folds']}")
    if criterion != "cv" and cv_scale != d["cv_scale"]:
        raise ValueError(f"cv_scale: only used with similarity_criterion='cv', got cv_scale={cv_scale!r} "
                         f"with {criterion!r}; leave the default {d['cv_scale']!r}")


def _check_scale_range(value: Any) -> tuple[float, float]:
    """``scale_range`` as a pair of positive floats, or a ``ValueError`` naming it (no strings or
    bools: ``"ab"`` is not a pair of numbers).
    """
    want = f"scale_range: expected a pair (low, high) of positive numbers, got {value!r}"
    try:
        pair = () if isinstance(value, str) else tuple(value)
        if len(pair) != 2:
            raise ValueError(want)
        lo, hi = (check_real(v, "scale_range", 0.0, math.inf, closed="neither") for v in pair)
    except (TypeError, ValueError):
        raise ValueError(want) from None
    return lo, hi


def _check_similarities(similarities: Any) -> tuple[float, ...]:
    """``similarities`` as a tuple of floats, or a ``ValueError`` naming it: numbers (no bools or
    strings), finite (NaN compares false with everything, so an order check alone passes it),
    increasing, in [0, 1), starting at 0.
    """
    want = (f"similarities: expected an increasing sequence of numbers in [0, 1) starting at 0 "
            f"(no transfer), got {similarities!r}")
    try:
        grid = tuple(check_real(v, "similarities", 0.0, 1.0, closed="left") for v in similarities)
    except (TypeError, ValueError):
        raise ValueError(want) from None
    if not grid or grid[0] != 0.0 or any(b <= a for a, b in zip(grid, grid[1:])):
        raise ValueError(want)
    return grid


def _check_fixed_similarity(value: Any, similarities: Sequence[float], name: str = "fixed_similarity",
                            unset: str = "None") -> float | None:
    """``value`` as a float of the lattice ``similarities``, or None; else a ``ValueError``
    naming ``name`` (``unset``: how the caller spells "no fixed similarity", for the message).
    """
    if value is None:
        return None
    try:   # a number, not a bool or a string (False is not 0.0)
        rho = check_real(value, name)
    except (TypeError, ValueError):
        rho = math.nan
    if rho not in similarities:
        raise ValueError(f"{name}: expected {unset} or a value of the similarity lattice "
                         f"{tuple(similarities)}, got {value!r}")
    return rho


def _check_prior_related(value: Any) -> float | None:
    """``prior_related`` as a float in (0, 1), or None; else an error naming it (a bool or a
    string is refused, not converted).
    """
    if value is None:
        return None
    return check_real(value, "prior_related", 0.0, 1.0, closed="neither",
                      expected="a probability in (0, 1) or None")


def similarity_log_prior(similarities: Sequence[float], prior_related: float | None) -> FloatArray:
    r"""Log prior of every similarity of the lattice.

    With ``prior_related`` :math:`p`: :math:`\rho = 0` (unrelated) has probability :math:`1 - p`
    and the other values share :math:`p` equally; ``None``: uniform over the lattice.

    Parameters
    ----------
    similarities : sequence of float
        The lattice (first value 0).
    prior_related : float in (0, 1) or None

    Returns
    -------
    ndarray of shape (len(similarities),)
    """
    n = len(similarities)
    p = _check_prior_related(prior_related)
    if p is None or n == 1:
        return np.full(n, -math.log(n))
    return np.array([math.log(1.0 - p)] + [math.log(p / (n - 1))] * (n - 1))


@dataclasses.dataclass(frozen=True)
class TransferSelection:
    r"""Outcome of a :class:`TransferSearch`.

    Attributes
    ----------
    similarity : float
        The chosen :math:`\rho` (shared by the count models of the task).
    scales : ndarray of shape (M,)
        The chosen :math:`\theta` of every count model.
    value : float
        The criterion summed over the count models, plus the log prior of :math:`\rho`.
    models : list of CorrelatedMultinomial
        The models fitted there, one per count matrix (owned by the search).
    values : dict of float to float
        The objective at every similarity evaluated in this call.
    """

    similarity: float
    scales: FloatArray
    value: float
    models: list
    values: dict = dataclasses.field(repr=False)


class TransferSearch:
    r"""Choose a task's similarity :math:`\rho` and its models' scales by a bound on the evidence.

    A task has M count models (one per action for transitions, one for a policy), each with its
    related tasks' field (:class:`SourceField`). Every lattice point :math:`(\rho_i, \theta_j)`
    of a model is the prior of the module docstring with its constant means integrated out
    (exactly: a Gaussian hyper-prior on a constant adds :math:`\tau^2\mathbf 1\mathbf 1^\top` to
    the covariance), so that the criterion compares similarities as evidence and not as a fit
    of the constant:

    .. math::

        \psi_{\cdot k} \sim N\big(m_{0k}\mathbf 1 + \rho_i\bar d_k,\;
        \theta_j\tilde\Sigma + \tau^2\mathbf 1\mathbf 1^\top\big),

    :math:`(m_0, \tau)` from :func:`transfer_hyper_prior`, :math:`\theta_j = 10^{j\,\mathrm{step}}`.
    The similarity is shared by the task's models (it describes the task, and all its data
    decide it); each cross-validation fold's scale is the joint model's conditional scale
    (``cv_scale``), and so is each full-data model's at the chosen similarity (``full_scale``;
    else, and at :math:`\rho = 0`, climbed on its lattice of the collapsed bound). The objective
    of :math:`\rho_i` is the log prior of :func:`similarity_log_prior` plus, with
    ``similarity_criterion="loo"``, the approximate leave-one-out log predictive probability of
    the counts under the full-data model at :math:`\rho_i` and the joint model's conditional
    scale (:func:`~corrpriors.core.loo.loo_log_predictive`; the model the task keeps if
    :math:`\rho_i` is chosen), with ``"cv"`` the two-fold cross-validated log predictive
    probability (:func:`split_counts`), or with ``"evidence"`` the sum of the models' best
    collapsed bounds. At :math:`\rho = 0` the scores use the same family's model (constants
    integrated out, no source). Every :meth:`select` evaluates both ends and
    the middle of the lattice and climbs from the best, so the choice depends on the data,
    not on earlier calls. Models are cached per point and
    warm-started; when a source field changes, its points are rebuilt and warm-started from their
    previous solutions.

    Parameters
    ----------
    estimator : CorrelatedMultinomial
        Template with a dense prior structure :math:`\tilde\Sigma` (``covariance``: an array or a
        bound kernel) and the hyper-prior of the constant means (``mean_prior_mean``, default
        uniform logits; ``mean_prior_std`` :math:`\tau_0`, default 3); its tolerances are used.
    similarities : sequence of float, default :data:`SIMILARITY_GRID`
        Increasing, starting at 0, below 1.
    prior_related : float or None, default 0.5
        Prior probability that the task is related to the others (spread evenly over the
        similarities above 0); ``None``: a uniform prior over the lattice. 0.5 moves away from
        :math:`\rho = 0` only for a gain of :math:`\log 9` nats on the default lattice.
    similarity_criterion : {"loo", "cv", "evidence"}, default "loo"
        How similarities are compared (module docstring).
    similarity_rule : {"one_se", "best"}, default "one_se"
        With ``"loo"`` or ``"cv"``: ``"one_se"`` takes the best similarity only when its objective exceeds
        :math:`\rho = 0`'s by more than one standard error of their difference (from the
        paired per-covariate scores), else :math:`\rho = 0`
        (:data:`SIMILARITY_RULES`); ``"best"`` the best objective. ``"average"`` is the
        transition beliefs' model average (:class:`MultiTaskTransitionModel`); the search itself
        then returns the best objective's models, as ``"best"``. ``"evidence"`` has no
        per-covariate scores and always takes the best objective, whatever the rule.
    criterion : {"collapsed", "elbo"}, default "collapsed"
        The bound that chooses the scales (and the evidence's).
    low, high, step, start : float
        The scale lattice, as in :class:`~corrpriors.core.selection.ScaleSearch`.
    cv_folds : int, default 2
        Folds of the cross-validation (:func:`split_counts`; each fold's models are fitted to
        the other folds' counts), at most :data:`MAX_CV_FOLDS`. Two folds train on half the
        data, which favours a prior that helps with little data; more folds cost
        proportionally more fits. Only ``similarity_criterion="cv"`` uses it: another value
        than 2 with another criterion is refused (it would have no effect).
    cv_scale : {"conditional", "climb"}, default "conditional"
        The scale of the cross-validation's fits (:data:`CV_SCALES`): ``"conditional"``, the
        joint model's :math:`\theta_S(1 - \rho^2)` from the source's scale
        :math:`\theta_S` (``SourceField.scale``; one fit per fold, model and similarity -- a
        source of unknown scale falls back to the climb); ``"climb"``, every fold climbs its
        own scale by the collapsed bound (three or more fits each; the rule before round 7).
        Only ``similarity_criterion="cv"`` uses it: ``"climb"`` with another criterion would have
        no effect and is refused.
    full_scale : {"conditional", "climb"}, default "conditional"
        The scale of the full-data models :meth:`select` returns at a similarity
        :math:`\rho > 0` (:data:`FULL_SCALES`): ``"conditional"``, the joint model's
        :math:`\theta_S(1 - \rho^2)` -- the model the cross-validation compared, one fit per
        model (with ``similarity_criterion="evidence"``, or a source of unknown scale, the
        climb); ``"climb"``, the collapsed bound's choice on the scale lattice (the rule before
        round 12). At :math:`\rho = 0` the scale is always climbed. With ``"evidence"`` the
        full-data fits always climb, whatever ``full_scale`` says.

    Attributes
    ----------
    n_fits_ : int
        Fits performed so far.
    zero_bonus_ : float
        With ``similarity_rule="average"``, one standard error of the difference between the
        best similarity's score and :math:`\rho = 0`'s at the last choice (0 when
        :math:`\rho = 0` is the best): what :func:`average_weights` adds to :math:`\rho = 0`'s
        objective.
    """

    def __init__(self, estimator: Any, *, similarities: Any = SIMILARITY_GRID,
                 prior_related: float | None = 0.5, similarity_criterion: str = "loo",
                 similarity_rule: str = "one_se", criterion: str = "collapsed",
                 low: float = 1e-2, high: float = 1e4, step: float = 0.25,
                 start: float = 1.0, cv_folds: int = 2, cv_scale: str = "conditional",
                 full_scale: str = "conditional") -> None:
        from ..core.selection import ScaleSearch, check_criterion, clone_estimator

        self.cv_folds = check_int(cv_folds, "cv_folds", low=2, high=MAX_CV_FOLDS)
        self.cv_scale = _check_option(cv_scale, "cv_scale", CV_SCALES)
        self.full_scale = _check_option(full_scale, "full_scale", FULL_SCALES)

        check_criterion(criterion)
        _check_option(similarity_criterion, "similarity_criterion", SIMILARITY_CRITERIA)
        self.similarity_criterion = similarity_criterion
        self.similarity_rule = _check_option(similarity_rule, "similarity_rule", SIMILARITY_RULES)
        self.similarities = _check_similarities(similarities)
        self.log_prior = similarity_log_prior(self.similarities, prior_related)
        _check_used_settings(similarity_criterion, similarity_rule=self.similarity_rule,
                             cv_folds=self.cv_folds, cv_scale=self.cv_scale, full_scale=self.full_scale)
        from ..core.priors.base import GaussianPrior
        from ..core.priors.dense import DenseCovariancePrior

        cov = getattr(estimator, "covariance", None)
        if getattr(estimator, "precision", None) is not None or (
                isinstance(cov, GaussianPrior) and not isinstance(cov, DenseCovariancePrior)):
            raise ValueError("estimator: transfer needs a dense prior structure (covariance=); a "
                             "sparse precision cannot take the integrated constant (use the joint "
                             "model with kronecker_precision for large state spaces)")
        lattice = ScaleSearch(estimator, criterion=criterion, low=low, high=high, step=step,
                              start=start)   # validates the range and gives the lattice
        self.step, self.j_min, self.j_max = lattice.step, lattice.j_min, lattice.j_max
        self._j0 = int(np.clip(round(math.log10(start) / self.step), self.j_min, self.j_max))
        self.criterion = criterion
        self.estimator = clone_estimator(estimator, learn_mean=None, learn_scale=False,
                                         scale_prior=None, learn_kernel=False, warm_start=True,
                                         mean_prior_std=None, mean_prior_mean=None, scale=1.0)
        self._tau0 = 3.0 if estimator.mean_prior_std is None else \
            check_positive(estimator.mean_prior_std, "mean_prior_std")
        self._m_default = None if estimator.mean_prior_mean is None else \
            np.asarray(estimator.mean_prior_mean, dtype=np.float64)
        self._models: dict[tuple, Any] = {}
        self._source_of: dict[tuple, Any] = {}
        self._scale_at: dict[tuple, int] = {}
        self._conditional: dict[tuple, tuple[Any, Any]] = {}
        self._structure: Any = None
        self.n_fits_ = 0
        self.zero_bonus_ = 0.0

    def scale_of(self, j: int) -> float:
        """The scale of lattice index ``j``."""
        return 10.0 ** (j * self.step)

    def structure(self, n_covariates: int) -> FloatArray:
        r"""The jittered prior structure :math:`\tilde\Sigma`, ndarray of shape (C, C)."""
        from ..core.priors.dense import DenseCovariancePrior

        if self._structure is None or self._structure.shape[0] != n_covariates:
            prior = self.estimator._prior(n_covariates)
            assert isinstance(prior, DenseCovariancePrior)   # a covariance template (checked above)
            self._structure = np.asarray(prior.base)
        return self._structure

    def _build(self, i: int, j: int, source: SourceField | None, shape: tuple[int, int],
               scale: float | None = None) -> Any:
        """The model at similarity ``i`` and scale index ``j`` (or the given ``scale``)."""
        from ..core.priors.dense import DenseCovariancePrior
        from ..core.selection import clone_estimator
        from ..core.stick_breaking import uniform_psi

        n_cov, km1 = shape[0], shape[1] - 1
        rho = self.similarities[i]
        m_default = uniform_psi(km1 + 1) if self._m_default is None else self._m_default
        m0, tau = transfer_hyper_prior(rho, source, m_default, self._tau0)
        mean = np.repeat(m0[None, :], n_cov, axis=0)
        if rho > 0.0 and source is not None:
            mean = mean + rho * source.deviation
        theta = self.scale_of(j) if scale is None else float(scale)
        cov = theta * self.structure(n_cov) + tau * tau
        prior = DenseCovariancePrior(cov, jitter=0.0, check=False)   # PSD by construction
        return clone_estimator(self.estimator, covariance=prior,
                               precision=None, mean=mean)

    def _value(self, i: int, j: int, a: int, x: np.ndarray, source: SourceField | None,
               fold: int = -1) -> float:
        from ..core.selection import _extrapolated_start, criterion_value

        if source is None:
            i = 0   # without related data every similarity is the single-task model
        key = (i, j, a, fold)
        model = self._models.get(key)
        stale = model is not None and i > 0 and self._source_of.get(key) is not source
        init = None
        if model is None or stale:
            old = model
            model = self._models[key] = self._build(i, j, source, x.shape)
            self._source_of[key] = source
            near = [p for p, m in self._models.items() if p[2:] == (a, fold) and p != key
                    and hasattr(m, "counts_") and np.array_equal(m.counts_, x)
                    and (p[0] == 0 or self._source_of.get(p) is source)]
            same = {p[1]: self._models[p].result_ for p in near if p[0] == i}
            if same:   # this similarity's scales: extrapolated along the climb, as ScaleSearch
                init = _extrapolated_start(j, same)
            elif near:
                init = self._models[min(near, key=lambda p: abs(p[0] - i) + abs(p[1] - j))].result_
            elif old is not None and hasattr(old, "result_"):
                init = old.result_
        if not (hasattr(model, "counts_") and np.array_equal(model.counts_, x)):
            model.fit(x, init=init)
            self.n_fits_ += 1
        return criterion_value(model, self.criterion)

    def _best_scale(self, i: int, a: int, x: np.ndarray, source: SourceField | None,
                    fold: int = -1) -> tuple[int, float]:
        r"""Climb the scale lattice of model ``a`` at similarity ``i``: (best index, value).

        The climb starts at this point's previous choice, else at the choice of the nearest
        similarity already climbed for the same model and fold (the scale left unexplained
        shrinks as the similarity grows: from the previous choice's scale a climb to
        :math:`\rho` near 1 took up to ten fits); it is
        :func:`~corrpriors.core.selection.lattice_climb`, the smaller scale first (its fit is the
        cheaper one, and the larger is not fitted when the smaller improves).
        """
        from ..core.selection import lattice_climb

        j = self._scale_at.get((i, a, fold))
        if j is None:
            done = [p for p in self._scale_at if p[1:] == (a, fold)]
            j = self._scale_at[min(done, key=lambda p: abs(p[0] - i))] if done else self._j0
        j, values = lattice_climb(lambda jj: self._value(i, jj, a, x, source, fold), j,
                                  self.j_min, self.j_max)
        self._scale_at[(i, a, fold)] = j
        return j, values[j]

    def _fold_probs(self, i: int, a: int, x: np.ndarray, source: SourceField | None,
                    fold: int) -> FloatArray:
        r"""Category probabilities of the model at similarity ``i`` fitted to a fold's counts.

        At :math:`\rho = 0` this is the same family's model (constants integrated out, no
        source), not the single-task model with learned constants: the criterion then measures
        what the transfer adds, not the difference between the two treatments of the constants
        (with learned constants the held-out halves scored up to 23 nats lower at 400 target
        transitions, at an equal error, so every similarity above 0 gained that much).
        """
        theta = self.conditional_scale(i, source)
        if theta is not None:
            assert source is not None   # (a conditional scale needs the source's)
            return self._conditional_fit(i, a, x, source, fold, theta).probs()
        j, _ = self._best_scale(i, a, x, source, fold)
        return self._models[(0 if source is None else i, j, a, fold)].probs()

    def conditional_scale(self, i: int, source: SourceField | None) -> float | None:
        r"""The joint model's conditional scale :math:`\theta_S(1 - \rho_i^2)` at similarity ``i``.

        ``None`` when the cross-validation climbs its own scales instead: ``cv_scale="climb"``,
        no source, or a source of unknown scale.
        """
        if self.cv_scale != "conditional":
            return None
        return self._joint_scale(i, source)

    def _joint_scale(self, i: int, source: SourceField | None) -> float | None:
        r""":math:`\theta_S(1 - \rho_i^2)`, or None without a source of known scale."""
        if source is None or source.scale is None:
            return None
        rho = self.similarities[i]
        return float(source.scale) * (1.0 - rho * rho)

    def _full_scale(self, i: int, source: SourceField | None) -> float | None:
        """The fixed scale of the full-data model at similarity ``i``, or None to climb."""
        if self.full_scale != "conditional" or self.similarity_criterion not in ("cv", "loo") or i == 0:
            return None
        return self._joint_scale(i, source)

    def _conditional_fit(self, i: int, a: int, x: np.ndarray, source: SourceField, fold: int,
                         theta: float) -> Any:
        """The model at similarity ``i`` and the fixed scale ``theta`` fitted to ``x`` (cached per
        similarity, model and fold; warm-started from its previous fit or the nearest similarity's
        fit to the same counts).
        """
        key = (i, a, fold)
        hit = self._conditional.get(key)
        if hit is not None and hit[1] is source and np.array_equal(hit[0].counts_, x):
            return hit[0]
        near = [(abs(p[0] - i), m) for p, (m, src) in self._conditional.items()
                if p[1:] == (a, fold) and src is source and np.array_equal(m.counts_, x)]
        init = min(near, key=lambda t: t[0])[1].result_ if near else (
            None if hit is None else hit[0].result_)
        model = self._build(i, self._j0, source, x.shape, scale=theta).fit(x, init=init)
        self.n_fits_ += 1
        self._conditional[key] = (model, source)
        return model

    def _objective(self, i: int, xs: list, sources: list, folds: list | None
                   ) -> tuple[float, FloatArray | None]:
        """The objective of similarity ``i`` and, for ``"cv"``, its per-covariate terms.

        The terms are the held-out log predictive probability of every covariate's counts in
        every fold and model, ndarray of shape (2 sum_a C_a,); they sum to the criterion.
        """
        if self.similarity_criterion == "loo":
            t = np.concatenate([self._loo_terms(i, a, x, src)
                                for a, (x, src) in enumerate(zip(xs, sources))])
            return float(t.sum()) + float(self.log_prior[i]), t
        if folds is None:   # the evidence: each model's best bound
            picks = [self._best_scale(i, a, x, src) for a, (x, src) in enumerate(zip(xs, sources))]
            return float(sum(v for _, v in picks) + self.log_prior[i]), None
        terms = []   # K-fold cross-validated log predictive of the counts
        for a, (parts, src) in enumerate(zip(folds, sources)):
            for f, (train, held) in enumerate(parts):
                q = self._fold_probs(i, a, train, src, f)
                terms.append(np.sum(held * np.log(np.maximum(q, 1e-300)), axis=1))
        t = np.concatenate(terms)
        return float(t.sum()) + float(self.log_prior[i]), t

    def _full_fit(self, i: int, a: int, x: np.ndarray, source: SourceField | None,
                  theta: float | None) -> tuple[Any, float]:
        """(model, scale): model ``a`` at similarity ``i`` fitted to all of ``x``, at the fixed
        scale ``theta``, or with ``None`` at its best scale of the lattice (the climb).
        """
        if theta is not None:
            assert source is not None   # (a fixed joint scale needs the source's)
            return self._conditional_fit(i, a, x, source, -1, theta), theta
        j, _ = self._best_scale(i, a, x, source)
        return self._models[(0 if source is None else i, j, a, -1)], self.scale_of(j)

    def _loo_terms(self, i: int, a: int, x: np.ndarray, source: SourceField | None) -> FloatArray:
        """Per-covariate approximate leave-one-out log predictive of model ``a`` at similarity ``i``
        (the full-data fit at the joint model's conditional scale; without one, the climbed scale).
        """
        from ..core.loo import loo_log_predictive

        model, _ = self._full_fit(i, a, x, source, self._joint_scale(i, source))
        return loo_log_predictive(model.result_, x)

    @staticmethod
    def _zero_se(best: int, terms: dict, evaluate: Any) -> float:
        r"""One standard error of the difference between the scores of ``best`` and
        :math:`\rho = 0`: :math:`\sqrt{n}\,\mathrm{sd}(d)` of their paired per-covariate
        differences :math:`d`.
        """
        evaluate(0)
        d = terms[0] - terms[best]
        return math.sqrt(d.size) * float(np.std(d, ddof=1)) if d.size > 1 else 0.0

    @staticmethod
    def _one_se(best: int, found: dict, terms: dict, evaluate: Any) -> int:
        r"""``best``, unless :math:`\rho = 0` is within one standard error of it (then 0).

        The standard error is that of the difference between the scores of ``best`` and
        :math:`\rho = 0`, a sum of paired per-covariate differences :math:`d`:
        :math:`\sqrt{n}\,\mathrm{sd}(d)`. Transfer is taken only when its gain over no transfer
        exceeds its own noise; then the best similarity. (Walking down to the least similarity
        within that standard error of the best, the textbook one-standard-error rule, lost much
        of the gain on related tasks: relatedness 0.8, 25 target transitions, error ratio to
        the single-task model 0.54 -> 0.75 on a seed; the standard error of a large gain is
        large.)
        """
        se = TransferSearch._zero_se(best, terms, evaluate)
        return 0 if found[0] >= found[best] - se else best

    def prior_models(self, i: int, sources: Sequence[SourceField | None],
                     shapes: Sequence[tuple[int, int]]) -> list:
        r"""The models of a task without data at similarity ``i`` (one per count model).

        Each is the prior of the module docstring at :math:`\rho_i` with the scale the joint
        model leaves unexplained, :math:`\theta_S(1-\rho_i^2)` (the source's scale; 1 when it
        is unknown), fitted to no counts (its posterior is that prior).

        Parameters
        ----------
        i : int
            Index into the similarity lattice.
        sources : sequence of SourceField or None
        shapes : sequence of (int, int)
            (C, K) of every count model.

        Returns
        -------
        list of CorrelatedMultinomial
        """
        rho = self.similarities[i]
        out = []
        for src, shape in zip(sources, shapes):
            theta = 1.0 if src is None or src.scale is None else src.scale * (1.0 - rho * rho)
            c, k = (int(v) for v in shape)
            model = self._build(i if src is not None else 0, self._j0, src, (c, k), scale=theta)
            out.append(model.fit(np.zeros((c, k))))
            self.n_fits_ += 1
        return out

    def select(self, counts: Sequence[Any], sources: Sequence[SourceField | None], *,
               similarity: float | None = None) -> TransferSelection:
        """Choose the similarity and the scales for the task's count matrices.

        Parameters
        ----------
        counts : sequence of array_like of shape (C, K)
            The task's count matrices (one per model; K may differ between models).
        sources : sequence of SourceField or None
            The related tasks' field of every model, on the same covariates and sticks;
            ``None`` where no related task has data.
        similarity : float, optional
            Keep this similarity of the lattice (no search, no cross-validation): only the
            scales are chosen (``values`` is then empty). A transition belief uses it for its
            later rounds of imputing censored counts, after choosing the similarity in the
            first (it passes a similarity above 0 only when a related task has data). Where
            there is no source there is nothing to transfer: a count model whose source is
            ``None`` is fitted as at 0, and with no source at all the selection is at 0 (its
            ``similarity`` is then 0.0, what the search would choose), whatever ``similarity``
            says.

        Returns
        -------
        TransferSelection
        """
        xs, srcs, i_max = self._check_inputs(counts, sources)
        rho = _check_fixed_similarity(similarity, self.similarities, "similarity")
        if rho is not None:   # (no source, i_max = 0: nothing to transfer, the selection is at 0)
            return self._selection(min(self.similarities.index(rho), i_max), xs, srcs, {})
        cur, found = self._choose(xs, srcs, i_max)
        return self._selection(cur, xs, srcs, found)

    def choose(self, counts: Sequence[Any], sources: Sequence[SourceField | None]
               ) -> tuple[float, dict]:
        r"""Choose the similarity as :meth:`select` does, without fitting its full-data models.

        A caller that keeps another model at :math:`\rho = 0` (the task's single-task belief)
        needs the full-data fits only above 0: :meth:`select` with ``similarity=`` then fits
        them (the same models and scales as :meth:`select`'s).

        Parameters
        ----------
        counts, sources
            As in :meth:`select`.

        Returns
        -------
        similarity : float
            The chosen :math:`\rho`.
        values : dict of float to float
            The objective at every similarity evaluated in this call.
        """
        xs, srcs, i_max = self._check_inputs(counts, sources)
        cur, found = self._choose(xs, srcs, i_max)
        return self.similarities[cur], {self.similarities[i]: v for i, v in found.items()}

    def _check_inputs(self, counts: Sequence[Any], sources: Sequence[SourceField | None]
                      ) -> tuple[list, list, int]:
        """Validated count matrices, sources and the largest usable lattice index."""
        xs = [check_counts(c, f"counts[{a}]") for a, c in enumerate(counts)]
        srcs = list(sources)
        if not xs or len(srcs) != len(xs):
            raise ValueError(f"counts, sources: expected one source (or None) per count matrix, got "
                             f"{len(xs)} count matrices and {len(srcs)} sources")
        for a, (x, src) in enumerate(zip(xs, srcs)):
            if src is None:
                continue
            if not isinstance(src, SourceField):
                raise TypeError(f"sources[{a}]: expected a SourceField or None, got {type(src).__name__}")
            if src.deviation.shape != (x.shape[0], x.shape[1] - 1):
                raise ValueError(f"sources[{a}]: expected a field of shape (C, K - 1) = "
                                 f"({x.shape[0]}, {x.shape[1] - 1}), got {src.deviation.shape}")
        i_max = len(self.similarities) - 1 if any(s is not None for s in srcs) else 0
        return xs, srcs, i_max

    def _choose(self, xs: list, srcs: list, i_max: int) -> tuple[int, dict]:
        """The chosen lattice index and the objective of every index evaluated."""
        folds = [_cv_folds(x, self.cv_folds) for x in xs] if self.similarity_criterion == "cv" else None
        scored = folds is not None or self.similarity_criterion == "loo"
        found: dict[int, float] = {}
        terms: dict[int, Any] = {}

        def evaluate(i: int) -> None:
            if i not in found:
                found[i], terms[i] = self._objective(i, xs, srcs, folds)

        # both ends and the middle of the lattice, then a climb from the best -- at every call,
        # so that the choice is a function of the data (a climb from the previous choice stayed
        # at 0 whenever 0.25 scored below it, however far 0.875 scored above)
        for i in sorted({0, i_max // 2, i_max}):
            evaluate(i)
        cur = max(found, key=found.__getitem__)
        while True:
            for nb in (cur - 1, cur + 1):
                if 0 <= nb <= i_max:
                    evaluate(nb)
            best = max(found, key=found.__getitem__)
            if best == cur:
                break
            cur = best
        if scored and self.similarity_rule == "one_se" and cur > 0:
            cur = self._one_se(cur, found, terms, evaluate)
        self.zero_bonus_ = 0.0
        if scored and self.similarity_rule == "average" and cur > 0:
            self.zero_bonus_ = self._zero_se(cur, terms, evaluate)
        return cur, found

    def _selection(self, cur: int, xs: list, srcs: list, found: dict) -> TransferSelection:
        """The full-data models at similarity index ``cur``: at its conditional scale
        (``full_scale``), else with their best scales on the lattice.
        """
        from ..core.selection import criterion_value

        models, scales, bounds = [], [], []
        for a, (x, src) in enumerate(zip(xs, srcs)):
            model, theta = self._full_fit(cur, a, x, src, self._full_scale(cur, src))
            models.append(model)
            scales.append(theta)
            bounds.append(criterion_value(model, self.criterion))
        return TransferSelection(similarity=self.similarities[cur], scales=np.array(scales),
                                 value=found.get(cur, float(sum(bounds))), models=models,
                                 values={self.similarities[i]: v for i, v in found.items()})


# --------------------------------------------------------------------------------------
# Transition beliefs of several tasks
# --------------------------------------------------------------------------------------
class _TransferBelief(CorrelatedTransitionModel):
    """The belief of one task of a :class:`MultiTaskTransitionModel` (a TransitionBelief)."""

    def __init__(self, owner: MultiTaskTransitionModel, task: int) -> None:
        from ..core.selection import clone_estimator

        tmpl = owner.independent_[task]
        est = clone_estimator(tmpl.models_[0])
        if est.precision is not None or tmpl.sparse:
            raise ValueError(f"beliefs[{task}]: transfer needs a dense prior (a covariance or a "
                             "kernel) and dense count storage, got a sparse "
                             + ("precision" if est.precision is not None else "count storage")
                             + "; see kronecker_precision for the joint model of large state spaces")
        super().__init__(tmpl.n_states, tmpl.n_actions, covariance=est.covariance,
                         category_map=tmpl.category_map, learn_mean="constant",
                         max_iter=est.max_iter, tol=est.tol, impute_rounds=tmpl.impute_rounds,
                         probs_method=tmpl.probs_method, mc_rng=tmpl.mc_rng,
                         mean_prior_std=est.mean_prior_std if est.mean_prior_std is not None else 3.0,
                         mean_prior_mean=est.mean_prior_mean, sparse=False,
                         concentration=tmpl.concentration,
                         contamination_prior=tmpl.contamination_prior,
                         distinct_prior=tmpl.distinct_prior, layer_rounds=tmpl.layer_rounds,
                         support_prior=tmpl.support_prior, draw_method=tmpl.draw_method)
        self._own_layer = self._layer   # the layer above 0 (at 0 the single-task belief's)
        self._layer_fit: tuple | None = None   # (similarity, sources, tables, scales) in a layer fit
        lo, hi = owner.scale_range
        self._owner, self._task = owner, int(task)
        self._search = TransferSearch(est, similarities=owner.similarities,
                                      prior_related=owner.prior_related,
                                      similarity_criterion=owner.similarity_criterion,
                                      similarity_rule=owner.similarity_rule, low=lo,
                                      high=hi, step=owner.scale_step, cv_folds=owner.cv_folds,
                                      cv_scale=owner.cv_scale, full_scale=owner.full_scale)
        self.transfer_selected_: dict | None = None
        self._mixture: tuple | None = None
        self._far_similarity = 0.0   # the similarity the far jumps' destinations borrow at
        self._pair_weight = 0.0      # the weight of the other tasks' counts in the pairs' layer
        self.pair_values_: dict | None = None   # eta -> log prior + evidence, at the last choice
        self._fit_signature: tuple | None = None
        super().set_counts(tmpl.counts)

    @single_blas_thread
    def refit(self, actions: Any = None) -> CorrelatedTransitionModel:
        """Refit every action when this task's or a related task's data changed.

        The similarity is shared by the actions, so a change of any action's data refits all of
        them (warm-started; unchanged ones at an unchanged choice are not refitted). BLAS runs
        single-threaded, as in the single-task belief's fits (many small factorisations: on a
        busy machine spin-waiting BLAS threads more than doubled the search's CPU time).
        """
        import time

        sig = (int(self._version), self._owner._signature(self._task))
        if sig == self._fit_signature:
            return self
        tic = time.perf_counter()
        tables = list(self._counts.transpose(1, 0, 2))                          # A x (S, S)
        sources = [self._owner._source_field(self._task, a) for a in range(self.n_actions)]
        xs = self._category_counts(tables)
        before = self._search.n_fits_
        self._mixture = None
        self._far_similarity = self._pair_weight = 0.0
        self._layer = self._own_layer
        fixed = self._owner.fixed_similarity
        related = any(s is not None for s in sources)
        if not self._counts.any() and related:
            self._fit_mixture(xs, sources)
        elif fixed is not None:   # no search: the given similarity (0 without related data)
            self._fit_choice(fixed if related else 0.0, tables, sources, {})
        else:
            similarity, values = self._search.choose(xs, sources)
            weights = average_weights(values, self._search.similarities, self._search.zero_bonus_) \
                if self._search.similarity_rule == "average" else None
            if weights is not None and np.count_nonzero(weights) > 1:
                self._fit_average(weights, tables, sources, values)
            else:
                self._fit_choice(similarity, tables, sources, values)
        self.n_fits_ += self._search.n_fits_ - before
        self.fit_seconds_ += time.perf_counter() - tic
        self._fitted_versions[:] = self._action_versions
        self._cache = {"version": self._version}
        self._fit_signature = sig
        return self

    def _fit_choice(self, similarity: float, tables: list, sources: list, values: dict) -> None:
        """The task's models at the chosen similarity (at 0 its single-task belief)."""
        if similarity == 0.0:   # unrelated: the task's own single-task belief, layer and all
            single = self._single_task()   # (no full-data fits of the transfer family)
            self.models_ = list(single.models_)
            self._layer = single._layer
            scales = np.array([float(getattr(m, "scale_", m.scale)) for m in self.models_])
        else:
            self._far_similarity = float(similarity)
            scales = self._fit_at(similarity, tables, sources)
        self._record(similarity, scales, sources, values.get(similarity, math.nan), values)

    def _single_task(self) -> CorrelatedTransitionModel:
        """The task's single-task belief, refitted to its current data."""
        single = self._owner.independent_[self._task]
        single.refit()
        return single

    def _record(self, similarity: float, scales: FloatArray, sources: list, value: float,
                values: dict, **extra: Any) -> None:
        """``transfer_selected_`` of a refit (``extra``: e.g. the mixture's weights)."""
        self.transfer_selected_ = {"similarity": similarity, "scales": scales,
                                   "pair_weight": self._pair_weight, "value": value,
                                   "values": values, **extra,
                                   "n_sources": [0 if s is None else s.n_sources for s in sources]}

    def _keep_mixture(self, weights: FloatArray, components: list, sources: list, value: float,
                      values: dict) -> None:
        r"""Make the belief the mixture of ``components`` (per similarity of the lattice, the
        models of every action; None where the weight is 0) with ``weights``, ndarray of shape
        (len(similarities),): its mean and draws are the mixture's, ``models_`` the heaviest
        component's, and its similarity the weights' mean of :math:`\rho`.
        """
        self._mixture = (weights, components)
        self.models_ = list(components[int(np.argmax(weights))])
        self._record(float(np.dot(weights, self._search.similarities)),
                     np.full(self.n_actions, np.nan), sources, value, values, mixture_weights=weights)

    def _fit_average(self, weights: FloatArray, tables: list, sources: list, values: dict) -> None:
        r"""``similarity_rule="average"``: the mixture of the full-data fits at every similarity
        of positive weight (:func:`average_weights` with the search's ``zero_bonus_``; at 0 the
        single-task belief), whose mean and draws are those of the no-data mixture
        (:meth:`_fit_mixture`) with these weights. ``similarity_`` reports the weights' mean of
        :math:`\rho`.
        """
        start = list(self.models_)
        components: list = [None] * len(weights)
        for i in np.flatnonzero(weights):
            rho = self._search.similarities[i]
            if rho == 0.0:
                components[i] = list(self._single_task().models_)
            else:
                self.models_ = list(start)   # (every component imputes from the same fits)
                self._select_at(rho, tables, sources)
                components[i] = list(self.models_)
        self._keep_mixture(weights, components, sources, max(values.values()), values)

    def _category_counts(self, tables: list) -> list:
        """Category counts (S, K) of every action's next-state counts ``tables`` (S, S): with a
        censored map imputed from the current fits.
        """
        from .transitions import CategoryMap, TruncatedCategoryMap

        cmap = self.category_map
        assert isinstance(cmap, CategoryMap)   # dense storage (checked in __init__)
        if isinstance(cmap, TruncatedCategoryMap):
            return [cmap.impute(t, m.probs() if hasattr(m, "result_") else None)
                    for t, m in zip(tables, self.models_)]
        return list(cmap.aggregate(np.stack(tables)))

    def _select_at(self, similarity: float, tables: list, sources: list) -> FloatArray:
        """Fit every action's model at ``similarity`` to its next-state counts ``tables``
        (S, S); the scales, ndarray of shape (A,).

        The similarity is chosen in the first round of imputing censored counts; later rounds
        refine the imputation and the scales at that similarity (the search's cross-validation
        in every round tripled the cost; measured side by side in
        ``benchmarks/bench_transfer.py``).
        """
        from .transitions import TruncatedCategoryMap

        cmap = self.category_map
        xs = self._category_counts(tables)
        sel = self._search.select(xs, sources, similarity=similarity)
        for _ in range(self.impute_rounds - 1 if isinstance(cmap, TruncatedCategoryMap) else 0):
            assert isinstance(cmap, TruncatedCategoryMap)
            new = [cmap.impute(t, m.probs()) for t, m in zip(tables, sel.models)]
            if all(np.array_equal(u, v) for u, v in zip(new, xs)):
                break
            xs = new
            sel = self._search.select(xs, sources, similarity=similarity)
        self.models_ = list(sel.models)
        return sel.scales

    def _fit_at(self, similarity: float, tables: list, sources: list) -> FloatArray:
        """The task's models at a chosen ``similarity`` > 0 (through the per-pair layer's
        rounds, if it has one); their scales, ndarray of shape (A,).
        """
        if self._own_layer is None:
            return self._select_at(similarity, tables, sources)
        self._layer_fit = (similarity, sources, list(tables), np.full(self.n_actions, np.nan))
        self._own_layer.fitted = [None] * self.n_actions   # every action at this similarity
        self._own_layer.refit(self)                         # (calls _fit_actions)
        weight = self._choose_pair_weight(similarity)
        if weight > 0.0:
            self._pair_weight = weight
            self._own_layer.refit(self)   # the pairs' posterior with the borrowed counts
        return self._layer_fit[3]

    def _choose_pair_weight(self, similarity: float) -> float:
        r"""The weight :math:`\eta` of the other tasks' counts in the pairs' Dirichlets: the
        lattice :data:`PAIR_WEIGHTS` times ``similarity`` point of highest log prior plus
        :func:`~corrpriors.applications.transitions._layer.borrowed_log_evidence` of the task's
        counts, summed over the actions (one :math:`\eta` per task, like :math:`\rho`), at the
        layer's current base. The values are kept in ``pair_values_``.
        """
        from .transitions._layer import borrowed_log_evidence, mix_base

        layer = self._own_layer
        assert layer is not None   # (a layered fit)
        borrowed = self._owner.pooled_[self._task]._counts          # (S, A, S), the others' sum
        q = self._current_category_probs()
        bases = [mix_base(self._to_next_states(q[a], a), layer.epsilon) for a in range(self.n_actions)]
        values = similarity_log_prior(PAIR_WEIGHTS, 0.5)   # (prior 1/2 on 0, the rest shared)
        for k, fraction in enumerate(PAIR_WEIGHTS):
            values[k] += sum(borrowed_log_evidence(self._counts[:, a, :],
                                                   fraction * similarity * borrowed[:, a, :],
                                                   bases[a], layer.lattice)
                             for a in range(self.n_actions))
        self.pair_values_ = dict(zip((f * similarity for f in PAIR_WEIGHTS), values.tolist()))
        return float(PAIR_WEIGHTS[int(np.argmax(values))] * similarity)

    def _layer_counts(self) -> FloatArray:
        r"""The task's counts plus the other tasks' times the pair weight :math:`\eta`, (S, A, S)
        (a power prior in every pair's Dirichlet; :meth:`_choose_pair_weight`).
        """
        if self._pair_weight == 0.0 or self._layer is not self._own_layer:
            return self._counts
        return self._counts + self._pair_weight * self._owner.pooled_[self._task]._counts

    def _fit_actions(self, tables: dict[int, FloatArray | None]) -> None:
        r"""The per-pair layer's fits (:meth:`._layer._Layer.refit`): every action's model at
        the chosen similarity, the actions in ``tables`` to their new table counts (S, S) (None:
        the observed counts), the others to their last ones.

        The layer's base :math:`Q` is then the transfer prior's prediction, and where far jumps
        land borrows the related tasks' counts (:meth:`_far_evidence`).
        """
        assert self._layer_fit is not None   # set by _fit_at
        similarity, sources, current, _ = self._layer_fit
        for a, t in tables.items():
            current[a] = self._counts[:, a, :] if t is None else t
        scales = self._select_at(similarity, current, sources)
        self._layer_fit = (similarity, sources, current, scales)

    def _fit_mixture(self, xs: list, sources: list) -> None:
        r"""A task without data: the mixture over the similarity lattice with the prior's weights.

        With no data of the task the cross-validated criterion cannot compare similarities, and
        choosing one would throw the prior's uncertainty away (the point mass at
        :math:`\rho = 0` would win, and the task would start uninformed). The posterior over
        :math:`\rho` is then the prior, so the belief is the mixture of the conditional priors
        with the prior's weights: at :math:`\rho = 0` the single-task belief, above it
        :meth:`TransferSearch.prior_models`. ``mean`` is the weighted mean of the components'
        means, ``sample_many`` draws a component by its weight, then from it. With a per-pair
        layer every component passes through the single-task belief's layer (fitted to no data:
        its prior), so component 0 is that belief exactly. With the owner's
        ``fixed_similarity`` the belief is that similarity's component alone.
        """
        search = self._search
        fixed = self._owner.fixed_similarity
        if fixed is None:
            weights = np.exp(search.log_prior)
            weights /= weights.sum()
        else:   # the given similarity's conditional prior alone
            weights = np.zeros(len(search.similarities))
            weights[search.similarities.index(fixed)] = 1.0
        single = self._single_task()
        self._layer = single._layer   # (with no data: the layer's prior, every component)
        shapes = [x.shape for x in xs]
        components = [list(single.models_) if weights[0] > 0 else None] + [
            search.prior_models(i, sources, shapes) if weights[i] > 0 else None
            for i in range(1, len(search.similarities))]
        self._keep_mixture(weights, components, sources, 0.0, {})

    def _far_evidence(self, a: int) -> tuple[FloatArray, FloatArray]:
        r"""Where the "other" mass of action ``a`` goes: the task's own far jumps and, at a
        similarity :math:`\rho > 0`, the related tasks' far jumps weighted by :math:`\rho`.

        The Gaussian prior transfers *how much* mass a pair's far jumps carry (a category of the
        relative encoding); *where* they land is a Dirichlet over the far states fed by counts
        (:meth:`~corrpriors.applications.transitions.CategoryMap.other_weights`). With few data
        of its own a task would spread that mass almost uniformly even where the related tasks
        saw every far jump land in one state (a hole's or a goal's jump back to the start). So
        the related tasks' counts (per pair, and pooled over the pairs) enter that Dirichlet as
        a power prior of weight :math:`\rho`, the weight the prior's mean gives their field
        (:math:`E[\psi \mid \text{sources}] = \rho\,\bar d + \dots`); at :math:`\rho = 0`
        nothing is borrowed.
        """
        own, far = super()._far_evidence(a)
        rho = self._far_similarity
        if rho == 0.0:
            return own, far
        source = self._owner.pooled_[self._task]      # the other tasks' counts, summed
        return own + rho * source._counts[:, a, :], far + rho * source._far

    @contextlib.contextmanager
    def _far_at(self, rho: float) -> Iterator[None]:
        """Far jumps borrowed at ``rho`` for the duration (a mixture component's similarity)."""
        self._far_similarity = float(rho)
        try:
            yield
        finally:
            self._far_similarity = 0.0

    def _component_mean(self, models: list, rho: float) -> FloatArray:
        q = [m.probs(method=self.probs_method, rng=self.mc_rng) for m in models]
        with self._far_at(rho):
            base = np.stack([self._to_next_states(q[a], a) for a in range(self.n_actions)], axis=1)
        return base if self._layer is None else self._layer.mean(self._counts, base)

    def mean(self) -> Any:
        """Posterior-mean transition model, ndarray of shape (S, A, S) (the mixture's mean for
        a task without data, see :meth:`_fit_mixture`).
        """
        self.refit()
        if self._mixture is None:
            return super().mean()
        if "mean" not in self._cache:
            weights, components = self._mixture
            rhos = self._search.similarities
            self._cache["mean"] = sum(w * self._component_mean(c, r)
                                      for w, c, r in zip(weights, components, rhos) if w > 0)
        return self._cache["mean"].copy()

    def sample_many(self, n: int, *, rng: SeedLike) -> Any:
        """``n`` posterior draws, ndarray of shape (n, S, A, S) (for a task without data: each
        from a mixture component drawn by its weight).
        """
        from .._random import as_generator

        self.refit()
        if self._mixture is None:
            return super().sample_many(n, rng=rng)
        from .transitions._beliefs import DRAWS_ADVICE, _check_n, check_dense_memory

        n = _check_n(n)
        S, A = self.n_states, self.n_actions
        # the draws and, per component and action, its sticks, probabilities and next-state
        # arrays (as the single-task draws count them), and the layer's draws on them
        per_draw = 1.0 + 3.0 * (self.n_categories + S) / (A * S) + (2.0 if self._layer is not None else 0.0)
        check_dense_memory(n * per_draw, S, A, f"{n:,} posterior draws", DRAWS_ADVICE)
        gen = as_generator(rng)
        weights, components = self._mixture
        which = gen.choice(len(weights), size=n, p=weights)
        out = np.empty((n, S, A, S))
        for c in np.unique(which):
            idx = np.flatnonzero(which == c)
            with self._far_at(self._search.similarities[c]):
                for a, model in enumerate(components[c]):
                    out[idx, :, a, :] = self._to_next_states(
                        model.sample_probs(idx.size, rng=gen, method=self.draw_method), a)
            if self._layer is not None:
                out[idx] = self._layer.draws(self._counts, out[idx], rng=gen)
        return out

    def _sqrt_values(self, n: int, gen: np.random.Generator) -> FloatArray:
        """For a task without data (a mixture over the similarities): ``n`` averages of the
        square roots of two independent mixture draws (:meth:`sample_many`), (n, S, A, S);
        otherwise the antithetic pairs of :class:`CorrelatedTransitionModel`.
        """
        self.refit()
        if self._mixture is None:
            return super()._sqrt_values(n, gen)
        x = np.sqrt(self.sample_many(2 * n, rng=gen))
        return 0.5 * (x[:n] + x[n:])

    def update(self, states: Any, actions: Any, next_states: Any) -> _TransferBelief:
        """Accumulate transitions of this task (see :meth:`CorrelatedTransitionModel.update`)."""
        super().update(states, actions, next_states)
        self._owner.independent_[self._task].update(states, actions, next_states)
        return self

    def set_counts(self, counts: Any) -> _TransferBelief:
        """Replace this task's data (see :meth:`CorrelatedTransitionModel.set_counts`)."""
        super().set_counts(counts)
        self._owner.independent_[self._task].set_counts(counts)
        return self


class _OwnBeliefs(list):
    """Beliefs :meth:`MultiTaskTransitionModel.for_mdps` built for the model alone (not copied)."""


class MultiTaskTransitionModel:
    r"""Transition beliefs of several related tasks that borrow from each other.

    Each task keeps its single-task belief (a
    :class:`~corrpriors.applications.transitions.CorrelatedTransitionModel` with collapsed-bound
    selection, what the ``pg`` methods use) and gets a *transfer belief*: per action, the prior
    of the module docstring, centred on the source -- a copy of the task's belief, without its
    per-(state, action) layer, fitted to the other tasks' data pooled (``pooled_``) -- by a
    similarity :math:`\rho` chosen by the task's
    cross-validated predictive probability and a prior on :math:`\rho` (the scales by the
    collapsed bound; :class:`TransferSearch`). Where a pair's far jumps (the relative encoding's
    "other" category) land borrows the other tasks' counts as a power prior of weight
    :math:`\rho`. When :math:`\rho = 0` is chosen the transfer belief is the task's
    single-task belief (with its layer, if it has one); above 0 a layer's base is the transfer
    prediction (module docstring, "The per-(state, action) layer"). With
    censored counts (a grid's edges) the similarity is chosen in the first round of imputing
    them, the later rounds refine the imputation and the scales at that similarity (the
    sources impute once, ``source_impute_rounds``). A task
    with no data of its own (a new task in a sequence) cannot compare similarities: its belief
    is then the mixture over the lattice with the prior's weights -- at :math:`\rho_i > 0` the
    conditional prior with the scale :math:`\theta_S(1 - \rho_i^2)` the joint model leaves
    unexplained (:meth:`TransferSearch.prior_models`), at :math:`\rho = 0` the single-task
    belief --, whose ``mean`` is the weighted mean and whose draws pick a component by its
    weight; ``similarity_`` then reports the prior mean of :math:`\rho`. Every fit is lazy: a
    task is refitted when its data or the other tasks' data changed.

    Parameters
    ----------
    beliefs : sequence of CorrelatedTransitionModel
        One per task (T >= 1), on the same S states and A actions and with the same number of
        categories (the category maps -- the encodings -- may differ per task, e.g. different
        walls). Their prior structure (covariance or precision), category maps, per-(state,
        action) layer (``concentration``, ``contamination_prior``, ...), tolerances and current
        counts are used. They are copied (one ``copy.deepcopy`` of the list): the copies are the
        attribute ``independent_`` and are updated with the data; the beliefs passed are not
        (updating them later does not reach the model: use :meth:`update` or
        :meth:`set_counts`).
    similarities : sequence of float, default :data:`SIMILARITY_GRID`
        The lattice of :math:`\rho`.
    prior_related : float or None, default 0.5
        Prior probability that a task is related to the others (see :class:`TransferSearch`).
    similarity_criterion : {"loo", "cv", "evidence"}, default "loo"
        How similarities are compared (see :class:`TransferSearch`).
    similarity_rule : {"one_se", "best", "average"}, default "one_se"
        How the cross-validated scores pick one (see :class:`TransferSearch`; with
        ``"evidence"`` the best objective is taken whatever the rule); ``"average"``
        (beliefs without a per-pair layer): no choice, the mixture of the full-data fits at the
        similarities evaluated, weighted by :func:`average_weights` with :math:`\rho = 0`'s score
        raised by one standard error of the best's gain (``similarity_`` is then the weights'
        mean of :math:`\rho`; the weights are in ``task(t).transfer_selected_``).
    scale_range : (float, float), default (1e-2, 1e4)
    scale_step : float, default 0.25
        The scale lattice of the transfer beliefs.
    cv_folds : int, default 2
        Folds of the similarity's cross-validation, at most :data:`MAX_CV_FOLDS` (see
        :class:`TransferSearch`); only with ``similarity_criterion="cv"`` (another value than 2
        is otherwise refused).
    cv_scale : {"conditional", "climb"}, default "conditional"
        The scale of the cross-validation's fits (see :class:`TransferSearch`); only with
        ``similarity_criterion="cv"`` (``"climb"`` otherwise has no effect and warns).
    full_scale : {"conditional", "climb"}, default "conditional"
        The scale of the full-data fits a task keeps at :math:`\rho > 0` (see
        :class:`TransferSearch`; ``"climb"`` is the rule before round 12), also with a
        ``fixed_similarity``; with ``"evidence"`` the fits always climb.
    fixed_similarity : float, optional
        Keep this :math:`\rho` (a value of ``similarities``) for every task instead of choosing
        it (no search: ``prior_related``, ``similarity_criterion``, ``similarity_rule`` and
        ``cv_folds`` are then unused and refused unless at their defaults; the kept fits' scale
        follows ``full_scale`` alone; a per-pair layer's weight of the other tasks' counts is
        still chosen): the tasks' relatedness known in advance, or the error mapped against :math:`\rho`
        (``benchmarks/transfer_oracle.py``). A task without data is then that similarity's
        conditional prior, a task without related data its single-task belief. A similarity
        the tasks do not have misleads: PSRL at relatedness 0 with 0.9375 lost up to 0.30 of
        the optimal return (user guide, "Transfer between related tasks").
    source_impute_rounds : int or None, default 1
        Rounds of imputing censored counts in the sources' fits (``pooled_``); ``None``: the
        tasks' beliefs' ``impute_rounds``. The source only centres the task's prior (its
        posterior mean and scale), and one round changed the single-task model's accuracy by
        less than 3 % against 3-30 rounds, at 40-50 % of the cost of three; the tasks' own
        full-data fits keep their rounds.

    Attributes
    ----------
    independent_ : list of CorrelatedTransitionModel
        The single-task beliefs.
    pooled_ : list of CorrelatedTransitionModel
        Per task, the source: the same belief without its per-(state, action) layer (the plain
        correlated model) on the other tasks' summed counts.
    tasks_ : list of CorrelatedTransitionModel
        The transfer beliefs, one per task; each is a
        :class:`~corrpriors.applications.transitions.TransitionBelief` (for PSRL), and its
        ``update`` also feeds the task's single-task belief.
    similarity_ : ndarray of shape (T,)
        The chosen :math:`\rho` of every task (shared by its actions; NaN before its first fit):
        the learned correlation between the task's logits and the source's.
    pair_weight_ : ndarray of shape (T,)
        With a per-pair layer, the weight :math:`\eta` of the other tasks' counts in every
        pair's Dirichlet (module docstring, "The per-(state, action) layer").

    Examples
    --------
    >>> from corrpriors.envs import dense_gridworld
    >>> from corrpriors.applications import CorrelatedTransitionModel
    >>> mdps = [dense_gridworld((4, 4)), dense_gridworld((4, 4), step_spread=0.8)]
    >>> belief = MultiTaskTransitionModel.for_mdps(mdps)
    >>> belief.update(0, [0, 1], [1, 1], [1, 2]).mean(1).shape
    (16, 4, 16)
    """

    def __init__(self, beliefs: Sequence[Any], *, similarities: Any = SIMILARITY_GRID,
                 prior_related: float | None = 0.5, similarity_criterion: str = "loo",
                 similarity_rule: str = "one_se",
                 scale_range: tuple[float, float] = (1e-2, 1e4), scale_step: float = 0.25,
                 cv_folds: int = 2, cv_scale: str = "conditional",
                 source_impute_rounds: int | None = 1, full_scale: str = "conditional",
                 fixed_similarity: float | None = None) -> None:
        beliefs_in = beliefs
        beliefs = list(beliefs) if isinstance(beliefs, (list, tuple)) else None  # type: ignore[assignment]
        if not beliefs:
            raise ValueError("beliefs: expected a non-empty list of CorrelatedTransitionModel, one per task")
        for t, b in enumerate(beliefs):
            if not isinstance(b, CorrelatedTransitionModel) or isinstance(b, _TransferBelief):
                raise TypeError(f"beliefs[{t}]: expected a CorrelatedTransitionModel, got "
                                f"{type(b).__name__}")
            ref = beliefs[0]
            if (b.n_states, b.n_actions, b.n_categories) != (ref.n_states, ref.n_actions, ref.n_categories):
                raise ValueError(f"beliefs[{t}]: expected (S, A, K) = ({ref.n_states}, {ref.n_actions}, "
                                 f"{ref.n_categories}) like task 0, got ({b.n_states}, {b.n_actions}, "
                                 f"{b.n_categories})")
        self.similarities = _check_similarities(similarities)
        self.prior_related = _check_prior_related(prior_related)
        _check_option(similarity_criterion, "similarity_criterion", SIMILARITY_CRITERIA)
        self.fixed_similarity = _check_fixed_similarity(fixed_similarity, self.similarities)
        self.similarity_criterion = similarity_criterion
        self.similarity_rule = _check_option(similarity_rule, "similarity_rule", SIMILARITY_RULES)
        if similarity_rule == "average" and any(b._layer is not None for b in beliefs):
            raise ValueError("similarity_rule: 'average' mixes the transfer fits without a per-(state, "
                             "action) layer; build the beliefs with concentration=None and "
                             "contamination_prior=None, or use 'one_se'")
        self.scale_range = _check_scale_range(scale_range)
        self.scale_step = check_positive(scale_step, "scale_step")
        self.cv_folds = check_int(cv_folds, "cv_folds", low=2, high=MAX_CV_FOLDS)
        self.cv_scale = _check_option(cv_scale, "cv_scale", CV_SCALES)
        self.full_scale = _check_option(full_scale, "full_scale", FULL_SCALES)
        _check_used_settings(similarity_criterion, similarity_rule=self.similarity_rule,
                             cv_folds=self.cv_folds, cv_scale=self.cv_scale, full_scale=self.full_scale,
                             fixed_similarity=self.fixed_similarity, prior_related=self.prior_related)
        self.source_impute_rounds = None if source_impute_rounds is None else check_int(
            source_impute_rounds, "source_impute_rounds", low=1)
        # copies (one deepcopy of the list: objects the beliefs share stay shared): the caller's
        # beliefs updated directly would change a task's single-task data behind its transfer belief
        if not isinstance(beliefs_in, _OwnBeliefs):   # (for_mdps' own new beliefs need no copy)
            beliefs = copy.deepcopy(beliefs)
        self.independent_ = beliefs
        self.n_tasks = len(beliefs)
        self.n_states, self.n_actions = beliefs[0].n_states, beliefs[0].n_actions
        self._fields: dict[tuple[int, int], tuple[Any, tuple, SourceField]] = {}
        self.pooled_ = [copy.deepcopy(b) for b in beliefs]
        for pooled in self.pooled_:   # the source: the plain correlated model (see _source_field)
            pooled._layer = None
            pooled.concentration = pooled.contamination_prior = pooled.distinct_prior = None
            pooled.support_prior = None
            if self.source_impute_rounds is not None:
                pooled.impute_rounds = self.source_impute_rounds
        self._pooled_sig: list[tuple | None] = [None] * self.n_tasks
        self.tasks_ = [_TransferBelief(self, t) for t in range(self.n_tasks)]

    @classmethod
    def for_mdps(cls, mdps: Sequence[Any], *, similarities: Any = SIMILARITY_GRID,
                 prior_related: float | None = 0.5, similarity_criterion: str = "loo",
                 similarity_rule: str = "one_se", cv_folds: int = 2,
                 cv_scale: str = "conditional", source_impute_rounds: int | None = 1,
                 full_scale: str = "conditional", fixed_similarity: float | None = None,
                 **kwargs: Any) -> MultiTaskTransitionModel:
        """One :meth:`CorrelatedTransitionModel.for_mdp` belief per task, combined.

        Parameters
        ----------
        mdps : sequence of TabularMDP or EnvInfo
            The tasks: the same number of states and actions and the same state
            ``coordinates`` (the task kernel pairs state s of one task with state s of every
            other, so a 4 x 6 grid and a 6 x 4 one are refused although both have 24 states);
            each task's encoding follows its own MDP (e.g. its ``boundary``).
        similarities : sequence of float
        prior_related : float or None
        similarity_criterion : {"loo", "cv", "evidence"}
        similarity_rule : {"one_se", "best", "average"}
        cv_folds : int
        cv_scale, full_scale : {"conditional", "climb"}
        source_impute_rounds : int or None
        fixed_similarity : float, optional
            As in the constructor.
        **kwargs
            Passed to :meth:`CorrelatedTransitionModel.for_mdp` (``lengthscale``, ``prior``,
            ``boundary``, the per-pair layer's ``concentration``, ...; its defaults, so that
            every task's belief is ``for_mdp``'s at the same arguments); ``selection`` must stay
            ``"collapsed"`` (or ``"elbo"``). ``scale_range`` and ``scale_step`` also set the
            transfer beliefs' scale lattice (the constructor's), so that every fit of the
            family climbs one lattice.

        Returns
        -------
        MultiTaskTransitionModel
        """
        if not isinstance(mdps, (list, tuple)) or not mdps:
            raise ValueError("mdps: expected a non-empty list of MDPs, one per task")
        for i, m in enumerate(mdps):
            if not (hasattr(m, "n_states") and hasattr(m, "n_actions")):
                hint = (" (a task family returns (mdps, params): pass its first element)"
                        if isinstance(m, (list, tuple)) else "")
                raise TypeError(f"mdps[{i}]: expected a TabularMDP or EnvInfo, got "
                                f"{type(m).__name__}{hint}")
            if (m.n_states, m.n_actions) != (mdps[0].n_states, mdps[0].n_actions):
                raise ValueError(f"mdps[{i}]: expected {mdps[0].n_states} states and "
                                 f"{mdps[0].n_actions} actions like mdps[0], got {m.n_states} and "
                                 f"{m.n_actions}")
            # the task kernel pairs state s of every task with state s of the others: the same
            # coordinates (missing or non-numeric ones are left to for_mdp, which names them)
            ours, theirs = getattr(mdps[0], "coordinates", None), getattr(m, "coordinates", None)
            if ours is None or theirs is None:
                continue
            a, b = np.asarray(ours), np.asarray(theirs)
            try:
                if a.shape == b.shape and np.array_equal(a, b, equal_nan=True):
                    continue
            except TypeError:
                continue
            if a.shape == b.shape and a.ndim >= 1 and len(a):
                rows = np.flatnonzero((a != b).reshape(len(a), -1).any(axis=1))
                got = (f"{rows.size} of {len(a)} states at other coordinates, the first state {rows[0]} "
                       f"at {b[rows[0]].tolist()} against {a[rows[0]].tolist()}")
            else:
                got = f"coordinates of shape {b.shape} against {a.shape}"
            raise ValueError(f"mdps[{i}]: expected the state coordinates of mdps[0] (the task kernel "
                             f"pairs state s of one task with state s of the others), got {got}")
        if kwargs.get("selection", "collapsed") not in ("collapsed", "elbo"):
            raise ValueError(f"selection: transfer chooses scales by a bound; expected 'collapsed' "
                             f"or 'elbo', got {kwargs['selection']!r}")
        kwargs.setdefault("prior", "dense")
        if "scale_range" in kwargs:   # (before for_mdp, whose unpacking does not name it)
            kwargs["scale_range"] = _check_scale_range(kwargs["scale_range"])
        lattice = {k: kwargs[k] for k in ("scale_range", "scale_step") if k in kwargs}
        return cls(_OwnBeliefs(CorrelatedTransitionModel.for_mdp(m, **kwargs) for m in mdps), **lattice,
                   similarities=similarities, prior_related=prior_related,
                   similarity_criterion=similarity_criterion, similarity_rule=similarity_rule,
                   cv_folds=cv_folds, cv_scale=cv_scale,
                   source_impute_rounds=source_impute_rounds, full_scale=full_scale,
                   fixed_similarity=fixed_similarity)

    # ------------------------------------------------------------------ data
    def _check_task(self, task: Any) -> int:
        if isinstance(task, bool) or not isinstance(task, (int, np.integer)) or not 0 <= task < self.n_tasks:
            raise ValueError(f"task: expected an int in [0, {self.n_tasks}), got {task!r}")
        return int(task)

    def update(self, task: int, states: Any, actions: Any, next_states: Any) -> MultiTaskTransitionModel:
        """Accumulate transitions of ``task`` (arrays of shape (T,) or scalars).

        Returns
        -------
        self
        """
        self.tasks_[self._check_task(task)].update(states, actions, next_states)
        return self

    def set_counts(self, task: int, counts: Any) -> MultiTaskTransitionModel:
        """Replace the data of ``task`` by a count array of shape (S, A, S).

        Returns
        -------
        self
        """
        self.tasks_[self._check_task(task)].set_counts(counts)
        return self

    @property
    def counts(self) -> FloatArray:
        """Observed transition counts of every task, ndarray of shape (T, S, A, S)."""
        return np.stack([b.counts for b in self.tasks_])

    def task(self, task: int) -> CorrelatedTransitionModel:
        """The transfer belief of ``task`` (a TransitionBelief, e.g. for a PSRL agent)."""
        return self.tasks_[self._check_task(task)]

    # ------------------------------------------------------------------ posteriors
    def mean(self, task: int) -> FloatArray:
        """Posterior-mean transition model of ``task``, ndarray of shape (S, A, S)."""
        return self.tasks_[self._check_task(task)].mean()

    def sample_many(self, n: int, *, task: int, rng: SeedLike) -> FloatArray:
        """``n`` posterior draws of ``task``'s model, ndarray of shape (n, S, A, S)."""
        return self.tasks_[self._check_task(task)].sample_many(n, rng=rng)

    def independent_mean(self, task: int) -> FloatArray:
        """Posterior mean of ``task``'s single-task belief (no transfer), shape (S, A, S)."""
        return self.independent_[self._check_task(task)].mean()

    @property
    def similarity_(self) -> FloatArray:
        """Ndarray of shape (T,): the chosen similarity of every task (NaN before its fit)."""
        return np.array([np.nan if b.transfer_selected_ is None else b.transfer_selected_["similarity"]
                         for b in self.tasks_])

    @property
    def pair_weight_(self) -> FloatArray:
        r"""Ndarray of shape (T,): the weight :math:`\eta` of the other tasks' counts in every
        task's pairs (0 without a per-pair layer, at :math:`\rho = 0` and with no data; NaN
        before the task's fit).
        """
        return np.array([np.nan if b.transfer_selected_ is None else b.transfer_selected_["pair_weight"]
                         for b in self.tasks_])

    # ------------------------------------------------------------------ internals
    def _signature(self, task: int) -> tuple:
        return tuple(int(b._version) for u, b in enumerate(self.independent_) if u != task)

    def _source_field(self, task: int, action: int) -> SourceField | None:
        """The field of the other tasks' pooled data for ``action`` (refitted only when it changed)."""
        others = [u for u, b in enumerate(self.independent_)
                  if u != task and b._counts[:, action, :].any()]
        if not others:
            return None
        sig = self._signature(task)
        pooled = self.pooled_[task]
        if self._pooled_sig[task] != sig:
            pooled.set_counts(sum(self.independent_[u]._counts for u in range(self.n_tasks) if u != task))
            self._pooled_sig[task] = sig
        pooled.refit([action])
        model = pooled.models_[action]
        stamp = (int(pooled._action_versions[action]), len(others))
        hit = self._fields.get((task, action))
        if hit is not None and hit[0] is model and hit[1] == stamp:
            return hit[2]
        field = SourceField.from_model(model, len(others))
        self._fields[(task, action)] = (model, stamp, field)
        return field


# --------------------------------------------------------------------------------------
# Policies of several tasks (imitation)
# --------------------------------------------------------------------------------------
class MultiTaskPolicyEstimator:
    r"""Policy posteriors of several related tasks from their demonstrations, with transfer.

    Every task's policy is a :class:`~corrpriors.core.model.CorrelatedMultinomial` over the
    states (covariates) and actions (categories), as in
    :class:`~corrpriors.applications.PolicyEstimator` (``model="pg"``); each task first gets its
    single-task fit (scale by the collapsed bound, constant means learned), then its transfer fit
    from the others (module docstring, :class:`TransferSearch`).

    Parameters
    ----------
    coordinates : array_like of shape (S, D), optional
        State coordinates for the default kernel :func:`~corrpriors.applications.state_kernel`.
    distances : array_like of shape (S, S), optional
    covariance : ndarray of shape (S, S) or BoundKernel, optional
        A ready prior covariance (overrides coordinates / distances).
    lengthscale : float, optional
        Default the largest distance (the paper's choice).
    similarities : sequence of float, default :data:`SIMILARITY_GRID`
    prior_related : float or None, default 0.5
        Prior probability that a task is related to the others (see :class:`TransferSearch`).
    similarity_criterion : {"loo", "cv", "evidence"}, default "cv"
        How similarities are compared (see :class:`TransferSearch`). Policies keep the two-fold
        cross-validation, the transition beliefs' default before round 15: on a data-poor
        expert (30 demonstrations over 25 states) borrowing from an identical data-rich one,
        leave-one-out transferred on 3 of 12 draws, the cross-validation on 5 (and neither on
        any of 12 draws from an unrelated expert).
    similarity_rule : {"one_se", "best"}, default "one_se"
        (``"evidence"`` takes the best objective whatever the rule.)
    cv_scale, full_scale : {"conditional", "climb"}, default "conditional"
        The scales of the cross-validation's fits and of the kept fits (see
        :class:`TransferSearch`): ``cv_scale`` only with ``"cv"`` (``"climb"`` is otherwise refused),
        with ``"evidence"`` the kept fits always climb.
    scale_range : (float, float), default (1e-2, 1e4)
    scale_step : float, default 0.25
    max_iter : int, default 300
    tol : float, default 1e-6
    mean_prior_std : float, default 3.0
        :math:`\tau_0`.

    Attributes
    ----------
    policies_ : ndarray of shape (T, S, A)
        Plug-in posterior-mean policies with transfer.
    independent_policies_ : ndarray of shape (T, S, A)
        The single-task policies (no transfer).
    similarity_ : ndarray of shape (T,)
        The chosen :math:`\rho` of every task.
    scale_ : ndarray of shape (T,)
        The scale of every kept model (``models_``): at :math:`\rho = 0` the single-task fit's.
    models_ : list of CorrelatedMultinomial
        The transfer fits (at :math:`\rho = 0` the single-task fit).
    """

    def __init__(self, *, coordinates: Any = None, distances: Any = None, covariance: Any = None,
                 lengthscale: float | None = None, similarities: Any = SIMILARITY_GRID,
                 prior_related: float | None = 0.5, similarity_criterion: str = "cv",
                 similarity_rule: str = "one_se", cv_scale: str = "conditional",
                 full_scale: str = "conditional",
                 scale_range: tuple[float, float] = (1e-2, 1e4), scale_step: float = 0.25,
                 max_iter: int = 300, tol: float = 1e-6, mean_prior_std: float = 3.0) -> None:
        self.coordinates = coordinates
        self.distances = distances
        self.covariance = covariance
        self.lengthscale = lengthscale
        self.similarities = similarities
        self.prior_related = prior_related
        self.similarity_criterion = similarity_criterion
        self.similarity_rule = similarity_rule
        self.cv_scale = cv_scale
        self.full_scale = full_scale
        self.scale_range = scale_range
        self.scale_step = scale_step
        self.max_iter = max_iter
        self.tol = tol
        self.mean_prior_std = mean_prior_std

    def _template(self) -> Any:
        from ..core.model import CorrelatedMultinomial
        from .imitation import state_kernel

        cov = self.covariance
        if cov is None:
            cov = state_kernel(coordinates=self.coordinates, distances=self.distances,
                               lengthscale=self.lengthscale)
        return CorrelatedMultinomial(covariance=cov, learn_mean="constant", max_iter=self.max_iter,
                                     tol=self.tol, mean_prior_std=self.mean_prior_std)

    def fit(self, counts: Any) -> MultiTaskPolicyEstimator:
        """Fit every task's policy from its count matrix.

        Parameters
        ----------
        counts : array_like of shape (T, S, A)
            Demonstration counts of every task (see
            :func:`~corrpriors.applications.demonstration_counts`); a task may have none.

        Returns
        -------
        self
        """
        from ..core.selection import ScaleSearch

        # every setting the searches use, before any fit (they would check them only after
        # the single-task fits)
        x = check_counts(counts, "counts", ndim=3)
        n_tasks = x.shape[0]
        if self.similarity_rule == "average":
            raise ValueError("similarity_rule: 'average' is the transition beliefs' model average; a "
                             "policy estimator chooses ('one_se' or 'best')")
        _check_option(self.similarity_rule, "similarity_rule", SIMILARITY_RULES)
        _check_option(self.similarity_criterion, "similarity_criterion", SIMILARITY_CRITERIA)
        _check_option(self.cv_scale, "cv_scale", CV_SCALES)
        _check_option(self.full_scale, "full_scale", FULL_SCALES)
        similarities = _check_similarities(self.similarities)
        prior_related = _check_prior_related(self.prior_related)
        _check_used_settings(self.similarity_criterion, similarity_rule=self.similarity_rule,
                             cv_scale=self.cv_scale, full_scale=self.full_scale)
        lo, hi = _check_scale_range(self.scale_range)
        step = check_positive(self.scale_step, "scale_step")
        template = self._template()
        singles = [ScaleSearch(template, low=lo, high=hi, step=step).select(x[t]).model
                   for t in range(n_tasks)]
        self.models_, sims, scales = [], [], []
        for t in range(n_tasks):
            others = [u for u in range(n_tasks) if u != t and x[u].any()]
            source = None
            if others:
                pooled = ScaleSearch(template, low=lo, high=hi, step=step).select(x[others].sum(axis=0)).model
                source = SourceField.from_model(pooled, len(others))
            search = TransferSearch(template, similarities=similarities, prior_related=prior_related,
                                    similarity_criterion=self.similarity_criterion,
                                    similarity_rule=self.similarity_rule, low=lo, high=hi,
                                    step=step, cv_scale=self.cv_scale, full_scale=self.full_scale)
            sel = search.select([x[t]], [source])
            # at rho = 0 the task keeps its single-task fit, and reports that fit's scale
            kept = singles[t] if sel.similarity == 0.0 else sel.models[0]
            self.models_.append(kept)
            sims.append(sel.similarity)
            scales.append(float(getattr(kept, "scale_", kept.scale)) if sel.similarity == 0.0
                          else float(sel.scales[0]))
        self.independent_policies_ = np.stack([m.probs() for m in singles])
        self.policies_ = np.stack([m.probs() for m in self.models_])
        self.similarity_ = np.array(sims)
        self.scale_ = np.array(scales)
        self.counts_ = x
        return self
