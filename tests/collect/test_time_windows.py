"""Time windows that merge in pairs, and the quantile sketch they hold: bounded at any
length, exact where they add, within the stated error where they estimate."""

import random
import statistics

import pytest

from gpuwhy.collect.quantiles import RELATIVE_ACCURACY, Sketch
from gpuwhy.collect.time_windows import TimeWindows, width_for


class Sum:
    def __init__(self) -> None:
        self.n = 0

    def merge(self, other: "Sum") -> None:
        self.n += other.n

    def copy(self) -> "Sum":
        twin = Sum()
        twin.n = self.n
        return twin


def test_windows_double_in_width_and_keep_every_event():
    windows = TimeWindows(100.0, Sum, capacity=8, width=1.0)
    for second in range(1000):
        windows.at(100.0 + second + 0.5).n += 1
    assert len(windows.windows) <= 8
    assert windows.width == 128.0  # 1000 s in at most 8 windows: 8 x 128 s
    assert sum(w.n for _, w in windows.items()) == 1000
    starts = [start for start, _ in windows.items()]
    assert starts[0] == 100.0 and starts[-1] <= 100.0 + 999 < starts[-1] + windows.width


def test_a_gap_leaves_no_window_and_times_before_t0_go_to_the_first():
    windows = TimeWindows(0.0, Sum, capacity=8)
    windows.at(-3.0).n += 1
    windows.at(6.5).n += 1
    assert [(start, w.n) for start, w in windows.items()] == [(0.0, 1), (6.0, 1)]


def test_absorbing_a_finer_timeline_adds_window_by_window():
    coarse = TimeWindows(0.0, Sum, capacity=4)
    fine = TimeWindows(0.0, Sum, capacity=4)
    for t in (0.5, 1.5, 5.0, 7.9):
        coarse.at(t).n += 1
    for t in (0.2, 2.5, 3.5):
        fine.at(t).n += 1
    coarse.absorb(fine)
    assert coarse.width == 2.0 and fine.width == 1.0
    assert [(start, w.n) for start, w in coarse.items()] == [(0.0, 3), (2.0, 2), (4.0, 1), (6.0, 1)]
    assert sum(w.n for _, w in fine.items()) == 3  # absorbing leaves the other as it was


def test_width_for_a_span_is_the_width_its_windows_reach():
    assert width_for(10.0) == 1.0
    assert width_for(86_400.0) == 512.0  # a day in 256 windows
    windows = TimeWindows(0.0, Sum)
    windows.at(86_399.0)
    assert windows.width == width_for(86_399.0)


def test_the_sketch_s_quantiles_are_within_its_relative_error():
    rng = random.Random(7)
    values = [rng.lognormvariate(-7, 0.4) for _ in range(50_000)] + [3.0, 9.0]
    sketch = Sketch()
    halves = Sketch(), Sketch()
    for i, v in enumerate(values):
        sketch.add(v)
        halves[i % 2].add(v)
    merged = halves[0].copy()
    merged.merge(halves[1])
    ranked = sorted(values)
    for q in (0.5, 0.9, 0.99):
        true = ranked[int(q * (len(ranked) - 1))]
        for s in (sketch, merged):
            assert s.quantile(q) == pytest.approx(true, rel=RELATIVE_ACCURACY * 1.01)
    assert sketch.count == len(values)
    assert Sketch().quantile(0.5) is None
    assert statistics.median(values) == pytest.approx(sketch.quantile(0.5), rel=0.02)
