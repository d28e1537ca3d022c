"""Interval sets (the GPU's busy time as a union over streams, the idle time in a step):
union, clip, intersect and subtract on hand-made cases, then against a brute-force count
of the integer units each set covers, on seeded random small intervals."""

from __future__ import annotations

import numpy as np
import pytest

from gpuwhy.collect.capture import intervals


def make(*pairs: tuple[int, int]) -> intervals.Intervals:
    return (
        np.array([s for s, _ in pairs], np.int64),
        np.array([e for _, e in pairs], np.int64),
    )


def pairs(found: intervals.Intervals) -> list[tuple[int, int]]:
    return [(int(s), int(e)) for s, e in zip(*found)]


def units(found: intervals.Intervals) -> set[int]:
    """The integer points ``t`` with ``start <= t < end`` for some interval."""
    return {t for s, e in pairs(found) for t in range(s, e)}


def assert_canonical(found: intervals.Intervals) -> None:
    """Sorted, each start at most its end, and no two overlapping."""
    starts, ends = found
    assert starts.dtype == ends.dtype == np.int64
    assert len(starts) == len(ends)
    assert np.all(starts <= ends)
    assert np.all(ends[:-1] <= starts[1:])


# -- union -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ([(0, 5), (3, 8)], [(0, 8)]),  # overlapping
        ([(0, 2), (2, 4)], [(0, 4)]),  # touching: one interval, no seam
        ([(0, 10), (2, 3), (4, 6)], [(0, 10)]),  # nested
        ([(5, 6), (0, 1), (3, 4)], [(0, 1), (3, 4), (5, 6)]),  # unsorted, apart
        ([(4, 6), (0, 9), (1, 2)], [(0, 9)]),  # a later start nested in an earlier one
        ([(0, 3), (1, 2), (2, 5)], [(0, 5)]),  # the reach carried past a nested one
        ([(7, 9)], [(7, 9)]),
        ([], []),  # empty
    ],
    ids=["overlap", "touch", "nested", "unsorted", "late-nested", "reach", "one", "empty"],
)
def test_union(given, expected):
    found = intervals.union(*make(*given))
    assert pairs(found) == expected
    assert_canonical(found)
    assert intervals.total(found) == sum(e - s for s, e in expected)


def test_union_of_streams_is_not_their_sum():
    # two streams' kernels overlapping in time: the GPU was busy 10 units, not 14
    busy = intervals.union(*make((0, 6), (2, 10), (4, 6)))
    assert intervals.total(busy) == 10


# -- clip --------------------------------------------------------------------------------
SET = make((0, 5), (10, 15), (20, 25))


@pytest.mark.parametrize(
    ("window", "expected"),
    [
        ((3, 12), [(3, 5), (10, 12)]),  # cuts two intervals
        ((6, 9), []),  # inside a gap
        ((5, 10), []),  # touching both neighbours: nothing inside
        ((11, 13), [(11, 13)]),  # nested in one interval
        ((-5, 30), [(0, 5), (10, 15), (20, 25)]),  # around everything
        ((15, 20), []),
        ((14, 21), [(14, 15), (20, 21)]),
    ],
)
def test_clip(window, expected):
    found = intervals.clip(SET, *window)
    assert pairs(found) == expected
    assert_canonical(found)


def test_clip_of_nothing_is_nothing():
    assert pairs(intervals.clip(intervals.EMPTY, 0, 10)) == []


# -- intersect ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ([(0, 5), (10, 15)], [(3, 12)], [(3, 5), (10, 12)]),  # overlapping
        ([(0, 5)], [(5, 9)], []),  # touching: no common time
        ([(0, 10)], [(2, 3), (5, 7)], [(2, 3), (5, 7)]),  # nested
        ([(0, 5), (6, 9)], [(0, 5), (6, 9)], [(0, 5), (6, 9)]),  # identical
        ([(0, 4)], [(4, 8), (9, 12)], []),
        ([(0, 5)], [], []),  # empty b
        ([], [(0, 5)], []),  # empty a
    ],
    ids=["overlap", "touch", "nested", "identical", "apart", "empty-b", "empty-a"],
)
def test_intersect(a, b, expected):
    forward = intervals.intersect(make(*a), make(*b))
    backward = intervals.intersect(make(*b), make(*a))
    assert pairs(forward) == pairs(backward) == expected
    assert_canonical(forward)


# -- subtract -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ([(0, 10)], [(2, 3), (5, 6)], [(0, 2), (3, 5), (6, 10)]),  # holes in a
        ([(2, 8)], [(0, 10)], []),  # b covers a
        ([(0, 5)], [(5, 9)], [(0, 5)]),  # touching: a whole
        ([(0, 5), (10, 15)], [(3, 12)], [(0, 3), (12, 15)]),  # overlapping both
        ([(3, 7)], [(0, 4), (6, 20)], [(4, 6)]),  # b beyond a on both sides
        ([(0, 5)], [], [(0, 5)]),  # empty b
        ([], [(0, 5)], []),  # empty a
    ],
    ids=["holes", "covered", "touch", "overlap", "beyond", "empty-b", "empty-a"],
)
def test_subtract(a, b, expected):
    found = intervals.subtract(make(*a), make(*b))
    assert pairs(found) == expected
    assert_canonical(found)


# -- against a brute force ------------------------------------------------------------------
def random_pairs(rng: np.random.Generator) -> list[tuple[int, int]]:
    """Up to 6 intervals on [0, 40): overlapping, touching, nested, zero-length, repeated."""
    count = int(rng.integers(0, 7))
    starts = rng.integers(0, 32, count)
    lengths = rng.integers(0, 9, count)
    return [(int(s), int(s + n)) for s, n in zip(starts, lengths)]


def brute(given: list[tuple[int, int]]) -> set[int]:
    return {t for s, e in given for t in range(s, e)}


@pytest.mark.parametrize("seed", range(10))
def test_the_operations_cover_the_units_a_brute_force_counts(seed):
    rng = np.random.default_rng(seed)
    for _ in range(100):
        raw_a, raw_b = random_pairs(rng), random_pairs(rng)
        a = intervals.union(*make(*raw_a))
        b = intervals.union(*make(*raw_b))
        assert units(a) == brute(raw_a), raw_a
        assert intervals.total(a) == len(brute(raw_a)), raw_a
        assert_canonical(a)
        # a union is merged: the gap between two intervals is never empty
        assert np.all(a[1][:-1] < a[0][1:]), pairs(a)

        lo, hi = sorted(int(x) for x in rng.integers(-2, 42, 2))
        clipped = intervals.clip(a, lo, hi)
        assert units(clipped) == {t for t in brute(raw_a) if lo <= t < hi}, (raw_a, lo, hi)
        assert_canonical(clipped)

        both = intervals.intersect(a, b)
        assert units(both) == brute(raw_a) & brute(raw_b), (raw_a, raw_b)
        assert intervals.total(both) == len(brute(raw_a) & brute(raw_b))
        assert_canonical(both)

        rest = intervals.subtract(a, b)
        assert units(rest) == brute(raw_a) - brute(raw_b), (raw_a, raw_b)
        assert intervals.total(rest) == len(brute(raw_a) - brute(raw_b))
        assert_canonical(rest)


def test_large_times_in_picoseconds_keep_their_precision():
    # captures count ps from the profiler's start: 2**53 ps is 2.5 hours, past which a
    # float64 round trip would lose single picoseconds
    base = 2**53 + 1
    a = make((base, base + 7), (base + 20, base + 31))
    b = make((base + 5, base + 25))
    assert pairs(intervals.intersect(a, b)) == [(base + 5, base + 7), (base + 20, base + 25)]
    assert pairs(intervals.subtract(a, b)) == [(base, base + 5), (base + 25, base + 31)]
