"""file:line kept on one line in the HTML pages' tables and cards: a location broken
after its colon reads as two things. Each ``path.py:LINE`` in a cell is wrapped in a span
the stylesheet keeps whole (``white-space: nowrap``), so a cell of several locations
still wraps, between them."""

from __future__ import annotations

import re
from typing import Any

# a source location as gpuwhy writes one: a path ending in a source file, then :LINE
# (and :COLUMN where given); paths with spaces are left to wrap
LOCATION = re.compile(r"[\w./~+-]*\.(?:py|pyx|ipynb|cc|h|cpp|sh)(?::\d+)+")


def nowrap_locations(value: Any) -> Any:
    """The cell's text, escaped, each location in a ``<span class="loc">`` (Markup: the
    template prints it as it is)."""
    from markupsafe import Markup, escape  # with jinja2: only the HTML pages need it

    text = str(escape(value))
    return Markup(LOCATION.sub(lambda m: f'<span class="loc">{m.group(0)}</span>', text))
