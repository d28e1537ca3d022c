"""The workers of a merged run compared by their own work per step (not their wait for
each other), the one that stands out, whether its extra time is input or compute, and
the hosts whose cores were all busy. Asked by distribute.straggler and by the merge
verdict, which states the same straggler in its headline."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from gpuwhy.facts import WorkerRun

# Strategies whose workers all-reduce every step: each waits for the slowest.
SYNCHRONOUS = frozenset(
    {
        "MultiWorkerMirroredStrategy",
        "CollectiveAllReduceStrategy",
        "MirroredStrategy",
        "TPUStrategy",
        "CentralStorageStrategy",
    }
)


@dataclass(frozen=True)
class OwnTime:
    """One worker's own work per step (not its wait for the others), how it was told
    apart, and its score: that time over the median of the other workers'."""

    worker: WorkerRun
    own_s: float
    score: float
    input_s: float | None  # its input wait per step (measured, or outside the step function)


@dataclass(frozen=True)
class Comparison:
    """The workers compared, and how their own time was told apart from waiting."""

    times: tuple[OwnTime, ...]
    how: str

    @property
    def slowest(self) -> OwnTime:
        return max(self.times, key=lambda t: t.score)


def compare(workers: Sequence[WorkerRun], min_steps: int) -> Comparison | None:
    """Each comparable worker's own time per step and its score; None with fewer than
    two workers of ``min_steps`` steps, or when their own time cannot be told apart."""
    usable = [
        w
        for w in workers
        if w.state in ("ok", "interrupted", "failed")
        and w.counted_steps >= min_steps
        and w.step_mean_s
        and w.step_median_s
    ]
    if len(usable) < 2:
        return None
    synchronous = any(w.strategy in SYNCHRONOUS for w in usable)
    if all(w.collective_step_s is not None for w in usable):
        own = [max(0.0, _mean(w) - (w.collective_step_s or 0.0)) for w in usable]
        how = "step time less the time in collective ops (measured)"
    elif synchronous:
        if not all(w.input_wait_s is not None for w in usable):
            return None  # equal steps, no wait measured: nothing tells the workers apart
        waits = [w.input_wait_s or 0.0 for w in usable]
        if _stalled(usable):
            # the compute of a typical step: stalls every worker shares left out
            compute = [(w.step_median_s or 0.0) - (w.input_wait_median_s or 0.0) for w in usable]
            how = (
                "the compute all workers share in a typical step (the shortest median step "
                "less its median input wait) plus each worker's mean input wait: the mean "
                "steps hold long stalls every worker shares (mean over median step "
                f"{max(_mean(w) / (w.step_median_s or 1) for w in usable):.1f}x)"
            )
        else:
            compute = [_mean(w) - wait for w, wait in zip(usable, waits)]
            how = (
                "the compute all workers share (the shortest step less its input wait) plus "
                "each worker's input wait; synchronous steps are otherwise equal"
            )
        shared = min(compute)
        own = [max(0.0, shared) + wait for wait in waits]
    else:
        own = [w.step_median_s or 0.0 for w in usable]
        how = "median step time (the workers' steps are not synchronised)"
    times = [OwnTime(w, own[i], _score(own, i), w.input_wait_s) for i, w in enumerate(usable)]
    return Comparison(tuple(times), how)


def _score(own: list[float], i: int) -> float:
    """Worker ``i``'s own time over the median of the others'."""
    rest = statistics.median(own[:i] + own[i + 1 :])
    return own[i] / rest if rest > 0 else (1.0 if own[i] == 0 else float("inf"))


STALLED = 1.5  # mean over median step from which the means are dominated by stalls


def _stalled(workers: Sequence[WorkerRun]) -> bool:
    """Synchronous steps whose mean is far above their median on some worker: a few
    long stalls (another process taking the host's cores, an iterator made anew each
    epoch), which every worker shares since they wait for each other, and which would
    count as compute of every worker and dilute a straggler's extra wait. The compute
    is then a typical step's (medians, where every worker timed its wait step by step);
    the waits stay means (what adds up: a straggler's wait at each epoch start too)."""
    if not all(w.input_wait_median_s is not None and w.step_median_s for w in workers):
        return False
    return any(_mean(w) >= STALLED * (w.step_median_s or 0.0) for w in workers)


def _mean(w: WorkerRun) -> float:
    return w.step_mean_s or w.step_median_s or 0.0


def saturated_hosts(workers: Sequence[WorkerRun], at: float) -> dict[str, tuple]:
    """Each host (its name, else the worker's) whose CPU use over the run was at least
    ``at`` of all its cores: (busy share, cores, its workers)."""
    hosts: dict[str, tuple] = {}
    for w in workers:
        if w.host_cpu_busy is None or w.host_cpu_busy < at:
            continue
        host = w.hostname or w.name
        busy, cores, names = hosts.get(host, (0.0, w.host_cores, ()))
        hosts[host] = (max(busy, w.host_cpu_busy), cores, (*names, w.name))
    return hosts


@dataclass(frozen=True)
class Straggling:
    """The worker whose own time stands out: the others, their median own time, its
    extra time over it, and what the extra is (input, compute or unknown)."""

    slow: OwnTime
    others: tuple[OwnTime, ...]
    others_own_s: float
    extra_s: float
    cause: str


def standing_out(comparison: Comparison, min_ratio: float, min_extra_s: float) -> Straggling | None:
    """The slowest worker where its score is at least ``min_ratio`` and its own time at
    least ``min_extra_s`` more than the others' median; None where none stands out."""
    slow = comparison.slowest
    others = tuple(t for t in comparison.times if t is not slow)
    others_own = statistics.median(t.own_s for t in others)
    extra = slow.own_s - others_own
    if slow.score < min_ratio or extra < min_extra_s:
        return None
    return Straggling(slow, others, others_own, extra, straggler_cause(slow, others, extra))


def straggler_cause(slow: OwnTime, others: Sequence[OwnTime], extra: float) -> str:
    """input, compute, or unknown (its input wait, or the others', not measured): input
    where its extra input wait makes at least half of its extra time."""
    waits = [t.input_s for t in others if t.input_s is not None]
    if slow.input_s is None or not waits:
        return "unknown"
    extra_input = slow.input_s - statistics.median(waits)
    return "input" if extra_input >= 0.5 * extra else "compute"
