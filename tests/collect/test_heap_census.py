"""Heap censuses on plain Python objects (no TensorFlow): what grows between two of them,
named as the program names it (a module's global, a running function's local, an
object's attribute), with its elements and the line that adds to them; and when a
census is taken at all."""

import sys
import threading
import types

import numpy as np
import pytest

from gpuwhy.collect.inprocess import heap_census
from gpuwhy.collect.inprocess.heap_census import MAX_CENSUSES, HeapCensus, MiB, describe

MODULE_SOURCE = """\
cache = []
def remember(x):
    cache.append(x)
"""


def _grown(census: HeapCensus, name: str):
    return [g for g in census.growing() if g.name == name]


def test_a_module_global_is_named_with_the_line_that_appends_to_it(tmp_path):
    path = tmp_path / "features.py"
    path.write_text(MODULE_SOURCE)
    module = types.ModuleType("features_under_census")
    module.__file__ = str(path)
    exec(compile(MODULE_SOURCE, str(path), "exec"), module.__dict__)
    sys.modules[module.__name__] = module
    try:
        census = HeapCensus(t0=0.0)
        census.take(1.0, 100 * MiB)
        for i in range(500):
            module.remember(float(i))
        census.take(3.0, 200 * MiB)
        (grown,) = _grown(census, "cache")
    finally:
        del sys.modules[module.__name__]
    assert (grown.what, grown.holder) == ("list", "global of features.py")
    assert grown.where.endswith("features.py:3") and grown.written == "cache.append(x)"
    assert (grown.length_first, grown.length_last) == (0, 500)
    assert (grown.first_at_s, grown.last_at_s) == (1.0, 3.0)
    assert grown.element_type == "float" and grown.element_bytes == 24
    assert census.censuses == 2 and census.seconds > 0


def collect_in_thread(started: threading.Event, done: threading.Event, n: int) -> None:
    seen = {}
    for i in range(n):
        seen[i] = np.zeros(16, np.float32)
    started.set()
    done.wait(30)


def census_while(target, *args) -> HeapCensus:
    """A baseline, then a census while ``target(*args, started, done)`` runs in a thread."""
    census = HeapCensus(t0=0.0)
    census.take(0.0, 0)
    started, done = threading.Event(), threading.Event()
    worker = threading.Thread(target=target, args=(*args, started, done))
    worker.start()
    try:
        started.wait(30)
        census.take(2.0, 64 * MiB)
    finally:
        done.set()
        worker.join()
    return census


def test_a_running_function_s_local_is_named_as_its_local():
    census = census_while(lambda started, done: collect_in_thread(started, done, 300))
    (grown,) = _grown(census, "seen")
    assert (grown.what, grown.holder) == ("dict", "local of collect_in_thread()")
    assert grown.written == "seen[i] = np.zeros(16, np.float32)"
    assert grown.where.endswith(f"test_heap_census.py:{_line('seen[i] = ')}")
    assert (grown.length_last, grown.key_type) == (300, "int")
    assert (grown.element_type, grown.element_detail) == ("ndarray", "float32 (16,)")
    assert grown.element_bytes >= 64


class Trainer:
    def __init__(self):
        self.history = []

    def step(self, i):
        self.history.append({"step": i, "loss": [float(i)] * 4})


def test_an_attribute_is_named_with_its_owner_s_class():
    trainer = Trainer()
    census = HeapCensus(t0=0.0)
    census.take(0.0, 0)
    for i in range(200):
        trainer.step(i)
    census.take(1.0, 64 * MiB)
    (grown,) = _grown(census, "history")
    assert (grown.holder, grown.written) == (
        "attribute of Trainer",
        "self.history.append({'step': i, 'loss': [float(i)] * 4})",
    )
    assert grown.where.endswith(f"test_heap_census.py:{_line('self.history.append(')}")
    assert grown.element_type == "dict" and grown.element_bytes > 200  # what the dict reaches
    # followed at the next census by its id: its first length stays the one it grew from
    for i in range(100):
        trainer.step(i)
    census.take(2.0, 128 * MiB)
    (grown,) = _grown(census, "history")
    assert (grown.length_first, grown.length_last, grown.last_at_s) == (0, 300, 2.0)


@pytest.fixture
def no_cost_budget(monkeypatch):
    """The censuses of this test process's heap take real time against a fake clock:
    the thresholds are tested apart from the cost budget."""
    monkeypatch.setattr(heap_census, "COST_SHARE", 1e9)


def test_censuses_come_after_the_first_steps_then_as_memory_doubles_its_threshold(
    no_cost_budget,
):
    calls = [0]
    census = HeapCensus(t0=100.0, calls=lambda: calls[0])
    assert not census.observe(109.0, 500 * MiB)  # no steps yet
    calls[0] = 3
    assert not census.observe(105.0, 490 * MiB)  # steps, but start-up (before 8 s)
    assert not census.observe(109.0, 500 * MiB)  # the mark (at 9 s): no growth since
    assert not census.observe(109.5, 503 * MiB)  # under 4 MiB past the mark
    assert census.observe(110.0, 504 * MiB)  # the baseline: 4 MiB past the mark
    taken = [census.observe(110.0 + i / 20, 504 * MiB + i * MiB // 14) for i in range(110)]
    assert not any(taken)  # under 12 MiB more within 10 s: nothing
    assert census.observe(115.5, 516 * MiB)  # +12 MiB
    assert not census.observe(116.0, 539 * MiB) and census.observe(116.5, 540 * MiB)  # +24
    rss = 540 * MiB
    for _ in range(MAX_CENSUSES):
        rss += 2**40
        census.observe(150.0, rss)
    assert census.censuses == MAX_CENSUSES


def test_past_three_censuses_the_next_waits_until_all_of_them_cost_two_percent_of_the_run():
    """A heap of a million objects: 0.7 s a census. The baseline, the census that names
    what grew and one more come as before; the fourth waits until the four, the next
    counted at the last one's 0.7 s, are 2 % of the run (140 s), however fast the memory
    grows."""
    census = HeapCensus(t0=0.0, calls=lambda: 3)
    assert not census.observe(9.0, 500 * MiB)  # the mark
    assert census.observe(10.0, 504 * MiB)  # the baseline
    assert census.observe(11.0, 516 * MiB)  # +12 MiB: the second
    assert census.observe(12.0, 540 * MiB)  # +24 MiB: the third
    census.wall_s, census.last_wall_s = 2.1, 0.7  # as a heap of a million objects took
    assert not census.observe(13.0, 600 * MiB)  # +60 MiB, but 2.8 s > 2 % of 13 s
    assert not census.observe(139.0, 700 * MiB)
    assert census.observe(140.5, 700 * MiB) and census.censuses == 4


def test_memory_that_stays_flat_gets_no_census_at_all():
    """A census holds the GIL (0.1-0.6 s): a program whose memory does not grow past its
    mark by BASELINE_GROWTH pays for none, however long it runs, nor for start-up's
    creep before the mark."""
    census = HeapCensus(t0=0.0, calls=lambda: 3)
    assert not census.observe(2.0, 480 * MiB)  # the first steps: buffers still filling
    assert not census.observe(8.0, 500 * MiB)  # the mark: 8 s in (the last reading 480)
    assert not census.observe(9.0, 500 * MiB)  # the creep before it is no growth
    flat = [census.observe(10.0 + i, 500 * MiB + (i % 7) * MiB // 2) for i in range(3600)]
    assert not any(flat) and census.censuses == 0
    assert census.observe(4000.0, 504 * MiB) and census.censuses == 1


def test_a_loop_begun_late_takes_its_mark_after_its_own_start():
    """A program that loads its data first begins its loop past 8 s: the loop's start
    (tf.data's buffers, the allocator's arenas: 12 MiB on a loop of short steps begun 13 s
    in) is no growth, and a mark read before it took two censuses in the loop's first two
    seconds, 0.6 s of it held. The mark comes 2 s after the first steps."""
    calls = [0]
    census = HeapCensus(t0=0.0, calls=lambda: calls[0])
    for t in range(1, 13):  # loading: no step yet
        assert not census.observe(float(t), 500 * MiB)
    calls[0] = 3  # the loop begins at 12.5 s; its start adds 12 MiB at once
    assert not census.observe(13.0, 512 * MiB)
    assert not census.observe(14.0, 512 * MiB)
    assert not census.observe(15.0, 512 * MiB)  # the mark: 512 MiB
    flat = [census.observe(16.0 + i, 512 * MiB + (i % 5) * MiB // 2) for i in range(600)]
    assert not any(flat) and census.censuses == 0
    assert census.observe(700.0, 516 * MiB) and census.censuses == 1  # growth: as before


def test_memory_growing_fast_at_the_mark_has_its_baseline_then():
    """A list filling 30 MiB a second from before 8 s: the baseline at 8 s (the mark the
    reading before), the next census a poll later, as when every program had its
    baseline at 8 s; growth that begins later gets its baseline a poll after it began."""
    census = HeapCensus(t0=0.0, calls=lambda: 3)
    assert not census.observe(7.0, 500 * MiB)
    assert census.observe(8.0, 530 * MiB)  # the mark 500 MiB: the baseline now
    assert census.observe(9.0, 560 * MiB)  # 12 MiB past 504 MiB: the list is named
    later = HeapCensus(t0=0.0, calls=lambda: 3)
    assert not later.observe(7.0, 500 * MiB) and not later.observe(8.0, 500 * MiB)
    assert later.observe(9.0, 530 * MiB) and later.observe(10.0, 560 * MiB)


def test_a_slow_leak_gets_a_census_after_an_interval_that_doubles(no_cost_budget):
    census = HeapCensus(t0=0.0, calls=lambda: 3)
    assert not census.observe(9.0, 500 * MiB)  # the mark
    assert census.observe(9.5, 504 * MiB)  # the baseline
    assert census.observe(20.0, 516 * MiB)  # +12 MiB: what the rule could report
    assert not census.observe(28.0, 521 * MiB)  # +5 MiB, 8 s after: not yet
    assert census.observe(30.1, 521 * MiB)  # 10.1 s after, +5 MiB: due
    assert not census.observe(45.0, 531 * MiB)  # the interval is 20 s now
    assert not census.observe(55.0, 524 * MiB)  # 24.9 s after, but +3 MiB only
    assert census.observe(55.0, 525 * MiB)


def test_a_creep_that_stops_short_of_a_finding_pays_for_the_baseline_alone(no_cost_budget):
    """Public Keras programs crept 16 MiB past their marks (1.3 GiB resident) and paid
    a second census of 0.3-0.7 s naming nothing: past the baseline, a census waits until
    the growth is one host.memory-growth could report (16 MiB, and 2 % of the mark)."""
    census = HeapCensus(t0=0.0, calls=lambda: 3)
    mark = 1300 * MiB
    assert not census.observe(9.0, mark)
    assert census.observe(10.0, mark + 4 * MiB)  # the baseline
    creep = [census.observe(11.0 + i, mark + (4 + min(i, 21)) * MiB) for i in range(600)]
    assert not any(creep) and census.censuses == 1  # 25 MiB < 2 % of 1,300 MiB
    assert census.observe(700.0, mark + 27 * MiB) and census.censuses == 2


def test_the_census_s_floor_is_what_the_memory_rule_reports():
    from gpuwhy.rules.host.memory_growth import MemoryGrowth

    options = MemoryGrowth.options
    assert heap_census.REPORTABLE_GROWTH == options["min_growth_mib"] * MiB
    assert heap_census.REPORTABLE_SHARE == options["min_growth_share"]


def test_a_program_without_tf_function_calls_gets_its_mark_after_sixteen_seconds():
    census = HeapCensus(t0=0.0)
    assert not census.observe(9.0, 1) and not census.observe(15.0, 1)
    assert not census.observe(16.5, 1)  # the mark
    assert census.observe(17.0, 1 + 4 * MiB) and census.censuses == 1


def test_tensors_and_arrays_are_described_by_dtype_shape_and_buffer():
    detail, size = describe(np.zeros((256, 512), np.float32))
    assert detail == "float32 (256, 512)" and size >= 256 * 512 * 4
    assert describe(np.float64(1.0))[0] == "float64 ()"


def _line(text: str) -> int:
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if text in line and "_line(" not in line)


def test_the_containers_of_gpuwhy_s_own_libraries_are_not_named():
    from ddsketch import DDSketch

    sketches = [DDSketch() for _ in range(4)]
    census = HeapCensus(t0=0.0)
    census.take(0.0, 0)
    for sketch in sketches:
        for i in range(1, 2000):
            sketch.add(i * 1.5)
    census.take(1.0, 64 * MiB)
    assert [g for g in census.growing() if "Store" in g.holder or g.name == "bins"] == []


class Burst:
    pass


class Steady:
    pass


def test_types_that_grew_once_are_not_counted_as_growing_from_the_third_census():
    census = HeapCensus(t0=0.0)
    census.take(0.0, 0)
    burst = [Burst() for _ in range(5000)]
    steady = [Steady() for _ in range(3000)]
    census.take(1.0, 64 * MiB)
    assert {"Burst", "Steady"} <= {name for name, _, _ in census.growing_types()}
    steady.extend(Steady() for _ in range(3000))
    census.take(2.0, 192 * MiB)
    names = {name: (first, last) for name, first, last in census.growing_types()}
    assert "Burst" not in names and names["Steady"][1] - names["Steady"][0] >= 6000
    assert len(burst) == 5000


def test_gpuwhy_s_own_types_are_not_counted_as_growing():
    from gpuwhy.facts import GrowingObject

    census = HeapCensus(t0=0.0)
    census.take(0.0, 0)
    mine = [GrowingObject("list", "x", "y", None, None, 0, 0, 0.0, 0.0) for _ in range(4000)]
    census.take(1.0, 64 * MiB)
    assert "GrowingObject" not in {name for name, _, _ in census.growing_types()}
    assert len(mine) == 4000


def test_tuples_are_counted_with_the_other_types():
    census = HeapCensus(t0=0.0)
    census.take(0.0, 0)
    pairs = [(i, [i]) for i in range(5000)]  # tuples of atoms are not tracked
    census.take(1.0, 64 * MiB)
    names = {name: (first, last) for name, first, last in census.growing_types()}
    assert names["tuple"][1] - names["tuple"][0] >= 4000  # 5,000, less some freed meanwhile
    assert len(pairs) == 5000


def test_a_census_keeps_no_tuple_that_another_thread_is_still_filling(monkeypatch):
    """tuple(generator) fills a tuple the collector already tracks, and resizes it once
    the generator outgrows it: a second reference to it then raises SystemError in the
    program (a census on gpuwhy's thread during a tf.function retrace storm did). Here
    the census holds its list of the heap while the program's thread runs on."""
    from gpuwhy.collect.inprocess import heap_census

    census = HeapCensus(t0=0.0)
    started, holding, resume = threading.Event(), threading.Event(), threading.Event()
    counted = heap_census.untracked_dicts

    def untracked_dicts():  # called once the census holds its list of the heap
        holding.set()
        resume.wait(10)
        return counted()

    monkeypatch.setattr(heap_census, "untracked_dicts", untracked_dicts)

    def take():
        started.wait(10)
        census.take(1.0, 0)

    thread = threading.Thread(target=take)
    thread.start()

    def items():
        for i in range(100):
            if i == 5:  # the tuple holds 5 items of its first 10 slots
                started.set()
                assert holding.wait(10)
            yield i

    try:
        built = tuple(items())  # SystemError: Objects/tupleobject.c: bad argument ...
    finally:
        resume.set()
        thread.join(10)
    assert built == tuple(range(100))
    assert census.censuses == 1


def test_a_census_gives_back_the_memory_it_freed():
    """A census's lists and dicts (tens of MiB over a few hundred thousand objects),
    kept by the allocator, were the next memory a leak filled: the resident memory stood
    still after each census and the leak's line bent (21 MiB left resident here before,
    1 MiB with glibc's malloc_trim after the census)."""
    import os

    from gpuwhy.collect.inprocess.heap_census import _malloc_trim

    if _malloc_trim() is None or not os.path.exists("/proc/self/statm"):
        pytest.skip("glibc's malloc_trim and /proc are Linux's")

    def resident() -> int:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    heap = [[i] for i in range(200_000)] + [{"a": i} for i in range(100_000)]
    census = HeapCensus(t0=0.0)
    census.take(0.0, 0)
    before = resident()
    census.take(1.0, 64 * MiB)
    assert resident() - before < 5 * MiB
    assert len(heap) == 300_000
