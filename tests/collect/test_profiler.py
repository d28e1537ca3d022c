"""The one in-process profiler's turns (collect/inprocess/profiler.py): gpuwhy's two holders
take TF's one session in turn, the program's own start is given way to while one holds
it, and nothing stays patched after."""

from __future__ import annotations

import threading
import time

import pytest

from gpuwhy.collect.inprocess import profiler

tf = pytest.importorskip("tensorflow")


def test_two_holders_take_turns_and_the_second_waits_for_the_first():
    stop = threading.Event()
    order: list[str] = []
    first_in = threading.Event()

    def first() -> None:
        with profiler.held(lambda: None, stop):
            order.append("first in")
            first_in.set()
            time.sleep(0.3)
            order.append("first out")

    thread = threading.Thread(target=first)
    thread.start()
    first_in.wait(5)
    with profiler.held(lambda: None, stop):
        order.append("second in")
    thread.join()
    assert order == ["first in", "first out", "second in"]


def test_a_holder_kept_past_the_wait_is_busy_and_a_stopped_run_stops_waiting(monkeypatch):
    monkeypatch.setattr(profiler, "BUSY_WAIT_S", 0.2)
    stop = threading.Event()
    with profiler.held(lambda: None, stop):
        waited = time.perf_counter()
        with pytest.raises(profiler.Busy):
            with profiler.held(lambda: None, stop):
                pass
        assert time.perf_counter() - waited >= 0.2
        stop.set()
        monkeypatch.setattr(profiler, "BUSY_WAIT_S", 600.0)
        waited = time.perf_counter()
        with pytest.raises(profiler.Busy):
            with profiler.held(lambda: None, stop):
                pass
        assert time.perf_counter() - waited < 5


def test_the_programs_own_start_gives_way_only_while_held(tmp_path):
    from tensorflow.python.profiler import profiler_v2

    original = profiler_v2.start
    gave_way: list[bool] = []
    stop = threading.Event()
    with profiler.held(lambda: gave_way.append(True), stop):
        assert profiler_v2.start is not original
        tf.profiler.experimental.start(str(tmp_path))  # the program's own session
        tf.profiler.experimental.stop()
    assert gave_way == [True]
    assert profiler_v2.start is original and tf.profiler.experimental.start is original


def test_wait_for_ends_when_reached_at_its_deadline_or_when_the_run_stops():
    stop = threading.Event()
    calls = iter(range(1000))
    assert profiler.wait_for(lambda: next(calls) >= 3, time.perf_counter() + 5, stop)
    began = time.perf_counter()
    assert not profiler.wait_for(lambda: False, began + 0.1, stop)
    assert 0.1 <= time.perf_counter() - began < 2
    stop.set()
    assert not profiler.wait_for(lambda: False, float("inf"), stop)


def test_the_profiler_is_refused_in_a_multi_worker_job(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"worker": ["a:1", "b:2"]}}')
    assert profiler.refused(script_profiles=False) == profiler.MULTI_WORKER
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"worker": ["a:1"]}}')
    assert profiler.refused(script_profiles=False) is None
