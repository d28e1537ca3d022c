"""The main loop's windows after warm-up (derived/step_windows.py), from hand-built steps:
the window its first counted step falls in is read from its own steps, not dropped."""

from __future__ import annotations

import statistics

from gpuwhy.derived.drift import drifts
from gpuwhy.derived.step_windows import training_spans
from gpuwhy.facts import Facts, StepFacts, StepLoop, StepSpan, StepTimeline


def steps_of(durations, first_s, *, kept=None, waits=None):
    """Steps back to back from ``first_s``, binned into 1 s windows as the collector does
    (every step in its window, warm-up included); ``kept`` first steps one by one."""
    starts, t = [], first_s
    for d in durations:
        starts.append(round(t, 6))
        t += d
    waits = waits or [d / 2 for d in durations]
    bins: dict[int, list[int]] = {}
    for i, start in enumerate(starts):
        bins.setdefault(int(start), []).append(i)
    spans = []
    for index, calls in sorted(bins.items()):
        values = sorted(durations[i] for i in calls)
        spans.append(
            StepSpan(
                start_s=float(index),
                steps=len(calls),
                p50_s=statistics.median(values),
                p90_s=values[int(0.9 * (len(values) - 1))],
                max_s=values[-1],
                step_s=sum(values),
                input_wait_s=sum(waits[i] for i in calls),
            )
        )
    kept = len(durations) if kept is None else kept
    return StepFacts(
        source="tf-data",
        marker="train.py:40",
        count=len(durations),
        warmup=1,
        starts=tuple(starts[:kept]),
        durations=tuple(durations[:kept]),
        input_waits=tuple(waits[:kept]),
        all_kept=kept == len(durations),
        loops=(StepLoop("tf-data", "train.py:40", len(durations), first_s, last_s=starts[-1]),),
        timeline=StepTimeline(width_s=1.0, windows=tuple(spans)),
    )


# a 0.05 s trace at 1.05 s, a fast first epoch of 1.6 s (its first window holds 0.9 s of
# it), then epochs 5x slower from its end on
WARMUP = [0.05]
FAST = [0.001] * 1600
SLOW = [0.005] * 2000


def test_the_window_the_loop_begins_in_is_read_from_its_steps_after_warm_up():
    steps = steps_of(WARMUP + FAST + SLOW, first_s=1.05)
    spans = training_spans(steps)
    first = spans[0]
    # the window at 1 s: its steps from the first after warm-up (1.1 s) on, not the trace
    assert first.start_s == 1.0
    assert first.steps == 900
    assert first.p50_s == 0.001 and first.max_s == 0.001
    assert abs(first.step_s - 0.9) < 1e-6 and abs(first.input_wait_s - 0.45) < 1e-6
    # the collector's own window there holds the trace
    collected = steps.timeline.windows[0]
    assert collected.start_s == 1.0 and collected.steps == 901 and collected.max_s == 0.05
    assert [s.start_s for s in spans[1:3]] == [2.0, 3.0]


def test_a_fast_first_epoch_of_a_window_and_a_half_is_the_level_a_drift_left():
    facts = Facts(steps=steps_of(WARMUP + FAST + SLOW, first_s=1.05))
    (drift,) = [d for d in drifts(facts) if d.change > 0]
    assert abs(drift.step - 1601) <= 2, drift.step  # the first slow step
    # without the first window, one window of the fast epoch is left: too few to judge
    later = [s for s in facts.steps.timeline.windows if s.start_s >= 2.0]
    assert len([s for s in later if s.p50_s == 0.001]) == 1
    assert abs(drift.median_before_s - 0.001) < 1e-4 and abs(drift.median_after_s - 0.005) < 1e-4
    # the time per step of the window the change falls in (700 fast steps, 60 slow) is
    # their mean: one of the two windows before it
    assert abs(drift.after_s - 0.005) < 1e-4 and 0.001 <= drift.before_s < 0.0015


def test_a_window_whose_steps_were_not_all_kept_is_left_out():
    # the steps kept one by one end inside the window the loop begins in: its median
    # from part of its steps would be a guess, so it is not read
    steps = steps_of(WARMUP + FAST + SLOW, first_s=1.05, kept=300)
    spans = training_spans(steps)
    assert spans[0].start_s == 2.0
    assert not steps.all_kept


def test_a_loop_that_begins_on_a_window_edge_keeps_the_collectors_window():
    steps = steps_of([0.001] * 3000, first_s=2.0)
    spans = training_spans(steps)
    # the warm-up step is the window's first: the window from the second step on
    assert spans[0].start_s == 2.0 and spans[0].steps == 999
    assert [s.steps for s in spans[1:]] == [1000, 1000]
