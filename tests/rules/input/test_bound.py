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
    assert f.title == "Steps wait for input 50% of the time (10.0 ms of a 20.0 ms step)"
    assert f.evidence["steps_measured"] == 100
    assert "prefetch(tf.data.AUTOTUNE)" in f.fix and "num_parallel_calls" in f.fix
    assert f.gain_value == 0.5 and "2.0x" in f.estimated_gain


def test_an_unmeasured_wait_is_not_a_finding():
    assert check(None, source="keras-fit", marker="Model.fit at train.py:9") == []
