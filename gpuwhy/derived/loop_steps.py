"""One loop's steps out of a run's: the step facts of a program that trains in several
loops pool them all (a tutorial's two eager loops of 18 ms steps, then the same step
traced at 1.3 ms: a median of 17 ms), and a figure about one function's loop (the
projected step of ``--target``) read from the pool is another loop's.

The steps kept one by one that started within the loop's span (its first to its last
step, as :class:`~gpuwhy.facts.StepLoop` says) are the loop's; its count and median are
the loop's own. Where the kept steps end before the loop does (a long run keeps its
first steps), its total is the kept steps' mean times its steps: said as such by
nothing, since every reader of it (the projection) is itself an estimate.
"""

from __future__ import annotations

import statistics
from dataclasses import replace

from gpuwhy.facts import StepFacts, StepLoop


def loop_steps(steps: StepFacts, loop: StepLoop) -> StepFacts:
    """``steps`` cut to ``loop``'s: its count, median, kept steps, warm-up and waits."""
    end = loop.last_s if loop.last_s is not None else float("inf")
    kept = [
        i
        for i in range(min(len(steps.starts), len(steps.durations)))
        if loop.first_s - 1e-9 <= steps.starts[i] <= end + 1e-9
    ]
    sizes = steps.kept_call_steps
    warm = [i for i in kept if i in steps.warmup_indices]
    after = [i for i in kept if i not in steps.warmup_indices]
    per_step = [steps.durations[i] / sizes[i] for i in after]
    waits = [  # (the call's wait, its time, its steps)
        (wait, steps.durations[i], sizes[i])
        for i in after
        if i < len(steps.input_waits) and (wait := steps.input_waits[i]) is not None
    ]
    warmup = sum(sizes[i] for i in warm)
    counted = max(0, loop.count - warmup)
    kept_steps = sum(sizes[i] for i in after)
    total = sum(steps.durations[i] for i in after)
    if kept_steps and kept_steps < counted:  # the kept steps end before the loop does
        total = total / kept_steps * counted
    waited = sum(w for w, _, _ in waits)
    timed = sum(d for _, d, _ in waits)
    index = {i: k for k, i in enumerate(kept)}
    # Keras fit's wait is tf.data's gap timer's, not timed step by step: the run's
    # figure stands for a fit's loop; another loop's steps without waits have none
    fit = loop.source == steps.source == "keras-fit"
    pooled_fraction = steps.input_wait_fraction if fit else None
    pooled_median = steps.input_wait_median_s if fit else None
    return replace(
        steps,
        source=loop.source,
        marker=loop.name,
        count=loop.count,
        warmup=warmup,
        later_warmup=tuple(index[i] for i in warm if index[i] > 0),
        median_s=loop.median_s
        if loop.median_s is not None
        else (statistics.median(per_step) if per_step else None),
        p90_s=_p90(per_step),
        total_s=total,
        input_wait_fraction=waited / timed if waits and timed > 0 else pooled_fraction,
        input_wait_median_s=statistics.median(w / n for w, _, n in waits)
        if waits
        else pooled_median,
        first_step_s=steps.starts[kept[0]] if kept else loop.first_s,
        starts=tuple(steps.starts[i] for i in kept),
        durations=tuple(steps.durations[i] for i in kept),
        input_waits=tuple(steps.input_waits[i] for i in kept if i < len(steps.input_waits)),
        call_steps=tuple(steps.call_steps[i] for i in kept) if steps.call_steps else (),
        loops=(loop,),
        last_steps=tuple(s for s in steps.last_steps if loop.first_s <= s[0] <= end + 1e-9),
        slowest=tuple(s for s in steps.slowest if loop.first_s <= s[0] <= end + 1e-9),
        counted_only=0,
    )


def _p90(per_step: list[float]) -> float | None:
    if not per_step:
        return None
    ordered = sorted(per_step)
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
