"""The windows of a run's step timeline that say something about its training steps, one
definition for every reader (the drift finding, `gpuwhy diff`): the main loop's windows
after its warm-up, the run timeline's row for each, and a window's input wait however it
was measured."""

from __future__ import annotations

from gpuwhy.facts import Facts, RunWindow, StepFacts, StepSpan

MIN_WINDOW_STEPS = 3  # a window's median from fewer steps is not read


def training_spans(steps: StepFacts) -> list[StepSpan]:
    """The main loop's windows after its warm-up with enough steps to have a median."""
    assert steps.timeline is not None
    begin, end = 0.0, float("inf")
    if steps.loops:
        main = steps.loops[0]
        begin = main.first_s
        if main.last_s is not None:
            end = main.last_s
    if steps.warmup and steps.warmup < len(steps.starts):
        begin = max(begin, steps.starts[steps.warmup])
    return [
        s
        for s in steps.timeline.windows
        if s.start_s >= begin - 1e-9
        and s.start_s <= end
        and s.steps >= MIN_WINDOW_STEPS
        and s.p50_s
    ]


def span_input_wait(span: StepSpan, row: RunWindow | None) -> float | None:
    """A window's input wait: measured around next() in a loop; for Keras fit, its steps'
    time less tf.data's consumer time per element then (input_wait.py: step = wait +
    gap)."""
    if span.input_wait_s is not None:
        return span.input_wait_s
    if row is not None and row.fit_gap_s is not None:
        return max(0.0, span.step_s - span.steps * row.fit_gap_s)
    return None


def timeline_rows(facts: Facts, width: float) -> dict[int, RunWindow]:
    timeline = facts.timeline
    if timeline is None or abs(timeline.width_s - width) > 1e-9:
        return {}
    return {round(w.start_s / width): w for w in timeline.windows}
