"""host.memory-growth: the program's memory grows steadily while it trains."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuwhy.derived.change_points import spearman, theil_sen
from gpuwhy.facts import Facts
from gpuwhy.finding import Finding
from gpuwhy.formatting import byte_size, run_time
from gpuwhy.rules.base import Rule

MiB = 2**20
MIN_WINDOWS = 8

RETRACE_FIX = """\
# every trace keeps a new graph in the tf.function's cache: stop the retracing
# (launch.retracing names the function and the argument that changes), e.g.
@tf.function(reduce_retracing=True)"""
FIX = """\
# keep Python numbers, not tensors, in what outlives a step:
losses.append(float(loss))          # not losses.append(loss): each tensor keeps its buffer
# predictions in a loop: model(x, training=False) instead of model.predict(x) per batch"""


@dataclass(frozen=True)
class Growth:
    """The program's resident memory over the training windows, as a straight line
    against the steps run (a leak keeps so much per step, whatever the pace)."""

    start_s: float
    end_s: float
    first_bytes: int  # the line at the first window
    last_bytes: int  # at the last
    bytes_per_step: float
    late_bytes_per_step: float  # the slope over the last third alone
    bytes_per_s: float  # the same growth over the wall time it took
    rank: float  # Spearman rho of memory with time
    windows: int
    steps: int  # training steps in those windows
    traces: int = 0  # tf.function traces begun in them
    traced_windows: int = 0  # of them, those with a trace

    @property
    def grown(self) -> float:
        return self.last_bytes - self.first_bytes


def growth(facts: Facts) -> Growth | None:
    """The memory line over the main loop's windows after its warm-up (None: fewer than
    ``MIN_WINDOWS`` windows read)."""
    timeline, steps = facts.timeline, facts.steps
    if timeline is None or steps is None or not steps.count:
        return None
    begin, end = steps.first_step_s or 0.0, float("inf")
    if steps.loops:
        begin = steps.loops[0].first_s
        end = steps.loops[0].last_s if steps.loops[0].last_s is not None else end
    if steps.warmup and steps.warmup < len(steps.starts):
        begin = max(begin, steps.starts[steps.warmup])
    rows = [
        w
        for w in timeline.windows
        if w.host_rss_max_bytes and begin <= w.start_s <= end and w.steps
    ]
    if len(rows) < MIN_WINDOWS:
        return None
    run, done = [], 0
    for w in rows:
        done += w.steps
        run.append(float(done))
    values = [float(w.host_rss_max_bytes or 0) for w in rows]
    per_step, intercept = theil_sen(values, run)
    third = len(rows) // 3
    late_per_step, _ = theil_sen(values[-third:], run[-third:])
    seconds = rows[-1].start_s + timeline.width_s - rows[0].start_s
    first = intercept + per_step * run[0]
    last = intercept + per_step * run[-1]
    return Growth(
        start_s=rows[0].start_s,
        end_s=rows[-1].start_s + timeline.width_s,
        first_bytes=int(first),
        last_bytes=int(last),
        bytes_per_step=per_step,
        late_bytes_per_step=late_per_step,
        bytes_per_s=(last - first) / seconds if seconds > 0 else 0.0,
        rank=round(spearman(values), 3),
        windows=len(rows),
        steps=int(run[-1]),
        traces=sum(w.traces for w in rows),
        traced_windows=sum(1 for w in rows if w.traces),
    )


class MemoryGrowth(Rule):
    """The program's memory grows steadily while it trains.

    ## What it detects
    The program's resident memory (read once a second through the whole run) rises
    along a straight line against the training steps: a robust (Theil-Sen) line over
    the main loop's windows after its warm-up, whose rank correlation with time is at
    least `min_rank`, that keeps at least `min_bytes_per_step` per step, grows by at
    least `min_growth_mib` and `min_growth_share` of where it started, and keeps
    growing at the same pace per step over the last third of the training (at least
    half its overall pace). TF's own start-up creep (allocator arenas, tf.data buffers,
    autotuning) slows down as the run goes on, and a cache or a shuffle buffer that fills
    during the first epoch stops: neither is a leak. The finding gives the rate, the
    memory per training step, and when the host's memory would run out at that rate.

    ## Why is this slow?
    Memory that grows with every step is something the program keeps: a Python list
    of loss tensors (each one holds its buffer and, in eager mode, a TF handle),
    `model.predict` in a loop (each call builds and keeps a new function and its
    data), a `tf.data` cache on a dataset that is not finite, results appended to a
    history; a tf.function that retraces keeps every graph it traced. It costs time
    before it costs the job: the garbage collector walks a larger heap at each
    collection, the host starts to swap, and in the end the kernel's OOM killer stops
    the job hours in.

    ## Example
    ```python
    losses = []
    for x, y in dataset:
        loss = train_step(x, y)
        losses.append(loss)                 # a tensor per step, kept for good
    ```

    Use instead:
    ```python
    losses = []
    for x, y in dataset:
        loss = train_step(x, y)
        losses.append(float(loss))          # a Python float: a few bytes
    ```

    ## Options
    - `min_growth_mib`: growth over the training, in MiB, below which nothing is said (16).
    - `min_growth_share`: growth as a share of the memory at the start of training (0.02).
    - `min_bytes_per_step`: memory kept per training step (512).
    - `min_rank`: rank correlation of memory with time (0.9).
    """

    id = "host.memory-growth"
    severity = "medium"
    status = "preview"
    since = "0.4.0"
    needs = ("steps", "timeline")
    options = {
        "min_growth_mib": 16,
        "min_growth_share": 0.02,
        "min_bytes_per_step": 512,
        "min_rank": 0.9,
    }
    question = "Why does my training's memory keep growing?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        line = growth(facts)
        if line is None or line.grown <= 0 or line.rank < options["min_rank"]:
            return []
        if line.grown < options["min_growth_mib"] * MiB:
            return []
        if line.grown < options["min_growth_share"] * max(line.first_bytes, 1):
            return []
        if line.bytes_per_step < options["min_bytes_per_step"]:
            return []
        if line.late_bytes_per_step < 0.5 * line.bytes_per_step:
            return []  # it grew, then slowed or stopped: start-up, a buffer that filled
        per_hour = line.bytes_per_s * 3600
        per_step = line.bytes_per_step
        timeline = facts.timeline
        host = timeline.host_memory_bytes if timeline is not None else None
        runs_out = None
        if host and line.bytes_per_s > 0:
            runs_out = max(0.0, (host - line.last_bytes) / line.bytes_per_s)
        # traces all along the growth: each one keeps a graph (a retrace storm's memory)
        retracing = line.traces >= 10 and line.traced_windows >= line.windows / 2
        title = (
            f"The program's memory grows {byte_size(line.bytes_per_s * 60)} a minute while "
            f"it trains ({byte_size(line.first_bytes)} -> {byte_size(line.last_bytes)} "
            f"from {run_time(line.start_s)} to {run_time(line.end_s)}"
            + (f", {byte_size(per_step)} per step" if per_step else "")
            + (
                f") while tf.function traced {line.traces:,} times: each trace keeps its graph"
                if retracing
                else "): something keeps what each step makes"
            )
        )
        high = runs_out is not None and runs_out < 24 * 3600
        return [
            self.finding(
                title,
                severity="high" if high else self.severity,
                evidence={
                    "from_s": line.start_s,
                    "until_s": line.end_s,
                    "first_bytes": line.first_bytes,
                    "last_bytes": line.last_bytes,
                    "bytes_per_hour": round(per_hour),
                    "bytes_per_step": round(per_step) if per_step else None,
                    "rank_correlation": line.rank,
                    "windows": line.windows,
                    "host_memory_bytes": host,
                    "host_full_in_s": round(runs_out) if runs_out is not None else None,
                    "traces_meanwhile": line.traces,
                },
                fix=RETRACE_FIX if retracing else FIX,
                estimated_gain=(
                    f"the host's memory runs out in about {run_time(runs_out)} at this rate"
                    if runs_out is not None
                    else None
                ),
            )
        ]
