"""The files of the installed ``plotly`` package the HTML report inlines, read without
importing plotly: its chart templates.

Importing plotly's Python side (``plotly.graph_objects``, its validators) costs about
30 MB of memory at the end of every run; the report writes the charts' JSON itself
(html_charts.py), so its cost stays the same at any run length (issue #25: all of gpuwhy
within 64 MB of plain python).
"""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path
from typing import Any


@functools.lru_cache(maxsize=1)
def package_data() -> Path:
    """plotly's package_data folder, found as the import system would find it."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("the HTML report needs plotly: pip install plotly")
    return Path(next(iter(spec.submodule_search_locations))) / "package_data"


@functools.cache
def template(name: str) -> dict[str, Any]:
    """A chart template ("plotly", "plotly_white") as plotly.graph_objects writes it into
    a figure's layout (plotly/package_data/templates/NAME.json). Shared: never modify it."""
    with open(package_data() / "templates" / f"{name}.json", encoding="utf-8") as f:
        result: dict[str, Any] = json.load(f)
    return result
