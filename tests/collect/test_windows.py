"""A series in bounded windows: short series exactly as sampled; any length in at most
``capacity`` windows whose counts, means, minima and maxima are those of the raw samples
(checked against numpy on the raw data)."""

from __future__ import annotations

import numpy as np
import pytest

from gpuwhy.collect.windows import Windows


def fill(values, capacity=8, columns=1):
    w = Windows(columns, capacity)
    for i, v in enumerate(values):
        w.add(i * 0.1, v if columns > 1 else (v,))
    return w


def test_a_short_series_is_its_samples_with_their_types():
    values = [3, None, 2.5, 7]
    w = fill(values)
    assert w.samples_per_window == 1 and len(w) == 4
    assert w.means(0) == values and [type(v) for v in w.means(0)] == [int, type(None), float, int]
    assert w.t_first == w.t_last == [0.0, 0.1, 0.2, 0.30000000000000004]
    assert w.count == [1, 1, 1, 1] and w.known[0] == [1, 0, 1, 1]
    assert w.low[0] == w.high[0] == values


@pytest.mark.parametrize("n", [1, 7, 8, 9, 17, 100, 1023, 1024, 1025, 12_345])
def test_any_length_matches_numpy_on_the_raw_samples(n):
    rng = np.random.default_rng(n)
    raw = rng.random(n) * 100
    w = fill(raw.tolist(), capacity=8)
    assert len(w) <= 8 and sum(w.count) == w.samples == n
    width = w.samples_per_window
    assert all(c == width for c in w.count[:-1]) and 1 <= w.count[-1] <= width
    assert n <= 8 or len(w) > 4  # merged only when full: at least half the windows used
    for i, (lo, hi, mean) in enumerate(zip(w.low[0], w.high[0], w.means(0))):
        chunk = raw[i * width : (i + 1) * width]
        assert len(chunk) == w.count[i]
        assert mean == pytest.approx(chunk.mean(), rel=1e-12)
        assert (lo, hi) == (chunk.min(), chunk.max())
        assert (w.t_first[i], w.t_last[i]) == (i * width * 0.1, (i * width + len(chunk) - 1) * 0.1)
    weighted = sum(m * k for m, k in zip(w.means(0), w.known[0])) / sum(w.known[0])
    assert weighted == pytest.approx(raw.mean(), rel=1e-12)
    assert max(w.high[0]) == raw.max() and min(w.low[0]) == raw.min()


def test_missing_values_are_not_counted_and_an_all_missing_window_stays_missing():
    # column 0 known on every third sample only; column 1 never
    rows = [((float(i) if i % 3 == 0 else None), None) for i in range(40)]
    w = fill(rows, capacity=4, columns=2)
    assert w.samples_per_window == 16 and w.count == [16, 16, 8]
    known = [v for v, _ in rows if v is not None]
    assert sum(w.known[0]) == len(known) and w.known[1] == [0, 0, 0]
    means = w.means(0)
    assert means[0] == pytest.approx(np.mean([v for v in known if v < 16]))
    assert w.means(1) == [None, None, None] and w.high[1] == [None, None, None]
    assert max(w.high[0]) == max(known) and min(w.low[0]) == 0.0
    weighted = sum(m * k for m, k in zip(means, w.known[0]) if k) / sum(w.known[0])
    assert weighted == pytest.approx(np.mean(known))


def test_a_million_samples_stay_in_the_capacity_and_keep_a_one_sample_peak():
    n = 1_000_000
    w = Windows(2, 512)
    for i in range(n):
        w.add(i * 0.1, (0.5, 80.0 if i == 600_001 else 10.0))
    assert 256 < len(w) <= 512 and w.samples == n and sum(w.count) == n
    assert w.samples_per_window == 2048
    assert all(len(x) == len(w) for x in (w.t_first, w.t_last, w.count, *w.total, *w.high))
    assert w.t_first[0] == 0.0 and w.t_last[-1] == (n - 1) * 0.1
    assert max(w.high[1]) == 80.0 and w.high[1].index(80.0) == 600_001 // 2048
    assert sum(m * k for m, k in zip(w.means(1), w.known[1])) / n == pytest.approx(
        (10.0 * (n - 1) + 80.0) / n, rel=1e-12
    )


def test_capacity_must_be_even():
    with pytest.raises(ValueError):
        Windows(1, 5)
