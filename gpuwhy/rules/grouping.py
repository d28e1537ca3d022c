"""One finding per cause: the same rule on the same culprit in several pipelines.

A program often builds several pipelines from one piece of code (a helper called for the
train and the test split, a benchmark that wraps one generator five ways). Each pipeline
gets its own finding from the rules, and the same cause would be reported, with the same
fix, once per pipeline. The findings of one rule that point at the same file:line are
one cause: they are merged here into the most severe of them, which lists the pipelines
it holds on inside its evidence.

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


def group_by_cause(findings: list[Finding]) -> list[Finding]:
    """``findings`` with each cause once, in the order of each cause's first finding."""
    groups: dict[tuple[str, str], list[Finding]] = {}
    order: list[tuple[str, str] | int] = []
    for index, finding in enumerate(findings):
        key = _cause(finding)
        if key is None:
            order.append(index)
            continue
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(finding)
    merged: list[Finding] = []
    for entry in order:
        if isinstance(entry, int):
            merged.append(findings[entry])
        else:
            merged.append(_merge(groups[entry]))
    return merged


def _cause(finding: Finding) -> tuple[str, str] | None:
    if finding.location is None or PIPELINE_KEY not in finding.evidence:
        return None
    return finding.id, finding.location


def _merge(group: list[Finding]) -> Finding:
    if len(group) == 1:
        return group[0]
    lead = min(group, key=Finding.sort_key)
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
