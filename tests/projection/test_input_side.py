"""The projection's input side: which of the run's figures say what the pipeline takes
per batch, and what the verdict then says of the projected wait."""

from dataclasses import replace

import pytest

from gpuwhy.derived.pipeline import NEXT_TIMING, steps_pipeline
from gpuwhy.facts import (
    Facts,
    PipelineFacts,
    PipelineStage,
    ProgramFacts,
    StepFacts,
    TfDataFacts,
)
from gpuwhy.finding import Finding
from gpuwhy.formatting import duration
from gpuwhy.projection.step import measured_batch_seconds, projection_facts
from gpuwhy.rules.input.projected_bound import ProjectedInputBound
from gpuwhy.verdict import projection_clause, verdict
from tests import builders as b
from tests.projection.test_cost import TRAIN, placement

# ~17 ms on an A100: a ResNet-50-sized step (0.8 TFLOP of TF32 at 30% of 156 TFLOPS)
BIG = placement(tensor_ops=[b.tensor_op(flops=8e11, function=TRAIN, gradient=True)])


def pipeline(per_batch_s: float) -> PipelineFacts:
    stage = PipelineStage(name="Prefetch", kind="prefetch", root_elements_per_s=1 / per_batch_s)
    return PipelineFacts(id=1, stages=(stage,))


def cpu_steps(median_s: float, waited: float, typical_wait_s: float) -> StepFacts:
    """Keras fit on a CPU-only host: 50 steps of ``median_s``; ``waited`` of their time
    in all for input, ``typical_wait_s`` in the median step."""
    return StepFacts(
        source="keras-fit",
        marker="fit at train.py:30",
        count=51,
        warmup=1,
        total_s=50 * median_s,
        median_s=median_s,
        input_wait_fraction=waited,
        input_wait_median_s=typical_wait_s,
    )


def findings(facts: Facts):
    return ProjectedInputBound().check(facts, dict(ProjectedInputBound.options))


def test_a_pipeline_the_steps_seldom_waited_for_says_nothing_of_its_own_time():
    """cache().prefetch() beside a 4.9 s CPU step: 8% of the time went to a few long
    waits (each epoch's first batch), the typical step waited 1 ms. The steps' time is
    the model's: only the pipeline's own 3.2 ms per batch is joined with the 17 ms step."""
    steps = cpu_steps(4.9, waited=0.08, typical_wait_s=0.001)
    assert measured_batch_seconds(steps) is None
    found = projection_facts(Facts(placement=BIG), "A100", pipeline(0.0032), steps)
    assert found.input_batch_measured_s is None and found.input_batch_s == pytest.approx(0.0032)
    assert found.step_s == pytest.approx(0.017, rel=0.1)
    assert found.input_wait_fraction == found.input_wait_high == 0.0
    facts = Facts(placement=BIG, steps=steps, projection=found)
    assert findings(facts) == []
    assert "waiting for input" not in projection_clause(found, [])


def test_steps_that_waited_but_not_most_of_their_time_are_not_the_pipeline_s_time():
    """A starving pipeline (56 ms a batch alone) beside a 5.6 s CPU step that waited 20%
    of every step: the steps' pace was the model's; the projection and the finding use
    the pipeline's own 56 ms."""
    steps = cpu_steps(5.63, waited=0.2, typical_wait_s=1.1)
    found = projection_facts(Facts(placement=BIG), "A100", pipeline(0.056), steps)
    assert found.input_batch_measured_s is None
    assert 0.5 < found.input_wait_low < found.input_wait_fraction < 0.8
    (finding,) = findings(Facts(placement=BIG, steps=steps, projection=found))
    assert "the pipeline takes 56.0 ms per batch here" in finding.title


def test_steps_that_waited_most_of_their_time_give_the_delivered_figure():
    steps = cpu_steps(0.07, waited=0.9, typical_wait_s=0.063)
    found = projection_facts(Facts(placement=BIG), "A100", pipeline(0.056), steps)
    assert found.input_batch_measured_s == pytest.approx(0.07)
    # the band spans both: the pipeline alone at its low end, as delivered at its high
    assert found.input_wait_low < found.input_wait_fraction < found.input_wait_high
    # a few long waits make the mean, not the typical step: not the pipeline's pace
    sporadic = replace(steps, input_wait_median_s=0.002)
    assert measured_batch_seconds(sporadic) is None


def test_the_verdict_states_a_projected_wait_only_with_its_finding_and_its_band():
    steps = cpu_steps(5.63, waited=0.2, typical_wait_s=1.1)
    found = projection_facts(Facts(placement=BIG), "A100", pipeline(0.056), steps)
    facts = Facts(
        program=ProgramFacts(command=("train.py",), tensorflow_imported=True),
        placement=BIG,
        steps=steps,
        projection=found,
    )
    (finding,) = findings(facts)
    said = verdict(facts, [finding])
    low, high = f"{found.input_wait_low:.0%}", f"{found.input_wait_high:.0%}"
    share = f"{found.input_wait_fraction:.0%} ({low}–{high}) of it waiting for input"
    # the step its input paces, then the step alone: "step 56.0 ms, 69% ... of it
    # waiting" of a 17.2 ms step would say the wait is inside a step shorter than it
    paced = duration(found.step_s / (1 - found.input_wait_fraction))
    assert f", on an A100 (projected): step {paced}, {share}" in said
    assert f"(the step alone {duration(found.step_s)} (" in said
    assert "worst: On A100 (projected)" not in said  # its wait is said once
    # the worst is the input itself, before any lesser finding that comes after it
    launches = Finding(id="launch.projected-bound", severity="medium", title="On A100 ...")
    said = verdict(facts, [finding, launches])
    assert "; worst: the input pipeline" in said and "On A100 ..." not in said
    # the same projection without the finding (its rule turned off): no share stated
    assert "waiting for input" not in verdict(facts, []).split("(projected)")[1]


def test_a_prefetch_s_timer_is_not_the_pipeline_s_time_per_batch():
    """An injected Prefetch's self time is mostly waiting for its input (the collector
    leaves it out of the bottleneck too): the working stages give the time per batch."""
    from gpuwhy.projection.step import batch_seconds

    stages = (
        PipelineStage(name="TensorSlice", kind="source", root_elements_per_s=32000.0),
        PipelineStage(name="BatchV2", kind="batch", root_elements_per_s=38000.0),
        PipelineStage(name="Prefetch", kind="prefetch", root_elements_per_s=3900.0),
    )
    assert batch_seconds(PipelineFacts(id=1, stages=stages)) == pytest.approx(1 / 32000)
    alone = PipelineFacts(id=1, stages=stages[2:])  # nothing else timed: what there is
    assert batch_seconds(alone) == pytest.approx(1 / 3900)


def test_the_projection_costs_the_pipeline_the_findings_name():
    """A loop over two pipelines, its next() calls timed: the larger one (80 batches,
    1 ms each) and a generator the loop waited for longest (40 batches, 10 ms each,
    56 ms a batch alone). The run hands the projection the steps' pipeline
    (derived.pipeline.steps_pipeline, the rules' choice): the generator's, so the
    projected wait and input.projected-bound's slowest stage come from one pipeline.
    (Before, the projection took the loop's pipeline with the most elements: 1 ms a
    batch, no projected wait, and a finding, had there been one, on the other.)"""
    fast = PipelineStage(name="Prefetch", kind="prefetch", root_elements_per_s=1000.0)
    largest = PipelineFacts(
        id=1,
        consumer="python-loop",
        elements=80,
        stages=(fast,),
        wait_per_element_s=0.001,
        wait_source=NEXT_TIMING,
    )
    source = PipelineStage(
        name="Generator",
        kind="generator",
        location="train.py:20",
        function="batches",
        function_location="train.py:12",
        root_elements_per_s=1 / 0.056,
    )
    waited = replace(largest, id=2, elements=40, stages=(source,), bottleneck=0)
    waited = replace(waited, wait_per_element_s=0.010)
    tfdata = TfDataFacts(pipelines=(largest, waited))
    steps = StepFacts(source="tf-data", marker="next() at train.py:30", count=41, warmup=1)
    chosen = steps_pipeline(tfdata, steps)
    assert chosen is waited
    found = projection_facts(Facts(placement=BIG), "A100", chosen, steps)
    assert found.input_batch_s == pytest.approx(0.056)
    assert found.input_wait_fraction > 0.5
    facts = Facts(placement=BIG, steps=steps, tfdata=tfdata, projection=found)
    (finding,) = findings(facts)
    assert finding.title.endswith("its slowest stage is Generator(batches at train.py:12)")
    assert finding.location == "train.py:12"
    # the pipeline with the most elements would have given no projected wait
    alone = projection_facts(Facts(placement=BIG), "A100", largest, steps)
    assert alone.input_batch_s == pytest.approx(0.001) and alone.input_wait_fraction == 0.0
