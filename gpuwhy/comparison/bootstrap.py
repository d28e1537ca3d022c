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
    """Consecutive units per block: n^(1/3), the order that keeps the bias and the
    variance of the variance estimate balanced for a stationary series."""
    return max(1, round(units ** (1 / 3)))


def resampled_sums(
    units: Sequence[Sums], replicates: int = REPLICATES, seed: int = SEED
) -> list[Sums]:
    """``replicates`` resamplings of ``units``, each the column sums of ceil(n / b)
    blocks of b consecutive units drawn at random starts."""
    n = len(units)
    if n == 0:
        return []
    width = len(units[0])
    b = block_length(n)
    starts = n - b + 1
    blocks = []
    for start in range(starts):
        block = [0.0] * width
        for unit in units[start : start + b]:
            for i, value in enumerate(unit):
                block[i] += value
        blocks.append(tuple(block))
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
