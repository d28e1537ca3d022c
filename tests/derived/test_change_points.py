"""The change-point method on series with known answers: a step, a slope, noise alone,
a spike, a short excursion, too few steps."""

import math
import random

import pytest

from gpuwhy.derived.change_points import Settings, noise_scale, shifts, spearman, theil_sen

STEPS = [400] * 256


def series(n=120, base=0.018, at=None, change=0.38, ramp=False, noise=0.03, seed=0):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        value = base * (1 + change if at is not None and i >= at else 1)
        if ramp:
            value = base * (1 + change * i / (n - 1))
        out.append(value * math.exp(rng.gauss(0, noise)))
    return out


def test_a_step_is_found_where_it_is_with_its_two_levels():
    (shift,) = shifts(series(at=70), STEPS[:120])
    assert shift.at == 70 and not shift.gradual
    assert shift.before == pytest.approx(0.018, rel=0.03)
    assert shift.change == pytest.approx(0.38, abs=0.04)


def test_a_drop_is_found_too_and_a_run_can_have_two_changes():
    values = series(n=150, at=50, change=0.5, seed=3)
    values = values[:100] + [v * 0.5 for v in values[100:]]
    found = shifts(values, STEPS[:150])
    assert [s.at for s in found] == [50, 100]
    assert found[0].change > 0.4 and found[1].change < -0.4


def test_a_steady_slope_is_one_gradual_drift_not_a_staircase():
    (shift,) = shifts(series(n=200, ramp=True, change=0.4, noise=0.02), STEPS[:200])
    assert shift.gradual and (shift.at, shift.end) == (0, 200)
    assert shift.change == pytest.approx(0.4, abs=0.06)


@pytest.mark.parametrize("seed", range(40))
def test_noise_alone_is_never_a_change(seed):
    rng = random.Random(seed)
    n, noise = rng.choice([12, 40, 120, 256]), rng.choice([0.02, 0.05, 0.1, 0.2])
    assert shifts(series(n=n, noise=noise, seed=seed), STEPS[:n]) == []


def test_spikes_and_a_short_excursion_are_not_changes():
    values = series(n=100, noise=0.02)
    values[30] *= 5  # one slow window (an epoch boundary, a checkpoint)
    values[31] *= 3
    for i in range(60, 62):  # two windows of a busy neighbour
        values[i] *= 1.6
    assert shifts(values, STEPS[:100]) == []


def test_a_change_below_the_minimum_or_from_too_few_steps_is_not_called():
    assert shifts(series(at=60, change=0.08, noise=0.01), STEPS[:120]) == []
    few = [5] * 120  # 5 steps a window: the change is backed by fewer than 100 steps
    assert shifts(series(n=40, at=35, change=1.0), few[:40], Settings(min_steps=100)) == []


def test_the_noise_scale_ignores_one_jump():
    flat = [0.0] * 50 + [1.0] * 50
    assert noise_scale(flat) == 0.0
    assert noise_scale([math.sin(i) * 0.1 for i in range(100)]) > 0.01


def test_rank_correlation_and_robust_line():
    assert spearman([1, 2, 3, 4]) == pytest.approx(1.0)
    assert spearman([4, 3, 2, 1]) == pytest.approx(-1.0)
    slope, intercept = theil_sen([1.0, 3.0, 5.0, 700.0, 9.0])
    assert (slope, intercept) == (pytest.approx(2.0), pytest.approx(1.0))
