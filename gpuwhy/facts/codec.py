"""The facts' JSON round trip: ``to_dict`` writes a dataclass tree as plain JSON values;
``from_dict`` rebuilds the frozen classes from their type hints, so adding a field to
a section needs no serialisation code.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any


def to_dict(obj: Any) -> Any:
    """Dataclass tree -> JSON-friendly dicts/lists (tuples become lists)."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): to_dict(v) for k, v in obj.items()}
    return obj


def from_dict(cls: Any, data: Any) -> Any:
    """Rebuild ``cls`` (a dataclass or a typing form over dataclasses) from JSON data.

    Unknown keys are ignored so that a record written by a newer minor version of
    gpuwhy with extra fields still loads; the schema number guards real breaks.
    """
    if data is None:
        return None
    origin = typing.get_origin(cls)
    if origin in (typing.Union, types.UnionType):  # only Optional[X] is used in facts
        (inner,) = [a for a in typing.get_args(cls) if a is not type(None)]
        return from_dict(inner, data)
    if origin in (tuple, list):
        (item,) = typing.get_args(cls)[:1]
        values = [from_dict(item, v) for v in data]
        return tuple(values) if origin is tuple else values
    if origin is dict:
        return dict(data)
    if isinstance(cls, type) and dataclasses.is_dataclass(cls):
        kwargs = {
            name: from_dict(hint, data[name]) for name, hint in _field_hints(cls) if name in data
        }
        return cls(**kwargs)
    return data


@functools.cache
def _field_hints(cls: type) -> tuple[tuple[str, Any], ...]:
    """A dataclass's fields with their resolved types, resolved once per class (resolving
    them is about half the time of loading a record when done per object)."""
    hints = typing.get_type_hints(cls)
    return tuple((f.name, hints[f.name]) for f in dataclasses.fields(cls))
