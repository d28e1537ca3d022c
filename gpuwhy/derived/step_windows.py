"""The windows of a run's step timeline that say something about its training steps, one
definition for every reader (the drift finding, `gpuwhy diff`): the main loop's windows
after its warm-up, the run timeline's row for each, and a window's input wait however it
was measured."""

from __future__ import annotations

import bisect
import math
import statistics
from dataclasses import replace

from gpuwhy.facts import Facts, RunWindow, StepFacts, StepSpan

MIN_WINDOW_STEPS = 3  # a window's median from fewer steps is not read


def training_spans(steps: StepFacts) -> list[StepSpan]:
    """The main loop's windows after its warm-up with enough steps to read their time
    (a median where some were timed; windows the hooks paused through have none).

    The window the loop's first counted step falls in also holds the steps before it
    (warm-up, another loop): where the steps kept one by one cover it, it is read from
    its own steps from there on, not dropped. A run whose fast first epoch fills a
    window and a half would otherwise keep one window of it, too few to tell the slower
    epochs after it from it."""
    assert steps.timeline is not None
    begin, end = main_loop_span(steps)
    width = steps.timeline.width_s
    spans = []
    for s in steps.timeline.windows:
        if s.start_s < begin - 1e-9 < s.start_s + width - 1e-9:
            trimmed = span_from(steps, begin, s.start_s + width)
            if trimmed is not None:
                s = replace(trimmed, start_s=s.start_s)
            else:
                continue
        elif s.start_s < begin - 1e-9 or s.start_s > end:
            continue
        # a window the hooks paused through has its steps counted and their time summed
        # but none timed (no median): it still says how long its steps took, and a
        # drift after the hooks began to pause showed in too few windows without it
        # (a loop that slowed 2x at its middle: steps.drift in 2 runs of 4)
        if s.steps >= MIN_WINDOW_STEPS and (s.p50_s or s.step_s > 0):
            spans.append(s)
    return spans


def main_loop_span(steps: StepFacts) -> tuple[float, float]:
    """When the main loop's first counted step (after warm-up) and its last started."""
    begin, end = 0.0, float("inf")
    if steps.loops:
        main = steps.loops[0]
        begin = main.first_s
        if main.last_s is not None:
            end = main.last_s
    if steps.warmup and steps.warmup < len(steps.starts):
        begin = max(begin, steps.starts[steps.warmup])
    return begin, end


def span_from(steps: StepFacts, begin: float, stop: float) -> StepSpan | None:
    """The steps kept one by one that started in [begin, stop), as one window, a later
    loop's warm-up calls left out; None where those steps do not reach ``stop`` (the
    rest of the window is not kept)."""
    starts = steps.starts[: len(steps.durations)]  # a record's two series, each whole
    if not starts or (not steps.all_kept and starts[-1] < stop):
        return None
    if len(starts) < len(steps.starts) and starts[-1] < stop:
        return None  # durations for part of the window only
    lo, hi = bisect.bisect_left(starts, begin - 1e-9), bisect.bisect_left(starts, stop - 1e-9)
    later = set(steps.later_warmup)
    calls = [i for i in range(lo, hi) if i not in later]
    if not calls:
        return None
    sizes = steps.kept_call_steps
    per_step = sorted(steps.durations[i] / sizes[i] for i in calls)
    waits = [steps.input_waits[i] if i < len(steps.input_waits) else None for i in calls]
    return StepSpan(
        start_s=begin,
        steps=sum(sizes[i] for i in calls),
        p50_s=round(statistics.median(per_step), 6),
        p90_s=round(per_step[min(len(per_step) - 1, int(0.9 * len(per_step)))], 6),
        max_s=round(per_step[-1], 6),
        step_s=round(sum(steps.durations[i] for i in calls), 6),
        input_wait_s=None if None in waits else round(sum(w or 0.0 for w in waits), 6),
    )


def span_step_time(span: StepSpan, steps_per_call: int = 1, row: RunWindow | None = None) -> float:
    """A window's time per step: every step that started in it, those only counted
    while the hooks paused too, less its slowest call (one long step: an epoch's first, a
    checkpoint) and less gpuwhy's own pauses in it (``row``'s: a heap census holds the
    program for a tenth of a second or more, and the windows it falls in read slower by
    that much: in a run whose memory grows, the windows right after a slowdown, which
    made the change look like noise). The window's median comes from its timed steps
    alone, which a pause leaves to a fraction of the window; this is what the window's
    steps took, less one outlier."""
    spc = max(1, steps_per_call)
    own = row.own_pause_s if row is not None else 0.0
    slowest = span.max_s * spc
    if own and slowest < own:
        slowest += own  # the pause fell in a step only counted: both come out
    if span.steps <= spc:
        return max(0.0, span.step_s - own) / max(1, span.steps)
    return max(0.0, span.step_s - slowest) / (span.steps - spc)


def span_input_wait(span: StepSpan, row: RunWindow | None) -> float | None:
    """A window's input wait: measured around next() in a loop; for Keras fit, its steps'
    time less tf.data's consumer time per element then (input_wait.py: step = wait +
    gap) and less gpuwhy's own pauses (a heap census is neither)."""
    if span.input_wait_s is not None:
        return span.input_wait_s
    if row is not None and row.fit_gap_s is not None:
        return max(0.0, span.step_s - row.own_pause_s - span.steps * row.fit_gap_s)
    return None


def timeline_rows(facts: Facts, width: float) -> dict[int, RunWindow]:
    """The run timeline's windows by their index on the steps' timeline; not the one
    the main loop begins in: its row holds the warm-up's calls and traces too, where its
    step window (training_spans) holds only the steps after it."""
    timeline = facts.timeline
    if timeline is None or abs(timeline.width_s - width) > 1e-9:
        return {}
    rows = {round(w.start_s / width): w for w in timeline.windows}
    if facts.steps is not None and facts.steps.timeline is not None:
        begin, _ = main_loop_span(facts.steps)
        index = math.floor(begin / width + 1e-9)
        if index * width < begin - 1e-9:
            rows.pop(index, None)
    return rows
