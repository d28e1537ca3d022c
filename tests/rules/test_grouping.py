"""One finding per cause: one generator read through several pipelines is one finding."""

from dataclasses import replace

from gpuwhy.finding import Finding
from gpuwhy.rules import run_rules
from gpuwhy.rules.grouping import group_by_cause
from tests import builders_tfdata as t


def finding(rule="input.python-function", location="train.py:12", pipeline="p1", **changes):
    base = Finding(
        id=rule,
        severity="high",
        title=f"Python in {pipeline}",
        evidence={"pipeline": pipeline, "share": 0.5},
        location=location,
        gain_value=0.4,
    )
    return replace(base, **changes)


def generator_pipeline(pipeline_id: int, location: str, wait: float) -> object:
    """One generator (train.py:12) wrapped by a pipeline built at ``location``."""
    return t.pipeline(
        t.generator_source(location=location),
        t.batch(location=location),
        id=pipeline_id,
        location=location,
        consumer="python-loop",
        bottleneck=0,
        wait_per_element_s=wait,
    )


def test_one_generator_in_three_pipelines_is_one_finding_listing_them():
    pipelines = [
        generator_pipeline(1, "train.py:20", 0.010),
        generator_pipeline(2, "train.py:30", 0.012),
        generator_pipeline(3, "train.py:40", 0.002),
    ]
    findings, _ = run_rules(t.facts(*pipelines, steps=t.loop_steps(0.40)))
    python = [f for f in findings if f.id == "input.python-function"]
    assert len(python) == 1
    (merged,) = python
    assert merged.location == "train.py:12"  # the generator, written once
    assert merged.title.endswith("(one cause, in 3 pipelines)")
    rows = merged.evidence["pipelines"]
    assert len(rows) == 3 and "pipeline" not in merged.evidence
    # the most severe first, each with its own figures
    assert rows[0]["severity"] == merged.severity
    assert len({row["finding"] for row in rows}) >= 2


def test_the_most_severe_leads_and_keeps_its_fix():
    low = finding(pipeline="test", severity="low", fix="low fix", gain_value=0.01)
    high = finding(pipeline="train", fix="high fix")
    (merged,) = group_by_cause([low, high])
    assert merged.severity == "high" and merged.fix == "high fix"
    assert [row["pipeline"] for row in merged.evidence["pipelines"]] == ["train", "test"]
    assert merged.evidence["share"] == 0.5


def test_other_rules_other_lines_and_non_pipeline_findings_stay_apart():
    at_13 = finding(location="train.py:13")
    other_rule = finding(rule="input.sequential-map")
    no_pipeline = replace(finding(), evidence={"ops": 3})
    twice = [no_pipeline, replace(no_pipeline, title="another op type")]
    found = group_by_cause([finding(), at_13, other_rule, *twice])
    assert len(found) == 5
    assert found[0].title == "Python in p1"  # a single finding is left as it was


def test_order_follows_each_causes_first_finding():
    a1, b, a2 = finding(pipeline="a1"), finding(location="x.py:1"), finding(pipeline="a2")
    merged = group_by_cause([a1, b, a2])
    assert [f.location for f in merged] == ["train.py:12", "x.py:1"]


def stages(*locations):
    """input.python-function's rows: the Python stages a pipeline's finding names."""
    return [{"stage": f"Stage({loc})", "location": loc} for loc in locations]


def test_two_pipelines_led_by_different_stages_of_the_same_python_are_one_cause():
    """Fit's training data timed its map as the slowest stage, its validation data (same
    function) its generator: the same two stages, one cause, led by the most severe."""
    train = finding(
        location="p.py:19",
        pipeline="train",
        evidence={"pipeline": "train", "python_stages": stages("p.py:19", "p.py:8")},
    )
    validation = finding(
        location="p.py:8",
        pipeline="validation",
        severity="low",
        gain_value=None,
        evidence={"pipeline": "validation", "python_stages": stages("p.py:8", "p.py:19")},
    )
    (merged,) = group_by_cause([validation, train])
    assert merged.location == "p.py:19" and merged.severity == "high"
    assert [row["pipeline"] for row in merged.evidence["pipelines"]] == ["train", "validation"]


def test_a_finding_inside_another_s_code_is_merged_one_sharing_part_of_it_is_not():
    both = finding(
        severity="low",
        evidence={"pipeline": "a", "python_stages": stages("train.py:12", "train.py:30")},
    )
    generator_only = finding(pipeline="b", evidence={"pipeline": "b"})
    other_map = finding(
        pipeline="c",
        evidence={"pipeline": "c", "python_stages": stages("train.py:12", "train.py:44")},
    )
    merged, apart = group_by_cause([generator_only, both, other_map])
    # the fix of the finding naming both stages covers the one naming the generator:
    # it leads, at the severity of the most severe
    assert merged.evidence["python_stages"] == both.evidence["python_stages"]
    assert merged.severity == "high" and len(merged.evidence["pipelines"]) == 2
    assert apart.evidence["pipeline"] == "c"
