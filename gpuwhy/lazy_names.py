"""A package's names imported at their first use (PEP 562), not with the package: what
``gpuwhy run`` never reads before a script's first line (the comparing, the live
metrics' exporters) costs that run nothing (docs/speed.md)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["names_from_modules"]


def names_from_modules(
    package: str, where: Mapping[str, str], namespace: dict[str, Any]
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: a name of ``where`` (name -> the module of
    the package it comes from) imported now and kept in ``namespace`` (the package's
    globals: asked once); any other name is an AttributeError, as Python's own."""

    def attribute(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    return attribute
