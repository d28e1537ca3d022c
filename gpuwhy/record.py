"""Record: the facts, the findings and the verdict of one run; the JSON report.

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
from pathlib import Path
from typing import Any

from gpuwhy.derived.stage import Derived, derived, published
from gpuwhy.facts import Facts, TargetFacts, WorkersFacts, from_dict, to_dict
from gpuwhy.finding import Finding
from gpuwhy.json_input import TooDeep, loads
from gpuwhy.rules import RULES_BY_ID, run_rules
from gpuwhy.schema import SCHEMA_VERSION, refusal
from gpuwhy.verdict import gpu_usable, verdict
from gpuwhy.version import __version__

# why a record projected after its run has no profiled steps
NOT_PROFILED = "the run was not watched with --target: its steps are profiled only then"


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

    @property
    def derived(self) -> Derived:
        """The derivation stage's result for this record's facts (derived/stage.py):
        what the rules read, and the verdict and every renderer with them."""
        return derived(self.facts)

    @classmethod
    def diagnose(cls, command: str, facts: Facts) -> Record:
        derived(facts)  # the derivation stage, once, before the rules read it
        findings, not_checked = run_rules(facts)
        if facts.workers is not None:
            # gpuwhy merge: each worker's rules ran on its own facts; what they found is
            # carried in the section, and only the rules of the merge itself are listed
            # as not checked

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

    def projected_onto(self, requested: str) -> Record:
        """The same facts projected onto another GPU (``report --target``) and through
        the current rules. What the run measured for the projection is kept (its
        profiled steps, NVML's reading of its GPU); a run watched without ``--target``
        had no steps profiled, so the ops that stay on the CPU are not costed, and the
        projection's notes say so."""
        kept = self.facts.target
        target = (
            dataclasses.replace(kept, requested=requested)
            if kept is not None
            else TargetFacts(requested, unprofiled=NOT_PROFILED)
        )
        facts = dataclasses.replace(self.facts, target=target, projection=None)
        return Record.diagnose(self.command, facts)

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
            # the projection as the stage derived it, where readers of the file find it
            "projection": to_dict(self.derived.projection),
            "derived": to_dict(published(self.derived)),
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
        problem = refusal(data)
        if problem:
            raise RecordError(problem)
        hints = typing.get_type_hints(Facts)
        sections = {
            f.name: from_dict(hints[f.name], data.get(f.name)) for f in dataclasses.fields(Facts)
        }
        if sections["target"] is not None:
            # the file's projection is the stage's, written for its readers: derived again
            # from the target and the other sections (a record written before the target
            # section keeps its projection as it was projected then)
            sections["projection"] = None
        facts = Facts(**sections)
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
        if not text.strip():
            raise RecordError(f"{path} is empty")
        try:
            data = loads(text, str(path))
        except TooDeep as e:
            raise RecordError(str(e)) from None
        except ValueError as e:
            raise RecordError(f"{path} is not valid JSON ({e})") from None
        return cls.from_dict(data)


def carried_findings(workers: WorkersFacts) -> list[Finding]:
    """The workers' own findings as findings of the merged record: each says which
    workers it holds on."""
    named = [w.name for w in workers.workers if w.state != "missing" and w.state != "unreadable"]
    out = []
    for f in workers.findings:
        on = (
            f"on all {len(named)} workers"
            if len(f.workers) == len(named) and len(named) > 1
            else "on " + ", ".join(f.workers)
        )
        out.append(
            Finding(
                id=f.id,
                severity=f.severity,
                title=f"{f.title} ({on})",
                evidence={"workers": list(f.workers), **f.evidence},
                fix=f.fix,
                estimated_gain=f.estimated_gain,
                location=f.location,
                gain_value=f.gain_value,
            )
        )
    return out
