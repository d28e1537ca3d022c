"""How much evidence a wait needs before a rule may judge from it (derived/input_wait.py)."""

from dataclasses import replace

import pytest

from gpuwhy.derived.input_wait import (
    MIN_ELEMENTS_TO_JUDGE_WAIT,
    MIN_STEPS_TO_JUDGE_WAIT,
    pipeline_wait,
    production_bound_s,
    steps_wait,
)
from tests import builders_tfdata as t


def test_a_wait_from_a_handful_of_elements_is_not_judged():
    few = t.example_pipeline(elements=MIN_ELEMENTS_TO_JUDGE_WAIT - 1)
    assert pipeline_wait(few) is None
    assert pipeline_wait(replace(few, elements=MIN_ELEMENTS_TO_JUDGE_WAIT)) is not None


def test_a_window_wait_far_above_the_stage_timers_takes_the_timers_bound():
    # An in-memory test set read 2 elements per pass, 30 passes: the windows say 161 ms
    # per element, TF's stage timers 0.5 ms of work per element.
    slices = t.stage(name="TensorSlice", kind="source", elements=60, self_time_s=0.02)
    batch = t.batch(elements=60, self_time_s=0.01)
    pipeline = t.pipeline(slices, batch, elements=60, wait_per_element_s=0.161, gap_median_s=0.011)
    assert production_bound_s(pipeline) == pytest.approx(0.0005)
    wait = pipeline_wait(pipeline)
    assert wait is not None
    assert wait.per_element_s == pytest.approx(0.0005)
    assert wait.fraction == pytest.approx(0.0005 / 0.0115)
    assert "trusted" in wait.measured_by and "161.0 ms" in wait.measured_by


def test_a_window_wait_the_timers_allow_is_kept():
    pipeline = t.example_pipeline()  # 10 ms wait against ~29 ms of work per element
    wait = pipeline_wait(pipeline)
    assert wait is not None and wait.per_element_s == 0.010
    assert wait.measured_by.startswith("tf.data's timers")


def test_a_steps_wait_from_a_handful_of_steps_is_not_judged():
    few = t.fit_steps(0.40, count=MIN_STEPS_TO_JUDGE_WAIT, warmup=1)
    assert steps_wait(few) is None
    assert steps_wait(replace(few, count=MIN_STEPS_TO_JUDGE_WAIT + 1)) is not None


def test_a_wait_timed_around_each_next_call_is_trusted_as_measured():
    from gpuwhy.derived.pipeline import NEXT_TIMING

    slices = t.stage(name="TensorSlice", kind="source", elements=60, self_time_s=0.02)
    timed = t.pipeline(
        slices,
        elements=60,
        wait_per_element_s=0.161,
        gap_median_s=0.011,
        wait_source=NEXT_TIMING,
    )
    wait = pipeline_wait(timed)
    assert wait is not None and wait.per_element_s == 0.161  # no bound over a direct timing
    assert wait.measured_by.startswith("next() timed around each element")
