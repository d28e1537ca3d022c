"""The host's memory: how much there is and how much is free now (for "does a cache fit").

From /proc/meminfo on Linux (MemAvailable counts reclaimable page cache, which the free
page count does not); sysconf elsewhere.
"""

from __future__ import annotations

import os


def host_memory() -> tuple[int | None, int | None]:
    """(physical memory, memory available now) in bytes; None where unknown."""
    values = {}
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                name, _, rest = line.partition(":")
                if name in ("MemTotal", "MemAvailable"):
                    values[name] = int(rest.split()[0]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    total = values.get("MemTotal") or _sysconf_bytes("SC_PHYS_PAGES")
    available = values.get("MemAvailable") or _sysconf_bytes("SC_AVPHYS_PAGES")
    return total, available


def _sysconf_bytes(pages: str) -> int | None:
    try:
        return os.sysconf(pages) * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None
