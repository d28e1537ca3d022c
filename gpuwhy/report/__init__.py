"""Reporters: they only format a RunRecord (terminal, JSON; HTML and metrics later)."""

from gpuwhy.report.base import MisconfigurationError, Renderer, renderer_class
from gpuwhy.report.json_ import JsonRenderer
from gpuwhy.report.terminal import TerminalRenderer

RENDERERS: dict[str, type[Renderer]] = {
    "terminal": TerminalRenderer,
    "json": JsonRenderer,
}

__all__ = ["RENDERERS", "Renderer", "MisconfigurationError", "renderer_class"]
