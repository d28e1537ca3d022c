"""compression.cpu-codec, input part: a decoding or decompressing tf.data stage."""

from dataclasses import replace

import pytest

from gpuwhy.derived.pipeline import NEXT_TIMING
from gpuwhy.facts import Facts, ProgramFacts
from gpuwhy.rules.compression.cpu_codec import CpuCodec
from tests import builders as b
from tests import builders_tfdata as t


def check(facts, **options):
    return CpuCodec().check(facts, {**CpuCodec.options, **options})


def test_decode_stage_with_a_share_of_the_time_while_input_bound():
    (f,) = check(t.facts(t.example_pipeline(), steps=t.fit_steps(0.40)))
    assert f.id == "compression.cpu-codec" and f.severity == "medium"
    assert f.title == (
        "Input stage ParallelMapV2(parse at train.py:41) decodes on the CPU "
        "(DecodePng): 23% of the pipeline's time; steps wait for input 40% of "
        "the time"
    )
    assert f.location == "train.py:41"
    assert f.evidence["codec_ops"] == ["DecodePng"] and f.evidence["threads"] == 4
    assert f.evidence["slowest_stage"] is False
    # TF already runs it on 4 threads: only the cache is new
    assert "# train.py:61: in place of: ds.map(parse)\nds.map(parse).cache()" in f.fix
    assert "num_parallel_calls" not in f.fix
    assert "PNG/GIF/BMP decode on the host" in f.fix and "nvJPEG" not in f.fix
    # the fix is a cache: it saves the decode on the 2 passes of 3 after the first, as
    # input.no-cache says of the same line (the stage's whole share of the wait was said
    # before, a third more than the cache saves)
    assert f.gain_value == pytest.approx(0.40 * 2.0 / 8.58 * 2 / 3, abs=1e-4)
    assert f.estimated_gain.startswith(
        "estimate: about 6% of step time (the wait times this stage's share, on every pass "
        "after the first: 3.0 passes read)"
    )


def test_a_decode_read_once_keeps_the_stage_s_whole_share():
    one_pass = replace(t.example_pipeline(), elements=100)
    (f,) = check(t.facts(one_pass, steps=t.fit_steps(0.40)))
    assert ".cache()" in f.fix
    assert f.gain_value == pytest.approx(0.40 * 2.0 / 8.58, abs=1e-4)
    assert f.estimated_gain.startswith("estimate: up to 9% of step time (the wait times")


def test_a_decode_cached_already_is_low_and_its_first_pass_only():
    pipeline = t.example_pipeline()
    stages = list(pipeline.stages)
    parse = [s.name for s in stages].index("ParallelMapV2")
    cached = replace(
        stages[parse],
        name="MemoryCache",
        kind="cache",
        written_as=("cache",),
        written_calls=("ds.map(parse).cache()",),
        codec_ops=(),
    )
    stages.insert(parse + 1, replace(cached, self_time_s=0.01))
    pipeline = replace(pipeline, stages=tuple(stages), cache_written=True)
    (f,) = check(t.facts(pipeline, steps=t.fit_steps(0.40)))
    assert f.severity == "low"
    assert "all of it in its first pass" in f.estimated_gain
    assert "decoded once a run already" in f.fix
    assert '#   ds.map(parse).cache("train_cache")' in f.fix


def test_a_decode_beside_python_in_one_map_is_low_and_its_share_not_the_decode_s():
    """parse decodes a PNG and calls a py_function: TF times the map, not its ops (a
    trial measured the decode at 17 % of the map, the Python at 80 %), so the map's
    88 % of the pipeline is not the decode's: low, gain unknown."""
    pipeline = t.example_pipeline()
    stages = list(pipeline.stages)
    stages[1] = replace(stages[1], python=True)
    (f,) = check(t.facts(replace(pipeline, stages=tuple(stages)), steps=t.fit_steps(0.40)))
    assert f.severity == "low" and f.gain_value is None
    assert "23% of the pipeline's time, its decode's and its Python's together" in f.title
    assert f.estimated_gain.startswith("unknown: the stage's time is its decode's and its Python's")


def test_jpeg_decode_gets_the_crop_window_and_gpu_decoding():
    pipeline = t.example_pipeline()
    stages = list(pipeline.stages)
    stages[1] = replace(stages[1], codec_ops=("DecodeJpeg",))
    (f,) = check(t.facts(replace(pipeline, stages=tuple(stages)), steps=t.fit_steps(0.40)))
    assert "tf.image.decode_and_crop_jpeg" in f.fix and "fn.decoders.image(device='mixed')" in f.fix


def test_gzip_reader_bottleneck_gets_parallel_reads():
    pipeline = t.pipeline(
        t.tfrecord("GZIP", self_time_s=5.0), t.parse(codec_ops=()), t.batch(), bottleneck=0
    )
    (f,) = check(t.facts(pipeline, steps=t.fit_steps(0.30)))
    assert f.title.startswith("Input stage TFRecord at train.py:60 decodes on the CPU (GZIP)")
    assert f.evidence["slowest_stage"] is True and f.location == "train.py:60"
    assert (
        "tf.data.TFRecordDataset(filenames, compression_type='GZIP', "
        "num_parallel_reads=tf.data.AUTOTUNE)"
    ) in f.fix
    assert "without compression" in f.fix


def test_small_codec_stage_that_is_not_the_bottleneck_is_quiet():
    # the GZIP reader of the example takes 4.7% of the pipeline's time
    facts = t.facts(t.example_pipeline(), steps=t.fit_steps(0.40))
    assert [f.evidence["stage"] for f in check(facts)] == ["ParallelMapV2(parse at train.py:41)"]
    assert len(check(facts, min_fraction=0.04)) == 2


def test_not_input_bound_is_quiet():
    assert check(t.facts(t.example_pipeline(), steps=t.fit_steps(0.04))) == []
    assert check(t.facts(t.example_pipeline(wait_per_element_s=None))) == []


def test_both_parts_report_from_one_run():
    group = b.op_group(
        "DecodeJpeg",
        "no-gpu-kernel",
        in_dtypes=("string",),
        out_dtypes=("uint8",),
        locations=("step.py:5",),
    )
    tfdata = t.facts(t.example_pipeline(), steps=t.fit_steps(0.40))
    facts = Facts(placement=b.placement(groups=[group]), steps=tfdata.steps, tfdata=tfdata.tfdata)
    found = check(facts)
    assert [("codec_ops_in_step" in f.evidence, f.location) for f in found] == [
        (True, "step.py:5"),
        (False, "train.py:41"),
    ]


def test_nothing_to_read_is_quiet():
    assert check(Facts()) == []


def test_a_reader_tf_runs_as_a_flat_map_over_files_is_still_a_reader():
    # TFRecordDataset(files, compression_type="GZIP") runs as FlatMap(TFRecord per file)
    flat = t.tfrecord("GZIP", name="FlatMap", kind="flat_map", self_time_s=5.0)
    pipeline = t.pipeline(flat, t.parse(codec_ops=()), t.batch(), bottleneck=0)
    (f,) = check(t.facts(pipeline, steps=t.fit_steps(0.30)))
    assert f.evidence["stage"] == "FlatMap at train.py:60"
    assert "# TFRecordDataset reads one file at a time" in f.fix
    assert "compression_type='GZIP', num_parallel_reads=tf.data.AUTOTUNE" in f.fix


def test_a_reader_already_parallel_is_told_so():
    parallel = t.tfrecord(
        "ZLIB", name="ParallelInterleaveV4", kind="interleave", parallelism=8, self_time_s=5.0
    )
    pipeline = t.pipeline(parallel, t.parse(codec_ops=()), t.batch(), bottleneck=0)
    (f,) = check(t.facts(pipeline, steps=t.fit_steps(0.30)))
    assert "already reads 8 files at once" in f.fix and "ZLIB" in f.fix


def test_a_decode_that_also_draws_random_numbers_is_not_cached_as_is():
    pipeline = t.example_pipeline()
    stages = list(pipeline.stages)
    stages[1] = replace(stages[1], random=True, stateful=True)
    (f,) = check(t.facts(replace(pipeline, stages=tuple(stages)), steps=t.fit_steps(0.40)))
    assert ".cache()" not in f.fix and "decode in a map of its own" in f.fix


def _decode_with_a_label_lookup(pipeline, **changes):
    """The decode map also reads a lookup table (labels from folder names): stateful for
    TF's map_parallelization, the same elements every pass all the same."""
    stages = list(pipeline.stages)
    stages[1] = replace(stages[1], **{"stateful": True, "repeats": True, **changes})
    return replace(pipeline, stages=tuple(stages))


def test_a_decode_that_reads_a_lookup_table_is_cached_and_not_called_random():
    pipeline = _decode_with_a_label_lookup(t.example_pipeline())
    (f,) = check(t.facts(pipeline, steps=t.fit_steps(0.40)))
    assert "ds.map(parse).cache()" in f.fix
    assert "random" not in f.fix


def test_a_decode_that_calls_python_is_not_cached_and_says_why():
    pipeline = _decode_with_a_label_lookup(t.example_pipeline(), python=True, repeats=False)
    (f,) = check(t.facts(pipeline, steps=t.fit_steps(0.40)))
    assert ".cache()" not in f.fix and "calls Python" in f.fix and "random" not in f.fix


def _train_and_validation(train_wait_s: float, validation_wait_s: float):
    train = t.pipeline(t.tfrecord(), t.parse(), t.batch(), wait_per_element_s=train_wait_s)
    validation = replace(
        t.pipeline(t.tfrecord(), t.parse(), t.batch(), wait_per_element_s=validation_wait_s),
        id=2,
        consumer="keras-evaluate",
        location="train.py:70",
        elements=60,
        iterators=3,
    )
    return train, validation


def test_the_wait_is_the_training_steps_not_the_validation_pipeline_s():
    train, validation = _train_and_validation(0.0, 0.030)
    findings = check(t.facts(train, validation, steps=t.fit_steps(0.0)))
    # fit's steps waited 0%: nothing medium or high, whatever validation waited
    assert all(f.severity == "low" for f in findings)
    (f,) = findings
    assert f.evidence["pipeline"].endswith("read by Model.evaluate")
    assert "Model.evaluate (beside the training steps) waits for input" in f.title
    assert "steps wait" not in f.title and f.gain_value is None


def test_a_training_pipeline_that_waits_leads_with_the_steps_wait():
    train, validation = _train_and_validation(0.010, 0.030)
    findings = check(t.facts(train, validation, steps=t.fit_steps(0.25)))
    by_consumer = {f.evidence["pipeline"].rsplit("read by ", 1)[-1]: f for f in findings}
    assert by_consumer["Model.fit"].severity == "medium"
    assert "steps wait for input 25% of the time" in by_consumer["Model.fit"].title
    assert by_consumer["Model.evaluate"].severity == "low"


def test_a_decode_gathered_once_beside_fit_is_low_and_claims_nothing_of_the_steps():
    """Fit read a cached pipeline; after it, the program gathered its test set once from
    an uncached decode (``[x.numpy() for x, _ in test_ds]``, 62 ms of waits in a 4.4 s
    run). The decode was MEDIUM, "steps wait for input 67% of the time", with a gain on
    the steps: it is the loop's own wait, beside them, and low."""
    fit = replace(t.example_pipeline(wait_per_element_s=0.0002), cache_written=True)
    gather = replace(
        t.example_pipeline(consumer="python-loop", wait_source=NEXT_TIMING),
        id=6,
        read_at="train.py:18",
        elements=160,
        wait_per_element_s=0.00039,
        gap_median_s=0.0002,
    )
    steps = t.fit_steps(0.01, input_wait_error=0.07, total_s=0.36, count=40)
    facts = replace(
        t.facts(fit, gather, steps=steps), program=ProgramFacts(("train.py",), seconds=4.4)
    )
    (f,) = [f for f in check(facts) if f.evidence["pipeline"].endswith("train.py:18")]
    assert f.severity == "low" and f.gain_value is None
    assert "; the loop at train.py:18 (beside the training steps) waits for input 66%" in f.title
    # a gather that waited a twentieth of the run or more may be what fit reads through a
    # generator of the program's: it stays the steps'
    slow = replace(gather, elements=1600)
    facts = replace(facts, tfdata=replace(facts.tfdata, pipelines=(fit, slow)))
    (f,) = [f for f in check(facts) if f.evidence["pipeline"].endswith("train.py:18")]
    assert "steps wait for input" in f.title
