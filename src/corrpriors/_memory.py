"""How much memory this process may use, for size checks before big allocations.

:func:`available_memory` is what is free now (the fit command); :func:`memory_budget` the most this
process may use (``ulimit -v``, the physical memory, ``CORRPRIORS_MEMORY_LIMIT``), which
:func:`check_memory` compares with an estimate (the Gymnasium commands, category maps).

A command that is about to build arrays whose size grows with the square of its input (a
dense C x C covariance) compares its estimate with :func:`available_memory` first and refuses
with one line giving both, instead of dying minutes later in a ``MemoryError`` (or being killed
by the kernel, taking neighbours on a shared machine down with it).
"""

from __future__ import annotations

import math
import os
import re

_SUFFIX = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_UNITS = ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


#: What :func:`format_bytes` says of an estimate that overflowed to infinity.
TOO_LARGE = "an amount too large to represent"
#: What :func:`format_bytes` says of an estimate that is NaN (a broken estimate, not a size).
UNKNOWN = "an amount that could not be estimated"


def format_bytes(n: float) -> str:
    """``n`` bytes in binary units with three significant digits (``"298 GiB"``); an estimate
    that overflowed is :data:`TOO_LARGE` (never ``"inf EiB"``), a NaN one :data:`UNKNOWN`.
    """
    value, unit = float(n), 0
    if math.isnan(value):
        return UNKNOWN
    if not value < float("inf"):
        return TOO_LARGE
    while value >= 1024.0 and unit < len(_UNITS) - 1:
        value /= 1024.0
        unit += 1
    if unit == 0:
        return f"{int(value)} bytes"
    return f"{value:.3g} {_UNITS[unit]}"


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_available() -> int | None:
    """The room left under a cgroup (v2) memory limit, if one is set."""
    try:
        with open("/sys/fs/cgroup/memory.max") as fh:
            limit = fh.read().strip()
        if limit == "max":
            return None
        with open("/sys/fs/cgroup/memory.current") as fh:
            current = int(fh.read().strip())
        return max(int(limit) - current, 0)
    except (OSError, ValueError):
        return None


def _address_space_available() -> int | None:
    """The room left under ``ulimit -v`` (RLIMIT_AS), if one is set."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    used = 0
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    used = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    return max(int(soft) - used, 0)


def _physical_memory() -> int | None:
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def available_memory() -> int | None:
    """Bytes this process may still allocate: the least of the memory the system reports as
    available, the room under a cgroup limit and the room under ``ulimit -v``; the physical
    memory where none of those can be read; ``None`` if nothing is known.
    """
    known = [v for v in (_meminfo_available(), _cgroup_available(), _address_space_available())
             if v is not None]
    if known:
        return min(known)
    return _physical_memory()


class MemoryEstimateError(ValueError):
    """A step would need more memory than this process may use; ``str(exc)`` is one line."""


def parse_size(text: str) -> int:
    """``"6G"`` -> 6 GiB in bytes; a plain number is bytes.

    Raises
    ------
    ValueError
        Not a positive size.
    """
    found = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?)(?:i?B)?\s*", str(text), flags=re.IGNORECASE)
    if not found or float(found.group(1)) <= 0:
        raise ValueError(f"CORRPRIORS_MEMORY_LIMIT: expected a size such as 6G or 500M, got {text!r}")
    return int(float(found.group(1)) * _SUFFIX[found.group(2).upper()])


def memory_budget() -> tuple[int, str]:
    """The bytes this process may use and where that limit comes from."""
    limits: list[tuple[int, str]] = []
    try:
        import resource

        for name in ("RLIMIT_AS", "RLIMIT_DATA"):
            soft = resource.getrlimit(getattr(resource, name))[0]
            if soft not in (resource.RLIM_INFINITY, -1) and soft > 0:
                limits.append((int(soft), f"the process limit {name}"))
    except (ImportError, AttributeError, OSError, ValueError):  # pragma: no cover - not POSIX
        pass
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        if physical > 0:
            limits.append((int(physical), "the physical memory"))
    except (AttributeError, OSError, ValueError):  # pragma: no cover - not POSIX
        pass
    text = os.environ.get("CORRPRIORS_MEMORY_LIMIT")
    if text:
        limits.append((parse_size(text), "CORRPRIORS_MEMORY_LIMIT"))
    return min(limits) if limits else (2**62, "no known limit")


def about_bytes(n: float) -> str:
    """``"about 298 GiB"``, or :data:`TOO_LARGE` / :data:`UNKNOWN` for an estimate that
    overflowed / is NaN.
    """
    text = format_bytes(n)
    return text if text in (TOO_LARGE, UNKNOWN) else f"about {text}"


def check_memory(needed: float, what: str, alternative: str) -> None:
    """Raise :class:`MemoryEstimateError` if ``needed`` bytes exceed :func:`memory_budget`.

    Parameters
    ----------
    needed : float
        The estimate, in bytes.
    what : str
        What would be allocated, e.g. ``"FrozenLake-v1 (40,000 states, 4 actions): the dense
        (S, A, S) tables"``.
    alternative : str
        What to do instead (a smaller map, the sparse prior, fewer samples).
    """
    budget, source = memory_budget()
    if math.isnan(needed):  # a broken estimate is refused, not taken as "fits"
        raise MemoryEstimateError(f"{what} would need {UNKNOWN} (NaN), so it is not attempted "
                                  f"({format_bytes(budget)} available, {source}); {alternative}")
    if not needed <= budget:
        raise MemoryEstimateError(f"{what} would need {about_bytes(needed)}, more than the "
                                  f"{format_bytes(budget)} this process may use ({source}); {alternative}")


__all__ = ["TOO_LARGE", "UNKNOWN", "MemoryEstimateError", "about_bytes", "available_memory", "check_memory",
           "format_bytes", "memory_budget", "parse_size"]
