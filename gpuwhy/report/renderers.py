"""The renderers by name: ``-f NAME`` picks one
from RENDERERS (or ``module:Class``); ``--html PATH`` is the HTML renderer written to PATH."""

import importlib

from gpuwhy.report.base import MisconfigurationError, Renderer

# Imported when chosen: the HTML renderer (its templates and charts) alone is a fifth of
# what `gpuwhy run` imports before the program's first line, and most runs write none
RENDERERS: dict[str, str] = {
    "terminal": "gpuwhy.report.run.terminal:TerminalRenderer",
    "json": "gpuwhy.report.run.json_:JsonRenderer",
    "html": "gpuwhy.report.run.html:HtmlRenderer",
    "sarif": "gpuwhy.report.run.sarif:SarifRenderer",
}


def renderer_class(name: str) -> type[Renderer]:
    """A renderer by name (``terminal``, ``json``) or ``package.module:Class``."""
    if name in RENDERERS:
        module, _, cls = RENDERERS[name].partition(":")
        return getattr(importlib.import_module(module), cls)
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
