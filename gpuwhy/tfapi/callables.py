"""The user's function behind TF's wrappers, and where it is defined.

A ``tf.function`` (``python_function``), ``functools.partial``, a decorator's
``__wrapped__``, a bound method, gpuwhy's own replay of a dataset function: the tracing
hooks and the tf.data readers all need the function the user wrote, and name it the
same way (``parse``, ``train.py:41``).
"""

from __future__ import annotations

import functools
import inspect
from types import CodeType
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
