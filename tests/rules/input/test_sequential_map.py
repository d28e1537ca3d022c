"""input.sequential-map from small tfdata facts: sequential as TF ran it, or not at all."""

from dataclasses import replace

import pytest

from gpuwhy.rules.input.sequential_map import SequentialMap
from tests import builders_tfdata as t


def check(facts, **options):
    return SequentialMap().check(facts, {**SequentialMap.options, **options})


def with_stage(pipeline, index, **changes):
    stages = list(pipeline.stages)
    stages[index] = replace(stages[index], **changes)
    return replace(pipeline, stages=tuple(stages))


def test_stateful_random_map_gets_stateless_ops_and_parallel_calls():
    (f,) = check(t.facts(t.example_pipeline(), steps=t.fit_steps(0.40)))
    assert f.severity == "high"
    assert f.title == (
        "Input stage Map(augment at train.py:47) runs on one thread and is the "
        "slowest stage; steps wait for input 40% of the time"
    )
    assert f.location == "train.py:62"  # augment's .map(), whose threads the fix sets
    assert "stateful random numbers" in f.evidence["why_sequential"]
    assert f.evidence["threads"] == 1 and f.evidence["num_parallel_calls_written"] is None
    assert f.evidence["share_of_pipeline_time"] == 0.699
    assert "tf.data.Dataset.random(seed=42).batch(2, drop_remainder=True)" in f.fix
    assert "tf.data.Dataset.zip((ds, seeds))" in f.fix
    assert "\nds.map(augment, num_parallel_calls=tf.data.AUTOTUNE)\n" in f.fix
    assert f.gain_value == pytest.approx(0.40 * 0.6993, abs=1e-4)  # wait x the stage's share
    assert f.estimated_gain.startswith("estimate:")


def test_a_wait_not_told_from_none_is_no_wait_of_the_steps():
    """A review's RNN classifier: fit's wait 6% ±18.7% (a difference of two means, not
    resolved from none), which the verdict said as "no wait for input shown", and a HIGH
    input.sequential-map "steps wait for input 6% of the time" under it."""
    steps = t.fit_steps(0.06, input_wait_error=0.187)
    assert check(t.facts(t.example_pipeline(), steps=steps)) == []
    (resolved,) = check(t.facts(t.example_pipeline(), steps=t.fit_steps(0.06)))
    assert "steps wait for input 6% of the time" in resolved.title


def test_map_tf_parallelised_itself_is_not_reported():
    # Written without num_parallel_calls, stateless: TF ran it as ParallelMapV2, and
    # autotune may have given it a single thread on a busy host.
    for threads in (4, 1):
        parallelised = with_stage(
            t.example_pipeline(),
            2,
            name="ParallelMapV2",
            parallelism=threads,
            random=False,
            stateful=False,
        )
        assert check(t.facts(parallelised, steps=t.fit_steps(0.40))) == []
    fused = with_stage(
        t.example_pipeline(),
        2,
        name="MapAndBatch",
        parallelism=1,
        random=False,
        stateful=False,
        written_as=("map", "batch"),
    )
    assert check(t.facts(fused, steps=t.fit_steps(0.40))) == []


def test_python_declared_pure_is_parallelised_by_tf():
    # tf.numpy_function(f, args, Tout, stateful=False): PyFuncStateless, not stateful
    pure = with_stage(
        t.example_pipeline(),
        2,
        name="ParallelMapV2",
        parallelism=1,
        python=True,
        random=False,
        stateful=False,
    )
    assert check(t.facts(pure, steps=t.fit_steps(0.40))) == []


def test_autotune_choosing_one_thread_for_an_autotune_map_is_not_sequential():
    tuned = with_stage(
        t.example_pipeline(), 2, name="ParallelMapV2", parallelism=1, parallelism_written=-1
    )
    assert check(t.facts(tuned, steps=t.fit_steps(0.40))) == []


def test_num_parallel_calls_1_as_written_is_sequential():
    written = with_stage(
        t.example_pipeline(),
        2,
        name="ParallelMapV2",
        parallelism=1,
        parallelism_written=1,
        random=False,
        stateful=False,
    )
    (f,) = check(t.facts(written, steps=t.fit_steps(0.40)))
    assert f.evidence["why_sequential"] == "num_parallel_calls=1 as written"
    assert "\nds.map(augment, num_parallel_calls=tf.data.AUTOTUNE)" in f.fix
    assert "stateless" not in f.fix


def test_stateless_map_with_autotune_off_is_sequential_and_says_why():
    off = with_stage(t.example_pipeline(autotune=False), 2, random=False, stateful=False)
    (f,) = check(t.facts(off, steps=t.fit_steps(0.40)))
    assert f.evidence["why_sequential"].startswith("autotune is off")


def test_a_python_map_is_left_to_python_function():
    # Sequential because it is Python: one cause, reported once by input.python-function.
    pipeline = t.py_function_pipeline(consumer="python-loop")
    assert check(t.facts(pipeline, steps=t.loop_steps(0.30))) == []


def test_cheap_sequential_map_also_gets_batch_before_map():
    cheap = with_stage(
        t.example_pipeline(),
        2,
        random=False,
        stateful=False,
        parallelism_written=1,
        name="ParallelMapV2",
        parallelism=1,
        self_time_s=0.064,
    )  # 20 µs per call
    pipeline = replace(cheap, stages=cheap.stages[2:3] + cheap.stages[4:5], bottleneck=0)
    (f,) = check(t.facts(pipeline, steps=t.fit_steps(0.40)))
    assert "\nds.batch(32).map(augment, num_parallel_calls=tf.data.AUTOTUNE)\n" in f.fix


def test_not_the_bottleneck_or_not_waiting_is_quiet():
    assert check(t.facts(t.example_pipeline(bottleneck=1), steps=t.fit_steps(0.40))) == []
    assert check(t.facts(t.example_pipeline(), steps=t.fit_steps(0.04))) == []
    assert check(t.facts(t.example_pipeline(bottleneck=None), steps=t.fit_steps(0.40))) == []


def test_the_pipelines_own_timers_serve_when_no_steps_were_found():
    (f,) = check(t.facts(t.example_pipeline()))  # 10 ms wait, 15 ms gap
    assert f.evidence["input_wait_fraction"] == 0.4
    assert "GetNext" in f.evidence["input_wait_measured_by"]


def test_a_stateful_map_fused_with_its_batch_is_still_a_sequential_map():
    # ds.map(augment).batch(128): map_and_batch_fusion makes one MapAndBatch stage with a
    # fixed parallelism of 1, whatever kind it is filed under.
    for kind in ("map", "batch"):
        fused = with_stage(
            t.example_pipeline(),
            2,
            name="MapAndBatch",
            kind=kind,
            parallelism=1,
            written_as=("map", "batch"),
            elements=100,
            ratio=32.0,
        )
        (f,) = check(t.facts(fused, steps=t.fit_steps(0.40)))
        assert f.evidence["stage"] == "MapAndBatch(augment at train.py:47)"
        assert "\nds.map(augment, num_parallel_calls=tf.data.AUTOTUNE)\n" in f.fix


def test_a_validation_pipeline_s_gain_is_none_on_the_steps_and_says_its_own():
    """fit's validation_data waits on its own: the finding is low, claims nothing of the
    training steps, and says what the fix may give the reader it slows (a new user read
    "up to 0% of step time" beside "waits for input 35% of the time")."""
    train = t.example_pipeline(wait_per_element_s=0.0)
    validation = replace(
        t.example_pipeline(wait_per_element_s=0.030),
        id=2,
        consumer="keras-evaluate",
        location="train.py:70",
        elements=60,
        iterators=3,
    )
    findings = check(t.facts(train, validation, steps=t.fit_steps(0.0)))
    (f,) = [f for f in findings if f.evidence["pipeline"].endswith("read by Model.evaluate")]
    assert f.severity == "low" and f.gain_value == 0.0
    wait = f.evidence["input_wait_fraction"] * f.evidence["share_of_pipeline_time"]
    assert f.estimated_gain == (
        "none on the training steps: the pipeline is read beside them "
        f"(up to {wait:.0%} of that reader's own time)"
    )
