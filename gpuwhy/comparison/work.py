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
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import replace

from gpuwhy.comparison.between_runs import difference
from gpuwhy.comparison.model import Change
from gpuwhy.facts import Facts

MIN_WINDOWS = 2  # whole training windows a run needs for its CPU time per step


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


def resolved(step: Change | None, work: Change | None) -> tuple[Change | None, str | None]:
    """The step time's change, called by the CPU time where its own interval holds no
    change, the CPU time's is tighter and both point the same way; and what was done,
    for people (None: the step time's interval alone)."""
    if step is None or work is None:
        return step, None
    spread = (
        f"the CPU time's runs resolve {work.detectable:.1%}, the step time's {step.detectable:.1%}"
    )
    if step.called != "same":
        if work.called not in ("same", step.called):
            return step, (
                f"the program's CPU time per step changed the other way ({work.estimate:.3f}x): "
                "the step time, the direct measure, is trusted"
            )
        return step, None
    same_way = (work.estimate - 1) * (step.estimate - 1) > 0
    # the step time's own estimate must lean that way by half what it could resolve: a
    # fix that saves host CPU where the step waits on something else does not count
    leans = abs(math.log(step.estimate)) >= math.log(1 + step.detectable) / 2
    if work.called == "same" or not same_way or not leans or work.detectable >= step.detectable:
        return step, None
    return replace(step, called=work.called), (
        f"called by the program's CPU time per step ({work.estimate:.3f}x, "
        f"{work.low:.3f}-{work.high:.3f}): {spread}, and the step time points the same way"
    )
