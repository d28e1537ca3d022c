"""The published JSON Schema of a run record (run.schema.json beside this module): its
number, its text and the one validator that checks records against it.

The run sections of the file are generated from the facts' dataclasses by
tools/generate_schema.py; the others are written by hand.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

# The ``schema`` field of every record gpuwhy writes; a record with another is refused.
SCHEMA_VERSION = 1


def load() -> dict[str, Any]:
    """The published JSON Schema of the record (gpuwhy/schema/run.schema.json)."""
    return json.loads(
        resources.files("gpuwhy.schema").joinpath("run.schema.json").read_text(encoding="utf-8")
    )


def load_diff() -> dict[str, Any]:
    """The published JSON Schema of ``gpuwhy diff --json`` (gpuwhy/schema/diff.schema.json,
    generated from gpuwhy/comparison/model.py)."""
    return json.loads(
        resources.files("gpuwhy.schema").joinpath("diff.schema.json").read_text(encoding="utf-8")
    )


def load_calibration() -> dict[str, Any]:
    """The published JSON Schema of ``gpuwhy diff --calibrate -f json``
    (gpuwhy/schema/calibration.schema.json, generated from comparison/calibration.py)."""
    return json.loads(
        resources.files("gpuwhy.schema")
        .joinpath("calibration.schema.json")
        .read_text(encoding="utf-8")
    )


@functools.lru_cache(maxsize=1)
def validator():
    """One validator per process: building it parses the schema and compiles its refs,
    which would otherwise be paid for every record loaded.

    "integer" means an integer as gpuwhy writes it (``3``, not ``3.0`` or ``1e308``):
    JSON Schema lets an integral float pass, and it would reach the facts' ``int``
    fields as a float that cannot index a list or count a range."""
    import jsonschema

    base = jsonschema.Draft202012Validator
    strict = jsonschema.validators.extend(
        base, type_checker=base.TYPE_CHECKER.redefine("integer", _is_integer)
    )
    return strict(load())


def _is_integer(checker: Any, value: Any) -> bool:
    """JSON's integers as Python's json reads them; bool is an int to Python, not to JSON."""
    return isinstance(value, int) and not isinstance(value, bool)
