"""One loop's steps in bounded memory: the first ones as they were, the rest as statistics.

A training job may run millions of steps. The first ``HEAD_STEPS`` of every loop are
kept one by one: warm-up and tracing live there, every rule that looks at single steps
reads them, and a run of up to that many steps is described exactly. Every later step
only updates fixed-size state (:class:`LoopTail`): counts and sums, a quantile sketch of
the time per step and of the input wait, the ``LAST_STEPS`` most recent steps, the
``SLOWEST`` slowest ones, and a timeline of windows that merge as the run grows
(:mod:`gpuwhy.collect.time_windows`). Every step, the first ones too, goes into that
timeline, so it covers the loop from its first step to its last, and into the live step
histogram's buckets (:mod:`gpuwhy.collect.step_histogram`), so live metrics take in
every step however long the run.

Those sums are made ``PENDING`` steps at a time, with NumPy (:meth:`LoopRecord.flush`),
not step by step: the drain thread that folds steps holds the GIL, and on a loop of
0.2 ms steps summing each step on its own took as long as a twentieth of the step.

A step may stand for a stretch of steps seen only as a count (``Step.counted``): on a
long steady loop of short steps the ``next()`` timing pauses (hook_pauses.py), and the
steps it did not time come back as their number and the time they took together. Those
go into the counts and sums (the timeline's windows, in proportion to the time each
window holds of them, the tail's totals, the stall tracker's), never into what describes
single steps (the head, the sketches, the histogram, the slowest and latest steps, the
stalls themselves).
"""

from __future__ import annotations

import heapq
from array import array
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from gpuwhy.collect.quantiles import Sketch
from gpuwhy.collect.step_histogram import StepHistogram
from gpuwhy.collect.time_windows import TimeWindows

HEAD_STEPS = 5000  # kept one by one, per loop
LAST_STEPS = 512  # the most recent steps, kept one by one
SLOWEST = 32  # the slowest steps after the head, kept one by one
MAX_SAMPLED = 50_000  # later steps kept as intervals for the eager op counter
PENDING = 512  # steps held as _COLUMNS numbers each until they are summed together
# A pending step's columns: start, end, steps, input wait (NaN: not timed), in the tail
_COLUMNS = 5


@dataclass(slots=True)
class Step:
    """One step: from ``start`` to ``end`` on the perf_counter axis."""

    start: float
    end: float
    steps: int = 1  # steps this call ran (Keras steps_per_execution)
    wait: float | None = None
    warm: bool = False  # one of its loop's warm-up steps: out of the statistics
    # the first step of a later part of its loop (another Keras fit of a new model, a
    # fine-tuning fit after a new compile): a warm-up of its own where far slower
    opens: bool = False
    # a stretch of ``steps`` steps seen only as a count (the timing paused): their sum
    counted: bool = False

    @property
    def per_step(self) -> float:
        return (self.end - self.start) / self.steps


class StepStats:
    """What a stretch of steps adds up to: the whole tail, or one window of the timeline."""

    __slots__ = (
        "calls",
        "steps",
        "counted",
        "counted_s",
        "step_s",
        "max_s",
        "wait_s",
        "waited",
        "first",
        "last",
        "sketch",
    )

    def __init__(self) -> None:
        self.calls = 0  # Step objects timed (a Keras call may run several steps)
        self.steps = 0  # every step, those only counted too
        self.step_s = 0.0
        self.counted = 0  # steps seen only as a count (Step.counted), in ``steps``
        self.counted_s = 0.0  # their time, in ``step_s``
        self.max_s = 0.0  # per step
        self.wait_s = 0.0
        self.waited = 0  # calls whose input wait was timed
        self.first = float("inf")  # start of the first step, end of the last
        self.last = float("-inf")
        self.sketch = Sketch()  # time per step, one value per call

    def add_many(self, start: Any, end: Any, steps: Any, wait: Any, per_step: Any) -> None:
        """The steps of these columns (NumPy arrays; ``wait`` NaN where not timed)."""
        if not len(start):
            return
        import numpy as np

        timed = ~np.isnan(wait)
        self.calls += len(start)
        self.steps += int(steps.sum())
        self.step_s += float((end - start).sum())
        self.max_s = max(self.max_s, float(per_step.max()))
        self.wait_s += float(wait[timed].sum())
        self.waited += int(timed.sum())
        self.first = min(self.first, float(start.min()))
        self.last = max(self.last, float(end.max()))
        self.sketch.add_many(per_step)

    def add_counted(self, start: float, end: float, steps: int) -> None:
        """``steps`` steps from ``start`` to ``end`` seen only as a count: they add to
        the counts and sums, not to the times of single steps."""
        self.steps += steps
        self.step_s += end - start
        self.counted += steps
        self.counted_s += end - start
        self.first = min(self.first, start)
        self.last = max(self.last, end)

    @property
    def timed_s(self) -> float:
        """The time of the steps timed one by one."""
        return self.step_s - self.counted_s

    def copy(self) -> StepStats:
        twin = StepStats()
        twin.merge(self)
        return twin

    def merge(self, other: StepStats) -> None:
        self.calls += other.calls
        self.steps += other.steps
        self.step_s += other.step_s
        self.counted += other.counted
        self.counted_s += other.counted_s
        self.max_s = max(self.max_s, other.max_s)
        self.wait_s += other.wait_s
        self.waited += other.waited
        self.first = min(self.first, other.first)
        self.last = max(self.last, other.last)
        self.sketch.merge(other.sketch)

    @property
    def all_waited(self) -> bool:
        return self.calls > 0 and self.waited == self.calls


class LoopTail:
    """The steps of one loop after its first ``HEAD_STEPS``, in fixed-size state."""

    def __init__(self) -> None:
        self.total = StepStats()
        self.waits = Sketch()  # input wait per step, of the calls that timed it
        self.last: deque[Step] = deque(maxlen=LAST_STEPS)
        self.slowest: list[tuple[float, float, float]] = []  # heap of (per step, start, end)

    def copy(self) -> LoopTail:
        twin = LoopTail()
        twin.total = self.total.copy()
        twin.waits = self.waits.copy()
        twin.last = deque(self.last, maxlen=LAST_STEPS)
        twin.slowest = list(self.slowest)
        return twin

    def add_many(self, start: Any, end: Any, steps: Any, wait: Any, per_step: Any) -> None:
        """The statistics of these steps (columns, as :meth:`StepStats.add_many`); the
        steps themselves are appended to ``last`` by the caller, as they come."""
        import numpy as np

        self.total.add_many(start, end, steps, wait, per_step)
        timed = ~np.isnan(wait)
        self.waits.add_many(wait[timed] / steps[timed])
        if len(self.slowest) >= SLOWEST:  # only those above the slowest kept's least
            slow = np.flatnonzero(per_step >= self.slowest[0][0])
        else:
            slow = np.arange(len(per_step))
        if len(slow) > SLOWEST:
            slow = slow[np.argsort(per_step[slow])[-SLOWEST:]]
        for i in slow.tolist():
            self._keep_if_slow((float(per_step[i]), float(start[i]), float(end[i])))

    def _keep_if_slow(self, entry: tuple[float, float, float]) -> None:
        if len(self.slowest) < SLOWEST:
            heapq.heappush(self.slowest, entry)
        elif entry > self.slowest[0]:
            heapq.heapreplace(self.slowest, entry)


class LoopRecord:
    """Every step of one loop: the head kept, the tail summed, all in the timeline and
    in ``histogram`` (warm-up steps too: which those are is decided later, among the
    head's first steps).

    ``sampled``, where given, says of later steps (arrays of their starts and ends)
    which ones are wanted one by one (they overlap one of the eager op counter's
    windows; None: none): up to ``MAX_SAMPLED`` of them
    are kept for it. ``stalls``, where given, is fed every step too (a
    :class:`~gpuwhy.collect.inprocess.stall_tracker.StallTracker`)."""

    def __init__(
        self,
        t0: float,
        sampled: Callable[[float, float], bool] | None = None,
        stalls: Any = None,
    ) -> None:
        self.head: list[Step] = []
        self.stalls = stalls
        self.tail: LoopTail | None = None
        self.timeline: TimeWindows[StepStats] = TimeWindows(t0, StepStats)
        self.sampled = sampled
        self.kept_intervals = array("d")  # start, end, start, end ... (16 bytes a step)
        self.histogram = StepHistogram()
        self._pending = array("d")  # steps not summed yet, _COLUMNS numbers each

    def add(self, step: Step) -> None:
        if step.counted:
            self._add_counted(step)
            return
        if self.stalls is not None:
            self.stalls.add(step)
        wait = float("nan") if step.wait is None else step.wait
        if len(self.head) < HEAD_STEPS:
            self.head.append(step)
            in_tail = 0.0
        else:
            if self.tail is None:
                self.tail = LoopTail()
            self.tail.last.append(step)
            in_tail = 1.0
        pending = self._pending
        pending.extend((step.start, step.end, step.steps, wait, in_tail))
        if len(pending) >= PENDING * _COLUMNS:
            self.flush()

    def flush(self) -> None:
        """Sum the pending steps into the timeline, the histogram and the tail (and
        keep the later steps the eager op counter's windows overlap): at ``PENDING``
        steps, and before anything reads the record."""
        if not self._pending:
            return
        import numpy as np

        columns = np.array(self._pending).reshape(-1, _COLUMNS)
        del self._pending[:]
        start, end, steps, wait, in_tail = columns.T
        per_step = (end - start) / steps
        self._add_to_timeline(start, end, steps, wait, per_step)
        self.histogram.add_many(per_step, steps)
        tail = in_tail > 0
        if self.tail is None or not tail.any():
            return
        if not tail.all():
            start, end, steps, wait, per_step = (
                start[tail],
                end[tail],
                steps[tail],
                wait[tail],
                per_step[tail],
            )
        self.tail.add_many(start, end, steps, wait, per_step)
        room = MAX_SAMPLED - len(self.kept_intervals) // 2
        wanted = self.sampled(start, end) if self.sampled is not None and room > 0 else None
        if wanted is not None:
            kept = np.flatnonzero(wanted)[:room]
            self.kept_intervals.extend(np.column_stack((start[kept], end[kept])).ravel().tolist())

    def _add_to_timeline(self, start: Any, end: Any, steps: Any, wait: Any, per: Any) -> None:
        """Each run of consecutive steps that start in one window, summed into it (the
        windows' width may double on the way: the rest are placed again)."""
        import numpy as np

        timeline, first = self.timeline, 0
        while first < len(start):
            width = timeline.width
            index = np.maximum(0, (start[first:] - timeline.t0) // width)
            changes = np.flatnonzero(index[1:] != index[:-1])
            ends = [*(first + changes + 1).tolist(), len(start)]
            for last in ends:
                window = timeline.at(float(start[first]))
                part = slice(first, last)
                window.add_many(start[part], end[part], steps[part], wait[part], per[part])
                first = last
                if timeline.width != width:
                    break

    def _add_counted(self, step: Step) -> None:
        """A stretch of steps seen only as a count: into the tail's totals and the
        timeline's windows (each window the share of the steps its time holds), after
        the steps pending before it."""
        self.flush()
        if self.stalls is not None:
            self.stalls.add_counted(step)
        if self.tail is None:
            self.tail = LoopTail()
        self.tail.total.add_counted(step.start, step.end, step.steps)
        for start, end, steps in _spread(step, self.timeline):
            # by its middle: a part may begin with a sliver of the window before
            self.timeline.at((start + end) / 2).add_counted(start, end, steps)

    @property
    def count(self) -> int:
        self.flush()
        head = sum(s.steps for s in self.head)
        return head + (self.tail.total.steps if self.tail is not None else 0)

    @property
    def calls(self) -> int:
        self.flush()
        return len(self.head) + (self.tail.total.calls if self.tail is not None else 0)


def _spread(step: Step, timeline: TimeWindows) -> list[tuple[float, float, int]]:
    """(start, end, steps) of a counted stretch per window of ``timeline`` it spans,
    the steps in proportion to the time (their rounded sums add up to ``step.steps``).
    The windows are those of the width the timeline has once the stretch's end is in it."""
    timeline.at(step.end)  # the width the stretch's end makes
    width, t0 = timeline.width, timeline.t0
    duration = step.end - step.start
    if duration <= 0:
        return [(step.start, step.end, step.steps)]
    parts: list[tuple[float, float, int]] = []
    edge = begin = step.start
    given = 0
    while edge < step.end:
        index = max(0, int((edge - t0) // width))
        until = min(step.end, t0 + (index + 1) * width)
        if until <= edge:  # the float edge of a window: on to the next
            until = min(step.end, edge + width)
        share = round(step.steps * (until - step.start) / duration) - given
        if share > 0:  # a sliver too short for a step of its own joins the next part
            parts.append((begin, until, share))
            given, begin = given + share, until
        edge = until
    if not parts:
        return [(step.start, step.end, step.steps)]
    if begin < step.end:  # the last sliver joins the last part
        parts[-1] = (parts[-1][0], step.end, parts[-1][2])
    return parts


@dataclass
class LoopView:
    """One loop's steps as a snapshot reads them: ``steps`` the head (with a step still
    open while the head has room for it), ``tail`` the later steps summed, ``extra`` a
    step still open beyond the head, ``intervals`` later steps kept for the eager op
    counter, ``timeline`` all of them but the open one. ``still_open``: the steps of the
    view whose end may still move (in ``steps`` or ``extra``); ``histogram`` every step
    but those, counted in the live histogram's buckets (a copy); ``stalls`` a copy of
    the record's stall tracker (None: the record had none)."""

    steps: list[Step]
    tail: LoopTail | None
    timeline: TimeWindows[StepStats]
    extra: list[Step]
    intervals: list[tuple[float, float]]
    histogram: StepHistogram
    still_open: list[Step]
    stalls: Any = None

    @cached_property
    def count(self) -> int:
        """Every step of the view. Kept once read: the facts ask it of each loop a dozen
        times over (sorting, the markers), each time a walk of the head's 5,000 steps;
        what the view holds never changes its steps (a step marked as a warm-up is
        replaced by one of as many steps)."""
        tail = self.tail.total.steps if self.tail is not None else 0
        return sum(s.steps for s in self.steps) + tail + sum(s.steps for s in self.extra)


def snapshot(record: LoopRecord, open_steps: list[Step]) -> LoopView:
    """``record`` as it stands, with the steps its stream still holds open: a copy
    (taken under its owner's lock), so the drain may go on folding while it is read.
    Copying costs O(windows), whatever the loop's length."""
    record.flush()
    room = max(0, HEAD_STEPS - len(record.head))
    return LoopView(
        steps=record.head + open_steps[:room],
        tail=record.tail.copy() if record.tail is not None else None,
        timeline=record.timeline.copy(),
        extra=open_steps[room:],
        intervals=list(zip(record.kept_intervals[0::2], record.kept_intervals[1::2])),
        histogram=record.histogram.copy(),
        still_open=list(open_steps),
        stalls=record.stalls.copy() if record.stalls is not None else None,
    )


def view_of(t0: float, steps: list[Step]) -> LoopView:
    """A view of steps not recorded yet (a stream's held-back head, a test's calls): the
    last one is still open (a function's last call: its step ends at the next call)."""
    record = LoopRecord(t0)
    for step in steps:
        record.add(step)
    view = snapshot(record, [])
    if steps:
        last = steps[-1]
        view.histogram.add(last.per_step, -last.steps)
        view.still_open = [last]
    return view
