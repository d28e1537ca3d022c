"""Step times counted into the live step histogram's buckets as the steps come.

A live histogram must take in every step of a run of any length exactly once, at a cost
per update that does not grow with the run: steps beyond a loop's first ones are no
longer kept one by one, so they cannot be handed to the exporter later. Each loop
therefore counts its steps into these fixed buckets as it records them (on the
collectors' drain thread, never in a hook): a count per bucket and the seconds summed,
16 numbers whatever the run's length. The exporter publishes what those counts grew by.

``STEP_BUCKETS`` are the upper bounds (seconds, inclusive, as Prometheus' ``le``) of
``gpuwhy_step_seconds``; a last bucket holds the steps above the highest bound.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

STEP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)  # fmt: skip


def _empty() -> list[int]:
    return [0] * (len(STEP_BUCKETS) + 1)


@dataclass(eq=True)
class StepHistogram:
    """Steps per bucket (not cumulative: ``counts[i]`` is the steps in bucket ``i`` only,
    the last one above every bound) and their seconds summed."""

    counts: list[int] = field(default_factory=_empty)
    sum_s: float = 0.0

    def add(self, seconds: float, steps: int = 1) -> None:
        """``steps`` steps of ``seconds`` each (a negative ``steps`` takes them out)."""
        self.counts[bisect.bisect_left(STEP_BUCKETS, seconds)] += steps
        self.sum_s += seconds * steps

    def add_many(self, seconds: Any, steps: Any) -> None:
        """Steps of these columns (NumPy arrays): ``steps[i]`` steps of ``seconds[i]``."""
        import numpy as np

        buckets = np.searchsorted(STEP_BUCKETS, seconds, side="left")
        counts = np.bincount(buckets, weights=steps, minlength=len(self.counts))
        self.counts = [a + int(b) for a, b in zip(self.counts, counts.tolist())]
        self.sum_s += float((seconds * steps).sum())

    def merge(self, other: StepHistogram) -> None:
        self.counts = [a + b for a, b in zip(self.counts, other.counts)]
        self.sum_s += other.sum_s

    def copy(self) -> StepHistogram:
        return StepHistogram(list(self.counts), self.sum_s)

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[int]:
        """The counts at or below each bound, then the total (Prometheus' buckets)."""
        total, out = 0, []
        for n in self.counts:
            total += n
            out.append(total)
        return out

    def grown_since(self, before: StepHistogram) -> StepHistogram:
        """What this histogram holds beyond ``before`` (an earlier reading of the same
        steps), bucket by bucket, never below zero: a published count only grows, even
        where a step's time was revised between readings (a warm-up step called so
        later)."""
        return StepHistogram(
            [max(0, a - b) for a, b in zip(self.counts, before.counts)],
            max(0.0, self.sum_s - before.sum_s),
        )

    def highest(self, other: StepHistogram) -> StepHistogram:
        """Bucket by bucket, the larger of the two (what has been published of them)."""
        return StepHistogram(
            [max(a, b) for a, b in zip(self.counts, other.counts)], max(self.sum_s, other.sum_s)
        )


# Per loop of a run (a name that stays the loop's from one snapshot to the next), its
# steps so far: what a live update reads.
LoopHistograms = tuple[tuple[str, StepHistogram], ...]
