"""``gpuwhy diff`` as JSON: the comparison's dataclasses as they are, under the schema
gpuwhy/schema/diff.schema.json (generated from gpuwhy/comparison/model.py)."""

from __future__ import annotations

import json
from typing import Any

from gpuwhy.comparison.model import Comparison
from gpuwhy.facts import to_dict
from gpuwhy.version import __version__


def comparison_dict(c: Comparison) -> dict[str, Any]:
    return with_tool(to_dict(c))


def with_tool(data: dict[str, Any]) -> dict[str, Any]:
    """A report's dataclass as JSON: its schema version first, then the tool that wrote
    it (the diff's and the calibration's schemas ask for both)."""
    schema = data.pop("schema")
    return {"schema": schema, "tool": {"name": "gpuwhy", "version": __version__}, **data}


def comparison_json(c: Comparison) -> str:
    return json.dumps(comparison_dict(c), indent=2) + "\n"
