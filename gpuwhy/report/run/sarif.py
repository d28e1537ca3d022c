"""The findings as code-scanning results: a SARIF 2.1.0 log (``-f sarif``), which GitHub
code scanning (``github/codeql-action/upload-sarif``), GitLab and IDE viewers read.

One result per finding, at its ``file:line`` (sarif_places.py), with its rule's own
documentation (what ``gpuwhy explain ID`` prints) as the rule's help, and the fix as a
SARIF ``fixes`` entry where it is a text replacement. The rest of the record (the steps,
the timeline) is not code-scanning material: ``-f json`` keeps it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

from gpuwhy.finding import Finding
from gpuwhy.record import Record
from gpuwhy.report.base import Renderer
from gpuwhy.report.run.sarif_places import SRCROOT, Place, place, replacement_fix, root_uri
from gpuwhy.rules import REDIRECTS, RULES_BY_ID

SCHEMA_URI = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
FINGERPRINT = "gpuwhy/v1"

# high and medium make gpuwhy exit 1; low is worth a look. An info finding reports no
# problem (no straggler could be told apart): SARIF's kind "informational"
# with level "none", so that code scanning opens no alert a reviewer has to dismiss.
LEVELS = {"high": "error", "medium": "warning", "low": "note", "info": "none"}


class SarifRenderer(Renderer):
    name = "sarif"
    file_extension = "sarif"

    def __init__(self, *args: Any, root: str | None = None, **kwargs: Any) -> None:
        """``root``: the project directory (``%SRCROOT%``); default the current one."""
        super().__init__(*args, **kwargs)
        self.root = root

    def render(self, record: Record) -> str:
        root = Path(os.path.abspath(self.root or os.getcwd()))
        return json.dumps(sarif_log(record, root), indent=2) + "\n"


def sarif_log(record: Record, root: Path) -> dict[str, Any]:
    ids = sorted({f.id for f in record.findings})
    index = {rule_id: number for number, rule_id in enumerate(ids)}
    fallback = anchor(record, root)
    seen: dict[str, int] = {}
    return {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "gpuwhy",
                        "version": record.tool_version,
                        "rules": [descriptor(rule_id) for rule_id in ids],
                    }
                },
                "invocations": [invocation(record)],
                "originalUriBaseIds": {SRCROOT: {"uri": root_uri(root)}},
                "columnKind": "unicodeCodePoints",
                "results": [result(f, index[f.id], fallback, root, seen) for f in record.findings],
                "properties": {"command": record.command, "verdict": record.verdict},
            }
        ],
    }


def descriptor(rule_id: str) -> dict[str, Any]:
    """The rule's reportingDescriptor from its docstring, the text ``gpuwhy explain``
    prints (Markdown already); an id this gpuwhy does not know (a record from a newer
    one) gets its id alone."""
    rule = RULES_BY_ID.get(REDIRECTS.get(rule_id, rule_id))
    if rule is None:
        return {"id": rule_id}
    doc = rule.doc()
    group = rule_id.split(".")[0]
    return {
        "id": rule_id,
        "name": rule.__name__,
        "shortDescription": {"text": rule.summary()},
        "fullDescription": {"text": section(doc, "## What it detects") or rule.summary()},
        "help": {"text": doc, "markdown": doc},
        "defaultConfiguration": {"level": LEVELS[rule.severity]},
        "properties": {"tags": ["performance", "tensorflow", group], "status": rule.status},
    }


def section(doc: str, heading: str) -> str:
    """The text under ``heading`` of a rule's documentation, up to the next heading."""
    _, found, rest = doc.partition(heading + "\n")
    return rest.split("\n## ", 1)[0].strip() if found else ""


def invocation(record: Record) -> dict[str, Any]:
    """gpuwhy did its work (a record exists). How the program ended goes into the
    properties, not ``exitCode``: that is gpuwhy's own status, and ``gpuwhy report``
    re-renders a record without running anything."""
    found: dict[str, Any] = {"executionSuccessful": True}
    program = record.facts.program
    if program is not None:
        found["properties"] = {
            "program": list(program.command),
            "ended": program.ended,
            "exit_code": program.exit_code,
        }
    return found


def anchor(record: Record, root: Path) -> Place | None:
    """Where a finding that names no line goes: line 1 of the script ``gpuwhy run``
    ran, because code scanning shows only results with a line. Records of other
    commands name no such file (an audit's model is not source), so none."""
    program = record.facts.program
    if record.command not in ("run", "fix") or program is None or not program.command:
        return None
    script = program.command[0]
    return place(f"{script}:1", root) if script.endswith(".py") else None


def result(
    finding: Finding, index: int, fallback: Place | None, root: Path, seen: dict[str, int]
) -> dict[str, Any]:
    at = place(finding.location, root)
    found: dict[str, Any] = {
        "ruleId": finding.id,
        "ruleIndex": index,
        "level": LEVELS[finding.severity],
        "message": message(finding),
    }
    if finding.severity == "info":
        found["kind"] = "informational"
    where = at or fallback
    if where is not None:
        found["locations"] = [where.location()]
    found["partialFingerprints"] = {FINGERPRINT: fingerprint(finding, at, fallback, seen)}
    fix = replacement_fix(finding.fix, root)
    if fix is not None:
        found["fixes"] = [fix]
    found["properties"] = properties(finding)
    return found


def message(finding: Finding) -> dict[str, str]:
    """The title (and the expected gain) as text; with the fix as code in Markdown."""
    text = finding.title
    if finding.estimated_gain:
        text += f" ({finding.estimated_gain})"
    if not finding.fix:
        return {"text": text}
    return {"text": text, "markdown": f"{text}\n\n```\n{finding.fix}\n```"}


def fingerprint(
    finding: Finding, at: Place | None, fallback: Place | None, seen: dict[str, int]
) -> str:
    """The same for the same problem from run to run, so that code scanning keeps one
    alert: the id, the file and the source line's text (a line moved by an edit above
    it keeps it), the line number only where the source is not readable here. A
    finding with no line is one per id and file. Two findings alike get a count."""
    parts = [finding.id]
    if at is not None:
        text = at.text()
        parts += [at.artifact["uri"], text.strip() if text is not None else str(at.line)]
    elif fallback is not None:
        parts.append(fallback.artifact["uri"])
    key = "\0".join(parts)
    seen[key] = seen.get(key, 0) + 1
    return hashlib.sha256(f"{key}\0{seen[key]}".encode()).hexdigest()[:32]


def properties(finding: Finding) -> dict[str, Any]:
    """The severity as gpuwhy says it, the fix as text (a replacement or not), where it
    was said to be, and the evidence's top-level numbers (the reviewer's figures; the
    nested tables stay in the JSON record)."""
    found: dict[str, Any] = {"severity": finding.severity}
    if finding.location:
        found["location"] = finding.location
    if finding.fix:
        found["fix"] = finding.fix
    numbers: dict[str, Any] = {
        key: value
        for key, value in finding.evidence.items()
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    }
    workers = finding.evidence.get("workers")
    if isinstance(workers, list) and all(isinstance(w, str) for w in workers):
        numbers["workers"] = workers  # a merged record's finding: the workers it holds on
    if numbers:
        found["evidence"] = numbers
    return found
