"""EagerOpCounter against real TensorFlow: counts per step, sites, windows, clean stop.

Steps are timed here with perf_counter, as the step collectors do, and handed to
``facts`` in a StepWindow. Locations are checked exactly: the line of each op that must
be named carries a ``# @marker`` comment and :func:`_site` finds it.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
import time

import pytest

tf = pytest.importorskip("tensorflow")

from tensorflow.python.eager import execute  # noqa: E402

from gpuwhy.collect.inprocess.base import StepWindow  # noqa: E402
from gpuwhy.collect.inprocess.eager import EagerOpCounter, duty_cycle  # noqa: E402
from gpuwhy.facts import Facts  # noqa: E402
from gpuwhy.rules.launch.eager_ops import EagerOps  # noqa: E402
from gpuwhy.tfapi.op_callbacks import thread_callbacks  # noqa: E402
from tests import markers  # noqa: E402
from tests.host_load import queued_s  # noqa: E402

A = tf.random.normal((8, 8))
B = tf.random.normal((8, 8))


_site = markers.marker_lines(__file__)


def _armed(**windows) -> EagerOpCounter:
    counter = EagerOpCounter(**windows)
    counter.start(time.perf_counter())
    counter.on_tensorflow()
    return counter


def _small_op_steps(steps: int, layers: int = 5) -> tuple[tuple[float, float], ...]:
    """A custom loop without tf.function: 2 x ``layers`` eager ops per step."""
    intervals = []
    for _ in range(steps):
        start = time.perf_counter()
        h = A
        for _ in range(layers):
            h = h + B  # @add
            h = tf.matmul(h, A)  # @matmul
        intervals.append((start, time.perf_counter()))
    return tuple(intervals)


@pytest.fixture
def counter():
    """A counter that stays on for the whole test, stopped and checked afterwards."""
    counter = _armed(first_on_s=60.0)
    yield counter
    counter.stop()
    assert not counter.is_on


def test_an_eager_loop_is_counted_per_step_with_its_sites(counter):
    tf.ones((3, 3))  # before the steps: outside them
    intervals = _small_op_steps(12)
    counter.stop()
    facts = counter.facts(StepWindow(counter.t0, intervals))
    assert facts.sampled_steps == 12
    assert facts.ops == 12 * 10
    assert facts.per_step == 10.0
    assert facts.outside_steps >= 1
    assert [(s.op, s.location, s.count, s.median_elements) for s in facts.sites] == [
        ("AddV2", _site("add"), 60, 64),
        ("MatMul", _site("matmul"), 60, 64),
    ]
    assert all(s.device and s.device.split(":")[0] in ("CPU", "GPU") for s in facts.sites)
    assert 0.0 < facts.dispatch_fraction <= 1.0
    assert facts.median_gap_us > 0
    assert facts.counted_s > 0
    assert "thread 'MainThread'" in facts.note


def test_without_steps_the_rate_and_sites_are_still_reported(counter):
    _small_op_steps(3)
    counter.stop()
    facts = counter.facts(StepWindow(counter.t0))
    assert facts.sampled_steps == 0 and facts.per_step is None and facts.outside_steps == 0
    assert facts.ops == 30
    assert {s.location for s in facts.sites} == {_site("add"), _site("matmul")}
    assert facts.dispatch_fraction is not None and facts.counted_s > 0


def test_a_step_not_wholly_inside_a_window_is_not_sampled(counter):
    intervals = _small_op_steps(4)
    counter.stop()
    ((start, end),) = counter.windows
    straddling = ((start - 1.0, intervals[0][1]),) + intervals[1:]
    facts = counter.facts(StepWindow(counter.t0, straddling))
    assert facts.sampled_steps == 3
    assert facts.ops == 30


def test_ops_inside_a_tf_function_are_not_eager_ops(counter):
    @tf.function
    def train_step(x):
        return tf.nn.relu(tf.matmul(x, B) + A)

    intervals = []
    for _ in range(5):
        start = time.perf_counter()
        train_step(A)  # @call
        h = A + B  # @eager
        intervals.append((start, time.perf_counter()))
    counter.stop()
    facts = counter.facts(StepWindow(counter.t0, intervals))
    assert [(s.op, s.location, s.count) for s in facts.sites] == [("AddV2", _site("eager"), 5)]
    assert facts.ops == 5 and facts.per_step == 1.0
    assert "5 tf.function calls" in facts.note


def test_the_time_after_a_function_call_and_before_an_input_read_is_no_eager_ops(counter):
    """Keras' fit issues two eager ops after each call (the optional's has_value and
    get_value) with its own Python between the call and them; a custom loop reads its
    batch with IteratorGetNext, whose gap holds the wait for input. Neither is the cost
    of issuing an eager op: only the gap from one eager op to the next is."""

    @tf.function
    def train_step(x):
        return tf.nn.relu(tf.matmul(x, B) + A)

    batches = iter(tf.data.Dataset.from_tensors(A).repeat())
    intervals = []
    for _ in range(6):
        start = time.perf_counter()
        x = next(batches)
        time.sleep(0.01)  # the program's own work after the read
        train_step(x)
        time.sleep(0.01)  # the framework's work after the call
        h = x + B  # @first
        h = h * B  # @second
        intervals.append((start, time.perf_counter()))
    counter.stop()
    facts = counter.facts(StepWindow(counter.t0, intervals))
    assert facts.per_step == 3.0  # the read and two ops; the call is not an op
    # the only gaps are AddV2 -> Mul: microseconds, not the 10 ms pauses around the call
    assert facts.median_gap_us is not None and facts.median_gap_us < 2000


def test_ops_of_another_thread_are_not_counted(counter):
    worker = threading.Thread(target=_small_op_steps, args=(3,))
    worker.start()
    worker.join()
    counter.stop()
    assert counter.facts(StepWindow(counter.t0)).ops == 0


def test_stop_leaves_no_callback_and_results_are_unchanged():
    plain = tf.nn.relu(tf.matmul(A, B) - 0.5).numpy()
    counter = _armed()
    assert counter.is_on and len(thread_callbacks()) == 1
    watched = tf.nn.relu(tf.matmul(A, B) - 0.5).numpy()
    counter.stop()
    assert (watched == plain).all()
    assert thread_callbacks() == []
    assert execute.execute is execute.quick_execute
    assert not counter._thread.is_alive()
    assert counter.facts(StepWindow(counter.t0)).ops == 3


def test_windows_turn_the_callback_off_and_on():
    counter = _armed(first_on_s=0.05, duty=0.5, longest_on_s=0.05, tick_s=0.01)
    seen = set()
    ran = 0
    deadline = time.perf_counter() + 1.0
    while time.perf_counter() < deadline or len(seen) < 2:
        _small_op_steps(1, layers=1)
        ran += 2
        seen.add(counter.is_on)
        assert time.perf_counter() < deadline + 10.0, "the windows never switched"
    counter.stop()
    facts = counter.facts(StepWindow(counter.t0))
    assert seen == {True, False}
    assert len(counter.windows) >= 3
    assert all(end > start for start, end in counter.windows)
    assert 0 < facts.ops < ran
    assert thread_callbacks() == []


def test_counting_stops_for_good_at_max_ops():
    counter = _armed(first_on_s=60.0, tick_s=0.01, max_ops=50)
    deadline = time.perf_counter() + 10.0
    while counter.is_on and time.perf_counter() < deadline:
        _small_op_steps(1)
    counter.stop()
    assert counter.full and not counter.is_on
    facts = counter.facts(StepWindow(counter.t0))
    assert facts.ops >= 50
    assert "counting stopped after 50 ops" in facts.note


def test_a_counter_never_armed_says_so():
    counter = EagerOpCounter()
    counter.start(time.perf_counter())
    counter.stop()
    facts = counter.facts(StepWindow(counter.t0))
    assert facts.ops == 0 and facts.sampled_steps == 0 and facts.sites == ()
    assert facts.note == "not armed: TensorFlow was not imported"


def test_windows_start_short_double_every_four_and_keep_the_duty_cycle():
    schedule = duty_cycle(0.25, 1 / 11, 1.0)
    windows = [next(schedule) for _ in range(14)]
    assert [on for on, _ in windows] == [0.25] * 4 + [0.5] * 4 + [1.0] * 6
    for on, off in windows:  # each pause is ten times its window
        assert off == pytest.approx(10 * on)


def test_seed_example_3_a_bare_loop_of_small_ops_makes_the_finding(counter):
    """No steps: the finding needs half the counted time spent issuing the ops. The
    counter is on from the fixture to its stop, so all else in that time counts against
    them: the rule's imports are the module's (importing them here took 40 ms on a
    loaded host, against 130 ms for 5,000 ops), and 20,000 ops leave the stop and the
    fixture's own time a small part. Time the loop's thread waits for a core is no
    dispatch either (a gap over 1 ms is not counted whole): 0.95 of the time went to
    issuing the ops where the thread waited 6 % of it, 0.71 where it waited 36 % (a
    2-core host at load 4-5); where it waits 40 % or more, the test skips."""
    a = tf.random.normal((10, 10))
    b = tf.random.normal((10, 10))
    waited, started = queued_s(), time.perf_counter()
    for _ in range(20_000):
        c = a + b  # @seed
    counter.stop()
    facts = counter.facts(StepWindow(counter.t0))
    if waited is not None:
        share = ((queued_s() or 0.0) - waited) / (time.perf_counter() - started)
        if share >= 0.4:
            pytest.skip(
                f"needs a quiet host: the loop's thread waited for a core {share:.0%} of its time"
            )
    (finding,) = EagerOps().check(Facts(eager=facts), dict(EagerOps.options))
    assert finding.location == _site("seed")
    assert finding.evidence["sites"][0]["op"] == "AddV2"
    assert c.shape == (10, 10)


def test_the_time_the_loop_waited_for_a_core_is_not_counted_against_its_ops(counter):
    """Other processes' load is not the program's time: with two busy processes per core
    beside it, a bare loop of small ops waits for a core about half of its time, and
    the share spent issuing its ops read 0.40-0.51 (no finding at 0.5) against 0.92-0.95
    on the quiet host. The waits the kernel counts (schedstat) are left out."""
    if queued_s() is None:
        pytest.skip("the kernel keeps no schedstat here")
    a = tf.random.normal((10, 10))
    b = tf.random.normal((10, 10))
    busy = "while True: pass"
    hogs = [
        subprocess.Popen([sys.executable, "-c", busy]) for _ in range(2 * (os.cpu_count() or 1))
    ]
    try:
        time.sleep(0.2)  # the hogs running
        started = time.perf_counter()
        for _ in range(20_000):
            c = a + b  # @loaded
        took = time.perf_counter() - started
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    counter.stop()
    facts = counter.facts(StepWindow(counter.t0))
    assert facts.core_wait_s > 0.2 * took, (facts.core_wait_s, took)
    assert facts.dispatch_fraction is not None and facts.dispatch_fraction >= 0.6, facts
    (finding,) = EagerOps().check(Facts(eager=facts), dict(EagerOps.options))
    assert finding.location == _site("loaded")
    assert c.shape == (10, 10)


def test_slow_path_ops_are_named_like_fast_path_ones(counter):
    variable = tf.Variable(tf.ones((4,)))
    for _ in range(3):
        total = tf.reduce_sum(tf.square(variable))  # @slow
        total += tf.reduce_sum(tf.square([1.0, 2.0]))  # @literal
    counter.stop()
    facts = counter.facts(StepWindow(counter.t0))
    named = {(s.op, s.location): s.count for s in facts.sites}
    assert named[("Square", _site("slow"))] == 3 and named[("Sum", _site("slow"))] == 3
    assert named[("Square", _site("literal"))] == 3
    assert all(isinstance(s.op, str) for s in facts.sites)
    assert float(total) == 9.0


def test_steps_that_begin_at_the_end_of_a_window_get_the_next_one_at_once():
    """The first window, opened at the TensorFlow import, closes just after the steps
    begin: the next window opens then, not after the pause (ten times the window),
    which would outlast a loop of a second or two."""
    counter = _armed(first_on_s=0.3, duty=1 / 11, tick_s=0.01)
    time.sleep(0.25)  # the model being built
    counter.steps_began()  # 0.05 s before the window closes
    intervals = _steps_for(1.0)
    counter.stop()
    facts = counter.facts(StepWindow(counter.t0, intervals=intervals))
    assert len(counter.windows) >= 2
    (_, first_end), (second_start, _) = counter.windows[:2]
    assert second_start - first_end < 0.25, counter.windows  # the pause would be 3 s
    assert facts.sampled_steps >= 5


def test_steps_that_begin_early_in_a_window_keep_the_pause_after_it():
    counter = _armed(first_on_s=0.5, duty=1 / 11, tick_s=0.01)
    counter.steps_began()
    intervals = _steps_for(1.2)
    counter.stop()
    assert len(counter.windows) == 1  # the window saw the steps; the duty cycle holds
    assert counter.facts(StepWindow(counter.t0, intervals=intervals)).sampled_steps >= 5


def _steps_for(seconds: float) -> tuple[tuple[float, float], ...]:
    intervals: tuple[tuple[float, float], ...] = ()
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        intervals += _small_op_steps(1)
    return intervals


def _gaps(counter: EagerOpCounter) -> list[float]:
    windows = counter.windows
    return [b[0] - a[1] for a, b in zip(windows, windows[1:])]


def test_windows_that_see_only_the_steps_calls_and_reads_back_off_and_eager_ops_do_not():
    @tf.function
    def train_step(x):
        return tf.reduce_sum(tf.matmul(x, A))

    ds = tf.data.Dataset.from_tensors(A).repeat()
    traced = _armed(first_on_s=0.04, duty=0.4, longest_on_s=0.04)
    deadline = time.perf_counter() + 1.6
    for x in ds:  # a loop of traced steps: each window sees a call and a read a step
        train_step(x)
        if time.perf_counter() > deadline:
            break
    traced.stop()
    gaps = _gaps(traced)
    # 0.06 s pauses, four times as long from the first window that saw only the steps'
    # calls and reads (the first one, armed before the loop, saw its iterator made)
    assert len(gaps) >= 4 and gaps[0] < 0.15 and min(gaps[1:]) > 0.2, gaps

    eager = _armed(first_on_s=0.04, duty=0.4, longest_on_s=0.04)
    deadline = time.perf_counter() + 1.2
    while time.perf_counter() < deadline:
        _small_op_steps(1)
    eager.stop()
    assert len(_gaps(eager)) >= 6 and statistics.median(_gaps(eager)) < 0.15


def test_a_window_that_saw_a_handful_of_ops_stays_open_for_the_loop_after_them():
    """A window that opens on a program's first ops (slow: kernels being built) closes
    only once it has seen enough to judge from: closed on time, with a pause of ten
    windows after it, a loop of half a second would fall between two windows and be
    judged from the first few ops."""
    counter = _armed(first_on_s=0.2, duty=1 / 11, tick_s=0.01)
    for _ in range(10):  # 10 ops over 0.3 s: past the window's first spell
        tf.reduce_sum(A)
        time.sleep(0.03)
    _steps_for(0.5)
    counter.stop()
    facts = counter.facts(StepWindow(counter.t0))
    (start, end), *_ = counter.windows
    assert end - start > 0.3, counter.windows
    assert facts.ops >= 100
    assert {s.op for s in facts.sites[:2]} == {"AddV2", "MatMul"}  # the loop's


def test_eager_loops_beside_a_traced_loop_are_counted_per_step_of_their_own(counter):
    """keras-io's custom-loop guide: two loops issue their ops eagerly, then the same step
    runs traced. Pooled, the count per step read 74 in one run and 239 in the next as the
    windows happened to sample one kind of step or the other; it is the eager loops'."""

    @tf.function
    def train_step(x):
        return tf.nn.relu(tf.matmul(x, B) + A)

    train_step(A)  # traced before the loops
    first = _small_op_steps(6)
    second = _small_op_steps(6, layers=3)
    traced = []
    for _ in range(30):  # more, and faster, steps than the eager loops'
        start = time.perf_counter()
        train_step(A)
        traced.append((start, time.perf_counter()))
    counter.stop()
    intervals = first + second + tuple(traced)
    loops = (0,) * 6 + (1,) * 6 + (2,) * 30
    facts = counter.facts(
        StepWindow(counter.t0, intervals, loops=loops), loops=("a.py:3", "a.py:9", "a.py:20")
    )
    assert facts.sampled_steps == 12
    assert facts.per_step == (6 * 10 + 6 * 6) / 12
    assert facts.of_loops == ("a.py:3", "a.py:9")
    # the windows of the timeline keep every sampled step's own count, the traced ones too
    assert sum(n for _, n, _ in facts.windows) == 42
    # pooled, as before: 96 ops over 42 steps
    pooled = counter.facts(StepWindow(counter.t0, intervals))
    assert pooled.sampled_steps == 42 and pooled.of_loops == ()
    finding = EagerOps().check(Facts(eager=facts), dict(EagerOps.options, min_ops_per_step=5))
    assert finding and finding[0].title.startswith("Each step of the loops at a.py:3, a.py:9 ")


def test_a_window_that_sees_only_the_steps_calls_and_reads_closes_early():
    """A loop of traced steps over tf.data issues no eager op of its own: its window
    closes once its latest ops (WINDOW_MIN_OPS) are only the calls and reads, where it
    stayed open its whole second (each op off TF's fast path while it is open); a
    loop that issues eager ops keeps it open."""
    from gpuwhy.collect.inprocess.eager import WINDOW_MIN_OPS

    @tf.function
    def train_step(x):
        return tf.nn.relu(tf.matmul(x, B) + A)

    dataset = tf.data.Dataset.from_tensors(A).repeat()
    iterator = iter(dataset)  # its ops (the iterator's making) are no step's
    train_step(next(iterator))
    counter = _armed(first_on_s=1.0)
    try:
        began = time.perf_counter()
        while time.perf_counter() - began < 0.6:
            train_step(next(iterator))
        assert not counter.is_on
        ((opened, closed),) = counter.windows
        assert closed - opened < 0.3
    finally:
        counter.stop()
    facts = counter.facts(StepWindow(counter.t0))
    assert all(site.op.startswith("IteratorGetNext") for site in facts.sites), facts.sites
    assert facts.note and "tf.function calls" in facts.note
    eager = _armed(first_on_s=1.0)
    try:
        began = time.perf_counter()
        while time.perf_counter() - began < 0.6:
            train_step(next(iterator))
            tf.reduce_sum(A)  # an eager op of the loop's own
        assert eager.is_on
    finally:
        eager.stop()
    assert eager.facts(StepWindow(eager.t0)).ops >= WINDOW_MIN_OPS / 2
