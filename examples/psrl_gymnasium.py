"""PSRL with the correlated prior on any discrete Gymnasium environment.

Part 1: FrozenLake 8x8 (slippery) in a few lines of public API. Part 2: your own environment --
anything with Discrete observation and action spaces; supply ``features`` (a vector per state) so
the prior knows which states are alike. Run::

    python examples/psrl_gymnasium.py        # about a minute
"""

import gymnasium
import numpy as np

from corrpriors.applications import CorrelatedTransitionModel, PSRLAgent, run_psrl
from corrpriors.envs import env_info, from_gymnasium

# --- 1. FrozenLake 8x8 -------------------------------------------------------------------------
env = gymnasium.make("FrozenLake-v1", map_name="8x8", is_slippery=True)
mdp = from_gymnasium(env)                      # exact model: only for scoring, and the rewards
belief = CorrelatedTransitionModel.for_mdp(mdp)   # (row, col) coordinates, relative moves
agent = PSRLAgent(belief, mdp.rewards, discount=0.99, replan_every=50)
out = run_psrl(env, agent, 1000, rng=0, true_mdp=mdp)
for step, score in zip(out["steps"][::4], out["normalized_return"][::4]):
    print(f"step {step:5d}: normalized return {score:6.3f}")   # 0 = random policy, 1 = optimal


# --- 2. Your own environment: supply features ----------------------------------------------------
class Corridor(gymnasium.Env):
    """A slippery corridor of 12 cells; reward 1 (and the end) at the right end."""

    observation_space = gymnasium.spaces.Discrete(12)
    action_space = gymnasium.spaces.Discrete(2)      # 0 = left, 1 = right

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.s = 0
        return self.s, {}

    def step(self, action):
        move = 1 if action == 1 else -1
        if self.np_random.random() < 0.2:            # slips the other way
            move = -move
        self.s = int(np.clip(self.s + move, 0, 11))
        done = self.s == 11
        return self.s, float(done), done, False, {}


corridor = gymnasium.wrappers.TimeLimit(Corridor(), max_episode_steps=50)
info = env_info(corridor, features=lambda s: [s])    # the cell index as a 1-D coordinate
belief = CorrelatedTransitionModel.for_mdp(info)     # no model needed to learn ...
agent = PSRLAgent(belief, None, discount=0.95, learn_rewards=True, replan_every="episode")
out = run_psrl(corridor, agent, 2000, rng=1)         # ... and to act (no true model: no scores)
returns = out["episode_returns"]
print(f"corridor: goal reached in {returns[:10].mean():.0%} of the first 10 episodes, "
      f"{returns[-10:].mean():.0%} of the last 10")
