"""The official SARIF 2.1.0 schema (tests/data/sarif-schema-2.1.0.json, see its .md):
what every ``-f sarif`` log of the tests is validated against."""

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
