"""Record: the facts, the findings and the verdict of one run; the JSON report.

The JSON file *is* the record (after pyinstrument's sessions): raw fact sections are kept
so that ``gpuwhy report run.json`` re-renders it, and ``--recheck`` runs today's rules on
yesterday's facts. Loading never fills a missing section from the loading machine.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import functools
import json
import typing
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from gpuwhy.facts import Facts, from_dict, to_dict
from gpuwhy.finding import Finding
from gpuwhy.rules import run_rules
from gpuwhy.verdict import gpu_usable, verdict
from gpuwhy.version import __version__

SCHEMA_VERSION = 1


class RecordError(ValueError):
    """A record that cannot be read: corrupt, of another schema, or invalid."""


@dataclass
class Record:
    command: str  # check | run | audit | watch | fix | merge
    facts: Facts
    findings: list[Finding] = field(default_factory=list)
    not_checked: dict[str, str] = field(default_factory=dict)
    created: str = field(
        default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    )
    tool_version: str = __version__

    @classmethod
    def diagnose(cls, command: str, facts: Facts) -> Record:
        findings, not_checked = run_rules(facts)
        if facts.workers is not None:
            # gpuwhy merge: each worker's rules ran on its own facts; what they found is
            # carried in the section, and only the rules of the merge itself are listed
            # as not checked
            from gpuwhy.modes.merge import carried_findings
            from gpuwhy.rules import RULES_BY_ID

            findings = sorted(findings + carried_findings(facts.workers), key=Finding.sort_key)
            not_checked = {
                rule: why
                for rule, why in not_checked.items()
                if "workers" in RULES_BY_ID[rule].needs
            }
        return cls(command=command, facts=facts, findings=findings, not_checked=not_checked)

    def recheck(self) -> Record:
        """The same facts through the current rules."""
        return Record.diagnose(self.command, self.facts)

    @property
    def verdict(self) -> str:
        return verdict(self.facts, self.findings)

    # -- JSON ------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA_VERSION,
            "tool": {"name": "gpuwhy", "version": self.tool_version},
            "command": self.command,
            "created": self.created,
            "verdict": {"text": self.verdict, "gpu_usable": gpu_usable(self.facts)},
            **{f.name: to_dict(getattr(self.facts, f.name)) for f in dataclasses.fields(Facts)},
            "findings": [to_dict(f) for f in self.findings],
            "not_checked": dict(self.not_checked),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False)

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_json() + "\n", encoding="utf-8")
        return path

    @classmethod
    def from_dict(cls, data: Any) -> Record:
        if not isinstance(data, dict) or "schema" not in data:
            raise RecordError("not a gpuwhy run record (no 'schema' field)")
        if not _same_json(data["schema"], SCHEMA_VERSION):
            newer = type(data["schema"]) is int and data["schema"] > SCHEMA_VERSION
            raise RecordError(
                f"run record schema {_excerpt(data['schema'])} is not supported by gpuwhy "
                f"{__version__} (schema {SCHEMA_VERSION})"
                + ("; upgrade gpuwhy to read it" if newer else "")
            )
        errors = validation_errors(data)
        if errors:
            raise RecordError(f"invalid run record: {errors[0]}")
        hints = typing.get_type_hints(Facts)
        facts = Facts(
            **{
                f.name: from_dict(hints[f.name], data.get(f.name))
                for f in dataclasses.fields(Facts)
            }
        )
        return cls(
            command=data.get("command", "run"),
            facts=facts,
            findings=[from_dict(Finding, f) for f in data["findings"]],
            not_checked=dict(data.get("not_checked") or {}),
            created=data.get("created", ""),
            tool_version=data["tool"]["version"],
        )

    @classmethod
    def load(cls, path: str | Path) -> Record:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as e:
            raise RecordError(f"cannot read {path}: {e.strerror or e}") from None
        except UnicodeDecodeError:
            raise RecordError(f"{path} is not a text file") from None
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as e:
            raise RecordError(f"{path} is not valid JSON ({e})") from None
        return cls.from_dict(data)


def schema() -> dict[str, Any]:
    """The published JSON Schema of the record (gpuwhy/schema/run.schema.json)."""
    return json.loads(
        resources.files("gpuwhy.schema").joinpath("run.schema.json").read_text(encoding="utf-8")
    )


def validation_errors(data: Any) -> list[str]:
    """Every way ``data`` breaks the schema, one short line each, in document order.

    jsonschema's own messages quote the whole offending instance (a 3,000-character
    section on one line when a field deep inside it is wrong) and, for the ``oneOf`` of
    an optional section, say only that the section matched neither "null" nor the
    section. A line here names the deepest field at fault, what the schema expects
    there and what the file has: ``environment/tensorflow/build/cuda_compute_capabilities:
    expected an array of strings or null, got integer (7)``.
    """
    errors = sorted(_validator().iter_errors(data), key=_document_order)
    return [_error_line(_cause(e)) for e in errors]


def _document_order(error) -> list[tuple[bool, Any]]:
    """Sort key of an error's place: list indices compare as numbers (2 before 10)."""
    return [(isinstance(k, str), k) for k in error.absolute_path]


@functools.lru_cache(maxsize=1)
def _validator():
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
    return strict(schema())


def _is_integer(checker: Any, value: Any) -> bool:
    """JSON's integers as Python's json reads them; bool is an int to Python, not to JSON."""
    return isinstance(value, int) and not isinstance(value, bool)


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
    node: Any = _validator().schema
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
