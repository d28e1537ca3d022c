"""One finding per cause: the same rule on the same culprit in several pipelines.

A program often builds several pipelines from one piece of code (a helper called for the
train and the test split, a benchmark that wraps one generator five ways). Each pipeline
gets its own finding from the rules, and the same cause would be reported, with the same
fix, once per pipeline. The findings of one rule that point at the same code are one
cause: they are merged here into the most severe of them, which lists the pipelines it
holds on inside its evidence.

"The same code" is the finding's file:line together with those its evidence rows name
(the Python stages of input.python-function, say): a pipeline led by its generator and
one led by its map, both running the generator and the map, are one cause, whichever
stage each run timed as the slowest. A finding whose code lies inside another's is
merged into it too, since that one's fix covers it; two that only share some code stay
apart, each with its own fix.

Only per-pipeline findings are merged (their evidence names a ``pipeline``): two
findings of another rule at one line are different problems (two op types issued from
one line, say) and stay apart.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from gpuwhy.finding import Finding

# The evidence key per-pipeline findings carry; merged, it becomes ``pipelines``.
PIPELINE_KEY = "pipeline"
PIPELINES_KEY = "pipelines"


@dataclasses.dataclass
class _Cause:
    """The findings of one rule on one piece of code, and the code they name."""

    rule: str
    code: frozenset[str]
    findings: list[Finding]

    def takes(self, rule: str, code: frozenset[str]) -> bool:
        return rule == self.rule and (code <= self.code or code >= self.code)


def group_by_cause(findings: list[Finding]) -> list[Finding]:
    """``findings`` with each cause once, in the order of each cause's first finding."""
    order: list[_Cause | Finding] = []
    causes: list[_Cause] = []
    for finding in findings:
        code = _code(finding)
        if not code:
            order.append(finding)
            continue
        cause = next((c for c in causes if c.takes(finding.id, code)), None)
        if cause is None:
            cause = _Cause(finding.id, code, [])
            causes.append(cause)
            order.append(cause)
        cause.code |= code
        cause.findings.append(finding)
    return [entry if isinstance(entry, Finding) else _merge(entry) for entry in order]


def _code(finding: Finding) -> frozenset[str]:
    """The file:lines a per-pipeline finding names: its own and its evidence rows'
    (empty for other findings, which are never merged)."""
    if finding.location is None or PIPELINE_KEY not in finding.evidence:
        return frozenset()
    rows = (
        row
        for value in finding.evidence.values()
        if isinstance(value, list)
        for row in value
        if isinstance(row, dict)
    )
    named = {row["location"] for row in rows if isinstance(row.get("location"), str)}
    return frozenset({finding.location, *named})


def pipelines_named(finding: Finding) -> list[str]:
    """The pipelines (as ``pipeline_name`` says them) a finding is about: its own, or,
    where one cause in several pipelines made one finding, each of its group's, the most
    severe first."""
    own = finding.evidence.get(PIPELINE_KEY)
    if isinstance(own, str):
        return [own]
    rows = finding.evidence.get(PIPELINES_KEY)
    if not isinstance(rows, list):
        return []
    return [r[PIPELINE_KEY] for r in rows if isinstance(r, dict) and PIPELINE_KEY in r]


def _merge(cause: _Cause) -> Finding:
    """The most severe finding naming all the cause's code, at the group's severity."""
    group = cause.findings
    if len(group) == 1:
        return group[0]
    whole = [f for f in group if _code(f) == cause.code]
    lead = min(whole, key=Finding.sort_key)
    severity = min(group, key=Finding.sort_key).severity
    ordered = sorted(group, key=Finding.sort_key)
    start = _common_prefix_end([f.title for f in ordered])
    rows = [
        {
            PIPELINE_KEY: f.evidence[PIPELINE_KEY],
            "severity": f.severity,
            "finding": _figures(f.title, start),
        }
        for f in ordered
    ]
    evidence: dict[str, Any] = {}
    for key, value in lead.evidence.items():
        if key == PIPELINE_KEY:
            evidence[PIPELINES_KEY] = rows
        else:
            evidence[key] = value
    return dataclasses.replace(
        lead,
        severity=severity,
        title=f"{lead.title} (one cause, in {len(group)} pipelines)",
        evidence=evidence,
    )


def _figures(title: str, start: int) -> str:
    """What a row shows of its finding: the title past what all titles share, or past
    its first ": " (where the titles differ early, in a stage's run name, say)."""
    if start > 0:
        return title[start:]
    _, colon, rest = title.partition(": ")
    return rest if colon else title


def _common_prefix_end(titles: list[str]) -> int:
    """Where the titles stop agreeing, at a word boundary after ": " or ", ": each row
    then shows what differs (its figures), not the cause the finding's title names."""
    prefix = os.path.commonprefix(titles)
    cut = max(prefix.rfind(": "), prefix.rfind(", "))
    return cut + 2 if cut >= 0 else 0
