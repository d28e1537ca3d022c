"""distribute.straggler: one worker's own work per step is much slower than the others'."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from gpuwhy.derived.worker_times import (
    SYNCHRONOUS,
    Comparison,
    OwnTime,
    compare,
    saturated_hosts,
    standing_out,
)
from gpuwhy.facts import Facts, WorkerRun
from gpuwhy.finding import Finding
from gpuwhy.formatting import duration
from gpuwhy.rules.base import Rule


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
        straggling = standing_out(comparison, options["min_ratio"], options["min_extra_ms"] / 1000)
        if straggling is None:
            return self._saturated(comparison, options)
        slow, others_own, cause = straggling.slow, straggling.others_own_s, straggling.cause
        because = _because(slow, straggling.others, cause)
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


def _because(slow: OwnTime, others: Sequence[OwnTime], cause: str) -> str:
    """The words that say what the straggler's extra time is, with the figures."""
    if cause == "unknown":
        return "its input wait was not measured (input or compute)"
    assert slow.input_s is not None
    theirs = duration(statistics.median(t.input_s for t in others if t.input_s is not None))
    if cause == "input":
        by = slow.worker.input_wait_by or "measured"
        if by.startswith("time outside"):
            return (
                f"in its loop outside the step function (reading the next batch, Python "
                f"between steps): {duration(slow.input_s)} a step against {theirs} on the others"
            )
        return (
            f"in its input: {duration(slow.input_s)} a step waiting for data against "
            f"{theirs} on the others ({by})"
        )
    return (
        f"in its compute: its input wait ({duration(slow.input_s)} a step) is like the "
        "others', the rest of its step is slower"
    )


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
