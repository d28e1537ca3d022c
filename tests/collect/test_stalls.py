"""Stall trackers and the activity collector: stalls found as steps fold, attributed to
what ran in them, in bounded state (a million stalls cost what a thousand do)."""

import gc
import pickle
import random
import time

import numpy as np
import pytest

from gpuwhy.collect.inprocess import stall_tracker
from gpuwhy.collect.inprocess.activities import (
    GC_RING_MIN_S,
    RING,
    VALIDATION,
    ActivityCollector,
    _loop_stalls,
    stalls_line,
)
from gpuwhy.collect.inprocess.stall_tracker import KEEP, MAX_INTERVALS, StallGroup, StallTracker
from gpuwhy.collect.inprocess.step_record import LoopRecord, Step, snapshot
from gpuwhy.collect.time_windows import CAPACITY
from gpuwhy.facts import StallFacts
from tests.markers import marker_lines

at = marker_lines(__file__)


def steps(count: int, seconds: float = 0.01, stall_every: int = 0, stall_s: float = 0.5):
    """Back-to-back steps from t=0, every ``stall_every``-th (index % n == n - 1) a stall."""
    t, out = 0.0, []
    for i in range(count):
        length = stall_s if stall_every and i % stall_every == stall_every - 1 else seconds
        out.append(Step(t, t + length))
        t += length
    return out


def test_a_stall_every_100_steps_has_a_period_of_100_steps():
    tracker = StallTracker(0.0)
    for step in steps(1000, stall_every=100):
        tracker.add(step)
    group = tracker.inside
    assert group.count == 10 and tracker.between.count == 0
    assert [entry[0] for entry in group.first] == list(range(99, 1000, 100))
    beat = group.beats[None]  # nothing timed ran in them
    assert beat.period() == (100, 1.0)
    assert group.lost_s == beat.lost_s == pytest.approx(10 * (0.5 - 0.01))
    assert beat.time_intervals.quantile(0.5) == pytest.approx(99 * 0.01 + 0.5, rel=0.02)
    assert beat.regular_in_time()


def test_warm_up_and_small_excursions_are_no_stalls():
    tracker = StallTracker(0.0)
    slow_start = [Step(0.0, 2.0)] + steps(500, seconds=0.001)
    for step in slow_start[:1] + [Step(s.start + 2.0, s.end + 2.0) for s in slow_start[1:]]:
        tracker.add(step)
    assert tracker.inside.count == 0  # the first call traced for 2 s: warm-up
    tracker = StallTracker(0.0)
    for step in steps(500, seconds=0.001, stall_every=50, stall_s=0.005):
        tracker.add(step)
    assert tracker.inside.count == 0  # 5x a 1 ms step, but only 4 ms lost: below the floor


def test_a_later_fit_with_heavier_steps_is_judged_against_its_own_pace():
    """Fine-tuning: a frozen model's 4 ms steps, then (a new compile: the step opens the
    later fit) its unfrozen 20 ms steps after a 1 s trace. None is a stall; a real one in
    the later fit still is, once it has its own baseline."""
    frozen = steps(60, seconds=0.004)
    t = frozen[-1].end + 0.5  # compile and build between the fits
    later = [Step(t, t + 1.0, opens=True)]
    t += 1.0
    for i in range(60):
        length = 0.3 if i == 45 else 0.02
        later.append(Step(t, t + length))
        t += length
    tracker = StallTracker(0.0)
    for step in frozen + later:
        tracker.add(step)
    assert tracker.between.count == 0
    assert [entry[0] for entry in tracker.inside.first] == [60 + 1 + 45]


def test_time_between_steps_is_its_own_group_and_an_epoch_s_first_step_no_stall():
    tracker = StallTracker(0.0)
    t = 0.0
    for epoch in range(4):
        for i in range(100):
            length = 0.3 if i == 0 else 0.01  # a new iterator: the epoch's first step is slow
            tracker.add(Step(t, t + length))
            t += length
        t += 1.0  # a checkpoint at the epoch's end, outside the steps
    assert tracker.inside.count == 0
    assert tracker.between.count == 3 and tracker.between.beats[None].period() == (100, 1.0)
    assert [entry[0] for entry in tracker.between.first] == [100, 200, 300]


def test_stalls_are_attributed_to_what_overlapped_them_when_found():
    seen = []

    def attribute(start, end):
        seen.append((start, end))
        return [("checkpoint", (end - start) * 0.9, "train.py:57", "tf.train.Checkpoint.write")]

    tracker = StallTracker(0.0, attribute)
    for step in steps(400, stall_every=100):
        tracker.add(step)
    assert len(seen) == 4
    assert tracker.inside.kinds == {"checkpoint": pytest.approx(4 * 0.45)}
    (place,) = tracker.inside.places["checkpoint"]
    assert place == ("train.py:57", "tf.train.Checkpoint.write")
    index, _, seconds, causes = tracker.inside.first[0]
    assert (index, seconds, causes) == (99, 0.5, (("checkpoint", pytest.approx(0.45)),))


def test_a_loop_record_feeds_its_tracker_and_a_snapshot_copies_it():
    record = LoopRecord(0.0, stalls=StallTracker(0.0))
    fed = steps(300, stall_every=100)
    for step in fed:
        record.add(step)
    view = snapshot(record, [])
    assert view.stalls is not record.stalls and view.stalls.inside.count == 3
    record.add(Step(fed[-1].end, fed[-1].end + 1.0))
    assert view.stalls.inside.count == 3 and record.stalls.inside.count == 4


def test_the_period_is_the_interval_most_stalls_keep():
    group = StallGroup(0.0)
    for index in (0, 40, 80, 119, 160, 200, 241, 280, 320, 400, 420):
        group.add(index, float(index), 0.5, 0.4, [])
    assert group.beats[None].period() == (40, 0.8)  # 39 and 41 fit 40; 80 and 20 do not


def test_stalls_without_a_rhythm_are_no_short_period():
    """A loaded host's stalls with no cause, one to four steps apart, are no "every 2
    steps": under 10 steps an interval fits its period exactly (a step either side of 2
    is 1 to 3, where such stalls fall as often as not)."""
    group = StallGroup(0.0)
    index = 0
    for gap in (1, 3, 2, 1, 3, 4, 2, 1, 3, 2, 3, 1):
        index += gap
        group.add(index, float(index), 0.5, 0.4, [])
    period, fit = group.beats[None].period()
    assert fit is not None and fit < 0.5  # was 2 steps, 11 of 12 intervals "fitting"
    regular = StallGroup(0.0)
    for index in range(0, 60, 3):
        regular.add(index, float(index), 0.5, 0.4, [])
    assert regular.beats[None].period() == (3, 1.0)


def test_each_activity_keeps_its_own_beat_among_other_stalls():
    group = StallGroup(0.0)
    checkpoint = [("checkpoint", 0.4, "train.py:57", "tf.train.Checkpoint.write")]
    for index in range(1000):
        if index % 100 == 99:
            group.add(index, float(index), 0.5, 0.4, checkpoint)
        elif index % 7 == 3:  # noise between the checkpoints, with nothing timed in it
            group.add(index, float(index), 0.05, 0.04, [("gc", 0.001, None, "generation 0")])
    assert group.beats["checkpoint"].period() == (100, 1.0)
    assert group.beats["checkpoint"].count == 10 and group.beats[None].count == group.count - 10


def test_a_checkpoint_at_each_epoch_s_end_keeps_its_beat_beside_iterator_ends_that_waited():
    """ModelCheckpoint at each of 5 epochs' ends; at two of them TF's race at the
    epoch's iterator end (tf.data's autotune thread sleeping out its period) waited
    longer than the write. Counted under the longest, those two were teardown's: the
    checkpoint kept 3 stalls at steps 40, 80, 200, no period, and the finding said
    "Training stalled between steps 3 times" (the suite on a loaded CI host). The
    program's own activity is the beat; it is charged its part, not the race's."""
    group = StallGroup(0.0)
    write = ("checkpoint", 0.1, "train.py:24", "keras.callbacks.ModelCheckpoint")
    for epoch, race in enumerate([0.01, 0.6, 0.01, 0.4, 0.01], start=1):
        teardown = ("teardown", race, "train.py:24", "the end of a tf.data iterator")
        seconds = 0.12 + race
        group.add(40 * epoch, float(epoch), seconds, seconds, [write, teardown])
    assert set(group.beats) == {"checkpoint"}
    beat = group.beats["checkpoint"]
    assert beat.count == 5 and beat.period() == (40, 1.0)
    assert beat.seconds == pytest.approx(5 * 0.12)  # the race's time is not the write's
    assert group.seconds == pytest.approx(5 * 0.12 + 1.03)  # the stalls' own time, all of it
    alone = StallGroup(0.0)  # an iterator's end with nothing of the program's is its own
    alone.add(40, 1.0, 0.6, 0.6, [("teardown", 0.58, "train.py:24", "the end")])
    assert set(alone.beats) == {"teardown"}


def filled(stalls: int) -> StallGroup:
    """A group of ``stalls`` stalls at random intervals over a long run, 3 kinds each."""
    rng = random.Random(7)
    group = StallGroup(0.0)
    index, t = 0, 0.0
    for _ in range(stalls):
        index += rng.randint(1, 5000)
        t += rng.uniform(0.1, 30.0)
        causes = [
            ("gc", 0.1, None, "generation 2"),
            ("checkpoint", 0.2, f"train.py:{rng.randint(1, 50)}", "tf.train.Checkpoint.write"),
            ("summary", 0.05, "train.py:9", "tf.summary writer flush"),
        ]
        group.add(index, t, 0.5, 0.4, causes)
    return group


def test_a_slow_save_keeps_its_period_among_a_loaded_host_s_hiccups():
    """A 150 ms save nothing times, every 200 steps of 1.5 ms, with 6-20 ms hiccups of a
    busy host between: pooled, the saves' period breaks; by length, it holds."""
    rng = random.Random(3)
    tracker, t = StallTracker(0.0), 0.0
    for i in range(4000):
        if i % 200 == 199:
            length = 0.15 * rng.uniform(0.9, 1.2)
        elif i > 100 and rng.random() < 0.004:
            length = rng.uniform(0.006, 0.02)
        else:
            length = 0.0015
        tracker.add(Step(t, t + length))
        t += length
    group = tracker.inside
    _, pooled_fit = group.beats[None].period()
    assert pooled_fit < 0.6  # the rule's min_period_fit: pooled, no period
    (beat,) = _loop_stalls("tf-data", "loop", tracker, group, False, 0.0).beats
    assert beat.kind is None and beat.every_steps == 200 and beat.period_fit >= 0.9
    assert beat.count == 20 and beat.typical_stall_s > 0.13


@pytest.mark.slow  # at scale: out of make test-fast
def test_a_million_stalls_cost_what_a_thousand_do():
    small, large = filled(1000), filled(1_000_000)
    assert not large.beats["checkpoint"].regular_in_time()  # intervals of 0.1 to 30 s
    assert large.count == 1_000_000
    assert len(large.first) == len(large.last) == KEEP
    (beat,) = large.beats.values()  # the checkpoint dominated each
    assert len(beat.step_intervals) <= MAX_INTERVALS and beat.other_intervals > 0
    assert max(len(places) for places in large.places.values()) <= stall_tracker.MAX_PLACES
    assert len(large.windows.windows) <= CAPACITY
    assert len(pickle.dumps(large)) < 1.5 * len(pickle.dumps(small))


def test_activities_overlap_their_stall_and_small_collections_are_only_counted():
    collector = ActivityCollector()
    t0 = time.perf_counter()
    collector.start(t0)
    try:
        collector._record(
            "checkpoint", t0 + 10, t0 + 11, "train.py:57", "tf.train.Checkpoint.write"
        )
        collector._record("summary", t0 + 10.5, t0 + 10.6, "train.py:60", "tf.summary writer flush")
        collector._events.append(("gc", t0 + 12, t0 + 12 + GC_RING_MIN_S / 2, None, 0))
        collector._events.append(("gc", t0 + 10.2, t0 + 10.4, "train.py:70", 2))
        found = [f for f in collector.overlapping(t0 + 10.8, t0 + 12.5) if f[0] != "gc"]
        assert found == [("checkpoint", pytest.approx(0.2), "train.py:57",
                          "tf.train.Checkpoint.write")]  # fmt: skip
        found = {kind: s for kind, s, _, _ in collector.overlapping(t0 + 10, t0 + 11)}
        assert found == {"checkpoint": 1.0, "summary": pytest.approx(0.1), "gc": pytest.approx(0.2)}
        assert [w for _, _, w, _ in collector.rings["gc"] if w] == ["train.py:70"]
        assert not any(a == t0 + 12 for a, _, _, _ in collector.rings["gc"])  # counted only
        for i in range(3 * RING["checkpoint"]):
            collector._record("checkpoint", t0 + 20 + i / 1000, t0 + 20.0005 + i / 1000, None, "x")
        collector.fold()
        assert len(collector.rings["checkpoint"]) == RING["checkpoint"]
        rows = collector.rows(1.0)
        assert rows[10]["checkpoint_s"] == 1.0
        assert rows[10]["gc_collections"] == 1 and rows[10]["gc_pause_s"] == pytest.approx(0.2)
    finally:
        collector.stop()


def test_a_full_collection_is_timed_with_the_line_that_asked_for_it():
    collector = ActivityCollector()
    collector.start(0.0)
    try:
        gc.collect()  # @collect
    finally:
        collector.stop()
    assert collector._on_gc not in gc.callbacks
    full = [key for key in collector.places["gc"] if key[1] == "generation 2"]
    assert (at("collect"), "generation 2") in full
    assert collector.totals["gc"][0] >= 1


def test_a_full_collection_inside_an_installed_package_is_the_program_s_line_that_called_it(
    tmp_path, monkeypatch
):
    """A figure's allocation in matplotlib (or cycler) that sets off a full collection is
    located at the program's line that drew the figure, never in site-packages."""
    package = tmp_path / "site-packages" / "plotlib_for_gc"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("import gc\n\ndef draw():\n    gc.collect()\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site-packages"))
    import plotlib_for_gc

    collector = ActivityCollector()
    collector.start(0.0)
    try:
        plotlib_for_gc.draw()  # @draw
    finally:
        collector.stop()
    full = [key[0] for key in collector.places["gc"] if key[1] == "generation 2"]
    assert full == [at("draw")]


def test_a_stall_while_gpuwhy_holds_the_program_is_gpuwhy_s_own_while_and_after():
    activities = ActivityCollector()
    activities.own_pause_begins(10.0)  # a heap census begins
    (running,) = activities.overlapping(10.2, 10.7)  # a stall found while it runs
    assert running[0] == "gpuwhy" and abs(running[1] - 0.5) < 1e-9
    activities.own_pause(10.0, 11.0, "gpuwhy's heap census")
    assert not activities.own_pause_running()
    (kept,) = activities.overlapping(10.8, 11.5)
    assert kept[0] == "gpuwhy" and abs(kept[1] - 0.2) < 1e-9


def test_gpuwhy_s_own_pauses_are_in_the_timeline_rows_of_the_windows_they_held():
    """A heap census is gpuwhy's time, not the program's: the drift finding takes each
    window's part of it out of the window's steps (the part in each window it crossed)."""
    activities = ActivityCollector()
    activities.start(0.0)
    try:
        activities.own_pause_begins(4.8)
        activities.own_pause(4.8, 5.3, "gpuwhy's heap census")
        rows = activities.rows(1.0)
    finally:
        activities.stop()
    assert rows[4]["own_pause_s"] == pytest.approx(0.2)
    assert rows[5]["own_pause_s"] == pytest.approx(0.3)
    assert all("own_pause_s" not in row for i, row in rows.items() if i not in (4, 5))


def test_fit_s_validation_is_known_while_it_runs_and_after_it_ended():
    activities = ActivityCollector()
    assert not activities.in_validation(10.0)
    activities._begin("evaluate", 10.0, "fit's validation")
    assert activities.in_validation(10.5) and not activities.in_validation(9.9)
    activities._record("evaluate", 10.0, 11.0, "train.py:9", "fit's validation")
    assert activities.in_validation(10.5) and not activities.in_validation(11.5)
    activities._begin("evaluate", 20.0, "Model.evaluate")  # the program's own: its steps
    assert not activities.in_validation(20.5)


def test_the_program_s_own_activities_in_a_heap_census_are_the_program_s():
    """A step that waited on a gc.collect() or a checkpoint write stalled on it, a census
    running beside it or not (through a full collection the census waited on the GIL).
    A young collection in a census walks the census's own list of every object: the
    census's."""
    activities = ActivityCollector()
    activities.own_pause(10.0, 20.0, "gpuwhy's heap census")
    activities._events.append(("gc", 12.0, 13.0, "train.py:19", 2))  # gc.collect()
    activities._events.append(("gc", 15.0, 15.02, None, 0))
    found = {kind: s for kind, s, _, _ in activities.overlapping(11.95, 13.05)}
    assert found == {"gc": pytest.approx(1.0), "gpuwhy": pytest.approx(0.1)}
    found = {kind: s for kind, s, _, _ in activities.overlapping(14.99, 15.03)}
    assert found == {"gc": pytest.approx(0.02), "gpuwhy": pytest.approx(0.04)}
    activities.own_pause_begins(30.0)  # one still running when the stall is found
    activities._events.append(("gc", 31.0, 31.5, "train.py:19", 2))
    found = {kind: s for kind, s, _, _ in activities.overlapping(30.9, 31.6)}
    assert found == {"gc": pytest.approx(0.5), "gpuwhy": pytest.approx(0.2)}
    activities._record("checkpoint", 40.0, 41.0, "train.py:21", "tf.train.Checkpoint.write")
    activities._events.append(("gc", 40.2, 40.4, "train.py:21", 2))  # inside the write
    found = [(kind, s) for kind, s, _, _ in activities.overlapping(39.9, 41.1)]
    assert sorted(found) == [("checkpoint", pytest.approx(1.0)), ("gc", pytest.approx(0.2)),
                             ("gpuwhy", pytest.approx(0.2))]  # fmt: skip


def test_a_gc_collect_every_40_steps_keeps_its_period_through_a_long_heap_census():
    """A loaded host: a census of a large heap lasts longer than the loop, slowing every
    step; the program's gc.collect() every 40 steps is still its own beat, every one."""
    activities = ActivityCollector()
    tracker = activities.tracker()
    activities.own_pause_begins(0.0)
    t = 0.0
    for i in range(400):
        length = 0.012
        if i % 40 == 39:
            length = 1.0
            activities._events.append(("gc", t + 0.005, t + 0.995, "train.py:19", 2))
        elif i % 40 == 30:  # the census's own young collections, on the program's thread
            length = 0.06
            activities._events.append(("gc", t + 0.01, t + 0.04, None, 0))
        tracker.add(Step(t, t + length))
        t += length
    beats = tracker.inside.beats
    assert beats["gc"].count == 10 and beats["gc"].period() == (40, 1.0)
    assert beats["gpuwhy"].count == 10  # the young collections' stalls: gpuwhy's own


def test_collections_before_the_first_step_are_told_from_those_while_the_steps_ran():
    """A short program: hundreds of collections in TensorFlow's import and the model's
    build, a few in its steps. The Stalls line said "GC 0.42 s in 687 collections" for
    a program whose steps collected for 0.02 s: it names the steps' own, and only where
    they add up."""
    from gpuwhy.collect.inprocess import activities
    from gpuwhy.facts import StallFacts

    collector = ActivityCollector()
    t0 = time.perf_counter()
    collector.start(t0)
    collector._remove_gc()  # the test's collections only
    try:
        for i in range(600):  # the import: 0.4 s in 600 collections in the first 2 s
            start = t0 + i * 2.0 / 600
            collector._events.append(("gc", start, start + 0.4 / 600, None, 0))
        for i in range(30):  # the steps, from 2.5 s on
            start = t0 + 2.5 + i * 0.01
            collector._events.append(("gc", start, start + 0.002, None, 0))
        collector.fold()
        (gc_total,) = collector._activities(steps_began_s=2.5)
        assert (gc_total.count, gc_total.steps_count) == (630, 30)
        assert gc_total.seconds == pytest.approx(0.46)
        assert gc_total.steps_seconds == pytest.approx(0.06)
        line = activities.stalls_line(StallFacts(activities=(gc_total,)))
        assert line == (
            "GC 0.06 s in 30 collections while the steps ran (0.46 s in 630 over the whole run)"
        )
        (no_steps,) = collector._activities()  # no steps: the whole run, as before
        assert no_steps.steps_count is None
        assert activities.stalls_line(StallFacts(activities=(no_steps,))) == (
            "GC 0.46 s in 630 collections"
        )
        few = collector._activities(steps_began_s=2.7)[0]  # 10 collections, 0.02 s
        assert few.steps_count == 10
        assert activities.stalls_line(StallFacts(activities=(few,))) is None
    finally:
        collector.stop()


def test_collections_past_those_kept_one_by_one_all_count_as_the_steps():
    from gpuwhy.collect.inprocess import activities

    collector = ActivityCollector()
    t0 = time.perf_counter()
    collector.start(t0)
    collector._remove_gc()  # the test's collections only
    try:
        n = activities.GC_HEAD + 100
        for i in range(n):
            collector._events.append(("gc", t0 + i * 0.001, t0 + i * 0.001 + 1e-4, None, 0))
        collector.fold()
        assert len(collector._gc_head) == 2 * activities.GC_HEAD  # bounded
        (total,) = collector._activities(steps_began_s=0.9995)  # from the 1,000th on
        assert total.count == n and total.steps_count == n - 1000
        (late,) = collector._activities(steps_began_s=60.0)  # after every kept one
        assert late.steps_count is None
    finally:
        collector.stop()


def test_one_epoch_end_that_waited_on_its_iterator_s_teardown_is_said_with_its_cause():
    """One stall is no beat, but one that cost a fifth of the loop is said: here an
    epoch's end where TF's teardown of the iterator waited (docs/speed.md: tf.data's
    autotune thread sleeping out its period), named by the teardown timed there."""
    from gpuwhy.collect.inprocess.activities import TEARDOWN_WHAT, stalls_line
    from gpuwhy.facts import StallFacts

    collector = ActivityCollector()
    t0 = time.perf_counter()
    collector.start(t0)
    try:
        tracker = collector.tracker()
        t = t0
        for epoch in range(3):
            for _ in range(100):
                tracker.add(Step(t, t + 0.05))
                t += 0.05
            if epoch == 1:  # the loop's iterator let go at train.py:60, 4.2 s of teardown
                collector._record("teardown", t + 0.01, t + 4.21, "train.py:60", TEARDOWN_WHAT)
                t += 4.25
            t += 0.002
        group = tracker.between
        assert group.count == 1
        loop = _loop_stalls("tf-data", "train.py:60", tracker, group, True, t0)
        line = stalls_line(StallFacts(loops=(loop,)))
        assert line == (
            "1 stall between steps of 4,252.0 ms: the end of a tf.data iterator (TF stopping its "
            "pipeline's threads) at train.py:60, 22% of the loop"
        )
        quiet = StallTracker(t0)  # the same stall with nothing timed in it
        for step in (Step(t0, t0 + 1.0), *(Step(t0 + i, t0 + i + 1.0) for i in range(1, 40))):
            quiet.add(step)
        quiet.add(Step(t0 + 45.0, t0 + 46.0))
        lone = _loop_stalls("tf-data", "x", quiet, quiet.between, True, t0)
        assert stalls_line(StallFacts(loops=(lone,))) == (
            "1 stall between steps of 5,000.0 ms: nothing timed in it, 11% of the loop"
        )
    finally:
        collector.stop()


def test_an_iterator_s_end_that_held_the_program_seconds_is_said_first_with_why():
    """The loop's last iterator ended after its last step (no stall between steps to
    name it) and held the program 4.23 s: TensorFlow's race at an iterator's end
    (docs/speed.md), which doubled a run of the issue's loop. The line said it last as
    "tf.data iterators' ends 4.23 s in 1 ends"; it is said first, where the program let
    the iterator go, and as TensorFlow's. Ends of milliseconds stay a total."""
    from gpuwhy.collect.inprocess.activities import stalls_line
    from gpuwhy.facts import Activity, StallFacts

    why = (
        "tf.data's autotune thread can miss its wake-up as an iterator ends and sleep out "
        "the rest of its period, up to the iterator's age (TensorFlow's own race, under "
        "plain python as well)"
    )
    gc_one = Activity("gc", 1, 0.2, 0.2, None, "generation 2")
    one = Activity("teardown", 1, 4.234, 4.234, "train.py:13", "the end of a tf.data iterator")
    assert stalls_line(StallFacts(activities=(gc_one, one))) == (
        f"the end of a tf.data iterator at train.py:13 held the program 4.23 s: {why}; "
        "GC 0.20 s in 1 collection"
    )
    epochs = Activity("teardown", 3, 9.2, 4.5, "train.py:60", "the end of a tf.data iterator")
    assert stalls_line(StallFacts(activities=(epochs,))) == (
        "the ends of 3 tf.data iterators held the program 9.20 s (the longest 4.50 s), most "
        f"of it at train.py:60: {why}"
    )
    short = Activity("teardown", 40, 0.06, 0.003, "train.py:60", "the end of a tf.data iterator")
    assert (
        stalls_line(StallFacts(activities=(short,))) == "tf.data iterators' ends 0.06 s in 40 ends"
    )
    flush = Activity("summary", 1, 0.3, 0.3, "train.py:70", "a summary flush")
    assert stalls_line(StallFacts(activities=(flush,))) == "summary flushes 0.30 s in 1 flush"


TEARDOWN_PROGRAM = """
import tensorflow as tf

ds = tf.data.Dataset.range(300_000).shuffle(300_000, seed=1)
for epoch in range(3):
    for value in ds:
        break  # the loop ends here: its iterator goes
"""


def test_an_iterator_s_teardown_is_timed_where_the_program_s_loop_let_it_go(tmp_path):
    """A real pipeline whose iterator is freed at its loop's end, three times: each
    teardown (freeing a 300,000-element shuffle buffer: milliseconds) is kept with the
    loop's own line, and the program's loop still ends as it did."""
    import gpuwhy

    script = tmp_path / "teardown.py"
    script.write_text(TEARDOWN_PROGRAM)
    namespace: dict = {"__name__": "__main__"}
    with gpuwhy.session(audit=False, eager=False) as s:
        exec(compile(TEARDOWN_PROGRAM, str(script), "exec"), namespace)
    assert int(namespace["value"]) >= 0
    stalls = s.record.facts.stalls
    assert stalls is not None
    (ends,) = [a for a in stalls.activities if a.kind == "teardown"]
    line = (
        TEARDOWN_PROGRAM.splitlines().index(
            "        break  # the loop ends here: its iterator goes"
        )
        + 1
    )
    assert ends.count == 3 and ends.location == f"{script}:{line}"
    assert 0.001 <= ends.max_s and ends.seconds < 2.0


def test_the_program_s_own_keras_calls_are_in_the_timeline_rows_and_fit_s_validation_not():
    """A loop body's generator.predict() is counted in the windows its calls began in
    (steps.keras-call-per-step reads them against the steps there); fit's own validation
    passes are fit's, not the program's calls."""
    tf = pytest.importorskip("tensorflow")
    keras = tf.keras
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.random.rand(64, 4).astype("float32"), np.random.rand(64, 1).astype("float32")
    activities = ActivityCollector()
    activities.start(time.perf_counter())
    activities.on_tensorflow()
    activities.on_keras()
    try:
        model.fit(x, y, epochs=2, validation_split=0.25, verbose=0)
        for _ in range(5):
            model.predict(x[:8], verbose=0)
        model.evaluate(x, y, verbose=0)
        rows = activities.rows(1000.0)  # one window holds the run
        evaluate = next(a for a in activities._activities() if a.kind == "evaluate")
    finally:
        activities.stop()
    assert rows[0]["keras_calls"] == 6
    assert 0 < rows[0]["keras_call_s"]
    # the fit itself is counted apart (a loop of one-batch fits), and its validation
    # inside it was still told apart as fit's
    assert rows[0]["keras_fits"] == 1 and rows[0]["keras_fit_s"] > 0
    fit = next(a for a in activities._activities() if a.kind == "fit")
    assert fit.count == 1 and fit.code is not None and "model.fit(" in fit.code
    assert evaluate.code is not None and "model.predict(" in evaluate.code


def test_fit_s_validation_and_the_program_s_own_predicts_are_counted_apart():
    """25 predict() calls after a fit with validation_data: counted with fit's three
    validation passes they read "its 28 predict() calls", and where the validations took
    longest the activity was named after them (steps.keras-call-per-step then found no
    call of the program's). Each is its own activity now, both of kind evaluate."""
    activities = ActivityCollector()
    for epoch in range(3):
        activities._events.append(
            ("evaluate", 10.0 * epoch, 10.0 * epoch + 0.5, "t.py:9", VALIDATION)
        )
    for n in range(25):
        start = 40.0 + n * 0.05
        activities._events.append(("evaluate", start, start + 0.04, "t.py:14", "Model.predict"))
    activities.fold()
    found = {a.detail: a for a in activities._activities() if a.kind == "evaluate"}
    assert found["Model.predict"].count == 25 and found["Model.predict"].location == "t.py:14"
    assert found["Model.predict"].seconds == pytest.approx(1.0)
    assert found[VALIDATION].count == 3 and found[VALIDATION].seconds == pytest.approx(1.5)
    line = stalls_line(StallFacts(activities=tuple(found.values())))
    assert "evaluate/predict 1.00 s in 25 calls" in line
    assert "fit's validation 1.50 s in 3 passes" in line
