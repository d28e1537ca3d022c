"""input.bound from small step facts."""

import pytest

from gpuwhy.facts import Facts, StepFacts
from gpuwhy.rules.input.bound import InputBound


def steps(wait, source="tf-data", marker="next() on a tf.data iterator at train.py:41"):
    return StepFacts(
        source=source,
        marker=marker,
        count=101,
        warmup=1,
        median_s=0.020,
        total_s=2.0,
        input_wait_fraction=wait,
        input_wait_median_s=None if wait is None else 0.020 * wait,
    )


def check(wait, **kw):
    return InputBound().check(Facts(steps=steps(wait, **kw)), dict(InputBound.options))


@pytest.mark.parametrize(
    "wait, severity",
    [(0.04, None), (0.05, "medium"), (0.19, "medium"), (0.20, "high"), (0.68, "high")],
)
def test_severity_follows_the_measured_wait(wait, severity):
    found = check(wait)
    assert [f.severity for f in found] == ([severity] if severity else [])


def test_the_finding_points_at_the_loop_and_gives_the_gain():
    (f,) = check(0.5)
    assert f.location == "train.py:41"
    assert f.title == "Steps wait for input 50% of the time (a mean 10.0 ms of a 20.0 ms step)"
    assert f.evidence["steps_measured"] == 100
    assert "prefetch(tf.data.AUTOTUNE)" in f.fix and "num_parallel_calls" in f.fix
    assert f.gain_value == 0.5 and "2.0x" in f.estimated_gain


def test_an_unmeasured_wait_is_not_a_finding():
    assert check(None, source="keras-fit", marker="Model.fit at train.py:9") == []


def test_a_share_made_of_a_few_long_waits_says_so_with_means_not_medians():
    # 200 steps of 11 ms, 12 of them behind waits of 0.16-1.0 s (a shuffle buffer
    # refilling, files opened): 40% of the time waits, the median wait is 0.2 ms.
    long = [0.16 + i * (1.0 - 0.16) / 11 for i in range(12)]
    waits = [0.0002] * 188 + long
    durations = [0.011 + w for w in waits]
    total = sum(durations)
    bursty = StepFacts(
        source="tf-data",
        marker="next() on a tf.data iterator at train.py:41",
        count=201,
        warmup=1,
        median_s=0.0112,
        total_s=total,
        input_wait_fraction=sum(waits) / total,
        input_wait_median_s=0.0002,
        durations=(0.5, *durations),
        input_waits=(0.4, *waits),
    )
    (f,) = InputBound().check(Facts(steps=bursty), dict(InputBound.options))
    mean_step = total / 200
    assert f.title.startswith(
        f"Steps wait for input {sum(waits) / total:.0%} of the time "
        f"(a mean {sum(waits) / 200 * 1000:.1f} ms of a {mean_step * 1000:.1f} ms step); "
    )
    assert f.title.endswith(
        "; 12 of 200 waits, of 160.0 ms–1,000.0 ms, make 99% of it (median wait 0.2 ms)"
    )
    assert f.evidence["input_wait_median_ms"] == 0.2
    # evenly spread waits are no bursts
    (even,) = check(0.5)
    assert "waits, of" not in even.title


def test_bursts_in_a_long_runs_first_steps_say_they_are_of_those_steps():
    # 200 steps kept one by one of a run of 100,000, 12 of them behind long waits: the
    # title's share is the whole run's, the bursts only the first steps'
    waits = [0.0002] * 188 + [0.5] * 12
    durations = [0.011 + w for w in waits]
    long_run = StepFacts(
        source="tf-data",
        marker="next() on a tf.data iterator at train.py:41",
        count=100_000,
        warmup=1,
        median_s=0.0112,
        total_s=1200.0,
        input_wait_fraction=0.1,
        input_wait_median_s=0.0002,
        durations=(0.5, *durations),
        input_waits=(0.4, *waits),
        all_kept=False,
    )
    (f,) = InputBound().check(Facts(steps=long_run), dict(InputBound.options))
    assert f.title.startswith("Steps wait for input 10% of the time")
    burst = "in the first 201 steps, 12 of 200 waits, of 500.0 ms–500.0 ms, make 99% of their wait"
    assert burst in f.title and burst in f.evidence["wait_bursts"]
