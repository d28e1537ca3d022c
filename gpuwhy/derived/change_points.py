"""Where a series of window medians moved and stayed moved: change points, or a steady
slope, found with a documented method whose false-alarm rate is measured
(``benchmarks/bench_drift.py``).

A run's step time is read as one median per timeline window. Its noise is not known in
advance (a shared host, an epoch boundary, a validation pass in a window), so the method
estimates it from the series itself and only calls a change that stands far above it:

- **Values**: the log of each window's median: a ratio is a difference of logs, so +38 %
  reads alike at 10 ms and at 1 s.
- **Noise scale** sigma: 1.4826 x the median absolute deviation of the first differences,
  / sqrt(2). A change moves one difference out of n, a spike two: neither moves the median
  of them, so the scale is the window-to-window noise alone.
- **Binary segmentation** (Vostrikova 1981; what ``ruptures.Binseg`` does): in a segment,
  the split ``k`` that least squares places best (on the series smoothed by a running
  median) is kept when its score is at least ``min_score``, the shift
  at least ``min_change``, each side at least ``min_windows`` windows and ``min_steps``
  steps, and the new level holds: at least ``persistence`` of the windows after it lie
  beyond the midpoint of the two levels. Both sides are then searched again.
- **Score**: the Hodges-Lehmann shift of the two sides (the median of every difference
  right - left) over its standard error, ``sigma * sqrt(pi/3) * sqrt(1/n_left +
  1/n_right)``. It is as robust as the difference of the two medians (a slow window moves
  neither) and 95 % as efficient as the difference of the means on normal noise, where
  the two medians are 64 %: on the windows' medians of 12 real runs of a loop whose
  Python slows mid-run (``tests/corpus/programs/drift_growing_list.py``, +27-89 % on a
  shared host), the best split's score rose 1.0-1.8x (3.5 -> 4.2, 4.1 -> 5.7, 6.9 ->
  8.5). The reported levels are still each side's median.
- **A slope instead of a step**: where a straight line (Theil-Sen, robust to outliers) fits
  the series with less squared error than the best single step, by a margin, and its
  rank correlation with time is strong, the run slowed steadily: one gradual drift is
  called over the span, not a staircase of change points.

Pure Python on at most a few hundred windows: O(n^2 log n) for the splits.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

# sd of the Hodges-Lehmann shift / sd of a difference of means, normal data: 1/sqrt(3/pi)
HODGES_LEHMANN_SPREAD = math.sqrt(math.pi / 3)
MAD_TO_SD = 1.4826


@dataclass(frozen=True)
class Settings:
    """The method's thresholds (the drift rule's options)."""

    min_change: float = 0.15  # relative shift of the median step time
    min_score: float = 6.0  # z-score of the two medians against the window noise
    min_windows: int = 3  # windows on each side of a change
    min_steps: int = 100  # steps on each side of a change
    persistence: float = 0.75  # of the windows after a change, beyond the midpoint
    max_points: int = 5
    slope_margin: float = 0.8  # a line's error / the best step's, to call a slope
    slope_rank: float = 0.7  # |Spearman rho| of a slope with time


@dataclass(frozen=True)
class Shift:
    """A change point: the series moved from ``before`` to ``after`` (medians of the
    windows between the neighbouring changes) at index ``at``; or, ``gradual``, a slope
    from ``before`` at ``at`` to ``after`` at ``end``."""

    at: int  # first index of the new level (of the slope: its first index)
    end: int  # one past the last index of the new level (of the slope)
    begin: int  # first index of the level before it
    before: float  # median value (not log) before
    after: float
    score: float  # z-score of the two levels (a slope: its rank correlation, signed)
    gradual: bool = False

    @property
    def change(self) -> float:
        return self.after / self.before - 1.0


def noise_scale(logs: Sequence[float]) -> float:
    """The window-to-window noise of ``logs`` (see the module's docstring)."""
    if len(logs) < 3:
        return 0.0
    diffs = [b - a for a, b in zip(logs, logs[1:])]
    centre = _median(diffs)
    return MAD_TO_SD * _median([abs(d - centre) for d in diffs]) / math.sqrt(2)


def shifts(
    values: Sequence[float], steps: Sequence[int], settings: Settings | None = None
) -> list[Shift]:
    """The change points of ``values`` (window medians, > 0) whose windows hold
    ``steps`` steps each, in index order; or one gradual shift where a slope fits the
    whole series better than any single step."""
    settings = settings or Settings()
    n = len(values)
    if n < 2 * settings.min_windows or any(v <= 0 for v in values):
        return []
    logs = [math.log(v) for v in values]
    sigma = max(noise_scale(logs), 1e-3)  # a perfectly flat series still has 0.1 % noise
    slope = _slope(logs, steps, settings)
    if slope is not None:
        return [slope]
    found: list[int] = []
    segments = [(0, n)]
    while segments and len(found) < settings.max_points:
        a, b = segments.pop(0)
        split = _best_split(logs, steps, a, b, sigma, settings)
        if split is None:
            continue
        found.append(split)
        segments += [(a, split), (split, b)]
    bounds = [0, *sorted(found), n]
    out = []
    for i in range(1, len(bounds) - 1):
        begin, at, end = bounds[i - 1], bounds[i], bounds[i + 1]
        left, right = logs[begin:at], logs[at:end]
        score = _score(left, right, sigma)
        out.append(
            Shift(
                at=at,
                end=end,
                begin=begin,
                before=math.exp(_median(left)),
                after=math.exp(_median(right)),
                score=round(score, 2),
            )
        )
    return out


def _best_split(
    logs: list[float], steps: Sequence[int], a: int, b: int, sigma: float, settings: Settings
) -> int | None:
    """The split of ``logs[a:b]`` that least-squares places best (on the series smoothed
    by a running median of 5, so one spike does not pull it), if it passes the tests."""
    smooth = _running_median(logs[a:b])
    total, n = sum(smooth), b - a
    best: tuple[float, int] | None = None
    left_sum = 0.0
    left_steps = sum(steps[a : a + settings.min_windows - 1])
    all_steps = sum(steps[a:b])
    for i in range(n - settings.min_windows):
        left_sum += smooth[i]
        k = i + 1
        if k < settings.min_windows:
            continue
        left_steps += steps[a + k - 1] if k >= settings.min_windows else 0
        if left_steps < settings.min_steps or all_steps - left_steps < settings.min_steps:
            continue
        gap = left_sum / k - (total - left_sum) / (n - k)
        gain = gap * gap * k * (n - k) / n
        if best is None or gain > best[0]:
            best = (gain, a + k)
    if best is None:
        return None
    k = best[1]
    if _score(logs[a:k], logs[k:b], sigma) < settings.min_score:
        return None
    before, after = _median(logs[a:k]), _median(logs[k:b])
    if abs(after - before) < math.log1p(settings.min_change):
        return None
    middle = (before + after) / 2
    beyond = sum(1 for v in logs[k:b] if (v > middle) == (after > before))
    if beyond < settings.persistence * (b - k):
        return None
    return k


def _running_median(values: list[float], span: int = 5) -> list[float]:
    half = span // 2
    return [_median(values[max(0, i - half) : i + half + 1]) for i in range(len(values))]


def _score(left: Sequence[float], right: Sequence[float], sigma: float) -> float:
    """The z-score of the shift from ``left`` to ``right`` (see the module's docstring)."""
    spread = sigma * HODGES_LEHMANN_SPREAD * math.sqrt(1 / len(left) + 1 / len(right))
    return abs(hodges_lehmann(left, right)) / spread


def hodges_lehmann(left: Sequence[float], right: Sequence[float]) -> float:
    """The median of every pairwise difference ``r - l``: the shift from ``left`` to
    ``right`` (len(left) x len(right) differences: a few hundred windows at most)."""
    return _median([r - v for v in left for r in right])


def _slope(logs: list[float], steps: Sequence[int], settings: Settings) -> Shift | None:
    """One gradual shift over the whole series, where a line fits it better than any
    single step and the line moves by at least ``min_change``."""
    n = len(logs)
    if n < 3 * settings.min_windows or sum(steps) < 2 * settings.min_steps:
        return None
    rho = spearman(logs)
    if abs(rho) < settings.slope_rank:
        return None
    slope, intercept = theil_sen(logs)
    line_error = sum((v - (intercept + slope * i)) ** 2 for i, v in enumerate(logs))
    step_error = _best_step_error(logs, settings.min_windows)
    if line_error > settings.slope_margin * step_error:
        return None
    first, last = intercept, intercept + slope * (n - 1)
    if abs(last - first) < math.log1p(settings.min_change):
        return None
    return Shift(
        at=0,
        end=n,
        begin=0,
        before=math.exp(first),
        after=math.exp(last),
        score=round(rho, 3),
        gradual=True,
    )


def _best_step_error(values: list[float], min_windows: int) -> float:
    """The least squared error of two flat levels split anywhere (prefix sums: O(n))."""
    n = len(values)
    total, total_sq = sum(values), sum(v * v for v in values)
    best = math.inf
    left, left_sq = 0.0, 0.0
    for k in range(1, n):
        left += values[k - 1]
        left_sq += values[k - 1] ** 2
        if k < min_windows or n - k < min_windows:
            continue
        right, right_sq = total - left, total_sq - left_sq
        error = (left_sq - left * left / k) + (right_sq - right * right / (n - k))
        best = min(best, error)
    return best


def theil_sen(values: list[float], xs: Sequence[float] | None = None) -> tuple[float, float]:
    """The median of the pairwise slopes, and the median intercept under it (``xs``:
    where each value lies; its index by default)."""
    n = len(values)
    at = list(xs) if xs is not None else list(range(n))
    stride = max(1, n // 64)  # at most ~2,000 pairs of a few hundred windows
    slopes = [
        (values[j] - values[i]) / (at[j] - at[i])
        for i in range(0, n, stride)
        for j in range(i + stride, n, stride)
        if at[j] != at[i]
    ]
    slope = _median(slopes)
    return slope, _median([v - slope * x for x, v in zip(at, values)])


def spearman(values: list[float]) -> float:
    """Rank correlation of ``values`` with their index (ties share their mean rank)."""
    n = len(values)
    order = sorted(range(n), key=values.__getitem__)
    ranks = [0.0] * n
    i = 0
    while i < n:
        j = i
        while j + 1 < n and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2
        i = j + 1
    mean = (n - 1) / 2
    cov = sum((r - mean) * (i - mean) for i, r in enumerate(ranks))
    var_r = sum((r - mean) ** 2 for r in ranks)
    var_i = sum((i - mean) ** 2 for i in range(n))
    return cov / math.sqrt(var_r * var_i) if var_r and var_i else 0.0


def _median(values: Sequence[float]) -> float:
    """statistics.median, 0 for nothing (a segment always has values; slopes may not)."""
    return statistics.median(values) if values else 0.0
