"""input.bound with the tfdata section: the slowest stage named, pointed at and fixed."""

from dataclasses import replace

import pytest

from gpuwhy.derived.pipeline import NEXT_TIMING
from gpuwhy.facts import EagerFacts, Facts, ProgramFacts, ReboundName, StepCode
from gpuwhy.rules.input.bound import InputBound
from tests import builders_tfdata as t


def check(facts, **options):
    return InputBound().check(facts, {**InputBound.options, **options})


def test_the_bottleneck_is_named_in_title_and_evidence_and_located_at_its_function():
    (f,) = check(t.facts(t.example_pipeline(), steps=t.fit_steps(0.40)))
    assert f.title == (
        "Steps wait for input 40% of the time (a mean 10.0 ms of a 25.0 ms step); "
        "the slowest stage is Map(augment at train.py:47)"
    )
    assert f.evidence["bottleneck"] == "stage Map(augment at train.py:47)"
    assert f.evidence["bottleneck_ms_per_element"] == 1.875  # 6 s over 3,200 elements
    assert f.evidence["bottleneck_threads"] == 1
    assert f.evidence["measured_by"] == "tf.data gap timer"
    assert f.location == "train.py:47"
    assert [row["stage"] for row in f.evidence["stages"] if row.get("bottleneck")] == [
        "Map(augment at train.py:47)"
    ]
    assert f.severity == "high" and f.gain_value == 0.40


def test_the_fix_is_the_bottlenecks_own():
    (f,) = check(t.facts(t.example_pipeline(), steps=t.fit_steps(0.40)))
    assert "tf.data.Dataset.random(seed=42)" in f.fix  # stateful random -> stateless
    assert "\nds.map(augment, num_parallel_calls=tf.data.AUTOTUNE)\n" in f.fix
    assert "prefetch" not in f.fix  # TF injected one: nothing to add
    assert "preprocess" not in f.fix  # not the generic advice


def test_a_python_loop_reads_the_loops_pipeline():
    pipeline = t.py_function_pipeline(consumer="python-loop")
    (f,) = check(t.facts(pipeline, steps=t.loop_steps(0.30)))
    assert f.evidence["bottleneck"] == "stage Map(<lambda> at train.py:30)"
    assert f.location == "train.py:30"
    assert "tf.py_function" in f.fix
    assert "ds.map(lambda x: tf.py_function(slow, [x], tf.int64), num_parallel_calls" in f.fix


def test_a_pipeline_the_steps_do_not_read_is_not_blamed():
    evaluate = replace(t.example_pipeline(), consumer="keras-evaluate")
    (f,) = check(t.facts(evaluate, steps=t.fit_steps(0.40)))
    assert "bottleneck" not in f.evidence and f.location == "train.py:80"
    assert "num_parallel_calls" in f.fix  # the general advice


def test_file_reader_bottleneck_gets_parallel_reads():
    pipeline = t.pipeline(
        t.tfrecord("GZIP", self_time_s=5.0), t.parse(self_time_s=1.0), t.batch(), bottleneck=0
    )
    (f,) = check(t.facts(pipeline, steps=t.fit_steps(0.30)))
    assert f.evidence["bottleneck"] == "stage TFRecord at train.py:60"
    assert f.location == "train.py:60"
    assert "TFRecordDataset(filenames, compression_type='GZIP', num_parallel_reads=" in f.fix
    # no buffer at its end: after the last call written
    assert "in place of: ds.batch(32)\nds.batch(32).prefetch(tf.data.AUTOTUNE)" in f.fix


def test_cheap_per_element_map_gets_batch_before_map():
    cheap = t.parse(
        name="MapAndBatch",
        written_as=("map", "batch"),
        function="scale",
        function_location="train.py:22",
        elements=100,
        ratio=32.0,
        self_time_s=0.08,
        parallelism=4,
        codec_ops=(),
        written_calls=("ds.map(scale)", ".batch(32)"),
    )  # 25 µs per call
    pipeline = t.pipeline(t.tfrecord(), cheap, bottleneck=1)
    (f,) = check(t.facts(pipeline, steps=t.fit_steps(0.30)))
    assert "\nds.batch(32).map(scale, num_parallel_calls=tf.data.AUTOTUNE)\n" in f.fix
    # TF fused the two: the stage's line is the map's, not the batch's
    (leave_out,) = [line for line in f.fix.splitlines() if "leave out" in line]
    assert leave_out == "# and leave out the .batch(32) after it"
    assert "25 µs per call" in f.fix
    (costly,) = check(t.facts(pipeline, steps=t.fit_steps(0.30)), vectorise_below_us=10)
    assert "ds.batch(32).map(scale" not in costly.fix


def test_from_tfdata_alone_when_the_steps_measured_no_wait():
    pipeline = t.example_pipeline(wait_per_element_s=0.010, gap_median_s=0.015)
    (f,) = check(t.facts(pipeline, steps=t.fit_steps(None)))
    assert f.title == (
        "Model.fit waits for input 40% of the time (10.0 ms per batch beside "
        "15.0 ms of work on it); the slowest stage is Map(augment at train.py:47)"
    )
    assert f.evidence["input_wait_fraction"] == 0.4
    assert "GetNext" in f.evidence["measured_by"]
    assert f.location == "train.py:47" and f.gain_value == pytest.approx(0.4)


def test_from_tfdata_alone_needs_a_wait_worth_reporting():
    quick = t.example_pipeline(wait_per_element_s=0.0005, gap_median_s=0.015)  # 3%
    unmeasured = t.example_pipeline(wait_per_element_s=None)
    assert check(t.facts(quick, unmeasured, steps=t.fit_steps(None))) == []


def test_without_tfdata_the_step_finding_is_unchanged():
    (f,) = check(Facts(steps=t.fit_steps(0.40)))
    assert f.location == "train.py:80" and "bottleneck" not in f.evidence


def test_a_buffered_pipeline_far_faster_than_the_wait_is_the_python_call_per_step():
    # arrays in memory, batched, prefetched by TF: 0.2 ms of work per batch, yet each
    # next() takes 6 ms of a 20 ms step
    cheap = t.in_memory_pipeline()
    (f,) = check(t.facts(cheap, steps=t.loop_steps(0.30)))
    assert f.severity == "medium"
    assert f.title == (
        "Steps spend 30% of the time fetching their batch (a mean 6.0 ms of a 20.0 ms step), "
        "though the pipeline makes a batch in 200.0 µs (TF's stage timers) and keeps one "
        "ready: the cost is the Python call per step"
    )
    # a traced step: no tf.function offered, and never one around the loop over the dataset
    assert "@tf.function" not in f.fix and "a larger batch" in f.fix
    assert "keep the loop over the dataset in Python" in f.fix
    assert f.evidence["production_ms_per_batch"] == 0.2
    # an eager step (TF's walkthrough): the step named by the source is what to trace
    code = StepCode("train_step", "walk.py:18", "def train_step(x, y):")
    eager = EagerFacts(sampled_steps=10, ops=1200, per_step=120.0, step_code=code)
    (traced,) = check(replace(t.facts(cheap, steps=t.loop_steps(0.30)), eager=eager))
    assert "# walk.py:18: above `def train_step(x, y):`\n@tf.function\n" in traced.fix
    assert "for x, y in" not in traced.fix
    # metrics the epoch loop re-creates: named with the decorator, made once
    made = ReboundName("train_loss", "walk.py:40", "walk.py:39", metric=True)
    eager = replace(eager, step_code=replace(code, rebound=(made,)))
    (traced,) = check(replace(t.facts(cheap, steps=t.loop_steps(0.30)), eager=eager))
    assert "\ntrain_loss.reset_state()\n" in traced.fix
    # Keras fit's wait comes from the gap timer, not next(): never this case
    (fit,) = check(t.facts(replace(cheap, consumer="keras-fit"), steps=t.fit_steps(0.30)))
    assert fit.title.startswith("Steps wait for input 30%")


def test_a_pipeline_that_makes_a_batch_in_a_tenth_of_a_step_is_the_python_call_too():
    """An eager loop's next() waits for the GIL its own op dispatch holds: 1.6 ms a step
    beside a pipeline that makes a batch in 1.0 ms, kept ready, of a 20 ms step. Not the
    source stage's (nothing to map in it, no placeholder template): the call per step."""
    source = t.stage(
        name="TensorSlice",
        kind="source",
        written_as=("from_tensor_slices",),
        self_time_s=0.15,
        elements=9600,
    )
    cheap = t.pipeline(
        source,
        t.batch(self_time_s=0.15, elements=300),
        t.prefetch(elements=300),
        consumer="python-loop",
        bottleneck=0,
    )
    (f,) = check(t.facts(cheap, steps=t.loop_steps(0.08)))
    assert "the cost is the Python call per step" in f.title, f.title
    assert "<" not in f.fix  # no template to fill in
    # a batch that takes a third of the step is the pipeline's work: not said so
    busy = replace(source, self_time_s=1.0, self_time_per_element_s=1.0 / 9600)
    slow = replace(cheap, stages=(busy, *cheap.stages[1:]))
    (f,) = check(t.facts(slow, steps=t.loop_steps(0.08)))
    assert "the cost is the Python call per step" not in f.title


def test_one_cause_wrapped_by_several_pipelines_is_what_the_steps_waited_for():
    from gpuwhy.derived.pipeline import NEXT_TIMING, steps_pipeline

    def generator_pipeline(pipeline_id, elements):
        return t.pipeline(
            t.generator_source(),
            t.batch(),
            id=pipeline_id,
            consumer="python-loop",
            bottleneck=0,
            elements=elements,
            wait_per_element_s=0.010,
            wait_source=NEXT_TIMING,
        )

    # the generator: 3 pipelines of 40 elements waiting 10 ms each (1.2 s in all);
    # a map-heavy pipeline alone waited longest of any one pipeline (0.8 s)
    other = replace(
        t.example_pipeline(consumer="python-loop", wait_source=NEXT_TIMING),
        id=9,
        elements=80,
        wait_per_element_s=0.010,
    )
    facts = t.facts(*(generator_pipeline(n, 40) for n in (1, 2, 3)), other, steps=t.loop_steps(0.6))
    chosen = steps_pipeline(facts.tfdata, facts.steps)
    assert chosen is not None and chosen.stages[0].function == "batches"
    (f,) = check(facts)
    assert f.title.endswith("the slowest stage is Generator(batches at train.py:12)")


def side_loop(elements: int, **changes):
    """An evaluation loop over an unprefetched test set after fit, read in Python:
    0.3 ms in each next() beside 5.5 ms of model(x), a 5.2 % share of its own loop."""
    return t.in_memory_pipeline(
        id=5,
        location="train.py:13",
        elements=elements,
        wait_per_element_s=0.0003,
        gap_median_s=0.0055,
        wait_source=NEXT_TIMING,
        **changes,
    )


def unresolved_fit(**changes):
    """Fit's steps whose measured wait is within its uncertainty: not judged."""
    return t.fit_steps(0.01, input_wait_error=0.07, **changes)


def test_a_loop_beside_the_steps_is_judged_by_what_it_cost_the_steps():
    """A few batches read beside fit's 7.5 s of steps (24 ms of waits) are no finding,
    whatever their own loop's share; the same loop, long enough to cost the steps a
    twentieth of their time, is one."""
    fit = t.example_pipeline(wait_per_element_s=0.0002)
    assert check(t.facts(fit, side_loop(80), steps=unresolved_fit())) == []
    (f,) = check(t.facts(fit, side_loop(1300), steps=unresolved_fit()))
    assert f.evidence["pipeline"].startswith("tf.data pipeline 5 built at train.py:13")
    assert f.evidence["input_wait_fraction"] == pytest.approx(0.052, abs=0.001)


def gathered_once(elements: int = 160, **changes):
    """A test set gathered once into a list after fit (``[x.numpy() for x, _ in
    test_ds]``): 0.39 ms in each next() beside 0.2 ms of converting, 62 ms in all."""
    return t.in_memory_pipeline(
        id=6,
        location="train.py:13",
        read_at="train.py:18",
        elements=elements,
        wait_per_element_s=0.00039,
        gap_median_s=0.0002,
        wait_source=NEXT_TIMING,
        **changes,
    )


def test_a_pass_gathered_once_beside_fit_is_judged_by_the_run_s_time():
    """Fit's 40 short steps took 0.36 s of a 4.4 s program; the gather after them waited
    62 ms. Against the steps' time that was 17 %, and input.bound said HIGH "The loop at
    train.py:18 waits for input 67% of the time", a gain of 67 % of step time. Against
    the run it is 1.4 %: no finding. A record without the program's time falls back on
    the steps' (a medium, said of the run, never a gain on the steps)."""
    fit = t.example_pipeline(wait_per_element_s=0.0002)
    steps = unresolved_fit(total_s=0.36, count=40)
    facts = t.facts(fit, gathered_once(), steps=steps)
    assert check(replace(facts, program=ProgramFacts(("train.py",), seconds=4.4))) == []
    (f,) = check(facts)
    assert f.severity == "medium" and f.gain_value == pytest.approx(0.0624 / 0.36, abs=1e-3)
    assert "beside the training steps: 62.4 ms, 17% of the run" in f.title
    assert "of the run" in f.estimated_gain and "step time" not in f.estimated_gain


def test_a_loop_beside_the_steps_that_holds_much_of_the_run_is_high_by_that_share():
    """3,000 elements gathered at 0.39 ms each: 1.17 s of a 4.4 s program, 27 %."""
    fit = t.example_pipeline(wait_per_element_s=0.0002)
    facts = t.facts(fit, gathered_once(3000), steps=unresolved_fit(total_s=0.36, count=40))
    (f,) = check(replace(facts, program=ProgramFacts(("train.py",), seconds=4.4)))
    assert f.severity == "high" and f.gain_value == pytest.approx(1.17 / 4.4, abs=1e-3)
    assert f.evidence["share_of_run"] == pytest.approx(0.266, abs=1e-3)
    assert f.evidence["input_wait_fraction"] == pytest.approx(0.661, abs=1e-3)  # its own loop's


def test_the_loop_the_steps_read_is_judged_by_its_own_share():
    """The pipeline the steps read (their wait unmeasured) keeps its own share: its
    loop is the steps."""
    (f,) = check(t.facts(side_loop(80), steps=t.loop_steps(None)))
    assert f.evidence["elements_read"] == 80


def test_a_loop_over_a_distributed_dataset_is_not_blamed_on_a_test_loop_s_pipeline():
    """A MirroredStrategy loop at train.py:90 reads a distributed dataset, whose pipeline
    TF keeps no model of; a test loop at train.py:95 reads a plain one afterwards. The
    steps' wait is the distributed dataset's (built at train.py:25), where input.bound
    once named the test pipeline's BatchV2 with a parallel batch as the fix."""
    from gpuwhy.facts import DistributedInput, DistributeFacts, StepLoop

    test_loop = replace(
        t.in_memory_pipeline(consumer="python-loop", wait_source=NEXT_TIMING),
        location="train.py:94",
        read_at="train.py:95",
        wait_per_element_s=0.0002,
    )
    steps = replace(
        t.loop_steps(0.9), loops=(StepLoop("tf-data", "train.py:90", 301, 1.0, 7.0, 0.02),)
    )
    distribute = DistributeFacts(
        strategy="MirroredStrategy",
        replicas=1,
        inputs=(
            DistributedInput(
                how="experimental_distribute_dataset", location="train.py:25",
                written="ds.batch(32)", global_batch=32,
            ),
        ),
    )  # fmt: skip
    facts = replace(
        t.facts(test_loop, steps=steps, distributed_reads=("train.py:90",)), distribute=distribute
    )
    (f,) = check(facts)
    assert "the slowest stage" not in f.title and "tf.distribute dataset" in f.title
    assert f.location == "train.py:25"
    assert "for _ in ds.take(200):" in f.fix and "<" not in f.fix
    assert "pipeline" not in f.evidence  # the test loop's is not named
    # the same loop read where no distributed dataset was seen: the loop's pipeline, as
    # before (an iterator made at iter(ds) and read by next(it) at another line)
    (f,) = check(replace(facts, tfdata=replace(facts.tfdata, distributed_reads=())))
    assert "tf.distribute" not in f.title


def test_a_preprocessing_layer_s_adapt_pass_is_no_wait_of_the_steps():
    """13 adapt() calls before fit (the structured-data tutorial): each reads its own
    pipeline once, with nothing beside it to wait; input.bound read two of them as HIGH,
    "StringLookup.adapt ... waits for input 84% of the time"."""
    adapt = replace(
        t.example_pipeline(consumer="python-loop", wait_source=NEXT_TIMING),
        id=7,
        read_at="train.py:111",
        read_via="StringLookup.adapt",
        elements=370,
        wait_per_element_s=0.0033,
        gap_median_s=0.0006,
    )
    fit = t.example_pipeline(wait_per_element_s=0.0)  # fit's own pipeline keeps up
    assert check(t.facts(fit, adapt, steps=t.fit_steps(None))) == []
    # a loop of the program's read through a library's generator stays judged
    (f,) = check(t.facts(fit, replace(adapt, read_via="as_numpy"), steps=t.fit_steps(None)))
    assert "at train.py:111 waits for input" in f.title
