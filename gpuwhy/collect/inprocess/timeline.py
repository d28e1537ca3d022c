"""The run's timeline: steps, eager ops, traces, host memory and GPUs in the same windows.

Each source keeps its own bounded windows while the program runs (the steps'
:class:`~gpuwhy.collect.time_windows.TimeWindows`, the GPU sampler's
:mod:`~gpuwhy.collect.windows`); this collector adds what nobody else reads over time
(the program's resident memory and the host's CPU time, polled once a second; the
function watcher's windows of its calls and traces, each where it ran; as that memory grows, a few censuses of the Python heap name what
grows: :mod:`~gpuwhy.collect.inprocess.heap_census`) and, when facts are asked, lays them all on one grid whose width fits the whole run in
at most ``CAPACITY`` windows (:func:`~gpuwhy.collect.time_windows.width_for`). Its
cost at the end is O(windows), whatever the run's length.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from gpuwhy.collect.host_cpu import cpu_snapshot, process_run_queue_seconds, run_queue_seconds
from gpuwhy.collect.host_memory import host_memory
from gpuwhy.collect.inprocess.activities import ActivityCollector
from gpuwhy.collect.inprocess.base import Collector, Gathering, RunOptions
from gpuwhy.collect.inprocess.functions import FunctionWatcher
from gpuwhy.collect.inprocess.heap_census import HeapCensus
from gpuwhy.collect.inprocess.open_figures import FigureWatch
from gpuwhy.collect.inprocess.pipelines import PipelineCollector
from gpuwhy.collect.time_windows import TimeWindows, width_for
from gpuwhy.derived.gpu_busy import busy_column
from gpuwhy.facts import (
    EagerFacts,
    GpuSamplesFacts,
    GpuSeries,
    GpuWindow,
    RunTimeline,
    RunWindow,
    StepFacts,
)
from gpuwhy.tfapi.memory import tf_memory_in_use

POLL_S = 1.0
GPU_MEANS = {  # GpuWindow field: the GpuSeries series it is the mean of
    "utilization": "utilization",
    "sm_activity": "sm_activity",
    "sm_clock_mhz": "sm_clock_mhz",
    "power_w": "power_w",
    "pcie_tx_bytes_per_s": "pcie_tx_bytes_per_s",
    "pcie_rx_bytes_per_s": "pcie_rx_bytes_per_s",
    "throttle_share": "throttled",
}
GPU_PEAKS = {  # GpuWindow field: (series, "high" or "low")
    "utilization_max": ("utilization", "high"),
    "memory_used_max_bytes": ("memory_used_bytes", "high"),
    "sm_clock_min_mhz": ("sm_clock_mhz", "low"),
    "power_max_w": ("power_w", "high"),
    "temperature_max_c": ("temperature_c", "high"),
    "power_limit_w": ("power_limit_w", "low"),
    "pcie_gen_busy_min": ("pcie_gen_busy", "low"),
    "pcie_width_busy_min": ("pcie_width_busy", "low"),
    "others_memory_max_bytes": ("others_memory_bytes", "high"),
}
GPU_WHOLE = frozenset(  # counts and bytes: kept whole numbers
    {"memory_used_max_bytes", "pcie_gen_busy_min", "pcie_width_busy_min", "others_memory_max_bytes"}
)
GPU_SUMS = {"pcie_replays": "pcie_replays"}  # GpuWindow field: the series summed


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


class _Cpu:
    """The host's CPU between polls: machine busy and total jiffies (all cores), this
    process tree's CPU seconds and the wall seconds they cover."""

    __slots__ = (
        "busy",
        "process_s",
        "queued_s",
        "queued_wall_s",
        "threads_queued_s",
        "threads_read",
        "total",
        "wall_s",
    )

    def __init__(self) -> None:
        self.busy = self.total = 0
        self.process_s = self.wall_s = 0.0
        self.queued_s = self.queued_wall_s = 0.0  # the main thread waiting for a core
        self.threads_queued_s = 0.0  # all its threads, added up
        self.threads_read = False

    def merge(self, other: _Cpu) -> None:
        self.busy += other.busy
        self.total += other.total
        self.process_s += other.process_s
        self.wall_s += other.wall_s
        self.queued_s += other.queued_s
        self.queued_wall_s += other.queued_wall_s
        self.threads_queued_s += other.threads_queued_s
        self.threads_read = self.threads_read or other.threads_read

    def copy(self) -> _Cpu:
        twin = _Cpu()
        twin.merge(self)
        return twin

    def shares(self, cores: int) -> dict[str, float]:
        """This program's and the other processes' share of all cores' time."""
        if not self.total or self.wall_s <= 0:
            return {}
        process = min(1.0, self.process_s / (self.wall_s * cores))
        others = max(0.0, min(1.0, self.busy / self.total) - process)
        out = {"cpu_process_share": round(process, 4), "cpu_others_share": round(others, 4)}
        if self.queued_wall_s > 0:
            queued = min(1.0, max(0.0, self.queued_s / self.queued_wall_s))
            out["main_thread_queued_share"] = round(queued, 4)
        if self.threads_read:
            out["threads_queued_s"] = round(self.threads_queued_s, 6)
        return out


def resident_bytes() -> int | None:
    """This process's resident memory now (Linux /proc; None elsewhere)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


class RunTimelineCollector(Collector):
    """Section ``timeline``; polls memory and CPU once a second on its own thread; the
    tf.function columns come from the function watcher, where its calls ran."""

    name = section = "timeline"
    # the sections it lays out, and the traces, activities and pipelines it polls
    reads_from = ("steps", "tracing", "eager", "stalls", "gpu_samples", "tfdata")
    what = "run timeline"

    @classmethod
    def create(cls, options: RunOptions, made: Sequence[Collector]) -> RunTimelineCollector:
        functions = [c for c in made if isinstance(c, FunctionWatcher)]
        activities = [c for c in made if isinstance(c, ActivityCollector)]
        pipelines = [c for c in made if isinstance(c, PipelineCollector)]
        return cls(
            functions[0] if functions else None,
            activities[0] if activities else None,
            pipelines[0] if pipelines else None,
        )

    def __init__(
        self,
        functions: FunctionWatcher | None = None,
        activities: ActivityCollector | None = None,
        pipelines: PipelineCollector | None = None,
    ) -> None:
        self.functions = functions
        self.activities = activities  # GC, checkpoint and stall rows
        self.pipelines = pipelines  # Keras fit's consumer time per element
        self.t0 = time.perf_counter()
        self.census: HeapCensus | None = None
        self.figures = FigureWatch()  # matplotlib's open figures, where pyplot is used
        self._rss: int | None = None
        self.memory: TimeWindows[_Peak] = TimeWindows(self.t0, _Peak)
        self.device_memory: TimeWindows[_Peak] = TimeWindows(self.t0, _Peak)
        self.cpu: TimeWindows[_Cpu] = TimeWindows(self.t0, _Cpu)
        self.cores = os.cpu_count() or 1  # /proc/stat's first line counts them all
        self._cpu_seen: tuple | None = None
        self._pid = os.getpid()  # made in the program's main thread: its loop's
        self._queued_seen: float | None = None
        self._threads_queued_seen: float | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, t0: float) -> None:
        self.t0 = t0
        self._pid = os.getpid()
        self.memory = TimeWindows(t0, _Peak)
        self.device_memory = TimeWindows(t0, _Peak)
        self.cpu = TimeWindows(t0, _Cpu)
        calls = self.functions.outermost_calls if self.functions is not None else None
        self.census = HeapCensus(t0, calls)
        self.poll()
        self._thread = threading.Thread(target=self._run, name="gpuwhy-timeline", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopping.wait(POLL_S):
            self.poll()
            self._census()

    def _census(self) -> None:
        """A heap census when the memory just read calls for one (outside the lock: it
        takes a tenth of a second); one that fails takes no more."""
        census, rss = self.census, self._rss
        if census is None or rss is None:
            return
        start = time.perf_counter()
        activities = self.activities
        if activities is not None and census.due(start, rss):
            activities.own_pause_begins(start)  # a stall it causes is gpuwhy's own
        try:
            census.observe(start, rss)
        except Exception:  # noqa: BLE001 - the census is a guess's evidence, never a failure
            self.census = None
        if activities is not None and activities.own_pause_running():
            activities.own_pause(start, time.perf_counter(), "gpuwhy's heap census")

    def poll(self) -> None:
        t = time.perf_counter()
        with self._lock:
            rss = resident_bytes()
            if rss is not None:
                self._rss = rss
                peak = self.memory.at(t)
                peak.value = max(peak.value, rss)
            self._poll_cpu(t)
            in_use = tf_memory_in_use()
            if in_use:
                peak = self.device_memory.at(t)
                peak.value = max(peak.value, sum(in_use.values()))
        try:
            self.figures.poll(t - self.t0)
        except Exception:  # noqa: BLE001 - a count of figures is never a failure
            pass

    def _poll_cpu(self, t: float) -> None:
        now = cpu_snapshot()
        seen, self._cpu_seen = self._cpu_seen, now
        queued = run_queue_seconds(self._pid)
        queued_seen, self._queued_seen = self._queued_seen, queued
        if queued is not None and queued_seen is not None and seen is not None:
            window = self.cpu.at(t)
            window.queued_s += queued - queued_seen
            window.queued_wall_s += now[0] - seen[0]
        threads = process_run_queue_seconds(self._pid)
        threads_seen, self._threads_queued_seen = self._threads_queued_seen, threads
        if threads is not None and threads_seen is not None:
            window = self.cpu.at(t)
            window.threads_queued_s += max(0.0, threads - threads_seen)  # a thread ended
            window.threads_read = True
        if seen is None or now[2] is None or seen[2] is None:
            return
        window = self.cpu.at(t)
        window.busy += now[2] - seen[2]
        window.total += now[3] - seen[3]
        window.process_s += now[1] - seen[1]
        window.wall_s += now[0] - seen[0]

    def stop(self) -> None:
        """Memory is not read again: what runs now is gpuwhy's own work."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        self.figures.stop()

    def fill(self, gathering: Gathering) -> RunTimeline:
        facts = gathering.facts
        timeline = laid_out(
            gathering.t_end - gathering.t0,
            facts.steps,
            facts.eager,
            facts.gpu_samples,
            self._rows(width_for(gathering.t_end - gathering.t0)),
        )
        figures = self.figures.fact()
        if figures is not None:
            timeline = replace(timeline, open_figures=figures)
        census = self.census
        if census is None or not census.censuses:
            return timeline
        return replace(
            timeline,
            heap_censuses=census.censuses,
            heap_census_s=round(census.seconds, 4),
            growing=census.growing(),
            growing_types=census.growing_types(),
        )

    def _rows(self, width: float) -> dict[int, dict]:
        """Memory peaks, trace counts, tracing and tf.function call seconds and CPU
        shares per window of ``width`` seconds; GC, checkpoint seconds and stalls from
        the activity collector."""
        with self._lock:
            self.memory.coarsen(width)
            self.device_memory.coarsen(width)
            self.cpu.coarsen(width)
            rows: dict[int, dict] = {}
            for start, peak in self.memory.items():
                rows.setdefault(_index(start - self.t0, width), {})["host_rss_max_bytes"] = (
                    peak.value
                )
            for start, peak in self.device_memory.items():
                row = rows.setdefault(_index(start - self.t0, width), {})
                row["tf_gpu_memory_max_bytes"] = peak.value
            for start, cpu in self.cpu.items():
                rows.setdefault(_index(start - self.t0, width), {}).update(cpu.shares(self.cores))
        if self.functions is not None:
            for i, row in self.functions.trace_rows(width).items():
                rows.setdefault(i, {}).update(row)
        if self.activities is not None:
            for i, row in self.activities.rows(width).items():
                rows.setdefault(i, {}).update(row)
        if self.pipelines is not None:
            for i, row in self.pipelines.fit_gap_rows(self.t0, width).items():
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
    return RunTimeline(
        width_s=width,
        run_s=round(run_s, 6),
        host_memory_bytes=host_memory()[0],
        windows=tuple(windows),
    )


def _gpu_windows(series: GpuSeries, width: float) -> dict[int, GpuWindow]:
    """One GPU's samples (or windows of samples) summed into the grid's windows."""
    counts = series.window_counts()
    index = [_index(t, width) for t in series.centres()]
    sums: dict[int, dict[str, list[float]]] = {}
    samples: dict[int, int] = {}
    for k, i in enumerate(index):
        samples[i] = samples.get(i, 0) + counts[k]
    for field, name in {**GPU_MEANS, "busy": busy_column(series)}.items():
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
    totals: dict[int, dict[str, Any]] = {}
    for field, name in GPU_SUMS.items():
        values, known = getattr(series, name), series.column(name).known
        for k, i in enumerate(index):
            if k < len(values) and values[k] is not None and known[k]:
                row = totals.setdefault(i, {})
                row[field] = row.get(field, 0) + round(values[k] * known[k])
    reasons: dict[int, dict[str, None]] = {}  # per window, the slowdowns seen, in bit order
    for reason in series.clock_reasons:
        if reason.slowdown:
            for k, i in enumerate(index):
                if k < len(reason.share) and reason.share[k]:
                    reasons.setdefault(i, {})[reason.name] = None
    out = {}
    for i, n in samples.items():
        means: dict[str, Any] = {
            f: round(total / known, 4) for f, (total, known) in sums.get(i, {}).items()
        }
        extremes: dict[str, Any] = dict(peaks.get(i, {}))
        for whole in GPU_WHOLE:
            if whole in extremes:
                extremes[whole] = int(extremes[whole])
        out[i] = GpuWindow(
            index=series.index,
            samples=n,
            **means,
            **extremes,
            **totals.get(i, {}),
            throttle_reasons=tuple(reasons.get(i, ())),
        )
    return out
