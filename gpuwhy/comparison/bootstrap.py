"""The spread of a run's figures, by resampling its own windows: a moving-block bootstrap.

One median against another says nothing about noise: two runs of one program differ by a
few percent, more where a neighbour shares the host. What each run says about its own
spread is in how its windows (or blocks of consecutive steps) vary; resampling them with
replacement, in blocks of consecutive units so that a slow stretch stays a stretch
(Künsch 1989; block length n^(1/3), Hall, Horowitz & Jing 1995), gives each figure's
distribution, and two runs' figures their difference's interval.

Each unit is a tuple of sums (steps, seconds, seconds of each part, ...): every figure
compared is a ratio of sums (time per step, a part per step, GPU busy per window), so a
replicate is one sum of block vectors, whatever the figure. Pure Python (gpuwhy does not
depend on NumPy): ~40 blocks drawn per replicate, 2,000 replicates a run.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

REPLICATES = 2000
SEED = 2027  # fixed: the same two records always give the same intervals
LEVEL = 0.95

Sums = tuple[float, ...]


def block_length(units: int) -> int:
    """Consecutive units per block where the series says nothing of its dependence:
    n^(1/3), the order that keeps the bias and the variance of the variance estimate
    balanced for a stationary series."""
    return max(1, round(units ** (1 / 3)))


def automatic_block_length(series: Sequence[float]) -> int:
    """The block length the series' own dependence asks for (Politis & White 2004, with
    Patton, Politis & White 2009's correction, for the moving-block bootstrap).

    A training run's step time wanders on the scale of seconds (another pass of the
    data, the allocator, the host's scheduler): two runs of one program differ by what
    the slow part of that wandering does. Blocks of n^(1/3) units resample it away and
    call such differences; blocks as long as the series' autocorrelation reaches keep
    it, so the interval is as wide as the run's own slow variation."""
    n = len(series)
    if n < 8:
        return block_length(n)
    mean = sum(series) / n
    x = [v - mean for v in series]
    var = sum(v * v for v in x) / n
    if var <= 0:
        return 1
    lags = min(n - 1, max(2 * int(math.sqrt(n)) + 5, 10))
    cov = [sum(x[i] * x[i + k] for i in range(n - k)) / n for k in range(lags + 1)]
    rho = [c / var for c in cov]
    # the smallest lag m after which K_N lags in a row are insignificant
    k_n = max(5, int(math.ceil(math.sqrt(math.log10(n)))))
    bound = 2.0 * math.sqrt(math.log10(n) / n)
    m = lags
    for start in range(1, lags + 1):
        window = rho[start : start + k_n]
        if len(window) == k_n and all(abs(r) < bound for r in window):
            m = start - 1
            break
    big_m = min(2 * max(m, 1), lags)
    g = g0 = 0.0
    for k in range(-big_m, big_m + 1):
        t = abs(k) / big_m
        weight = 1.0 if t <= 0.5 else (2 * (1 - t) if t <= 1 else 0.0)
        g += weight * abs(k) * cov[abs(k)]
        g0 += weight * cov[abs(k)]
    d = (4 / 3) * g0 * g0
    if d <= 0 or g == 0:
        return 1
    b = (2 * g * g / d) ** (1 / 3) * n ** (1 / 3)
    return max(1, min(round(b), max(1, n // 3)))


def resampled_sums(
    units: Sequence[Sums], replicates: int = REPLICATES, seed: int = SEED, block: int | None = None
) -> list[Sums]:
    """``replicates`` resamplings of ``units``, each the column sums of ceil(n / b)
    blocks of b consecutive units drawn at random starts (``block``, else the length the
    units' own dependence asks for: column 1 over column 0, a unit's mean)."""
    n = len(units)
    if n == 0:
        return []
    width = len(units[0])
    b = block or automatic_block_length([u[1] / u[0] if u[0] else 0.0 for u in units])
    starts = n - b + 1
    blocks: list[Sums] = []
    for start in range(starts):
        sums = [0.0] * width
        for unit in units[start : start + b]:
            for i, value in enumerate(unit):
                sums[i] += value
        blocks.append(tuple(sums))
    draws = math.ceil(n / b)
    rng = random.Random(seed)
    out: list[Sums] = []
    for _ in range(replicates):
        picked = rng.choices(blocks, k=draws)
        out.append(tuple(float(sum(column)) for column in zip(*picked)))
    return out


def interval(values: Sequence[float], level: float = LEVEL) -> tuple[float, float]:
    """The percentile interval holding ``level`` of ``values`` (equal tails)."""
    ordered = sorted(values)
    if not ordered:
        return (math.nan, math.nan)
    tail = (1 - level) / 2
    return (_at(ordered, tail), _at(ordered, 1 - tail))


def _at(ordered: Sequence[float], q: float) -> float:
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
