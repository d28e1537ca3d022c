"""The drain: what hooks append on the program's threads is taken exactly once, however
the two interleave, and a fold that fails stops the drain with the reason kept."""

import threading
import time
from array import array

from gpuwhy.collect.inprocess.drain import Drain, take


def test_taking_beside_appending_threads_loses_and_repeats_nothing():
    events: list = []
    calls = array("d")
    n, writers = 50_000, 2
    taken: list = []
    taken_calls: list = []

    def program(offset: int) -> None:
        for i in range(n):
            events.append(offset + i)
            calls.extend((float(offset + i), -1.0))  # one C call: a pair is never split

    threads = [threading.Thread(target=program, args=(k * n,)) for k in range(writers)]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        taken.extend(take(events))
        taken_calls.extend(take(calls))
    taken.extend(take(events))
    taken_calls.extend(take(calls))
    assert sorted(taken) == list(range(writers * n))
    assert sorted(taken_calls[0::2]) == [float(i) for i in range(writers * n)]
    assert set(taken_calls[1::2]) == {-1.0}
    assert take(events) == [] and len(take(calls)) == 0


def test_the_drain_folds_until_stopped_and_a_failure_stops_it_with_its_reason():
    folds = []
    drain = Drain(lambda: folds.append(time.perf_counter()), "test", period_s=0.01).start()
    time.sleep(0.2)
    drain.stop()
    count = len(folds)
    assert count >= 3
    time.sleep(0.05)
    assert len(folds) == count  # stopped for good

    def broken() -> None:
        raise ValueError("a step of another kind")

    failing = Drain(broken, "test", period_s=0.01).start()
    time.sleep(0.1)
    failing.stop()
    assert failing.error == "ValueError: a step of another kind"


def _until(condition, limit_s: float = 5.0) -> bool:
    deadline = time.perf_counter() + limit_s
    while not condition() and time.perf_counter() < deadline:
        time.sleep(0.01)
    return condition()


def test_the_collectors_drains_share_one_thread_that_ends_with_the_last():
    """Drains of the default period fold on one thread (one GIL hand-over a tick for
    all of them, not one each), until the last stops; a new one starts it again."""
    seen: dict[str, list[str]] = {"steps": [], "functions": [], "activities": []}
    drains = [
        Drain(lambda name=name: seen[name].append(threading.current_thread().name), name)
        for name in seen
    ]
    for drain in drains:
        drain.start()
    assert _until(lambda: all(len(names) >= 2 for names in seen.values()))
    for drain in drains:
        drain.stop()
    counts = {name: len(names) for name, names in seen.items()}
    assert {n for names in seen.values() for n in names} == {"gpuwhy-drain"}
    assert _until(lambda: not [t for t in threading.enumerate() if t.name == "gpuwhy-drain"])
    assert {name: len(names) for name, names in seen.items()} == counts  # none after stop
    again: list[int] = []
    later = Drain(lambda: again.append(1), "later").start()
    assert _until(lambda: len(again) >= 1)
    later.stop()


def test_stopping_a_shared_drain_waits_for_its_own_fold_and_not_another_s():
    slow_done = threading.Event()
    own_started, own_done = threading.Event(), threading.Event()
    release = threading.Event()

    def own() -> None:
        own_started.set()
        time.sleep(0.3)
        own_done.set()

    def slow() -> None:  # another collector's fold that waits on something
        release.wait(5)
        slow_done.set()

    first = Drain(own, "own").start()
    assert own_started.wait(5)
    first.stop()
    assert own_done.is_set()  # its fold under way ended before stop() returned
    blocked = Drain(slow, "slow").start()
    other = Drain(lambda: None, "other").start()
    time.sleep(0.6)  # the slow fold is under way, the other drain behind it
    began = time.perf_counter()
    other.stop()
    assert time.perf_counter() - began < 1.0 and not slow_done.is_set()
    release.set()
    blocked.stop()


def test_a_shared_drain_that_fails_stops_alone():
    kept: list[int] = []

    def broken() -> None:
        raise ValueError("a step of another kind")

    failing = Drain(broken, "failing").start()
    working = Drain(lambda: kept.append(1), "working").start()
    assert _until(lambda: failing.error is not None and len(kept) >= 3)
    assert failing.error == "ValueError: a step of another kind"
    failing.stop()
    working.stop()


def test_a_forked_child_folds_on_a_thread_of_its_own():
    """The parent's shared thread does not exist in a child it forks: a drain the child
    starts gets a new one (the fork handler forgets the parent's)."""
    import os

    parent = Drain(lambda: None, "parent").start()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: one fold within 2 s, or exit 1
        folded = threading.Event()
        child = Drain(folded.set, "child").start()
        ok = folded.wait(2)
        child.stop()
        os.write(write, b"1" if ok else b"0")
        os._exit(0)
    os.close(write)
    answer = os.read(read, 1)
    os.waitpid(pid, 0)
    parent.stop()
    assert answer == b"1"
