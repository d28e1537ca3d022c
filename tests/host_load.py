"""Whether a run's host was quiet: for the few assertions that hold only where the
program had the host's cores to itself (a share of time that other processes change),
which skip with the reason elsewhere."""

from __future__ import annotations

import time

QUIET_AT_MOST = 0.10  # other processes' share of the host's CPU time over the run


def contention(record: dict) -> str | None:
    """What the run's record measured of the other processes on its host: their share
    of the host's CPU time (its busy time from /proc/stat less the program's), the
    mean over the run's windows; None where it was under ``QUIET_AT_MOST``. Not the
    program's threads' own waits for a core: TF's threads wait for each other on a
    small host with nothing else running."""
    timeline = record.get("timeline") or {}
    shares = [
        w["cpu_others_share"]
        for w in timeline.get("windows", ())
        if w.get("cpu_others_share") is not None
    ]
    if not shares:
        return "the host's CPU time was not measured"
    others = sum(shares) / len(shares)
    if others >= QUIET_AT_MOST:
        return f"other processes took {others:.0%} of the host's CPU time over the run"
    return None


def queued_s() -> float | None:
    """The seconds this thread has been runnable but waited for a core (Linux
    schedstat); None where the kernel does not say."""
    try:
        with open("/proc/thread-self/schedstat") as stat:
            return int(stat.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def busy_now(seconds: float = 0.5) -> str | None:
    """What the host's other processes are doing now: their share of its CPU time over
    ``seconds`` while this process sleeps (Linux's /proc/stat); None where it is under
    ``QUIET_AT_MOST`` or the kernel does not say."""

    def read() -> tuple[int, int] | None:
        try:
            with open("/proc/stat") as stat:
                fields = [int(v) for v in stat.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return sum(fields[:8]) - idle, sum(fields[:8])

    first = read()
    time.sleep(seconds)
    last = read()
    if first is None or last is None or last[1] <= first[1]:
        return None
    share = (last[0] - first[0]) / (last[1] - first[1])
    if share >= QUIET_AT_MOST:
        return f"other processes kept {share:.0%} of the host's CPU busy"
    return None
