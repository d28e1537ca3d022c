"""The files of the installed ``plotly`` package the HTML report inlines, read without
importing plotly: its plotly.js bundle and its chart templates.

Importing plotly's Python side (``plotly.graph_objects``, its validators) costs about
30 MB of memory, and ``plotly.offline.get_plotlyjs()`` returns the 4.8 MB bundle as a
str of 9.6 MB (a few non-Latin-1 characters make every character two bytes). The report
needs neither: it writes the charts' JSON itself (html_charts.py) and copies the bundle's
bytes into the page in blocks, so its cost stays the same at any run length
(all of gpuwhy stays within 64 MB of plain python).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

BLOCK = 64 * 1024
# The one text that could end the page's <script> early inside the bundle: an end tag,
# matched as the HTML parser matches it, in any case. Written "<\/script" (the same
# string to JavaScript). plotly.js today has none; this keeps it true of any version.
_END_TAG = re.compile(rb"</(script)", re.IGNORECASE)
_CARRY = len(b"</script") - 1


@functools.lru_cache(maxsize=1)
def package_data() -> Path:
    """plotly's package_data folder, found as the import system would find it."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("the HTML report needs plotly: pip install plotly")
    return Path(next(iter(spec.submodule_search_locations))) / "package_data"


def plotly_js_blocks() -> Iterator[bytes]:
    """plotly.min.js as UTF-8 bytes ready to sit inside ``<script>``, a block at a time."""
    with open(package_data() / "plotly.min.js", "rb") as f:
        yield from script_safe_blocks(f)


def script_safe_blocks(f: IO[bytes], size: int = BLOCK) -> Iterator[bytes]:
    """A script file's bytes, ``size`` at a time, each ``</script`` written ``<\\/script``.
    The last 7 bytes of each block wait for the next one, so an end tag split across two
    reads is still found."""
    carry = b""
    while block := f.read(size):
        text = _END_TAG.sub(rb"<\\/\1", carry + block)
        carry = text[-_CARRY:]
        yield text[:-_CARRY]
    yield carry


def plotly_js() -> str:
    """The bundle as one string, for a page rendered in memory (``HtmlRenderer.render``)."""
    return b"".join(plotly_js_blocks()).decode("utf-8")


@functools.cache
def template(name: str) -> dict[str, Any]:
    """A chart template ("plotly", "plotly_white") as plotly.graph_objects writes it into
    a figure's layout (plotly/package_data/templates/NAME.json). Shared: never modify it."""
    with open(package_data() / "templates" / f"{name}.json", encoding="utf-8") as f:
        result: dict[str, Any] = json.load(f)
    return result
