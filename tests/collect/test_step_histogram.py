"""The live step histogram's buckets: Prometheus' ``le`` (a step exactly on a bound is in
that bound's bucket), a last bucket above every bound, and readings that only grow."""

from __future__ import annotations

from gpuwhy.collect.step_histogram import STEP_BUCKETS, StepHistogram


def test_a_step_on_a_bound_is_in_that_bounds_bucket_and_one_above_all_in_the_last():
    counted = StepHistogram()
    counted.add(0.01)
    counted.add(0.0100001)
    counted.add(120.0, steps=4)  # a Keras call of 4 steps of 120 s each
    cumulative = counted.cumulative()
    assert len(cumulative) == len(STEP_BUCKETS) + 1
    assert cumulative[STEP_BUCKETS.index(0.01)] == 1
    assert cumulative[STEP_BUCKETS.index(0.025)] == 2
    assert cumulative[-2] == 2 and cumulative[-1] == counted.count == 6
    assert abs(counted.sum_s - (0.0200001 + 480.0)) < 1e-9


def test_what_a_reading_grew_by_is_never_negative():
    before, now = StepHistogram(), StepHistogram()
    for seconds in (0.3, 0.02):
        before.add(seconds)
    now.add(0.02)  # the 0.3 s step was taken back (called warm-up)
    now.add(0.004)
    grown = now.grown_since(before)
    assert grown.count == 1 and grown.cumulative()[STEP_BUCKETS.index(0.005)] == 1
    assert grown.sum_s == 0.0  # the sum fell: nothing is taken back from it either
    assert now.highest(before).count == 3
