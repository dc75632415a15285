"""
PSRL on any discrete Gymnasium environment
==========================================

Part 1 runs posterior-sampling RL with the correlated prior on Gymnasium's FrozenLake 8 x 8
(slippery) in a few lines of public API: :func:`~corrpriors.envs.from_gymnasium` reads the
exact model (used here only for the known rewards :math:`r(s, a, s')` and terminal states,
and to score the policies), :meth:`~corrpriors.applications.CorrelatedTransitionModel.for_mdp` builds the belief
over the transitions from the cells' (row, col) coordinates (moves encoded as displacements,
the prior scale chosen by the collapsed bound), and :func:`~corrpriors.applications.run_psrl`
runs the real ``reset``/``step`` loop. Holes and the goal end episodes; the agent knows them
from the table, like the rewards (without ``terminal=`` it learns each when it first gets there),
and the restarts never enter its belief.

Part 2 is your own environment: anything with Discrete observation and action spaces. Supply
``features`` (a vector per state) so that the prior knows which states are alike; no model is
needed to learn and act, and here the rewards are learned too.
"""

import gymnasium
import matplotlib.pyplot as plt
import numpy as np

from corrpriors.applications import CorrelatedTransitionModel, PSRLAgent, run_psrl
from corrpriors.envs import env_info, from_gymnasium
from corrpriors.plotting import method_label, method_style

# %%
# FrozenLake 8 x 8
# ----------------
env = gymnasium.make("FrozenLake-v1", map_name="8x8", is_slippery=True)
mdp = from_gymnasium(env)                         # exact model: rewards, terminals, to score
belief = CorrelatedTransitionModel.for_mdp(mdp)   # (row, col) coordinates, relative moves
agent = PSRLAgent(belief, mdp.rewards, discount=0.99, replan_every=50, terminal=mdp.terminal)
out = run_psrl(env, agent, 1000, rng=0, true_mdp=mdp)

fig, ax = plt.subplots(figsize=(6, 3.2))
ax.plot(out["steps"], out["normalized_return"], label=method_label("pg"), **method_style("pg"))
ax.set(xlabel="steps", ylabel="normalized return\n(0 = random, 1 = optimal)",
       title="PSRL on FrozenLake 8x8, slippery (one seed)")
ax.axhline(1.0, color="k", lw=0.8, ls="--", label="optimal policy")
ax.legend(fontsize="small", loc="lower right")
fig.tight_layout()
print(f"normalized return after {out['steps'][-1]} steps: {out['normalized_return'][-1]:.3f}")


# %%
# Your own environment: supply features
# -------------------------------------
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
