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
