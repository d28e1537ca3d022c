"""JSON read from a file that anyone may have written: a record, a recording, a
calibration. Its nesting is bounded here, where it is parsed.

Python's parser, and everything gpuwhy does with the values after it (the schema's
validation, the facts rebuilt, the renderers), recurses once per level: a file nested a
few hundred levels deep (``[[[[...]]]]``, made by mistake or on purpose) ends in a
RecursionError somewhere past the reader, which only the command line's catch-all would
catch, as an "internal error". A file deeper than :data:`MAX_DEPTH` is refused instead,
as one :class:`TooDeep` line naming it. Nothing gpuwhy writes comes near the bound: its
records nest about 8 levels.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 100  # levels of arrays and objects


class TooDeep(ValueError):
    """JSON nested deeper than :data:`MAX_DEPTH`: its message names the file."""

    def __init__(self, source: str) -> None:
        super().__init__(
            f"{source} is nested too deeply to be read (arrays and objects more than "
            f"{MAX_DEPTH} levels deep)"
        )


def loads(text: str, source: str) -> Any:
    """``text`` parsed, as :func:`json.loads` would; raises :class:`TooDeep` (a
    ValueError, as a parse error is) when it nests deeper than :data:`MAX_DEPTH`.
    ``source`` names the input in the message: the path, ``PATH: line N``."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise TooDeep(source) from None
    # a text with fewer opening brackets than the bound cannot nest deeper (a recording's
    # lines, read by the hundred thousand, are not walked)
    if text.count("[") + text.count("{") > MAX_DEPTH and deeper_than(value, MAX_DEPTH):
        raise TooDeep(source)
    return value


def deeper_than(value: Any, levels: int) -> bool:
    """Whether ``value`` holds arrays and objects more than ``levels`` deep. Level by
    level, without recursion, each container looked at once (about 2 ms for a 500 kB
    record)."""
    level = [value] if isinstance(value, (dict, list)) else []
    for _ in range(levels):
        below: list[Any] = []
        for node in level:
            items = node.values() if isinstance(node, dict) else node
            below += [item for item in items if isinstance(item, (dict, list))]
        if not below:
            return False
        level = below
    return bool(level)
