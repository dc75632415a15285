"""Custom environments: published coordinates, --features, Tuple observations, PSRL progress."""

from __future__ import annotations

import json

import gymnasium
import numpy as np
import pytest

from corrpriors.applications import PSRLAgent, run_psrl
from corrpriors.applications.transitions import (
    CorrelatedTransitionModel,
    DirichletTransitionModel,
    KnownTransitionModel,
)
from corrpriors.cli import main
from corrpriors.envs import (
    DiscreteTupleObservation,
    discrete_observations,
    env_info,
    from_gymnasium,
    random_exploration,
)
from corrpriors.mdp import policy_iteration

pytestmark = pytest.mark.filterwarnings("ignore::corrpriors.exceptions.JitterWarning")


class Line(gymnasium.Env):
    """Five states in a row; action 1 moves right, 0 left; the right end pays 1 and ends."""

    observation_space = gymnasium.spaces.Discrete(5)
    action_space = gymnasium.spaces.Discrete(2)
    n = 5

    def __init__(self):
        self.P = {s: {a: [(1.0, self.move(s, a), float(self.move(s, a) == self.n - 1),
                           self.move(s, a) == self.n - 1)] for a in range(2)} for s in range(self.n)}
        self.initial_state_distrib = np.eye(self.n)[0]

    def move(self, s, a):
        return min(max(s + (1 if a else -1), 0), self.n - 1)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.s = 0
        return self.s, {}

    def step(self, a):
        _, self.s, r, done = self.P[self.s][int(a)][0]
        return self.s, r, done, False, {}


class LineWithCoordinates(Line):
    """The same, publishing its states' coordinates."""

    state_coordinates = np.arange(5.0)[:, None]


class TupleLine(gymnasium.Env):
    """A 3 x 2 grid observed as a Tuple (column, row); its table is keyed by the tuples."""

    observation_space = gymnasium.spaces.Tuple((gymnasium.spaces.Discrete(3),
                                                gymnasium.spaces.Discrete(2, start=1)))
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self):
        cells = [(c, r) for c in range(3) for r in (1, 2)]
        self.P = {}
        for c, r in cells:
            self.P[(c, r)] = {a: [(0.5, (min(max(c + (1 if a else -1), 0), 2), r), 0.0, False),
                                  (0.5, (c, 3 - r), float(c == 2), False)] for a in range(2)}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.obs = (0, 1)
        return self.obs, {}

    def step(self, a):
        entries = self.P[self.obs][int(a)]
        k = int(self.np_random.random() < 0.5)
        _, self.obs, r, done = entries[k]
        return self.obs, r, done, False, {}


def test_published_coordinates_are_read_and_checked():
    assert env_info(Line()).coordinates is None
    mdp = from_gymnasium(LineWithCoordinates())
    np.testing.assert_array_equal(mdp.coordinates, np.arange(5.0)[:, None])
    bad = LineWithCoordinates()
    bad.state_coordinates = np.zeros((4, 1))
    with pytest.raises(ValueError, match=r"env.unwrapped.state_coordinates: expected shape \(S, D\)"):
        env_info(bad)
    # explicit features win over the published ones
    assert env_info(LineWithCoordinates(), features=np.ones((5, 2))).coordinates.shape == (5, 2)


def test_a_published_boundary_reaches_the_model_and_the_belief():
    """``state_boundary`` says what a move off the grid does; the belief's category map follows
    it (the line's ends clip: "left" at state 0 stays at 0 whether read as clip or stay, but
    "clip" aims two cells left at 0, where "stay" would keep the agent at its own state)."""
    from corrpriors.applications.transitions import CorrelatedTransitionModel

    class ClippedLine(LineWithCoordinates):
        state_boundary = "clip"

    assert from_gymnasium(LineWithCoordinates()).boundary is None
    mdp = from_gymnasium(ClippedLine())
    assert mdp.boundary == "clip"
    cmap = CorrelatedTransitionModel.for_mdp(mdp, radius=2).category_map
    stay = CorrelatedTransitionModel.for_mdp(mdp, radius=2, boundary="stay").category_map
    # from state 1 the move -2 lands at 0 when clipped, at 1 itself when the wall keeps the agent
    move = int(np.flatnonzero(cmap.destination[1] == 0).size), int(np.flatnonzero(stay.destination[1] == 0).size)
    assert move == (2, 1)
    assert from_gymnasium(ClippedLine(), features=np.arange(5.0)[:, None]).boundary is None
    for bad in ("wrap", 3):
        env = ClippedLine()
        env.state_boundary = bad
        with pytest.raises(ValueError, match="env.unwrapped.state_boundary: expected one of"):
            from_gymnasium(env)


def test_tuple_observations_are_flattened_with_their_components_as_coordinates():
    env = TupleLine()
    flat = discrete_observations(env)
    assert isinstance(flat, DiscreteTupleObservation) and flat.observation_space.n == 6
    assert flat.observation((2, 2)) == 5 and flat.components(5) == (2, 2)
    info = env_info(env)
    np.testing.assert_array_equal(info.coordinates, [[c, r] for c in range(3) for r in (1, 2)])
    mdp = from_gymnasium(env)
    # the table keyed by tuples reads to the same model as a brute-force transcription
    for s in range(6):
        for a in range(2):
            expected = np.zeros(6)
            for p, s2, _, _ in env.P[flat.components(s)][a]:
                expected[flat.observation(s2)] += p
            np.testing.assert_allclose(mdp.transitions[s, a], expected)
    data = random_exploration(env, 30, rng=0)
    assert data.states.max() < 6 and np.all(mdp.transitions[data.states, data.actions,
                                                            data.next_states] > 0)
    belief = CorrelatedTransitionModel.for_mdp(mdp)
    agent = PSRLAgent(belief, mdp.rewards, 0.9, replan_every=10)
    out = run_psrl(env, agent, 40, rng=1, true_mdp=mdp)
    assert out["states"].max() < 6 and out["regret"].shape == (40,)
    with pytest.raises(TypeError, match="observation_space"):
        discrete_observations(gymnasium.make("CartPole-v1"))


def test_run_psrl_reports_first_reward_first_optimum_and_regret():
    env = Line()
    mdp = from_gymnasium(env)
    gamma = 0.9
    plan = policy_iteration(mdp.__class__(mdp.transitions, mdp.rewards, gamma, terminal=mdp.terminal,
                                          initial_distribution=mdp.initial_distribution))
    # an agent that knows the model is optimal from the start: no regret
    known = PSRLAgent(KnownTransitionModel(mdp.transitions), mdp.rewards, gamma, replan_every="episode",
                      terminal=mdp.terminal)
    out = run_psrl(env, known, 12, rng=0, eval_every="episode", true_mdp=mdp)
    assert out["regret"][-1] == pytest.approx(0.0, abs=1e-12)
    assert out["first_reward_step"] == 4 and out["first_reward_episode"] == 1
    assert out["first_optimal_step"] == 0 and out["first_optimal_episode"] == 0
    np.testing.assert_array_equal(out["steps"], [0, 4, 8, 12])
    np.testing.assert_array_equal(out["episodes"], [0, 1, 2, 3])
    # a learning agent: the regret is the sum of the true action gaps along its path
    agent = PSRLAgent(DirichletTransitionModel(5, 2, alpha=1.0), mdp.rewards, gamma, n_samples=1,
                      replan_every=3, terminal=mdp.terminal)
    out = run_psrl(gymnasium.wrappers.TimeLimit(env, 8), agent, 90, rng=3, eval_every=3,
                   true_mdp=mdp)
    gaps = plan.values[:, None] - plan.q_values
    gaps[mdp.terminal] = 0.0
    np.testing.assert_allclose(out["regret"], np.cumsum(gaps[out["states"], out["actions"]]))
    hit = np.flatnonzero(out["rewards"] == 1.0)
    assert hit.size and out["first_reward_step"] == hit[0] + 1
    ends = np.cumsum(out["terminated"] | out["truncated"])
    assert out["first_reward_episode"] == (ends[hit[0] - 1] if hit[0] else 0) + 1
    first = np.flatnonzero(out["normalized_return"] >= 1 - 1e-6)[0]
    assert out["first_optimal_step"] == out["steps"][first]
    assert out["first_optimal_episode"] == out["episodes"][first]
    with pytest.raises(ValueError, match="eval_every"):
        run_psrl(mdp.transitions, PSRLAgent(DirichletTransitionModel(5, 2), mdp.rewards, gamma),
                 10, 0, rng=0, eval_every="episode")


def test_matrix_path_reports_regret_and_first_optimum():
    mdp = from_gymnasium(Line())
    agent = PSRLAgent(KnownTransitionModel(mdp.transitions), np.asarray(mdp.reward_matrix), 0.9,
                      replan_every=5)
    out = run_psrl(mdp.transitions, agent, 20, 0, rng=0)
    assert out["regret"].shape == (20,) and out["regret"][-1] == pytest.approx(0.0, abs=1e-12)
    assert out["first_optimal_step"] == 0 and np.isnan(out["first_optimal_episode"])
    assert np.isnan(out["first_reward_episode"])


def test_progress_reads_sparse_models_like_dense_ones():
    # the same learning run on a dense and a sparse (S A, S) true model: same regret, first
    # reward and first optimum (the sparse path reads rewards at the model's entries)
    from corrpriors.mdp import SparseTransitions

    mdp = from_gymnasium(Line())
    r = np.zeros((5, 2, 5))
    r[:, :, 4] = 1.0
    outs = []
    for P in (mdp.transitions, SparseTransitions.from_dense(mdp.transitions)):
        agent = PSRLAgent(DirichletTransitionModel(5, 2, alpha=1.0), r, 0.9, n_samples=1,
                          replan_every=4)
        outs.append(run_psrl(P, agent, 40, 0, rng=5, eval_every=4))
    np.testing.assert_array_equal(outs[0]["regret"], outs[1]["regret"])
    for key in ("first_reward_step", "first_optimal_step"):
        np.testing.assert_array_equal(outs[0][key], outs[1][key])
    assert outs[1]["first_reward_step"] == 22   # (the step that first enters the paying cell)
    assert outs[1]["states"][21] == 3 and outs[1]["states"][22] == 4


@pytest.fixture()
def line_ids():
    ids = {"plain": "corrpriors_test/Line-v0", "coords": "corrpriors_test/LineCoords-v0"}
    gymnasium.register(ids["plain"], entry_point=Line, max_episode_steps=30)
    gymnasium.register(ids["coords"], entry_point=LineWithCoordinates, max_episode_steps=30)
    yield ids
    for env_id in ids.values():
        gymnasium.registry.pop(env_id, None)


def cli(capsys, *args):
    code = main([*args, "--no-progress", "--jobs", "1"])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_takes_coordinates_from_the_environment_or_features(tmp_path, capsys, line_ids):
    common = ["--steps", "40", "--eval-every", "20", "--n-seeds", "2", "--methods",
              "pg_sampling,dirichlet_sparse_sampling", "--no-plot"]
    code, _, err = cli(capsys, "psrl", line_ids["coords"], *common, "--out", str(tmp_path / "a"))
    assert code == 0, err
    code, _, err = cli(capsys, "psrl", line_ids["plain"], *common, "--out", str(tmp_path / "b"),
                       "--features", "corrpriors.envs:state_index")
    assert code == 0, err
    [path] = (tmp_path / "b").glob("*/*/metrics.json")
    m = json.loads(path.read_text())
    assert m["config"]["features"] == "corrpriors.envs:state_index"
    curve = m["metrics"]["normalized_return"]["methods"]["pg_sampling"]
    assert np.asarray(curve["per_seed"]).shape == (2, 3)
    np.testing.assert_allclose(np.mean(curve["per_seed"], axis=0), curve["mean"])
    table = m["extra"]["methods"]["pg_sampling"]
    assert table["seeds"] == [0, 1] and len(table["first_reward_episode"]) == 2
    assert len(table["final_regret"]) == 2 and all(r >= 0 for r in table["final_regret"])
    code, _, err = cli(capsys, "sysid", line_ids["plain"], "--transitions", "20", "--n-seeds", "1",
                       "--features", "corrpriors.envs:no_such_function", "--out", str(tmp_path / "c"))
    assert code == 2 and "--features: corrpriors.envs has no function 'no_such_function'" in err
    code, _, err = cli(capsys, "sysid", line_ids["plain"], "--transitions", "20", "--n-seeds", "1",
                       "--features", "nocolon", "--out", str(tmp_path / "c"))
    assert code == 2 and "expected module:function" in err


def repeated_coordinates(env):
    """--features of the test below: every state at (0, 0)."""
    return np.zeros((16, 2))


def enormous_coordinates(env):
    """Distinct integers of order 1e300 (cast to int64 they all became one value)."""
    return np.arange(32).reshape(16, 2) * 1e300


def fifty_coordinates(env):
    """D = 50 integer coordinates: a radius-1 window of 3^50 moves."""
    return np.random.default_rng(0).integers(0, 3, size=(16, 50))


@pytest.mark.parametrize("command", [["sysid", "FrozenLake-v1", "--methods", "pg", "--transitions", "10"],
                                     ["psrl", "FrozenLake-v1", "--methods", "pg_sampling", "--steps", "10"]])
@pytest.mark.parametrize("features, message", [
    ("repeated_coordinates", "need distinct integer state coordinates (of magnitude at most 2**53); "
                             "FrozenLake-v1's are not: states 0 and 1 share the coordinates (0, 0)"),
    ("enormous_coordinates", "FrozenLake-v1's are not: they reach 3.1e+301 in magnitude, beyond 2**53"),
    ("fifty_coordinates", "the relative encoding (pg) has (2 radius + 1)^D = 7.18e+23 moves of D = 50"),
])
def test_features_the_relative_encoding_cannot_use_are_refused_up_front(tmp_path, capsys, command, features,
                                                                         message):
    """Before, a seed started and failed: 'states must have distinct coordinates' also for the
    distinct 1e300 ones, and D = 50 passed the memory check (which capped the categories at S)."""
    code, _, err = cli(capsys, *command, "--n-seeds", "1", "--no-plot", "--out", str(tmp_path / "out"),
                       "--features", f"{__name__}:{features}")
    assert code == 2 and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "out").exists()
