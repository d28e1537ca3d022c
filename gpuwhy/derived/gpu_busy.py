"""How busy a GPU was: the one definition the verdict, the findings, the timeline, the
live metrics, ``diff`` and ``merge`` all read.

"Busy" is the share of time the GPU executed the program's work, measured over the span
in which the program used the GPU, from the best source the run had:

1. an integrating time share: GPM's graphics utilisation (Hopper and newer) or a
   dcgm-exporter's GR_ENGINE_ACTIVE. Both integrate hardware counters between two
   readings, so a load of any period reads right;
2. SM activity (GPM or DCGM) where the run had no time share (recordings made before
   gpuwhy read it): it integrates too, but reads the share of SMs busy, so a kernel that
   does not fill the GPU reads low (0.85-0.89 of the time share on the H100's duty
   loops). Said so in ``why``;
3. the driver's own utilisation samples (``nvmlDeviceGetSamples``, one every 200 ms on
   an H100). On the H100's duty loops they tracked the truth (47-49 % for 51 %, 18-20 %
   for 21 %), but a sample is one reading per period, and a load whose period lies near
   a multiple or divisor of it shows each sample the same few phases; the aliasing guard
   (:func:`aliasing`, :func:`beat`) marks such a figure unreliable: from the step period
   where ``run`` knows it, else from the samples' own slow sweep. The guard is
   conservative: it was not seen to fire wrongly on those loops, nor proved needed;
4. point readings (``nvmlDeviceGetUtilizationRates``, the driver's latest sample read
   again each tick) only in recordings that kept nothing better: never reliable (the
   100/100 loop's slid from 53 % to 1 % and back while its truth stayed at 51 %).

Phases: in ``run`` the steady part is the steps after warm-up (derived/gpu_activity.py's
step windows); in ``watch`` it is the stretches of sustained activity found in the
series (:func:`steady_stretches`). The rest of the span is start-up (imports,
compilation, autotuning) and pauses.

What kind of idle: where a reliable time share exists beside SM activity, ``space_share``
(SM activity over time share) says whether the kernels fill the GPU while they run.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from gpuwhy.derived.gpu_activity import (
    MIN_SAMPLES,
    Window,
    busy_window,
    in_windows,
    step_windows,
)
from gpuwhy.facts import GpuBusy, GpuSeries, GpuWindow, StepFacts

BIN_S = 0.5  # the series is cut into bins of this length to find its steady stretches
LEVEL_TOP = 0.10  # the busiest tenth of the bins sets the level of steady work
STEADY_OF_LEVEL = 0.5  # a bin at half that level or more is active
MIN_LEVEL = 0.05  # below this the GPU never worked: no steady part
JOIN_GAP_S = 2.0  # active stretches closer than this are one (an epoch's end, a log line)
MIN_STRETCH_S = 1.0  # a shorter burst is start-up (autotuning), not steady work
REGULAR_GAPS = 3  # this many gaps between stretches or more: a cycle, not phases
REGULAR_OF_MEDIAN = 2.0  # ... and a gap up to twice their median is one of its waits
BEAT_SPREAD = 0.08  # samples that spread less than this (std, 0-1) show no beat
BEAT_CORRELATION = 0.6  # samples 0.4 s apart this alike: they drift together, a beat
BEAT_LAG_S = 0.4
BEAT_BAND = 0.2  # "between" idle and busy: away from either end by a fifth of the range
BEAT_BETWEEN = 0.35  # a sweep spends this share of its samples between them, or more
MIN_BEAT_SAMPLES = 10
FEW_PHASES = 3  # a sampling that sees three phases of the step or fewer is aliased
MIN_SWEEPS = 2.0  # ... unless its phase sweeps the whole step this often over the run
SHORT_PERIOD = 8  # a period under 1/8 of the sample period averages out in each sample
DIFFERENT = 0.05  # a steady share this far from the whole span's is worth saying


@dataclass(frozen=True)
class Source:
    """Which series of a GPU gives its busy share, and what it is."""

    column: str
    source: str  # GpuBusy.source
    measure: str
    integrating: bool
    note: str = ""


DRIVER_SAMPLES = Source("driver_utilization", "nvml-samples", "the driver's samples", False)
POINT_READINGS = Source(
    "utilization",
    "nvml-point",
    "point readings",
    False,
    "point readings of NVML's utilisation (this run kept none of the driver's own "
    "samples): each is the driver's latest sample, read again at every tick, and "
    "aliases with a periodic load",
)


def source_of(series: GpuSeries) -> Source | None:
    """The best busy source this GPU's series hold (see the module doc)."""
    origin = series.activity_source or "gpm"
    if series.known("graphics_activity"):
        measure = "GR engine activity" if origin == "dcgm" else "graphics utilisation"
        return Source("graphics_activity", origin, measure, True)
    if series.known("sm_activity"):
        return Source(
            "sm_activity",
            origin,
            "SM activity",
            True,
            "SM activity, the best integrating figure this run holds (it had no graphics "
            "utilisation): it reads the share of SMs busy, at or a little below the time share",
        )
    return _sampled(series)


def _sampled(series: GpuSeries) -> Source | None:
    """The driver's samples, else (an old recording) its point readings."""
    if series.known("driver_utilization"):
        return DRIVER_SAMPLES
    if series.known("utilization"):
        return POINT_READINGS
    return None


def time_source(series: GpuSeries) -> Source | None:
    """The best time-share series (any kernel running), for telling time from space."""
    if series.known("graphics_activity"):
        return source_of(series)
    return _sampled(series)


def busy_column(series: GpuSeries) -> str:
    """The series a per-window "GPU busy" (timeline, live metrics) reads for this GPU."""
    found = source_of(series)
    return found.column if found is not None else "utilization"


# -- phases ------------------------------------------------------------------------------
def span_of(series: GpuSeries) -> Window | None:
    """Where the program used this GPU: it held memory there (else: the GPU was active)."""
    spans = busy_window(series)
    if not spans:
        return None
    end = min(spans[0][1], series.ends()[-1]) if series.t else spans[0][1]
    return (spans[0][0], max(spans[0][0], end))


def bin_width(series: GpuSeries) -> float:
    """:data:`BIN_S`, or a long run's window width where that is wider (a day's run is
    kept in windows of minutes: a bin holds one window at least)."""
    if not series.windowed or len(series.t) < 2:
        return BIN_S
    return max(BIN_S, (series.ends()[-1] - series.t[0]) / len(series.t))


def _bins(
    series: GpuSeries, column: str, span: Window, width: float
) -> list[tuple[float, float | None]]:
    """(bin start, mean of the column in it) over the span, bins ``width`` long."""
    start, end = span
    count = max(1, math.ceil((end - start) / width))
    totals, known = [0.0] * count, [0] * count
    values = getattr(series, column)
    for centre, value, n in zip(series.centres(), values, series.column(column).known):
        if value is None or not n or not start <= centre <= end:
            continue
        i = min(count - 1, int((centre - start) / width))
        totals[i] += value * n
        known[i] += n
    return [(start + i * width, totals[i] / known[i] if known[i] else None) for i in range(count)]


def steady_stretches(series: GpuSeries, column: str, span: Window) -> list[Window]:
    """The stretches of sustained activity in a run without steps: bins at half the
    level of the busiest tenth or more, joined across gaps under :data:`JOIN_GAP_S`,
    each at least :data:`MIN_STRETCH_S` long. None where the GPU never worked.

    A gap that recurs is part of the steady work, not a pause: a loop that computes 1 s
    and waits 4 s for its loader, cycle after cycle, is steady at 20 %. Where the
    stretches leave :data:`REGULAR_GAPS` gaps or more, those no longer than twice their
    median are joined; the rest (one long evaluation, an autotuning pause between two
    phases) stay out."""
    width = bin_width(series)
    bins = [(t, v) for t, v in _bins(series, column, span, width) if v is not None]
    if not bins:
        return []
    ranked = sorted((v for _, v in bins), reverse=True)
    top = ranked[: max(1, round(len(ranked) * LEVEL_TOP))]
    level = sum(top) / len(top)
    if level < MIN_LEVEL:
        return []
    stretches: list[list[float]] = []
    for t, v in bins:
        if v < STEADY_OF_LEVEL * level:
            continue
        if stretches and t - stretches[-1][1] <= max(JOIN_GAP_S, width):
            stretches[-1][1] = t + width
        else:
            stretches.append([t, t + width])
    stretches = _join_regular_gaps(stretches)
    shortest = max(MIN_STRETCH_S, 2 * width) if width > BIN_S else MIN_STRETCH_S
    return [(a, min(b, span[1])) for a, b in stretches if min(b, span[1]) - a >= shortest]


def _join_regular_gaps(stretches: list[list[float]]) -> list[list[float]]:
    gaps = [b[0] - a[1] for a, b in zip(stretches, stretches[1:])]
    if len(gaps) < REGULAR_GAPS:
        return stretches
    longest = REGULAR_OF_MEDIAN * statistics.median(gaps)
    joined = [list(stretches[0])]
    for stretch, gap in zip(stretches[1:], gaps):
        if gap <= longest:
            joined[-1][1] = stretch[1]
        else:
            joined.append(list(stretch))
    return joined


# -- the aliasing guard ------------------------------------------------------------------
def aliasing(period_s: float, sample_period_s: float, samples: int) -> str | None:
    """Why samples every ``sample_period_s`` cannot resolve a load repeating every
    ``period_s``, or None. Sample i sees the step at phase i * T/P (mod 1): near a ratio
    m/k of few phases k it sees only k phases, drifting by ``samples * |T/P - m/k|``
    cycles over the run; under :data:`MIN_SWEEPS` they never sweep the step, and the
    mean is that of a few phases, not of the step."""
    if period_s <= 0 or sample_period_s <= 0 or period_s < sample_period_s / SHORT_PERIOD:
        return None
    ratio = sample_period_s / period_s
    for k in range(1, FEW_PHASES + 1):
        m = round(ratio * k)
        if m == 0:
            continue
        if samples * abs(ratio - m / k) < MIN_SWEEPS:
            relation = (
                "about"
                if m == k
                else f"about {k // m} times"
                if k % m == 0
                else f"about 1/{m // k} of"
                if m % k == 0
                else f"about {k}/{m} of"
            ) + " the driver's sample period"
            return (
                f"the steps' period ({period_s * 1000:.0f} ms) is {relation} "
                f"({sample_period_s * 1000:.0f} ms): its samples see the step at only "
                f"{k} phase{'s' if k > 1 else ''}"
            )
    return None


def beat(values: Sequence[float], spacing_s: float) -> str | None:
    """Why these samples look aliased, or None: they spread widely yet samples
    :data:`BEAT_LAG_S` apart are alike, and many lie between idle and busy — a slow
    sweep, the mark of a load beating with the driver's sampling (a load that does not
    beat gives samples that jump from one to the next; a loop with stalls jumps between
    two levels). A steady load shows no spread; real phases of the
    program (start-up, evaluation) look alike, which is why only the steady work is
    judged."""
    if len(values) < MIN_BEAT_SAMPLES:
        return None
    spread = statistics.pstdev(values)
    if spread < BEAT_SPREAD:
        return None
    lag = max(1, round(BEAT_LAG_S / spacing_s)) if spacing_s > 0 else 1
    if lag >= len(values) - 2:
        return None
    mean = statistics.fmean(values)
    pairs = [(a - mean) * (b - mean) for a, b in zip(values, values[lag:])]
    correlation = (sum(pairs) / len(pairs)) / (spread * spread)
    if correlation < BEAT_CORRELATION:
        return None
    # a beat sweeps through the levels between idle and busy; a loop that stalls now
    # and then (a checkpoint every 10 s) jumps between two levels and is no beat
    ordered = sorted(values)
    low, high = ordered[len(ordered) // 20], ordered[-1 - len(ordered) // 20]
    band = (low + BEAT_BAND * (high - low), high - BEAT_BAND * (high - low))
    between = sum(band[0] < v < band[1] for v in values) / len(values)
    if between < BEAT_BETWEEN:
        return None
    return (
        f"its samples drift slowly between {min(values):.0%} and {max(values):.0%} "
        f"(alike {BEAT_LAG_S:g} s apart: r={correlation:.2f}), the mark of a load beating "
        "with the driver's sampling"
    )


def _known_values(
    series: GpuSeries, column: str, mask: Sequence[bool]
) -> tuple[list[float], float]:
    """The entries of ``column`` with a value inside ``mask``, and their mean spacing in
    seconds (a sample period, a tick, or a long run's window)."""
    values = getattr(series, column)
    known = series.column(column).known
    kept = [
        (t, v)
        for t, v, n, keep in zip(series.centres(), values, known, mask)
        if keep and n and v is not None
    ]
    spacing = (kept[-1][0] - kept[0][0]) / (len(kept) - 1) if len(kept) > 1 else 0.0
    return [v for _, v in kept], spacing


def _step_period(steps: StepFacts | None) -> float | None:
    """How often the GPU's load repeats: the median time from one step call's start to
    the next (its duration where the starts are not kept)."""
    if steps is None:
        return None
    starts = list(steps.starts)[steps.warmup // max(1, steps.steps_per_call) :]
    gaps = [b - a for a, b in zip(starts, starts[1:]) if b > a]
    if gaps:
        return statistics.median(gaps)
    return None if steps.median_s is None else steps.median_s * max(1, steps.steps_per_call)


def _guard(
    series: GpuSeries,
    found: Source,
    mask: Sequence[bool],
    steps: StepFacts | None,
    points_stand_in: bool = False,
) -> str | None:
    """Why a sampled (not integrating) figure over the entries ``mask`` is unreliable.
    Point readings never give the busy share; ``points_stand_in``: they stand in for
    the driver's samples (the time share of a recording that kept none) where they are
    steady, and are guarded alike."""
    if found.source == "nvml-point" and not points_stand_in:
        return found.note
    period = series.driver_sample_period_s
    values, spacing = _known_values(series, found.column, mask)
    if found.source == "nvml-point" and len(values) > 1:
        # standing in for the driver's samples only where the load is steady: a varying
        # point reading may be a beat that does not show as one
        spread = statistics.pstdev(values)
        if spread >= BEAT_SPREAD:
            return f"its point readings vary (±{spread:.0%}) and may alias with the load"
    step = _step_period(steps)
    if step is not None and period is not None:
        reason = aliasing(step, period, series.known(found.column, mask))
        if reason:
            return reason
    return beat(values, spacing)


# -- the figure --------------------------------------------------------------------------
def gpu_busy(series: GpuSeries, steps: StepFacts | None) -> GpuBusy | None:
    """This GPU's busy block (None: the series hold no busy figure at all)."""
    found = source_of(series)
    if found is None:
        return None
    span = span_of(series)
    if span is None:
        return GpuBusy(
            share=None,
            source=found.source,
            measure=found.measure,
            reliable=False,
            why="the program never used this GPU",
        )
    with_steps = steps is not None and bool(steps.starts)
    steady = (step_windows(steps) if steps is not None and steps.starts else []) or (
        steady_stretches(series, found.column, span)
    )
    centres = series.centres()
    in_span = in_windows(centres, [span])
    in_steady = [a and b for a, b in zip(in_windows(centres, steady), in_span)] if steady else []
    share = series.mean(found.column, in_span)
    samples = series.known(found.column, in_span)
    steady_share = series.mean(found.column, in_steady) if steady else None
    steady_span = sum(min(b, span[1]) - max(a, span[0]) for a, b in steady if b > span[0])
    judged = in_steady if steady and any(in_steady) else in_span
    problems = [] if found.integrating else [_guard(series, found, judged, steps)]
    if samples < MIN_SAMPLES:
        problems.append(
            f"the exporter's values changed only {samples} times while the program used the "
            "GPU (each averages its collect interval, 30 s by default)"
            if found.source == "dcgm"
            else f"only {samples} samples while the program used the GPU"
        )
    reasons = [p for p in problems if p]
    why = found.note or f"{found.measure} ({found.source.upper()}): counters integrated over time"
    if not found.integrating and not reasons:
        period = series.driver_sample_period_s
        why = (
            f"the driver's own samples (one every {period * 1000:.0f} ms)"
            if period
            else "the driver's own samples"
        ) + (
            ": the steps' period does not beat with them"
            if with_steps
            else ": no beat with the load shows in them"
        )
    elif reasons:
        why = "; ".join(reasons)
    if not (steady and any(in_steady)) and not with_steps:
        # SMs idle all along (copies): the GPU's engaged stretches are its steady work
        found_time = time_source(series)
        engaged = steady_stretches(series, found_time.column, span) if found_time else []
        if engaged:
            judged = [a and b for a, b in zip(in_windows(centres, engaged), in_span)]
    time_share, space_share = _time_and_space(series, judged, steps)
    return GpuBusy(
        share=_round(share),
        source=found.source,
        measure=found.measure,
        reliable=not reasons,
        why=why,
        samples=samples,
        start_s=round(span[0], 3),
        end_s=round(span[1], 3),
        span_s=round(span[1] - span[0], 3),
        steady_share=_round(steady_share),
        steady_span_s=round(max(0.0, steady_span), 3),
        steady_start_s=round(max(steady[0][0], span[0]), 3) if steady else None,
        startup_s=round(_outside(steady, steady_span), 3) if steady else 0.0,
        time_share=_round(time_share),
        space_share=_round(space_share),
    )


def _time_and_space(
    series: GpuSeries, mask: Sequence[bool], steps: StepFacts | None
) -> tuple[float | None, float | None]:
    """The share of time a kernel ran, where a reliable figure exists, and the share of
    SMs busy while one did (SM activity over it)."""
    found = time_source(series)
    if found is None:
        return None, None
    if not found.integrating and _guard(series, found, mask, steps, points_stand_in=True):
        return None, None
    time_share = series.mean(found.column, mask)
    sm = series.mean("sm_activity", mask)
    if time_share is None or sm is None or time_share < MIN_LEVEL:
        return time_share, None  # no kernels to speak of: no space to judge
    return time_share, min(1.0, sm / time_share)


def _outside(steady: list[Window], steady_span: float) -> float:
    """The program's time before its steady work (from its start, t = 0: imports and
    compilation come before the GPU is touched) and in the pauses between stretches."""
    first, last = steady[0][0], steady[-1][1]
    return max(0.0, first) + max(0.0, last - first - steady_span)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


# -- the facts ---------------------------------------------------------------------------
# A timeline window in which a GPU was busy this share or more is under load (its clock
# and its link are read there: both drop when it idles).
LOADED_AT = 0.5


def window_busy(gpu: GpuWindow) -> float | None:
    """A timeline window's busy share of one GPU: the mean of its busy series (this
    module's); in records from before the busy series, its point readings, the only
    figure they hold."""
    return gpu.busy if gpu.busy is not None else gpu.utilization


def steady_differs(block: GpuBusy) -> bool:
    """Whether the steady work's share is worth saying beside the whole span's."""
    return (
        block.steady_share is not None
        and block.share is not None
        and abs(block.steady_share - block.share) >= DIFFERENT
    )


def steady_windows(series: GpuSeries, block: GpuBusy) -> list[Window]:
    """The steady stretches a block was measured on (a run without steps), again."""
    found = source_of(series)
    if found is None or block.start_s is None or block.end_s is None:
        return []
    return steady_stretches(series, found.column, (block.start_s, block.end_s))
