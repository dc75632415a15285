"""Run several fits' steps at once: the jobs of many generators on threads, processes or Dask.

A *step generator* (:meth:`corrpriors.core.selection.ScaleSearch.climb`, an action's refit in
:class:`~corrpriors.applications.transitions.CorrelatedTransitionModel`) yields picklable jobs
(callables: one model fit each), expects each job's outcome sent back and returns its result;
its next job may depend on the last outcome (a scale climb decides where to go next). Run one
after the other these are the serial fits. :func:`run_generators` keeps ``n_jobs`` jobs
running at any time, taken from all generators: whenever a job ends, its generator's next job
joins the queue, and a free worker takes the queued job of the generator whose jobs have run
for the shortest time so far (least attained service; ties in the given order). A refit of 4
actions is then scheduled by fits (2-5 s each at 100 x 100) rather than by actions (8-16 s),
and no action's climb falls behind to run alone at the end: 2 workers stay busy until the last
fit or so, whatever the actions' costs. (Replayed with the fits' CPU seconds of three 100 x 100
refits, first in first out came within 1.0-1.7 s of the divisible-work bound, this rule within
0.2-0.7 s.)

Every job is a pure function of its inputs and every generator sees its own outcomes in its own
order, so the results are those of the serial run, bit for bit, on any backend and schedule.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Generator, Sequence
from typing import Any

__all__ = ["run_generators"]


def _run_job(job: Any) -> tuple[Any, dict]:
    """Run one job; its outcome and where and how long it ran (thread CPU and wall seconds)."""
    start, cpu, process_cpu = time.perf_counter(), time.thread_time(), time.process_time()
    outcome = job()
    info = {"cpu": time.thread_time() - cpu, "start": start, "end": time.perf_counter(),
            "pid": os.getpid(), "thread": threading.get_ident(), "process_cpu": process_cpu}
    return outcome, info


def _run_job_quietly(job: Any) -> tuple[Any, dict]:
    """:func:`_run_job` in a worker process (its own warning filters, one BLAS thread)."""
    import warnings

    from ..._threads import blas_threads
    from ...exceptions import ConvergenceWarning

    with blas_threads(1), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return _run_job(job)


def _serially(steps: Generator[Any, Any, Any], unit: int, log: list[dict]) -> Any:
    try:
        job = next(steps)
        while True:
            outcome, info = _run_job(job)
            log.append({"unit": unit, **info})
            job = steps.send(outcome)
    except StopIteration as stop:
        return stop.value


class _Lanes:
    """Where jobs run: ``(submit, capacity)`` lanes, and a wait for the first to finish.

    ``"threads"``: ``workers`` threads of this process. ``"loky"``: this process (one thread:
    no pickling, no start-up) and ``workers - 1`` worker processes (each pays its imports and
    restores the priors once: about 2 s at 100 x 100, which the local lane does not wait for).
    Dask: the cluster, ``workers`` jobs at a time.
    """

    def __init__(self, backend: Any, workers: int):
        self.dask = backend == "dask" or not isinstance(backend, str)
        self.executors: list[Any] = []
        if self.dask:
            from dask.distributed import get_client

            client = get_client() if backend == "dask" else backend
            self.lanes = [(lambda job: client.submit(_run_job_quietly, job, pure=False),
                           workers)]
            return
        from concurrent.futures import ThreadPoolExecutor

        local = workers if backend == "threads" else 1
        threads = ThreadPoolExecutor(max_workers=local)
        self.executors.append(threads)
        self.lanes = [(lambda job: threads.submit(_run_job, job), local)]
        if workers > local:
            from joblib.executor import get_memmapping_executor

            # joblib's shared process pool (what Parallel(backend="loky") uses: a bare loky
            # executor in its place breaks joblib's next Parallel), without memmapping
            processes = get_memmapping_executor(workers - local, max_nbytes=None)
            self.lanes.append((lambda job: processes.submit(_run_job_quietly, job),
                               workers - local))

    def wait_any(self, futures: list[Any]) -> Any:
        if self.dask:
            from dask.distributed import wait
        else:
            from concurrent.futures import wait
        return wait(futures, return_when="FIRST_COMPLETED").done

    def close(self, pending: list[Any]) -> None:
        for fut in pending:
            fut.cancel()
        for executor in self.executors:   # (the loky processes stay for the next refit)
            executor.shutdown(wait=True)


def run_generators(generators: Sequence[Generator[Any, Any, Any]], n_jobs: int, backend: Any,
                   log: list[dict] | None = None) -> list[Any]:
    """Run step generators to their ends, their jobs ``n_jobs`` at a time on ``backend``.

    Parameters
    ----------
    generators : sequence of generator
        Each yields jobs (picklable callables for processes and Dask), receives their
        outcomes and returns a result.
    n_jobs : int
        Jobs running at a time (-1: one per generator); 1 runs the generators one after the
        other in this thread.
    backend : {"threads", "loky", "dask"} or dask.distributed.Client
        Where the jobs run (see
        :class:`~corrpriors.applications.transitions.CorrelatedTransitionModel`); ``"loky"``
        runs one of the ``n_jobs`` lanes in this process (a thread) and the others in worker
        processes.
    log : list, optional
        Receives one dict per job: ``unit`` (the generator's index), ``cpu`` (thread CPU
        seconds), ``start``/``end`` (``time.perf_counter``, comparable across processes on
        one machine), ``pid`` and ``thread`` (where it ran) and ``process_cpu`` (that
        process's CPU seconds when the job started: a worker process's first job shows its
        start-up, imports and the unpickling of that job).

    Returns
    -------
    list
        The generators' results, in their order.
    """
    from ..._threads import blas_threads

    log = [] if log is None else log
    results: list[Any] = [None] * len(generators)
    if n_jobs == 1 or len(generators) <= 1:   # (one BLAS thread as on the workers: same numbers)
        with blas_threads(1):
            return [_serially(g, i, log) for i, g in enumerate(generators)]
    workers = len(generators) if n_jobs < 0 else n_jobs
    ready: list[tuple[int, Any]] = []
    spent = [0.0] * len(generators)   # seconds of each generator's finished jobs
    running: dict[Any, tuple[int, int]] = {}   # future -> (generator, lane)

    def advance(i: int, outcome: Any = None, first: bool = False) -> None:
        try:
            job = next(generators[i]) if first else generators[i].send(outcome)
        except StopIteration as stop:
            results[i] = stop.value
            return
        ready.append((i, job))

    # the BLAS limit is per process: hold it here for threads and in-process Dask workers (one
    # limit for the whole section, so that no worker thread's exit lifts it under another)
    with blas_threads(1):
        pool = _Lanes(backend, workers)
        busy = [0] * len(pool.lanes)
        try:
            for i in range(len(generators)):
                advance(i, first=True)
            while ready or running:
                for lane, (submit, capacity) in enumerate(pool.lanes):
                    while ready and busy[lane] < capacity:
                        # least attained service first (ties: the given order)
                        pick = min(range(len(ready)), key=lambda r: (spent[ready[r][0]],
                                                                     ready[r][0]))
                        i, job = ready.pop(pick)
                        running[submit(job)] = (i, lane)
                        busy[lane] += 1
                for fut in pool.wait_any(list(running)):
                    i, lane = running.pop(fut)
                    busy[lane] -= 1
                    outcome, info = fut.result()
                    spent[i] += info["end"] - info["start"]
                    log.append({"unit": i, **info})
                    advance(i, outcome)
        finally:
            pool.close(list(running))
    return results
