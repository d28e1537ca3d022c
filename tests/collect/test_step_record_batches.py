"""A loop's record sums its steps a batch at a time (step_record.PENDING): what it holds
must be what the steps add up to, worked out here in plain Python — the same sums,
counts, extremes, slowest steps, histogram and windows, quantiles within the sketch's
accuracy, and the same steps kept for the eager op counter — including across a timeline
whose windows merge in the middle of a batch."""

from __future__ import annotations

import heapq
import math
import random

import numpy as np
import pytest

from gpuwhy.collect.inprocess.step_record import HEAD_STEPS, SLOWEST, LoopRecord, Step, StepStats
from gpuwhy.collect.quantiles import RELATIVE_ACCURACY, Sketch
from gpuwhy.collect.step_histogram import StepHistogram
from gpuwhy.collect.time_windows import TimeWindows


def steps(n: int, seed: int = 5, t0: float = 100.0) -> list[Step]:
    rng = random.Random(seed)
    out, t = [], t0
    for i in range(n):
        calls = rng.choice((1, 1, 1, 4))  # some calls run several steps
        seconds = rng.lognormvariate(-5, 0.6) * calls
        wait = None if i % 3 == 0 else seconds * rng.uniform(0, 0.5)
        out.append(Step(t, t + seconds, calls, wait))
        t += seconds + (0.3 if i % 997 == 0 else 0.0)  # pauses: empty windows between
    return out


class Expected:
    """What a stretch of steps adds up to, one step at a time."""

    def __init__(self, steps: list[Step]) -> None:
        per = [s.per_step for s in steps]
        timed = [s for s in steps if s.wait is not None]
        self.calls, self.steps = len(steps), sum(s.steps for s in steps)
        self.step_s = math.fsum(s.end - s.start for s in steps)
        self.wait_s, self.waited = math.fsum(s.wait or 0.0 for s in timed), len(timed)
        self.max_s = max(per)
        self.first, self.last = min(s.start for s in steps), max(s.end for s in steps)
        self.sketch = Sketch()
        for value in per:
            self.sketch.add(value)


def same_stats(a: StepStats, b: Expected) -> None:
    assert (a.calls, a.steps, a.waited) == (b.calls, b.steps, b.waited)
    assert a.step_s == pytest.approx(b.step_s, rel=1e-9)
    assert a.wait_s == pytest.approx(b.wait_s, rel=1e-9)
    assert (a.max_s, a.first, a.last) == (b.max_s, b.first, b.last)
    assert a.sketch.count == b.sketch.count
    for q in (0.01, 0.1, 0.5, 0.9, 0.99):
        assert a.sketch.quantile(q) == pytest.approx(b.sketch.quantile(q), rel=RELATIVE_ACCURACY)


def test_a_record_summed_in_batches_holds_what_its_steps_add_up_to():
    t0 = 99.0
    all_steps = steps(HEAD_STEPS + 7_321)
    record = LoopRecord(t0)
    record.timeline = TimeWindows(t0, StepStats, capacity=8)  # merges mid-batch, often
    for step in all_steps:
        record.add(step)
    record.flush()
    # the windows the steps fall in once 8 windows have merged as far as they must
    width = record.timeline.width
    assert (all_steps[-1].start - t0) // width < 8 <= (all_steps[-1].start - t0) // (width / 2)
    by_window: dict[int, list[Step]] = {}
    for step in all_steps:
        by_window.setdefault(int((step.start - t0) // width), []).append(step)
    windows = list(record.timeline.items())
    assert [start for start, _ in windows] == [t0 + i * width for i in sorted(by_window)]
    for (_, window), i in zip(windows, sorted(by_window)):
        same_stats(window, Expected(by_window[i]))
    histogram = StepHistogram()
    for step in all_steps:
        histogram.add(step.per_step, step.steps)
    assert record.histogram.counts == histogram.counts
    assert record.histogram.sum_s == pytest.approx(histogram.sum_s, rel=1e-9)
    tail = all_steps[HEAD_STEPS:]
    assert record.tail is not None
    same_stats(record.tail.total, Expected(tail))
    slowest = heapq.nlargest(SLOWEST, ((s.per_step, s.start, s.end) for s in tail))
    assert sorted(record.tail.slowest) == sorted(slowest)
    assert list(record.tail.last) == tail[-len(record.tail.last) :]
    assert record.tail.waits.count == sum(1 for s in tail if s.wait is not None)
    assert record.count == sum(s.steps for s in all_steps)
    assert record.calls == len(all_steps)


def test_steps_not_summed_yet_are_summed_before_the_record_is_read():
    record = LoopRecord(0.0)
    for step in steps(10):
        record.add(step)
    assert record.count == sum(s.steps for s in steps(10))  # flushed by the read
    assert sum(w.calls for _, w in record.timeline.items()) == 10


def test_the_steps_the_eager_counter_wants_are_kept_in_order_up_to_the_limit():
    windows = [(150.0, 160.0), (200.0, float("inf"))]

    def sampled(starts, ends):
        return np.array([any(a <= e and b >= s for a, b in windows) for s, e in zip(starts, ends)])

    all_steps = steps(HEAD_STEPS + 20_000, t0=100.0)
    record = LoopRecord(100.0, sampled)
    for step in all_steps:
        record.add(step)
    record.flush()
    tail = all_steps[HEAD_STEPS:]
    wanted = [x for s in tail if sampled([s.start], [s.end])[0] for x in (s.start, s.end)]
    assert wanted and list(record.kept_intervals) == wanted


def test_many_values_go_into_a_sketch_as_adding_each_would():
    values = np.random.default_rng(1).lognormal(-7, 1.0, 20_000)
    values[::50] = 0.0
    one, many = Sketch(), Sketch()
    for v in values.tolist():
        one.add(v)
    many.add_many(values)
    assert many.count == one.count
    for q in (0.0, 0.01, 0.25, 0.5, 0.75, 0.99, 1.0):
        assert many.quantile(q) == pytest.approx(one.quantile(q), rel=RELATIVE_ACCURACY, abs=1e-12)
