"""Sets of time intervals as sorted, disjoint (starts, ends) arrays: the GPU's busy time is
the union of its kernels over streams, not their sum (XProf's "disjoint interval union"),
and its idle time inside a step is the step minus that union."""

from __future__ import annotations

import numpy as np

Intervals = tuple[np.ndarray, np.ndarray]
EMPTY: Intervals = (np.zeros(0, np.int64), np.zeros(0, np.int64))


def union(starts: np.ndarray, ends: np.ndarray) -> Intervals:
    """The disjoint union of ``[starts[i], ends[i])``, sorted."""
    if len(starts) == 0:
        return EMPTY
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    # a new interval begins where it starts after everything before it ended
    begins = np.concatenate(([True], s[1:] > reach[:-1]))
    first = np.flatnonzero(begins)
    last = np.concatenate((first[1:] - 1, [len(s) - 1]))
    return s[first], reach[last]


def total(intervals: Intervals) -> int:
    return int(np.sum(intervals[1] - intervals[0]))


def clip(intervals: Intervals, start: int, end: int) -> Intervals:
    """The part of ``intervals`` inside ``[start, end)``."""
    s, e = intervals
    lo = np.searchsorted(e, start, side="right")
    hi = np.searchsorted(s, end, side="left")
    s, e = s[lo:hi], e[lo:hi]
    return np.maximum(s, start), np.minimum(e, end)


def intersect(a: Intervals, b: Intervals) -> Intervals:
    """Where both hold (both disjoint and sorted)."""
    if len(a[0]) == 0 or len(b[0]) == 0:
        return EMPTY
    # the boundaries of both, and at each, how many of the two sets hold
    points = np.concatenate((a[0], a[1], b[0], b[1]))
    steps = np.concatenate(
        (np.ones(len(a[0])), -np.ones(len(a[1])), np.ones(len(b[0])), -np.ones(len(b[1])))
    )
    order = np.lexsort((steps, points))  # ends before starts at one point
    points, level = points[order], np.cumsum(steps[order])
    inside = level == 2
    starts = points[:-1][inside[:-1]]
    ends = points[1:][inside[:-1]]
    keep = ends > starts
    return starts[keep].astype(np.int64), ends[keep].astype(np.int64)


def subtract(a: Intervals, b: Intervals) -> Intervals:
    """``a`` where ``b`` does not hold."""
    if len(a[0]) == 0 or len(b[0]) == 0:
        return a
    lo = min(int(a[0][0]), int(b[0][0]))
    hi = max(int(a[1][-1]), int(b[1][-1]))
    gaps = (np.concatenate(([lo], b[1])), np.concatenate((b[0], [hi])))
    keep = gaps[1] > gaps[0]
    return intersect(a, (gaps[0][keep], gaps[1][keep]))
