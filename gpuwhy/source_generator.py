"""A generator given to ``Dataset.from_generator`` that only yields slices of arrays the
program holds, as the ``from_tensor_slices`` call that yields the same elements.

``from_generator`` runs the generator in Python, one element at a time, under the GIL:
the slowest way into tf.data. The forum programs that use it mostly wrote::

    def gen():
        for i in range(len(x_train)):
            yield x_train[i], y_train[i]

which is ``tf.data.Dataset.from_tensor_slices((x_train, y_train))``: no Python per
element. Read here from the generator's own source and the arrays it names (the program's
live objects), so the fix a report prints names them, in the order the generator yields
them, with a cast where an array's dtype is not the one ``output_signature`` declared
(``from_generator`` converts to it; ``from_tensor_slices`` keeps the array's).

Recognised, the loop alone in the function (a docstring aside), possibly inside
``while True:`` (then ``.repeat()``):

- ``for i in range(N): yield a[i], b[i]`` where N is the arrays' length (``len(a)``,
  ``a.shape[0]``, a name or a number equal to it);
- ``for u, v in zip(a, b): yield u, v`` (any order of the loop's names);
- ``for u in a: yield u``;
- ``yield from a``, ``yield from zip(a, b)``.

Anything else (a transformation of the slice, an index other than the loop's, arrays of
different lengths, names the function assigns, a generator that takes arguments): None,
and the report keeps its general advice. Nothing of the program is called: names are
looked up, never evaluated.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Sequence
from typing import Any

MAX_BYTES = 1 << 30  # arrays above this are better read from files (TFRecord)


def as_slices(generator: Any, element_spec: Any, prefix: str = "tf.data.Dataset.") -> str | None:
    """``tf.data.Dataset.from_tensor_slices((a, b))`` (``.repeat()`` where the generator
    never ends) yielding what ``generator`` yields under ``element_spec``, or None."""
    try:
        loop, forever = _only_loop(generator)
        if loop is None:
            return None
        names = _sliced_names(loop) if isinstance(loop, ast.For) else _delegated_names(loop)
        if names is None:
            return None
        arrays = [_lookup(generator, n) for n in names]
        if not _same_length_arrays(arrays) or not _range_covers(generator, loop, arrays):
            return None
        parts = _matched(names, arrays, element_spec)
    except Exception:  # noqa: BLE001 - the general advice stays, never a failed run
        return None
    if parts is None:
        return None
    slices = (
        parts[0] if len(parts) == 1 and not _is_tuple(element_spec) else f"({', '.join(parts)})"
    )
    return f"{prefix}from_tensor_slices({slices})" + (".repeat()" if forever else "")


def _only_loop(generator: Any) -> tuple[ast.For | ast.YieldFrom | None, bool]:
    """The function's one ``for`` loop whose body is one ``yield``, or its one ``yield
    from``; whether it is inside ``while True:``."""
    if not inspect.isfunction(generator) or generator.__name__ == "<lambda>":
        return None, False
    for parameter in inspect.signature(generator).parameters.values():
        if parameter.default is inspect.Parameter.empty and parameter.kind not in (
            inspect.Parameter.VAR_POSITIONAL,
            inspect.Parameter.VAR_KEYWORD,
        ):
            return None, False  # given args= by from_generator: not a fixed set of arrays
    tree = ast.parse(textwrap.dedent(inspect.getsource(generator)))
    function = tree.body[0] if tree.body else None
    if not isinstance(function, ast.FunctionDef) or function.name != generator.__name__:
        return None, False
    body = _without_docstring(function.body)
    forever = False
    if (
        len(body) == 1
        and isinstance(body[0], ast.While)
        and isinstance(body[0].test, ast.Constant)
        and body[0].test.value is True
        and not body[0].orelse
    ):
        body, forever = body[0].body, True
    if (
        len(body) == 1
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.YieldFrom)
    ):
        return body[0].value, forever
    if len(body) != 1 or not isinstance(body[0], ast.For) or body[0].orelse:
        return None, False
    loop = body[0]
    if len(loop.body) != 1 or not isinstance(loop.body[0], ast.Expr):
        return None, False
    if not isinstance(loop.body[0].value, ast.Yield) or loop.body[0].value.value is None:
        return None, False
    return loop, forever


def _without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        return body[1:]
    return body


def _yielded(loop: ast.For) -> list[ast.expr]:
    statement = loop.body[0]
    assert isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Yield)
    value = statement.value.value
    assert value is not None
    return list(value.elts) if isinstance(value, ast.Tuple) else [value]


def _sliced_names(loop: ast.For) -> list[str] | None:
    """The arrays each yielded value is a slice of, in the order yielded."""
    yielded = _yielded(loop)
    target, source = loop.target, loop.iter
    if isinstance(target, ast.Name) and _called(source, "range"):
        index = target.id
        names = []
        for value in yielded:
            if not (
                isinstance(value, ast.Subscript)
                and isinstance(value.value, ast.Name)
                and isinstance(value.slice, ast.Name)
                and value.slice.id == index
            ):
                return None
            names.append(value.value.id)
        return names
    if isinstance(target, ast.Name) and isinstance(source, ast.Name):
        ok = len(yielded) == 1 and isinstance(yielded[0], ast.Name) and yielded[0].id == target.id
        return [source.id] if ok else None
    if isinstance(target, ast.Tuple) and _called(source, "zip"):
        assert isinstance(source, ast.Call)
        bound = [t.id for t in target.elts if isinstance(t, ast.Name)]
        zipped = [a.id for a in source.args if isinstance(a, ast.Name)]
        if not (len(bound) == len(target.elts) == len(zipped) == len(source.args)):
            return None
        by_name = dict(zip(bound, zipped, strict=True))
        names = []
        for value in yielded:
            if not isinstance(value, ast.Name) or value.id not in by_name:
                return None
            names.append(by_name[value.id])
        return names
    return None


def _delegated_names(node: ast.YieldFrom) -> list[str] | None:
    """``yield from a``: [a]; ``yield from zip(a, b)``: [a, b]."""
    if isinstance(node.value, ast.Name):
        return [node.value.id]
    if _called(node.value, "zip"):
        assert isinstance(node.value, ast.Call)
        names = [a.id for a in node.value.args if isinstance(a, ast.Name)]
        return names if len(names) == len(node.value.args) and names else None
    return None


def _called(node: ast.expr, name: str) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == name
        and not node.keywords
    )


def _lookup(generator: Any, name: str) -> Any:
    """The object ``name`` is in the generator (its closure, then its module); KeyError
    where it is neither (a local, a builtin)."""
    bound = inspect.getclosurevars(generator)
    if name in bound.nonlocals:
        return bound.nonlocals[name]
    return bound.globals[name]


def _same_length_arrays(arrays: Sequence[Any]) -> bool:
    import numpy as np

    if not arrays or not all(isinstance(a, np.ndarray) and a.ndim >= 1 for a in arrays):
        return False
    if any(a.dtype.kind not in "biuf" for a in arrays):  # strings, objects: not here
        return False
    return len({len(a) for a in arrays}) == 1 and sum(a.nbytes for a in arrays) <= MAX_BYTES


def _range_covers(generator: Any, loop: ast.For | ast.YieldFrom, arrays: Sequence[Any]) -> bool:
    """``range(N)`` runs over every element of the arrays: N is their length."""
    if not isinstance(loop, ast.For) or not _called(loop.iter, "range"):
        return True  # zip, or the array itself: every element
    assert isinstance(loop.iter, ast.Call)
    if len(loop.iter.args) != 1:
        return False
    n = _length(generator, loop.iter.args[0])
    return n is not None and n == len(arrays[0])


def _length(generator: Any, node: ast.expr) -> int | None:
    """A range's bound: a number, a name, ``len(name)`` or ``name.shape[0]``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Name):
        value = _lookup(generator, node.id)
        return value if isinstance(value, int) else None
    if _called(node, "len"):
        assert isinstance(node, ast.Call)
        if len(node.args) == 1 and isinstance(node.args[0], ast.Name):
            return len(_lookup(generator, node.args[0].id))
        return None
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.slice, ast.Constant)
        and node.slice.value == 0
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "shape"
        and isinstance(node.value.value, ast.Name)
    ):
        return int(_lookup(generator, node.value.value.id).shape[0])
    return None


def _is_tuple(spec: Any) -> bool:
    return isinstance(spec, tuple)


def _matched(names: Sequence[str], arrays: Sequence[Any], spec: Any) -> list[str] | None:
    """Each array as written, cast where the signature's dtype differs; None where the
    signature's structure or shapes are not the arrays' slices."""
    specs = list(spec) if _is_tuple(spec) else [spec]
    if len(specs) != len(arrays):
        return None
    parts = []
    for name, array, one in zip(names, arrays, specs, strict=True):
        shape, dtype = getattr(one, "shape", None), getattr(one, "dtype", None)
        if shape is None or dtype is None or not shape.is_compatible_with(array.shape[1:]):
            return None
        wanted = dtype.as_numpy_dtype
        parts.append(name if array.dtype == wanted else f'{name}.astype("{wanted.__name__}")')
    return parts
