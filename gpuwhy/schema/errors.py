"""A record's refusal in words: what is wrong with a file that is not a record gpuwhy can read.

jsonschema's own messages quote the whole offending instance and, for an optional
section, say only that it matched neither "null" nor the section; ``gpuwhy report``
prints one ``gpuwhy: error:`` line, so each refusal here is one short line that names
the field at fault, what the schema expects there and what the file has.
"""

from __future__ import annotations

import json
from typing import Any

from gpuwhy.schema.published import SCHEMA_VERSION, validator
from gpuwhy.version import __version__


def refusal(data: Any) -> str | None:
    """Why ``data`` (a loaded JSON file) is not a run record this gpuwhy reads; None when it is.

    The schema number is checked before the schema: a record of another schema is
    refused for that, not for the fields that schema changed."""
    if not isinstance(data, dict) or "schema" not in data:
        return "not a gpuwhy run record (no 'schema' field)"
    if not _same_json(data["schema"], SCHEMA_VERSION):
        newer = type(data["schema"]) is int and data["schema"] > SCHEMA_VERSION
        return (
            f"run record schema {_excerpt(data['schema'])} is not supported by gpuwhy "
            f"{__version__} (schema {SCHEMA_VERSION})"
            + ("; upgrade gpuwhy to read it" if newer else "")
        )
    errors = validation_errors(data)
    if errors:
        return f"invalid run record: {errors[0]}"
    return None


def validation_errors(data: Any) -> list[str]:
    """Every way ``data`` breaks the schema, one short line each, in document order.

    jsonschema's own messages quote the whole offending instance (a 3,000-character
    section on one line when a field deep inside it is wrong) and, for the ``oneOf`` of
    an optional section, say only that the section matched neither "null" nor the
    section. A line here names the deepest field at fault, what the schema expects
    there and what the file has: ``environment/tensorflow/build/cuda_compute_capabilities:
    expected an array of strings or null, got integer (7)``.
    """
    errors = sorted(validator().iter_errors(data), key=_document_order)
    return [_error_line(_cause(e)) for e in errors]


def _document_order(error) -> list[tuple[bool, Any]]:
    """Sort key of an error's place: list indices compare as numbers (2 before 10)."""
    return [(isinstance(k, str), k) for k in error.absolute_path]


def _cause(error):
    """The error to report for a ``oneOf``/``anyOf`` failure: inside the one branch
    whose type the value has (an object given for an optional section), so the deep
    field at fault is named rather than the section; the alternation itself when the
    value's type matches no branch (an integer given for that section)."""
    while error.validator in ("oneOf", "anyOf") and error.context:
        branches: dict[Any, list] = {}
        for sub in error.context:
            branches.setdefault(sub.relative_schema_path[0], []).append(sub)
        meant = [subs for subs in branches.values() if not _wrong_type(subs)]
        if len(meant) != 1:
            break
        error = min(meant[0], key=_document_order)
    return error


def _wrong_type(errors: list) -> bool:
    """A branch failed only because the value is not of its type at all."""
    return all(not e.relative_path and e.validator in ("type", "const", "enum") for e in errors)


def _error_line(error) -> str:
    """``path: expected ..., got ...`` on one line of at most 250 characters, whatever the
    instance holds and however long the schema's alternatives are."""
    where = "/".join(str(k) for k in error.absolute_path) or "(top)"
    return _excerpt_text(f"{_excerpt_text(where, 120)}: {_problem(error)}", 250)


def _problem(error) -> str:
    """What is wrong at the error's place, in terms of the schema, never quoting more than
    a short excerpt of the value."""
    kind, value, rule = error.validator, error.instance, error.validator_value
    got = f"got {_json_type(value)} ({_excerpt(value)})"
    if kind in ("type", "oneOf", "anyOf", "enum", "const"):
        return f"expected {_expected(error.schema)}, {got}"
    if kind == "required":
        missing = [name for name in rule if isinstance(value, dict) and name not in value]
        fields = "field" if len(missing) == 1 else "fields"
        return f"missing the required {fields} {_excerpt_text(', '.join(missing) or '?', 60)}"
    if kind in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        words = {
            "minimum": "at least",
            "exclusiveMinimum": "more than",
            "maximum": "at most",
            "exclusiveMaximum": "less than",
        }[kind]
        return f"expected {words} {rule}, {got}"
    if kind in ("minItems", "maxItems"):
        words = "at least" if kind == "minItems" else "at most"
        return f"expected {words} {rule} items, got {len(value)}"
    if kind == "pattern":
        return f"expected a string matching {_excerpt_text(rule, 60)}, {got}"
    return _excerpt_text(error.message, 160)


JSON_TYPES = {
    "null": "null",
    "boolean": "a boolean",
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "array": "an array",
    "object": "an object",
}
PLURALS = {
    "null": "nulls",
    "boolean": "booleans",
    "integer": "integers",
    "number": "numbers",
    "string": "strings",
    "array": "arrays",
    "object": "objects",
}


def _expected(sub: Any, plural: bool = False) -> str:
    """A schema in words: ``an array of strings or null``; ``one of "ok", "error"``."""
    if not isinstance(sub, dict):
        return "any value" if sub is True else "nothing"
    if "$ref" in sub:
        return _expected(_resolve(sub["$ref"]), plural)
    if "oneOf" in sub or "anyOf" in sub:
        branches = sub["oneOf"] if "oneOf" in sub else sub["anyOf"]
        return _alternatives([_expected(b, plural) for b in branches])
    if "const" in sub:
        return _excerpt(sub["const"])
    if "enum" in sub:
        values = sub["enum"]
        shown = ", ".join(_excerpt(v) for v in values[:6]) + (", ..." if len(values) > 6 else "")
        return f"one of {shown}"
    types = sub.get("type")
    if types is None:
        return "values" if plural else "a value"
    names = [types] if isinstance(types, str) else list(types)
    return _alternatives([_type_words(name, sub, plural) for name in names])


def _type_words(name: str, sub: dict, plural: bool) -> str:
    """One JSON type of ``sub`` in words; an array says what it holds."""
    words = PLURALS.get(name, name) if plural else JSON_TYPES.get(name, name)
    if name == "array" and "prefixItems" in sub:
        return f"{words} of {len(sub['prefixItems'])} items"
    if name == "array" and isinstance(sub.get("items"), dict):
        return f"{words} of {_expected(sub['items'], plural=True)}"
    return words


def _alternatives(phrases: list[str]) -> str:
    """``a or b or null``: null last, each phrase once."""
    unique = list(dict.fromkeys(phrases))
    unique.sort(key=lambda p: p in ("null", "nulls"))
    return " or ".join(unique)


def _resolve(ref: str) -> Any:
    """A local ``#/$defs/name`` reference of the published schema."""
    node: Any = validator().schema
    for part in ref.lstrip("#/").split("/"):
        node = node.get(part, {}) if isinstance(node, dict) else {}
    return node


def _json_type(value: Any) -> str:
    """The JSON name of a loaded value's type, as the schema spells it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return (
        "array"
        if isinstance(value, list)
        else "object"
        if isinstance(value, dict)
        else type(value).__name__
    )


def _excerpt(value: Any, limit: int = 60) -> str:
    """The value as JSON, cut to ``limit`` characters: enough to recognise it."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return _excerpt_text(text, limit)


def _excerpt_text(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    text = _one_line(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _one_line(text: str) -> str:
    """Line breaks escaped: the CLI prints a RecordError as one ``gpuwhy: error:`` line."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def _same_json(a: Any, b: Any) -> bool:
    """Equal as JSON values: ``true`` is not ``1`` (Python says it is)."""
    return type(a) is type(b) and a == b
