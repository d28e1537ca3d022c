"""The run's timeline: steps, eager ops, traces, host memory and GPUs in the same windows.

Each source keeps its own bounded windows while the program runs (the steps'
:class:`~gpuwhy.collect.time_windows.TimeWindows`, the GPU sampler's
:mod:`~gpuwhy.collect.windows`); this collector adds what nobody else reads over time
(the program's resident memory and the tf.function traces begun, polled once a second)
and, when facts are asked, lays them all on one grid whose width fits the whole run in
at most ``CAPACITY`` windows (:func:`~gpuwhy.collect.time_windows.width_for`). Its
cost at the end is O(windows), whatever the run's length.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from typing import Any

from gpuwhy.collect.inprocess.activities import ActivityCollector
from gpuwhy.collect.inprocess.base import Collector, Gathering, RunOptions
from gpuwhy.collect.inprocess.functions import FunctionWatcher
from gpuwhy.collect.time_windows import TimeWindows, width_for
from gpuwhy.facts import (
    EagerFacts,
    GpuSamplesFacts,
    GpuSeries,
    GpuWindow,
    RunTimeline,
    RunWindow,
    StepFacts,
)

POLL_S = 1.0
GPU_MEANS = {  # GpuWindow field: the GpuSeries series it is the mean of
    "utilization": "utilization",
    "sm_activity": "sm_activity",
    "sm_clock_mhz": "sm_clock_mhz",
    "power_w": "power_w",
    "pcie_tx_bytes_per_s": "pcie_tx_bytes_per_s",
    "pcie_rx_bytes_per_s": "pcie_rx_bytes_per_s",
}
GPU_PEAKS = {  # GpuWindow field: (series, "high" or "low")
    "utilization_max": ("utilization", "high"),
    "memory_used_max_bytes": ("memory_used_bytes", "high"),
    "sm_clock_min_mhz": ("sm_clock_mhz", "low"),
    "power_max_w": ("power_w", "high"),
}


class _Peak:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0

    def merge(self, other: _Peak) -> None:
        self.value = max(self.value, other.value)

    def copy(self) -> _Peak:
        twin = _Peak()
        twin.value = self.value
        return twin


class _Sum:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def merge(self, other: _Sum) -> None:
        self.value += other.value

    def copy(self) -> _Sum:
        twin = _Sum()
        twin.value = self.value
        return twin


class _Count:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0

    def merge(self, other: _Count) -> None:
        self.value += other.value

    def copy(self) -> _Count:
        twin = _Count()
        twin.value = self.value
        return twin


def resident_bytes() -> int | None:
    """This process's resident memory now (Linux /proc; None elsewhere)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


class RunTimelineCollector(Collector):
    """Section ``timeline``; polls memory and traces once a second on its own thread."""

    section = "timeline"
    order = 45  # after the steps (10), eager ops (30) and GPU samples (40) it lays out
    what = "run timeline"

    @classmethod
    def create(cls, options: RunOptions, made: Sequence[Collector]) -> RunTimelineCollector:
        functions = [c for c in made if isinstance(c, FunctionWatcher)]
        activities = [c for c in made if isinstance(c, ActivityCollector)]
        return cls(functions[0] if functions else None, activities[0] if activities else None)

    def __init__(
        self,
        functions: FunctionWatcher | None = None,
        activities: ActivityCollector | None = None,
    ) -> None:
        self.functions = functions
        self.activities = activities  # GC, checkpoint and stall rows
        self.t0 = time.perf_counter()
        self.memory: TimeWindows[_Peak] = TimeWindows(self.t0, _Peak)
        self.traces: TimeWindows[_Count] = TimeWindows(self.t0, _Count)
        self.tracing: TimeWindows[_Sum] = TimeWindows(self.t0, _Sum)
        self._traces_seen = 0
        self._tracing_seen = 0.0
        self._last_poll = self.t0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, t0: float) -> None:
        self.t0 = t0
        self.memory = TimeWindows(t0, _Peak)
        self.traces = TimeWindows(t0, _Count)
        self.tracing = TimeWindows(t0, _Sum)
        self.poll()
        self._thread = threading.Thread(target=self._run, name="gpuwhy-timeline", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopping.wait(POLL_S):
            self.poll()

    def poll(self, memory: bool = True, at: float | None = None) -> None:
        t = time.perf_counter() if at is None else at
        with self._lock:
            self._last_poll = t
            rss = resident_bytes() if memory else None
            if rss is not None:
                peak = self.memory.at(t)
                peak.value = max(peak.value, rss)
            if self.functions is not None:
                traces, seconds = self.functions.trace_totals()
                if traces > self._traces_seen:
                    self.traces.at(t).value += traces - self._traces_seen
                    self._traces_seen = traces
                if seconds > self._tracing_seen:
                    self.tracing.at(t).value += seconds - self._tracing_seen
                    self._tracing_seen = seconds

    def stop(self) -> None:
        """The traces begun since the last poll are counted in that poll's window (they
        came before the program's end); memory is not read again: what runs now is
        gpuwhy's own work."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        self.poll(memory=False, at=self._last_poll)

    def fill(self, gathering: Gathering) -> RunTimeline:
        facts = gathering.facts
        return laid_out(
            gathering.t_end - gathering.t0,
            facts.steps,
            facts.eager,
            facts.gpu_samples,
            self._rows(width_for(gathering.t_end - gathering.t0)),
        )

    def _rows(self, width: float) -> dict[int, dict]:
        """Memory peaks, trace counts and tracing seconds per window of ``width`` seconds;
        GC, checkpoint seconds and stalls from the activity collector."""
        with self._lock:
            self.memory.coarsen(width)
            self.traces.coarsen(width)
            self.tracing.coarsen(width)
            rows: dict[int, dict] = {}
            for start, peak in self.memory.items():
                rows.setdefault(_index(start - self.t0, width), {})["host_rss_max_bytes"] = (
                    peak.value
                )
            for start, count in self.traces.items():
                rows.setdefault(_index(start - self.t0, width), {})["traces"] = count.value
            for start, total in self.tracing.items():
                row = rows.setdefault(_index(start - self.t0, width), {})
                row["trace_s"] = round(total.value, 6)
        if self.activities is not None:
            for i, row in self.activities.rows(width).items():
                rows.setdefault(i, {}).update(row)
        return rows


def _index(seconds: float, width: float) -> int:
    return max(0, int(seconds // width + 1e-9))


def laid_out(
    run_s: float,
    steps: StepFacts | None,
    eager: EagerFacts | None,
    gpus: GpuSamplesFacts | None,
    rows: dict[int, dict] | None = None,
) -> RunTimeline:
    """Every source's windows on one grid of ``width_for(run_s)`` seconds."""
    width = width_for(run_s)
    rows = {i: dict(row) for i, row in (rows or {}).items()}
    if steps is not None and steps.timeline is not None:
        for span in steps.timeline.windows:
            row = rows.setdefault(_index(span.start_s, width), {})
            row.update(steps=span.steps, step_p50_s=span.p50_s, step_p90_s=span.p90_s)
            row["step_max_s"] = span.max_s
            if span.input_wait_s is not None and span.step_s > 0:
                row["input_wait_share"] = round(span.input_wait_s / span.step_s, 4)
    if eager is not None:
        for start_s, sampled, ops in eager.windows:
            row = rows.setdefault(_index(start_s, width), {})
            row["eager_sampled_steps"] = row.get("eager_sampled_steps", 0) + sampled
            row["_eager_ops"] = row.get("_eager_ops", 0) + ops
    gpu_rows: dict[int, list[GpuWindow]] = {}
    for series in gpus.gpus if gpus is not None else ():
        for i, window in _gpu_windows(series, width).items():
            gpu_rows.setdefault(i, []).append(window)
            rows.setdefault(i, {})
    windows = []
    for i in sorted(rows):
        if i * width > run_s:
            continue  # read after the program ended (a poll racing the end)
        row = rows[i]
        ops = row.pop("_eager_ops", None)
        if ops is not None and row.get("eager_sampled_steps"):
            row["eager_ops_per_step"] = round(ops / row["eager_sampled_steps"], 3)
        windows.append(
            RunWindow(start_s=round(i * width, 6), gpus=tuple(gpu_rows.get(i, ())), **row)
        )
    return RunTimeline(width_s=width, run_s=round(run_s, 6), windows=tuple(windows))


def _gpu_windows(series: GpuSeries, width: float) -> dict[int, GpuWindow]:
    """One GPU's samples (or windows of samples) summed into the grid's windows."""
    counts = series.window_counts()
    index = [_index(t, width) for t in series.centres()]
    sums: dict[int, dict[str, list[float]]] = {}
    samples: dict[int, int] = {}
    for k, i in enumerate(index):
        samples[i] = samples.get(i, 0) + counts[k]
    for field, name in GPU_MEANS.items():
        values = getattr(series, name)
        known = series.column(name).known
        for k, i in enumerate(index):
            if k < len(values) and values[k] is not None and known[k]:
                acc = sums.setdefault(i, {}).setdefault(field, [0.0, 0])
                acc[0] += values[k] * known[k]
                acc[1] += known[k]
    peaks: dict[int, dict[str, float]] = {}
    for field, (name, side) in GPU_PEAKS.items():
        spread = series.column(name)
        values_side = spread.high if side == "high" else spread.low
        for k, i in enumerate(index):
            v = values_side[k] if k < len(values_side) else None
            if v is None:
                continue
            now = peaks.setdefault(i, {}).get(field)
            better = now is None or (v > now if side == "high" else v < now)
            if better:
                peaks[i][field] = v
    out = {}
    for i, n in samples.items():
        means: dict[str, Any] = {
            f: round(total / known, 4) for f, (total, known) in sums.get(i, {}).items()
        }
        extremes: dict[str, Any] = dict(peaks.get(i, {}))
        if "memory_used_max_bytes" in extremes:
            extremes["memory_used_max_bytes"] = int(extremes["memory_used_max_bytes"])
        out[i] = GpuWindow(index=series.index, samples=n, **means, **extremes)
    return out
