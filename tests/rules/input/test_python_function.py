"""input.python-function from small tfdata facts."""

from dataclasses import replace

import pytest

from gpuwhy.rules import run_rules
from gpuwhy.rules.input.python_function import PythonFunction
from tests import builders_tfdata as t


def check(facts, **options):
    return PythonFunction().check(facts, {**PythonFunction.options, **options})


def test_py_function_bottleneck_of_an_input_bound_loop_is_high():
    pipeline = t.py_function_pipeline(consumer="python-loop")
    (f,) = check(t.facts(pipeline, steps=t.loop_steps(0.30)))
    assert f.severity == "high"
    assert f.title == (
        "Input stage Map(<lambda> at train.py:30) runs Python: 92% of the "
        "pipeline's time, its slowest stage (steps wait for input 30% of the time)"
    )
    assert f.location == "train.py:30"
    assert f.evidence["slowest_stage"] is True and f.evidence["threads"] == 1
    assert f.evidence["input_wait_fraction"] == 0.3
    assert f.evidence["input_wait_measured_by"] == (
        "next() on a tf.data iterator at train.py:90 by next() timing"
    )
    assert "tf.py_function" in f.fix
    # the lambda as written, not an undefined name
    assert "ds.map(lambda x: tf.py_function(slow, [x], tf.int64), " in f.fix
    assert "num_parallel_calls=tf.data.AUTOTUNE)" in f.fix
    assert f.gain_value == pytest.approx(0.30 * 6.0 / 6.53, abs=1e-4)
    assert f.estimated_gain.startswith("estimate: up to 28% of step time")


def test_py_function_bottleneck_of_a_tenth_of_the_step_is_medium_as_the_wait_is():
    """The steps wait 11% for input: input.bound says medium, and so does the Python
    stage behind that wait (a healthy-looking generator fit read HIGH here)."""
    pipeline = t.py_function_pipeline(consumer="python-loop")
    findings, _ = run_rules(t.facts(pipeline, steps=t.loop_steps(0.11)))
    severities = {f.id: f.severity for f in findings}
    assert severities["input.python-function"] == severities["input.bound"] == "medium"


def test_bottleneck_without_a_wait_is_medium():
    pipeline = t.py_function_pipeline(wait_per_element_s=0.0001)  # ~1% wait
    (f,) = check(t.facts(pipeline))
    assert f.severity == "medium" and "(steps wait for input" not in f.title
    # measured, and said as measured: what this run showed, what a faster step meets
    assert f.title.endswith(
        "; the steps waited 1% for input on this run, a faster step (a GPU's) may wait for it"
    )


def test_costly_python_stage_that_is_not_the_bottleneck_is_low():
    pipeline = t.py_function_pipeline(bottleneck=2)
    (f,) = check(t.facts(pipeline, steps=t.fit_steps(0.40)))
    assert f.severity == "low" and "slowest" not in f.title


def test_cheap_python_stage_is_not_reported():
    cheap = t.py_function_pipeline(bottleneck=2)
    stages = list(cheap.stages)
    stages[1] = replace(stages[1], self_time_s=0.03)  # 5% of the time
    assert check(t.facts(replace(cheap, stages=tuple(stages)))) == []
    assert len(check(t.facts(replace(cheap, stages=tuple(stages))), min_share=0.05)) == 1


def test_unmeasured_python_stage_is_low_and_says_so():
    stages = tuple(
        replace(s, self_time_s=0.0, elements=0, self_time_per_element_s=None)
        for s in t.py_function_pipeline().stages
    )
    pipeline = t.py_function_pipeline(
        stages=stages, bottleneck=None, model_error="Cannot find this iterator's analytical model"
    )
    (f,) = check(t.facts(pipeline))
    assert f.severity == "low" and f.gain_value is None
    assert f.evidence["time"].startswith("not measured: Cannot find")


def test_a_generator_alone_in_its_pipeline_is_slowest_but_unmeasured_without_a_large_wait():
    """Keras fit over a PyDataset with workers: TF keeps no timers (autotune off), the
    generator is the pipeline's only stage, the slowest by elimination, its cost not
    measured. The steps' wait (timed around the generator) decides: low below
    `high_input_wait` (gpuwhy's doc says so; a trial read medium at a 2 % wait), high
    at it."""
    (source,) = [s for s in t.py_function_pipeline().stages if s.python][:1]
    generator = replace(
        source, name="Generator", kind="generator", written_as=("from_generator",),
        self_time_s=0.0, elements=0, self_time_per_element_s=None, root_elements_per_s=None,
        by_library=True,
    )  # fmt: skip
    pipeline = t.py_function_pipeline(
        stages=(generator,), bottleneck=0, model_error="Keras turned autotune off"
    )
    (quiet,) = check(t.facts(pipeline, steps=t.fit_steps(0.02)))
    assert quiet.severity == "low"
    (waiting,) = check(t.facts(pipeline, steps=t.fit_steps(0.60)))
    assert waiting.severity == "high"
    # TF counted nothing and ran no thread of it (Keras' workers did): unknown, where
    # the evidence read "elements: 0, threads: 1" for a PyDataset with workers=2
    for row in (waiting.evidence, waiting.evidence["python_stages"][0]):
        assert row["elements"] is None and row["threads"] is None
    # Keras' generator, not TF's one-at-a-time Python stage
    assert waiting.evidence["why"].startswith("Keras reads the data source one batch at a time")


def test_from_generator_gets_slices_records_or_interleaved_generators():
    pipeline = t.pipeline(t.generator_source(), t.batch(), bottleneck=0)
    (f,) = check(t.facts(pipeline, steps=t.fit_steps(0.40)))
    assert f.title.startswith(
        "Input stage Generator(batches at train.py:12) runs the Python generator"
    )
    assert f.location == "train.py:12"
    assert "tf.data.Dataset.from_tensor_slices(<the arrays the generator yields from>)" in f.fix
    assert "num_parallel_reads=tf.data.AUTOTUNE" in f.fix
    assert "tf.data.Dataset.from_generator(batches, args=(shard,)" in f.fix
    assert "output_signature=signature)" in f.fix  # the program's own signature


def test_a_generator_of_array_slices_gets_the_slicing_call_with_the_programs_names():
    sliced = 'tf.data.Dataset.from_tensor_slices((x_train.astype("float32"), y_train))'
    pipeline = t.pipeline(t.generator_source(as_slices=sliced), t.batch(), bottleneck=0)
    (f,) = check(t.facts(pipeline, steps=t.fit_steps(0.40)))
    assert f.fix.splitlines()[-2:] == [
        "# train.py:20: in place of: tf.data.Dataset.from_generator(batches, "
        "output_signature=signature)",
        sliced,
    ]
    assert "only yields slices of arrays in memory" in f.fix
    assert "<" not in f.fix  # no placeholder: what it slices is known


def test_pipelines_without_python_are_quiet():
    assert check(t.facts(t.example_pipeline(), steps=t.fit_steps(0.40))) == []


def test_what_parallel_calls_gain_is_said_as_may_not_as_fact():
    # A py_function that sleeps releases the GIL: parallel calls of it do overlap, so
    # "take turns" is never said as a fact of every Python stage.
    sequential = t.py_function_pipeline(consumer="python-loop")
    (f,) = check(t.facts(sequential, steps=t.loop_steps(0.30)))
    assert "may overlap" in f.evidence["why"] and "releases the GIL" in f.evidence["why"]
    stages = list(sequential.stages)
    stages[1] = replace(stages[1], parallelism=8, parallelism_written=-1, name="ParallelMapV2")
    parallel = replace(sequential, stages=tuple(stages))
    (f,) = check(t.facts(parallel, steps=t.loop_steps(0.30)))
    assert f.evidence["why"].startswith("parallel calls of Python may take turns")
    assert "TF ops" in f.fix  # the rewrite stays the lead fix


def test_the_tf_ops_rewrite_comes_first_and_parallel_calls_only_as_what_may_help():
    """Parallel calls of Python that holds the GIL gain nothing (measured single-threaded
    by gpuwhy fix): the fix leads with TF ops, says when parallel calls help and where
    that is measured, and never offers them again where they are already written."""
    sequential = t.py_function_pipeline(consumer="python-loop")
    (f,) = check(t.facts(sequential, steps=t.loop_steps(0.30)))
    lines = f.fix.splitlines()
    marker = next(i for i, line in enumerate(lines) if "in place of:" in line)
    before = "\n".join(lines[:marker])
    assert "The fix: write it in TF ops" in before
    assert "pure-Python code takes turns on one core and gains nothing" in before
    assert "gpuwhy fix --input --assume-pure" in before
    stages = list(sequential.stages)
    stages[1] = replace(
        stages[1],
        parallelism=2,
        parallelism_written=-1,
        name="ParallelMapV2",
        written_calls=(
            "ds.map(lambda x: tf.py_function(slow, [x], tf.int64), "
            "num_parallel_calls=tf.data.AUTOTUNE)",
        ),
    )
    (f,) = check(t.facts(replace(sequential, stages=tuple(stages)), steps=t.loop_steps(0.30)))
    assert "in place of" not in f.fix
    assert "already has num_parallel_calls and is still the slowest stage" in f.fix


def generator_and_py_map(**changes):
    """from_generator (3 s) -> py_function map (6 s, the slowest) -> batch: two stages
    of one pipeline calling Python."""
    stages = (t.generator_source(self_time_s=3.0), t.py_map(), t.batch())
    return t.pipeline(*stages, **{"bottleneck": 1, **changes})


def test_two_python_stages_of_one_pipeline_are_one_finding_listing_both():
    # the steps barely wait: the slowest Python stage is medium, the other low; one
    # pipeline, one problem (it runs Python under the GIL), one finding at medium
    (f,) = check(t.facts(generator_and_py_map(wait_per_element_s=0.0001)))
    assert f.severity == "medium" and f.location == "train.py:30"  # the map, the slowest
    assert f.title.startswith("Input stage Map(<lambda> at train.py:30) runs Python: 66%")
    assert f.title.endswith(
        "; in the same pipeline, Generator(batches at train.py:12) runs the Python "
        "generator too (33%)"
    )
    rows = f.evidence["python_stages"]
    assert [(r["stage"], r["severity"], r["location"]) for r in rows] == [
        ("Map(<lambda> at train.py:30)", "medium", "train.py:30"),
        ("Generator(batches at train.py:12)", "low", "train.py:12"),
    ]
    # one fix per stage: the map's rewrite in TF ops, then the generator's replacement
    assert "tf.py_function" in f.fix and "# and Generator(batches at train.py:12)" in f.fix
    assert f.fix.index("write it in TF ops") < f.fix.index("from_tensor_slices")


def test_the_gain_of_a_pipeline_s_python_stages_adds_their_shares():
    (f,) = check(t.facts(generator_and_py_map(), steps=t.fit_steps(0.40)))
    assert f.severity == "high"
    assert f.gain_value == pytest.approx(0.40 * 9.0 / 9.1, abs=1e-4)  # the wait x 99%
    assert "these stages' share" in f.estimated_gain


def test_two_pipelines_with_their_own_python_keep_their_own_findings():
    first = generator_and_py_map(id=1, location="train.py:66")
    stages = list(t.py_function_pipeline().stages)
    stages[1] = replace(stages[1], location="eval.py:30", function_location="eval.py:30")
    second = t.py_function_pipeline(id=2, location="eval.py:40", stages=tuple(stages))
    findings, _ = run_rules(t.facts(first, second, steps=t.loop_steps(0.30)))
    python = [f for f in findings if f.id == "input.python-function"]
    assert sorted(f.location for f in python) == ["eval.py:30", "train.py:30"]
    assert all(f.evidence["pipeline"].startswith("tf.data pipeline") for f in python)


def test_train_and_validation_built_by_one_function_are_one_finding():
    train = generator_and_py_map(id=1)
    validation = generator_and_py_map(id=2, consumer="keras-evaluate", location="train.py:67")
    findings, _ = run_rules(t.facts(train, validation, steps=t.fit_steps(0.40)))
    (f,) = [f for f in findings if f.id == "input.python-function"]
    assert f.severity == "high" and f.title.endswith("(one cause, in 2 pipelines)")
    assert [row["severity"] for row in f.evidence["pipelines"]] == ["high", "low"]
    assert len(f.evidence["python_stages"]) == 2


def test_a_generator_made_by_a_call_is_not_given_the_shard_it_cannot_take():
    """``from_generator(sample_gen(0, N_TRAIN), ...)``: the call makes a generator of no
    argument, so ``from_generator(sample_gen(0, N_TRAIN), args=(shard,))`` would fail in
    the pipeline; and the generator's per-element work goes in a map after the slices."""
    from gpuwhy.fixes.pipeline_code import generator

    written = "tf.data.Dataset.from_generator(sample_gen(0, N_TRAIN), output_signature=sig)"
    stage = t.generator_source(written_calls=(written,))
    fix = "\n".join(generator(stage))
    assert "from_generator(sample_gen(0, N_TRAIN), args=(shard,)" not in fix
    assert "from_generator(<a generator function of one shard>, args=(shard,)" in fix
    assert "(sample_gen(0, N_TRAIN) makes one that takes none)" in fix
    assert "goes in a .map() after it" in fix


def test_an_evaluation_loop_written_by_hand_is_beside_the_training_loop():
    """A custom loop's test loop over its own generator pipeline: its wait is the test
    loop's, not the steps'; the training pipeline's finding leads, the test one is low
    and says who waited."""
    from gpuwhy.facts import StepLoop

    loop = {"consumer": "python-loop", "wait_source": "next() timing"}
    train = generator_and_py_map(id=1, read_at="train.py:90", **loop)
    stages = list(t.py_function_pipeline().stages)
    stages[1] = replace(stages[1], location="eval.py:30", function_location="eval.py:30")
    test = t.py_function_pipeline(
        id=2, location="eval.py:40", stages=tuple(stages), read_at="train.py:95",
        elements=40, wait_per_element_s=0.02, **loop,
    )  # fmt: skip
    steps = t.loop_steps(0.30, loops=(StepLoop("tf-data", "train.py:90", 301, 0.0),))
    findings, _ = run_rules(t.facts(train, test, steps=steps))
    python = [f for f in findings if f.id == "input.python-function"]
    assert len(python) == 2
    lead = next(f for f in python if f.location == "train.py:30")
    side = next(f for f in python if f.location == "eval.py:30")
    assert lead.severity == "high" and "(steps wait for input " in lead.title
    assert side.severity == "low"
    assert "steps wait" not in side.title
    # a loop the steps do read is no side loop, whatever its pipeline
    steps = t.loop_steps(0.30, loops=(StepLoop("tf-data", "train.py:95", 301, 0.0),))
    findings, _ = run_rules(t.facts(train, test, steps=steps))
    side = next(f for f in findings if f.location == "eval.py:30")
    assert side.severity != "low"
