"""Benchmark: building, planning and evaluating MDPs of 10^2-10^5 states, dense vs sparse tables (issue 25).

Environments (each size in a fresh process, one BLAS thread):

* ``grid``   -- ``goal_gridworld((n, n), n_rewards=10, rng=0)``: cardinal moves (0.7 intended,
  0.1 each other), gamma = 0.9, about 4 non-zeros per row.
* ``tunnel`` -- ``tunnel_world((n, n), window=2)``: Gaussian moves truncated to a 5 x 5 window,
  gamma = 0.9, up to 25 non-zeros per row.
* ``lake``   -- ``from_gymnasium`` of a slippery ``FrozenLake-v1`` with a random n x n map
  (``generate_random_map(n, p=0.9, seed=1)``), gamma = 0.99, 1-3 non-zeros per row, terminal holes.

Per run: ``build`` (the builder, or ``from_gymnasium``; Gymnasium's own ``make`` is not
counted), ``VI`` (``value_iteration`` to the default tol = 1e-10), ``PE`` (``policy_evaluation``
of VI's greedy policy; sparse: direct sparse LU up to 5,000 states, iterative with a certified
1e-10 bound above), ``PI`` (``policy_iteration`` from scratch) -- CPU seconds -- and the peak
resident memory (VmHWM) of the process, also above its baseline after the imports. Where the
dense (S, A, S) table fits (``--dense-max`` states) the dense and the sparse run alternate at
each size, and the table reports their ratio and the largest difference of the values.

Run from the repository root::

    python benchmarks/bench_mdp_scale.py            # n = 25, 50, 100, 177, 316 (a few minutes)
    python benchmarks/bench_mdp_scale.py --quick    # n = 10, 20, 40 (seconds)
    python benchmarks/bench_mdp_scale.py --envs grid --sides 316

Writes ``benchmarks/out/bench_mdp_scale.json`` and ``.md``; a run with other settings writes
files whose names list them (``bench_mdp_scale-quick-envsgrid.json``), so it never overwrites
another configuration's results.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _proc import output_name, status_mb

from corrpriors._fileio import atomic_write_bytes

ROOT = Path(__file__).resolve().parents[1]
ENVS = ("grid", "tunnel", "lake")


def _cpu(fn):
    c0 = time.process_time()
    out = fn()
    return out, time.process_time() - c0


def build(env: str, n: int, sparse: bool):
    from corrpriors.envs import from_gymnasium, goal_gridworld, tunnel_world

    if env == "grid":
        return lambda: goal_gridworld((n, n), n_rewards=10, rng=0, sparse=sparse)
    if env == "tunnel":
        return lambda: tunnel_world((n, n), window=2, sparse=sparse)
    import gymnasium
    from gymnasium.envs.toy_text.frozen_lake import generate_random_map

    lake = gymnasium.make("FrozenLake-v1", desc=generate_random_map(size=n, p=0.9, seed=1), is_slippery=True)
    return lambda: from_gymnasium(lake, sparse=sparse)


def child(env: str, n: int, sparse: bool, out: str) -> None:
    """One build / plan / evaluate run in this fresh process; writes values to ``out`` (npz)."""
    from corrpriors.mdp import policy_evaluation, policy_iteration, value_iteration

    make = build(env, n, sparse)
    base = status_mb("VmRSS")
    mdp, t_build = _cpu(make)
    vi, t_vi = _cpu(lambda: value_iteration(mdp))
    pe, t_pe = _cpu(lambda: policy_evaluation(mdp, vi.policy))
    pi, t_pi = _cpu(lambda: policy_iteration(mdp))
    peak = status_mb("VmHWM")
    np.savez(out, vi=vi.values, pe=pe, pi=pi.values)
    nnz = mdp.transitions.nnz if mdp.is_sparse else int(np.count_nonzero(mdp.transitions))
    print(json.dumps({"env": env, "side": n, "S": mdp.n_states, "A": mdp.n_actions,
                      "form": "sparse" if sparse else "dense", "nnz": nnz,
                      "dense_table_mb": 8 * mdp.n_states ** 2 * mdp.n_actions / 2**20,
                      "build_cpu": t_build, "vi_cpu": t_vi, "vi_sweeps": vi.n_iter, "pe_cpu": t_pe,
                      "pi_cpu": t_pi, "pi_iterations": pi.n_iter, "peak_mb": peak,
                      "peak_above_baseline_mb": peak - base}))


def run(env: str, n: int, sparse: bool, tmp: Path) -> tuple[dict, dict]:
    out = tmp / f"{env}-{n}-{'s' if sparse else 'd'}.npz"
    cmd = [sys.executable, __file__, "--child", env, str(n), "sparse" if sparse else "dense", str(out)]
    environ = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    res = subprocess.run(cmd, capture_output=True, text=True, env=environ, cwd=ROOT)
    if res.returncode:
        raise RuntimeError(f"{env} {n} {'sparse' if sparse else 'dense'} failed:\n{res.stderr[-2000:]}")
    row = json.loads(res.stdout.strip().splitlines()[-1])
    with np.load(out) as f:
        values = {k: f[k] for k in f.files}
    out.unlink()
    return row, values


def exponents(rows: list[dict]) -> None:
    """Growth exponents d log(cost) / d log(S) between consecutive sizes (sparse rows)."""
    for a, b in zip(rows, rows[1:]):
        ratio = np.log(b["S"] / a["S"])
        for key in ("build_cpu", "vi_cpu", "pe_cpu", "pi_cpu", "peak_above_baseline_mb"):
            if a[key] > 0.02 and b[key] > 0.02:
                b[f"exponent_{key}"] = float(np.log(b[key] / a[key]) / ratio)


def table(rows: list[dict], pairs: list[dict]) -> str:
    head = ("| env | n x n | S | form | nnz | dense table | build s | VI s (sweeps) | PE s | PI s (its) "
            "| peak MB (above base) |")
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        lines.append(f"| {r['env']} | {r['side']}² | {r['S']:,} | {r['form']} | {r['nnz']:,} | "
                     f"{r['dense_table_mb']:,.0f} MB | {r['build_cpu']:.2f} | {r['vi_cpu']:.2f} "
                     f"({r['vi_sweeps']}) | {r['pe_cpu']:.2f} | {r['pi_cpu']:.2f} ({r['pi_iterations']}) | "
                     f"{r['peak_mb']:.0f} ({r['peak_above_baseline_mb']:.0f}) |")
    if pairs:
        lines += ["", "| env | S | dense / sparse: build | VI | PE | PI | peak above base "
                      "| max abs diff VI / PE / PI values |", "|" + "---|" * 8]
        for p in pairs:
            lines.append(f"| {p['env']} | {p['S']:,} | {p['build']:.1f}x | {p['vi']:.1f}x | {p['pe']:.1f}x | "
                         f"{p['pi']:.1f}x | {p['peak']:.1f}x | {p['d_vi']:.1e} / {p['d_pe']:.1e} / "
                         f"{p['d_pi']:.1e} |")
    growth = [r for r in rows if r["form"] == "sparse" and "exponent_vi_cpu" in r]
    if growth:
        lines += ["", "| env | S from -> to | exponent: build | VI | PE | PI | peak above base |",
                  "|" + "---|" * 7]
        prev = {}
        for r in rows:
            if r["form"] != "sparse":
                continue
            if "exponent_vi_cpu" in r:
                def e(k, r=r):
                    v = r.get(f"exponent_{k}")
                    return "-" if v is None else f"{v:.2f}"
                lines.append(f"| {r['env']} | {prev[r['env']]:,} -> {r['S']:,} | {e('build_cpu')} | "
                             f"{e('vi_cpu')} | {e('pe_cpu')} | {e('pi_cpu')} | {e('peak_above_baseline_mb')} |")
            prev[r["env"]] = r["S"]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="n = 10, 20, 40")
    ap.add_argument("--envs", default=",".join(ENVS), help="comma-separated subset of grid,tunnel,lake")
    ap.add_argument("--sides", default=None, help="comma-separated grid sides (default 25,50,100,177,316)")
    ap.add_argument("--dense-max", type=int, default=2500, help="largest S also run with a dense table")
    args = ap.parse_args()
    if args.child:
        env, n, form, out = args.child
        child(env, int(n), form == "sparse", out)
        return
    sides = [10, 20, 40] if args.quick else [25, 50, 100, 177, 316]
    if args.sides:
        sides = [int(v) for v in args.sides.split(",")]
    envs = [e for e in args.envs.split(",") if e]
    if set(envs) - set(ENVS):
        raise SystemExit(f"--envs: expected names from {', '.join(ENVS)}, got {args.envs!r}")
    out_dir = ROOT / "benchmarks" / "out"
    stem = output_name("bench_mdp_scale", args, ap, suffix="")
    with tempfile.TemporaryDirectory(prefix="bench_mdp_scale.") as tmp:  # the children's values,
        rows, pairs = _measure(envs, sides, args.dense_max, Path(tmp))  # private to this run
    text = table(rows, pairs)
    print(text)
    atomic_write_bytes(out_dir / f"{stem}.json", json.dumps({"rows": rows, "pairs": pairs}, indent=1).encode())
    atomic_write_bytes(out_dir / f"{stem}.md", (text + "\n").encode())


def _measure(envs: list[str], sides: list[int], dense_max: int, tmp: Path) -> tuple[list, list]:
    rows: list[dict] = []
    pairs: list[dict] = []
    for env in envs:
        env_rows = []
        for n in sides:
            if n * n <= dense_max:        # dense and sparse alternate, same size
                d_row, d_val = run(env, n, False, tmp)
                s_row, s_val = run(env, n, True, tmp)
                rows += [d_row]
                pairs.append({"env": env, "S": s_row["S"],
                              **{k: d_row[f"{k}_cpu"] / max(s_row[f"{k}_cpu"], 1e-9)
                                 for k in ("build", "vi", "pe", "pi")},
                              "peak": d_row["peak_above_baseline_mb"] / max(s_row["peak_above_baseline_mb"], 1.0),
                              **{f"d_{k}": float(np.abs(d_val[k] - s_val[k]).max()) for k in ("vi", "pe", "pi")}})
            else:
                s_row, _ = run(env, n, True, tmp)
            env_rows.append(s_row)
            rows.append(s_row)
            print(json.dumps(s_row), flush=True)
        exponents(env_rows)
    return rows, pairs


if __name__ == "__main__":
    main()
