"""Rules' measured thresholds moved a little: is a finding's measure near its line?

Most rules fire on a measured share against a threshold (input.bound at a 5 % input
wait, gpu.underutilized under 50 % busy), and runs of one unchanged program measure a
share a little differently each time. A finding whose measure sits within a fifth of
its line is there in one run and not in the next. Two places ask: ``gpuwhy diff``
(comparison/near_threshold.py), which asks the other side's runs again with the
thresholds a fifth *looser* before it calls a finding new; and every run's own rules,
which ask again with them a fifth *stricter*: a finding that does not hold then (or not
at its severity) says so in its evidence (``near_threshold``), so that one run's report
does not present as settled what the next run may not report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from gpuwhy.finding import NEAR_KEY, SEVERITY_RANK, Finding
from gpuwhy.rules.base import Rule

NEAR = 0.2  # a threshold is moved by this share of itself


def shifted(rule_cls: type[Rule], by: float) -> dict[str, Any] | None:
    """The rule's options with its measured thresholds made stricter by ``by`` of
    themselves (floors higher, ceilings lower; a negative ``by`` loosens them); None for
    a rule without any."""
    if not rule_cls.measured_thresholds:
        return None
    options = dict(rule_cls.options)
    for name, kind in rule_cls.measured_thresholds.items():
        options[name] = options[name] * (1 + by if kind == "floor" else 1 - by)
    return options


def loosened(rule_cls: type[Rule]) -> dict[str, Any] | None:
    return shifted(rule_cls, -NEAR)


def marked_near(
    rule_cls: type[Rule],
    findings: list[Finding],
    stricter: Callable[[dict[str, Any]], list[Finding]],
) -> list[Finding]:
    """``findings`` of ``rule_cls``, each that the rule does not give at its severity
    with its thresholds a fifth stricter (``stricter(options)`` runs it so) marked as
    near its threshold."""
    options = shifted(rule_cls, NEAR)
    if options is None or not findings:
        return findings
    held = stricter(options)
    return [f if _holds(f, held) else _marked(f, held) for f in findings]


def _holds(finding: Finding, held: list[Finding]) -> bool:
    return any(_same(finding, h) and as_severe(h, finding.severity) for h in held)


def _same(a: Finding, b: Finding) -> bool:
    return a.id == b.id and a.location == b.location


def as_severe(finding: Finding, severity: str) -> bool:
    """``finding`` is at ``severity`` or worse."""
    return SEVERITY_RANK[finding.severity] <= SEVERITY_RANK[severity]


def _marked(finding: Finding, held: list[Finding]) -> Finding:
    weaker = next((h for h in held if _same(finding, h)), None)
    outcome = f"only at {weaker.severity}" if weaker is not None else "not at all"
    note = (
        f"its measure is near the rule's line: with the thresholds a fifth stricter this "
        f"run gives it {outcome}, so another run of the same program may not give it "
        f"at {finding.severity}"
    )
    return replace(finding, evidence={**finding.evidence, NEAR_KEY: note})
