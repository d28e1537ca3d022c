"""Rule: the rules' side of collect -> facts -> rules -> findings -> report.

A rule is a class whose docstring *is* its documentation (what ``gpuwhy explain ID``
prints), after ruff's rules: fixed headings, named options with defaults, and a
``check(facts, options)`` that reads facts only and returns findings. Rules never import
TensorFlow or NVML, so each one is tested from a small hand-made facts object.
"""

from __future__ import annotations

import inspect
import re
from typing import Any, ClassVar

from gpuwhy.facts import Facts
from gpuwhy.finding import SEVERITIES, SEVERITY_RANK, Finding

__all__ = ["SEVERITIES", "SEVERITY_RANK", "STATUSES", "Finding", "Rule"]

# stable: implemented and calibrated. preview: implemented, thresholds still moving.
# planned: documented and registered, its collector does not exist yet (never fires).
# removed: kept so that its id is never reused.
STATUSES = ("stable", "preview", "planned", "removed")

REQUIRED_HEADINGS = (
    "## What it detects",
    "## Why is this slow?",
    "## Example",
    "Use instead:",
    "## Options",
)


class Rule:
    """Base class. Subclasses set the attributes below and implement :meth:`check`."""

    id: ClassVar[str]
    severity: ClassVar[str] = "medium"
    status: ClassVar[str] = "planned"
    since: ClassVar[str] = "0.1.0"
    needs: ClassVar[tuple[str, ...]] = ()
    # sections of which at least one must be there (a rule with two ways to decide)
    needs_any: ClassVar[tuple[str, ...]] = ()
    options: ClassVar[dict[str, Any]] = {}
    question: ClassVar[str] = ""  # the user's question this rule answers
    redirect_from: ClassVar[tuple[str, ...]] = ()  # old ids that now mean this rule
    # The options that are thresholds on a measured quantity, which moves between runs of
    # one program: "floor" where the rule fires (or grows more severe) at or above the
    # option, "ceiling" at or below it. `gpuwhy diff` loosens them to tell a new finding
    # from a measure that only crossed its line (comparison/near_threshold.py).
    measured_thresholds: ClassVar[dict[str, str]] = {}

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        """Planned rules have no collector yet; they are listed, never run."""
        return []

    # -- documentation -------------------------------------------------------------
    @classmethod
    def doc(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def summary(cls) -> str:
        return cls.doc().splitlines()[0] if cls.__doc__ else ""

    @classmethod
    def documented_options(cls) -> list[str]:
        """Option names listed under ``## Options`` as ``- `name` ...`` bullets."""
        doc = cls.doc()
        part = doc.split("## Options", 1)[1] if "## Options" in doc else ""
        return re.findall(r"^- `([a-z_0-9]+)`", part, flags=re.MULTILINE)

    def finding(self, title: str, **kwargs: Any) -> Finding:
        """A finding of this rule with its default severity unless given."""
        kwargs.setdefault("severity", self.severity)
        return Finding(id=self.id, title=title, **kwargs)

    def overruled(
        self, predicted: list[Finding], measured: str, evidence: dict[str, Any]
    ) -> list[Finding]:
        """A capture measured what the traced graph predicted, and found no problem:
        where the prediction alone fired, an info finding saying both, the measurement
        trusted (none where neither did)."""
        if not predicted:
            return []
        return [
            self.finding(
                f"Predicted: {predicted[0].title}; but {measured}: the measurement is trusted",
                severity="info",
                evidence={**evidence, "predicted": predicted[0].title},
            )
        ]
