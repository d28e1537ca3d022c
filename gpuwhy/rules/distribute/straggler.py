"""distribute.straggler: one worker's own work per step is much slower than the others'."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpuwhy.facts import Facts, WorkerRun
from gpuwhy.finding import Finding
from gpuwhy.formatting import duration
from gpuwhy.rules.base import Rule

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


class Straggler(Rule):
    """One worker is much slower than the others, and the whole cluster waits for it.

    ## What it detects
    `gpuwhy merge DIR` reads every worker's record. In synchronous training
    (MultiWorkerMirroredStrategy) each step ends with an all-reduce in which every worker
    waits for the slowest, so all step times come out equal: what differs is each
    worker's *own* work per step. Where the records measured the time inside collective
    ops, a worker's own time is its step less that wait; otherwise it is the compute the
    workers share (the shortest step less its input wait) plus its own input wait (timed
    `next()` calls on the loop's iterator, a distributed one included: a worker's wait
    for its own batches, while a worker waiting for a late peer does so in the step's
    all-reduce; tf.data's timer for Keras; else the time outside the step function).
    Where a few long stalls every worker shares make the mean step 1.5x its median (a
    loaded host, an iterator made anew each epoch), the shared compute is a typical
    step's (medians) and the waits stay means. Where steps are not coupled
    (ParameterServerStrategy, separate loops) step times are compared directly. A
    worker whose own time is at least `min_ratio` times the median of the others' (and
    `min_extra_ms` more) is named, with what differs: its input or its compute. Medium;
    high from `high_ratio`. Workers with fewer than `min_steps` steps after warm-up are
    not compared. Where no worker is named and a host's cores were all busy over the
    run (`saturated_at`), the finding says that the workers cannot be told apart there
    (info).

    ## Why is this slow?
    A synchronous step is as slow as its slowest worker: with one worker 1.5x slower,
    every other worker idles a third of each step in the all-reduce, and adding workers
    makes it no faster. The usual causes are one host's input pipeline (reading another
    shard from slower storage, fewer CPU cores, a sequential `map`), a slower or shared
    GPU, or a host also running something else.

    ## Example
    ```python
    # worker 1's data sits on a network disk, read by one thread
    ds = tf.data.TFRecordDataset(files).map(parse)
    ```

    Use instead:
    ```python
    ds = tf.data.TFRecordDataset(files, num_parallel_reads=tf.data.AUTOTUNE)
    ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
    ```

    ## Options
    - `min_steps`: steps after warm-up a worker needs to be compared (20).
    - `min_ratio`: own time over the others' median from which a worker is named (1.2).
    - `high_ratio`: from this ratio the finding is high (1.4).
    - `min_extra_ms`: the least extra time per step worth naming, in ms (1).
    - `saturated_at`: a host's CPU use over the run (every process, all cores) from
      which its workers cannot be told apart: where no worker is named and a host was
      this busy, the finding says so (info) rather than nothing (0.9).
    """

    id = "distribute.straggler"
    severity = "high"
    status = "stable"
    since = "0.4.0"
    needs = ("workers",)
    options = {
        "min_steps": 20,
        "min_ratio": 1.2,
        "high_ratio": 1.4,
        "min_extra_ms": 1.0,
        "saturated_at": 0.9,
    }
    question = "one of my workers holds the others back"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        assert facts.workers is not None
        comparison = compare(facts.workers.workers, options["min_steps"])
        if comparison is None:
            return self._not_told(facts.workers.workers, options)
        slow = comparison.slowest
        others = [t for t in comparison.times if t is not slow]
        others_own = statistics.median(t.own_s for t in others)
        extra = slow.own_s - others_own
        if slow.score < options["min_ratio"] or extra < options["min_extra_ms"] / 1000:
            return self._saturated(comparison, options)
        cause, because = _cause(slow, others, extra)
        name = slow.worker.name
        host = f" on {slow.worker.hostname}" if slow.worker.hostname else ""
        wait_share = (slow.score - 1) / slow.score
        return [
            self.finding(
                f"{name}{host} is the straggler: its own work per step is "
                f"{slow.score:.1f}x the other workers' ({duration(slow.own_s)} against "
                f"{duration(others_own)}), {because}",
                severity="high" if slow.score >= options["high_ratio"] else "medium",
                evidence={
                    "straggler": name,
                    "score": round(slow.score, 2),
                    "cause": cause,
                    "own_time_by": comparison.how,
                    "workers": [_row(t) for t in comparison.times],
                },
                fix=_fix(slow.worker, cause),
                estimated_gain=(
                    f"the other workers wait about {wait_share:.0%} of each step for {name} "
                    "(estimated from these records): that much shorter steps once it keeps pace"
                ),
                gain_value=wait_share,
            )
        ]

    def _saturated(self, comparison: Comparison, options: dict[str, Any]) -> list[Finding]:
        """No worker stands out, on hosts whose cores were all busy: say so (info). On a
        saturated host every process waits for a core, so the workers' own times even
        out and a slower input or compute on one of them no longer shows."""
        busy = saturated_hosts([t.worker for t in comparison.times], options["saturated_at"])
        if not busy:
            return []
        rows = [_row(t) for t in comparison.times]
        return [
            self.finding(
                "No straggler can be told apart: the workers' hosts had every core busy "
                f"({_busy_text(busy)}), so their input and compute waited for the CPU alike "
                f"(highest own-time score {comparison.slowest.score:.2f})",
                severity="info",
                evidence={
                    "workers": rows,
                    "own_time_by": comparison.how,
                    "saturated_hosts": _busy_evidence(busy),
                },
                fix="# compare the workers on hosts with idle cores (one worker per host, or\n"
                "# fewer input threads: options.threading.private_threadpool_size)",
            )
        ]

    def _not_told(self, workers: Sequence[WorkerRun], options: dict[str, Any]) -> list[Finding]:
        """Synchronous workers whose own work per step cannot be measured: say so (info),
        so that no one reads the silence as an even load."""
        min_steps = options["min_steps"]
        ran = [
            w for w in workers if w.state in ("ok", "interrupted") and w.counted_steps >= min_steps
        ]
        if len(ran) < 2 or not any(w.strategy in SYNCHRONOUS for w in ran):
            return []
        why = sorted({w.input_wait_by for w in ran if w.input_wait_by and w.input_wait_s is None})
        return [
            self.finding(
                "No straggler can be told apart: the workers' synchronous steps are equal and "
                "neither their input wait nor their time in collectives was measured"
                + (f" ({'; '.join(why)})" if why else ""),
                severity="info",
                evidence={
                    "workers": [w.name for w in ran],
                    "median_step_s": [w.step_median_s for w in ran],
                    "input_wait": why or None,
                },
                fix="# time the input where the loop reads it: iterate the distributed dataset\n"
                "# in Python and pass each batch to the step function (for x in dist_ds:\n"
                "#     train_step(x)), then gpuwhy times next() on every worker",
            )
        ]


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


def _cause(slow: OwnTime, others: list[OwnTime], extra: float) -> tuple[str, str]:
    """input or compute, and the words that say so with the figures."""
    waits = [t.input_s for t in others if t.input_s is not None]
    if slow.input_s is None or not waits:
        return "unknown", "its input wait was not measured (input or compute)"
    extra_input = slow.input_s - statistics.median(waits)
    by = slow.worker.input_wait_by or "measured"
    theirs = duration(statistics.median(waits))
    if extra_input >= 0.5 * extra:
        if by.startswith("time outside"):
            return "input", (
                f"in its loop outside the step function (reading the next batch, Python "
                f"between steps): {duration(slow.input_s)} a step against {theirs} on the others"
            )
        return "input", (
            f"in its input: {duration(slow.input_s)} a step waiting for data against "
            f"{theirs} on the others ({by})"
        )
    return "compute", (
        f"in its compute: its input wait ({duration(slow.input_s)} a step) is like the "
        "others', the rest of its step is slower"
    )


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


def _busy_text(hosts: dict[str, tuple]) -> str:
    return "; ".join(
        f"{host} ({', '.join(names)}): {busy:.0%} of {cores or '?'} cores"
        for host, (busy, cores, names) in hosts.items()
    )


def _busy_evidence(hosts: dict[str, tuple]) -> list[dict[str, Any]]:
    return [
        {"host": host, "workers": list(names), "cpu_busy": f"{busy:.0%}", "cores": cores}
        for host, (busy, cores, names) in hosts.items()
    ]


def _row(t: OwnTime) -> dict[str, Any]:
    w = t.worker
    row: dict[str, Any] = {
        "worker": w.name,
        "steps": w.steps,
        "median_step": duration(w.step_median_s),
        "own_time": duration(t.own_s),
        "score": round(t.score, 2),
    }
    if t.input_s is not None:
        row["input_wait"] = duration(t.input_s)
    if w.collective_step_s is not None:
        row["collective"] = duration(w.collective_step_s)
    if w.gpu_busy is not None:
        row["gpu_busy"] = f"{w.gpu_busy:.0%}"
    if w.host_cpu_busy is not None:
        row["host_cpu_busy"] = f"{w.host_cpu_busy:.0%}"
    return row


def _fix(worker: WorkerRun, cause: str) -> str:
    host = worker.hostname or "<host>"
    if cause == "input":
        return "\n".join(
            [
                f"# {worker.name} ({host}) waits for its input: parallelise its pipeline,",
                "# and check it reads its own shard (not every file, not a slower disk)",
                "ds = ds.map(<parse>, num_parallel_calls=tf.data.AUTOTUNE)",
                "ds = ds.prefetch(tf.data.AUTOTUNE)",
                f"# {worker.name}'s own report names its slowest stage (input.*) and how TF",
                "# shards its input (distribute.input-sharding): gpuwhy report <its record>",
            ]
        )
    return "\n".join(
        [
            f"# {worker.name} computes slower: compare {host} with the other workers' hosts",
            "nvidia-smi -q -d PERFORMANCE,CLOCK   # throttling; another process on its GPU",
            "uptime; top -b -n 1 | head -20       # CPU load from other programs",
        ]
    )
