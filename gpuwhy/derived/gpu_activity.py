"""GPU samples lined up with the run: which samples count, and which GPUs were the program's.

Steps and samples share one axis (seconds since the run started), so "activity during
steps" is the mean of the samples that fall inside the training windows. A window is a
run of consecutive steps; the gaps *between* steps stay inside it (the GPU idling there
is exactly what the rules look for), while a long pause (evaluation, a checkpoint) splits
it. A 10 Hz sampler cannot resolve a 5 ms step, and NVML's utilisation is an average over
its own past period, so single steps are never judged: only windows.

Without steps (``gpuwhy watch``) the window is the busy part of the run: from the first
to the last sample in which the watched processes held memory on that GPU, or, where no
process memory was readable, in which the GPU was active at all.

A run longer than the steps a record keeps one by one is judged on all of it: beyond
them, the step timeline's windows that hold steps are training windows too.

A long run's series are windows of samples (facts/gpu_samples.py): a window counts as
inside when its middle is, with all its samples, and every mean weighs each window by the
samples it holds, so a day's run is judged on all of it.
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeGuard

from gpuwhy.derived.step_timeline import later_spans
from gpuwhy.facts import Facts, GpuSamplesFacts, GpuSeries, StepFacts

MIN_SAMPLES = 5  # fewer samples in the windows say nothing (0.5 s at 10 Hz)
JOIN_GAP_S = 1.0  # steps closer than this (or 5 typical steps) form one window
JOIN_GAP_STEPS = 5
Window = tuple[float, float]


@dataclass(frozen=True)
class Activity:
    """Means over the samples of one GPU inside the windows (None: never measured)."""

    samples: int
    utilization: float | None
    sm_activity: float | None = None
    sm_occupancy: float | None = None
    tensor_activity: float | None = None
    pcie_tx_bytes_per_s: float | None = None
    pcie_rx_bytes_per_s: float | None = None
    sm_clock_mhz: float | None = None
    power_w: float | None = None
    graphics_activity: float | None = None
    driver_utilization: float | None = None

    def busy(self) -> float | None:
        """The best activity measure there is, in derived/gpu_busy.py's order: GPM/DCGM
        graphics utilisation, SM activity, the driver's samples, its point readings."""
        for value in (
            self.graphics_activity,
            self.sm_activity,
            self.driver_utilization,
            self.utilization,
        ):
            if value is not None:
                return value
        return None


def step_windows(steps: StepFacts) -> list[Window]:
    """The training windows after warm-up, on the samples' axis: the steps kept one by
    one, then, in a run longer than those, the timeline's windows that hold its later
    steps (:func:`later_spans`), all joined by one rule."""
    skip = steps.warmup // max(1, steps.steps_per_call)
    intervals = list(zip(steps.starts, steps.durations))
    if len(intervals) > skip:
        intervals = intervals[skip:]
    later = later_spans(steps)
    if not intervals and not later:
        return []
    typical = (
        statistics.median(d for _, d in intervals)
        if intervals
        else min((w.p50_s for _, _, w in later if w.p50_s is not None), default=0.0)
    )
    join = max(JOIN_GAP_S, JOIN_GAP_STEPS * typical)
    windows: list[list[float]] = []
    spans = [(start, start + duration) for start, duration in intervals]
    for start, end in spans + [(a, b) for a, b, _ in later]:
        if windows and start - windows[-1][1] <= join:
            windows[-1][1] = max(windows[-1][1], end)
        else:
            windows.append([start, end])
    stored = sum(1 for _ in steps.starts)
    kept_only = steps.count > stored * max(1, steps.steps_per_call)
    if kept_only and steps.phases and steps.timeline is None:
        # A record without a timeline kept only the first steps: the last window lasts
        # to the end of the innermost phase (an epoch, fit) that holds it.
        last = windows[-1][0]
        around = [(b - a, b) for _, a, b in steps.phases if a <= last <= b]
        if around:
            windows[-1][1] = max(windows[-1][1], min(around)[1])
    return [(a, b) for a, b in windows]


def busy_window(series: GpuSeries) -> list[Window]:
    """Where the program held this GPU, or else where the GPU was active at all."""
    spans = list(zip(series.t, series.ends()))
    held = [span for span, own in zip(spans, series.own_memory_bytes) if own]
    if held:
        return [(held[0][0], held[-1][1] + 1.0)]  # process memory is read once a second
    active = [span for span, u in zip(spans, series.utilization) if u]
    return [(active[0][0], active[-1][1])] if active else []


def windows_for(facts: Facts, series: GpuSeries) -> tuple[list[Window], str]:
    """(windows, what they are) for one GPU: steps when known, else the busy part."""
    if facts.steps is not None and facts.steps.starts:
        return step_windows(facts.steps), "during steps"
    return busy_window(series), "while the program used the GPU"


def in_windows(times: Sequence[float], windows: list[Window]) -> list[bool]:
    """For each time, whether it falls in a window (bisect: an hour at 10 Hz, many windows)."""
    ordered = sorted(windows)
    starts = [a for a, _ in ordered]
    flags = []
    for t in times:
        i = bisect.bisect_right(starts, t) - 1
        flags.append(i >= 0 and t <= ordered[i][1])
    return flags


def activity(series: GpuSeries, windows: list[Window]) -> Activity:
    mask = in_windows(series.centres(), windows)
    inside = lambda name: series.mean(name, mask)
    return Activity(
        samples=sum(n for n, keep in zip(series.window_counts(), mask) if keep),
        utilization=inside("utilization"),
        sm_activity=inside("sm_activity"),
        sm_occupancy=inside("sm_occupancy"),
        tensor_activity=inside("tensor_activity"),
        pcie_tx_bytes_per_s=inside("pcie_tx_bytes_per_s"),
        pcie_rx_bytes_per_s=inside("pcie_rx_bytes_per_s"),
        sm_clock_mhz=inside("sm_clock_mhz"),
        power_w=inside("power_w"),
        graphics_activity=inside("graphics_activity"),
        driver_utilization=inside("driver_utilization"),
    )


def own_peak(series: GpuSeries) -> int | None:
    """Most memory the watched processes held on this GPU; None when never readable."""
    peak = series.peak("own_memory_bytes")
    return None if peak is None else int(peak)


def others_peak(series: GpuSeries) -> int:
    return sum(p.used_bytes or 0 for p in series.others)


def program_gpus(samples: GpuSamplesFacts) -> list[GpuSeries]:
    """The GPUs the program used: where its processes held memory; where no process
    memory was readable at all (a container hides pids), those that were ever active."""
    if any(own_peak(s) is not None for s in samples.gpus):
        held = [s for s in samples.gpus if (own_peak(s) or 0) > 0]
        if held or not any(s.others for s in samples.gpus):
            return held
    return [s for s in samples.gpus if any(u for u in s.utilization)]


def tf_peaks_by_gpu(samples: GpuSamplesFacts) -> dict[int, tuple[str, int]]:
    """TensorFlow's peaks (``"GPU:0"`` ...) by NVML index, where the pairing is sound.

    TF numbers the GPUs it can see (CUDA_VISIBLE_DEVICES, fastest first); NVML numbers all
    by PCI bus. The pairing matters only for the device's size: on a machine whose GPUs
    are all the same model any pairing gives the right limit, so TF's index is used; on a
    mixed machine only when TF sees every GPU NVML sees.
    """
    peaks = samples.tf_peak_memory_bytes or {}
    totals = {s.memory_total_bytes for s in samples.gpus}
    uniform = len(totals) == 1
    paired: dict[int, tuple[str, int]] = {}
    for name, peak in peaks.items():
        try:
            index = int(name.rsplit(":", 1)[1])
        except (IndexError, ValueError):
            continue
        if index < len(samples.gpus) and (uniform or len(peaks) == len(samples.gpus)):
            paired[samples.gpus[index].index] = (name, int(peak))
    return paired


def usable(samples: GpuSamplesFacts | None) -> TypeGuard[GpuSamplesFacts]:
    return samples is not None and not samples.error and bool(samples.gpus)


def busy_span(series: GpuSeries, name: str) -> tuple[int, int] | None:
    """The entries ``(first, last)`` of the stretch of the run where the 0/1 series
    ``name`` (of busy samples) was 1 most: the stretch whose samples at 1 outnumber those
    at 0 by most (Kadane's maximum-sum segment, each sample scoring +1/2 at 1 and -1/2 at
    0). A stray sample early in the run does not move its start, as a stretch from it
    would take in the samples at 0 that follow; None when no sample was 1."""
    values, known = getattr(series, name), series.column(name).known
    best, best_span = 0.0, None
    running, start = 0.0, 0
    for k, (v, n) in enumerate(zip(values, known)):
        if not n or v is None:
            continue
        if running <= 0:
            running, start = 0.0, k
        running += n * (v - 0.5)
        if running > best:
            best, best_span = running, (start, k)
    return best_span
