"""How nodes and dtypes are named in the placement facts."""

from __future__ import annotations

from gpuwhy.collect.placement.graph import FlatGraph

__all__ = ["DT_STRING", "DT_VARIANT", "dtype_name", "qualified"]

DT_STRING = 7
DT_VARIANT = 21

_DTYPE_NAMES: dict[int, str] = {}


def dtype_name(enum: int) -> str:
    """TensorFlow's name for a DataType enum value ("float32", "int32", "resource")."""
    name = _DTYPE_NAMES.get(enum)
    if name is None:
        from tensorflow.python.framework import dtypes

        try:
            name = dtypes.as_dtype(enum).name
        except TypeError:
            name = f"dtype{enum}"
        _DTYPE_NAMES[enum] = name
    return name


def qualified(flat: FlatGraph, node_id: int) -> str:
    """A node's name, prefixed with its body's function name when it is not top-level."""
    node = flat.nodes[node_id]
    return node.name if not node.function else f"{node.function}/{node.name}"
