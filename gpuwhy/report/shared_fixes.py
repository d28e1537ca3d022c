"""A fix two findings share, given once: one cause seen by two rules (input.bound and
input.python-function on one stage) prints one fix, and the second finding points at the
first one's. The terminal and the HTML page say it the same way from here."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gpuwhy.finding import Finding


def same_fix_as(
    findings: Sequence[Finding], shows_fix: Callable[[int, Finding], bool] = lambda n, f: True
) -> list[int | None]:
    """Per finding (numbered from 1), the number of the first finding before it that
    shows the same fix in full, or None; ``shows_fix(number, finding)``: whether that
    finding's fix is shown (the terminal leaves out a brief finding's)."""
    first: dict[str, int] = {}
    out: list[int | None] = []
    for number, finding in enumerate(findings, 1):
        earlier = first.get(finding.fix) if finding.fix else None
        out.append(earlier)
        if finding.fix and earlier is None and shows_fix(number, finding):
            first[finding.fix] = number
    return out
