"""Run a user's script as ``python script.py args...`` would, inside a watching Session.

What must stay the same as plain Python (pyinstrument's and cProfile's runners do the
same): ``sys.argv``, ``sys.path[0]`` (the script's directory), ``__main__`` (a fresh
module registered as ``sys.modules['__main__']``, so pickling for multiprocessing
``spawn`` finds the script's classes), the working directory, stdin/stdout/stderr (never
captured), the exit status (``sys.exit(n)`` gives n, an uncaught exception 1, Ctrl-C
130) and the traceback, printed by ``sys.excepthook`` without gpuwhy's frames. Like
the interpreter, the run ends when the main thread is done *and* the non-daemon
threads it started have finished. A child the script forks gets SIGTERM and ``os._exit``
back as they were before gpuwhy (gpuwhy.forked), and never reports.
"""

from __future__ import annotations

import builtins
import contextlib
import contextvars
import ctypes
import importlib.machinery
import os
import re
import signal
import sys
import sysconfig
import threading
import types
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import TypeVar

import gpuwhy.forked as forked
from gpuwhy.modes.run.script_modules import ScriptModules
from gpuwhy.tfapi.graph_ops import is_library_file, relative

try:  # the script's own stack (see _exec_alone); a platform without its wheel runs on ours
    from greenlet import getcurrent as _greenlet_current
    from greenlet import greenlet as _Greenlet
except ImportError:  # pragma: no cover - greenlet ships wheels for every CPython gpuwhy runs on
    _Greenlet = None

EXIT_INTERRUPTED = 130


class ScriptError(Exception):
    """The script cannot be run at all (missing, not Python): one line, exit 2."""


@dataclass
class ScriptEnding:
    ended: str  # completed | exception | interrupted | terminated | exit
    exit_code: int
    error: str | None = None


def load_script(path: str) -> types.CodeType:
    """The compiled script, or :class:`ScriptError` saying why it cannot run."""
    if not os.path.exists(path):
        raise ScriptError(f"{path}: no such file")
    if os.path.isdir(path):
        raise ScriptError(f"{path} is a directory, not a Python script")
    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError as e:
        raise ScriptError(f"cannot read {path}: {e.strerror or e}") from None
    if b"\0" in source[:8192]:
        raise ScriptError(f"{path} is not a Python script (binary file)")
    try:
        # Python 3.9+ makes the script's __file__ and code paths absolute
        return compile(source, os.path.abspath(path), "exec", dont_inherit=True)
    except SyntaxError as e:
        raise ScriptError(f"{path} is not valid Python: {e.msg} (line {e.lineno})") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise ScriptError(f"{path} is not a Python script: {e}") from None


class StoppedAtBound(BaseException):
    """Raised in the script's main thread when ``--stop-after`` seconds have passed: a
    BaseException, so the script's ``except Exception`` does not swallow it. The run then
    ends as one that completed its bounded part (``ended == "stopped"``, status 0)."""


class _Bound:
    """Raises :class:`StoppedAtBound` in the thread that made it (the main thread) once
    ``seconds`` have passed, and again each second until the run says it stopped: Python
    delivers it at the next bytecode the thread runs (a script inside one long C call, a
    TF op, stops when that call returns), and one raised inside a ``__del__``, a GC
    callback or a bare ``except:`` is lost."""

    REPEAT_S = 1.0

    def __init__(self, seconds: float) -> None:
        self.target = threading.get_ident()
        self.done = threading.Event()
        self.thread = threading.Thread(
            target=self._stop, args=(seconds,), name="gpuwhy-stop-after", daemon=True
        )
        self.thread.start()

    def _stop(self, seconds: float) -> None:
        if self.done.wait(seconds):
            return
        while not self.done.is_set():
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(self.target), ctypes.py_object(StoppedAtBound)
            )
            self.done.wait(self.REPEAT_S)

    def cancel(self) -> None:
        self.done.set()


def _stop_after(seconds: float | None) -> _Bound | None:
    return _Bound(seconds) if seconds is not None else None


class Terminated(BaseException):
    """Raised in the script's main thread by SIGTERM, so the run ends the way Ctrl-C ends
    it (the partial report is written), then gpuwhy dies of SIGTERM as Python would."""


SIGTERM_EXIT = 128 + 15
# A script that catches Terminated (a bare ``except:``, ``except BaseException``) and goes
# on would run on to its end where Python would have died at the signal: this long after
# the signal, a script still running is reported from the signal's handler and the process
# dies of SIGTERM. Long enough for the script's ``finally`` blocks to end as they would
# after Ctrl-C; Python runs none of them on SIGTERM.
SIGTERM_GRACE_S = 2.0
# ... where the handler finds the main thread in gpuwhy's own code (a hook, holding a lock
# the report would take), it tries again this much later
SIGTERM_RETRY_S = 0.02


@dataclass(frozen=True)
class ScriptCall:
    """What a run's steps ask :func:`drive` to execute: the script's code in its
    ``__main__``, stopped at ``bound``."""

    code: types.CodeType
    main: types.ModuleType
    bound: _Bound | None


# A run's steps (a generator): its setup, then ``yield ScriptCall`` (the script runs,
# from the frame that drives them; its ending sent back, or what it raised thrown in),
# then its ending; the steps' return value is the run's.
T = TypeVar("T")
RunSteps = Generator[ScriptCall, ScriptEnding, T]


def drive(steps: RunSteps[T]) -> T:
    """Runs ``steps``, the script where they ask for it, from this frame.

    Why: TensorFlow captures the Python stack at every eager op (``StackTrace::Capture``
    in its fast path) and reads each frame's line, a scan of the frame's code's location
    table up to where it runs. The script runs on a stack of its own (:func:`_exec_alone`),
    so none of gpuwhy's frames is read there; where greenlet is missing it runs on this
    one, and gpuwhy's frames below it (the watched run, the report's guard: long
    functions, each suspended deep in its code) cost about 3 us of every eager op
    (docs/speed.md). As generators suspended at their ``yield``, their ``with`` and
    ``try`` blocks stay in force and their frames are off the stack the script runs on:
    below it only this frame and its caller's.
    """
    try:
        call = next(steps)
        while True:
            try:
                ending = _run(call.code, call.main, call.bound)
            except BaseException as error:  # noqa: BLE001 - the steps handle it where they did
                call = steps.throw(error)
            else:
                call = steps.send(ending)
    except StopIteration as done:
        return done.value
    finally:
        steps.close()  # interrupted here, between the two: the steps' finally blocks run now


def script_steps(
    path: str,
    args: Sequence[str],
    code: types.CodeType | None = None,
    before_hard_exit: Callable[[int], None] | None = None,
    stop_after: float | None = None,
    before_death: Callable[[], None] | None = None,
) -> RunSteps[ScriptEnding]:
    """Execute the script in this process, as steps (:func:`drive`); returns how it
    ended. Never raises for the script's own exceptions: they are printed as Python
    prints them.

    ``before_hard_exit(status)`` runs when the script ends the process with ``os._exit``
    (from this process only: forked workers exit as they always do). SIGTERM, while the
    script runs, ends it like Ctrl-C (``ScriptEnding.ended == "terminated"``); where the
    script catches that and goes on, ``before_death()`` runs from the signal's handler
    ``SIGTERM_GRACE_S`` later and the process dies of SIGTERM, as Python's would have.
    """
    code = code or load_script(path)
    if before_hard_exit is not None:
        _guard_hard_exit(before_hard_exit)
    sys.argv[:] = [path, *args]
    sys.path[0] = os.path.dirname(os.path.realpath(path))  # python resolves symlinks here
    main = types.ModuleType("__main__")
    absolute = os.path.abspath(path)
    main.__dict__.update(
        __file__=absolute,
        __annotations__={},  # the interpreter's __main__ has it from the start
        __builtins__=builtins,
        __spec__=None,
        __package__=None,
        __cached__=None,
        __loader__=importlib.machinery.SourceFileLoader("__main__", absolute),
    )
    sys.modules["__main__"] = main
    with _sigterm_raises(before_death) as sigterm:
        timer = _stop_after(stop_after)
        try:
            outcome = yield ScriptCall(code, main, timer)
        except Terminated:  # SIGTERM while joining or printing
            outcome = ScriptEnding("terminated", SIGTERM_EXIT, "SIGTERM")
        except StoppedAtBound:  # the bound came while joining the script's threads
            outcome = ScriptEnding("stopped", 0)
        finally:
            if timer is not None:
                timer.cancel()
            _flush()
    if sigterm.is_set() and outcome.ended != "terminated":
        # the script caught Terminated and went on: Python would have died at the signal
        outcome = ScriptEnding("terminated", SIGTERM_EXIT, "SIGTERM")
    return outcome


def _run(code: types.CodeType, main: types.ModuleType, bound: _Bound | None = None) -> ScriptEnding:
    before = frozenset(threading.enumerate())
    try:
        _exec_alone(code, main.__dict__)
        outcome = ScriptEnding("completed", 0)
    except SystemExit as e:
        outcome = _exit_outcome(e)
    except KeyboardInterrupt as e:
        _print_exception(e)
        return ScriptEnding("interrupted", EXIT_INTERRUPTED, "KeyboardInterrupt")
    except Terminated:
        return ScriptEnding("terminated", SIGTERM_EXIT, "SIGTERM")
    except StoppedAtBound:
        if bound is not None:
            bound.cancel()  # no more raises: the run ends here
        return ScriptEnding("stopped", 0)  # its threads are not waited for: the bound is up
    except BaseException as e:  # noqa: BLE001 - the script's own failure, reported as Python does
        _print_exception(e)
        outcome = ScriptEnding("exception", 1, exception_line(e))
    _wait_for_threads(before)  # the interpreter joins them after the main module, whatever its end
    return outcome


def _exec_alone(code: types.CodeType, namespace: dict) -> None:
    """``exec(code, namespace)`` with nothing of gpuwhy's below the script's frame: the
    script runs in a greenlet whose function is ``exec`` itself (C, no Python frame), so
    its ``<module>`` frame has no ``f_back``, as under ``python script.py``; what it
    raises comes out here.

    Why: TensorFlow captures the Python stack at every eager op and reads each frame's
    line (``StackTrace::Capture``, a scan of the frame's code's location table up to where
    it waits). gpuwhy's five frames below the script (the console script, the command
    line, the run command, :func:`drive`, :func:`_run`) were 12.1 frames a capture
    against 7 under python on a loop of 0.35 ms steps, 18,700 more instructions a step on
    the program's thread, 2 % of its own (callgrind, counted exactly; docs/speed.md).
    The greenlet shares the thread: its thread state, thread-locals, signal handlers and
    asynchronous exceptions (``--stop-after``) are the main thread's, and it runs in the
    main thread's context (``contextvars``). What differs from python: the script starts
    at the recursion depth it was switched in at (a few frames less headroom before
    ``RecursionError``, as when it ran on gpuwhy's stack) and greenlet's own
    ``getcurrent().parent`` is gpuwhy's greenlet, not None.
    """
    if _Greenlet is None:
        exec(code, namespace)
        return
    stack = _Greenlet(exec)
    # the running context itself, not a copy: what the script sets in context variables
    # (decimal's precision among them) is still set for its atexit handlers and finalisers.
    # A thread has none until one is asked for (copy_context makes it, adding no variable)
    contextvars.copy_context()
    stack.gr_context = _greenlet_current().gr_context
    stack.switch(code, namespace)


@contextlib.contextmanager
def _sigterm_raises(before_death: Callable[[], None] | None = None):
    """SIGTERM raises :class:`Terminated` in the main thread while the script runs,
    unless the script installs a handler of its own (then that one is the script's).

    A script that catches it and goes on (``except:`` around its steps) is not let run
    on: ``SIGTERM_GRACE_S`` later the signal comes again (a timer sends it), and its
    handler, where it finds the main thread out of gpuwhy's own code (which may hold a
    lock the report takes: :func:`_in_gpuwhy_s_code`), runs ``before_death`` (the
    report) and dies of SIGTERM. It raised Terminated for ever before: the script ran on to its
    end where Python would have died at the signal."""
    seen = threading.Event()
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGTERM"):
        yield seen
        return

    pid = os.getpid()
    ended = threading.Event()  # the script is back in gpuwhy's hands: no more signals

    def again_in(seconds: float) -> None:
        def send() -> None:
            if not ended.wait(seconds):
                os.kill(pid, signal.SIGTERM)

        threading.Thread(target=send, name="gpuwhy-sigterm", daemon=True).start()

    def on_sigterm(signum, frame):
        if os.getpid() != pid:  # a forked child that put this handler back, or chains to it
            _as_before_in_child(on_sigterm, previous, signum)
            return
        if not seen.is_set():
            seen.set()
            again_in(SIGTERM_GRACE_S)
            raise Terminated()
        if ended.is_set():  # the script ended meanwhile: as the first signal did
            raise Terminated()
        if _in_gpuwhy_s_code(frame):
            again_in(SIGTERM_RETRY_S)
            return
        try:
            if before_death is not None:
                before_death()
        finally:
            die_of(signal.SIGTERM)

    def as_before_in_child() -> None:
        """A forked child dies of SIGTERM as Python's would (gpuwhy.forked)."""
        if signal.getsignal(signal.SIGTERM) is on_sigterm:
            signal.signal(signal.SIGTERM, _disposition(previous))
        _put_back_as_before(on_sigterm, _disposition(previous))

    try:
        previous = signal.signal(signal.SIGTERM, on_sigterm)
    except (ValueError, OSError):
        yield seen
        return
    forget_in_child = forked.undo_in_child(as_before_in_child)
    try:
        yield seen
    finally:
        ended.set()
        forget_in_child()
        if signal.getsignal(signal.SIGTERM) is on_sigterm:
            signal.signal(signal.SIGTERM, _disposition(previous))


def _in_gpuwhy_s_code(frame: types.FrameType | None) -> bool:
    """Whether the main thread, interrupted in ``frame``, runs gpuwhy's own code: the
    innermost frame that is not the standard library's (a hook of gpuwhy's that holds a
    lock while it calls ``statistics`` is in gpuwhy's code) is gpuwhy's. The script's
    code, TensorFlow's or Keras' under one of gpuwhy's wrappers, is not: a wrapper holds
    nothing while the function it wraps runs (a Keras fit runs inside one all along)."""
    while frame is not None:
        filename = frame.f_code.co_filename
        standard = filename.startswith((_STDLIB, "<frozen ")) and not any(
            packages in filename for packages in _PACKAGES_DIRS
        )  # a Python's site-packages may lie inside its standard library's folder
        if not standard:
            return filename.startswith(_PACKAGE_DIR)
        frame = frame.f_back
    return False


def _put_back_as_before(ours, before) -> None:
    """In a forked child, ``signal.signal(SIGTERM, ours)`` installs ``before`` instead.

    A script that saved ``signal.getsignal(SIGTERM)`` before it forked holds gpuwhy's
    handler where under ``python`` it holds the default. When the child puts that back
    and signals itself from its own handler (``os.kill(os.getpid(), SIGTERM)``), the
    default kills it at once, but a Python handler waits for the interpreter's next
    check: after the ``time.sleep`` the first signal interrupted, 60 s later in the test.
    Installing what Python had keeps the child as it would be under ``python``."""
    install = signal.signal

    def installing(signalnum, handler):
        return install(signalnum, before if handler is ours else handler)

    installing.__doc__ = install.__doc__
    signal.signal = installing


def _disposition(handler):
    """``handler`` as ``signal.signal`` takes it: None (set outside Python) is the default."""
    return signal.SIG_DFL if handler is None else handler


def _as_before_in_child(ours, before, signum: int) -> None:
    """``ours``, gpuwhy's handler, called in a forked child: as the signal's handler (the
    child put it back), the signal is delivered again to the disposition Python had
    (the default kills); called by the script's own handler, nothing (Python's default
    is not a function: the script would not have called it)."""
    if signal.getsignal(signum) is ours:
        signal.signal(signum, _disposition(before))
        os.kill(os.getpid(), signum)


def die_of(signum: int) -> None:
    """End the process as Python ends it on an unhandled signal: by that signal (a shell
    sees 128+N; make, Slurm and Kubernetes see a signal, not an ordinary failure)."""
    _flush()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


Report = Callable[[str, int, str | None], None]


def run_and_report(
    script: str,
    script_args: Sequence[str],
    code: types.CodeType,
    report: Report,
    stop_after: float | None = None,
) -> ScriptEnding:
    """Run the script as Python would, then ``report(ended, exit_code, error)`` once,
    with the script's modules out of gpuwhy's way (gpuwhy.modes.run.script_modules); also when the
    script ends the process with ``os._exit`` or gpuwhy is interrupted while starting it."""
    return drive(report_steps(script, script_args, code, report, stop_after))


def report_steps(
    script: str,
    script_args: Sequence[str],
    code: types.CodeType,
    report: Report,
    stop_after: float | None = None,
) -> RunSteps[ScriptEnding]:
    """:func:`run_and_report` as steps (:func:`drive`)."""

    modules = ScriptModules(os.path.dirname(os.path.abspath(script)))
    reported: list[bool] = []
    pid = os.getpid()

    def report_isolated(ended: str, exit_code: int, error: str | None) -> None:
        if reported or os.getpid() != pid:  # a forked child ends as under Python: silently
            return
        reported.append(True)
        with modules.for_gpuwhy():
            report(ended, exit_code, error)

    def report_before_hard_exit(status: int) -> None:
        """``os._exit`` skips every finally: report first (many TF scripts end so)."""
        report_isolated("completed" if status == 0 else "exit", status, None)

    def report_before_death() -> None:
        """The script caught SIGTERM's Terminated and went on: report before dying."""
        report_isolated("terminated", SIGTERM_EXIT, "SIGTERM")

    modules.hide_shadowed()
    outcome = None
    try:
        outcome = yield from script_steps(
            script,
            script_args,
            code,
            before_hard_exit=report_before_hard_exit,
            stop_after=stop_after,
            before_death=report_before_death,
        )
    finally:
        report_isolated(*_outcome_fields(outcome))
    return outcome


class ScriptInterrupted(Exception):
    """The script was interrupted (Ctrl-C) and its report is written: the command line
    then ends as Python ends on an uncaught KeyboardInterrupt (gpuwhy.cli.main)."""


def end_like_the_script(outcome: ScriptEnding) -> int:
    """The script's exit status, or the signal that ended it (after the report)."""
    if outcome.ended == "interrupted":
        raise ScriptInterrupted()
    if outcome.ended == "terminated":
        die_of(signal.SIGTERM)
    if outcome.ended == "stopped":
        # the report is written; a thread of the script's that waits for more work
        # would keep the interpreter from exiting: the bound is up, the process ends now
        _flush()
        os._exit(0)
    return outcome.exit_code


def _outcome_fields(outcome: ScriptEnding | None) -> tuple[str, int, str | None]:
    if outcome is None:  # gpuwhy itself was interrupted while starting the script
        return ("interrupted", EXIT_INTERRUPTED, "KeyboardInterrupt")
    return (outcome.ended, outcome.exit_code, outcome.error)


def _guard_hard_exit(before: Callable[[int], None]) -> None:
    real_exit, pid = os._exit, os.getpid()

    def _exit(status):
        if os.getpid() == pid:
            os._exit = real_exit
            try:
                before(status)
            except BaseException:  # noqa: BLE001 - exit as asked whatever happened
                pass
        real_exit(status)

    def real_in_child() -> None:
        if os._exit is _exit:
            os._exit = real_exit

    os._exit = _exit
    forked.undo_in_child(real_in_child)


def _wait_for_threads(before: frozenset[threading.Thread]) -> None:
    """The interpreter waits for non-daemon threads before exiting; so does the run, for
    the ones the script started. Those alive ``before`` it are not the script's: the
    interpreter's own exit joins them, as ever (where the run shares its process, as in a
    test, they may be waiting for that exit)."""

    not_the_script_s = before | {threading.current_thread()}

    def left() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t not in not_the_script_s and not t.daemon]

    if left():
        _run_threading_atexits()
    for thread in left():
        thread.join()


def _run_threading_atexits() -> None:
    """What ``threading._shutdown`` runs before it joins the threads left: the callbacks
    given to ``threading._register_atexit`` (a thread or process pool the script left
    open stops its workers there; joined first, they would wait for ever), latest
    first, each once (the list is emptied, so the interpreter's exit does not run them
    again). One that raises is reported as Python reports it, and the others still run."""
    calls = getattr(threading, "_threading_atexits", None)
    if not isinstance(calls, list):
        return
    pending = list(reversed(calls))
    calls.clear()
    for call in pending:
        try:
            call()
        except Exception as error:  # noqa: BLE001 - Python's exit reports it, then goes on
            sys.unraisablehook(
                types.SimpleNamespace(
                    exc_type=type(error),
                    exc_value=error,
                    exc_traceback=error.__traceback__,
                    err_msg="Exception ignored on threading shutdown",
                    object=None,
                )
            )


def _exit_outcome(e: SystemExit) -> ScriptEnding:
    code = e.code
    if code is None:
        return ScriptEnding("completed", 0)
    if isinstance(code, int):
        return ScriptEnding("completed" if code == 0 else "exit", code)
    print(code, file=sys.stderr)  # sys.exit("message"): Python prints it, exits 1
    return ScriptEnding("exit", 1, str(code))


def _print_exception(e: BaseException) -> None:
    seen: set[int] = set()
    chain: list[BaseException | None] = [e]
    while chain:  # Python prints causes and contexts too
        link = chain.pop()
        if link is None or id(link) in seen:
            continue
        seen.add(id(link))
        link.with_traceback(_without_gpuwhy(link.__traceback__, isinstance(link, ImportError)))
        chain += [link.__cause__, link.__context__]
    tb = e.__traceback__  # the default hook prints e.__traceback__, not its argument
    _flush()
    # as the interpreter leaves them for atexit handlers and post-mortem debuggers
    sys.last_type, sys.last_value, sys.last_traceback = type(e), e, tb
    if sys.version_info >= (3, 12):
        sys.last_exc = e
    try:
        sys.excepthook(type(e), e, tb)
    except Exception as broken:  # noqa: BLE001 - a broken user excepthook: said as Python says it
        print("Error in sys.excepthook:", file=sys.stderr, flush=True)
        broken.__suppress_context__ = True  # the hook's own failure, from the hook down
        hook_tb = broken.__traceback__.tb_next if broken.__traceback__ else None
        broken.with_traceback(hook_tb)
        sys.__excepthook__(type(broken), broken, hook_tb)
        print("\nOriginal exception was:", file=sys.stderr, flush=True)
        sys.__excepthook__(type(e), e, tb)


# gpuwhy/, three levels above this file (gpuwhy/modes/run/script.py): every frame of
# gpuwhy's, not only the runner's, is out of the script's traceback.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep
_STDLIB = sysconfig.get_paths()["stdlib"] + os.sep
_PACKAGES_DIRS = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")


def _without_gpuwhy(tb, always_trim_importlib: bool = False):
    """The traceback chain less gpuwhy's frames (the runner below the script, the hooks
    between the script and TensorFlow): what ``python script.py`` would have shown.

    Python hides the import machinery's frames from tracebacks (import.c,
    ``remove_importlib_frames``), but only chunks of them that end in
    ``_call_with_frames_removed``; gpuwhy's post-import hook sits inside such a chunk and
    breaks it, so the same rule is applied again once gpuwhy's frames are out.
    """
    frames = []
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    kept = _trim_importlib(frames, always_trim_importlib)
    for first, second in zip(kept, kept[1:]):
        first.tb_next = second
    if kept:
        kept[-1].tb_next = None
    return kept[0] if kept else None


_IMPORTLIB_FILES = ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>")


def _trim_importlib(frames: list, always: bool) -> list:
    """gpuwhy's frames out, then import.c's rule: in a run of importlib frames, drop
    everything up to a ``_call_with_frames_removed`` frame (every importlib frame for an
    ImportError). A gpuwhy frame inside such a run is gpuwhy's loader hook, standing where
    the import machinery would call the module: it ends the run the same way (import.c
    already trimmed what followed it)."""
    out: list = []
    chunk_start: int | None = None
    for tb in frames:
        code = tb.tb_frame.f_code
        if _is_gpuwhy(code.co_filename):
            if chunk_start is not None:
                del out[chunk_start:]
            continue
        if code.co_filename not in _IMPORTLIB_FILES:
            chunk_start = None
            out.append(tb)
            continue
        if chunk_start is None:
            chunk_start = len(out)
        if always or code.co_name == "_call_with_frames_removed":
            del out[chunk_start:]
            continue
        out.append(tb)
    return out


def _is_gpuwhy(filename: str) -> bool:
    return filename.startswith(_PACKAGE_DIR)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


_NOISE = (
    "[[",
    "Detected at",
    "File ",
    "Stack trace",
    "node ",
    "•",
    "Arguments received",
    "Call arguments received",
    "Exception encountered when calling",
    "Traceback",
)
_NUMBERS = re.compile(r"[-+\d.,\se\[\]()]+")
_TALLIES = re.compile(r"^\d+ (successful operations|derived errors ignored|root error\(s\) found)")


def _is_data(line: str) -> bool:
    """A tensor or array printed into the message, not words."""
    return (
        line.startswith("[")
        or ("dtype=" in line and "shape=" in line)
        or _NUMBERS.fullmatch(line) is not None
    )


_FUNCTION_NODE = re.compile(r"^\{\{function_node [^}]*\}\}\s*")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # Keras colours its messages on a terminal


def raised_at(e: BaseException) -> str | None:
    """The program's own line nearest where ``e`` was raised: the innermost frame of its
    traceback in the user's files (a custom layer's ``call`` a precision change breaks,
    not Keras' frame that raised). None where none is the user's."""
    found = None
    tb = e.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not is_library_file(filename):
            found = relative(filename, tb.tb_lineno)
        tb = tb.tb_next
    return found


def exception_line(e: BaseException) -> str:
    """``ValueError: boom``: the line of the message that says what went wrong, for the
    report. Keras wraps the cause between "Exception encountered when calling ..." and
    "Arguments received by ...: • x=..."; TF's graph errors end with tallies ("0 derived
    errors ignored") after the first root error "(0) INVALID_ARGUMENT: ..."; tensors
    printed into a message are data, not the cause. Where the traceback passes through
    the program's own files, the line nearest the raise follows (:func:`raised_at`)."""
    lines = [
        ln.strip()
        for ln in _ANSI.sub("", str(e)).splitlines()
        if ln.strip()
        and not ln.strip().startswith(_NOISE)
        and not _TALLIES.match(ln.strip())
        and not _is_data(ln.strip())
    ]
    # TF names the function an op ran in first: "{{function_node __wrapped__...}} Input
    # to reshape is ...": the cause follows it
    lines = [_FUNCTION_NODE.sub("", ln).strip() or ln for ln in lines]
    message = lines[0] if lines else ""
    root = next((ln for ln in lines if ln.startswith("(0)")), None)
    if root is not None:
        message = root[3:].strip()
    elif message.endswith(":") and len(lines) > 1:  # TF: "in user code:", "Graph execution error:"
        message = lines[-1]
    if not re.match(r"[A-Za-z_][\w.]*(Error|Exception|Exit|Warning):", message):
        message = f"{type(e).__name__}: {message}" if message else type(e).__name__
    # (else TF's last line of "in user code:" names its own exception)
    where = raised_at(e)
    return message[:300] + (f"; raised at {where}" if where else "")
