"""The findings that appeared, disappeared or changed severity between two records.

A finding is the same finding when its id and place match (a fix that moves a line
keeps its id: the rest are then paired by id alone, in order of severity), so that a
fixed ``input.no-prefetch`` at train.py:40 is "gone" and a new one at train.py:90 is
"new", not one finding that moved.
"""

from __future__ import annotations

from gpuwhy.comparison.model import FindingChange
from gpuwhy.finding import SEVERITY_RANK, Finding


def finding_changes(before: list[Finding], after: list[Finding]) -> tuple[FindingChange, ...]:
    left = list(before)
    pairs: list[tuple[Finding | None, Finding | None]] = []
    unmatched = []
    for f in after:
        same = next((b for b in left if b.id == f.id and b.location == f.location), None)
        if same is not None:
            left.remove(same)
            pairs.append((same, f))
        else:
            unmatched.append(f)
    for f in unmatched:
        same = next((b for b in left if b.id == f.id), None)
        if same is not None:
            left.remove(same)
        pairs.append((same, f))
    pairs.extend((b, None) for b in left)
    out = []
    for b, a in pairs:
        change = _change(b, a)
        if change is None:
            continue
        shown = a or b
        assert shown is not None
        out.append(
            FindingChange(
                id=shown.id,
                change=change,
                severity_before=b.severity if b else None,
                severity_after=a.severity if a else None,
                title=shown.title,
                location=shown.location,
            )
        )
    order = {"new": 0, "worse": 1, "better": 2, "gone": 3}
    return tuple(
        sorted(
            out,
            key=lambda c: (
                order[c.change],
                SEVERITY_RANK[c.severity_after or c.severity_before or "info"],
                c.id,
            ),
        )
    )


def _change(before: Finding | None, after: Finding | None) -> str | None:
    if before is None:
        return "new"
    if after is None:
        return "gone"
    rank_b, rank_a = SEVERITY_RANK[before.severity], SEVERITY_RANK[after.severity]
    if rank_a < rank_b:
        return "worse"
    if rank_a > rank_b:
        return "better"
    return None
