"""Seeing eager ops as they run: TF's op callbacks, switched on and off from any thread.

``tensorflow.python.framework.op_callbacks.add_op_callback`` (private) makes TF call a
Python function after every op it executes eagerly, after every ``tf.function`` it
calls eagerly, and for every op it *creates* while building a graph. Read in TF 2.21:

* ``op_callbacks.add_op_callback`` appends to ``context().op_callbacks``, a plain
  Python list held in ``EagerContextThreadLocalData`` (python/eager/context.py,
  ``Context.add_op_callback``): **one list per thread**, so a callback added on one
  thread never sees ops run by another. It also swaps ``execute.execute`` for
  ``execute.execute_with_callbacks`` (the slow path: ops whose inputs are not all
  EagerTensors, and ``tf.function`` calls through ``Context.call_function``).
* Generated op wrappers take the fast path, ``TFE_Py_FastPathExecute``
  (python/eager/pywrap_tfe_src.cc), which reads the same list from the context on
  every op and, when it is not empty, calls each entry as
  ``cb(op_type, inputs, attrs, outputs, name)`` after the kernel ran; ``graph``
  is then left at its default, None.
* The slow path (``execute.execute_with_callbacks``) passes the op type as TF's
  generated wrappers name it there, in bytes (``b"Square"``): ``tf.square([1.0, 2.0])``
  or an op on a Keras variable takes it. Readers decode it.
* Graph building (``ops.Graph._create_op_internal`` via ``op_def_library``) calls
  ``invoke_op_callbacks(..., graph=g)``: those calls have ``graph`` set and are
  not eager ops.

Because the list is one Python object per thread and TF reads it afresh on every op,
appending to it or removing from it *from another thread* switches the callback for
the thread that owns it; that is how :class:`CallbackSwitch` runs counting windows
without waiting for the program's thread. Each callback costs the program some
dispatch time (TF builds the argument tuples, then calls Python), so the callback
:func:`recording_callback` builds does as little as it can: two clock reads, a frame
walk answered from a cache, the largest output's element count
(``EagerTensor._num_elements``, a C method that reads the handle's shape: in TF's
default synchronous eager mode the shape is known when the op returns, no GPU wait),
the first output's device and dtype (``_datatype_enum``, TF's enum: named once per
site by :func:`dtype_name`), appended to a list as one tuple. Aggregation waits until
the facts are asked for.

A ``tf.function`` call runs as an op whose type is the function's name
(``__inference_train_step_123``, ``__forward_...``, ``__backward_...`` for the tape's
gradient functions); :func:`is_function_call` tells those apart from real ops by
TF's op registry, which holds every real op type and no function.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import gpuwhy.forked as forked
from gpuwhy.tfapi.graph_ops import is_library_file, relative

__all__ = [
    "CallbackSwitch",
    "OpRecord",
    "dtype_name",
    "UserFrames",
    "device_name",
    "is_function_call",
    "recording_callback",
    "thread_callbacks",
]

# (t_in, t_out, op_type, code, lasti, elements, device): one eager op, as the callback
# appended it. t_in/t_out are perf_counter readings on entering/leaving the callback,
# so the gap t_in[i] - t_out[i-1] leaves out the callback's own Python time.
OpRecord = tuple[float, float, str, Any, int, int | None, str | None, int | None]


class UserFrames:
    """The first frame outside library code, found in a few dict lookups per op.

    Whether a code object is the user's is decided once per code object (the file
    name test is string work) and kept under ``id(code)``: hashing a code object
    hashes its bytecode and constants (0.4 µs each, several frames per op), and the
    code objects are kept alive here so that an id is never reused. The frame's
    line is resolved later: the walk keeps ``f_lasti`` (the byte offset of the call
    being made, an attribute read), and :meth:`location` maps it to its line through
    ``code.co_lines()`` once per (code, offset), as ``f_lineno`` would have (reading
    ``f_lineno`` does that mapping on every read).
    """

    def __init__(self) -> None:
        self.library: dict[int, bool] = {}
        self._codes: list[Any] = []  # keeps the ids in ``library`` unique
        self._locations: dict[tuple[int, int], str | None] = {}

    def first(self, frame: Any) -> tuple[Any, int]:
        """(code, f_lasti) of the innermost user frame at or above ``frame``; (None, 0) if none."""
        library = self.library
        while frame is not None:
            code = frame.f_code
            lib = library.get(id(code))
            if lib is None:
                lib = library[id(code)] = is_library_file(code.co_filename)
                self._codes.append(code)
            if not lib:
                return code, frame.f_lasti
            frame = frame.f_back
        return None, 0

    def here(self, skip: int = 1) -> str | None:
        """``file:line`` of the innermost user frame calling this (tests, one-off use)."""
        code, lasti = self.first(sys._getframe(skip))
        return self.location(code, lasti)

    def location(self, code: Any, lasti: int) -> str | None:
        """``file:line`` for a (code, f_lasti) pair that :meth:`first` returned."""
        if code is None:
            return None
        key = (id(code), lasti)
        if key not in self._locations:
            self._locations[key] = relative(code.co_filename, _line_of(code, lasti))
        return self._locations[key]


def _line_of(code: Any, lasti: int) -> int:
    """The source line of the instruction at byte offset ``lasti``."""
    for start, end, line in code.co_lines():
        if start <= lasti < end and line is not None:
            return line
    return code.co_firstlineno


_ours = threading.local()


@contextlib.contextmanager
def unseen():
    """gpuwhy's own eager ops inside this block (reading a tf.data iterator's model, a
    dataset's cardinality) run on the program's thread but are not the program's: the
    recording callback skips them."""
    previous = getattr(_ours, "on", False)
    _ours.on = True
    try:
        yield
    finally:
        _ours.on = previous


def recording_callback(record: Callable[[OpRecord], None], frames: UserFrames) -> Callable:
    """An op callback that records each eager op with ``record`` (e.g. ``list.append``).

    Graph building (``graph`` set) and gpuwhy's own ops (:func:`unseen`) return at once. The callback always returns None,
    which tells TF to keep the op's outputs as they are. It must never raise into the
    program: an output it cannot read is recorded with unknown size and device.
    """
    clock = time.perf_counter
    getframe = sys._getframe
    first = frames.first

    ours = _ours

    def on_op(op_type, inputs, attrs, outputs, op_name=None, graph=None):
        if graph is not None or getattr(ours, "on", False):
            return None
        t_in = clock()
        code, lasti = first(getframe(1))
        elements = device = dtype = None
        try:
            if outputs:
                head = outputs[0]
                elements = head._num_elements()
                device = head.device
                dtype = head._datatype_enum()
                if len(outputs) > 1:
                    for other in outputs[1:]:
                        n = other._num_elements()
                        if n > elements:
                            elements = n
            elif inputs:
                device = inputs[0].device
        except Exception:  # noqa: BLE001 - a non-tensor output, an unknown shape: size stays unknown
            pass
        record((t_in, clock(), op_type, code, lasti, elements, device, dtype))
        return None

    return on_op


def thread_callbacks() -> list:
    """The calling thread's op-callback list: the live object TF reads on every op."""
    from tensorflow.python.eager import context

    return context.context().op_callbacks


class CallbackSwitch:
    """Turns one callback on and off for the thread whose callback list it was given.

    ``on``/``off`` may be called from any thread (see the module docstring). They do
    what ``add_op_callback``/``remove_op_callback`` do, on that list: ``execute.execute``
    is swapped for ``execute_with_callbacks`` while the list is not empty and swapped
    back when it becomes empty (TF's own test, made by the owning thread). A child the
    program forks starts with it off (gpuwhy.forked).
    """

    def __init__(self, callbacks: list, callback: Callable) -> None:
        from tensorflow.python.eager import execute

        self._execute = execute
        self.callbacks = callbacks
        self.callback = callback
        self._forget_in_child: Callable[[], None] = lambda: None

    @property
    def is_on(self) -> bool:
        return any(cb is self.callback for cb in self.callbacks)

    def on(self) -> None:
        if not self.is_on:
            self._forget_in_child = forked.undo_in_child(self.off)  # first: see Patch
            self._execute.execute = self._execute.execute_with_callbacks
            self.callbacks.append(self.callback)

    def off(self) -> None:
        try:
            self.callbacks.remove(self.callback)
        except ValueError:  # the program cleared the callbacks itself
            pass
        if not self.callbacks and self._execute.execute is self._execute.execute_with_callbacks:
            self._execute.execute = self._execute.quick_execute
        self._forget_in_child()


_REAL_OPS: dict[str, bool] = {}


def is_function_call(op_type: str | bytes) -> bool:
    """True for a ``tf.function`` (or gradient function) call: no such op is registered."""
    if isinstance(op_type, bytes):
        op_type = op_type.decode("utf-8", "replace")
    known = _REAL_OPS.get(op_type)
    if known is None:
        from tensorflow.python.framework import op_def_registry

        known = _REAL_OPS[op_type] = op_def_registry.get(op_type) is not None
    return not known


def dtype_name(enum: int | None) -> str | None:
    """``float64`` for TF's DT_DOUBLE (an output's ``_datatype_enum()``); None unknown."""
    if enum is None:
        return None
    try:
        from tensorflow.python.framework import dtypes  # TF is loaded: an op ran

        return dtypes.as_dtype(enum).name
    except (TypeError, ValueError, ImportError):
        return None


def device_name(device: str | None) -> str | None:
    """``/job:localhost/replica:0/task:0/device:GPU:0`` -> ``GPU:0``."""
    if not device:
        return None
    return device.rsplit("device:", 1)[-1]
