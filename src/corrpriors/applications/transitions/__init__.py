r"""Beliefs over the transition model :math:`P(s' \mid s, a)` of a finite MDP.

Three beliefs share one interface (the :class:`TransitionBelief` protocol: any object with
these members works with :class:`~corrpriors.applications.PSRLAgent`), used by system
identification and by PSRL:

* :class:`DirichletTransitionModel` -- an independent conjugate Dirichlet(alpha) per (s, a);
* :class:`CorrelatedTransitionModel` -- the paper's model: one
  :class:`corrpriors.core.model.CorrelatedMultinomial` per action with the states as
  covariates, so that similar states get similar next-state distributions;
* :class:`KnownTransitionModel` -- the true model (a point mass), for tests and references.

:meth:`CorrelatedTransitionModel.for_mdp` builds the correlated belief for an MDP (or a
Gymnasium environment's :func:`~corrpriors.envs.env_info`) in one call.

The interface: ``update(states, actions, next_states)`` accumulates transitions,
``set_counts(counts)`` replaces them, ``counts`` is the (S, A, S) count array,
``mean()`` the posterior-mean (or plug-in) model of shape (S, A, S), ``sample(rng=...)``
one posterior draw of shape (S, A, S) and ``sample_many(n, rng=...)`` a batch of
shape (n, S, A, S). Every belief here also has ``hellinger_estimate(rng=...)``, the Bayes
estimate under the squared Hellinger loss, :math:`\hat P_j \propto E[\sqrt{P_j}]^2`, of shape
(S, A, S) (closed form for the Dirichlet, support and known beliefs; a Rao-Blackwellised average
of posterior draws for the correlated ones, which need ``rng``): the posterior mean minimises
the expected squared error, not the Hellinger error system identification scores.

Large state spaces
------------------
From :data:`SPARSE_FROM_STATES` states on (or with ``sparse=True``) the beliefs store their
counts sparsely and return :class:`BackgroundTransitions` tables from ``mean()``,
``sample_many()`` and ``action_mean()``: the window categories' next states and the observed
far jumps as a scipy.sparse (S A, S) table, the rest of the "other" mass as background profiles
(uniform, and the pooled far-jump destinations) over each state's outside -- exact, in
O(S A K + T) memory. :meth:`CorrelatedTransitionModel.for_mdp` then builds a
:class:`WindowCategoryMap` (the (S, W) window of the displacement map, no (S, S) arrays), and
:class:`~corrpriors.applications.PSRLAgent` plans such tables with
:func:`~corrpriors.applications.psrl.plan_sparse`. ``n_jobs`` / ``backend`` fit the actions in
parallel, scheduled fit by fit (threads, joblib processes, or a Dask cluster), with the serial
numbers.

Category maps
-------------
The correlated model shares statistical strength between states through the
*categories* of its multinomials. A :class:`CategoryMap` says which next state of
``s`` plays the role of category ``k``:

* the identity map (:func:`identity_category_map`) makes category ``k`` the absolute
  next state ``k`` -- the paper's encoding;
* a displacement map (:func:`displacement_category_map`) makes category ``k`` the
  relative move ``coords[s'] - coords[s] = d_k`` inside a window
  ``|d|_inf <= radius``, so that "the same move" is the same category in every state
  (grid displacements, changes of the two queue lengths). Displacements that leave
  the state space are *structural zeros* of that state, and transitions beyond the
  window (for instance the tunnel world's jump from the goal back to the start) fall
  into one extra "other" category.

Mapping category probabilities ``q[s, k]`` back to next-state probabilities:

1. ``q`` is renormalised over the categories valid for ``s`` (mass the model puts on a
   structural zero is discarded, not moved to a particular neighbour);
2. the window categories go to their unique next state;
3. the "other" mass is spread over the next states outside the window according to
   the posterior mean of a small per-(state, action) Dirichlet over the observed
   "other" transitions: ``w[s, s'] ∝ n_other[s, s'] + other_prior``; with no such
   observation this is uniform over the states outside the window.
"""

from __future__ import annotations

from ._beliefs import (
    SPARSE_FROM_STATES,
    DirichletTransitionModel,
    KnownTransitionModel,
    TransitionBelief,
)
from ._categories import (
    BOUNDARY_RULES,
    CategoryMap,
    TruncatedCategoryMap,
    displacement_category_map,
    identity_category_map,
    window_displacements,
)
from ._correlated import GMRF_FROM_STATES, GMRF_MAX_CATEGORIES, CorrelatedTransitionModel
from ._tables import BackgroundTransitions
from ._window import WindowCategoryMap, window_category_map

__all__ = [
    "BOUNDARY_RULES",
    "GMRF_FROM_STATES",
    "GMRF_MAX_CATEGORIES",
    "SPARSE_FROM_STATES",
    "CategoryMap",
    "CorrelatedTransitionModel",
    "DirichletTransitionModel",
    "KnownTransitionModel",
    "BackgroundTransitions",
    "TransitionBelief",
    "TruncatedCategoryMap",
    "WindowCategoryMap",
    "displacement_category_map",
    "identity_category_map",
    "window_category_map",
    "window_displacements",
]
