"""The change between two sets of runs, with the variation between runs estimated from
the runs themselves.

Two runs of one unchanged program on a shared machine differ by more than either run's
own spread shows: on this project's 2-core CI machine ten runs of a small training loop
averaged 1.22 to 1.65 ms a step, each steady within itself (benchmarks/bench_diff.py).
A run's steps resampled can only say how the steps vary about that run's level, never
how far the next run's level will land. With several runs a side the levels' own spread
is measured: each run is one observation of its side (a random-effects model, steps
within runs within sides; with every run summarised by its own figure, its REML estimate
is the two-sample t interval on the runs' figures), the between-run variance pooled
over both sides (the same program on the same machine), never below what the runs' own
sampling spread alone would give, and the interval from Student's t with the runs'
degrees of freedom: wide with 2 runs a side, as it should be.

Times are compared on the log scale (a ratio: "4 % slower"); shares (GPU busy) and a
part's seconds per step as they are.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from gpuwhy.comparison.student_t import quantile

LEVEL = 0.95
CAUGHT = 0.90  # "a change of X is called 9 times in 10"


@dataclass(frozen=True)
class Noise:
    """How far runs of this program spread on this machine, measured beforehand on
    unchanged runs (``gpuwhy diff --calibrate``): pooled with the sides' own runs, it
    gives the interval more degrees of freedom, and one run a side an interval at all."""

    variance: float  # of a run's figure (log step time) about its side's mean
    df: int  # the calibration's runs less one
    source: str  # where it was read, for people


@dataclass(frozen=True)
class Difference:
    """AFTER's runs less BEFORE's: the difference of the sides' means and its interval."""

    estimate: float
    low: float
    high: float
    half_width: float  # a difference of this size or more is called at least half the time
    caught: float  # ... and of this size, 9 times in 10 (the t test's power at the same df)
    df: int  # degrees of freedom: runs less two
    run_sd: float  # one run's figure's spread about its side's mean (pooled)
    floored: bool  # the runs agreed more closely than their own sampling allows


def difference(
    before: Sequence[float],
    after: Sequence[float],
    within: Sequence[float] = (),
    noise: Noise | None = None,
) -> Difference | None:
    """The difference of the means of ``after`` and ``before`` (one figure a run), with
    its 95 % interval from the runs' pooled spread; ``within``: each run's own sampling
    variance of its figure, the floor of that spread; ``noise``: a calibration's spread,
    pooled in with its degrees of freedom. None without a spread to estimate (one run a
    side and no calibration)."""
    kb, ka = len(before), len(after)
    df = kb + ka - 2 + (noise.df if noise is not None else 0)
    if kb < 1 or ka < 1 or df < 1:
        return None
    mean_b, mean_a = statistics.fmean(before), statistics.fmean(after)
    squares = sum((x - mean_b) ** 2 for x in before) + sum((x - mean_a) ** 2 for x in after)
    if noise is not None:
        squares += noise.variance * noise.df
    variance = squares / df
    floor = statistics.fmean(within) if within else 0.0
    floored = variance < floor
    variance = max(variance, floor)
    se = math.sqrt(variance * (1 / kb + 1 / ka))
    t = quantile(1 - (1 - LEVEL) / 2, df)
    estimate = mean_a - mean_b
    return Difference(
        estimate=estimate,
        low=estimate - t * se,
        high=estimate + t * se,
        half_width=t * se,
        caught=(t + quantile(CAUGHT, df)) * se,
        df=df,
        run_sd=math.sqrt(variance),
        floored=floored,
    )


def detectable(run_sd: float, runs: int, sides_df: int | None = None) -> tuple[float, float]:
    """For ``runs`` runs a side of a program whose runs spread by ``run_sd`` (log scale
    for times): the smallest difference called at least half the time (the interval's
    half-width), and the one called 9 times in 10. ``sides_df``: the degrees of freedom
    the comparison will have (2 runs - 2 by default)."""
    df = sides_df if sides_df is not None else 2 * runs - 2
    if runs < 1 or df < 1:
        return (math.inf, math.inf)
    se = run_sd * math.sqrt(2 / runs)
    t = quantile(1 - (1 - LEVEL) / 2, df)
    return (t * se, (t + quantile(CAUGHT, df)) * se)
