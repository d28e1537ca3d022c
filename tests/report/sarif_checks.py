"""What the tests check a ``-f sarif`` log with: the official SARIF 2.1.0 schema
(tests/data/sarif-schema-2.1.0.json, see its .md), and a fix applied to its file."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

SCHEMA_PATH = Path(__file__).parents[1] / "data" / "sarif-schema-2.1.0.json"


@cache
def _validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SCHEMA_PATH.read_text())
    cls = jsonschema.validators.validator_for(schema)  # draft-04, as its $schema says
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def sarif_errors(log: Any) -> list[str]:
    """Where ``log`` breaks the schema, one line each (none: valid)."""
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in _validator().iter_errors(log)
    ]


def apply_fix(path: Path, fix: dict) -> list[str]:
    """The file's lines with the fix's replacements made, as a SARIF viewer makes them."""
    lines = path.read_text().splitlines()
    for change in fix["artifactChanges"]:
        for replacement in change["replacements"]:
            region = replacement["deletedRegion"]
            line = lines[region["startLine"] - 1]
            start, end = region["startColumn"] - 1, region["endColumn"] - 1
            new = replacement["insertedContent"]["text"]
            lines[region["startLine"] - 1] = line[:start] + new + line[end:]
    return lines
