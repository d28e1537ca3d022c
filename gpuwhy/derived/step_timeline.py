"""Where a long run's later steps ran: the step timeline's windows beyond the steps
kept one by one, read by the rules (the training windows GPU activity is averaged over)
and by the HTML timeline (where it draws each window), so both place them alike."""

from __future__ import annotations

from gpuwhy.facts import StepFacts, StepSpan


def later_spans(steps: StepFacts) -> list[tuple[float, float, StepSpan]]:
    """Each timeline window holding steps beyond those kept one by one, as (from, to,
    window): from the end of the kept steps to the end of the run's last step
    (``last_steps``). A window beside one without steps (a pause: an evaluation, a
    checkpoint) is cut to the wall time its steps took, on the side away from the pause:
    steps follow one another, so that stretch is theirs, and what the GPU did in the
    pause is not the training's. Empty where every step is kept."""
    timeline = steps.timeline
    if steps.all_kept or timeline is None or not timeline.windows:
        return []
    width = timeline.width_s
    kept_end = max((a + d for a, d in zip(steps.starts, steps.durations)), default=float("-inf"))
    last_end = (
        steps.last_steps[-1][0] + steps.last_steps[-1][1]
        if steps.last_steps
        else timeline.windows[-1].start_s + width
    )
    held = {round(w.start_s / width) for w in timeline.windows if w.steps}
    spans = []
    for window in timeline.windows:
        start, end = window.start_s, window.start_s + width
        if not window.steps or end <= kept_end:
            continue
        n = round(start / width)
        filled = min(window.step_s, width)
        after_pause, before_pause = n - 1 not in held, n + 1 not in held
        if after_pause and not before_pause:
            start = end - filled
        elif before_pause and not after_pause:
            end = start + filled
        start, end = max(start, kept_end), min(end, last_end)
        if end > start:
            spans.append((start, end, window))
    return spans
