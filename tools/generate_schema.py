"""Regenerates the run sections of gpuwhy/schema/run.schema.json from the dataclasses in
gpuwhy/facts/ (every section of ``Facts`` but the hand-written ones) and the derivation
stage's ``derived`` section (gpuwhy/derived/stage.py), and the whole of
gpuwhy/schema/diff.schema.json (`gpuwhy diff --json`) from gpuwhy/comparison/model.py, and
gpuwhy/schema/calibration.schema.json (`gpuwhy diff --calibrate -f json`) from
gpuwhy/comparison/calibration.py.

Run from the repository root after changing one of those dataclasses:
    .venv/bin/python tools/generate_schema.py
tests/test_record.py fails when the schema and the dataclasses disagree.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import sys
import types
import typing
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpuwhy import facts as F
from gpuwhy.comparison.calibration import Calibration
from gpuwhy.comparison.model import Comparison
from gpuwhy.derived.stage import Published

SCHEMA = Path(__file__).resolve().parents[1] / "gpuwhy" / "schema" / "run.schema.json"
DIFF_SCHEMA = SCHEMA.with_name("diff.schema.json")
CALIBRATION_SCHEMA = SCHEMA.with_name("calibration.schema.json")
# Written by hand in the schema: the sections check and audit fill, older than the
# generator (their shapes carry constraints a type hint cannot say).
HAND_WRITTEN = ("environment", "devices", "placement")
# Every other section of Facts, in its order: a new collector's section is generated
# without being named here.
GENERATED = [
    (f.name, typing.get_args(typing.get_type_hints(F.Facts)[f.name])[0])
    for f in dataclasses.fields(F.Facts)
    if f.name not in HAND_WRITTEN
]
SCALARS = {
    int: {"type": "integer"},
    float: {"type": "number"},
    str: {"type": "string"},
    bool: {"type": "boolean"},
}
# What a type hint cannot say and a reader relies on: an index into a list, counts that
# slice the step series, a rate drawn on a log axis. Without the bound, a saved record
# the schema lets through can crash `gpuwhy report` (tests/test_record_fuzz.py).
BOUNDS = {
    (F.StepFacts, "count"): {"minimum": 0},
    (F.StepFacts, "warmup"): {"minimum": 0},
    (F.StepFacts, "steps_per_call"): {"minimum": 1},
    (F.PipelineFacts, "bottleneck"): {"minimum": 0},
    (F.PipelineFacts, "throughput_per_s"): {"minimum": 0},
}


def schema_of(tp) -> dict:
    """JSON Schema of a facts type hint (dataclass, Optional, tuple, dict, scalar)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        (inner,) = [a for a in typing.get_args(tp) if a is not type(None)]
        s = schema_of(inner)
        if list(s) == ["type"] and isinstance(s["type"], str):
            return {"type": [s["type"], "null"]}
        return {"oneOf": [{"type": "null"}, s]}
    if origin in (tuple, list):
        args = typing.get_args(tp)
        if len(args) == 1 or (len(args) == 2 and args[1] is Ellipsis):
            return {"type": "array", "items": schema_of(args[0])}
        return {
            "type": "array",
            "prefixItems": [schema_of(a) for a in args],
            "minItems": len(args),
            "maxItems": len(args),
        }
    if origin is dict:
        return {"type": "object", "additionalProperties": schema_of(typing.get_args(tp)[1])}
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        fields = dataclasses.fields(tp)
        out: dict = {"type": "object"}
        doc = inspect.cleandoc(tp.__doc__ or "").split("\n\n")[0].replace("\n", " ")
        if doc:
            out["description"] = doc
        out["required"] = [
            f.name
            for f in fields
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        out["properties"] = {
            f.name: {**schema_of(hints[f.name]), **BOUNDS.get((tp, f.name), {})} for f in fields
        }
        return out
    return dict(SCALARS.get(tp, {}))


def generated_sections() -> dict[str, dict]:
    """The facts' sections, then the derivation stage's published values (``derived``:
    written for readers of the file, derived again where a record is read)."""
    return {**{name: schema_of(cls) for name, cls in GENERATED}, "derived": schema_of(Published)}


def diff_schema() -> dict:
    """The whole schema of `gpuwhy diff --json`: the Comparison dataclass, with the tool
    that wrote it (gpuwhy/report/diff/json_.py)."""
    return _tool_schema(Comparison, "diff", "gpuwhy diff")


def calibration_schema() -> dict:
    """The whole schema of `gpuwhy diff --calibrate -f json` (report/diff/calibration.py)."""
    return _tool_schema(Calibration, "calibration", "gpuwhy diff --calibrate")


def _tool_schema(cls: type, name: str, title: str) -> dict:
    schema = schema_of(cls)
    schema["properties"]["tool"] = {
        "type": "object",
        "required": ["name", "version"],
        "properties": {"name": {"const": "gpuwhy"}, "version": {"type": "string"}},
    }
    schema["properties"]["schema"] = {"const": 1}
    schema["required"] = ["schema", "tool", *schema["required"]]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://gpuwhy.dev/schema/{name}-1.json",
        "title": title,
        **schema,
    }


def main() -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    for name, section in generated_sections().items():
        schema["$defs"][name] = section
        schema["properties"][name] = {"oneOf": [{"type": "null"}, {"$ref": f"#/$defs/{name}"}]}
    SCHEMA.write_text(json.dumps(schema, indent=2) + "\n", encoding="utf-8")
    DIFF_SCHEMA.write_text(json.dumps(diff_schema(), indent=2) + "\n", encoding="utf-8")
    CALIBRATION_SCHEMA.write_text(
        json.dumps(calibration_schema(), indent=2) + "\n", encoding="utf-8"
    )


if __name__ == "__main__":
    main()
