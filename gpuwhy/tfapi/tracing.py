"""Watching tf.function: every outermost call from eager code, and every new trace.

TensorFlow has no public callback for either. What this module patches, read in
TF 2.21's ``tensorflow/python/eager/polymorphic_function``:

* ``polymorphic_function.Function.__call__``: every call of a ``tf.function``
  (Keras 3's ``multi_step_on_iterator``/``one_step_on_data`` included) goes through
  it, from eager code and from inside a trace alike. The class attribute is replaced
  by a wrapper that times the call when it is the outermost one on its thread and
  TF is executing eagerly; the original (decorated with ``filter_traceback``) does
  the work, so TF's own behaviour and error messages are unchanged.
* ``tracing_compilation._create_concrete_function``: called by
  ``_maybe_define_function`` only on a cache miss, i.e. exactly once per new
  ``ConcreteFunction`` (what ``Function.experimental_get_tracing_count`` counts). It
  is looked up as a module global at each call, so replacing the module attribute
  is enough, and a cache hit never reaches the wrapper: tracing costs nothing per
  call. Its ``function_type`` argument is the type TF traced for (after
  ``reduce_retracing`` generalised it), so argument texts match what TF keyed its
  cache on. Traces without a ``function_cache`` (TF's own ``initialize_variables``
  and ``fn_with_cond`` helpers) are not traces of a user's function and are skipped.
  The ``Function`` that owns a trace is found on the Python stack (its ``_call``,
  ``_initialize`` or ``_get_concrete_function_garbage_collected`` frame), which
  covers ``get_concrete_function`` as well as calls.

``transform.CONCRETE_FUNCTION_CALLBACKS`` would announce new concrete functions too,
but neither says which ``Function`` traced nor how long the trace took.

Both hooks are class/module level :class:`~gpuwhy.tfapi.patching.Patch` es, so they
see every thread; :meth:`FunctionHooks.uninstall` puts the original objects back
exactly. The listeners are called on the thread that called or traced, must be quick
and thread-safe, and are never allowed to raise into the program.
"""

from __future__ import annotations

import inspect
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuwhy.tfapi.callables import code_of
from gpuwhy.tfapi.frames import user_location
from gpuwhy.tfapi.graph_ops import imported_library_dirs, relative
from gpuwhy.tfapi.patching import Patch, mark_wrapped

__all__ = [
    "FunctionHooks",
    "FunctionInfo",
    "Trace",
    "argument_texts",
    "calls_key",
    "describe",
    "eager_calls",
    "spec_text",
]

MAX_TEXT = 160  # characters of one argument's description
_MAX_STACK = 40  # frames walked up to find the owner Function of a trace
_MAX_CALLER_STACK = 400  # ... and the user's line (a Keras step is traced deep inside fit)

# A tf.function is "library" code when its Python function lives in gpuwhy (its audit
# helpers) or in a library package (Keras' train/test/predict steps, tf.data's
# wrappers), found by the folders they were imported from rather than by a path
# segment: a user's project may well sit in a folder named "keras".
_GPUWHY_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


@dataclass(frozen=True)
class FunctionInfo:
    """What identifies a tf.function for people: its name and where it is defined."""

    name: str
    filename: str | None
    line: int | None
    library: bool  # defined inside TensorFlow, Keras or gpuwhy
    tf_data: bool  # a tf.data wrapper (map/filter/... functions)
    reduce_retracing: bool
    jit_compile: bool | None

    @property
    def location(self) -> str | None:
        return relative(self.filename, self.line) if self.filename and self.line else None


@dataclass(frozen=True)
class Trace:
    """One new ConcreteFunction of a tf.function."""

    function: Any  # the tf.function (polymorphic_function.Function)
    concrete: Any  # the ConcreteFunction it made
    args: tuple[tuple[str, str], ...]  # (parameter, "float32[32,784]" | "3 (int)" ...)
    started: float  # time.perf_counter()
    seconds: float
    caller: str | None  # user file:line whose call caused it
    nested: bool  # traced while another trace was running on this thread
    # The tf.function whose trace this one ran inside (its graph calls this one, as
    # Keras' ``multi_step_on_iterator`` calls ``one_step_on_data``); None when outermost
    # or when the enclosing trace's owner was not found.
    inside: Any = None
    # traced by a call of the function (not by ``get_concrete_function``): the call
    # goes on once the trace is made
    in_call: bool = True
    # the call that traced runs through this session's call hook (it is timed): False
    # where it began with the hook paused, though the hook may be back by the trace's end
    # (the steps' drain puts it back from another thread, in the trace's tens of ms)
    hooked: bool = True


def _definition(function: Any) -> tuple[str | None, int | None]:
    code = code_of(function)
    if code is None:
        return None, None
    return code.co_filename, code.co_firstlineno


def describe(function: Any) -> FunctionInfo:
    """Name, definition site and options of a tf.function (``Function``)."""
    python_function = getattr(function, "python_function", None)
    filename, line = _definition(python_function)
    name = (
        getattr(function, "name", None) or getattr(python_function, "__name__", None) or "function"
    )
    jit = getattr(function, "_jit_compile", None)
    where = os.path.abspath(filename) if filename and not filename.startswith("<") else ""
    dirs = (_GPUWHY_DIR, *imported_library_dirs())
    package = next((d for d in dirs if where.startswith(d)), None) if where else None
    tf_data = package is not None and os.path.join("tensorflow", "python", "data", "") in where
    return FunctionInfo(
        name=str(name),
        filename=filename,
        line=line,
        library=package is not None,
        tf_data=tf_data,
        reduce_retracing=bool(getattr(function, "_reduce_retracing", False)),
        jit_compile=None if jit is None else bool(jit),
    )


# -- argument texts ------------------------------------------------------------------


def _shape_text(shape: Any) -> str:
    if shape is None or getattr(shape, "rank", None) is None:
        return "[...]"  # unknown rank
    return "[" + ",".join("None" if d is None else str(d) for d in shape.as_list()) + "]"


def _short(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."


def spec_text(constraint: Any, top: bool = True) -> str:
    """A TraceType as people write it: ``float32[32,784]``, ``3 (int)``, ``(a, b)``.

    TraceTypes are TF's cache keys (``tensorflow/core/function/trace_type``): TensorSpec
    and other TypeSpecs for tensors, ``Literal`` for hashable Python values,
    ``Weakref`` for other objects (keyed by identity), ``Tuple``/``List``/``Dict``/
    ``NamedTuple``/``Attrs`` containers of those.
    """
    kind = type(constraint).__name__
    try:
        if kind == "TensorSpec":
            return f"{constraint.dtype.name}{_shape_text(constraint.shape)}"
        if kind == "VariableSpec":
            return f"Variable {constraint.dtype.name}{_shape_text(constraint.shape)}"
        if kind == "Literal":
            value = constraint.value
            if value is None or not top:
                return repr(value)
            return f"{value!r} ({type(value).__name__})"
        if kind in ("Tuple", "List"):
            components = (
                constraint.components if kind == "Tuple" else constraint.components_tuple.components
            )
            parts = [spec_text(c, False) for c in components]
            text = ", ".join(parts)
            return f"({text}{',' if len(parts) == 1 else ''})" if kind == "Tuple" else f"[{text}]"
        if kind == "Dict":
            items = ", ".join(f"{k}: {spec_text(v, False)}" for k, v in constraint.mapping.items())
            return "{" + items + "}"
        if kind in ("NamedTuple", "Attrs"):
            named = constraint.named_attributes if kind == "Attrs" else constraint
            parts = [spec_text(c, False) for c in named.attributes.components]
            inner = ", ".join(f"{f}={p}" for f, p in zip(named.attribute_names, parts))
            return f"{named.type_name}({inner})"
        if kind == "Weakref":
            target = constraint._ref()
            return f"<{type(target).__name__} object> (by identity)"
        if kind == "IteratorSpec":
            return f"iterator of {_element_text(constraint)}"
        if kind == "DatasetSpec":
            return f"dataset of {_element_text(constraint)}"
        if kind == "RaggedTensorSpec":
            return f"ragged {constraint.dtype.name}{_shape_text(constraint.shape)}"
        if kind == "SparseTensorSpec":
            return f"sparse {constraint.dtype.name}{_shape_text(constraint.shape)}"
    except Exception:  # noqa: BLE001 - an unexpected TraceType: fall back to TF's own text
        pass
    return repr(constraint)


def _element_text(constraint: Any) -> str:
    from tensorflow.python.util import nest

    spec = getattr(constraint, "_element_spec", None)  # IteratorSpec keeps no public one
    if spec is None:
        spec = constraint.element_spec
    parts = [spec_text(s, False) for s in nest.flatten(spec)]
    return parts[0] if len(parts) == 1 else "(" + ", ".join(parts) + ")"


def argument_texts(function_type: Any) -> tuple[tuple[str, str], ...]:
    """(name, text) per parameter of a FunctionType; TF names ``*rest``'s items ``rest_0``..."""
    out = []
    for name, parameter in function_type.parameters.items():
        out.append((name, _short(spec_text(parameter.type_constraint))))
    return tuple(out)


# -- TF's own count of a function's calls ---------------------------------------------


def calls_key(function: Any) -> Any:
    """What TF counts ``function``'s calls under (``Function._key_for_call_stats``: the
    code of its Python function, shared by the tf.functions made of one ``def``, e.g.
    one method's on two objects, or Keras' step function of two models)."""
    return function._key_for_call_stats


_EAGER_FUNCTION_RUN = "tensorflow.python.eager.polymorphic_function.eager_function_run"


def eager_calls(key: Any) -> int:
    """The calls from eager code that TF counted so far of the tf.functions counted
    under ``key`` (their :func:`calls_key`): its retracing detector
    (``polymorphic_function._frequent_tracing_detector_manager``) adds one at the end of
    each such call. Kept under the code of the ``def``, not the function: readable once
    the function is gone. The count starts again lower at a call that traced (the
    detector keeps only the calls since recent traces), and calls made under
    ``run_functions_eagerly`` are not counted at all."""
    from tensorflow.python.eager.polymorphic_function import polymorphic_function

    manager = polymorphic_function._frequent_tracing_detector_manager
    with manager._lock:
        detector = manager._detectors.get(key)
        return int(detector._call_count) if detector is not None else 0


def functions_run_eagerly() -> bool:
    """``tf.config.run_functions_eagerly(True)``: calls run the Python function, and TF
    counts none of them. Asked from a background thread: the module is looked up, never
    imported (an import there while the program's thread imports TensorFlow is a
    deadlock that Python raises into the program); not loaded yet, the answer is True
    (nothing known to count with)."""
    module = sys.modules.get(_EAGER_FUNCTION_RUN)
    return module is None or bool(getattr(module, "RUN_FUNCTIONS_EAGERLY", True))


# -- the hooks -----------------------------------------------------------------------


class FunctionHooks:
    """Records tf.function calls and reports traces while installed.

    Calls: each outermost call made from eager code (not a ``Function`` called while
    another call or a trace runs on the same thread, nor one called in graph mode)
    appends its ``time.perf_counter()`` start and end to ``call_times[id(function)]``,
    an ``array('d')``. When a ``Function`` has no entry yet,
    ``on_new_function(function)`` is called first and must return the array to use
    (and normally store it in ``call_times``; the owner also removes the entry when the
    ``Function`` dies, since ids are reused). A dict lookup and an ``extend`` instead
    of a listener call keep a call's cost under a microsecond.

    Traces: ``on_trace(trace)`` gets each new ConcreteFunction of a ``Function``
    (tf.data's wrappers included; :func:`describe` tells them apart).

    Two installed hooks (two sessions) chain, each recording for its own owner.
    """

    def __init__(
        self,
        call_times: dict,
        on_new_function: Callable[[Any], Any],
        on_trace: Callable[[Trace], None],
        pauses: Any = None,
    ) -> None:
        self._call_times = call_times
        self._on_new_function = on_new_function
        self._on_trace = on_trace
        # a HookPauses (collect/inprocess/hook_pauses.py) that may take the call hook out
        # for a while: the owner tracks each function and puts its paused calls in
        self._pauses = pauses
        self._patches: list[Patch] = []
        # Per thread: ``owners``, the Functions of the traces in progress, innermost last
        # (a trace inside another is nested, and names the one it ran inside);
        # ``calling``, an outermost call runs (only under run_functions_eagerly).
        self._thread_state = threading.local()

    @property
    def installed(self) -> bool:
        return bool(self._patches)

    def install(self) -> None:
        from tensorflow.python.eager import context
        from tensorflow.python.eager.polymorphic_function import (
            eager_function_run,
            polymorphic_function,
            tracing_compilation,
        )

        if self._patches:
            return
        cls = polymorphic_function.Function
        owner_codes = frozenset(
            inspect.unwrap(cls.__dict__[name]).__code__
            for name in ("_call", "_initialize", "_get_concrete_function_garbage_collected")
        )
        asked = inspect.unwrap(cls.__dict__["_get_concrete_function_garbage_collected"])
        call = Patch(
            cls,
            "__call__",
            lambda original: _call_wrapper(
                original,
                self._call_times,
                self._on_new_function,
                context,
                eager_function_run,
                self._thread_state,
                self._pauses,
            ),
        )
        hook = _CallHook(call.replacement.__code__, self._call_times)
        try:
            create = Patch(
                tracing_compilation,
                "_create_concrete_function",
                lambda original: _create_wrapper(
                    original,
                    self._on_trace,
                    owner_codes,
                    cls,
                    self._thread_state,
                    asked.__code__,
                    hook,
                ),
            )
        except Exception:
            call.undo()
            raise
        self._patches = [call, create]
        if self._pauses is not None:
            self._pauses.add([call])  # the call hook pauses; the trace hook never does

    def uninstall(self) -> None:
        """Puts TF's own ``Function.__call__`` and ``_create_concrete_function`` back
        (unless another session patched over them since: then its patch stays, and
        calls this one's wrappers, which report to listeners that ignore them)."""
        patches, self._patches = self._patches, []
        for patch in reversed(patches):
            patch.undo()


def _call_wrapper(
    original: Callable,
    call_times: dict,
    on_new_function: Callable,
    context: Any,
    run_mode: Any,
    state: Any,
    pauses: Any = None,
) -> Callable:
    """The hot path: TF's ``executing_eagerly()`` is False inside a trace (the calls a
    traced function makes are graph ops, not calls), so it alone separates outermost
    calls from nested ones, except under ``tf.config.run_functions_eagerly(True)``
    where a function's body runs eagerly: there a per-thread flag does it.

    ``executing_eagerly()`` is ``context_safe().executing_eagerly()``, which returns
    ``Context._thread_local_data.is_eager`` (tensorflow/python/eager/context.py); the
    attribute is read directly, which halves the cost, and the module global is read
    at each call because ``context._reset_context()`` replaces the Context."""
    perf_counter = time.perf_counter
    executing_eagerly = context.executing_eagerly

    def record(self, start: float, end: float) -> None:
        try:
            times = call_times.get(id(self))
            if times is None:
                times = on_new_function(self)
            times.extend((start, end))  # one C call: a pair is never split by threads
        except Exception:  # noqa: BLE001 - recording never breaks the program
            pass

    def run_eagerly_call(self, args, kwds):
        if getattr(state, "calling", False):
            return original(self, *args, **kwds)
        state.calling = True
        start = perf_counter()
        try:
            return original(self, *args, **kwds)
        finally:
            end = perf_counter()
            state.calling = False
            record(self, start, end)

    def __call__(self, *args, **kwds):
        __tracebackhide__ = True  # IPython leaves gpuwhy's frame out of the user's traceback
        try:
            eager = context._context._thread_local_data.is_eager
        except AttributeError:  # no Context yet
            eager = executing_eagerly()
        if not eager:
            return original(self, *args, **kwds)
        if run_mode.RUN_FUNCTIONS_EAGERLY:
            return run_eagerly_call(self, args, kwds)
        if pauses is not None and pauses.open and id(self) in pauses.open:
            pauses.close(self, id(self))  # its calls paused: counted first
        start = perf_counter()
        try:
            return original(self, *args, **kwds)
        finally:
            end = perf_counter()
            try:  # record() inlined: the common path, one Python call less per step
                times = call_times.get(id(self))
                if times is None:
                    times = on_new_function(self)
                times.extend((start, end))  # one C call: a pair is never split by threads
                if pauses is not None and pauses.wanted and end >= pauses.wanted_from:
                    pauses.pause()
            except Exception:  # noqa: BLE001 - recording never breaks the program
                pass

    mark_wrapped(__call__, original)
    __call__.__doc__ = original.__doc__
    return __call__


@dataclass(frozen=True)
class _CallHook:
    """This session's call hook as a trace finds it on the stack: the code of its
    wrappers (one for every Function) and the table it records into (its own, where
    two sessions chain)."""

    code: Any
    call_times: dict

    def runs(self, frame: Any, function: Any) -> bool:
        """Whether ``function``'s call under ``frame`` (its own frame) went through
        this hook: its wrapper's frame, for this function, is above it. Walked at a
        trace only (tens of milliseconds each), never per call."""
        for _ in range(_MAX_STACK):
            if frame is None:
                return False
            if frame.f_code is self.code:
                local = frame.f_locals
                if local.get("self") is function and local.get("call_times") is self.call_times:
                    return True
            frame = frame.f_back
        return False


def _owner(frame: Any, codes: frozenset, cls: type) -> tuple[Any, Any, Any]:
    """The Function whose trace runs (None: not found), the code of its frame, and the
    frame."""
    for _ in range(_MAX_STACK):
        if frame is None:
            return None, None, None
        if frame.f_code in codes:
            owner = frame.f_locals.get("self")
            return (owner if isinstance(owner, cls) else None), frame.f_code, frame
        frame = frame.f_back
    return None, None, None


def _create_wrapper(
    original: Callable,
    on_trace: Callable,
    codes: frozenset,
    cls: type,
    state: Any,
    asked_code: Any = None,
    hook: _CallHook | None = None,
) -> Callable:
    perf_counter = time.perf_counter

    def _create_concrete_function(function_type, type_context, func_graph, tracing_options):
        owners = getattr(state, "owners", None)
        if owners is None:
            owners = state.owners = []
        outer = len(owners)  # traces in progress on this thread
        owner = code = None
        hooked = True
        if tracing_options.function_cache is not None:
            try:
                owner, code, frame = _owner(sys._getframe(1), codes, cls)
                if owner is not None and hook is not None:
                    hooked = hook.runs(frame, owner)
                del frame
            except Exception:  # noqa: BLE001 - a listener never breaks the program
                owner = None
        # The innermost enclosing trace with a known owner: TF's own helpers (no cache)
        # and traces whose owner was not found push None and are looked through.
        inside = next((o for o in reversed(owners) if o is not None), None)
        owners.append(owner)
        start = perf_counter()
        try:
            concrete = original(function_type, type_context, func_graph, tracing_options)
        finally:
            owners.pop()
        end = perf_counter()
        if tracing_options.function_cache is not None:
            try:
                if owner is not None:
                    on_trace(
                        Trace(
                            function=owner,
                            concrete=concrete,
                            args=argument_texts(function_type),
                            started=start,
                            seconds=end - start,
                            caller=user_location(1, limit=_MAX_CALLER_STACK),
                            nested=outer > 0,
                            inside=inside if inside is not owner else None,
                            in_call=code is not asked_code,
                            hooked=hooked,
                        )
                    )
            except Exception:  # noqa: BLE001 - a listener never breaks the program
                pass
        return concrete

    mark_wrapped(_create_concrete_function, original)
    return _create_concrete_function
