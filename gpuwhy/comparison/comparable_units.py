"""What of a record is compared, in units that can be resampled: its training steps after
warm-up (the main loop's), in blocks of consecutive steps where the record kept every
step one by one, else in its timeline windows; each window split the way the record
splits a step; and its GPUs' busy share per window.

A step is split into parts that add up to it, each measured, never guessed:

- ``input``: waiting for the next batch (next() timing in a Python loop; for Keras fit
  the step less tf.data's consumer time per element, which is inside the train function);
- ``tracing``: the tf.function calls that traced, each whole (the trace, the graph's
  optimisation, any XLA compile and the new graph's first run: TF does all of it in that
  call), or the traces' own time where more (a trace outside a call);
- ``traced_step``: inside the outermost tf.function calls that did not trace (for fit,
  less its input wait);
- ``eager``: eager ops, their count per step times their median issue gap (estimated:
  the counter samples steps);
- ``python``: the rest, Python between the calls (the loop, logging, metrics; in an
  eager loop without tf.function, all but its input wait and its eager ops).
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from gpuwhy.comparison.model import AlignedWindow
from gpuwhy.derived.gpu_busy import window_busy
from gpuwhy.derived.stage import derived
from gpuwhy.derived.step_windows import main_loop_span, span_from, span_input_wait
from gpuwhy.facts import Facts, RunWindow, StepFacts, StepSpan, WorkersFacts

BLOCKS = 128  # kept steps are summed into about this many blocks of consecutive steps
MIN_STEPS = 30  # fewer training steps after warm-up: no step-time comparison
MIN_WAITED_SHARE = 0.5  # of the training windows with an input wait: the input is measured
PARTS = ("input", "tracing", "traced_step", "eager", "python")
# the step's time the parts do not name, as with_rest works it out
REST = "rest"
PART_LABELS = {
    "input": "waiting for input",
    "tracing": "tracing and compiling tf.functions (the calls that traced)",
    "traced_step": "inside the traced step (tf.function calls)",
    "eager": "issuing eager ops (estimated from their count)",
    "python": "Python outside the calls (the loop itself)",
    "collectives": "inside collective ops (all-reduce)",
    REST: "the rest (not split)",
}
REST_MEASURED = "the step time less the parts above"


def with_rest(
    part_units: Sequence[tuple[float, ...]], common: Sequence[str]
) -> list[tuple[float, ...]]:
    """Each window's row with one more column (``part_column(REST)``): its steps' time less the
    ``common`` parts, the time the split does not name. With it the parts a diff lists
    add up to the step: a part that shrank while the step did not shows where the time
    went."""
    columns = [part_column(p) for p in common]
    return [(*row, row[1] - sum(row[k] or 0.0 for k in columns)) for row in part_units]


def part_column(part: str) -> int:
    """The column of ``part`` in a row of ``part_units`` (after the steps and their
    seconds), the rest's in a row of ``with_rest``."""
    return 2 + (len(PARTS) if part == REST else PARTS.index(part))


def how_measured(units: RunUnits, part: str) -> str:
    """How ``units``' record measured ``part`` (the rest: worked out from the others)."""
    return units.parts_measured.get(part, REST_MEASURED)


@dataclass(frozen=True)
class RunUnits:
    """One record's figures in resampling units."""

    steps: list[tuple[float, float]] = field(default_factory=list)  # (steps, seconds)
    basis: str | None = None  # how they were cut, for people
    step_count: int = 0
    seconds: float = 0.0
    median_s: float | None = None
    # per training window: (steps, step seconds, then one sum per part in PARTS);
    # None where that part was not measured in that run
    part_units: list[tuple[float, ...]] = field(default_factory=list)
    parts_measured: dict[str, str] = field(default_factory=dict)  # part -> how
    gpu_busy: list[tuple[float, float]] = field(default_factory=list)  # (1, share)
    aligned: tuple[AlignedWindow, ...] = ()


def run_units(facts: Facts) -> RunUnits:
    steps = facts.steps
    busy = _gpu_busy(facts, steps)
    if steps is None and facts.workers is not None:
        return _worker_units(facts.workers)
    if steps is None or steps.timeline is None:
        return RunUnits(gpu_busy=busy)
    spans = derived(facts).training_spans
    width = steps.timeline.width_s
    rows = derived(facts).timeline_rows
    kept = kept_training_steps(steps)
    if kept is not None and len(kept) >= MIN_STEPS:
        size = max(1, math.ceil(len(kept) / BLOCKS))
        units = [
            (float(len(kept[i : i + size])), sum(kept[i : i + size]))
            for i in range(0, len(kept), size)
        ]
        basis = (
            f"every step after warm-up, in blocks of {size} consecutive steps"
            if size > 1
            else "every step after warm-up, one by one"
        )
        median: float | None = statistics.median(kept)
    else:
        units = [(float(s.steps), s.step_s) for s in spans]
        basis = f"{len(units)} windows of {width:g} s"
        median = _weighted_median(spans)
    count = int(sum(u[0] for u in units))
    if count < MIN_STEPS:
        return RunUnits(gpu_busy=busy, aligned=_aligned(spans, rows, width))
    part_units, measured = _parts(facts, steps, spans, rows, width)
    return RunUnits(
        steps=units,
        basis=basis,
        step_count=count,
        seconds=sum(u[1] for u in units),
        median_s=median,
        part_units=part_units,
        parts_measured=measured,
        gpu_busy=busy,
        aligned=_aligned(spans, rows, width),
    )


def _worker_units(workers: WorkersFacts) -> RunUnits:
    """A merged record: every worker's training windows, pooled (in synchronous training
    the workers keep one pace; the mean is per step of a worker)."""
    ran = [w for w in workers.workers if w.windows]
    spans = [s for w in ran for s in w.windows if s.steps >= 1]
    units = [(float(s.steps), s.step_s) for s in spans]
    count = int(sum(u[0] for u in units))
    if count < MIN_STEPS:
        return RunUnits()
    measured = {}
    part_units: list[tuple[float, ...]] = []
    if all(s.input_wait_s is not None for s in spans):
        measured["input"] = "as each worker timed it"
        part_units = [
            (float(s.steps), s.step_s, s.input_wait_s or 0.0, 0.0, 0.0, 0.0, 0.0) for s in spans
        ]
    return RunUnits(
        steps=units,
        basis=f"{len(units)} windows of {len(ran)} workers",
        step_count=count,
        seconds=sum(u[1] for u in units),
        median_s=_weighted_median(spans),
        part_units=part_units,
        parts_measured=measured,
    )


def kept_training_steps(steps: StepFacts, whole_run: bool = True) -> list[float] | None:
    """Per-step seconds of the main loop after warm-up, where the record kept every one
    (None: it kept only the first, and the windows speak for the rest); with
    ``whole_run`` False, those it kept whatever it kept (a long run's first ones)."""
    if (whole_run and not steps.all_kept) or not steps.durations:
        return None
    begin, end = 0.0, math.inf
    if steps.loops:
        begin = steps.loops[0].first_s
        if steps.loops[0].last_s is not None:
            end = steps.loops[0].last_s
    out: list[float] = []
    first = steps.first_after_warmup
    calls = zip(steps.starts, steps.durations, steps.kept_call_steps)
    for i, (start, seconds, n) in enumerate(calls):
        # each kept duration is one call of n steps (an epoch's last call may run fewer)
        if i >= first and begin - 1e-9 <= start <= end + 1e-9:
            out.extend([seconds / n] * n)
    return out


def _weighted_median(spans: Sequence[StepSpan]) -> float | None:
    """The median step of windows' medians, each weighted by its steps."""
    pairs = sorted((s.p50_s, s.steps) for s in spans if s.p50_s)
    total = sum(n for _, n in pairs)
    seen = 0
    for value, n in pairs:
        seen += n
        if seen * 2 >= total:
            return value
    return None


def _parts(
    facts: Facts,
    steps: StepFacts,
    spans: Sequence[StepSpan],
    rows: Mapping[int, RunWindow],
    width: float,
) -> tuple[list[tuple[float, ...]], dict[str, str]]:
    """Each training window's step split into PARTS; and which parts this record
    measured, and how."""
    fit = steps.source == "keras-fit"
    gap = facts.eager.median_gap_us if facts.eager is not None else None
    windows = _part_windows(steps, spans, rows, width)
    spans = [span for span, _ in windows]
    waits = [span_input_wait(span, row) for span, row in windows]
    measured: dict[str, str] = {}
    timed_waits = sum(1 for w in waits if w is not None)
    if spans and timed_waits >= MIN_WAITED_SHARE * len(spans):
        # Keras fit's wait comes from tf.data's gap timer, read now and then: a window
        # without a reading is left out of the parts, not read as no wait
        measured["input"] = steps.input_wait_source or "measured"
    if rows:
        # a loop that calls no tf.function spends no time in one: a measurement too
        measured["tracing"] = "tf.function traces timed"
        measured["traced_step"] = "outermost tf.function calls timed"
        measured["python"] = "the step less the parts above"
    run_ops = facts.eager.per_step if facts.eager is not None else None
    if facts.eager is not None and facts.eager.sampled_steps:
        # the counter ran: no ops is a measurement too (their gap is then unknown)
        measured["eager"] = (
            f"ops per step x their median issue gap ({gap:.0f} µs)" if gap else "ops counted"
        )
    units: list[tuple[float, ...]] = []
    for (span, row), wait in zip(windows, waits):
        if wait is None and "input" in measured:
            continue
        input_s = wait or 0.0
        # a call that traced is tracing and compiling, whole (not only its Python trace)
        trace_s = max(row.trace_s, row.traced_call_s) if row else 0.0
        call_s = row.function_call_s if row else 0.0
        traced_calls = row.traced_call_s if row else 0.0
        traced = max(0.0, call_s - traced_calls - (input_s if fit else 0.0))
        eager = 0.0
        if "eager" in measured and gap:  # no gap: no ops were counted
            # the window's own count where the counter sampled it, the run's elsewhere
            ops = row.eager_ops_per_step if row and row.eager_sampled_steps else run_ops
            eager = (ops or 0.0) * gap * 1e-6 * span.steps
        outside = span.step_s - (0.0 if fit else input_s) - max(call_s, trace_s)
        # eager ops are issued outside the calls: their estimate (a count times a median
        # gap) is at most that time, so the parts never add up to more than the step
        eager = min(eager, max(outside, 0.0))
        # signed: a step is counted whole in the window it starts in, its calls' time in
        # the windows it falls in, so a step longer than a window leaves one window short
        # and the next over. Floored window by window, those halves would add up to
        # Python no one ran (0.4-1.5 s steps read as 19% "between calls" for 0.5 ms);
        # summed over the windows, as every reader does, they cancel
        python = outside - eager if row else 0.0
        units.append((float(span.steps), span.step_s, input_s, trace_s, traced, eager, python))
    return units, measured


def _part_windows(
    steps: StepFacts, spans: Sequence[StepSpan], rows: Mapping[int, RunWindow], width: float
) -> list[tuple[StepSpan, RunWindow | None]]:
    """The main loop's windows the parts are summed over, each with its row of the run's
    timeline. Every window a step of the loop starts in (one or two long steps too: a
    median needs three, a sum does not); and each row holds the call time of the windows
    after it that no step starts in but one of its steps runs through (a 1.5 s step
    started at 8.7 s calls until 10.2 s: windows 9 and 10 hold its calls and no step).
    Windows with a few long steps each kept apart, the step time would land where the
    steps start and their call time where they run: read as Python no one ran."""
    begin, end = main_loop_span(steps)
    assert steps.timeline is not None
    trimmed = [s for s in spans[:1] if s.start_s < begin - 1e-9]  # training_spans' first
    windows = trimmed + [
        s
        for s in steps.timeline.windows
        if begin - 1e-9 <= s.start_s <= end and s.steps > 0 and s.step_s > 0
    ]
    stepped = {round(s.start_s / width) for s in steps.timeline.windows}
    running = _windows_run_through(steps, width)
    out: list[tuple[StepSpan, RunWindow | None]] = []
    for span in windows:
        index = round(span.start_s / width)
        row = rows.get(index)
        after = index + 1
        spilled: list[RunWindow] = []
        while after not in stepped and after in running:
            if after in rows:
                spilled.append(rows[after])
            after += 1
        if row is not None and spilled:
            row = replace(
                row,
                function_call_s=row.function_call_s + sum(r.function_call_s for r in spilled),
                traced_call_s=row.traced_call_s + sum(r.traced_call_s for r in spilled),
                trace_s=row.trace_s + sum(r.trace_s for r in spilled),
            )
        span, row = _without_warmup(steps, span, row, width, begin)
        out.append((span, row))
    return out


def _without_warmup(
    steps: StepFacts, span: StepSpan, row: RunWindow | None, width: float, begin: float
) -> tuple[StepSpan, RunWindow | None]:
    """The window less the warm-up (tracing) calls of the main loop's first steps and of
    later loops' first ones: the step the parts describe is the warm-up-free one the
    Step line's mean and median are of. Left in, a script of four short fits read
    "tracing tf.functions 81%" on its steady steps of 1.2 ms: the last fit's first call
    (0.29 s, tracing) began 36 ms before the window its steps were read in and traced
    on into it, where the row of the run's timeline holds a call's time where it ran.
    A warm-up call's time leaves the row of each window it ran in (each such call is a
    step whose time is its traced call's) and the steps of the window it began in;
    where the steps kept one by one do not cover that window, its steps stay whole."""
    start, stop = span.start_s, span.start_s + width
    began = False
    spent = 0.0
    for i in steps.warmup_indices:
        if i >= len(steps.durations):
            continue
        call_start = steps.starts[i]
        began = began or start - 1e-9 <= call_start < stop - 1e-9
        spent += max(0.0, min(call_start + steps.durations[i], stop) - max(call_start, start))
    if began:
        kept = span_from(steps, max(begin, start), stop)
        if kept is not None:
            span = replace(kept, start_s=start)
    if row is None:
        return span, row
    if spent > 0:
        row = replace(
            row,
            function_call_s=max(0.0, row.function_call_s - spent),
            traced_call_s=max(0.0, row.traced_call_s - spent),
            trace_s=max(0.0, row.trace_s - spent),
        )
    return span, _traces_within_steps(steps, span, row, begin, width)


def _traces_within_steps(
    steps: StepFacts, span: StepSpan, row: RunWindow, begin: float, width: float
) -> RunWindow:
    """The row's traced calls cut to what the window's steps could hold: where the steps
    kept one by one cover the window and few of its steps traced (fewer traces than half
    its steps), the time its steps took beyond the typical step. A script that calls
    ``evaluate()`` or ``predict()`` between its fits traces their functions between
    the steps, in the main loop's windows (callbacks guide: "tracing tf.functions 33%"
    of a 0.9 ms step, in one run of two); a loop that retraces at every step keeps its
    traces, which its median step holds."""
    if not row.traced_call_s or row.traces * 2 >= span.steps or steps.median_s is None:
        return row
    start = max(begin, span.start_s)
    kept = span_from(steps, start, span.start_s + width)
    if kept is None:
        return row
    warm = steps.warmup_indices
    sizes = steps.kept_call_steps
    starts = steps.starts[: len(steps.durations)]
    lo = bisect.bisect_left(starts, start - 1e-9)
    hi = bisect.bisect_left(starts, span.start_s + width - 1e-9)
    excess = sum(
        max(0.0, steps.durations[i] - sizes[i] * steps.median_s)
        for i in range(lo, hi)
        if i not in warm
    )
    if row.traced_call_s <= excess:
        return row
    outside = row.traced_call_s - excess
    return replace(
        row,
        function_call_s=max(0.0, row.function_call_s - outside),
        traced_call_s=excess,
        trace_s=min(row.trace_s, excess),
    )


def _windows_run_through(steps: StepFacts, width: float) -> set[int]:
    """The windows a step kept one by one was still running at the start of."""
    spc = max(1, steps.steps_per_call)
    through: set[int] = set()
    for start, duration in zip(steps.starts, steps.durations):
        first, last = math.floor(start / width) + 1, math.floor((start + duration) / width)
        if last >= first and duration > width / (4 * spc):
            through.update(range(first, last + 1))
    return through


def _gpu_busy(facts: Facts, steps: StepFacts | None) -> list[tuple[float, float]]:
    """Each window's GPU busy share (mean of its GPUs), over training where there are
    steps, over the whole record where there are none (``gpuwhy watch``)."""
    timeline = facts.timeline
    if timeline is None:
        return []
    begin, end = -math.inf, math.inf
    if steps is not None and steps.timeline is not None:
        spans = derived(facts).training_spans
        if spans:
            begin, end = spans[0].start_s, spans[-1].start_s
    out = []
    for row in timeline.windows:
        if not (begin - 1e-9 <= row.start_s <= end + 1e-9):
            continue
        shares = [b for g in row.gpus if (b := window_busy(g)) is not None]
        if shares:
            out.append((1.0, sum(shares) / len(shares)))
    return out


def _aligned(
    spans: Sequence[StepSpan], rows: Mapping[int, RunWindow], width: float
) -> tuple[AlignedWindow, ...]:
    """The training windows from the first one's start: two runs drawn on one axis."""
    if not spans:
        return ()
    first = spans[0].start_s
    out = []
    for span in spans:
        row = rows.get(round(span.start_s / width))
        busy = [b for g in row.gpus if (b := window_busy(g)) is not None] if row else []
        out.append(
            AlignedWindow(
                start_s=round(span.start_s - first, 6),
                steps=span.steps,
                p50_s=span.p50_s,
                mean_s=round(span.step_s / span.steps, 9),
                input_share=round(span.input_wait_s / span.step_s, 4)
                if span.input_wait_s is not None and span.step_s > 0
                else None,
                gpu_busy=round(sum(busy) / len(busy), 4) if busy else None,
            )
        )
    return tuple(out)
