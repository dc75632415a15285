"""Sparse Cholesky + selected inversion: candidates side by side, one run.

The measured operation is what the GMRF prior's CAVI does (K - 1) x 10-30 times per fit:
factorise the C x C precision, take the diagonal of its inverse and its log-determinant.
Matrix: the alpha = 2 Matern-like GMRF precision on a k x k grid (13-point stencil,
``corrpriors.kernels.grid_precision``), C = k^2. Candidates:

* ``supernodal-nd``   supernodal multifrontal Cholesky + selected inversion
  (``linalg.sparse``), nested dissection by BFS level separators;
* ``supernodal-auto`` the library's default: analyses nested dissection and MMD, keeps the
  one with fewer flops (its analysis time is the sum);
* ``supernodal-metis`` the same with METIS nested dissection (optional ``pymetis``);
* ``supernodal-mmd``  the same with SuperLU's multiple minimum degree ordering;
* ``supernodal-rcm``  the same with reverse Cuthill-McKee: a banded (block-tridiagonal) factor;
* ``banded-lapack``   RCM + LAPACK ``dpbtrf`` (``scipy.linalg.cholesky_banded``): factor and
  log-determinant only (LAPACK has no banded selected inversion);
* ``splu``            SuperLU (``scipy.sparse.linalg.splu``, MMD on A + A^T, symmetric mode):
  factor and log-determinant; the inverse diagonal needs C solves, timed on 200 columns
  and extrapolated (``*``);
* ``dense``           LAPACK ``dpotrf`` + ``dpotri`` (diagonal of the inverse) + log-det.

Timings are process CPU seconds (the machine is shared; wall seconds are in the JSON),
single-threaded BLAS for every candidate, best of ``--repeat``; "analyse" (ordering and
symbolic factorisation, done once per pattern) is reported apart from the per-call
"numeric" time. Memory is the tracemalloc peak of one numeric call (numpy allocations,
including LAPACK work arrays) plus the stored factor. The growth exponent between two sizes
is log(t2 / t1) / log(C2 / C1).

    python benchmarks/bench_sparse_linalg.py                  # C = 2,500 ... 100,000
    python benchmarks/bench_sparse_linalg.py --quick          # C = 2,500 and 10,000
    python benchmarks/bench_sparse_linalg.py --graphs         # also kNN and maze graphs

Writes ``benchmarks/out/bench_sparse_linalg.json`` (gitignored).
"""

from __future__ import annotations

import argparse
import json
import time
import tracemalloc
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from _proc import output_name
from scipy.linalg import cholesky_banded, lapack
from scipy.sparse import csgraph
from scipy.sparse.linalg import splu
from threadpoolctl import threadpool_limits

from corrpriors._fileio import atomic_write_bytes
from corrpriors.kernels import graph_precision, grid_adjacency, grid_precision, knn_adjacency
from corrpriors.linalg.sparse import SparseCholesky


def timed(fn, repeat: int) -> tuple[float, float, object]:
    """Best CPU and wall seconds of ``fn()`` over ``repeat`` calls, and its last result."""
    best_cpu = best_wall = np.inf
    out = None
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        out = fn()
        best_cpu = min(best_cpu, time.process_time() - c0)
        best_wall = min(best_wall, time.perf_counter() - w0)
    return best_cpu, best_wall, out


def peak_mb(fn) -> float:
    tracemalloc.start()
    try:
        keep = fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    del keep
    return peak / 2 ** 20


def supernodal(q: sp.csr_array, ordering: str, repeat: int) -> dict:
    c0, w0 = time.process_time(), time.perf_counter()
    chol = SparseCholesky(q, ordering=ordering)
    analyse_cpu, analyse_wall = time.process_time() - c0, time.perf_counter() - w0

    def numeric():
        f = chol.factorize(q)
        return f, f.inverse_diagonal(), f.logdet()

    cpu, wall, (_, diag, logdet) = timed(numeric, repeat)
    return dict(cpu=cpu, wall=wall, analyse_cpu=analyse_cpu, analyse_wall=analyse_wall,
                mb=peak_mb(numeric), logdet=logdet, diag=diag, nnz_factor=chol.nnz_factor,
                flops=chol.flops, supernodes=chol.n_supernodes)


def banded(q: sp.csr_array, repeat: int) -> dict:
    perm = csgraph.reverse_cuthill_mckee(q, symmetric_mode=True)
    qp = sp.csr_array(q[perm][:, perm]).tocoo()
    bw = int(np.max(qp.row - qp.col))
    n = q.shape[0]

    def numeric():
        ab = np.zeros((bw + 1, n))
        low = qp.row >= qp.col
        ab[(qp.row - qp.col)[low], qp.col[low]] = qp.data[low]
        cb = cholesky_banded(ab, lower=True, overwrite_ab=True, check_finite=False)
        return cb, 2 * np.log(cb[0]).sum()

    cpu, wall, (_, logdet) = timed(numeric, repeat)
    return dict(cpu=cpu, wall=wall, mb=peak_mb(numeric), logdet=logdet, bandwidth=bw)


def superlu(q: sp.csr_array, repeat: int) -> dict:
    a = sp.csc_array(q)

    def numeric():
        lu = splu(a, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                  options={"SymmetricMode": True})
        return lu, np.log(np.abs(lu.U.diagonal())).sum()

    cpu, wall, (lu, logdet) = timed(numeric, repeat)
    m = min(200, q.shape[0])
    rhs = np.eye(q.shape[0], m)
    c0 = time.process_time()
    lu.solve(rhs)
    per_col = (time.process_time() - c0) / m
    return dict(cpu=cpu, wall=wall, mb=peak_mb(numeric), logdet=logdet,
                inverse_diag_extrapolated=per_col * q.shape[0])


def dense(q: sp.csr_array, repeat: int) -> dict:
    a = q.toarray()

    def numeric():
        c, info = lapack.dpotrf(a, lower=1, clean=0, overwrite_a=0)
        logdet = 2 * np.log(np.diag(c)).sum()
        inv, info = lapack.dpotri(c, lower=1, overwrite_c=1)
        return np.diag(inv).copy(), logdet

    cpu, wall, (diag, logdet) = timed(numeric, repeat)
    return dict(cpu=cpu, wall=wall, mb=peak_mb(numeric) + a.nbytes / 2 ** 20, logdet=logdet,
                diag=diag)


def rcm_band_entries(q: sp.csr_array) -> int:
    """C x bandwidth after reverse Cuthill-McKee: the banded factor's storage."""
    perm = csgraph.reverse_cuthill_mckee(q, symmetric_mode=True)
    iperm = np.empty_like(perm)
    iperm[perm] = np.arange(perm.size)
    coo = q.tocoo()
    return q.shape[0] * int(np.max(np.abs(iperm[coo.row] - iperm[coo.col])) + 1)


def run_size(q: sp.csr_array, args, has_metis: bool) -> dict:
    n = q.shape[0]
    res = {"supernodal-nd": supernodal(q, "nested_dissection", args.repeat),
           "supernodal-auto": supernodal(q, "auto", args.repeat)}
    if has_metis:
        res["supernodal-metis"] = supernodal(q, "metis", args.repeat)
    banded_ok = rcm_band_entries(q) <= args.max_band_entries  # long-range edges: no band
    if n <= args.generic_max:
        res["supernodal-mmd"] = supernodal(q, "mmd", args.repeat)
        if banded_ok:
            res["supernodal-rcm"] = supernodal(q, "rcm", args.repeat)
    if n <= args.banded_max and banded_ok:
        res["banded-lapack"] = banded(q, args.repeat)
    if n <= args.splu_max:
        res["splu"] = superlu(q, args.repeat)
    if n <= args.dense_max:
        res["dense"] = dense(q, max(1, args.repeat - 1))
    ref = res["supernodal-nd"]
    ref_diag = ref["diag"]
    for r in res.values():
        r["logdet_rel_diff"] = abs(r["logdet"] - ref["logdet"]) / abs(ref["logdet"])
        if "diag" in r:
            r["diag_rel_diff"] = float(np.max(np.abs(r.pop("diag") - ref_diag) / ref_diag))
    return res


def print_table(title: str, rows: dict) -> None:
    print(f"\n{title}")
    print(f"{'C':>8} {'candidate':>17} {'numeric cpu s':>13} {'x nd':>7} {'analyse s':>9} "
          f"{'peak MB':>8} {'factor nnz':>11} {'note':>s}")
    for n, res in rows.items():
        base = res["supernodal-nd"]["cpu"]
        for name, r in res.items():
            note = []
            if "bandwidth" in r:
                note.append(f"bandwidth {r['bandwidth']}; no inverse diagonal")
            if "inverse_diag_extrapolated" in r:
                note.append(f"+ inverse diagonal {r['inverse_diag_extrapolated']:.1f} s*")
            if "diag_rel_diff" in r and name != "supernodal-nd":
                note.append(f"diag rel diff {r['diag_rel_diff']:.1e}")
            print(f"{n:>8} {name:>17} {r['cpu']:>13.4f} {r['cpu'] / base:>7.1f} "
                  f"{r.get('analyse_cpu', float('nan')):>9.2f} {r['mb']:>8.0f} "
                  f"{r.get('nnz_factor', 0):>11} {'; '.join(note)}")


def print_growth(rows: dict) -> None:
    sizes = sorted(rows)
    names = sorted({k for r in rows.values() for k in r})
    print("\ngrowth exponents log(t2/t1)/log(C2/C1) of the numeric CPU time:")
    for name in names:
        parts = []
        for a, b in zip(sizes, sizes[1:]):
            if name in rows[a] and name in rows[b]:
                ratio = rows[b][name]["cpu"] / rows[a][name]["cpu"]
                parts.append(f"{a}->{b}: x{ratio:.1f} (C^{np.log(ratio) / np.log(b / a):.2f})")
        if parts:
            print(f"  {name:>17}: " + ", ".join(parts))


def maze_graph(side: int, rng: np.random.Generator) -> sp.csr_array:
    """Grid-world adjacency with 20% of the edges walled and 1% random teleports."""
    adj = sp.triu(grid_adjacency((side, side)), format="coo")
    keep = rng.random(adj.nnz) > 0.2
    n = side * side
    tele = rng.integers(0, n, size=(n // 100, 2))
    rows = np.concatenate([adj.row[keep], tele[:, 0]])
    cols = np.concatenate([adj.col[keep], tele[:, 1]])
    a = sp.csr_array((np.ones(rows.size), (rows, cols)), shape=(n, n))
    return sp.csr_array(a.maximum(a.T))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[2500, 10000, 40000, 100000])
    ap.add_argument("--quick", action="store_true", help="C = 2,500 and 10,000 only")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dense-max", type=int, default=5000)
    ap.add_argument("--banded-max", type=int, default=40000)
    ap.add_argument("--splu-max", type=int, default=100000)
    ap.add_argument("--generic-max", type=int, default=100000,
                    help="largest C for the mmd / rcm supernodal variants")
    ap.add_argument("--max-band-entries", type=float, default=3e7,
                    help="skip the RCM/banded candidates when C x bandwidth exceeds this")
    ap.add_argument("--graphs", action="store_true", help="also kNN and maze graphs")
    ap.add_argument("--no-grid", action="store_true", help="skip the grid sizes")
    args = ap.parse_args()
    sizes = [2500, 10000] if args.quick else args.sizes
    try:
        import pymetis  # noqa: F401
        has_metis = True
    except ImportError:
        has_metis = False
    record: dict = {"grid": {}, "graphs": {}}
    with threadpool_limits(1):
        for c in ([] if args.no_grid else sizes):
            k = int(round(np.sqrt(c)))
            q = grid_precision((k, k), kappa=0.3, alpha=2, normalize=False)
            record["grid"][k * k] = run_size(q, args, has_metis)
            print(f"done C = {k * k}", flush=True)
        if record["grid"]:
            print_table("2-D grid, alpha = 2 (13-point stencil): factorise + "
                        "inverse_diagonal + logdet", record["grid"])
            print_growth(record["grid"])
        if args.graphs:
            rng = np.random.default_rng(0)
            for c in (10000, 40000):
                knn = knn_adjacency(rng.random((c, 2)), 8)
                q = graph_precision(knn, kappa=20.0, alpha=2, normalize=False)
                record["graphs"][f"knn2d-k8 {c}"] = run_size(q, args, has_metis)
                side = int(np.sqrt(c))
                q = graph_precision(maze_graph(side, rng), kappa=0.3, alpha=2,
                                    normalize=False)
                record["graphs"][f"maze {side * side}"] = run_size(q, args, has_metis)
            print_table("general graphs (alpha = 2)", record["graphs"])
    out = Path(__file__).parent / "out" / output_name("bench_sparse_linalg", args, ap)
    atomic_write_bytes(out, json.dumps(record, indent=1, default=float).encode())


if __name__ == "__main__":
    main()
