"""When the run's steps got slower, and what changed with them: the change points of the
time per step over the whole run (:mod:`gpuwhy.derived.change_points`; each window's
``span_step_time``), each joined with every other series of the run's timeline on the
same windows.

Read by the drift rule (its finding). Kept in derived/ rather than beside the rule: it is
an analysis of the facts, not a finding, and the report's timeline marks and drift lines
(which now read the finding's ``at_s``) and ``gpuwhy diff`` can ask it directly, as they
ask change_points.py and step_windows.py, without reading a finding's evidence.

The windows judged are the main training loop's after its warm-up, each holding at least
``MIN_WINDOW_STEPS`` steps: its compile and autotune ramp-up, another loop (an evaluation,
a second model) and the pauses between epochs never make a change point. A cause is
*measured* on the same windows before and after: where it is time spent inside the steps
(waiting for input, tracing, Python's garbage collector, checkpoint writes, eager ops),
the share of the step-time change it accounts for is given; where it is a condition (a
GPU's clock, another process on the host or the GPU, memory growing), that it changed with
the steps is said, not how much of it it explains.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from gpuwhy.derived.change_points import Settings, Shift, shifts
from gpuwhy.derived.gpu_busy import LOADED_AT, window_busy
from gpuwhy.derived.pipeline import bottleneck
from gpuwhy.derived.stage import derived
from gpuwhy.derived.step_windows import span_input_wait, span_step_time
from gpuwhy.facts import Facts, GpuWindow, RunWindow, StepFacts, StepSpan

# a window gpuwhy's own pauses (a heap census) held the program in for more than this
# share of its steps' time is not judged (_held_by_gpuwhy)
OWN_PAUSE_MOST = 0.05
EXPLAINS_AT_LEAST = 0.25  # a timed cause named as one when it accounts for this share
CONDITION_CHANGE = 0.10  # a clock, a CPU share, a memory figure: this relative change
# other processes' share of all the host's cores: on a shared host it wanders by 10 points
HOST_CPU_CHANGE = 0.20

# Time spent inside the steps that each window of the run's timeline holds: (kind, the
# words for people, the RunWindow field of its seconds in the window). Timed causes, in
# the order they are weighed after the input's wait.
WINDOW_TIMED_CAUSES = (
    ("tracing", "tf.function tracing", "trace_s"),
    ("gc", "Python garbage collection", "gc_pause_s"),
    ("checkpoint", "checkpoint writing", "checkpoint_s"),
)
# Memory that grew with the steps: (kind, the words for people, the RunWindow field of
# the window's peak in bytes). Conditions, named when the peak after the change is
# CONDITION_CHANGE above the peak before it.
MEMORY_CONDITIONS = (
    ("host-memory", "the program's memory", "host_rss_max_bytes"),
    ("device-memory", "TF's memory in use on the GPU", "tf_gpu_memory_max_bytes"),
)


@dataclass(frozen=True)
class Cause:
    """Something that changed with the step time, measured on the same windows."""

    kind: str  # input, tracing, gc, checkpoint, eager, gpu-clock, host-cpu, host-memory ...
    text: str  # what it did, for people: "input wait per step 0.2 ms -> 6.1 ms"
    before: float
    after: float
    explains: float | None = None  # share of the mean step-time change (None: a condition)


@dataclass(frozen=True)
class Drift:
    """One change of the main loop's step time that held."""

    start_s: float  # the first window of the new level (a slope: where it starts)
    end_s: float  # the end of its last window
    step: int  # steps of the run before that window
    # time per step before (the windows' median of span_step_time, or of their medians
    # where those alone showed it; a slope: the line at its start): what it was found on
    before_s: float
    after_s: float
    median_before_s: float  # the windows' median of their median step, each side
    median_after_s: float
    before_band: tuple[float, float]  # the windows' medians, 25th-75th percentile
    after_band: tuple[float, float]
    steps_before: int
    steps_after: int
    width_s: float  # the windows'
    score: float  # z-score of the two levels (a slope: its rank correlation with time)
    gradual: bool = False
    causes: tuple[Cause, ...] = ()

    @property
    def change(self) -> float:
        return self.after_s / self.before_s - 1.0

    @property
    def explained(self) -> tuple[Cause, ...]:
        return tuple(c for c in self.causes if c.explains is not None)


def drifts(facts: Facts, settings: Settings | None = None) -> list[Drift]:
    """The main loop's step-time changes over the run, each with its causes."""
    steps = facts.steps
    if steps is None or steps.timeline is None:
        return []
    width = steps.timeline.width_s
    rows = derived(facts).timeline_rows
    spans = [s for s in derived(facts).training_spans if not _held_by_gpuwhy(s, rows, width)]
    if len(spans) < 2 * (settings or Settings()).min_windows:
        return []
    before_window = _steps_before(steps)
    found = []
    series = [
        span_step_time(s, steps.steps_per_call, rows.get(round(s.start_s / width))) for s in spans
    ]
    changes = shifts(series, [s.steps for s in spans], settings)
    timed = [s for s in spans if s.p50_s]
    if not changes and len(timed) >= 2 * (settings or Settings()).min_windows:
        # the windows' medians, where their time per step found none: a loop whose
        # steps keep a growing list slows at once in its median step and along a ramp
        # in its mean (the collector's pauses grow with the list), a ramp in a short
        # run's few windows that scored under the line (tests/corpus/programs/
        # drift_growing_list.py: 3 runs of 6 lost it); its medians stepped by +65 %
        spans = timed
        series = [s.p50_s or 0.0 for s in timed]  # per step, as span_step_time's
        changes = shifts(series, [s.steps for s in spans], settings)
    parts = _part_starts(steps)
    for shift in changes:
        before = spans[shift.begin : shift.at] if not shift.gradual else spans[: len(spans) // 3]
        after = spans[shift.at : shift.end] if not shift.gradual else spans[-len(spans) // 3 :]
        if _at_a_new_part(parts, before, after, shift.gradual, width):
            continue
        median_before, median_after = _median_step(before), _median_step(after)
        at = spans[shift.at]
        start_s, step = at.start_s, before_window[round(at.start_s / width)]
        if not shift.gradual and median_before > 0 and median_after > 0:
            placed = _first_slow_step(steps, at.start_s, median_before, median_after)
            start_s, step = placed or (start_s, step)
        found.append(
            Drift(
                start_s=start_s,
                end_s=round(spans[shift.end - 1].start_s + width, 6),
                step=step,
                before_s=round(shift.before, 6),
                after_s=round(shift.after, 6),
                median_before_s=round(median_before, 6),
                median_after_s=round(median_after, 6),
                before_band=_band(before),
                after_band=_band(after),
                steps_before=sum(s.steps for s in before),
                steps_after=sum(s.steps for s in after),
                width_s=width,
                score=shift.score,
                gradual=shift.gradual,
                causes=tuple(_causes(facts, before, after, rows, width, shift)),
            )
        )
    return found


def _part_starts(steps: StepFacts) -> list[float]:
    """When each later part of the loop began, where the steps kept one by one show it:
    a warm-up after the first steps, the first step of a fit of a new model (or of a
    model compiled again) or of another loop, which traced."""
    return sorted(steps.starts[i] for i in steps.later_warmup if i < len(steps.starts))


def _at_a_new_part(
    parts: Sequence[float],
    before: Sequence[StepSpan],
    after: Sequence[StepSpan],
    gradual: bool,
    width: float,
) -> bool:
    """Whether the change is where another part of the loop began: a notebook that fits
    thirteen models one after the other steps at each model's own pace, and a heavier
    model's fit is no drift (TF's time-series tutorial read 'from step 3,146 the time
    per step went from 2.0 ms to 4.5 ms' at its LSTM's first step, in 2 runs of 3). A
    level change is there where a part began from the last window before it to the end
    of its first window after; a slope, where one began between its first and last
    thirds."""
    if not parts or not before or not after:
        return False
    if gradual:
        low, high = before[-1].start_s + width, after[0].start_s
    else:
        low, high = before[-1].start_s, after[0].start_s + width
    at = bisect.bisect_left(parts, low)
    return at < len(parts) and parts[at] <= high


def _first_slow_step(
    steps: StepFacts, at_s: float, before: float, after: float
) -> tuple[float, int] | None:
    """Where the steps kept one by one show it, the step the new level began with. The
    windows place a change to one window; this places it to the step: of the steps in
    the two windows before the change's and in its own, each is on the old or the new side of
    the middle of the two levels (``before`` and ``after``: the windows' median steps, as
    single steps are read), and the split that leaves the fewest steps on the wrong
    side (an old-level step after it, a new-level one before; steps near the middle count
    on neither) is where it began. Where that split is the first step looked at, and that
    step is already at the new level, the windows placed the change late (the windows
    right after it left out, gpuwhy held the program in them; a loaded host: a retrace
    storm from step 3,000 read 'from step 3,015' in CI): the look-back doubles until the
    split has old-level steps before it."""
    assert steps.timeline is not None
    width = steps.timeline.width_s
    starts = steps.starts
    hi = bisect.bisect_left(starts, at_s + width)
    if hi >= len(starts):
        return None  # the change is beyond the steps kept one by one
    # a change near a segment's edge is placed up to min_windows - 1 windows late (each
    # side needs that many): look back two windows, further where all of them are new
    found = None
    for back in (2, 4, 8, 16, 32, 64):
        lo = bisect.bisect_left(starts, at_s - back * width)
        if lo == 0 or hi - lo < 2:
            break  # the change is at the start of the steps kept one by one
        split = _split(steps, lo, hi, before, after)
        if split is None:
            break
        found = split
        if split > lo:
            break  # old-level steps before it
    if found is None:
        return None
    return round(starts[found], 6), sum(steps.kept_call_steps[:found])


def _split(steps: StepFacts, lo: int, hi: int, before: float, after: float) -> int | None:
    """Of the kept steps lo..hi-1, the first at the new level: the split with the fewest
    steps on the wrong side of the middle of ``before`` and ``after``."""
    middle = math.sqrt(before * after)
    half = abs(math.log(after / middle)) / 2  # log distance: middle -> half a level
    sign = 1 if after > before else -1
    # each step is clearly new (1), clearly old (-1), or near the middle (0): a burst of a
    # neighbour's load makes old-level steps a little slower, and those must not move the
    # change before the steps at the new level
    sides = []
    for d, n in zip(steps.durations[lo:hi], steps.kept_call_steps[lo:hi]):
        lean = sign * math.log(max(d / n, 1e-9) / middle)
        sides.append(0 if abs(lean) < half else (1 if lean > 0 else -1))
    wrong = sides.count(-1)  # split before the first: every old step is wrong
    best, best_at = wrong, lo
    for k, side in enumerate(sides):
        wrong += side  # step lo+k moves to the old side
        if wrong < best:
            best, best_at = wrong, lo + k + 1
    while best_at < hi and sides[best_at - lo] == 0:
        best_at += 1  # the steps near the middle after the last old one: not yet the new level
    return best_at if best_at < hi else None


def _steps_before(steps: StepFacts) -> dict[int, int]:
    """Window index -> the run's steps that started before that window."""
    assert steps.timeline is not None
    width = steps.timeline.width_s
    out, total = {}, 0
    for span in steps.timeline.windows:
        out[round(span.start_s / width)] = total
        total += span.steps
    return out


def _level(span: StepSpan) -> float:
    """A window's step: its median, or where the hooks paused through it (none timed),
    its steps' time per step less the slowest (:func:`span_step_time`)."""
    return span.p50_s or span_step_time(span)


def _median_step(spans: Sequence[StepSpan]) -> float:
    """The windows' median of their median step (0.0 without one)."""
    values = [v for s in spans if (v := _level(s))]
    return statistics.median(values) if values else 0.0


def _band(spans: Sequence[StepSpan]) -> tuple[float, float]:
    values = sorted(_level(s) for s in spans)
    if not values:
        return (0.0, 0.0)
    return (round(_at(values, 0.25), 6), round(_at(values, 0.75), 6))


def _at(ordered: list[float], q: float) -> float:
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _mean_step(spans: Sequence[StepSpan], rows: Mapping[int, RunWindow], width: float) -> float:
    """The windows' mean step, less gpuwhy's own pauses in them (not the program's)."""
    count = sum(s.steps for s in spans)
    total = sum(s.step_s - _own_pause(s, rows, width) for s in spans)
    return max(0.0, total) / count if count else 0.0


def _held_by_gpuwhy(span: StepSpan, rows: Mapping[int, RunWindow], width: float) -> bool:
    """Whether gpuwhy's own pauses held the program for more than ``OWN_PAUSE_MOST`` of
    the window's steps' time. Such a window says nothing of the program either way: a
    heap census (0.2-0.5 s, as the memory of a program that keeps its outputs grows,
    so in the windows just after its slowdown) holds the GIL in turns with the loop
    (Python hands it over every 5 ms), so the loop loses an unknown part of the census's
    time. Read as the program's, such windows ran a third over their neighbours and the
    noise they made hid a +40 % change (tests/corpus/programs/drift_growing_list.py
    summing 64 outputs: 2 runs of 3 lost it); with the census's whole time taken out
    they ran 15-20 % under them. A smaller pause (a wide window of a long run) is taken
    out of the window's time (``span_step_time``)."""
    return _own_pause(span, rows, width) > OWN_PAUSE_MOST * span.step_s


def _own_pause(span: StepSpan, rows: Mapping[int, RunWindow], width: float) -> float:
    row = rows.get(round(span.start_s / width))
    return row.own_pause_s if row is not None else 0.0


def _causes(
    facts: Facts,
    before: Sequence[StepSpan],
    after: Sequence[StepSpan],
    rows: Mapping[int, RunWindow],
    width: float,
    shift: Shift,
) -> list[Cause]:
    """What changed with the steps between the ``before`` and ``after`` windows: timed
    causes first, the largest share first, then conditions."""
    delta = _mean_step(after, rows, width) - _mean_step(before, rows, width)
    timed = []

    def per_step(spans: Sequence[StepSpan], value) -> float | None:
        total, count, known = 0.0, 0, False
        for span in spans:
            got = value(span, rows.get(round(span.start_s / width)))
            if got is not None:
                total, known = total + got, True
                count += span.steps
        return total / count if known and count else None

    def timed_cause(kind: str, words: str, value) -> None:
        b, a = per_step(before, value), per_step(after, value)
        if b is None or a is None or delta <= 0:
            return
        share = (a - b) / delta
        if share >= EXPLAINS_AT_LEAST:
            text = f"{words} per step {_ms(b)} -> {_ms(a)}"
            timed.append(Cause(kind, text, round(b, 6), round(a, 6), round(min(share, 1.0), 3)))

    timed_cause("input", "input wait", span_input_wait)
    for kind, words, field in WINDOW_TIMED_CAUSES:
        timed_cause(kind, words, lambda s, r, field=field: getattr(r, field) if r else None)
    if _calls_on_both_sides(before, after, rows, width):
        # the same input wait as the input cause's: a window whose wait was not measured
        # (an epoch's first step) says nothing of the Python when waits were measured
        waits = any(
            span_input_wait(s, rows.get(round(s.start_s / width))) is not None
            for s in (*before, *after)
        )

        def python(s: StepSpan, r: RunWindow | None) -> float | None:
            wait = span_input_wait(s, r)
            if r is None or (waits and wait is None):
                return None
            return max(0.0, s.step_s - (wait or 0.0) - r.function_call_s - r.own_pause_s)

        timed_cause("python", "Python outside tf.function calls and input waits", python)
    gap = facts.eager.median_gap_us if facts.eager is not None else None
    if gap:
        timed_cause(
            "eager",
            "eager ops (estimated from their count)",
            lambda s, r: (r.eager_ops_per_step or 0) * gap * 1e-6 * s.steps
            if r and r.eager_sampled_steps
            else None,
        )
    timed.sort(key=lambda c: -(c.explains or 0))
    return _input_first(facts, timed) + _conditions(before, after, rows, width)


def _input_first(facts: Facts, timed: list[Cause]) -> list[Cause]:
    """Where the input's wait and the Python between the calls grew together and the
    input pipeline runs Python (a generator, a py_function), the input first: its Python
    runs on a tf.data thread and takes the GIL from the loop's Python, so the loop's
    Python time grows with it (measured: the same drift ranked either way from one run to
    the next). The Python cause says so."""
    kinds = [c.kind for c in timed]
    if "input" not in kinds or "python" not in kinds:
        return timed
    pipeline = derived(facts).steps_pipeline
    stage = bottleneck(pipeline) if pipeline is not None else None
    if stage is None or not stage.python:
        return timed
    out = []
    for c in timed:
        if c.kind == "python":
            c = replace(
                c, text=f"{c.text} (the input pipeline's Python holds the GIL the loop waits for)"
            )
        out.append(c)
    out.sort(key=lambda c: c.kind != "input")  # stable: the rest keep their order
    return out


def _calls_on_both_sides(
    before: Sequence[StepSpan],
    after: Sequence[StepSpan],
    rows: Mapping[int, RunWindow],
    width: float,
) -> bool:
    """Whether the steps call a tf.function on both sides (else "outside the calls" is
    the whole step: no cause)."""

    def called(spans: Sequence[StepSpan]) -> bool:
        found = (rows.get(round(s.start_s / width)) for s in spans)
        return sum(r.function_call_s for r in found if r is not None) > 0

    return called(before) and called(after)


def _conditions(
    before: Sequence[StepSpan],
    after: Sequence[StepSpan],
    rows: Mapping[int, RunWindow],
    width: float,
) -> list[Cause]:
    """Conditions that changed in the same windows (not additive to the step time)."""

    def rows_of(spans: Sequence[StepSpan]) -> list[RunWindow]:
        found = (rows.get(round(s.start_s / width)) for s in spans)
        return [r for r in found if r is not None]

    b_rows, a_rows = rows_of(before), rows_of(after)
    out = []

    others_b = _mean([r.cpu_others_share for r in b_rows if r.cpu_others_share is not None])
    others_a = _mean([r.cpu_others_share for r in a_rows if r.cpu_others_share is not None])
    if others_b is not None and others_a is not None and others_a - others_b >= HOST_CPU_CHANGE:
        out.append(
            Cause(
                "host-cpu",
                f"other processes' share of the host's CPU {others_b:.0%} -> {others_a:.0%}",
                round(others_b, 4),
                round(others_a, 4),
            )
        )
    for kind, words, field in MEMORY_CONDITIONS:
        peak_b = max((getattr(r, field) for r in b_rows if getattr(r, field)), default=None)
        peak_a = max((getattr(r, field) for r in a_rows if getattr(r, field)), default=None)
        if peak_b and peak_a and peak_a > (1 + CONDITION_CHANGE) * peak_b:
            text = f"{words} {_mib(peak_b)} -> {_mib(peak_a)}"
            out.append(Cause(kind, text, float(peak_b), float(peak_a)))
    for index in sorted({g.index for r in b_rows + a_rows for g in r.gpus}):
        out += _gpu_conditions(index, b_rows, a_rows)
    return out


def _gpu_conditions(index: int, b_rows: list[RunWindow], a_rows: list[RunWindow]) -> list[Cause]:
    """GPU ``index``'s clock and its slowdown reasons, its link and other processes on
    it, before and after, from its busy windows (a link downshifts when idle)."""

    def gpus(rows: list[RunWindow]) -> list[GpuWindow]:
        return [g for r in rows for g in r.gpus if g.index == index]

    before, after = gpus(b_rows), gpus(a_rows)
    out = []
    clock_b = _mean([g.sm_clock_mhz or 0.0 for g in before if _busy(g, index)])
    clock_a = _mean([g.sm_clock_mhz or 0.0 for g in after if _busy(g, index)])
    if clock_b and clock_a and clock_a < (1 - CONDITION_CHANGE) * clock_b:
        reasons = sorted({r for g in after for r in g.throttle_reasons})
        why = f" ({', '.join(r.replace('_', ' ') for r in reasons)})" if reasons else ""
        out.append(
            Cause(
                "gpu-clock",
                f"GPU {index}'s SM clock while busy {clock_b:,.0f} -> {clock_a:,.0f} MHz{why}",
                round(clock_b, 1),
                round(clock_a, 1),
            )
        )
    gen_b = [g.pcie_gen_busy_min for g in before if g.pcie_gen_busy_min]
    gen_a = [g.pcie_gen_busy_min for g in after if g.pcie_gen_busy_min]
    if gen_b and gen_a and min(gen_a) < min(gen_b):
        out.append(
            Cause(
                "gpu-link",
                f"GPU {index}'s PCIe link under load Gen{min(gen_b)} -> Gen{min(gen_a)}",
                float(min(gen_b)),
                float(min(gen_a)),
            )
        )
    others_b = max((g.others_memory_max_bytes or 0 for g in before), default=0)
    others_a = max((g.others_memory_max_bytes or 0 for g in after), default=0)
    if others_a >= 256 * 2**20 and others_a > 2 * others_b:
        out.append(
            Cause(
                "gpu-shared",
                f"other processes' memory on GPU {index} {_mib(others_b)} -> {_mib(others_a)}",
                float(others_b),
                float(others_a),
            )
        )
    return out


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _busy(gpu: GpuWindow, index: int) -> bool:
    """GPU ``index``'s window, under load (derived/gpu_busy.py's busy share), its clock read."""
    loaded = (window_busy(gpu) or 0.0) >= LOADED_AT
    return gpu.index == index and gpu.sm_clock_mhz is not None and loaded


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.2f} ms" if seconds < 0.01 else f"{seconds * 1000:,.1f} ms"


def _mib(n: float) -> str:
    return f"{n / 2**20:,.0f} MiB"
