"""A finding that only crossed its line is not a new finding.

Most rules fire on a measured share against a threshold: input.bound at a 5 % input
wait, gpu.underutilized under 50 % busy. Runs of one unchanged program measure such a
share a little differently each time (three runs of one 40 ms step waited 5.0 %, 5.5 %
and 6.0 % of it), so a measure that sits near its threshold makes a finding that is
there in one run and not in the next: "new" to ``gpuwhy diff`` and a failed
``--fail-on new:medium`` gate, with nothing changed.

So before calling a finding new (or worse), the other side's runs are asked again with
the rule's measured thresholds (``Rule.measured_thresholds``) a fifth looser: where more
than half of them reach it there too, at that severity, the measure only moved across
the line. The change is set aside from the findings that changed (the comparison keeps
it apart, the gate does not fail on it and says so), and a note says why, with the
thresholds. The same holds the other way for "gone" and "better". Rules on
fixed facts (a float64 op, a missing kernel) declare no measured threshold: their
findings are new or gone as recorded.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuwhy.comparison.model import FindingChange
from gpuwhy.record import Record
from gpuwhy.rules import RULES_BY_ID, run_rule, thresholds


def settled(
    changes: Sequence[FindingChange], before: Sequence[Record], after: Sequence[Record]
) -> tuple[tuple[FindingChange, ...], tuple[FindingChange, ...]]:
    """``changes`` split: those that stand, and those whose measure only crossed its
    threshold (:func:`note` says why for each)."""
    kept: list[FindingChange] = []
    crossed: list[FindingChange] = []
    for change in changes:
        other = before if _appeared(change) else after
        severity = _severity(change)
        if severity is not None and reached_near(change.id, change.location, severity, other):
            crossed.append(change)
        else:
            kept.append(change)
    return tuple(kept), tuple(crossed)


def loosened(rule_id: str) -> dict[str, float] | None:
    """The rule's options with its measured thresholds a fifth looser (floors lower,
    ceilings higher); None for a rule without any."""
    rule = RULES_BY_ID.get(rule_id)
    return None if rule is None else thresholds.loosened(rule)


def reached_near(
    rule_id: str, location: str | None, severity: str, records: Sequence[Record]
) -> bool:
    """More than half of ``records`` have the finding, at ``severity`` or worse, with the
    rule's measured thresholds loosened: at its place where any has it there, else
    anywhere (as findings.py pairs a finding that moved)."""
    options = loosened(rule_id)
    if options is None or not records:
        return False
    rule = RULES_BY_ID[rule_id]
    held = 0
    for record in records:
        found = [f for f in run_rule(rule, record.facts, options) if f.id == rule_id]
        same = [f for f in found if f.location == location] or found
        if any(thresholds.as_severe(f, severity) for f in same):
            held += 1
    return 2 * held > len(records)


def _appeared(change: FindingChange) -> bool:
    return change.change in ("new", "worse")


def _severity(change: FindingChange) -> str | None:
    """The severity the change is about: AFTER's where it appeared, else BEFORE's."""
    return change.severity_after if _appeared(change) else change.severity_before


def note(change: FindingChange) -> str:
    """Why a change :func:`settled` set aside is not called what the records say."""
    where = f" at {change.location}" if change.location else ""
    rule = RULES_BY_ID[change.id]
    limits = ", ".join(f"{name} {rule.options[name]:g}" for name in rule.measured_thresholds)
    side, other = ("AFTER", "BEFORE") if _appeared(change) else ("BEFORE", "AFTER")
    return (
        f"{change.id}{where} ({_severity(change)} in {side}) not called {change.change}: "
        f"most of {other}'s runs reach it too with its thresholds ({limits}) a fifth "
        "looser, so its measure only moved across the line, as runs of unchanged code do"
    )
