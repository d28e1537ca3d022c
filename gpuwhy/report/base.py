"""Renderer: turns a Record into text or bytes (after pyinstrument's renderers/base.py).

Renderers see only the record: they never collect, never decide. Picking one is a dict
lookup, and ``module:Class`` loads a third-party renderer.
"""

from __future__ import annotations

from typing import IO, ClassVar

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

    def write(self, record: Record, out: IO[bytes]) -> None:
        """The report into a file opened for bytes (UTF-8 text). A renderer whose output
        is large writes it in pieces instead of holding it whole (html.py)."""
        text = self.render(record)
        out.write(text.encode("utf-8") if isinstance(text, str) else text)
