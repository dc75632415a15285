"""DeepSea: episodes to learn against the size N, PSRL with the correlated and Dirichlet beliefs.

bsuite's deep-exploration benchmark (``corrpriors/DeepSea-v0``, :mod:`corrpriors.envs.deepsea`):
an N x N grid, one step down per step, "right" at a random action index in every cell, a small
move cost, the treasure at the bottom right. The agent is PSRL with one posterior draw per
episode, replanning after every episode, rewards known R(s, a) or learned (``--learn-rewards``,
Normal-Gamma per pair), discount 0.99, on the environment's own reset/step loop.

"Episodes to learn" is bsuite's criterion (``bsuite/experiments/deep_sea/analysis.py``): the first
episode at which the running share of *bad* episodes -- episodes in which the agent, on the
diagonal (row = column, the only cells from which the treasure is reachable), took the action
that does not move right -- falls below 0.8; in the stochastic variant (``--stochastic``) only
from episode 100 on, as bsuite's ``deep_sea_stochastic`` analysis does. A uniformly random policy
needs about 2^N episodes.
Runs stop there or at the cap (``--cap``: episodes, per N), counted as not learned.

Beliefs (``--methods``):

``pg``
    :meth:`CorrelatedTransitionModel.for_mdp` at its defaults (the per-(state, action) layer on;
    the edges clipped, as the DeepSea MDP declares: ``mdp.boundary == "clip"``).
``pg_stay``
    The same with the grid default edges (``boundary="stay"``): ``pg`` before round 11.
``pg_nosupport``
    The same without the sparse-support hypothesis (the default before it).
``pg_plain``
    The same without the layer (``concentration=None``): the paper's model, the default before.
``pg_no_distinct``, ... see :data:`BELIEFS` for the candidates measured side by side.
``dirichlet_sparse``
    Independent Dirichlet rows, alpha = 1e-3.

Two ways to declare the same environment (``--walls``): every cell of the grid a state
(``full``), or only the cells an episode can enter (``walls``: the others are walls).

Usage::

    python benchmarks/deepsea_study.py --sizes 10,20,30 --walls full,walls --seeds 0-2 \\
        --methods dirichlet_sparse,pg,pg_plain --out benchmarks/out/deepsea.jsonl
    python benchmarks/deepsea_study.py --out benchmarks/out/deepsea.jsonl --plot benchmarks/out/deepsea.png

One JSON line per (N, declaration, method, seed, stream, rewards, variant, cap) is appended to
``--out``, with the code that produced it (``code``: the git commit, when there is one, and a
hash of this script and of the ``corrpriors`` package imported). ``--out`` must be a new file
unless ``--resume`` is given: a resumed run skips the lines already there with the same
settings (cap included) and appends the others; if the file then holds lines of more than one
code version, the table says so. CPU seconds are this process's (``time.process_time``).

Agent random streams (``--streams``, default ``0``): the episodes a belief needs on one mapping
are random -- on one N = 10 mapping with walls the sparse Dirichlet took 11 to 242 episodes over
four streams -- so one run per mapping compares two random numbers. ``--streams 0-3`` runs every
(mapping, method) with four agent random streams, stream ``k`` drawing from
``numpy.random.default_rng([seed, 7 + 1000 k])`` (stream 0 is the single run of earlier
studies), and the table then shows every mapping's median over its streams, the worst ratio of
two methods' medians over the mappings, and how many paired runs (same mapping and stream) are
over twice the reference's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from corrpriors.applications import PSRLAgent
from corrpriors.applications.transitions import CorrelatedTransitionModel, DirichletTransitionModel
from corrpriors.envs import DeepSeaEnv
from corrpriors.exceptions import ConvergenceWarning, JitterWarning
from corrpriors.runner._run import parse_seeds

#: Running share of bad episodes below which the agent has learned (bsuite's ``thresh``).
THRESHOLD = 0.8

#: The stochastic variant's criterion counts only from this episode on (bsuite's
#: ``deep_sea_stochastic/analysis.py``): "right" there fails with probability 1/N, and the agent
#: then leaves the diagonal without a bad action, so a few early episodes can be "good" by luck.
MIN_EPISODES_STOCHASTIC = 100


def _pg(**kw: Any) -> Callable[[Any], Any]:
    return lambda mdp: CorrelatedTransitionModel.for_mdp(mdp, **kw)


#: The beliefs measured, by name.
BELIEFS: dict[str, Callable[[Any], Any]] = {
    "dirichlet_sparse": lambda mdp: DirichletTransitionModel(mdp.n_states, mdp.n_actions, 1e-3),
    "pg": _pg(),
    "pg_plain": _pg(concentration=None, contamination_prior=None),
    "pg_no_distinct": _pg(distinct_prior=None),
    "pg_no_contamination": _pg(contamination_prior=None),
    "pg_concentration_only": _pg(contamination_prior=None, distinct_prior=None),
    "pg_nosupport": _pg(support_prior=None),
    "pg_support": _pg(support_prior=0.5),
    "pg_stay": _pg(boundary="stay"),   # the grid default DeepSea had before round 11
}


def run_one(size: int, walls: bool, method: str, seed: int, cap: int, learn_rewards: bool,
            deterministic: bool = True, stream: int = 0) -> dict[str, Any]:
    """One PSRL run on DeepSea until bsuite's learning criterion or ``cap`` episodes.

    ``seed`` is the mapping seed; ``stream`` picks the agent's random stream (module docstring).

    Returns
    -------
    dict
        ``learned`` (episodes, None if not within ``cap``), ``first_treasure`` (the first
        episode that collected the treasure, None if never), ``episodes`` run, ``cpu_seconds``.
    """
    env = DeepSeaEnv(size, mapping_seed=seed, walls=walls, deterministic=deterministic)
    mdp = env.mdp
    belief = BELIEFS[method](mdp)
    agent = PSRLAgent(belief, None if learn_rewards else mdp.rewards, 0.99, n_samples=1,
                      replan_every="episode", learn_rewards=learn_rewards, terminal=mdp.terminal)
    rng = np.random.default_rng([seed, 7 + 1000 * stream])
    cells = np.asarray(mdp.cells)
    diagonal = cells[:, 0] == cells[:, 1]
    right = env.right_action[np.minimum(cells[:, 0], size - 1), cells[:, 1]]
    treasure = int(np.flatnonzero((cells == [size - 1, size - 1]).all(1))[0])
    cpu = time.process_time()
    agent.plan(rng=rng)
    env.reset(seed=int(rng.integers(2**32)))
    bad = 0
    learned = first = None
    episode = 0
    for episode in range(1, cap + 1):
        s = int(env.reset()[0])
        is_bad = False
        while True:
            a = agent.act(s)
            is_bad |= bool(diagonal[s] and a != right[s])
            if s == treasure and a == right[s] and first is None:
                first = episode
            s2, r, term, trunc, _ = env.step(a)
            agent.observe(s, a, int(s2), rng=rng, reward=float(r), terminated=bool(term),
                          truncated=bool(trunc))
            s = int(s2)
            if term or trunc:
                break
        bad += is_bad
        if bad / episode < THRESHOLD and (deterministic or episode >= MIN_EPISODES_STOCHASTIC):
            learned = episode
            break
    return {"learned": learned, "first_treasure": first, "episodes": episode,
            "cpu_seconds": time.process_time() - cpu}


def _parse_lists(args: argparse.Namespace) -> None:
    """Parse ``--sizes``, ``--seeds``, ``--streams`` (the runner's parser: distinct non-negative
    integers or ranges) and ``--cap`` (one positive cap, or one per size) into lists on ``args``.
    """
    args.size_list = parse_seeds(args.sizes, name="--sizes")
    args.seed_list = parse_seeds(args.seeds, name="--seeds")
    args.stream_list = parse_seeds(args.streams, name="--streams")
    try:
        args.cap_list = [int(v) for v in args.cap.split(",")]
    except ValueError:
        raise ValueError(f"--cap: expected a positive integer or one per size, got {args.cap!r}") from None
    if min(args.cap_list) < 1 or len(args.cap_list) not in (1, len(args.size_list)):
        raise ValueError(f"--cap: expected a positive integer or one per size ({len(args.size_list)}), "
                         f"got {args.cap!r}")


def code_version() -> dict[str, Any]:
    """The code a record comes from: the git commit of this checkout (None outside git, with
    ``dirty`` when tracked files differ from it) and ``hash``, the SHA-256 (16 hex digits) of this
    script and of every ``.py`` file of the ``corrpriors`` package actually imported."""
    import corrpriors

    h = hashlib.sha256()
    files = [pathlib.Path(__file__).resolve()]
    files += sorted(pathlib.Path(corrpriors.__file__).resolve().parent.rglob("*.py"))
    for f in files:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    commit: str | None = None
    dirty = False
    try:
        here = pathlib.Path(__file__).resolve().parent
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                                    capture_output=True, text=True, check=True).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        pass
    return {"commit": commit, "dirty": dirty, "hash": h.hexdigest()[:16]}


def _key(r: dict[str, Any]) -> tuple:
    """Every setting that changes a record (the cap included)."""
    return (r["size"], r["walls"], r["method"], r["seed"], r["learn_rewards"],
            r.get("deterministic", True), r.get("stream", 0), r["cap"])


def _done(path: pathlib.Path) -> set[tuple]:
    if not path.exists():
        return set()
    return {_key(json.loads(line)) for line in path.read_text().splitlines() if line.strip()}


def study(args: argparse.Namespace) -> None:
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists() and out.stat().st_size and not args.resume:
        raise FileExistsError(f"--out: {out} already holds records; give a new --out, or --resume to "
                              "add the missing runs to it (its records are then reused)")
    args.code = code_version()
    done = _done(out)
    caps = dict(zip(args.size_list, args.cap_list))
    for size in args.size_list:
        for walls in [w == "walls" for w in args.walls.split(",")]:
            for seed in args.seed_list:
                for stream in args.stream_list:
                    for method in args.methods.split(","):
                        _run_missing(args, out, done, size, walls, seed, stream, method, caps)


def _run_missing(args: argparse.Namespace, out: pathlib.Path, done: set[tuple], size: int,
                 walls: bool, seed: int, stream: int, method: str, caps: dict[int, int]) -> None:
    """Run one (N, declaration, mapping, stream, method) unless ``--out`` has it; append it."""
    cap = caps.get(size, args.cap_list[0])
    key = (size, walls, method, seed, args.learn_rewards, not args.stochastic, stream, cap)
    if key in done:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", JitterWarning)
        r = run_one(size, walls, method, seed, cap, args.learn_rewards,
                    deterministic=not args.stochastic, stream=stream)
    rec = {"size": size, "walls": walls, "method": method, "seed": seed, "stream": stream,
           "learn_rewards": args.learn_rewards, "deterministic": not args.stochastic,
           "cap": cap, **r, "code": args.code}
    print(json.dumps(rec), flush=True)
    with open(out, "a") as f:   # one line per run: an interrupted study resumes
        f.write(json.dumps(rec) + "\n")
        f.flush()
        os.fsync(f.fileno())


#: The belief the others are compared with in :func:`table`.
REFERENCE = "dirichlet_sparse"


def _median(runs: list[tuple[Any, int]]) -> float:
    """Median episodes over streams, a run not learned by its cap counting as infinite."""
    return float(np.median([np.inf if v is None else v for v, _ in runs]))


def _cell(runs: list[tuple[Any, int]]) -> str:
    m = _median(runs)
    text = f">{runs[0][1]}" if np.isinf(m) else f"{m:g}"
    return text if len(runs) == 1 else f"{text}/{len(runs)}"


def table(path: pathlib.Path) -> None:
    """Print episodes to learn per (declaration, rewards, N, method): every mapping seed (the
    median over its streams, "/k" for k streams) and, against :data:`REFERENCE`, the worst ratio
    of the mappings' medians and the paired runs (same mapping and stream) over twice it.
    """
    rows: dict[tuple, dict[int, dict[int, tuple[Any, int]]]] = {}
    cpu: dict[tuple, list[float]] = {}
    versions: dict[str, int] = {}
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        code = r.get("code") or {}
        version = f"{code.get('commit') or 'no commit'}{' (dirty)' if code.get('dirty') else ''} " \
                  f"hash {code.get('hash', 'unrecorded')}"
        versions[version] = versions.get(version, 0) + 1
        key = ("walls" if r["walls"] else "full", "learned R" if r["learn_rewards"] else "known R",
               "det" if r.get("deterministic", True) else "stoch", r["size"], r["cap"], r["method"])
        rows.setdefault(key, {}).setdefault(r["seed"], {})[r.get("stream", 0)] = \
            (r["learned"], r["cap"])
        cpu.setdefault(key, []).append(r["cpu_seconds"])
    if len(versions) > 1:
        print(f"note: {path} mixes records of {len(versions)} code versions (resumed runs): "
              + "; ".join(f"{n} from {v}" for v, n in sorted(versions.items())))
    for key in sorted(rows):
        cells = [_cell(list(runs.values())) for _, runs in sorted(rows[key].items())]
        print(f"{key[0]:5s} {key[1]:9s} {key[2]:5s} N={key[3]:3d} cap {key[4]:<6d} {key[5]:22s} "
              f"{' '.join(cells):40s} CPU {np.mean(cpu[key]):7.1f} s/run")
        ref = rows.get(key[:5] + (REFERENCE,))
        if ref is not None and key[5] != REFERENCE:
            _compare(rows[key], ref)


def _compare(runs: dict[int, dict[int, tuple[Any, int]]],
             ref: dict[int, dict[int, tuple[Any, int]]]) -> None:
    """One line: this method against the reference on the mappings and runs both have."""
    seeds = sorted(set(runs) & set(ref))
    if not seeds:
        return
    with np.errstate(invalid="ignore", divide="ignore"):
        ratios = [_median(list(runs[s].values())) / _median(list(ref[s].values())) for s in seeds]
    pairs = [(runs[s][k][0], ref[s][k][0]) for s in seeds for k in set(runs[s]) & set(ref[s])]
    over = sum(1 for a, b in pairs if b is not None and (a is None or a > 2 * b))
    print(f"{'':30s} vs {REFERENCE}: worst ratio of mapping medians {max(ratios):.2f} "
          f"({len(seeds)} mappings); paired runs over 2x: {over} of {len(pairs)}")


def plot(path: pathlib.Path, figure: pathlib.Path) -> None:
    """Episodes to learn against N (log-log), one panel per declaration, with the 2^N line."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [json.loads(line) for line in path.read_text().splitlines()]
    runs = [r for r in runs if not r["learn_rewards"] and r.get("deterministic", True)]
    panels = sorted({r["walls"] for r in runs})
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2), squeeze=False)
    methods = sorted({r["method"] for r in runs})
    for ax, walls in zip(axes[0], panels):
        for k, method in enumerate(methods):
            sel = [r for r in runs if r["walls"] == walls and r["method"] == method]
            if not sel:
                continue
            x = np.array([r["size"] for r in sel], float) * (1 + 0.03 * (k - len(methods) / 2))
            y = np.array([r["learned"] if r["learned"] is not None else r["cap"] for r in sel], float)
            ok = np.array([r["learned"] is not None for r in sel])
            line = ax.scatter(x[ok], y[ok], s=22, label=method)
            ax.scatter(x[~ok], y[~ok], s=40, marker="x", color=line.get_facecolor()[0])
        sizes = np.array(sorted({r["size"] for r in runs}), float)
        grid = np.linspace(sizes.min() * 0.9, sizes.max() * 1.1, 50)
        ax.plot(grid, 2.0 ** grid, "k--", alpha=0.4, label="2^N (dithering)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        top = max(r["cap"] for r in runs) * 2
        ax.set_ylim(1, top)
        ax.set_xlabel("DeepSea size N (log scale)")
        ax.set_ylabel("episodes until < 80% bad episodes (log scale)")
        ax.set_title("only the reachable cells (walls)" if walls else "every cell a state")
        ax.legend(fontsize="small", title="x: not learned by the cap")
    fig.tight_layout()
    fig.savefig(figure, dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,20,30")
    parser.add_argument("--walls", default="full,walls")
    parser.add_argument("--seeds", default="0-2", help="mapping seeds, e.g. 0-4 or 0,3")
    parser.add_argument("--methods", default="dirichlet_sparse,pg,pg_plain")
    parser.add_argument("--streams", default="0",
                        help="agent random streams per mapping, e.g. 0-3 (module docstring)")
    parser.add_argument("--cap", default="2000", help="episode cap, one or one per size")
    parser.add_argument("--learn-rewards", action="store_true")
    parser.add_argument("--stochastic", action="store_true", help="bsuite's stochastic variant")
    parser.add_argument("--out", default="benchmarks/out/deepsea.jsonl",
                        help="JSON lines file of the runs; must be new unless --resume")
    parser.add_argument("--resume", action="store_true",
                        help="add the missing runs to an existing --out (its matching records are reused)")
    parser.add_argument("--table", action="store_true", help="print the table of --out and stop")
    parser.add_argument("--plot", default=None, metavar="PNG", help="plot --out to PNG and stop")
    args = parser.parse_args(argv)
    unknown = [m for m in args.methods.split(",") if m not in BELIEFS]
    if unknown:
        parser.error(f"--methods: unknown {unknown}; expected some of {sorted(BELIEFS)}")
    try:
        _parse_lists(args)
    except ValueError as exc:
        parser.error(str(exc))
    if args.table:
        table(pathlib.Path(args.out))
        return 0
    if args.plot:
        plot(pathlib.Path(args.out), pathlib.Path(args.plot))
        return 0
    try:
        study(args)
    except FileExistsError as exc:
        parser.error(str(exc))
    table(pathlib.Path(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
