"""The host's CPUs: how many this process may use, and how busy the machine and this
process tree were between two moments (from /proc/stat and os.times()), for "is the
input pipeline starved of CPU"."""

from __future__ import annotations

import os
import time


def host_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))  # what tf.data's threads may use
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cpu_snapshot() -> tuple:
    """(wall, this process tree's CPU seconds, machine busy jiffies, machine total jiffies)."""
    times = os.times()
    process = times.user + times.system + times.children_user + times.children_system
    busy = total = None
    try:
        with open("/proc/stat") as stat:
            fields = [int(v) for v in stat.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        total = sum(fields[:8])  # guest time is inside user
        busy = total - idle
    except (OSError, ValueError, IndexError):
        pass
    return time.perf_counter(), process, busy, total


def run_queue_seconds(pid: int, tid: int | None = None) -> float | None:
    """Seconds the process's main thread (or its thread ``tid``) has spent runnable but
    waiting for a core (Linux's schedstat: /proc/PID/task/TID/schedstat, its second
    field, in ns; None where the kernel does not keep it). A loop's wall time stretched
    by a busy host is this time: measured directly, not inferred from the host's load."""
    try:
        with open(f"/proc/{pid}/task/{pid if tid is None else tid}/schedstat") as stat:
            return int(stat.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def process_run_queue_seconds(pid: int) -> float | None:
    """Seconds all the process's threads have spent runnable but waiting for a core,
    added up (schedstat per thread; threads that ended are not counted: read it often).
    TF's op threads wait here when a neighbour takes the cores, while the loop's thread
    waits for them, not for a core."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    total, read = 0.0, False
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as stat:
                total += int(stat.read().split()[1]) / 1e9
                read = True
        except (OSError, ValueError, IndexError):
            continue  # the thread ended between the listing and the read
    return total if read else None


def cpu_fractions(start: tuple | None, end: tuple | None, cores: int) -> tuple:
    if not start or not end:
        return None, None
    wall = end[0] - start[0]
    process = None
    if wall > 0 and cores:
        process = round(min(1.0, max(0.0, (end[1] - start[1]) / (wall * cores))), 4)
    busy = None
    if start[2] is not None and end[2] is not None and end[3] > start[3]:
        busy = round(min(1.0, max(0.0, (end[2] - start[2]) / (end[3] - start[3]))), 4)
    return busy, process


def load_average() -> float | None:
    """The OS's 1-minute load average (runnable and waiting threads, all processes)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None
