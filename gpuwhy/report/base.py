"""Renderer: turns a Record into text or bytes (after pyinstrument's renderers/base.py).

Renderers see only the record: they never collect, never decide. Picking one is a dict
lookup, and ``module:Class`` loads a third-party renderer.
"""

from __future__ import annotations

import importlib
from typing import ClassVar

from gpuwhy.record import Record


class MisconfigurationError(ValueError):
    """Renderer options that conflict, or a renderer that cannot be found."""


class Renderer:
    name: ClassVar[str]
    file_extension: ClassVar[str]
    is_binary: ClassVar[bool] = False
    for_terminal: ClassVar[bool] = True  # False: meant for a file (a web page), not a terminal

    def __init__(self, verbose: bool = False, color: bool = False, width: int | None = None):
        self.verbose, self.color, self.width = verbose, color, width

    def render(self, record: Record) -> str:
        raise NotImplementedError


def renderer_class(name: str) -> type[Renderer]:
    """A renderer by name (``terminal``, ``json``) or ``package.module:Class``."""
    from gpuwhy.report import RENDERERS

    if name in RENDERERS:
        return RENDERERS[name]
    if ":" in name:
        module, _, cls = name.partition(":")
        try:
            found = getattr(importlib.import_module(module), cls)
        except Exception as e:  # noqa: BLE001 - any import failure is a bad option
            raise MisconfigurationError(f"cannot load renderer {name!r}: {e}") from None
        if not (isinstance(found, type) and issubclass(found, Renderer)) or found is Renderer:
            raise MisconfigurationError(f"{name!r} is not a gpuwhy Renderer subclass")
        return found
    raise MisconfigurationError(
        f"unknown format {name!r}; choose one of {', '.join(RENDERERS)} or module:Class"
    )
