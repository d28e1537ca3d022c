"""``steps._overlap`` (is a loop nested in steps already counted?) compares blocks of
steps with their spans as arrays; its answer must be the one visiting every span one by
one gives, to the bit, for the span sets real programs make: back-to-back steps, nested
calls, overlapping phases, a fit still open (an endless span), a long evaluation among
short steps, more steps than one block holds."""

import bisect
import math
import random

import pytest

from gpuwhy.collect.inprocess.step_record import Step
from gpuwhy.collect.inprocess.steps import OVERLAP_BLOCK, OVERLAP_LOOKBACK, _overlap


def visiting_every_span(sequence, counted):
    """The definition: each step against the OVERLAP_LOOKBACK spans that start last
    before its end, in start order."""
    spans = sorted((s.start, s.end) for s in counted)
    starts = [a for a, _ in spans]
    inside = 0.0
    for step in sequence:
        index = bisect.bisect_right(starts, step.end)
        for start, end in spans[max(0, index - OVERLAP_LOOKBACK) : index]:
            inside += max(0.0, min(end, step.end) - max(start, step.start))
    total = sum(s.end - s.start for s in sequence)
    return inside / total if total > 0 else 0.0


def back_to_back(rng, n, t=0.0, mean=0.001):
    steps = []
    for _ in range(n):
        length = rng.expovariate(1 / mean)
        steps.append(Step(t, t + length))
        t += length + rng.choice([0.0, 0.0, rng.random() * mean])
    return steps


def inside_each(rng, steps, share=0.6):
    """A call inside each step (the function a loop site calls per step)."""
    out = []
    for s in steps:
        a = s.start + rng.random() * (1 - share) * (s.end - s.start)
        out.append(Step(a, a + share * (s.end - s.start)))
    return out


CASES = {
    "nested calls": lambda rng: (lambda s: (inside_each(rng, s), s))(back_to_back(rng, 3000)),
    "the same steps": lambda rng: (lambda s: (s, s))(back_to_back(rng, 2000)),
    "blocks of steps": lambda rng: (
        back_to_back(rng, 2 * OVERLAP_BLOCK + 7),
        back_to_back(rng, 2 * OVERLAP_BLOCK + 7, mean=0.0015),
    ),
    "disjoint loops": lambda rng: (back_to_back(rng, 800, t=10.0), back_to_back(rng, 800)),
    "interleaved": lambda rng: (back_to_back(rng, 1500, mean=0.002), back_to_back(rng, 1500)),
    "an open fit and epochs": lambda rng: (
        back_to_back(rng, 2000),
        [Step(0.0, math.inf), *(Step(e * 0.5, e * 0.5 + 0.49) for e in range(4))]
        + back_to_back(rng, 500, t=0.2),
    ),
    "a long evaluation among steps": lambda rng: (
        back_to_back(rng, 2000),
        back_to_back(rng, 700) + [Step(0.3, 0.9)] + back_to_back(rng, 700, t=1.0),
    ),
    "overlapping spans": lambda rng: (
        back_to_back(rng, 1000),
        [Step(a, a + rng.random() * 0.05) for a in sorted(rng.random() for _ in range(900))],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_share_is_the_one_visiting_every_span_gives(case, seed):
    sequence, counted = CASES[case](random.Random(seed))
    assert _overlap(sequence, counted) == visiting_every_span(sequence, counted)


def test_nothing_counted_or_nothing_to_compare():
    steps = back_to_back(random.Random(3), 10)
    assert _overlap(steps, []) == 0.0 == visiting_every_span(steps, [])
    assert _overlap([], steps) == 0.0 == visiting_every_span([], steps)
