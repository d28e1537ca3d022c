"""The findings that appeared, disappeared or changed severity between two records.

A finding is the same finding when its id and place match (a fix that moves a line
keeps its id: the rest are then paired by id alone, in order of severity), so that a
fixed ``input.no-prefetch`` at train.py:40 is "gone" and a new one at train.py:90 is
"new", not one finding that moved.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuwhy.comparison.model import FindingChange
from gpuwhy.derived.stage import derived
from gpuwhy.facts import Facts
from gpuwhy.finding import SEVERITY_RANK, Finding


def projections_apart(before: Sequence[Facts], after: Sequence[Facts]) -> str | None:
    """Why the two sides' projections cannot be compared (one side projected the step
    onto a GPU, ``gpuwhy run --target``, the other did not or onto another); None where
    they can (the same GPU, or neither side projected)."""
    targets_b = {_target(f) for f in before}
    targets_a = {_target(f) for f in after}
    if targets_b == targets_a and len(targets_b) == 1:
        return None

    def said(targets: set[str | None]) -> str:
        named = sorted(t for t in targets if t)
        return " and ".join(named) if named else "no GPU (no --target)"

    return (
        f"BEFORE projected onto {said(targets_b)}, AFTER onto {said(targets_a)}: the "
        "findings drawn from a projection are not compared"
    )


def _target(facts: Facts) -> str | None:
    projection = derived(facts).projection
    return projection.gpu if projection is not None else None


def from_a_projection(finding: Finding | None) -> bool:
    """A finding the projection made or sized: its evidence says what it projects."""
    return finding is not None and any(k.startswith("projected") for k in finding.evidence)


def finding_changes(
    before: list[Finding], after: list[Finding], projected_apart: bool = False
) -> tuple[FindingChange, ...]:
    """The findings new, gone, worse or better; ``projected_apart``: the sides did not
    project onto the same GPU, so a finding the projection made or sized on either side
    is not a change of the program's."""
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
        if projected_apart and (from_a_projection(b) or from_a_projection(a)):
            continue
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
