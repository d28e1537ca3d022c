"""The next() timing paused on a long steady loop of short steps: every step still
counted exactly (tf.data's own count of each iterator's elements), the quantiles and the
input wait from the steps timed, the timeline whole.

The first tests feed the collector's fold with reads and stretches at made-up times;
the last ones run real tf.data loops in this process with the real hooks, the pauses
made short so that a few seconds of steps hold several of them."""

import threading
import time

import pytest

from gpuwhy.collect.inprocess.hook_pauses import Stretch
from gpuwhy.collect.inprocess.step_record import HEAD_STEPS, LoopRecord, Step
from gpuwhy.collect.inprocess.steps import StepCollector

SITE = "train.py:40"


def _timed(collector, key, t, n, step=0.0005, wait=0.0001):
    for _ in range(n):
        collector._on_next(key, SITE, t, t + wait, False)
        t += step
    return t


def test_a_stretch_of_counted_reads_keeps_the_count_and_the_timed_steps_figures():
    collector = StepCollector()
    t = _timed(collector, 7, collector.t0 + 1.25, HEAD_STEPS + 1000)
    # the timing paused after a read at t - 0.0005 (its step still open); 3,000 reads
    # followed unseen, at 1 ms a step (slower than the timed ones), from a quarter into
    # a window of the timeline to a quarter into another
    paused_from = t - 0.0005
    t_back = paused_from + 3001 * 0.001
    collector._on_next(7, SITE, paused_from, t_back, Stretch(3000, 3001))
    t = _timed(collector, 7, t_back, 2000)
    collector._on_next(7, SITE, t, t + 0.0001, True)
    facts, _ = collector.facts(collector.t0, t_end=t + 1)
    n = HEAD_STEPS + 1000 + 3000 + 2000
    assert facts.count == n
    assert facts.counted_only == 3001
    # the sums are every step's; what describes single steps is the timed ones'
    assert facts.total_s == pytest.approx((n - 1 - 3001) * 0.0005 + 3001 * 0.001, rel=1e-6)
    assert facts.median_s == pytest.approx(0.0005, rel=0.02)
    assert facts.input_wait_fraction == pytest.approx(0.2, rel=1e-6)
    assert max(s for _, s in facts.slowest) == pytest.approx(0.0005, rel=1e-6)
    windows = facts.timeline.windows
    assert sum(w.steps for w in windows) == n
    assert sum(w.step_s for w in windows) == pytest.approx(facts.total_s + 0.0005, rel=1e-6)
    # a window the stretch fills has no median (no step timed), one it shares has its
    # timed steps'; the input wait of each is the timed steps' share of its time
    counted_only = [w for w in windows if w.p50_s is None]
    assert counted_only and all(w.steps > 0 and w.input_wait_s is None for w in counted_only)
    shared = [w for w in windows if w.p50_s is not None and w.step_s > w.steps * 0.00051]
    assert shared
    for w in shared:
        assert w.p50_s == pytest.approx(0.0005, rel=0.02)
        assert w.input_wait_s == pytest.approx(0.2 * w.step_s, rel=1e-6)
    # the iterator's reads: every element, the wait of the counted ones at the timed mean
    ((_, _, waited, elements),) = collector.reads()
    assert elements == n
    assert waited == pytest.approx(0.0001 * n + 0.0001, rel=1e-3)
    assert "timed one by one" in _steps_line(facts)


def test_a_stretch_that_ends_with_its_iterator_ends_the_loop_s_steps():
    collector = StepCollector()
    t = _timed(collector, 7, collector.t0 + 1.0, HEAD_STEPS + 10)
    paused_from = t - 0.0005
    # freed while paused: 500 more elements, the last step ended by the exhausting read
    collector._on_next(7, SITE, paused_from, paused_from + 0.3, Stretch(500, 501, ended=True))
    # the next epoch: a new iterator at the same line
    t = _timed(collector, 8, paused_from + 0.31, 100)
    collector._on_next(8, SITE, t, t + 0.0001, True)
    facts, _ = collector.facts(collector.t0, t_end=t + 1)
    assert facts.count == HEAD_STEPS + 10 + 500 + 100
    assert sorted(r[3] for r in collector.reads()) == [100, HEAD_STEPS + 510]


def test_a_counted_stretch_spreads_over_the_windows_it_spans_in_proportion():
    record = LoopRecord(0.0)
    for i in range(HEAD_STEPS):
        record.add(Step(i * 1e-4, (i + 1) * 1e-4))
    record.add(Step(0.6, 3.4, steps=2800, counted=True))
    windows = dict(record.timeline.items())
    assert sum(w.steps for w in windows.values()) == HEAD_STEPS + 2800
    assert [windows[k].counted for k in (0.0, 1.0, 2.0, 3.0)] == [400, 1000, 1000, 400]
    assert windows[2.0].step_s == pytest.approx(1.0) and windows[2.0].calls == 0
    assert record.count == HEAD_STEPS + 2800 and record.calls == HEAD_STEPS


def _steps_line(facts):
    from gpuwhy.collect.inprocess.steps import steps_line

    return steps_line(facts)


# -- real loops ---------------------------------------------------------------------


@pytest.fixture
def pausing():
    """A step collector with its real hooks, pausing after 0.05 s of timed reads at 100
    reads a second or more, each pause ended by the first drain tick (0.25 s apart)
    0.15 s after it began, the hooks then back for 0.05 s before the next one."""
    import tensorflow  # noqa: F401 - imported whole before the hooks, as a run does

    collector = StepCollector()
    pauses = collector.pauses
    assert pauses is not None
    pauses.on_s, pauses.off_s, pauses.min_events_per_s = 0.05, 0.15, 100.0
    collector.start(time.perf_counter())
    collector.on_tensorflow()
    yield collector
    collector.stop()


def _dataset(n, autotune=True):
    import tensorflow as tf

    ds = tf.data.Dataset.range(n).map(lambda x: x * 2).prefetch(2)
    if not autotune:
        options = tf.data.Options()
        options.autotune.enabled = False
        ds = ds.with_options(options)
    return ds


def _until_paused_twice(collector, read_more):
    deadline = time.perf_counter() + 60
    while collector.pauses.pauses < 2 and time.perf_counter() < deadline:
        read_more()


def test_epochs_of_a_real_loop_are_counted_whole_through_the_pauses(pausing):
    ds = _dataset(4000)
    epochs = 0
    total = 0

    def epoch():
        nonlocal epochs, total
        for x in ds:
            total += int(x)
        epochs += 1

    _until_paused_twice(pausing, epoch)
    for _ in range(2):  # and an epoch or two after, whatever the last pause was doing
        epoch()
    pausing.stop()
    assert total == epochs * sum(2 * i for i in range(4000))  # the program's own result
    facts, _ = pausing.facts(pausing.t0)
    assert pausing.pauses.pauses >= 2 and pausing.pauses.refused is None
    assert facts.count == 4000 * epochs
    assert 0 < facts.counted_only < facts.count
    assert sum(w.steps for w in facts.timeline.windows) == facts.count
    assert sum(r[3] for r in pausing.reads()) == 4000 * epochs
    assert facts.median_s is not None and facts.input_wait_fraction is not None


def test_a_zip_of_two_iterators_keeps_its_steps_and_both_counts(pausing):
    a, b = _dataset(3000), _dataset(3000)
    epochs = 0

    def epoch():
        nonlocal epochs
        for _x, _y in zip(a, b):
            pass
        epochs += 1

    _until_paused_twice(pausing, epoch)
    pausing.stop()
    facts, _ = pausing.facts(pausing.t0)
    assert facts.count == 3000 * epochs
    reads = sorted(r[3] for r in pausing.reads())
    # zip stops at the first iterator's end: the second is read 3000 times, never exhausted
    assert sum(reads) == 2 * 3000 * epochs


def test_a_zip_whose_partner_comes_back_first_from_a_pause_keeps_every_step():
    """zip(a, b) where the hooks came back between a's read (untimed) and b's: b's
    stretch and its next timed read reach the steps before a's stretch (a's hook closes
    it at a's next read). b read twice without a is no sign a was abandoned: a still
    leads, and its stretch still makes its steps (a busy host lost them: 8,062 of 9,000)."""
    collector = StepCollector()
    a, b, t = 1, 2, collector.t0 + 1.0
    for _ in range(100):  # zip: a then b, each step
        collector._on_next(a, SITE, t, t + 0.0001, False)
        collector._on_next(b, SITE, t + 0.0002, t + 0.0003, False)
        t += 0.0005
    # paused after b's read; 300 steps untimed; back between a's read and b's
    t_back = t + 300 * 0.0005
    collector._on_next(b, SITE, t, t_back, Stretch(300, 301))
    collector._on_next(b, SITE, t_back, t_back + 0.0001, False)
    collector._on_next(a, SITE, t, t_back + 0.0002, Stretch(301, 302))
    t = t_back + 0.0005
    for _ in range(99):
        collector._on_next(a, SITE, t, t + 0.0001, False)
        collector._on_next(b, SITE, t + 0.0002, t + 0.0003, False)
        t += 0.0005
    collector._on_next(a, SITE, t, t + 0.0001, True)  # a's end ends the zip
    facts, _ = collector.facts(collector.t0, t_end=t + 1)
    assert facts.count == 100 + 301 + 99


def test_an_iterator_whose_count_cannot_be_read_is_never_paused(pausing):
    ds = _dataset(7000, autotune=False)
    n = 0
    for _ in range(2):
        for _x in ds:
            n += 1
    pausing.stop()
    facts, _ = pausing.facts(pausing.t0)
    assert pausing.pauses.pauses == 0 and "could not be read" in (pausing.pauses.refused or "")
    assert facts.count == n == 14000 and facts.counted_only == 0


def test_timing_every_step_never_pauses():
    collector = StepCollector(pause_timing=False)
    assert collector.pauses is None
    collector.start(time.perf_counter())
    collector.on_tensorflow()
    try:
        for _x in _dataset(6000):
            pass
    finally:
        collector.stop()
    facts, _ = collector.facts(collector.t0)
    assert facts.count == 6000 and facts.counted_only == 0


def test_a_pause_is_refused_where_another_hook_sits_over_the_timing(pausing):
    from tensorflow.python.data.ops import iterator_ops

    from gpuwhy.tfapi.patching import Patch

    seen = []

    def counting(original):  # another tool's hook, over gpuwhy's
        return lambda self: (seen.append(1), original(self))[1]

    over = Patch(iterator_ops.OwnedIterator, "__next__", counting)
    n = epochs = 0
    deadline = time.perf_counter() + 60
    try:  # until a pause was asked for (and refused), two epochs at least
        while epochs < 2 or (pausing.pauses.refused is None and time.perf_counter() < deadline):
            for _x in _dataset(4000):
                n += 1
            epochs += 1
    finally:
        over.undo()
    pausing.stop()
    facts, _ = pausing.facts(pausing.t0)
    # every read and each epoch's StopIteration went through the other hook
    assert len(seen) == n + epochs and facts.count == n == 4000 * epochs
    assert pausing.pauses.pauses == 0
    assert "installed over" in (pausing.pauses.refused or "")
    # the other hook's undo put the timing back where it was; stop() put TF's back
    assert not hasattr(vars(iterator_ops.OwnedIterator)["__next__"], "__wrapped__")


# -- tf.function calls ----------------------------------------------------------------


@pytest.fixture
def watching():
    """The function watcher and the step collector as a run makes them (the call hook
    pauses with the next() hook), the pauses made short as above."""
    import tensorflow  # noqa: F401 - imported whole before the hooks, as a run does

    from gpuwhy.collect.inprocess.base import RunOptions
    from gpuwhy.collect.inprocess.functions import FunctionWatcher

    made: list = []
    for kind in (StepCollector, FunctionWatcher):  # the registry's order
        made.append(kind.create(RunOptions(), made))
    steps, watcher = made
    pauses = steps.pauses
    assert watcher.pauses is pauses and pauses is not None
    pauses.on_s, pauses.off_s, pauses.min_events_per_s = 0.05, 0.15, 100.0
    t0 = time.perf_counter()
    watcher.start(t0)
    steps.start(t0)
    watcher.on_tensorflow()
    steps.on_tensorflow()
    yield watcher, steps
    steps.stop()
    watcher.stop()


def _function_facts(watcher, steps):
    steps.stop()
    watcher.stop()
    loops = watcher.loops()
    facts, _ = steps.facts(steps.t0, function_loops=loops)
    return {f.name: f for f in watcher.facts().functions}, loops, facts


def _call_through_pauses(steps, least_calls: int, between_s: float = 0.0):
    """A loop calling a ``train_step`` (its variable counts the calls) until the hooks
    paused 3 times and it made ``least_calls``, busy ``between_s`` after each call. The
    function is freed as this returns, likely while its hook is paused, as a
    ``train()`` that defines its step does: its last pause's calls must still count."""
    import tensorflow as tf

    v = tf.Variable(0.0)

    @tf.function
    def train_step():
        v.assign_add(1.0)

    calls = 0
    deadline = time.perf_counter() + 60
    while (steps.pauses.pauses < 3 or calls < least_calls) and time.perf_counter() < deadline:
        train_step()
        calls += 1
        until = time.perf_counter() + between_s
        while time.perf_counter() < until:
            pass
    return v, calls


def test_a_loop_of_calls_alone_is_counted_whole_through_the_pauses(watching):
    watcher, steps = watching
    v, calls = _call_through_pauses(steps, 12_000)
    functions, loops, facts = _function_facts(watcher, steps)
    assert steps.pauses.pauses >= 3 and steps.pauses.refused is None
    assert float(v.numpy()) == calls  # the program's own result
    (fn,) = [f for name, f in functions.items() if name == "train_step"]
    assert fn.calls == calls
    (view,) = [v for name, v in loops.items() if name.startswith("train_step")]
    assert view.count == calls and view.tail.total.counted > 0
    assert facts.count == calls and 0 < facts.counted_only < calls
    # the time in its calls: the timed ones', the counted ones at their mean
    assert 0 < fn.call_s < facts.total_s * 1.05


def test_the_time_between_calls_is_measured_between_timed_calls_in_a_row(watching):
    """The projection's time between calls (projection/host.py) is the median span from
    one timed call's end to the next one's start: a pause breaks the pair, so no span
    holds counted calls, and the span is the loop's own time whichever calls were timed."""
    watcher, steps = watching
    _, calls = _call_through_pauses(steps, 6_000, between_s=0.0003)  # the loop's own work
    functions, _, _ = _function_facts(watcher, steps)
    assert steps.pauses.pauses >= 3
    (fn,) = [f for name, f in functions.items() if name == "train_step"]
    assert fn.calls == calls
    assert 0 < fn.gaps < calls - 1  # pairs broken by the pauses are left out
    assert fn.gap_median_s == pytest.approx(0.0003, rel=0.15)


def test_a_retrace_inside_a_pause_keeps_the_calls_counted(watching):
    import tensorflow as tf

    watcher, steps = watching
    v = tf.Variable(0.0)

    @tf.function
    def train_step(x):
        v.assign_add(tf.reduce_sum(x))

    one, two = tf.ones([1]), tf.ones([2])
    calls = 0
    deadline = time.perf_counter() + 60
    while steps.pauses.pauses < 2 and time.perf_counter() < deadline:
        train_step(one)
        calls += 1
    while not steps.pauses.paused and time.perf_counter() < deadline:
        train_step(one)
        calls += 1
    train_step(two)  # traces while the hooks are paused
    calls += 1
    for _ in range(2000):
        train_step(one)
        calls += 1
    functions, _, facts = _function_facts(watcher, steps)
    fn = functions["train_step"]
    assert fn.calls == calls and fn.traces == 2
    assert facts.count == calls


def test_a_dataset_loop_calling_a_function_counts_both_exactly(watching):
    import tensorflow as tf

    watcher, steps = watching
    v = tf.Variable(0, dtype=tf.int64)

    @tf.function
    def train_step(x):
        v.assign_add(x)

    n = epochs = 0
    deadline = time.perf_counter() + 60
    while (epochs < 3 or steps.pauses.pauses < 2) and time.perf_counter() < deadline:
        for x in _dataset(3000):
            train_step(x)
            n += 1
        epochs += 1
    functions, _, facts = _function_facts(watcher, steps)
    assert steps.pauses.pauses >= 2
    assert int(v.numpy()) == epochs * sum(2 * i for i in range(3000))
    assert functions["train_step"].calls == n == 3000 * epochs
    assert facts.count == n and facts.counted_only > 0
    assert sum(r[3] for r in steps.reads()) == n


def test_a_counted_stretch_is_no_stall_and_its_steps_are_in_the_stall_tracker_s_totals():
    from gpuwhy.collect.inprocess.stall_tracker import StallTracker

    tracker = StallTracker(0.0)
    record = LoopRecord(0.0, stalls=tracker)
    t = 0.0
    for _ in range(200):
        record.add(Step(t, t + 0.001))
        t += 0.001
    record.add(Step(t, t + 1.0, steps=1000, counted=True))  # 1 s the timing paused
    t += 1.0
    for _ in range(200):
        record.add(Step(t, t + 0.001))
        t += 0.001
    assert tracker.between.count == 0 and tracker.inside.count == 0
    assert tracker.steps == 1400 and tracker.step_s == pytest.approx(1.4)
    record.add(Step(t + 0.5, t + 0.501))  # a real gap after it still is one
    assert tracker.between.count == 1
    t += 0.501
    # a stretch half again as long as its steps at the timed pace: a stall inside it
    record.add(Step(t, t + 1.5, steps=1000, counted=True))
    assert tracker.inside.count == 1


def test_no_pause_while_an_iterator_the_program_made_is_not_read_yet(pausing):
    pausing._drain.stop()  # its ticks would ask for pauses or not: these are asked by hand
    pauses = pausing.pauses
    a, b = iter(_dataset(100)), iter(_dataset(100))  # zip(a, b) makes both, then reads a
    next(a)
    pauses.wanted = True
    next(a)  # b's reads would begin uncounted
    assert not pauses.paused and not pauses.wanted
    next(b)
    pauses.wanted = True
    next(a)
    assert pauses.paused
    for _ in range(10):
        next(a)
        next(b)
    pauses.resume()
    next(a)
    next(b)
    pausing.stop()
    assert sorted(r[3] for r in pausing.reads()) == [12, 14]


def _until_paused(steps, call, deadline_s=60):
    deadline = time.perf_counter() + deadline_s
    n = 0
    while not steps.pauses.paused and time.perf_counter() < deadline:
        call()
        n += 1
    assert steps.pauses.paused
    return n


def _make_step(v):
    import tensorflow as tf

    return tf.function(lambda: v.assign_add(1.0))  # two of these: one def, one TF count


def _train_until_paused(steps):
    """A variable, a step adding one to it, and its calls: 6,000 (each loop's head of
    timed steps and more), then until the hooks paused."""
    import tensorflow as tf

    v = tf.Variable(0.0)
    train = _make_step(v)
    n_train = 6000
    for _ in range(n_train):
        train()
    return v, train, n_train + _until_paused(steps, train)


def test_functions_of_one_def_are_counted_apart_though_tf_counts_them_together(watching):
    watcher, steps = watching
    v, train, n_train = _train_until_paused(steps)
    for _ in range(300):
        train()
    n_train += 300
    test = _make_step(v)  # made and traced while the hooks are paused (an evaluation)
    for _ in range(50):
        test()
    for _ in range(500):
        train()
    n_train += 500
    functions, _, _ = _function_facts(watcher, steps)
    assert functions["<lambda>"].calls == n_train + 50  # the facts: one def, one entry
    each = sorted(w.calls for w in watcher._records if w.info.name == "<lambda>")
    assert each == [50, n_train]
    assert float(v.numpy()) == n_train + 50


def test_a_first_call_begun_paused_is_counted_where_the_drain_resumes_during_its_trace(watching):
    """The drain's tick may put the hooks back while a call that began with them paused
    is tracing (the trace takes tens of milliseconds): the call ran past the hook all
    the same, and is counted (it was lost: 6,849 calls for 6,850 in a CI run)."""
    import tensorflow as tf

    watcher, steps = watching
    v, train, n_train = _train_until_paused(steps)
    steps._drain.stop()  # the pause ends where this test says, not at a tick

    def evaluate():
        drain = threading.Thread(target=steps.pauses.resume)  # the drain's tick, mid-trace
        drain.start()
        drain.join()
        return v.assign_add(1000.0)

    step = tf.function(evaluate)
    for _ in range(20):
        step()
    functions, _, _ = _function_facts(watcher, steps)
    assert float(v.numpy()) == n_train + 20 * 1000
    assert functions["evaluate"].calls == 20
    assert functions["<lambda>"].calls == n_train


def test_a_function_called_now_and_then_keeps_its_calls_across_pauses(watching):
    import tensorflow as tf

    watcher, steps = watching
    v = tf.Variable(0.0)

    @tf.function
    def train_step():
        v.assign_add(1.0)

    @tf.function
    def log_step():
        v.assign_add(1000.0)

    logs = calls = 0
    deadline = time.perf_counter() + 60
    while (steps.pauses.pauses < 4 or calls < 20_000) and time.perf_counter() < deadline:
        train_step()
        calls += 1
        if calls % 3000 == 0:
            log_step()
            logs += 1
        if calls == 9000:  # asked while the hooks may be paused: traces, counts no call
            train_step.get_concrete_function()
    functions, _, _ = _function_facts(watcher, steps)
    assert steps.pauses.pauses >= 4
    assert functions["train_step"].calls == calls and functions["log_step"].calls == logs
    assert float(v.numpy()) == calls + 1000 * logs


def test_an_iterator_read_inside_a_function_makes_no_loop_of_its_own(watching):
    import tensorflow as tf

    watcher, steps = watching
    v = tf.Variable(0, dtype=tf.int64)
    it = iter(_dataset(40_000))
    next(it)  # a peek, timed

    @tf.function
    def train_step(iterator):
        v.assign_add(next(iterator))

    calls = 0
    deadline = time.perf_counter() + 60
    while (steps.pauses.pauses < 3 or calls < 12_000) and time.perf_counter() < deadline:
        train_step(it)
        calls += 1
    del it
    functions, _, facts = _function_facts(watcher, steps)
    assert steps.pauses.pauses >= 3
    assert functions["train_step"].calls == calls
    assert facts.source == "tf-function" and facts.count == calls
    assert all(loop.source != "tf-data" or loop.count <= 1 for loop in facts.loops)


def test_a_session_pauses_the_call_hook_with_the_next_hook():
    """As a run makes its collectors (the registry's order: the steps before the
    function watcher), both per-step hooks are the pauses' (the call hook once went
    unpaused: every call of a 0.5 ms loop was timed)."""
    import tensorflow  # noqa: F401 - imported whole before the hooks, as a run does

    import gpuwhy

    with gpuwhy.session(hz=2, eager=False) as session:
        steps = next(c for c in session.collectors if c.name == "steps")
        patched = sorted(f"{p.owner.__name__}.{p.name}" for p in steps.pauses.patches)
    assert patched == ["Function.__call__", "OwnedIterator.__next__"], patched


def test_the_drain_asks_nothing_of_tensorflow_while_the_program_imports_it(tmp_path):
    """The steps' drain asks the function watcher whether its functions may pause, four
    times a second from the session's start: before the hooks are in (the program's
    thread still importing TensorFlow) the answer imports nothing (an import from the
    drain's thread then was a deadlock Python raised into the program's import), and a
    whole `gpuwhy run` of a script importing TF while the drains tick completes."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from gpuwhy.collect.inprocess.functions import FunctionWatcher\n"
        "from gpuwhy.tfapi.tracing import functions_run_eagerly\n"
        "assert FunctionWatcher().ready() == (False, 0)\n"
        "assert functions_run_eagerly() is True\n"
        "assert not [m for m in sys.modules if m.startswith('tensorflow')]\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    script = tmp_path / "train.py"
    script.write_text(
        "import time\n"
        "time.sleep(0.6)  # the drains tick before the import\n"
        "import tensorflow as tf\n"
        "step = tf.function(lambda x: x * 2.0)\n"
        "for x in tf.data.Dataset.range(50).map(lambda i: tf.cast(i, tf.float32)):\n"
        "    step(x)\n"
        "print('TRAINED')\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "run", "--out-dir", str(tmp_path), str(script)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "TRAINED" in done.stdout, done.stdout[-3000:]
    assert "train.py: completed" in done.stderr, done.stderr[-3000:]


class _Hooked:
    """A class whose method a pause steps aside (the hooks' place, without TF)."""

    def event(self):
        return "original"


class _CountedSource:
    """What a hook times: TF's count of its events is ``events``."""

    def __init__(self):
        self.events = 0


def _paused_once(short_on_s=0.05):
    """A HookPauses over a hook of :class:`_Hooked` and one counted source, paused once
    the way a steady fast loop is: a tick after ``on_s`` at the pace, then the
    program's thread's next event."""
    from gpuwhy.collect.inprocess.hook_pauses import HookPauses
    from gpuwhy.tfapi.patching import Patch

    pauses = HookPauses(on_s=0.0, off_s=0.1, min_events_per_s=1000.0, short_on_s=short_on_s)
    patch = Patch(_Hooked, "event", lambda original: lambda self: "hooked")
    pauses.add([patch])
    source, stretches = _CountedSource(), []
    pauses.track(1, source, lambda s: s.events, lambda n, *rest: stretches.append(n))
    pauses.tick(time.perf_counter() + 1.0, 5000, steady=True)
    assert pauses.wanted and pauses.wanted_from == 0.0  # the first pause: at once
    pauses.pause()
    assert pauses.paused and _Hooked().event() == "original"
    return pauses, patch, source, stretches


def _back_after_the_pause(pauses):
    time.sleep(pauses.off_s + 0.02)
    now = time.perf_counter()
    pauses.tick(now, 0, steady=True)
    assert not pauses.paused and _Hooked().event() == "hooked"
    return now


def test_after_a_pause_a_fast_loop_is_timed_for_the_short_time_only():
    """Back from a pause, the hooks ask for the next one ``short_on_s`` on (not the
    drain's next tick, ``on_s`` or more): the program's thread pauses at its first event
    ending after it, the loop's pace through the pause (its counts: a million events in
    about 0.12 s) still fast. A twentieth of a steady loop's steps timed,
    not a fifth."""
    pauses, patch, source, stretches = _paused_once()
    try:
        source.events += 10**6  # the loop ran on while the hooks were aside
        now = _back_after_the_pause(pauses)
        assert pauses.wanted and pauses.wanted_from == pytest.approx(now + 0.05)
        pauses.close(source, 1)  # the source's first event after the pause: counted
        assert stretches == [10**6]
        pauses.pause()
        assert pauses.paused and pauses.pauses == 1
        assert _Hooked().event() == "original"
    finally:
        pauses.finish()
        patch.undo()


def test_after_a_pause_a_loop_that_slowed_is_timed_until_the_ticks_say_otherwise():
    """A loop that ran through the pause at under ``min_events_per_s`` (5 events in
    0.12 s: its steps grew to tens of ms) is not paused again at the short time's end:
    every step is timed, and the drain's ticks decide from its timed pace as before a
    first pause (too slow: no pause)."""
    pauses, patch, source, stretches = _paused_once()
    try:
        source.events += 5
        _back_after_the_pause(pauses)
        pauses.close(source, 1)
        assert stretches == [5]
        pauses.pause()
        assert not pauses.paused and not pauses.wanted and pauses.wanted_from == 0.0
        assert _Hooked().event() == "hooked"
        pauses.tick(time.perf_counter() + 1.0, 10, steady=True)  # 10 timed events in 1 s
        assert not pauses.wanted
    finally:
        pauses.finish()
        patch.undo()


def test_a_resume_for_another_reason_cancels_the_short_time_on():
    """A new iterator, a trace or the eager op counter's window puts the hooks back
    while they wait for the short time's end: its first steps are timed for the drain's
    ``on_s`` as a first pause's are, not cut short."""
    pauses, patch, source, _ = _paused_once()
    try:
        source.events += 10**6
        _back_after_the_pause(pauses)
        assert pauses.wanted and pauses.wanted_from > 0.0
        pauses.resume()  # e.g. a new iterator (the hooks already back)
        assert not pauses.wanted and pauses.wanted_from == 0.0
        pauses.pause()  # a hook that read wanted just before: no pause
        assert not pauses.paused
    finally:
        pauses.finish()
        patch.undo()


def test_calls_counted_in_a_pause_take_the_pace_timed_just_before_it():
    """A pause's calls are worth the mean of the steady calls timed since the pause
    before (the loop's pace then), never more than the pause's own span: a loop's first
    5,000 calls, timed one by one while the drain folds each, run slower than its later
    ones, and valued at the mean of all timed calls a loop of 12,000 read 2.05 s in its
    calls over its 1.84 s."""
    from gpuwhy.collect.inprocess.functions import _Watched

    watched = _Watched(None, "train.py:9", "train_step")
    t = 100.0
    for duration in [0.0003] * 5000 + [0.0002] * 300:  # the head, slower; then its pace
        watched.times.extend((t, t + duration))
        t += duration + 0.00001
    watched.times.extend((-5000.0, t + 1.04))  # 5,000 calls counted in the next 1.04 s
    watched.fold(100.0, None)
    timed_s = 5000 * 0.0003 + 300 * 0.0002
    assert watched.calls == 5300 + 5000
    assert watched.call_seconds() == pytest.approx(timed_s + 5000 * 0.0002)
    t += 1.04
    watched.times.extend((t, t + 0.0002))  # one call, then a pause shorter than its count
    watched.times.extend((-1000.0, t + 0.0002 + 0.15))  # at 0.2 ms: 0.2 s, in 0.15 s
    watched.fold(100.0, None)
    assert watched.call_seconds() == pytest.approx(timed_s + 1.0 + 0.0002 + 0.15)


class _AskedPauses:
    """What the next() hook reads of the pauses, asking for the pause every time."""

    def __init__(self):
        self.open, self.sources, self.recent = {}, {}, set()
        self.patches, self.wanted, self.wanted_from, self.asked = [], True, 0.0, 0

    def add(self, patches):
        self.patches.extend(patches)

    def pause(self):
        self.asked += 1

    def close(self, target, key, extra=0):
        pass

    def forget(self, key):
        pass


def test_the_next_hook_pauses_only_at_a_read_ending_after_the_short_time_on():
    """The real next() hook, asked for a pause from ``wanted_from`` on: no read that ends
    before it asks, the first one after it does."""
    import tensorflow as tf

    from gpuwhy.tfapi.tfdata import iterators

    pauses = _AskedPauses()
    reads: list = []
    patches = iterators.install(
        reads.append, pauses, track=lambda key, it, site: pauses.sources.update({key: it})
    )
    try:
        it = iter(tf.data.Dataset.range(10))
        pauses.wanted_from = time.perf_counter() + 3600.0
        next(it)
        next(it)
        assert pauses.asked == 0 and len(reads) == 2
        pauses.wanted_from = time.perf_counter()
        next(it)
        assert pauses.asked == 1 and len(reads) == 3
    finally:
        for patch in reversed(patches):
            patch.undo()


def test_a_resume_while_the_tick_asks_the_functions_keeps_the_new_loop_s_time_on():
    """A new iterator's resume that lands between a pause's end and the tick's asking
    for the short time on (the function watcher asked outside the lock) is not
    overridden: the new loop's first steps get the ticks' ``on_s``."""
    pauses, patch, source, _ = _paused_once()

    def ready():
        pauses.resume()  # as a new iterator would, from the program's thread
        return True, 0

    pauses.ready = ready
    try:
        source.events += 10**6
        time.sleep(pauses.off_s + 0.02)
        pauses.tick(time.perf_counter(), 0, steady=True)
        assert not pauses.paused and not pauses.wanted and pauses.wanted_from == 0.0
    finally:
        pauses.finish()
        patch.undo()


def test_a_fast_loop_after_seconds_of_nothing_is_paused_at_its_own_pace():
    """The pace a first pause needs is the loop's: ticks that saw no event (TensorFlow
    importing, a model building) do not count. Counted from when the hooks went in, a
    loop of 0.38 ms steps 4 s into a run was timed 1.5 s (4,000 steps) before its events
    made up for the seconds before it."""
    from gpuwhy.collect.inprocess.hook_pauses import HookPauses
    from gpuwhy.tfapi.patching import Patch

    pauses = HookPauses(on_s=0.25, off_s=1.0, min_events_per_s=1500.0)
    patch = Patch(_Hooked, "event", lambda original: lambda self: "hooked")
    pauses.add([patch])
    try:
        now = time.perf_counter()
        for tick in range(16):  # 4 s of ticks with nothing timed
            pauses.tick(now + 0.25 * tick, 0, steady=True)
        now += 4.0
        pauses.tick(now, 650, steady=True)  # 0.38 ms steps: 650 reads a tick
        pauses.tick(now + 0.25, 650, steady=True)
        assert pauses.wanted  # 1,300 reads in a quarter to half a second
    finally:
        pauses.finish()
        patch.undo()


def test_a_steady_loop_of_steps_of_a_few_milliseconds_is_paused():
    """A loop of 3 ms steps (a read and a call each: 667 events a second) has its hooks
    paused with the defaults, where the threshold before (1,500 events a second) timed
    every step of loops of 1.3 ms or more: the steps a slow host runs this project's
    loop of 0.5 ms steps at. A loop of 6 ms steps is not paused: timing costs it about
    0.2 % (10-15 us a step on a quiet host)."""
    from gpuwhy.collect.inprocess.hook_pauses import HookPauses
    from gpuwhy.tfapi.patching import Patch

    def wanted_at(step_s: float) -> bool:
        pauses = HookPauses()
        patch = Patch(_Hooked, "event", lambda original: lambda self: "hooked")
        pauses.add([patch])
        try:
            now = time.perf_counter()
            events = round(2 * 0.25 / step_s)  # a tick's reads and calls
            for tick in range(1, 4):  # the drain's ticks, the first 0.25 s in
                pauses.tick(now + 0.25 * tick, events, steady=True)
            return pauses.wanted
        finally:
            pauses.finish()
            patch.undo()

    assert wanted_at(0.003)
    assert wanted_at(0.0013)
    assert not wanted_at(0.006)
