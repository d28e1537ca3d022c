"""input.python-function from small tfdata facts."""

from dataclasses import replace

import pytest

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
