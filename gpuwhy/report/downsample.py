"""Long series made short enough to draw, and the exact statistics of the full series.

A run of an hour sampled at 10 Hz is 36,000 points per GPU metric, and a long training
run has 100,000 steps: a browser draws that slowly and the report file grows by
megabytes. For *drawing*, each series is cut into at most ``MAX_POINTS`` equal time
buckets and each bucket keeps its mean, minimum and maximum (the band shows the spikes
a plain mean would hide). Every number *printed* in a report comes from ``stats()`` on
the full series, never from the buckets.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MAX_POINTS = 2000


@dataclass(frozen=True)
class Downsampled:
    """A series ready to draw. ``bucketed`` is False when every point is one sample
    (then ``low`` and ``high`` equal ``mean``). A point whose samples were all ``None``
    (a metric the GPU did not report then) is ``None`` in all three, so lines break there."""

    t: tuple[float, ...]
    mean: tuple[float | None, ...]
    low: tuple[float | None, ...]
    high: tuple[float | None, ...]
    bucketed: bool
    bucket_s: float | None = None  # width of one bucket, seconds
    samples: int = 0  # points in the full series (None included)


def downsample(
    t: Sequence[float],
    values: Sequence[float | None],
    max_points: int = MAX_POINTS,
    span: tuple[float, float] | None = None,
) -> Downsampled:
    """Per-bucket mean/min/max of ``values`` at times ``t`` (sorted or not).

    ``span`` fixes the bucket grid: series that must stack (input wait and the rest of
    the step) are cut on the same grid even when one of them has gaps. Buckets with no
    sample are left out; the line joins their neighbours.
    """
    if len(t) != len(values):
        raise ValueError(f"{len(t)} times for {len(values)} values")
    n = len(t)
    if n <= max_points:
        return Downsampled(
            tuple(t), tuple(values), tuple(values), tuple(values), bucketed=False, samples=n
        )
    start, end = span if span is not None else (min(t), max(t))
    width = (end - start) / max_points if end > start else 1.0
    count = [0] * max_points
    known = [0] * max_points
    total = [0.0] * max_points
    low: list[float | None] = [None] * max_points
    high: list[float | None] = [None] * max_points
    for ti, vi in zip(t, values):
        i = min(max(int((ti - start) / width), 0), max_points - 1)
        count[i] += 1
        if vi is None:
            continue
        known[i] += 1
        total[i] += vi
        lowest, highest = low[i], high[i]
        if lowest is None or vi < lowest:
            low[i] = vi
        if highest is None or vi > highest:
            high[i] = vi
    keep = [i for i in range(max_points) if count[i]]
    return Downsampled(
        t=tuple(start + (i + 0.5) * width for i in keep),
        mean=tuple(total[i] / known[i] if known[i] else None for i in keep),
        low=tuple(low[i] for i in keep),
        high=tuple(high[i] for i in keep),
        bucketed=True,
        bucket_s=width,
        samples=n,
    )


@dataclass(frozen=True)
class Stats:
    """Exact statistics of a full series; ``count`` counts the known (non-None) values."""

    count: int
    mean: float | None = None
    median: float | None = None
    p90: float | None = None
    low: float | None = None
    high: float | None = None
    argmax: int | None = None  # index of the (first) maximum in the full series


def stats(values: Iterable[float | None]) -> Stats:
    indexed = [(i, v) for i, v in enumerate(values) if v is not None and not _nan(v)]
    if not indexed:
        return Stats(count=0)
    known = sorted(v for _, v in indexed)
    top = max(indexed, key=lambda iv: iv[1])
    return Stats(
        count=len(known),
        mean=math.fsum(known) / len(known),
        median=statistics.median(known),
        p90=known[min(len(known) - 1, int(0.9 * len(known)))],
        low=known[0],
        high=known[-1],
        argmax=top[0],
    )


def window_stats(
    means: Sequence[float | None],
    known: Sequence[int],
    low: Sequence[float | None],
    high: Sequence[float | None],
) -> Stats:
    """:func:`stats` of a series kept in windows (a long run's GPU samples): count, mean,
    minimum and maximum are the samples' own; median and p90 are those of the window
    means, each weighted by its samples (the samples inside a window are not kept).
    ``argmax`` is the window holding the maximum."""
    rows = [
        (i, m, k, lo, hi)
        for i, (m, k, lo, hi) in enumerate(zip(means, known, low, high))
        if k and m is not None and not _nan(m)
    ]
    if not rows:
        return Stats(count=0)
    count = sum(k for _, _, k, _, _ in rows)
    ordered = sorted((m, k) for _, m, k, _, _ in rows)
    top = max(rows, key=lambda r: r[4] if r[4] is not None else r[1])
    return Stats(
        count=count,
        mean=math.fsum(m * k for _, m, k, _, _ in rows) / count,
        median=_weighted_quantile(ordered, 0.5 * count),
        p90=_weighted_quantile(ordered, min(count - 1, int(0.9 * count)) + 0.5),
        low=min(lo if lo is not None else m for _, m, _, lo, _ in rows),
        high=top[4] if top[4] is not None else top[1],
        argmax=top[0],
    )


def _weighted_quantile(ordered: Sequence[tuple[float, int]], rank: float) -> float:
    """The value at ``rank`` (0 .. total weight) of (value, weight) pairs in order."""
    seen = 0
    for value, weight in ordered:
        seen += weight
        if seen >= rank:
            return value
    return ordered[-1][0]


def _nan(v: float) -> bool:
    return isinstance(v, float) and math.isnan(v)


def rounded(values: Iterable[float | None], digits: int = 4) -> list[float | None]:
    """Values to ``digits`` significant digits: what a chart can show, at a third of the
    JSON size of full float reprs."""
    out: list[float | None] = []
    for v in values:
        if v is None or _nan(v):
            out.append(None)
        elif v == 0 or math.isinf(v):
            out.append(0.0 if v == 0 else None)
        else:
            out.append(round(v, digits - 1 - int(math.floor(math.log10(abs(v))))))
    return out
