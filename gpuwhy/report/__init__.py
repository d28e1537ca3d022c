"""Renderers: they only format a Record (terminal, JSON, HTML). ``-f NAME`` picks one
from RENDERERS (or ``module:Class``); ``--html PATH`` is the HTML renderer written to PATH."""

from gpuwhy.report.base import MisconfigurationError, Renderer, renderer_class
from gpuwhy.report.html import HtmlRenderer
from gpuwhy.report.json_ import JsonRenderer
from gpuwhy.report.terminal import TerminalRenderer

RENDERERS: dict[str, type[Renderer]] = {
    "terminal": TerminalRenderer,
    "json": JsonRenderer,
    "html": HtmlRenderer,
}

__all__ = ["RENDERERS", "Renderer", "MisconfigurationError", "renderer_class"]
