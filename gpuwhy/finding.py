"""Finding: one diagnosis, what rules return and what records, reports, merges and
metrics carry. Its own module so that every layer above the rules reads it without
importing them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SEVERITIES = ("high", "medium", "low", "info")
SEVERITY_RANK = {name: rank for rank, name in enumerate(SEVERITIES)}
# the evidence key of a finding whose measure is near its rule's line (rules/thresholds.py)
NEAR_KEY = "near_threshold"


@dataclass(frozen=True)
class Finding:
    """One diagnosis: what is wrong, the numbers that show it, the fix and the gain."""

    id: str
    severity: str
    title: str
    evidence: dict[str, Any] = field(default_factory=dict)
    fix: str | None = None  # code or commands to paste
    estimated_gain: str | None = None
    location: str | None = None  # file:line where known
    gain_value: float | None = None  # sortable size of the gain (fraction of step time)

    def __post_init__(self) -> None:
        if self.severity not in SEVERITY_RANK:
            raise ValueError(f"unknown severity {self.severity!r} for {self.id}")

    def sort_key(self) -> tuple:
        """Severity first, then the larger expected gain."""
        return (SEVERITY_RANK[self.severity], -(self.gain_value or 0.0), self.id)
