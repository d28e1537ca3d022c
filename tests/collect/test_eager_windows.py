"""Which steps lie inside one of the eager counter's windows: one bisection per step must
answer what asking every window answers, for windows the duty cycle makes (one after the
other, abutting or apart) and steps shorter, longer, and across window edges."""

import random

import pytest

from gpuwhy.collect.inprocess.eager import EagerOpCounter, inside_a_window


def asking_every_window(start, end, windows):
    return any(ws <= start and end <= we for ws, we in windows)


def duty_windows(rng, n, on=0.05, period=0.5):
    windows, t = [], rng.random() * period
    for _ in range(n):
        length = on * (0.5 + rng.random())
        windows.append((t, t + length))
        t += length + rng.choice([0.0, period * rng.random()])
    return windows


@pytest.mark.parametrize("seed", range(5))
def test_one_bisection_answers_as_every_window(seed):
    rng = random.Random(seed)
    windows = duty_windows(rng, 300)
    horizon = windows[-1][1] + 1.0
    steps = []
    for _ in range(5000):
        a = rng.random() * horizon
        steps.append((a, a + rng.choice([0.0, 1e-4, 0.003, 0.02, 0.2]) * rng.random()))
    # steps exactly on window edges, and zero-length ones there
    for ws, we in windows[:50]:
        steps += [(ws, ws), (ws, we), (we, we), (ws, we + 1e-9), (ws - 1e-9, we)]
    answers = [inside_a_window(a, b, windows) for a, b in steps]
    assert answers == [asking_every_window(a, b, windows) for a, b in steps]
    assert any(answers) and not all(answers)


def test_no_windows():
    assert not inside_a_window(1.0, 2.0, [])


def test_the_steps_overlapping_a_window_are_those_a_window_was_open_during():
    import numpy as np

    counter = EagerOpCounter()
    counter.windows = [[1.0, 2.0], [5.0, 6.5], [9.0, float("inf")]]
    starts = np.array([0.0, 0.5, 1.5, 2.5, 4.0, 6.5, 6.6, 8.0, 12.0, 3.0])
    ends = np.array([0.9, 1.0, 1.7, 4.9, 5.0, 7.0, 8.9, 9.0, 13.0, 10.0])
    # before any window; touching the first's start; inside; between two; touching the
    # second's start; touching its end; after it; touching the open one's start; inside
    # the open one; spanning the gap before it
    assert counter.overlapping(starts, ends).tolist() == [
        False, True, True, False, True, True, False, True, True, True
    ]  # fmt: skip
    counter.windows = []
    assert not counter.overlapping(starts, ends).any()
