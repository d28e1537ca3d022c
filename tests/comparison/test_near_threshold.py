"""A finding whose measure only crossed its threshold between the two sides is not
called new, worse, gone or better: records diagnosed from small step facts whose input
wait sits either side of input.bound's 5 % (medium) and 20 % (high)."""

import pytest

from gpuwhy.comparison import compare, compare_runs
from gpuwhy.comparison.gate import crossed_by_comparison, near_threshold, parse
from gpuwhy.comparison.near_threshold import loosened
from gpuwhy.facts import Facts, StepFacts
from gpuwhy.finding import Finding
from gpuwhy.record import Record
from gpuwhy.rules import ALL_RULES
from gpuwhy.rules.thresholds import NEAR


def run(wait: float) -> Record:
    """A run of 100 measured 20 ms steps that waited ``wait`` of their time for input."""
    steps = StepFacts(
        source="tf-data",
        marker="next() on a tf.data iterator at train.py:41",
        count=101,
        warmup=1,
        median_s=0.020,
        total_s=2.0,
        input_wait_fraction=wait,
        input_wait_median_s=0.020 * wait,
        durations=(0.5, *[0.020] * 100),
        input_waits=(0.1, *[0.020 * wait] * 100),
    )
    return Record.diagnose("run", Facts(steps=steps))


def changes(comparison):
    return [(f.id, f.change) for f in comparison.findings]


def set_aside(comparison):
    return [(f.id, f.change) for f in comparison.findings_near_threshold]


def test_a_wait_just_over_the_threshold_after_one_just_under_it_is_not_new():
    before, after = run(0.045), run(0.06)
    assert not any(f.id == "input.bound" for f in before.findings)
    assert [f.severity for f in after.findings if f.id == "input.bound"] == ["medium"]
    c = compare(before, after)
    assert ("input.bound", "new") not in changes(c)
    assert set_aside(c) == [("input.bound", "new")]
    assert any(
        n.startswith("input.bound at train.py:41 (medium in AFTER) not called new: most of ")
        and "(medium_at 0.05, high_at 0.2) a fifth looser" in n
        for n in c.notes
    )
    gate = [parse("new:medium")]
    assert crossed_by_comparison(gate, c) == []
    (line,) = near_threshold(gate, c)
    assert line.startswith("note: new:medium: medium input.bound at train.py:41 not counted new")


def test_a_wait_that_grew_from_well_under_the_threshold_is_new():
    c = compare(run(0.03), run(0.06))
    assert ("input.bound", "new") in changes(c)
    assert set_aside(c) == []
    assert crossed_by_comparison([parse("new:medium")], c)


@pytest.mark.parametrize(
    "before, after, change, stands",
    [
        (0.17, 0.21, "worse", False),  # medium at 17 %, high at 21 %: the line at 20 %
        (0.10, 0.21, "worse", True),
        (0.06, 0.045, "gone", False),
        (0.06, 0.02, "gone", True),
        (0.21, 0.19, "better", False),
    ],
)
def test_worse_gone_and_better_count_only_beyond_the_threshold_s_margin(
    before, after, change, stands
):
    c = compare(run(before), run(after))
    assert (("input.bound", change) in changes(c)) is stands
    assert (("input.bound", change) in set_aside(c)) is not stands


def test_several_runs_a_side_set_it_aside_only_where_most_of_the_other_side_reach_it():
    after = [run(0.06), run(0.062), run(0.058)]
    near = compare_runs([run(0.045), run(0.03), run(0.046)], after)
    assert set_aside(near) == [("input.bound", "new")]
    far = compare_runs([run(0.03), run(0.02), run(0.046)], after)
    assert ("input.bound", "new") in changes(far) and set_aside(far) == []


def test_a_finding_of_a_rule_without_a_measured_threshold_stays_new():
    """placement.float64 is read from the graph: nothing to loosen, so what the records
    say stands, whatever their facts."""
    found = Finding(id="placement.float64", title="4 float64 ops", severity="medium")
    before = run(0.01)
    after = Record(command="run", facts=before.facts, findings=[*before.findings, found])
    c = compare(before, after)
    assert ("placement.float64", "new") in changes(c) and set_aside(c) == []


def test_every_measured_threshold_is_a_numeric_option_of_its_rule_loosened_its_way():
    for rule in ALL_RULES:
        loose = loosened(rule.id)
        assert (loose is None) == (not rule.measured_thresholds), rule.id
        for name, kind in rule.measured_thresholds.items():
            assert kind in ("floor", "ceiling"), (rule.id, name)
            assert isinstance(rule.options[name], (int, float)), (rule.id, name)
            assert name in rule.documented_options(), (rule.id, name)
            factor = 1 - NEAR if kind == "floor" else 1 + NEAR
            assert loose[name] == pytest.approx(rule.options[name] * factor)
