"""Loops longer than the steps kept one by one: the counts and sums stay exact, the
quantiles within the sketch's error, the timeline covers the first step to the last,
and the memory kept does not grow with the run.

The events go in through the collector's own hooks (what TensorFlow's and Keras'
patched methods call), at made-up times: a million real steps would take minutes.
"""

import random
import statistics
import tracemalloc

import pytest

from gpuwhy.collect.inprocess import step_record
from gpuwhy.collect.inprocess.step_record import HEAD_STEPS, LAST_STEPS, SLOWEST
from gpuwhy.collect.inprocess.step_streams import MAX_PHASES
from gpuwhy.collect.inprocess.steps import StepCollector
from gpuwhy.collect.quantiles import RELATIVE_ACCURACY
from gpuwhy.collect.time_windows import CAPACITY

pytestmark = pytest.mark.slow  # at scale: out of make test-fast


def feed_loop(collector, n, t=None, seed=3, site="train.py:40", key=11):
    """``n`` next() calls at one loop site, then StopIteration: the step times and
    waits it made, and the time after."""
    rng = random.Random(seed)
    t = collector.t0 + 1.0 if t is None else t
    durations, waits = [], []
    for i in range(n):
        wait = rng.uniform(0.0001, 0.0003)
        step = wait + rng.lognormvariate(-7, 0.2) + (0.05 if i == 0 else 0.0)
        if i == n // 2:
            step += 0.5  # one stall deep in the tail
        collector._on_next(key, site, t, t + wait, False)
        durations.append(step)
        waits.append(wait)
        t += step
    collector._on_next(key, site, t, t + 0.0001, True)
    return durations, waits, t


def test_a_loop_past_the_head_keeps_exact_sums_and_quantiles_within_the_error():
    collector = StepCollector()
    n = 30_000
    durations, waits, t_end = feed_loop(collector, n)
    facts, window = collector.facts(collector.t0, t_end=t_end)
    assert facts.count == n and facts.warmup == 1
    assert not facts.all_kept and len(facts.starts) == HEAD_STEPS
    counted, counted_waits = durations[1:], waits[1:]
    assert facts.total_s == pytest.approx(sum(counted), rel=1e-9)
    assert facts.input_wait_fraction == pytest.approx(sum(counted_waits) / sum(counted), rel=1e-9)
    ranked = sorted(counted)
    assert facts.median_s == pytest.approx(statistics.median(counted), rel=RELATIVE_ACCURACY * 1.5)
    assert facts.p90_s == pytest.approx(ranked[int(0.9 * len(ranked))], rel=RELATIVE_ACCURACY * 1.5)
    # the latest steps one by one, and the slowest of the whole run, the stall first
    assert len(facts.last_steps) == LAST_STEPS
    assert facts.last_steps[-1][1] == pytest.approx(durations[-1], abs=1e-6)
    assert len(facts.slowest) == SLOWEST
    assert facts.slowest[0][1] == pytest.approx(max(counted), abs=1e-6)
    # the timeline: every step, first to last, in at most CAPACITY windows
    timeline = facts.timeline
    assert len(timeline.windows) <= CAPACITY
    assert sum(w.steps for w in timeline.windows) == n
    assert timeline.windows[0].start_s <= facts.first_step_s
    assert timeline.windows[-1].start_s + timeline.width_s >= t_end - collector.t0 - 1e-6
    assert max(w.max_s for w in timeline.windows) == pytest.approx(max(durations), abs=1e-6)
    # the steps the eager counter could use: the head's (no counter: none later)
    assert len(window.intervals) == HEAD_STEPS - 1
    (read,) = collector.reads()
    assert read[2] == pytest.approx(sum(waits) + 0.0001) and read[3] == n


def test_a_run_within_the_head_is_described_as_the_tail_would_estimate_it(monkeypatch):
    """The same 3,000 steps, kept whole or mostly summed: the same counts and sums,
    the quantiles within the sketch's error."""
    whole = StepCollector()
    feed_loop(whole, 3000)
    exact, _ = whole.facts(whole.t0, t_end=whole.t0 + 100)
    monkeypatch.setattr(step_record, "HEAD_STEPS", 100)
    summed = StepCollector()
    feed_loop(summed, 3000)
    estimated, _ = summed.facts(summed.t0, t_end=summed.t0 + 100)
    assert exact.all_kept and not estimated.all_kept
    assert (estimated.count, estimated.warmup) == (exact.count, exact.warmup)
    assert estimated.total_s == pytest.approx(exact.total_s, rel=1e-9)
    assert estimated.input_wait_fraction == pytest.approx(exact.input_wait_fraction, rel=1e-9)
    assert estimated.median_s == pytest.approx(exact.median_s, rel=RELATIVE_ACCURACY * 1.5)
    assert estimated.input_wait_median_s == pytest.approx(
        exact.input_wait_median_s, rel=RELATIVE_ACCURACY * 1.5
    )
    assert len(estimated.starts) == 100
    assert [w.steps for w in estimated.timeline.windows] == [
        w.steps for w in exact.timeline.windows
    ]


def test_the_memory_kept_does_not_grow_with_the_loop():
    collector = StepCollector()
    tracemalloc.start()
    try:
        _, _, t = feed_loop(collector, 60_000, key=1)
        collector.fold()
        after_60k = tracemalloc.get_traced_memory()[0]
        feed_loop(collector, 140_000, t=t, key=2)
        collector.fold()
        after_200k = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    # 140,000 more steps: what is kept grows by the timeline's few windows, not per step
    assert after_200k - after_60k < 1_000_000, after_200k - after_60k
    facts, _ = collector.facts(collector.t0)
    assert facts.count == 200_000


def test_function_calls_past_the_head_cut_a_long_gap_at_the_call_s_end(monkeypatch):
    monkeypatch.setattr(step_record, "HEAD_STEPS", 50)
    collector = StepCollector()
    t = collector.t0
    calls = []
    for i in range(400):
        start = t + i * 0.01 + (5.0 if i >= 300 else 0.0)  # evaluation between calls 299, 300
        calls.append((start, start + 0.004))
    facts, _ = collector.facts(t, {"train_step (x.py:3)": calls}, t_end=t + 10)
    assert facts.count == 400 and not facts.all_kept
    assert facts.median_s == pytest.approx(0.01, rel=0.02)
    assert max(w.max_s for w in facts.timeline.windows) < 0.02  # the gap is no step
    assert facts.total_s == pytest.approx(398 * 0.01 + 0.004 + 0.004 - 0.01, rel=1e-6)


def test_keras_fit_of_many_epochs_keeps_its_phases_bounded():
    collector = StepCollector()
    t = collector.t0
    collector._on_keras_event("on_train_begin", t, "train.py:80")
    epochs = MAX_PHASES * 2
    for epoch in range(epochs):
        collector._on_keras_event("on_epoch_begin", t, epoch)
        for batch in range(3):
            collector._on_keras_event("on_train_batch_begin", t, batch)
            collector._on_keras_event("on_train_batch_end", t + 0.001, batch)
            t += 0.0012
        collector._on_keras_event("on_epoch_end", t, epoch)
    collector._on_keras_event("on_train_end", t, None)
    facts, _ = collector.facts(collector.t0, t_end=t)
    assert facts.count == epochs * 3 and facts.source == "keras-fit"
    assert len(facts.phases) == MAX_PHASES
    assert facts.phases[0][0] == "epoch 0" and facts.phases[-1][0] == "fit"
    assert facts.median_s == pytest.approx(0.0012, rel=0.02)


def test_snapshots_read_while_the_drain_folds_see_a_consistent_loop():
    """Live metrics ask for facts on their own thread while the drain folds new steps
    into the same loop: each snapshot is a copy, so neither trips on the other."""
    import threading

    collector = StepCollector()
    t0 = collector.t0
    _, _, t = feed_loop(collector, HEAD_STEPS + 2000)
    stop = threading.Event()
    errors = []

    def program() -> None:
        now = t
        try:
            while not stop.is_set():
                for _ in range(500):
                    collector._on_next(11, "train.py:40", now, now + 0.0001, False)
                    now += 0.001
                collector.fold()
        except Exception as e:
            errors.append(e)

    thread = threading.Thread(target=program)
    thread.start()
    try:
        counts = []
        for _ in range(20):
            facts, _ = collector.facts(t0)
            counts.append(facts.count)
            assert sum(w.steps for w in facts.timeline.windows) <= facts.count
    finally:
        stop.set()
        thread.join()
    assert not errors and counts == sorted(counts)


def test_a_function_s_held_calls_are_asked_about_without_making_their_steps():
    """The pauses ask four times a second whether a function still holds its first
    calls back; answered by making their steps, that took 2.8 ms at 5,000 calls with the
    GIL held, over and over through a loop's first seconds."""
    from gpuwhy.collect.inprocess.step_streams import CycleStream, Step

    emitted: list[Step] = []
    stream = CycleStream(emitted.append)
    assert not stream.holds_calls()
    for i in range(HEAD_STEPS):
        stream.feed(i * 0.001, i * 0.001 + 0.0008)
        assert stream.holds_calls()
    assert len(stream.held_steps()) == HEAD_STEPS and not emitted
    stream.feed(HEAD_STEPS * 0.001, HEAD_STEPS * 0.001 + 0.0008)
    assert not stream.holds_calls() and not stream.held_steps() and emitted
