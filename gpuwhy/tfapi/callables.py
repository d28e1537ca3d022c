"""The user's function behind TF's wrappers, and where it is defined.

A ``tf.function`` (``python_function``), ``functools.partial``, a decorator's
``__wrapped__``, a bound method, gpuwhy's own replay of a dataset function: the tracing
hooks and the tf.data readers all need the function the user wrote, and name it the
same way (``parse``, ``train.py:41``).
"""

from __future__ import annotations

import functools
import inspect
from types import CodeType, ModuleType
from typing import Any

from gpuwhy.tfapi.graph_ops import is_library_file, relative

_MAX_LAYERS = 10


def _layers(function: Any) -> list[Any]:
    """``function`` and each wrapper below it, outermost first."""
    layers = [function]
    for _ in range(_MAX_LAYERS):
        inner = (
            getattr(function, "_gpuwhy_replays", None)
            or getattr(function, "python_function", None)  # tf.function
            or (function.func if isinstance(function, functools.partial) else None)
            or getattr(function, "__func__", None)  # a bound method
        )
        if inner is None:
            try:
                inner = inspect.unwrap(function)
            except ValueError:  # a __wrapped__ cycle
                inner = function
        if inner is None or inner is function:
            break
        function = inner
        layers.append(function)
    return layers


def unwrapped(function: Any) -> Any:
    """The function the user wrote, below every wrapper."""
    return _layers(function)[-1]


def is_bound_method(function: Any) -> bool:
    """Written as ``obj.name``: a bound method at some layer."""
    return any(inspect.ismethod(layer) for layer in _layers(function))


def code_of(function: Any) -> CodeType | None:
    """The code of the user's function; of its ``__call__`` for a callable object."""
    function = unwrapped(function)
    code = getattr(function, "__code__", None)
    if code is None:
        call = getattr(type(function), "__call__", None)  # noqa: B004 - reads __call__.__code__, not a callable() test
        code = getattr(call, "__code__", None)
    return code


def function_site(function: Any) -> tuple[str | None, str | None]:
    """(name, ``file:line`` of its definition); the location is None for a function
    defined inside TF or another library (``tf.strings.length``, ``table.lookup``)."""
    inner = unwrapped(function)
    code = code_of(inner)
    name = getattr(inner, "__name__", None)
    if code is None:
        return (str(name) if name else None), None
    if getattr(inner, "__code__", None) is None:  # a callable object
        name = name or type(inner).__name__
    location = (
        None
        if is_library_file(code.co_filename)
        else relative(code.co_filename, code.co_firstlineno)
    )
    return str(name or code.co_name), location


_SOURCE_DEPTH = 3  # get_tf_iterator -> its adapter -> the adapter's restoring lambda -> ...
_SOURCE_ATTRIBUTES = 32  # an object's attributes looked at, at most
_ELEMENT_METHODS = ("__getitem__", "__next__")  # a dataset object's, an iterator's


def program_source(function: Any) -> Any | None:
    """What a library's generator function reads, where the program wrote it: Keras'
    ``get_tf_iterator`` (``keras/src/trainers/data_adapters/generator_data_adapter.py``)
    holds its adapter, whose ``generator`` chains the batches it peeked with the
    generator the program gave ``fit``. The program's generator (or iterator, or
    ``PyDataset``) is found in the closures and attributes below ``function``, a few
    levels deep; None where there is none of the program's."""
    seen: set[int] = set()
    frontier = [function]
    for _ in range(_SOURCE_DEPTH):
        below = []
        for value in frontier:
            for inner in _held_by(value):
                if id(inner) in seen:
                    continue
                seen.add(id(inner))
                if _is_program_source(inner):
                    return inner
                below.append(inner)
        frontier = below
    return None


def source_site(source: Any) -> tuple[str | None, str | None]:
    """(name, ``file:line``) of a generator object by its function (``batches``,
    ``Reader.__iter__``; a generator expression by what it iterates), of a
    dataset or iterator object by its class's ``__getitem__`` or ``__next__``
    (``Tiles.__getitem__``), else what
    :func:`function_site` names."""
    code = getattr(source, "gi_code", None)
    if code is not None:
        consumed = _consumed(source) if code.co_name == "<genexpr>" else None
        if consumed is not None:  # fit((b for b in reader)): what it reads is the source
            return source_site(consumed)
        name = getattr(code, "co_qualname", code.co_name).rsplit(".<locals>.", 1)[-1]
        return name, relative(code.co_filename, code.co_firstlineno)
    for method in _ELEMENT_METHODS:
        code = getattr(getattr(type(source), method, None), "__code__", None)
        if code is not None and not is_library_file(code.co_filename):
            name = f"{type(source).__name__}.{method}"
            return name, relative(code.co_filename, code.co_firstlineno)
    return function_site(source)


def _consumed(genexpr: Any) -> Any | None:
    """What a running generator expression iterates (its frame's ``.0``), where it is
    the program's own source."""
    frame = getattr(genexpr, "gi_frame", None)
    inner = frame.f_locals.get(".0") if frame is not None else None
    return inner if inner is not None and _is_program_source(inner) else None


def _held_by(value: Any) -> list[Any]:
    """The values a function's closure (or a bound method's object) or an object's
    attributes hold: functions, generators and objects, not data."""
    held: list[Any] = []
    function = getattr(value, "__func__", value)
    if inspect.ismethod(value):
        held.append(value.__self__)
    for cell in getattr(function, "__closure__", None) or ():
        try:
            held.append(cell.cell_contents)
        except ValueError:  # an empty cell
            continue
    if not callable(value) and not inspect.isgenerator(value):
        attributes = getattr(value, "__dict__", None)
        if isinstance(attributes, dict):
            held.extend(list(attributes.values())[:_SOURCE_ATTRIBUTES])
    return [
        h
        for h in held
        if h is not None
        and not isinstance(h, (str, bytes, int, float, list, tuple, dict, type, ModuleType))
    ]


def _is_program_source(value: Any) -> bool:
    code = getattr(value, "gi_code", None)  # a generator object
    if code is None and not callable(value) and not inspect.isgenerator(value):
        codes = (getattr(getattr(type(value), m, None), "__code__", None) for m in _ELEMENT_METHODS)
        code = next((c for c in codes if c is not None), None)
    elif code is None:
        code = code_of(value) if inspect.isfunction(value) else None
    return code is not None and not is_library_file(code.co_filename)
