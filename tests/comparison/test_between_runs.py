"""Several runs a side on small facts: Student's t against its printed table, the
difference of two sets of runs against a hand computation, the runs' own spread as the
floor, and what N runs a side can show."""

import math

import pytest

from gpuwhy.comparison.between_runs import Noise, detectable, difference
from gpuwhy.comparison.student_t import quantile, two_sided_mass

# Student's t, upper points (Fisher & Yates' table; any statistics textbook)
TABLE = {
    (0.975, 1): 12.706,
    (0.975, 2): 4.303,
    (0.975, 3): 3.182,
    (0.975, 4): 2.776,
    (0.975, 10): 2.228,
    (0.975, 30): 2.042,
    (0.90, 4): 1.533,
    (0.90, 9): 1.383,
    (0.95, 7): 1.895,
}


@pytest.mark.parametrize("p, df", sorted(TABLE))
def test_the_t_quantiles_are_the_table_s(p, df):
    assert quantile(p, df) == pytest.approx(TABLE[(p, df)], abs=5e-4)
    assert quantile(1 - p, df) == pytest.approx(-TABLE[(p, df)], abs=5e-4)


def test_t_tends_to_the_normal_and_its_mass_to_one():
    assert quantile(0.975, 400) == pytest.approx(1.966, abs=1e-3)
    assert quantile(0.5, 3) == 0.0
    assert two_sided_mass(0.0, 5) == 0.0
    assert two_sided_mass(1e6, 6) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        quantile(1.0, 3)
    with pytest.raises(ValueError):
        two_sided_mass(1.0, 0)


def test_the_difference_is_the_pooled_two_sample_t_interval():
    before, after = [1.0, 1.2, 1.1], [1.5, 1.4, 1.6]
    d = difference(before, after)
    assert d is not None
    # by hand: means 1.1 and 1.5, each side's squares 0.02, pooled variance 0.04/4
    se = math.sqrt(0.01 * (1 / 3 + 1 / 3))
    assert d.estimate == pytest.approx(0.4)
    assert d.half_width == pytest.approx(2.7764 * se, rel=1e-4)
    assert (d.low, d.high) == pytest.approx((0.4 - 2.7764 * se, 0.4 + 2.7764 * se), rel=1e-4)
    assert d.df == 4 and not d.floored
    assert d.caught == pytest.approx((2.7764 + 1.5332) * se, rel=1e-4)


def test_runs_that_agree_more_than_their_own_sampling_allows_are_floored():
    same = [0.0, 0.0, 0.0]
    d = difference(same, same, within=[0.01] * 6)
    assert d is not None and d.floored
    assert d.run_sd == pytest.approx(0.1)
    assert d.low < 0 < d.high  # never a zero-width interval from lucky runs


def test_one_run_a_side_has_no_spread_between_runs():
    assert difference([1.0], [2.0]) is None
    d = difference([1.0], [2.0, 2.2])  # three runs: one degree of freedom, and wide
    assert d is not None and d.df == 1 and d.half_width > 1


def test_more_runs_a_side_show_smaller_changes():
    widths = [detectable(0.05, k)[0] for k in (2, 3, 5, 10)]
    assert widths == sorted(widths, reverse=True)
    half, nine = detectable(0.05, 3)
    assert half == pytest.approx(2.7764 * 0.05 * math.sqrt(2 / 3), rel=1e-4)
    assert nine > half
    assert detectable(0.05, 1) == (math.inf, math.inf)


def test_a_calibration_s_spread_is_pooled_with_its_degrees_of_freedom():
    noise = Noise(variance=0.01, df=9, source="cal.json")
    alone = difference([0.0], [0.3], noise=noise)  # one run a side: the calibration's
    assert alone is not None and alone.df == 9
    assert alone.half_width == pytest.approx(quantile(0.975, 9) * 0.1 * math.sqrt(2))
    pooled = difference([1.0, 1.2, 1.1], [1.5, 1.4, 1.6], noise=noise)
    assert pooled is not None and pooled.df == 13
    assert pooled.run_sd == pytest.approx(math.sqrt((0.04 + 0.09) / 13))
