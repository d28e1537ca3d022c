"""drive(): a run's steps (generators) run the script from the driving frame, and keep
what the nested calls did: what the script ends with goes back in, what the runner
raises (SIGTERM or the bound while joining its threads) is thrown in where the steps
handle it, and their finally blocks run however the run ends."""

from __future__ import annotations

import threading
import time
import types

import pytest

from gpuwhy.modes.run.script import (
    ScriptCall,
    ScriptEnding,
    StoppedAtBound,
    Terminated,
    drive,
)


def _call(source: str) -> ScriptCall:
    main = types.ModuleType("__main__")
    return ScriptCall(compile(source, "prog.py", "exec"), main, None)


def _steps(source: str, log: list[str]):
    try:
        try:
            ending = yield _call(source)
        except Terminated:
            log.append("terminated")
            return "handled"
        log.append(ending.ended)
        return ending
    finally:
        log.append("finally")


def test_the_script_s_ending_is_sent_back_and_the_steps_return_value_is_the_run_s():
    log: list[str] = []
    assert drive(_steps("x = 1", log)) == ScriptEnding("completed", 0)
    assert log == ["completed", "finally"]


def test_threads_alive_before_the_script_are_left_to_the_interpreter_s_exit():
    """Only the script's non-daemon threads are joined after it: one that was there before
    (here a test's; in a shared process, e.g. a browser test's driver on the same
    pytest-xdist worker) waits for the process's own exit, and joining it would hang the
    run (it hung the suite's first two-worker run until stopped)."""
    release = threading.Event()
    earlier = threading.Thread(target=release.wait, args=(30,))
    earlier.start()
    try:
        start = time.monotonic()
        script = (
            "import threading, time\n"
            "done = []\n"
            "threading.Thread(target=lambda: (time.sleep(0.2), done.append(1))).start()\n"
        )
        call = _call(script)

        def steps():
            yield call

        drive(steps())
        assert call.main.done == [1]  # the script's own thread was still joined
        assert time.monotonic() - start < 15
        assert earlier.is_alive()
    finally:
        release.set()
        earlier.join()


def _runner_raises(monkeypatch, error: BaseException) -> None:
    """The runner raises ``error`` after the script (while joining its threads)."""
    import gpuwhy.modes.run.script as script

    def raising(*_args):
        raise error

    monkeypatch.setattr(script, "_run", raising)


def test_what_the_runner_raises_is_thrown_into_the_steps_where_they_handle_it(monkeypatch):
    _runner_raises(monkeypatch, Terminated())  # SIGTERM while joining
    log: list[str] = []
    assert drive(_steps("x = 1", log)) == "handled"
    assert log == ["terminated", "finally"]


def test_what_the_steps_do_not_handle_goes_on_and_their_finally_blocks_ran(monkeypatch):
    _runner_raises(monkeypatch, StoppedAtBound())  # the bound while joining
    log: list[str] = []
    with pytest.raises(StoppedAtBound):
        drive(_steps("x = 1", log))
    assert log == ["finally"]


def test_the_script_s_frame_has_none_below_it_neither_the_driver_s_nor_the_steps():
    """The script runs on a stack of its own (a greenlet whose function is exec): its
    frame is the bottom one, as under python, whatever drives it."""
    call = _call("import sys\nbelow = sys._getframe().f_back\n")

    def steps():
        yield call

    drive(steps())
    assert call.main.below is None


def test_without_greenlet_the_script_runs_below_the_driving_frame_not_below_the_steps(
    monkeypatch,
):
    """Where greenlet cannot be imported the script runs on gpuwhy's stack: below it only
    the runner and the frame that drives the run, the steps suspended apart."""
    import gpuwhy.modes.run.script as script

    monkeypatch.setattr(script, "_Greenlet", None)
    source = (
        "import sys\n"
        "below = []\n"
        "frame = sys._getframe().f_back\n"
        "while frame.f_code.co_name != 'drive':\n"
        "    below.append(frame.f_code.co_name)\n"
        "    frame = frame.f_back\n"
        "above_drive = frame.f_back.f_code.co_name\n"
    )
    call = _call(source)

    def steps():
        yield call

    drive(steps())
    assert call.main.below == ["_exec_alone", "_run"]
    assert call.main.above_drive == (
        "test_without_greenlet_the_script_runs_below_the_driving_frame_not_below_the_steps"
    )
