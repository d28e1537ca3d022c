"""RunRecord: the facts, the findings and the verdict of one run; the JSON report.

The JSON file *is* the record (after pyinstrument's sessions): raw fact sections are kept
so that ``gpuwhy report run.json`` re-renders it, and ``--recheck`` runs today's rules on
yesterday's facts. Loading never fills a missing section from the loading machine.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import typing
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Optional

from gpuwhy import __version__
from gpuwhy.facts import Facts, from_dict, to_dict
from gpuwhy.rules import run_rules
from gpuwhy.rules.base import Finding
from gpuwhy.verdict import gpu_usable, verdict

SCHEMA_VERSION = 1


class RecordError(ValueError):
    """A record that cannot be read: corrupt, of another schema, or invalid."""


@dataclass
class RunRecord:
    command: str                      # check | run | audit | watch | fix
    facts: Facts
    findings: list[Finding] = field(default_factory=list)
    not_checked: dict[str, str] = field(default_factory=dict)
    created: str = field(default_factory=lambda: _dt.datetime.now(_dt.timezone.utc)
                         .isoformat(timespec="seconds"))
    tool_version: str = __version__

    @classmethod
    def diagnose(cls, command: str, facts: Facts) -> "RunRecord":
        findings, not_checked = run_rules(facts)
        return cls(command=command, facts=facts, findings=findings, not_checked=not_checked)

    def recheck(self) -> "RunRecord":
        """The same facts through the current rules."""
        return RunRecord.diagnose(self.command, self.facts)

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
    def from_dict(cls, data: Any) -> "RunRecord":
        if not isinstance(data, dict) or "schema" not in data:
            raise RecordError("not a gpuwhy run record (no 'schema' field)")
        if data["schema"] != SCHEMA_VERSION:
            newer = isinstance(data["schema"], int) and data["schema"] > SCHEMA_VERSION
            raise RecordError(
                f"run record schema {data['schema']!r} is not supported by gpuwhy "
                f"{__version__} (schema {SCHEMA_VERSION})"
                + ("; upgrade gpuwhy to read it" if newer else ""))
        errors = validation_errors(data)
        if errors:
            raise RecordError(f"invalid run record: {errors[0]}")
        hints = typing.get_type_hints(Facts)
        facts = Facts(**{f.name: from_dict(hints[f.name], data.get(f.name))
                         for f in dataclasses.fields(Facts)})
        return cls(command=data.get("command", "run"), facts=facts,
                   findings=[from_dict(Finding, f) for f in data["findings"]],
                   not_checked=dict(data.get("not_checked") or {}),
                   created=data.get("created", ""),
                   tool_version=data["tool"]["version"])

    @classmethod
    def load(cls, path: str | Path) -> "RunRecord":
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
    return json.loads(resources.files("gpuwhy.schema").joinpath("run.schema.json")
                      .read_text(encoding="utf-8"))


def validation_errors(data: Any) -> list[str]:
    import jsonschema
    validator = jsonschema.Draft202012Validator(schema())
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
            for e in sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))]
