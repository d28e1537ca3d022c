"""Whether a run's host was quiet, from the run's own record: for the few assertions
that hold only where the program had the host's cores to itself (a share of time that
other processes change), which skip with the reason elsewhere."""

from __future__ import annotations

QUIET_AT_MOST = 0.05  # the threads' waits for a core, added up, as a share of the run


def contention(record: dict) -> str | None:
    """What the run's timeline says of the host's contention where it measured it
    (schedstat): the seconds the program's threads, added up, were runnable but waited
    for a core, per second of the run; None where that was under ``QUIET_AT_MOST``."""
    timeline = record.get("timeline") or {}
    windows = [w for w in timeline.get("windows", ()) if w.get("threads_queued_s") is not None]
    if not windows:
        return "the threads' waits for a core were not measured"
    queued = sum(w["threads_queued_s"] for w in windows) / (len(windows) * timeline["width_s"])
    if queued >= QUIET_AT_MOST:
        return f"the program's threads waited for a core {queued:.0%} of the run"
    return None


def queued_s() -> float | None:
    """The seconds this thread has been runnable but waited for a core (Linux
    schedstat); None where the kernel does not say."""
    try:
        with open("/proc/thread-self/schedstat") as stat:
            return int(stat.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None
