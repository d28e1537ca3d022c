"""Quantiles of a stream of any length, within a stated relative error.

A day of 1 ms steps is 86 million step times: the median and p90 of those cannot come
from a list. A DDSketch (Masson, Rim and Lee, VLDB 2019; Datadog's ``ddsketch``
package) keeps counts in logarithmic buckets: any quantile it returns is within
``RELATIVE_ACCURACY`` (1 %) of the true value *of that rank*, whatever the
distribution, and two sketches merge exactly (their buckets add), so windows of a
timeline merge as the run grows. Memory is one counter per bucket between the smallest
and largest value; ``BIN_LIMIT`` caps it (the lowest buckets collapse first, so only
quantiles below about the 1st percentile could lose accuracy): about 4 KB per sketch
for 1 ms steps with outliers up to seconds. One ``add`` costs about a microsecond, so
sketches are fed from the collectors' background threads, never from a hook, and many
values at once where there are many (:meth:`Sketch.add_many`: a bucket's values in one
call).
"""

from __future__ import annotations

import math
from typing import Any

from ddsketch import LogCollapsingLowestDenseDDSketch

RELATIVE_ACCURACY = 0.01
BIN_LIMIT = 2048


class Sketch:
    """Quantiles of positive numbers (seconds), within ``RELATIVE_ACCURACY``."""

    __slots__ = ("_sketch",)

    def __init__(self) -> None:
        self._sketch = LogCollapsingLowestDenseDDSketch(RELATIVE_ACCURACY, bin_limit=BIN_LIMIT)

    def add(self, value: float, weight: float = 1.0) -> None:
        self._sketch.add(max(0.0, value), weight)

    def add_many(self, values: Any) -> None:
        """Every value of ``values`` (a NumPy array), a bucket at a time: the values that
        fall in one bucket are added as one of them weighted by their number. A
        quantile reads only the buckets' counts, so it is what adding them one by one
        gives (a value on a bucket's very edge may land in the next: within the
        stated accuracy still)."""
        import numpy as np

        if not len(values):
            return
        values = np.maximum(values, 0.0)
        positive = values[values > 0.0]
        zeros = len(values) - len(positive)
        if zeros:
            self._sketch.add(0.0, float(zeros))
        if not len(positive):
            return
        keys = np.ceil(np.log(positive) / math.log(self._sketch._mapping.gamma))
        _, first, counts = np.unique(keys, return_index=True, return_counts=True)
        add = self._sketch.add
        for index, count in zip(first.tolist(), counts.tolist()):
            add(float(positive[index]), float(count))

    def merge(self, other: Sketch) -> None:
        if other.count:
            self._sketch.merge(other._sketch)

    def copy(self) -> Sketch:
        twin = Sketch()
        twin.merge(self)
        return twin

    @property
    def count(self) -> float:
        return self._sketch.count

    def quantile(self, q: float) -> float | None:
        """The value at quantile ``q`` (0..1), None while empty."""
        if not self._sketch.count:
            return None
        value = self._sketch.get_quantile_value(q)
        return None if value is None else max(0.0, value)
