"""The program's own work per step: the CPU time its process tree spent per training step,
a second measure of a step beside its wall time, which the machine's load moves less.

Runs of one unchanged program on a shared machine differ mostly by how long the program
waits for a core the other processes hold: wall time grows with it, the program's CPU
time does not. Its own CPU seconds per step (all its threads: TF's thread pools, the
input pipeline, Python) are read from the run's timeline windows (each window's share of
all cores, so per step in core-share seconds: cores are the same on both sides and
cancel in a ratio), over the windows wholly inside training (the first and last windows
that hold steps are left out: start-up, tracing and the end share them).

It is not the step time: a fix that runs the same work on more threads (a parallel map)
shortens the step and not the CPU time. So it never calls a change on its own: where the
step time's interval holds no change, the CPU time's tighter interval calls it only when
both measures point the same way, and the report says which measure called it.

A third measure, the run's fastest steps (the tenth percentile of its time per step,
over the training steps it kept one by one: a long run's first 5,000), is read the same
way. A run's fastest steps move less from run to run than its mean (what slows a run
on a shared machine can lengthen some steps and leave others alone): on this project's
recorded series (benchmarks/data/), the spread of the log of a run's level between ten
runs of one unchanged program was 0.148 for the mean step and 0.088 for the tenth
percentile (a custom loop, quiet host), 0.117 and 0.081 (a Keras fit). A change that
lengthens every step moves them alike; one that removes waits from some steps (an
input fix) leaves the fastest alone, and the step time then speaks for itself.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import replace

from gpuwhy.comparison.between_runs import difference
from gpuwhy.comparison.comparable_units import kept_training_steps
from gpuwhy.comparison.model import Change
from gpuwhy.facts import Facts

MIN_WINDOWS = 2  # whole training windows a run needs for its CPU time per step
FAST_QUANTILE = 0.1  # a run's fastest steps: this quantile of its time per step
MIN_FAST_STEPS = 30  # steps kept one by one after warm-up, for the fastest steps


def cpu_per_step(facts: Facts) -> float | None:
    """Core-share seconds of the program per training step, or None where the run has
    too few whole training windows with the CPU read."""
    timeline = facts.timeline
    if timeline is None:
        return None
    stepped = [i for i, w in enumerate(timeline.windows) if w.steps > 0]
    if len(stepped) < MIN_WINDOWS + 2:
        return None
    inner = [timeline.windows[i] for i in range(stepped[0] + 1, stepped[-1])]
    if any(w.cpu_process_share is None for w in inner) or len(inner) < MIN_WINDOWS:
        return None
    steps = sum(w.steps for w in inner)
    if steps <= 0:
        return None
    return sum((w.cpu_process_share or 0.0) * timeline.width_s for w in inner) / steps


def fast_steps(facts: Facts) -> float | None:
    """The run's fastest steps: ``FAST_QUANTILE`` of its time per step over the training
    steps it kept one by one (a long run's first ones; None: too few)."""
    if facts.steps is None:
        return None
    kept = kept_training_steps(facts.steps, whole_run=False)
    if kept is None or len(kept) < MIN_FAST_STEPS:
        return None
    ranked = sorted(kept)
    return ranked[int(FAST_QUANTILE * (len(ranked) - 1))]


def fast_between(before: Sequence[Facts], after: Sequence[Facts]) -> Change | None:
    """AFTER's fastest steps over BEFORE's, each run one observation."""
    return levels_between("fast_steps", fast_steps, before, after)


def work_between(before: Sequence[Facts], after: Sequence[Facts]) -> Change | None:
    """AFTER's CPU time per step over BEFORE's, each run one observation, the interval
    from the runs' spread (two runs a side at least, every run measured)."""
    return levels_between("cpu_per_step", cpu_per_step, before, after)


def levels_between(
    measure: str,
    level: Callable[[Facts], float | None],
    before: Sequence[Facts],
    after: Sequence[Facts],
) -> Change | None:
    """AFTER's ``level`` over BEFORE's, one positive figure a run (two runs a side at
    least, every run measured: None otherwise)."""
    levels_b = [level(f) for f in before]
    levels_a = [level(f) for f in after]
    if any(v is None or v <= 0 for v in (*levels_b, *levels_a)):
        return None
    if len(levels_b) < 2 or len(levels_a) < 2:
        return None
    return ratio_between(measure, [v for v in levels_b if v], [v for v in levels_a if v])


def ratio_between(measure: str, before: Sequence[float], after: Sequence[float]) -> Change | None:
    """AFTER's level over BEFORE's (geometric means of one positive figure a run), the
    interval from the runs' spread alone (Student's t on the logs, no floor)."""
    logs_b = [math.log(v) for v in before]
    logs_a = [math.log(v) for v in after]
    d = difference(logs_b, logs_a)
    if d is None:
        return None
    return Change(
        measure=measure,
        before=round(math.exp(statistics.fmean(logs_b)), 9),
        after=round(math.exp(statistics.fmean(logs_a)), 9),
        estimate=round(math.exp(d.estimate), 5),
        low=round(math.exp(d.low), 5),
        high=round(math.exp(d.high), 5),
        called="slower" if d.low > 0 else "faster" if d.high < 0 else "same",
        detectable=round(math.exp(d.half_width) - 1, 5),
    )


def resolved(
    step: Change | None, work: Change | None, fast: Change | None = None
) -> tuple[Change | None, str | None]:
    """The step time's change, called by a second measure — the CPU time per step
    (``work``) or the fastest steps (``fast``) — where the step time's own interval holds
    no change, that measure's is tighter and both point the same way (the tightest such
    one); and what was done, for people (None: the step time's interval alone)."""
    if step is None or (work is None and fast is None):
        return step, None
    if step.called != "same":
        if work is not None and work.called not in ("same", step.called):
            return step, (
                f"the program's CPU time per step changed the other way ({work.estimate:.3f}x): "
                "the step time, the direct measure, is trusted"
            )
        return step, None
    # the step time's own estimate must lean that way by half what it could resolve: a
    # fix that saves host CPU where the step waits on something else does not count
    leans = abs(math.log(step.estimate)) >= math.log(1 + step.detectable) / 2
    callers = [
        m
        for m in (work, fast)
        if m is not None
        and m.called != "same"
        and (m.estimate - 1) * (step.estimate - 1) > 0
        and m.detectable < step.detectable
        and m.low <= step.estimate <= m.high  # one change, seen by both
    ]
    if not leans or not callers:
        return step, None
    by = min(callers, key=lambda m: m.detectable)
    what = _MEASURE_WORDS[by.measure]
    return replace(step, called=by.called), (
        f"called by {what} ({by.estimate:.3f}x, {by.low:.3f}-{by.high:.3f}): their runs "
        f"resolve {by.detectable:.1%}, the step time's {step.detectable:.1%}, and the step "
        "time points the same way"
    )


_MEASURE_WORDS = {
    "cpu_per_step": "the program's CPU time per step",
    "fast_steps": f"the runs' fastest steps (the {FAST_QUANTILE:.0%} quantile of the step time)",
}
