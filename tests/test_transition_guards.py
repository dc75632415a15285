"""Guards of the transition beliefs (audit G): big (S, S) / (S, A, S) arrays are checked against
the memory budget before they exist, boolean sparse counts are refused like dense ones, bad
indices of a :class:`BackgroundTransitions` are refused instead of reading another state's row,
and integer arguments are never truncated, wrapped or taken from a boolean. The budget is set
with ``CORRPRIORS_MEMORY_LIMIT`` so that nothing big is allocated here.
"""

from __future__ import annotations

import types

import numpy as np
import pytest
import scipy.sparse as sp

from corrpriors._memory import MemoryEstimateError
from corrpriors.applications.transitions import (
    CorrelatedTransitionModel,
    DirichletTransitionModel,
    KnownTransitionModel,
    identity_category_map,
)
from corrpriors.kernels import grid_precision
from memory_checks import traced_peak

MIB = 2**20


def refused(fn, *args, match, **kwargs):
    """The MemoryEstimateError ``fn`` raises (matching ``match``) and the peak it allocated."""
    def call():
        with pytest.raises(MemoryEstimateError, match=match) as info:
            fn(*args, **kwargs)
        return info.value
    err, peak = traced_peak(call)
    assert "\n" not in str(err)
    return peak


# -- 1. memory checks before the big arrays ----------------------------------------------------
def test_identity_category_map_is_checked_before_its_arrays(monkeypatch):
    """np.tile built the (S, S) int64 map, then CategoryMap six more arrays of that size."""
    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "100M")
    peak = refused(identity_category_map, 2000, match=r"^identity_category_map \(2,000 states: "
                   r"\(S, S\) category arrays\) would need about 244 MiB, more than the 100 MiB")
    assert peak < MIB                            # the map's arrays would be 232 MB
    assert identity_category_map(300).n_categories == 300     # 5.5 MiB: fits
    with pytest.raises(ValueError, match="^n_states: expected an integer >= 2, got True"):
        identity_category_map(True)


@pytest.mark.parametrize("shape, radius, boundary", [
    ((1500,), 3, "exclude"), ((40, 40), 3, "exclude"), ((40, 40), 2, "stay"),
    ((12, 12, 12), 2, "exclude"), ((12, 12, 12), 3, "clip"), ((300,), 100, "stay")])
def test_displacement_category_map_estimate_bounds_its_peak(monkeypatch, shape, radius, boundary):
    """The estimate counted the (S, S, D) displacements but not CategoryMap's derived arrays nor
    the censored maps' destinations: 32.5 bytes per pair against a traced peak of 49 at D = 2
    (73 at D = 3), and a tenth of the window lookup's cost. It must bound the peak, and not by
    so much that a fitting map is refused."""
    from corrpriors.applications.transitions import _categories
    estimates = []
    real_check = _categories.check_memory
    monkeypatch.setattr(_categories, "check_memory",
                        lambda need, *a, **k: (estimates.append(need), real_check(need, *a, **k)))
    coords = np.indices(shape).reshape(len(shape), -1).T
    cmap, peak = traced_peak(_categories.displacement_category_map, coords, radius, boundary=boundary)
    assert cmap.n_states == len(coords)
    assert len(estimates) == 1
    assert peak <= estimates[0] <= 2.0 * peak + MIB


def test_for_mdp_absolute_checks_the_model_before_building_the_map(monkeypatch):
    """for_mdp(encoding="absolute") built the identity map before its own check, so a large
    MDP died in np.tile with a raw MemoryError (11.9 GiB at 40,000 states)."""
    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "100M")
    S = 2000
    mdp = types.SimpleNamespace(n_states=S, n_actions=4,
                                coordinates=np.random.default_rng(0).random((S, 2)))
    peak = refused(CorrelatedTransitionModel.for_mdp, mdp, encoding="absolute",
                   match=r"^the transition model \(2,000 states x 4 actions x 2,000 categories\)")
    assert peak < 2 * MIB


def test_the_constructor_checks_before_its_default_identity_map(monkeypatch):
    """CorrelatedTransitionModel(S, A, ...) built the (S, S) identity map (even with sparse
    storage) and was accepted whatever the budget."""
    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "100M")
    q = grid_precision((40, 50), length_scale=5.0)
    for sparse in (True, None):
        peak = refused(CorrelatedTransitionModel, 2000, 2, precision=q, sparse=sparse,
                       match=r"^the transition model \(2,000 states x 2 actions x 2,000 categories\)")
        assert peak < 2 * MIB


def test_dense_counts_are_checked(monkeypatch):
    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "100M")
    peak = refused(DirichletTransitionModel, 2000, 4, sparse=False,
                   match=r"^DirichletTransitionModel\(sparse=False\): 1 dense \(S, A, S\) float64 "
                         r"arrays of 2,000 states x 4 actions would need about 122 MiB.*sparse=True")
    assert peak < MIB
    assert DirichletTransitionModel(2000, 4).sparse          # the automatic choice still works


def test_dense_draws_are_checked(monkeypatch):
    """sample_many allocated (n, S, A, S) (and the Dirichlet's Gamma draws) unchecked."""
    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "20M")
    S, A = 300, 2                                # one (S, A, S) array: 1.37 MiB
    d = DirichletTransitionModel(S, A, sparse=False).update([0], [1], [2])
    peak = refused(d.sample_many, 20, rng=0, match=r"^sample_many\(20\): 62 dense .*\(smaller n\)")
    assert peak < MIB
    assert d.sample_many(2, rng=0).shape == (2, S, A, S)
    known = KnownTransitionModel(d.mean())
    assert refused(known.sample_many, 20, rng=0, match=r"^sample_many\(20\): 20 dense") < MIB


def test_correlated_dense_draws_are_checked(monkeypatch):
    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "20M")
    S, A = 100, 2                                # one (S, A, S) array: 156 KiB
    b = CorrelatedTransitionModel(S, A, covariance=np.eye(S), sparse=False).update([0, 1], [0, 1], [1, 2])
    first = b.sample_many(2, rng=0)
    peak = refused(b.sample_many, 200, rng=0, match=r"^200 posterior draws: 800 dense \(S, A, S\)")
    assert peak < 2 * MIB
    np.testing.assert_array_equal(b.sample_many(2, rng=0), first)


# -- 2. boolean sparse counts ------------------------------------------------------------------
def test_boolean_sparse_counts_are_refused_like_dense_ones():
    S, A = 3, 2
    message = r"^counts: expected real integer counts, got a boolean array"
    with pytest.raises(TypeError, match=message):
        DirichletTransitionModel(S, A).set_counts(np.ones((S, A, S), bool))
    for fmt in (sp.csr_array, sp.coo_array, sp.csr_matrix):
        with pytest.raises(TypeError, match=message):
            DirichletTransitionModel(S, A).set_counts(fmt(np.ones((S * A, S), bool)))
    b = DirichletTransitionModel(S, A).set_counts(sp.csr_array(np.ones((S * A, S), int)))
    assert b.counts.sum() == S * A * S


# -- 3. indices of BackgroundTransitions -------------------------------------------------------
@pytest.fixture
def table():
    S, A = 4, 2
    C = np.random.default_rng(0).integers(0, 3, size=(S, A, S))
    return DirichletTransitionModel(S, A, sparse=True).set_counts(C).mean()


@pytest.mark.parametrize("actions, message", [
    ([2, 0, 0, 0], r"^actions: expected indices in \[0, A\) = \[0, 2\), got values in \[0, 2\]"),
    ([-1, 0, 0, 0], r"^actions: expected indices in \[0, A\)"),
    ([0.7, 0, 0, 0], "^actions: expected integer indices, got dtype float64"),
    ([True, False, True, False], "^actions: expected integer indices, got dtype bool")])
def test_policy_rows_refuses_bad_actions(table, actions, message):
    with pytest.raises(ValueError, match=message):
        table.policy_rows(actions)


def test_sample_next_and_entries_refuse_bad_indices(table):
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"^actions: expected indices in \[0, A\) = \[0, 2\)"):
        table.sample_next([0], [2], rng=rng)
    with pytest.raises(ValueError, match=r"^states: expected indices in \[0, S\) = \[0, 4\)"):
        table.sample_next([-1], [0], rng=rng)
    with pytest.raises(ValueError, match="^states, actions: expected equal 1-D shapes"):
        table.sample_next([0, 1], [0], rng=rng)
    with pytest.raises(ValueError, match=r"^rows: expected indices in \[0, S A\) = \[0, 8\)"):
        table.entries([-1], [0])
    with pytest.raises(ValueError, match=r"^cols: expected indices in \[0, S\) = \[0, 4\)"):
        table.entries([0], [4])


def test_valid_indices_read_the_same_rows(table):
    P = table.toarray()
    pol = np.array([1, 0, 1, 0])
    np.testing.assert_allclose(table.policy_rows(pol).toarray()[:, 0], P[np.arange(4), pol])
    rows, cols = np.array([0, 7, 3], dtype=np.int32), np.array([3, 0, 1], dtype=np.uint8)
    np.testing.assert_allclose(table.entries(rows, cols), P.reshape(8, 4)[rows, cols])
    draws = table.sample_next(np.zeros(2000, int), np.ones(2000, int), rng=np.random.default_rng(0))
    np.testing.assert_allclose(np.bincount(draws, minlength=4) / 2000, P[0, 1], atol=0.05)


# -- 4. integer arguments ----------------------------------------------------------------------
@pytest.fixture
def belief():
    S, A = 4, 2
    return CorrelatedTransitionModel(S, A, covariance=np.eye(S)).set_counts(np.ones((S, A, S), int))


@pytest.mark.parametrize("action", [1.7, True, -1, 2, np.nan, "1"])
def test_action_mean_refuses_what_is_not_an_action(belief, action):
    with pytest.raises(ValueError, match=r"^action: expected an integer in \[0, 1\]"):
        belief.action_mean(action)


def test_action_mean_of_a_valid_action_is_unchanged(belief):
    np.testing.assert_array_equal(belief.action_mean(np.int64(1)), belief.mean()[:, 1, :])
    np.testing.assert_array_equal(belief.action_mean(1.0), belief.action_mean(1))


@pytest.mark.parametrize("actions, message", [
    ([5], r"^actions: expected indices in \[0, A\) = \[0, 2\), got values in \[5, 5\]"),
    ([-1], r"^actions: expected indices in \[0, A\)"),
    ([0.5], "^actions: expected integer indices"),
    ([True], "^actions: expected integer indices")])
def test_refit_refuses_bad_actions(belief, actions, message):
    with pytest.raises(ValueError, match=message):
        belief.refit(actions)
    assert (belief._fitted_versions == -1).all()          # nothing was fitted
    belief.refit([1])
    assert belief._fitted_versions.tolist() == [-1, belief._action_versions[1]]


@pytest.mark.parametrize("kwargs, message", [
    (dict(n_jobs=np.nan), "^n_jobs: expected a positive int, -1"),
    (dict(n_jobs=1.5), "^n_jobs: expected a positive int, -1"),
    (dict(n_jobs=True), "^n_jobs: expected a positive int, -1"),
    (dict(concentration=1.0, layer_rounds=np.nan), "^layer_rounds: expected an integer >= 1, got nan"),
    (dict(concentration=1.0, layer_rounds=True), "^layer_rounds: expected an integer >= 1, got True"),
    (dict(impute_rounds=np.nan), "^impute_rounds: expected an integer >= 1, got nan")])
def test_correlated_integer_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CorrelatedTransitionModel(4, 2, covariance=np.eye(4), **kwargs)
    assert CorrelatedTransitionModel(4, 2, covariance=np.eye(4), n_jobs=-1).n_jobs == -1


@pytest.mark.parametrize("n_states, n_actions, name", [
    (True, 2, "n_states"), (np.nan, 2, "n_states"), (2.5, 2, "n_states"), (0, 2, "n_states"),
    (3, False, "n_actions"), (3, np.inf, "n_actions")])
def test_belief_sizes_are_named(n_states, n_actions, name):
    with pytest.raises(ValueError, match=f"^{name}: expected an integer >= 1"):
        DirichletTransitionModel(n_states, n_actions)


def test_alpha_refuses_booleans():
    with pytest.raises(TypeError, match="^alpha: expected a finite positive number, got True"):
        DirichletTransitionModel(3, 2, alpha=True)
    with pytest.raises(ValueError, match="^alpha: expected a finite positive number, got 0"):
        DirichletTransitionModel(3, 2, alpha=0)
    assert DirichletTransitionModel(3.0, 2, alpha=np.float32(0.5)).alpha == 0.5
