"""The renderers by name: ``-f NAME`` picks one
from RENDERERS (or ``module:Class``); ``--html PATH`` is the HTML renderer written to PATH."""

import importlib

from gpuwhy.report.base import MisconfigurationError, Renderer
from gpuwhy.report.run.html import HtmlRenderer
from gpuwhy.report.run.json_ import JsonRenderer
from gpuwhy.report.run.sarif import SarifRenderer
from gpuwhy.report.run.terminal import TerminalRenderer

RENDERERS: dict[str, type[Renderer]] = {
    "terminal": TerminalRenderer,
    "json": JsonRenderer,
    "html": HtmlRenderer,
    "sarif": SarifRenderer,
}


def renderer_class(name: str) -> type[Renderer]:
    """A renderer by name (``terminal``, ``json``) or ``package.module:Class``."""
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


__all__ = ["RENDERERS", "Renderer", "MisconfigurationError", "renderer_class"]
