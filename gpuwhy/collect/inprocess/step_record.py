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
"""

from __future__ import annotations

import heapq
from array import array
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuwhy.collect.quantiles import Sketch
from gpuwhy.collect.step_histogram import StepHistogram
from gpuwhy.collect.time_windows import TimeWindows

HEAD_STEPS = 5000  # kept one by one, per loop
LAST_STEPS = 512  # the most recent steps, kept one by one
SLOWEST = 32  # the slowest steps after the head, kept one by one
MAX_SAMPLED = 50_000  # later steps kept as intervals for the eager op counter


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

    @property
    def per_step(self) -> float:
        return (self.end - self.start) / self.steps


class StepStats:
    """What a stretch of steps adds up to: the whole tail, or one window of the timeline."""

    __slots__ = (
        "calls",
        "steps",
        "step_s",
        "max_s",
        "wait_s",
        "waited",
        "first",
        "last",
        "sketch",
    )

    def __init__(self) -> None:
        self.calls = 0  # Step objects (a Keras call may run several steps)
        self.steps = 0
        self.step_s = 0.0
        self.max_s = 0.0  # per step
        self.wait_s = 0.0
        self.waited = 0  # calls whose input wait was timed
        self.first = float("inf")  # start of the first step, end of the last
        self.last = float("-inf")
        self.sketch = Sketch()  # time per step, one value per call

    def add(self, step: Step) -> None:
        per_step = step.per_step
        self.calls += 1
        self.steps += step.steps
        self.step_s += step.end - step.start
        self.max_s = max(self.max_s, per_step)
        if step.wait is not None:
            self.wait_s += step.wait
            self.waited += 1
        self.first = min(self.first, step.start)
        self.last = max(self.last, step.end)
        self.sketch.add(per_step)

    def copy(self) -> StepStats:
        twin = StepStats()
        twin.merge(self)
        return twin

    def merge(self, other: StepStats) -> None:
        self.calls += other.calls
        self.steps += other.steps
        self.step_s += other.step_s
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

    def add(self, step: Step) -> None:
        self.total.add(step)
        if step.wait is not None:
            self.waits.add(step.wait / step.steps)
        self.last.append(step)
        entry = (step.per_step, step.start, step.end)
        if len(self.slowest) < SLOWEST:
            heapq.heappush(self.slowest, entry)
        elif entry > self.slowest[0]:
            heapq.heapreplace(self.slowest, entry)


class LoopRecord:
    """Every step of one loop: the head kept, the tail summed, all in the timeline and
    in ``histogram`` (warm-up steps too: which those are is decided later, among the
    head's first steps).

    ``sampled``, where given, says whether a later step's interval is wanted one by one
    (it overlaps one of the eager op counter's windows): up to ``MAX_SAMPLED`` of them
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

    def add(self, step: Step) -> None:
        self.timeline.at(step.start).add(step)
        self.histogram.add(step.per_step, step.steps)
        if self.stalls is not None:
            self.stalls.add(step)
        if len(self.head) < HEAD_STEPS:
            self.head.append(step)
            return
        if self.tail is None:
            self.tail = LoopTail()
        self.tail.add(step)
        if (
            self.sampled is not None
            and len(self.kept_intervals) < 2 * MAX_SAMPLED
            and self.sampled(step.start, step.end)
        ):
            self.kept_intervals.extend((step.start, step.end))

    @property
    def count(self) -> int:
        head = sum(s.steps for s in self.head)
        return head + (self.tail.total.steps if self.tail is not None else 0)

    @property
    def calls(self) -> int:
        return len(self.head) + (self.tail.total.calls if self.tail is not None else 0)


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

    @property
    def count(self) -> int:
        tail = self.tail.total.steps if self.tail is not None else 0
        return sum(s.steps for s in self.steps) + tail + sum(s.steps for s in self.extra)


def snapshot(record: LoopRecord, open_steps: list[Step]) -> LoopView:
    """``record`` as it stands, with the steps its stream still holds open: a copy
    (taken under its owner's lock), so the drain may go on folding while it is read.
    Copying costs O(windows), whatever the loop's length."""
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
