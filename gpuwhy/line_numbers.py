"""Line numbers of gpuwhy's hook frames made cheap to read, on CPython 3.11.

TensorFlow captures the Python stack at each eager op and each ``tf.function`` call
(``StackTrace::Capture``) and computes every frame's line as it does: CPython 3.11's
``PyCode_Addr2Line`` scans the code's location table from its start up to where the
frame waits, unless the code has a line array (``_co_linearray``), one entry per
instruction, which CPython builds the first time a trace or profile function sees a
frame of that code (``call_trace`` calls ``_PyCode_InitLineArray``) and keeps for the
code's life. A hook's frame waits in TF's call after the hook's own lines: counted with
callgrind, the scans of the two hook frames of a timed step were 8,000 of the 24,000
instructions a timed step cost the program's thread more than under ``python``
(benchmarks/bench_instructions.py, docs/speed.md).

:func:`prepare` makes that array for a hook's code without running its body: a frame of
the code is started under a profile function that stops it at its ``call`` event,
after CPython built the array and before the first instruction. Python 3.12 and later
compute lines another way (no such array): nothing is done there.
"""

from __future__ import annotations

import sys
import threading
import types
from typing import Any

_ACTIVE = sys.version_info[:2] == (3, 11)
_prepared: set[types.CodeType] = set()  # hooks' code objects: a few, alive for the run
_lock = threading.Lock()


class _Stop(Exception):
    """Raised by the profile function at the prepared frame's ``call`` event."""


def prepare(function: Any) -> bool:
    """Build the line array of ``function``'s code (a plain Python function), once per
    code object; False where nothing was done (another Python, not a function, done
    already). Its body never runs: no argument it is given is read."""
    code = getattr(function, "__code__", None)
    if not _ACTIVE or not isinstance(code, types.CodeType):
        return False
    if sys.getprofile() is not None or sys.gettrace() is not None:
        # a profiler or debugger of the program's: left alone (cProfile's is no Python
        # callable that sys.setprofile could put back)
        return False
    if code.co_flags & (0x20 | 0x80 | 0x200):  # generator, coroutine, async generator
        return False
    with _lock:
        if code in _prepared:
            return False
        _prepared.add(code)
    cells = tuple(types.CellType(None) for _ in code.co_freevars)
    frame_of = types.FunctionType(code, {}, code.co_name, None, cells or None)

    def stop(frame: Any, event: str, _arg: Any) -> None:
        if event == "call" and frame.f_code is code:
            raise _Stop

    sys.setprofile(stop)
    try:
        first = code.co_argcount
        keywords = code.co_varnames[first : first + code.co_kwonlyargcount]
        frame_of(*([None] * first), **dict.fromkeys(keywords))
    except _Stop:
        pass
    except Exception:  # noqa: BLE001 - a speed-up only: the hook works without it
        return False
    finally:
        sys.setprofile(None)
    return True
