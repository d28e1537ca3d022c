"""What :func:`gpuwhy.optimize.input_pipeline.optimize` hands back: the dataset to use and the
record's ``InputFix`` facts, with the few properties a caller asks of them (applied,
speed-up, worth it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuwhy.comparison.model import Change
from gpuwhy.comparison.work import ratio_between
from gpuwhy.facts import InputFix, PipelineChange, PipelineRate
from gpuwhy.fixes.input_fix_text import NO_GAIN, input_fix_lines
from gpuwhy.optimize.measure import Throughput


@dataclass(frozen=True)
class LeftAlone:
    """A fix gpuwhy did not apply, and why."""

    stage: str
    location: str | None
    reason: str


@dataclass(frozen=True)
class SameElements:
    """Whether the rewritten pipeline gave the original's elements, and how that was checked."""

    same: bool | None  # None: could not be checked
    how: str

    def __bool__(self) -> bool:
        return bool(self.same)


@dataclass
class OptimizeResult:
    """What :func:`optimize` did. ``dataset`` is the pipeline to use (the original when
    nothing changed or the rewrite was refused)."""

    dataset: Any
    original: Any
    changes: list[PipelineChange] = field(default_factory=list)
    left_alone: list[LeftAlone] = field(default_factory=list)
    before: Throughput | None = None
    after: Throughput | None = None
    ideal: Throughput | None = None
    gap_closed: float | None = None
    same_elements: SameElements = SameElements(None, "not checked")
    refused: str | None = None
    notes: list[str] = field(default_factory=list)
    keep_order: bool = True

    @property
    def applied(self) -> bool:
        return bool(self.changes) and self.refused is None

    @property
    def speedup(self) -> float | None:
        if self.before and self.after and self.before.median > 0:
            return self.after.median / self.before.median
        return None

    def report(self) -> str:
        """A short table: throughput before/after/ideal, the changes with their code, and
        what was left as written."""

        return "\n".join(input_fix_lines(self.to_facts("this dataset")))

    __str__ = report

    @property
    def worth_it(self) -> bool:
        """False when measuring showed the rewrite no faster than the original: less than
        NO_GAIN faster, or a gain the timed passes cannot tell from their own spread
        (:attr:`gain`'s interval reaches 1.0, and some pass of the original was faster
        than some pass of the rewrite). Then the original is the one to keep."""
        if not self.before or not self.after or self.refused:
            return True  # not measured: the changes stand on their reasons
        if self.after.median < self.before.median * (1 + NO_GAIN):
            return False
        gain = self.gain
        # or every pass of the rewrite faster than every pass of the original: with two
        # passes a side, Student's interval is wide, while the ranks alone say it
        return gain is None or gain.low > 1.0 or self.after.min > self.before.max

    @property
    def gain(self) -> Change | None:
        """The rewrite's rate over the original's, with the interval its timed passes
        give (each pass one observation, Student's t on the logs); None with fewer than
        two passes a side."""
        if not self.before or not self.after:
            return None
        before = [r for r in self.before.rates if 0 < r < float("inf")]
        after = [r for r in self.after.rates if 0 < r < float("inf")]
        if len(before) < 2 or len(after) < 2:
            return None
        return ratio_between("elements_per_second", before, after)

    def to_facts(
        self, name: str, location: str | None = None, iterated_at: tuple[str, ...] = ()
    ) -> InputFix:
        """This result as the record's ``input_fixes`` facts (what reports render)."""
        return InputFix(
            dataset=name,
            location=location,
            iterated_at=tuple(iterated_at),
            before=_rate_facts(self.before),
            after=_rate_facts(self.after),
            ideal=_rate_facts(self.ideal),
            gap_closed=self.gap_closed,
            speedup=self.speedup,
            same_elements=self.same_elements.same,
            elements_checked=self.same_elements.how,
            changes=tuple(self.changes),
            left_alone=tuple(
                f"{a.location + '  ' if a.location else ''}{a.stage}: {a.reason}"
                for a in self.left_alone
            ),
            refused=self.refused,
            worth_it=self.worth_it,
            notes=tuple(self.notes),
        )


def _rate_facts(t: Throughput | None) -> PipelineRate | None:
    return None if t is None else t.rate()
