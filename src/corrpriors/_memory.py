"""How much memory this process may still allocate, for size checks before big allocations.

A command that is about to build arrays whose size grows with the square of its input (a
dense C x C covariance) compares its estimate with :func:`available_memory` first and refuses
with one line giving both, instead of dying minutes later in a ``MemoryError`` (or being killed
by the kernel, taking neighbours on a shared machine down with it).
"""

from __future__ import annotations

import os

_UNITS = ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def format_bytes(n: float) -> str:
    """``n`` bytes in binary units with three significant digits (``"298 GiB"``)."""
    value, unit = float(n), 0
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


__all__ = ["available_memory", "format_bytes"]
