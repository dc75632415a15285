"""Memory of the running process, for the benchmarks that measure it (one copy of the reading).

``peak_mb()`` is the peak resident memory (VmHWM) of this process. Not ``ru_maxrss``: Linux keeps
``ru_maxrss`` across the fork and exec that start a child, so a benchmark started from a large
parent (a test runner, another benchmark) would report the parent's peak. Run what is measured
in a fresh process and read this there.
"""

from __future__ import annotations

from pathlib import Path


def status_mb(field: str) -> float:
    """``field`` of ``/proc/self/status`` (``"VmHWM"``, ``"VmRSS"``) in MB; NaN where there is no ``/proc``."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return float(line.split()[1]) / 1024.0
    except OSError:  # pragma: no cover - not Linux
        pass
    return float("nan")


def peak_mb() -> float:
    """Peak resident memory of this process in MB (VmHWM)."""
    return status_mb("VmHWM")
