"""Executing planned runs for a command: lock every folder, run, print the closing summary.

Shared by ``corrpriors reproduce`` and the Gymnasium commands (``sysid``, ``psrl``); the command
line parses, this module does the work and returns an exit status (0 done, 1 an experiment failed,
its finished seeds kept; 2 an unusable output folder or configuration; 130 Ctrl-C).
"""

from __future__ import annotations

import os
import pathlib
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Any

from .._format import WIDTH, wrap
from . import _config, _io
from ._run import WARNING_NOTES, RunFailed, RunInterrupted, RunReport, check_run_folder, duration, run_plan


def _error(message: str, prog: str) -> None:
    print(f"{prog}: error: {message}", file=sys.stderr)


@dataclass(frozen=True)
class ExecutionOptions:
    """How a command runs its plans: parallel workers, backend and cluster, resume, progress bar,
    figures, and the results root ``out`` (named in the closing summary).
    """

    out: str | pathlib.Path = "results"
    jobs: int = -1
    backend: str = "loky"
    scheduler: str | None = None
    resume: bool = True
    progress: bool = True
    plot: bool = True

    @classmethod
    def from_namespace(cls, args: Any) -> ExecutionOptions:
        """The options of parsed command-line arguments (fields of the same names)."""
        return cls(**{f: getattr(args, f) for f in cls.__dataclass_fields__ if hasattr(args, f)})


def execute_plans(plans: list, args: ExecutionOptions, status: int = 0, t_start: float | None = None,
                  prog: str = "corrpriors reproduce") -> int:
    """Lock every plan's folder, run the plans, print the closing summary; return the exit code.

    ``args`` holds the execution options; ``prog`` names the command in error messages.
    """
    t_start = time.perf_counter() if t_start is None else t_start
    cpu_start = time.process_time()
    locks = []
    try:
        try:  # every folder checked and locked before any seed runs (of every plan: `reproduce all`)
            for plan in plans:
                _io.check_not_inside_run(plan.run_dir)
                _io.prepare_run_dir(plan.run_dir)
                locks.append(_io.RunLock(plan.run_dir).acquire())
                check_run_folder(plan)
        except _io.OutputError as exc:   # (it names the folder)
            _error(str(exc), prog)
            return 2
        except _io.ConfigMismatch as exc:
            _error(f"{plan.name}: {exc}", prog)
            return 2
        reports, status = _run_plans(plans, args, status, prog)
    finally:
        for held in locks:
            held.release()
    if status == 130:
        return status
    if reports:
        print(closing_summary(reports, args.out, time.perf_counter() - t_start,
                              time.process_time() - cpu_start))
    return status


def _run_plans(plans: list, args: ExecutionOptions, status: int,
               prog: str = "corrpriors reproduce") -> tuple[list[RunReport], int]:
    reports: list[RunReport] = []
    for plan in plans:
        try:
            reports.append(run_plan(plan, jobs=args.jobs, backend=args.backend, scheduler=args.scheduler,
                                    resume=args.resume, progress=args.progress, plot=args.plot, lock=False))
        except RunInterrupted as exc:
            print(str(exc), file=sys.stderr)
            return reports, 130
        except ImportError as exc:  # a missing optional backend: say how to install it
            _error(str(exc), prog)
            return reports, 1
        except (_io.OutputError, _io.ConfigMismatch) as exc:
            _error(f"{plan.name}: {exc}", prog)
            return reports, 2
        except RunFailed as exc:  # one broken experiment must not stop `reproduce all`
            log = _write_error_log(plan.run_dir, exc)
            kept = (f"{exc.saved} of {exc.total} seeds saved under {exc.run_dir} (kept; run again to resume)"
                    if exc.saved else "no seed was saved")
            print(f"{prog}: {plan.name} failed: {exc}; {kept}" + (f"; traceback in {log}" if log else ""),
                  file=sys.stderr)
            status = 1
    return reports, status


def _write_error_log(run_dir: pathlib.Path, exc: RunFailed) -> pathlib.Path | None:
    text = "".join(traceback.format_exception(type(exc.cause), exc.cause, exc.cause.__traceback__))
    path = pathlib.Path(run_dir) / "error.log"
    try:
        _io.atomic_write_bytes(path, text.encode())
    except OSError:
        return None
    return path


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def closing_summary(reports: list[RunReport], out: str | pathlib.Path, elapsed: float,
                    cpu: float | None = None) -> str:
    """Say what ran, how long it took (wall and CPU), where its files are, and the warnings.

    At most :data:`corrpriors._format.WIDTH` columns (a path longer than that stays whole).
    ``cpu`` is this process's CPU seconds (the planning, summaries and figures); the seeds'
    CPU time comes from the reports.
    """
    seeds_cpu = sum(float(getattr(r, "cpu_seconds", 0.0) or 0.0) for r in reports
                    if not getattr(r, "in_process", False))  # in-process seeds are in ``cpu`` already
    total_cpu = seeds_cpu + (float(cpu) if cpu is not None else 0.0)
    lines = [""]
    lines += _joined(f"Summary: {_plural(len(reports), 'experiment')} in {duration(elapsed)} wall, "
                     f"{duration(total_cpu)} CPU ({os.cpu_count() or 1} cores)", f"results under {out}", "")
    for r in reports:
        run = r.summary.get("run", {})
        n = len(r.summary.get("seeds", []))
        what = f"{_plural(n, 'seed')}, {run.get('settings', '?')} settings"
        line = f"  {r.name}: {r.out_dir}/ ({what})"
        lines += [line] if len(line) <= WIDTH else [f"  {r.name} ({what}):", f"    {r.out_dir}/"]
        stems = [fig.paths[0].with_suffix("").name for fig in r.saved_figures if fig.paths]
        lines += wrap("metrics.json" + "".join(f", {stem}.png/.pdf" for stem in stems), "    ", "      ")
    statuses = {r.summary.get("run", {}).get("claims", "paper-scale") for r in reports
                if r.summary.get("extra", {}).get("claims")}
    indicative = sorted(s for s in statuses if not _config.is_full_scale(s))
    if indicative:
        lines += wrap(f"claim checks: {indicative[0] if len(indicative) == 1 else 'indicative (see each table)'}",
                      "  ", "    ")
    total: dict[str, int] = {}
    for r in reports:
        for cat, n in r.warnings.items():
            total[cat] = total.get(cat, 0) + n
    if total:
        parts = [f"{n:,} {cat}" + (f" ({WARNING_NOTES[cat]})" if cat in WARNING_NOTES else "")
                 for cat, n in sorted(total.items(), key=lambda kv: -kv[1])]
        lines += wrap(f"warnings: {_plural(sum(total.values()), 'warning')} collected, not shown: "
                      + "; ".join(parts), "  ", "    ")
        lines.append("    full text: warnings.log in each results folder")
    else:
        lines.append("  warnings: none")
    claims = any(r.summary.get("extra", {}).get("claims") for r in reports)
    lines += wrap("metrics.json holds every number" + (", the details behind each claim check" if claims else "")
                  + " and the configuration used", "  ", "    ")
    lines += _joined("everything on one page:", f"corrpriors report {out}", "  ")
    return "\n".join(lines)


def _joined(head: str, tail: str, indent: str) -> list[str]:
    """``head tail`` on one line if it fits :data:`WIDTH` columns, else ``tail`` (a path, kept whole) below."""
    line = f"{indent}{head} {tail}" if head.endswith(":") else f"{indent}{head}; {tail}"
    if len(line) <= WIDTH:
        return [line]
    return wrap(head, indent, indent + "  ") + [f"{indent}  {tail}"]


__all__ = ["ExecutionOptions", "closing_summary", "execute_plans"]
