"""The CI gate's conditions: read as written, crossed only by a called change, one line
each saying which and by how much."""

import re
from dataclasses import replace

import pytest

from gpuwhy.comparison.gate import (
    GateError,
    blind,
    crossed_by_comparison,
    crossed_by_findings,
    not_judged,
    parse,
    read_file,
)
from gpuwhy.comparison.model import Change, Comparison, FindingChange, RunSide
from gpuwhy.finding import Finding

SIDE = RunSide(path="x.json", command="run", created="", verdict="")


def step(estimate, low, high, called):
    return Change("step_time", 0.010, 0.010 * estimate, estimate, low, high, called, 0.02)


def comparison(step_time=None, findings=(), confounded_by=None, busy=None):
    return Comparison(
        verdict="v",
        before=SIDE,
        after=SIDE,
        step_time=step_time,
        gpu_busy=busy,
        findings=findings,
        confounded_by=confounded_by,
    )


@pytest.mark.parametrize(
    "text, kind, amount, severity",
    [
        ("step:+5%", "step", 0.05, "medium"),
        ("step:12.5%", "step", 0.125, "medium"),
        ("gpu-busy:-10", "gpu-busy", 0.10, "medium"),
        ("new:medium", "new", 0.0, "medium"),
        ("high", "finding", 0.0, "high"),
        ("finding:LOW", "finding", 0.0, "low"),
    ],
)
def test_conditions_are_read_as_written(text, kind, amount, severity):
    c = parse(text)
    assert (c.kind, c.amount, c.severity) == (kind, pytest.approx(amount), severity)


@pytest.mark.parametrize("text", ["step:5", "step:+5", "new:urgent", "slower", "gpu-busy:10"])
def test_a_condition_that_cannot_be_read_is_one_line(text):
    with pytest.raises(GateError, match=re.escape(f"--fail-on {text!r}: expected step:+N%")):
        parse(text)


def test_a_run_takes_only_severities():
    assert parse("medium", findings_only=True).kind == "finding"
    with pytest.raises(GateError, match="a single run has no new findings; use 'medium'"):
        parse("new:medium", findings_only=True)
    with pytest.raises(GateError, match="expected a severity"):
        parse("step:+5%", findings_only=True)


def test_the_step_condition_fails_on_a_called_slowdown_of_its_size_only():
    gate = [parse("step:+5%")]
    assert crossed_by_comparison(gate, comparison(step(1.08, 1.06, 1.10, "slower"))) == [
        "step:+5%: the step time is 8.0% slower (+6.0% to +10.0%, 95%)"
    ]
    assert crossed_by_comparison(gate, comparison(step(1.04, 1.03, 1.05, "slower"))) == []
    # as large, but within the two runs' spread: not called, not failed
    assert crossed_by_comparison(gate, comparison(step(1.08, 0.97, 1.19, "same"))) == []
    assert crossed_by_comparison(gate, comparison(step(0.5, 0.4, 0.6, "faster"))) == []


def test_a_slowdown_on_a_busier_host_is_said_not_failed():
    gate = [parse("step:+5%")]
    why = "other processes used 60% of the host's CPU during AFTER against 3% during BEFORE"
    c = comparison(step(1.3, 1.2, 1.4, "slower"), confounded_by=why)
    assert crossed_by_comparison(gate, c) == []
    assert not_judged(gate, c) == [f"step:+5% not judged: the step time is 30.0% slower, but {why}"]


def test_new_findings_at_the_severity_fail_and_ignored_ids_do_not():
    found = (
        FindingChange("input.no-prefetch", "new", None, "medium", "no prefetch", "t.py:4"),
        FindingChange("env.no-gpu", "new", None, "high", "no GPU"),
        FindingChange("input.bound", "worse", "low", "high", "waits", "t.py:9"),
        FindingChange("steps.drift", "new", None, "low", "drifts"),
        FindingChange("input.sequential-map", "gone", "high", None, "sequential"),
    )
    gate = [parse("new:medium")]
    assert crossed_by_comparison(gate, comparison(findings=found)) == [
        "new:medium: new medium input.no-prefetch at t.py:4: no prefetch",
        "new:medium: new high env.no-gpu: no GPU",
        "new:medium: worse high input.bound at t.py:9: waits",
    ]
    ignoring = [replace(parse("new:medium"), ignore=("env.*",))]
    assert len(crossed_by_comparison(ignoring, comparison(findings=found))) == 2


def test_a_run_fails_on_its_findings_at_the_severity():
    findings = [
        Finding("input.bound", "high", "waits", location="t.py:9"),
        Finding("tensorcore.unused", "low", "fp32"),
    ]
    assert crossed_by_findings([parse("medium")], findings) == [
        "medium: high input.bound at t.py:9: waits"
    ]
    assert crossed_by_findings([parse("high")], findings[1:]) == []


def test_a_gate_file_holds_one_condition_a_line(tmp_path):
    path = tmp_path / "gate.txt"
    path.write_text("# the team's gate\nstep:+5%   # slower\n\nnew:medium\n")
    assert [c.text for c in read_file(str(path))] == ["step:+5%", "new:medium"]
    path.write_text("step:+5%\nfaster\n")
    with pytest.raises(GateError, match=r"gate.txt:2: --fail-on 'faster'"):
        read_file(str(path))
    with pytest.raises(GateError, match="cannot read"):
        read_file(str(tmp_path / "missing.txt"))


def test_a_gate_on_a_comparison_without_step_time_says_it_did_not_judge():
    conditions = [parse("step:+5%"), parse("new:medium")]
    assert not_judged(conditions, comparison()) == [
        "step:+5% not judged: no step time was compared (the comparison's notes say why)"
    ]


def test_a_step_condition_below_what_the_runs_can_show_is_said():
    conditions = [parse("step:+5%"), parse("step:+40%")]
    wide = replace(step(1.02, 0.8, 1.3, "same"), detectable=0.25)
    assert blind(conditions, comparison(wide)) == [
        "note: step:+5%: these runs cannot show a change under 25%, so this gate could only "
        "fail on a larger one (more runs a side, or --noise with a calibration, show smaller "
        "ones)"
    ]
    assert blind(conditions, comparison(replace(wide, called="slower"))) == []
