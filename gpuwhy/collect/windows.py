"""A sampled series in a bounded number of time windows, whatever the run's length.

The GPU sampler reads NVML at 10 Hz for as long as the job runs: 864,000 samples a day.
Kept one by one they would grow the process and the record without end; here they fold
into at most ``capacity`` windows. While the run is short every window is one sample (the
series is exactly the samples). When all windows are full, adjacent pairs merge: the
windows halve in number and double in width, and new samples fill windows of the new
width. Every window but the last holds ``samples_per_window`` samples; the series always
covers the run from its first sample to its last, at a resolution that coarsens as the
run grows.

Per window and column it keeps what the readers need to read the whole run exactly:
the number of samples with a value (None: the metric was not read then), their sum (a
mean weighted by that number is the mean of the samples), their minimum and maximum (a
one-sample peak survives any merge). A window's time is its first sample's; its last
sample's time is kept too, so the windows' spans are known. Cost: O(1) per sample, and
O(capacity) per merge, which comes once per ``capacity / 2`` windows filled.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Number = float | int
CAPACITY = 512


@dataclass(frozen=True)
class Batch:
    """Several samples of one column read at once (the driver's own utilisation buffer
    yields zero, one or more samples per tick): each counts as a sample of the window."""

    total: float
    count: int
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Batch | None:
        """None for no value: the column was not read then."""
        if not values:
            return None
        return cls(float(sum(values)), len(values), float(min(values)), float(max(values)))


def _add(a: Number | None, b: Number | None) -> Number | None:
    return b if a is None else a if b is None else a + b


def _low(a: Number | None, b: Number | None) -> Number | None:
    return b if a is None else a if b is None or a <= b else b


def _high(a: Number | None, b: Number | None) -> Number | None:
    return b if a is None else a if b is None or a >= b else b


def _mean(total: Number | None, known: int) -> Number | None:
    if total is None or known == 0:
        return None
    return total if known == 1 else total / known


class Windows:
    """``columns`` series sampled at the same times, in at most ``capacity`` windows."""

    def __init__(self, columns: int, capacity: int = CAPACITY) -> None:
        if capacity < 2 or capacity % 2:
            raise ValueError(f"capacity must be even and at least 2, not {capacity}")
        self.capacity = capacity
        self.samples_per_window = 1
        self.samples = 0
        self.t_first: list[float] = []
        self.t_last: list[float] = []
        self.count: list[int] = []
        self.known: list[list[int]] = [[] for _ in range(columns)]
        self.total: list[list[Number | None]] = [[] for _ in range(columns)]
        self.low: list[list[Number | None]] = [[] for _ in range(columns)]
        self.high: list[list[Number | None]] = [[] for _ in range(columns)]

    def __len__(self) -> int:
        return len(self.count)

    def add(self, t: float, values: Sequence[Number | Batch | None]) -> None:
        """One sample: a value per column (None where it was not read; a :class:`Batch`
        where several were read at once)."""
        self.samples += 1
        if self.count and self.count[-1] < self.samples_per_window:
            self.t_last[-1] = t
            self.count[-1] += 1
            for c, v in enumerate(values):
                if v is None:
                    continue
                if isinstance(v, Batch):
                    self.known[c][-1] += v.count
                    self.total[c][-1] = _add(self.total[c][-1], v.total)
                    self.low[c][-1] = _low(self.low[c][-1], v.low)
                    self.high[c][-1] = _high(self.high[c][-1], v.high)
                    continue
                self.known[c][-1] += 1
                self.total[c][-1] = _add(self.total[c][-1], v)
                self.low[c][-1] = _low(self.low[c][-1], v)
                self.high[c][-1] = _high(self.high[c][-1], v)
            return
        if len(self.count) == self.capacity:
            self._merge_pairs()
        self.t_first.append(t)
        self.t_last.append(t)
        self.count.append(1)
        for c, v in enumerate(values):
            if isinstance(v, Batch):
                self.known[c].append(v.count)
                self.total[c].append(v.total)
                self.low[c].append(v.low)
                self.high[c].append(v.high)
                continue
            self.known[c].append(0 if v is None else 1)
            self.total[c].append(v)
            self.low[c].append(v)
            self.high[c].append(v)

    def means(self, column: int) -> list[Number | None]:
        """Each window's mean of its known values: the value itself (its type kept) where
        the window holds one, None where it holds none."""
        return [_mean(s, k) for s, k in zip(self.total[column], self.known[column])]

    def _merge_pairs(self) -> None:
        """Windows 2i and 2i+1 become window i: all windows are full, so each pair holds
        twice ``samples_per_window`` samples, the new width."""
        self.t_first = self.t_first[0::2]
        self.t_last = self.t_last[1::2]
        self.count = [a + b for a, b in zip(self.count[0::2], self.count[1::2])]
        for c in range(len(self.known)):
            self.known[c] = [a + b for a, b in zip(self.known[c][0::2], self.known[c][1::2])]
            self.total[c] = [_add(a, b) for a, b in zip(self.total[c][0::2], self.total[c][1::2])]
            self.low[c] = [_low(a, b) for a, b in zip(self.low[c][0::2], self.low[c][1::2])]
            self.high[c] = [_high(a, b) for a, b in zip(self.high[c][0::2], self.high[c][1::2])]
        self.samples_per_window *= 2
