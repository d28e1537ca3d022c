"""The user's line on the Python stack: the first frame outside TF, Keras and gpuwhy.

Used by the run hooks to say *where* something happened (the ``model.fit`` call, the
``for`` loop over a dataset). The library/user decision is cached per code object, so
a lookup costs a short walk up the stack and a few dict hits.
"""

from __future__ import annotations

import gc
import inspect
import sys
from types import FrameType
from typing import Any

from gpuwhy.tfapi.graph_ops import is_library_file, relative

_IS_LIBRARY: dict[object, bool] = {}


def current_frames() -> dict[int, FrameType]:
    """``sys._current_frames()`` with the garbage collector off while it runs.

    Before Python 3.12 it holds the runtime's lock on the thread states while it makes
    the frame objects; a collection one of them sets off runs ``gc.callbacks`` (gpuwhy
    times GC pauses with one) and finalizers there, which can hand the GIL to a thread
    that then waits for that lock holding it (a ``tf.py_function``'s or generator's
    thread deleting its thread state): the program hangs (CPython gh-106883; a
    heap census in a program reading a ``tf.data`` generator did, Python 3.11)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return sys._current_frames()
    finally:
        if enabled:
            gc.enable()


def user_location(skip: int = 2, limit: int = 64) -> str | None:
    """``file:line`` of the nearest user frame above the caller, or None."""
    try:
        frame: FrameType | None = sys._getframe(skip)
    except ValueError:  # a stack shallower than that (a gc callback at a thread's start)
        return None
    for _ in range(limit):
        if frame is None:
            return None
        code = frame.f_code
        library = _IS_LIBRARY.get(code)
        if library is None:
            library = _IS_LIBRARY[code] = is_library_file(code.co_filename)
        if not library:
            return relative(code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return None


def frame_values(frame: FrameType, names: tuple[str, ...]) -> dict[str, Any]:
    """The named local variables of a running frame, read without keeping anything.

    Before Python 3.13, ``frame.f_locals`` of a function's frame is a snapshot dict that
    the frame keeps until it ends, holding every local's value *at the time of the
    read*: read inside Keras' ``fit``, it kept that epoch's tf.data iterator alive to the
    end of training (its autotune thread then made ``fit`` wait up to a minute on its
    way out). The snapshot is emptied after the read: the frame's real variables are
    its fast locals, and every later ``f_locals`` read rebuilds the snapshot from them.
    A module's or class body's frame has no snapshot (``f_locals`` is its namespace) and
    is left as it is; from 3.13 on ``f_locals`` is a live view and keeps nothing."""
    local = frame.f_locals
    values = {name: local[name] for name in names if name in local}
    optimized = bool(frame.f_code.co_flags & inspect.CO_OPTIMIZED)
    if optimized and sys.version_info < (3, 13) and type(local) is dict:
        local.clear()
    return values
