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
    """The program's resident memory over the training windows, as a straight line."""

    start_s: float
    end_s: float
    first_bytes: int  # the line at the start
    last_bytes: int  # at the end
    bytes_per_s: float
    rank: float  # Spearman rho of memory with time
    late_bytes_per_s: float  # the slope over the last third alone
    windows: int
    steps: int  # training steps in those windows
    traces: int = 0  # tf.function traces begun in them
    traced_windows: int = 0  # of them, those with a trace

    @property
    def grown(self) -> float:
        return self.last_bytes - self.first_bytes


def growth(facts: Facts) -> Growth | None:
    """The memory line over the main loop's windows after its first step (None: fewer
    than 8 windows read)."""
    timeline, steps = facts.timeline, facts.steps
    if timeline is None or steps is None or not steps.count:
        return None
    begin, end = steps.first_step_s or 0.0, float("inf")
    if steps.loops:
        begin = steps.loops[0].first_s
        end = steps.loops[0].last_s if steps.loops[0].last_s is not None else end
    rows = [
        w
        for w in timeline.windows
        if w.host_rss_max_bytes and begin <= w.start_s <= end and w.steps
    ]
    if len(rows) < 8:
        return None
    times = [w.start_s for w in rows]
    values = [float(w.host_rss_max_bytes or 0) for w in rows]
    slope, intercept = theil_sen_timed(times, values)
    late = rows[-len(rows) // 3 :]
    late_slope, _ = theil_sen_timed(
        [w.start_s for w in late], [float(w.host_rss_max_bytes or 0) for w in late]
    )
    return Growth(
        start_s=times[0],
        end_s=times[-1] + timeline.width_s,
        first_bytes=int(intercept + slope * times[0]),
        last_bytes=int(intercept + slope * (times[-1] + timeline.width_s)),
        bytes_per_s=slope,
        rank=round(spearman(values), 3),
        late_bytes_per_s=late_slope,
        windows=len(rows),
        steps=sum(w.steps for w in rows),
        traces=sum(w.traces for w in rows),
        traced_windows=sum(1 for w in rows if w.traces),
    )


def theil_sen_timed(times: list[float], values: list[float]) -> tuple[float, float]:
    """Theil-Sen over windows of equal width: the slope per index, per second."""
    if len(times) < 2:
        return 0.0, values[0] if values else 0.0
    per_index, _ = theil_sen(values)
    width = (times[-1] - times[0]) / (len(times) - 1) or 1.0
    slope = per_index / width
    intercepts = sorted(v - slope * t for t, v in zip(times, values))
    return slope, intercepts[len(intercepts) // 2]


class MemoryGrowth(Rule):
    """The program's memory grows steadily while it trains.

    ## What it detects
    The program's resident memory (read once a second through the whole run) rises
    along a straight line over the training windows: a robust (Theil-Sen) line whose
    rank correlation with time is at least `min_rank`, that grows by at least
    `min_growth_mib` and `min_growth_share` of where it started, and that still grows
    over the last third of the training (a cache or a shuffle buffer that fills during
    the first epoch and then stops is not a leak). The finding gives the rate, the
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
    - `min_growth_mib`: growth over the training, in MiB, below which nothing is said (48).
    - `min_growth_share`: growth as a share of the memory at the start of training (0.10).
    - `min_rank`: rank correlation of memory with time (0.9).
    """

    id = "host.memory-growth"
    severity = "medium"
    status = "preview"
    since = "0.4.0"
    needs = ("steps", "timeline")
    options = {"min_growth_mib": 48, "min_growth_share": 0.10, "min_rank": 0.9}
    question = "Why does my training's memory keep growing?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        line = growth(facts)
        if line is None or line.grown <= 0 or line.rank < options["min_rank"]:
            return []
        if line.grown < options["min_growth_mib"] * MiB:
            return []
        if line.grown < options["min_growth_share"] * max(line.first_bytes, 1):
            return []
        if line.late_bytes_per_s < 0.5 * line.bytes_per_s:
            return []  # it grew, then stopped: a buffer that filled
        per_hour = line.bytes_per_s * 3600
        per_step = line.grown / line.steps if line.steps else None
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
