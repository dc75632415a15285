"""Round 20 audit of the multi-task module and the task kernels: inputs that were accepted and
gave wrong or meaningless results, a reported scale no kept model had, an aliased belief, a raw
MemoryError, and options that were accepted but could have no effect."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from corrpriors.kernels import TaskCorrelation, kronecker_precision
from corrpriors.kernels.task import correlation_from_angles


# ------------------------------------------------------------------ kernels/task.py
@pytest.mark.parametrize("bad", [np.diag([4.0, 4.0]), np.array([[2.0, 1.0], [1.0, 2.0]]),
                                 np.array([[1.0, 0.5], [0.5, 1.5]])])
def test_kronecker_precision_refuses_a_non_unit_diagonal(bad):
    """diag [4, 4] and [[2, 1], [1, 2]] were accepted: a covariance, not a correlation (the
    prior's variance in every task would be B_tt times the model's scale)."""
    with pytest.raises(ValueError, match=r"^task_correlation: expected a correlation matrix \(unit diagonal\)"):
        kronecker_precision(bad, np.eye(3))
    # a diagonal within round-off of 1 is a correlation: B^-1 (x) Q
    B = np.array([[1.0 + 1e-12, 0.3], [0.3, 1.0]])
    np.testing.assert_allclose(kronecker_precision(B, np.eye(2)).toarray(),
                               np.kron(np.linalg.inv(B), np.eye(2)), atol=1e-12)


def test_kronecker_precision_refuses_no_tasks():
    """A 0 x 0 task correlation gave an empty (0, 0) precision."""
    with pytest.raises(ValueError, match=r"^task_correlation: expected a square \(T, T\) matrix with T >= 1"):
        kronecker_precision(np.zeros((0, 0)), np.eye(3))


@pytest.mark.parametrize("bad", [[4.0], [np.nan], [-0.1], [np.inf]])
def test_correlation_from_angles_refuses_angles_outside_0_pi(bad):
    """[4.0] gave a correlation of cos(4) = -0.65 (the angle 2 pi - 4's), [nan] a NaN matrix."""
    with pytest.raises(ValueError, match=r"^angles: expected values in \[0, pi\]"):
        correlation_from_angles(bad, 2)
    # the ends are the singular matrices angles_from_correlation gives
    np.testing.assert_allclose(correlation_from_angles([0.0], 2), np.ones((2, 2)))
    np.testing.assert_allclose(correlation_from_angles([np.pi], 2), [[1.0, -1.0], [-1.0, 1.0]])


@pytest.mark.parametrize("bad", [[True], ["1.0"], [np.bool_(True)]])
def test_task_correlation_refuses_bool_and_string_angles(bad):
    """angles=[True] was taken as 1 radian, ["1.0"] as 1.0."""
    with pytest.raises(TypeError, match="^angles: expected"):
        TaskCorrelation(2, angles=bad)
    assert TaskCorrelation(2, angles=[1.0]).correlation[0, 1] == pytest.approx(np.cos(1.0))


def test_from_correlation_warns_when_it_clips_into_the_bounds():
    """0.9999 became 0.99875 and -0.5 under bounds (0.05, pi/2) became 0, silently."""
    near_one = np.array([[1.0, 0.9999], [0.9999, 1.0]])
    with pytest.warns(UserWarning, match="^correlation: 1 of 1 angles lie outside angle_bounds"):
        k = TaskCorrelation.from_correlation(near_one)
    assert k.correlation[0, 1] == pytest.approx(np.cos(0.05))
    with pytest.warns(UserWarning, match="clipped"):
        TaskCorrelation.from_correlation(np.array([[1.0, -0.5], [-0.5, 1.0]]), angle_bounds=(0.05, np.pi / 2))
    with warnings.catch_warnings():   # inside the bounds, or fixed: exact and silent
        warnings.simplefilter("error")
        C = np.array([[1.0, 0.8, 0.3], [0.8, 1.0, -0.2], [0.3, -0.2, 1.0]])
        np.testing.assert_allclose(TaskCorrelation.from_correlation(C).correlation, C, atol=1e-12)
        fixed = TaskCorrelation.from_correlation(near_one, angle_bounds="fixed")
        np.testing.assert_allclose(fixed.correlation, near_one, atol=1e-12)


# ------------------------------------------------------------------ applications/multitask.py
from corrpriors._memory import MemoryEstimateError  # noqa: E402
from corrpriors.applications import (  # noqa: E402
    CorrelatedTransitionModel,
    MultiTaskPolicyEstimator,
    MultiTaskTransitionModel,
    TransferSearch,
)
from corrpriors.applications.multitask import SourceField, split_counts, transfer_hyper_prior  # noqa: E402
from corrpriors.core import CorrelatedMultinomial  # noqa: E402
from corrpriors.envs import dense_gridworld  # noqa: E402
from corrpriors.kernels import SquaredExponential  # noqa: E402

PLAIN = dict(concentration=None, contamination_prior=None)


def _template():
    x = np.arange(6.0)[:, None]
    return CorrelatedMultinomial(SquaredExponential(lengthscale=2.0).bind(coords=x), learn_mean="constant")


def _counts(mdp, n, rng):
    P = np.asarray(mdp.transitions)
    S, A, _ = P.shape
    c = np.zeros(P.shape)
    for _ in range(n):
        s, a = rng.integers(S), rng.integers(A)
        c[s, a, rng.choice(S, p=P[s, a])] += 1
    return c


def test_policy_scale_is_the_kept_models_scale():
    """At rho = 0 the estimator keeps the single-task fit, but scale_ reported the transfer
    search's rho = 0 model's scale (0.056 and 3.16 against the kept fits' 0.01)."""
    rng = np.random.default_rng(1)
    coords = np.stack(np.meshgrid(np.arange(3.0), np.arange(3.0)), -1).reshape(-1, 2)
    S, A = 9, 3
    pol = np.full((S, A), 0.15)
    pol[:, 0] = 0.7
    demos = []
    for p, n in ((pol, 200), (np.roll(pol, 1, axis=1), 15)):
        c = np.zeros((S, A))
        for _ in range(n):
            s = rng.integers(S)
            c[s, rng.choice(A, p=p[s])] += 1
        demos.append(c)
    est = MultiTaskPolicyEstimator(coordinates=coords).fit(np.stack(demos))
    kept = np.array([float(getattr(m, "scale_", m.scale)) for m in est.models_])
    np.testing.assert_array_equal(est.scale_, kept)
    assert (est.similarity_ == 0.0).any()
    for t in np.flatnonzero(est.similarity_ == 0.0):
        np.testing.assert_array_equal(est.policies_[t], est.independent_policies_[t])


def test_beliefs_are_copied():
    """The beliefs passed were kept: counts set on them afterwards reached the single-task
    belief but not the transfer belief's view (task 1's mean was its no-data mixture while
    independent_[1] held 20 transitions)."""
    mdps = [dense_gridworld((3, 3)), dense_gridworld((3, 3), step_spread=0.8)]
    rng = np.random.default_rng(0)
    beliefs = [CorrelatedTransitionModel.for_mdp(m, **PLAIN) for m in mdps]
    c1 = _counts(mdps[1], 20, rng)
    beliefs[1].set_counts(c1)                     # current counts are used
    mt = MultiTaskTransitionModel(beliefs)
    assert all(b is not own for b, own in zip(beliefs, mt.independent_))
    np.testing.assert_array_equal(mt.independent_[1].counts, c1)
    np.testing.assert_array_equal(mt.task(1).counts, c1)
    beliefs[1].set_counts(np.zeros_like(c1))       # the caller's object: not the model's
    beliefs[0].update([0], [0], [1])
    np.testing.assert_array_equal(mt.independent_[1].counts, c1)
    assert mt.independent_[0].counts.sum() == 0 and mt.counts.sum() == c1.sum()


def test_mixture_draws_check_memory_first():
    """A task without data draws from the prior mixture; sample_many(10**9) raised a raw
    MemoryError there (the data path: MemoryEstimateError before allocating)."""
    mdps = [dense_gridworld((3, 3)), dense_gridworld((3, 3), step_spread=0.8)]
    mt = MultiTaskTransitionModel.for_mdps(mdps, **PLAIN)
    mt.set_counts(0, _counts(mdps[0], 100, np.random.default_rng(0)))
    draws = mt.sample_many(3, task=1, rng=0)
    assert mt.task(1)._mixture is not None and draws.shape == (3, 9, 4, 9)
    np.testing.assert_allclose(draws.sum(-1), 1.0)
    with pytest.raises(MemoryEstimateError, match="^1,000,000,000 posterior draws"):
        mt.sample_many(10 ** 9, task=1, rng=0)
    with pytest.raises(ValueError, match="^n: expected an integer >= 1"):
        mt.sample_many(True, task=1, rng=0)


@pytest.mark.parametrize("bad, match", [(-np.ones((2, 2)), "non-negative"), (np.full((2, 2), 0.5), "integers"),
                                        (np.full((2, 2), np.nan), "NaN")])
def test_split_counts_checks_its_counts(bad, match):
    """Negative, fractional and NaN counts were split into parts (NaN cast to -4.6e18)."""
    with pytest.raises(ValueError, match=f"^counts: .*{match}"):
        split_counts(bad)
    x = np.array([[3, 0], [1, 2]])
    a, b = split_counts(x)
    np.testing.assert_array_equal(a + b, x)


def test_transfer_hyper_prior_checks_default_mean_and_std():
    """default_std=-1 gave a negative std (-0.87), a default_mean of the wrong shape a raw
    broadcast error."""
    src = SourceField(np.zeros((3, 2)), np.array([1.0, -1.0]), 1)
    with pytest.raises(ValueError, match="^default_std: expected a finite positive number"):
        transfer_hyper_prior(0.5, src, [0.0, 0.0], -1.0)
    with pytest.raises(ValueError, match=r"^default_mean: expected finite numbers of shape \(K - 1,\) = \(2,\)"):
        transfer_hyper_prior(0.5, src, [0.0, 0.0, 0.0, 0.0], 3.0)
    with pytest.raises(ValueError, match="^default_mean"):
        transfer_hyper_prior(0.5, None, [[0.0]], 3.0)
    mean, std = transfer_hyper_prior(0.5, src, [0.0, 2.0], 3.0)
    np.testing.assert_allclose(mean, [0.5, 0.5])
    assert std == pytest.approx(3.0 * np.sqrt(0.75))


@pytest.mark.parametrize("bad", [True, "a", 1.5, 0])
def test_source_field_n_sources_is_a_positive_int(bad):
    """n_sources=True was stored as 1, 'a' raised int()'s unnamed error."""
    with pytest.raises(ValueError, match="^n_sources: expected an integer >= 1"):
        SourceField(np.zeros((2, 1)), np.zeros(1), bad)
    assert SourceField(np.zeros((2, 1)), np.zeros(1), np.int64(2)).n_sources == 2


@pytest.mark.parametrize("bad", [(1.0, 2.0, 3.0), 5, "ab"])
def test_scale_range_must_be_a_pair(bad):
    """(1, 2, 3) and 5 raised "too many values to unpack" / "'int' object is not iterable"."""
    mdps = [dense_gridworld((3, 3))] * 2
    match = r"^scale_range: expected a pair \(low, high\)"
    with pytest.raises(ValueError, match=match):
        MultiTaskTransitionModel([CorrelatedTransitionModel.for_mdp(m, **PLAIN) for m in mdps], scale_range=bad)
    with pytest.raises(ValueError, match=match):
        MultiTaskTransitionModel.for_mdps(mdps, scale_range=bad, **PLAIN)
    with pytest.raises(ValueError, match=match):
        MultiTaskPolicyEstimator(distances=np.ones((4, 4)) - np.eye(4), scale_range=bad).fit(np.ones((2, 4, 3)))


# options that could have no effect: refused (cv_scale: warned)
UNUSED = [
    (dict(cv_folds=3), "^cv_folds: only used with similarity_criterion='cv', got cv_folds=3 with 'loo'"),
    (dict(similarity_criterion="evidence", cv_folds=4), "^cv_folds: only used with similarity_criterion='cv'"),
]
FIXED = [
    (dict(similarity_criterion="evidence"), "^similarity_criterion: unused with fixed_similarity=0.5"),
    (dict(similarity_criterion="cv"), "^similarity_criterion: unused with fixed_similarity=0.5"),
    (dict(similarity_rule="best"), "^similarity_rule: unused with fixed_similarity=0.5"),
    (dict(similarity_rule="average"), "^similarity_rule: unused with fixed_similarity=0.5"),
    (dict(prior_related=0.25), "^prior_related: unused with fixed_similarity=0.5"),
    (dict(prior_related=None), "^prior_related: unused with fixed_similarity=0.5"),
    (dict(cv_folds=3), "^cv_folds: only used with similarity_criterion='cv'"),
]


@pytest.mark.parametrize("options, match", UNUSED)
def test_search_settings_without_effect_are_refused(options, match):
    """cv_folds with "loo"/"evidence" was accepted and changed nothing (measured: the same means
    and similarities to the bit)."""
    mdps = [dense_gridworld((3, 3))] * 2
    with pytest.raises(ValueError, match=match):
        TransferSearch(_template(), **options)
    with pytest.raises(ValueError, match=match):
        MultiTaskTransitionModel.for_mdps(mdps, **options, **PLAIN)
    if "cv_folds" not in options:   # (the policy estimator has no folds setting)
        with pytest.raises(ValueError, match=match):
            MultiTaskPolicyEstimator(distances=np.ones((4, 4)) - np.eye(4), **options).fit(np.ones((2, 4, 3)))


@pytest.mark.parametrize("options, match", FIXED)
def test_a_fixed_similarity_refuses_the_search_settings(options, match):
    """With fixed_similarity nothing is chosen: the criterion ("evidence" made the kept fits climb
    their scale, which the docstring called unused), the rule, prior_related and cv_folds were
    accepted."""
    with pytest.raises(ValueError, match=match):
        MultiTaskTransitionModel.for_mdps([dense_gridworld((3, 3))] * 2, fixed_similarity=0.5, **options, **PLAIN)


def test_the_settings_that_matter_are_accepted():
    """The defaults, each criterion's own settings, and full_scale with a fixed similarity."""
    mdps = [dense_gridworld((3, 3))] * 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for options in (dict(), dict(similarity_criterion="cv", cv_folds=3, cv_scale="climb", full_scale="climb"),
                        dict(full_scale="climb", similarity_rule="best"), dict(similarity_criterion="evidence"),
                        dict(similarity_criterion="evidence", similarity_rule="average"),
                        dict(similarity_criterion="evidence", similarity_rule="best", full_scale="climb"),
                        dict(fixed_similarity=0.5, full_scale="climb"), dict(fixed_similarity=0.5)):
            TransferSearch(_template(), **{k: v for k, v in options.items() if k != "fixed_similarity"})
            MultiTaskTransitionModel.for_mdps(mdps, **options, **PLAIN)


def test_cv_scale_without_cross_validation_is_refused():
    """cv_scale="climb" with "loo" or "evidence" has no effect (the transfer experiment's
    check_config refuses it too, so the experiment never passes it)."""
    mdps = [dense_gridworld((3, 3))] * 3
    match = "^cv_scale: only used with similarity_criterion='cv', got cv_scale='climb' with"
    with pytest.raises(ValueError, match=match):
        MultiTaskTransitionModel.for_mdps(mdps, cv_scale="climb", **PLAIN)
    with pytest.raises(ValueError, match=match):
        TransferSearch(_template(), similarity_criterion="evidence", cv_scale="climb")


def test_fixed_similarity_fits_at_the_conditional_scale():
    """With fixed_similarity the kept fits' scale follows full_scale alone: "conditional" is the
    joint model's theta_S (1 - rho^2) of every action's source."""
    mdps = [dense_gridworld((3, 3)), dense_gridworld((3, 3), step_spread=0.8)]
    rng = np.random.default_rng(2)
    mt = MultiTaskTransitionModel.for_mdps(mdps, fixed_similarity=0.5, **PLAIN)
    mt.set_counts(0, _counts(mdps[0], 150, rng)).set_counts(1, _counts(mdps[1], 20, rng))
    mt.mean(1)
    expected = [mt._source_field(1, a).scale * (1 - 0.5 ** 2) for a in range(mt.n_actions)]
    np.testing.assert_allclose(mt.task(1).transfer_selected_["scales"], expected, rtol=1e-12)
