"""Run a user's script as ``python script.py args...`` would, inside a watching Session.

What must stay the same as plain Python (pyinstrument's and cProfile's runners do the
same): ``sys.argv``, ``sys.path[0]`` (the script's directory), ``__main__`` (a fresh
module registered as ``sys.modules['__main__']``, so pickling for multiprocessing
``spawn`` finds the script's classes), the working directory, stdin/stdout/stderr (never
captured), the exit status (``sys.exit(n)`` gives n, an uncaught exception 1, Ctrl-C
130) and the traceback, printed by ``sys.excepthook`` without gpuwhy's frames. Like
the interpreter, the run ends when the main thread is done *and* the non-daemon
threads it started have finished.
"""

from __future__ import annotations

import builtins
import importlib.machinery
import os
import sys
import threading
import types
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

EXIT_INTERRUPTED = 130


class ScriptError(Exception):
    """The script cannot be run at all (missing, not Python): one line, exit 2."""


@dataclass
class Outcome:
    ended: str                # completed | exception | interrupted | exit
    exit_code: int
    error: Optional[str] = None


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


def run_script(path: str, args: Sequence[str], code: Optional[types.CodeType] = None,
               before_hard_exit: Optional[Callable[[int], None]] = None) -> Outcome:
    """Execute the script in this process; returns how it ended. Never raises for the
    script's own exceptions: they are printed as Python prints them.

    ``before_hard_exit(status)`` runs when the script ends the process with ``os._exit``
    (from this process only: forked workers exit as they always do).
    """
    code = code or load_script(path)
    if before_hard_exit is not None:
        _guard_hard_exit(before_hard_exit)
    sys.argv[:] = [path, *args]
    sys.path[0] = os.path.dirname(os.path.abspath(path))
    main = types.ModuleType("__main__")
    absolute = os.path.abspath(path)
    main.__dict__.update(__file__=absolute, __builtins__=builtins, __spec__=None,
                         __package__=None, __cached__=None,
                         __loader__=importlib.machinery.SourceFileLoader("__main__", absolute))
    sys.modules["__main__"] = main
    try:
        exec(code, main.__dict__)
        _wait_for_threads()
    except SystemExit as e:
        outcome = _exit_outcome(e)
        _wait_for_threads()              # the interpreter joins them on sys.exit too
        return outcome
    except KeyboardInterrupt as e:
        _print_exception(e)
        return Outcome("interrupted", EXIT_INTERRUPTED, "KeyboardInterrupt")
    except BaseException as e:  # noqa: BLE001 - the script's own failure, reported as Python does
        _print_exception(e)
        _wait_for_threads()              # ... and after printing an uncaught exception
        return Outcome("exception", 1, exception_line(e))
    finally:
        _flush()
    return Outcome("completed", 0)


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

    os._exit = _exit


def _wait_for_threads() -> None:
    """The interpreter waits for non-daemon threads before exiting; so does the run."""
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()


def _exit_outcome(e: SystemExit) -> Outcome:
    code = e.code
    if code is None:
        return Outcome("completed", 0)
    if isinstance(code, int):
        return Outcome("completed" if code == 0 else "exit", code)
    print(code, file=sys.stderr)      # sys.exit("message"): Python prints it, exits 1
    return Outcome("exit", 1, str(code))


def _print_exception(e: BaseException) -> None:
    tb = _without_gpuwhy(e.__traceback__)
    e.with_traceback(tb)     # the default hook prints e.__traceback__, not its argument
    _flush()
    try:
        sys.excepthook(type(e), e, tb)
    except Exception:  # noqa: BLE001 - a broken user excepthook: Python falls back too
        sys.__excepthook__(type(e), e, tb)


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _without_gpuwhy(tb):
    """The traceback chain less gpuwhy's frames (the runner below the script, the hooks
    between the script and TensorFlow): what ``python script.py`` would have shown."""
    kept = []
    while tb is not None:
        if not _is_gpuwhy(tb.tb_frame.f_code.co_filename):
            kept.append(tb)
        tb = tb.tb_next
    for first, second in zip(kept, kept[1:]):
        first.tb_next = second
    if kept:
        kept[-1].tb_next = None
    return kept[0] if kept else None


def _is_gpuwhy(filename: str) -> bool:
    return filename.startswith(_PACKAGE_DIR)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


def exception_line(e: BaseException) -> str:
    """``ValueError: boom``: the last line of a traceback, for the report."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()
             and not ln.strip().startswith(("[[", "Detected at", "File ", "Stack trace", "node "))]
    message = lines[0] if lines else ""
    if message.endswith(":") and len(lines) > 1:   # TF: "in user code:", "Graph execution error:"
        message = lines[-1]
    return (f"{type(e).__name__}: {message}" if message else type(e).__name__)[:300]
