"""PipelineCollector against real tf.data pipelines, custom loops and Keras 3 fit.

The runs are short, so each test asks the collector to read the live iterators once in
the middle of the run (``read_live``), as its poll thread does about once a second in a
longer one: TF drops an exhausted input's node from its model, and a run read only at
its end would not see its source.
"""

from __future__ import annotations

import gc
import time
import weakref
from pathlib import Path

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from tensorflow.python.data.ops import dataset_ops, from_generator_op, iterator_ops  # noqa: E402

from gpuwhy.collect.inprocess.pipelines import PipelineCollector, pipeline_line  # noqa: E402
from gpuwhy.facts import Facts, TfDataFacts, from_dict, to_dict  # noqa: E402
from gpuwhy.fixes.pipeline_evidence import stage_row  # noqa: E402
from gpuwhy.formatting import FIT_VALIDATION  # noqa: E402
from gpuwhy.tfapi.tfdata.node_names import run_family  # noqa: E402
from tests import markers  # noqa: E402
from tests.records import write_tfrecords  # noqa: E402

THIS_FILE = Path(__file__)

at = markers.marker_lines(THIS_FILE)


@pytest.fixture
def collector():
    watcher = PipelineCollector()
    watcher.start(time.perf_counter())
    watcher.on_tensorflow()
    yield watcher
    watcher.stop()


def sleepy(x):
    time.sleep(0.005)
    return x


def load(x):  # @load
    return tf.py_function(sleepy, [x], tf.int64)


def double(x):
    return x * 2


def read_in_two_halves(collector, dataset, first_half: int) -> int:
    """A custom training loop: reads some elements, lets the collector read the
    iterator's model, then reads the rest."""
    count = 0
    for _batch in dataset:
        count += 1
        if count == first_half:
            collector.read_live()
    return count


def test_a_custom_loop_over_a_slow_python_map_names_that_map_as_the_bottleneck(collector):
    ds = tf.data.Dataset.range(48)
    ds = ds.map(load)  # @map-load
    ds = ds.map(double)
    ds = ds.batch(8)
    ds = ds.prefetch(2)  # @final

    assert read_in_two_halves(collector, ds, 3) == 6
    collector.stop()
    facts = collector.facts()

    (pipeline,) = facts.pipelines
    assert pipeline.consumer == "python-loop"
    assert pipeline.location == at("final")
    assert (pipeline.iterators, pipeline.elements, pipeline.cardinality) == (1, 6, 6)
    assert [s.name for s in pipeline.stages] == ["Range", "Map", "MapAndBatch", "Prefetch"]
    assert [s.written_as for s in pipeline.stages] == [
        ("range",),
        ("map",),
        ("map", "batch"),
        ("prefetch",),
    ]
    slow = pipeline.stages[pipeline.bottleneck]
    assert slow.name == "Map" and slow.kind == "map"
    assert (slow.function, slow.function_location, slow.location) == (
        "load",
        at("load"),
        at("map-load"),
    )
    assert slow.python and slow.stateful and slow.parallelism is None
    assert slow.elements >= 48 and slow.self_time_s >= 48 * 0.005  # each call sleeps 5 ms
    assert slow.root_elements_per_s is not None
    fused = pipeline.stages[2]
    assert fused.ratio == 8.0 and fused.parallelism >= 1 and not fused.python
    assert pipeline.prefetch_written and pipeline.prefetch_run and not pipeline.cache_written
    assert pipeline.gap_median_s is not None and pipeline.wait_per_element_s is not None
    assert pipeline.consume_s > 0 and pipeline.throughput_per_s > 0
    assert pipeline.model_error is None
    assert facts.host_cores >= 1
    assert 0.0 <= facts.host_cpu_busy_fraction <= 1.0
    assert 0.0 < facts.process_cpu_fraction <= 1.0
    assert facts.host_memory_bytes > 0
    assert from_dict(Facts, to_dict(Facts(tfdata=facts))).tfdata == facts  # JSON round trip


def slow_map_pipeline():
    return tf.data.Dataset.range(48).map(load).batch(8)  # @zipped-map


def only_pipeline_read(collector, dataset) -> object:
    read_in_two_halves(collector, dataset, 3)
    collector.stop()
    (pipeline,) = collector.facts().pipelines
    return pipeline


def test_ds_enumerate_shows_the_pipeline_inside_its_zip_and_its_slowest_stage(collector):
    # ds.enumerate() is Dataset.zip((counter, ds)): the counter comes first
    pipeline = only_pipeline_read(collector, slow_map_pipeline().enumerate())  # @enumerated
    assert [s.name for s in pipeline.stages] == ["Range", "MapAndBatch", "Zip", "Prefetch"]
    assert pipeline.stages[0].written_as == ("range",)
    assert pipeline.location == at("enumerated")
    slow = pipeline.stages[pipeline.bottleneck]
    assert (slow.function, slow.function_location) == ("load", at("load"))
    assert slow.location == at("zipped-map") and slow.python
    assert slow.self_time_s >= 24 * 0.005  # what the map slept before the mid-run read


def test_a_zip_follows_the_input_that_does_the_work_not_the_first(collector):
    labels = tf.data.Dataset.range(6)
    zipped = tf.data.Dataset.zip((labels, slow_map_pipeline()))  # @zip-labels-first
    pipeline = only_pipeline_read(collector, zipped)
    assert [s.name for s in pipeline.stages][-2:] == ["Zip", "Prefetch"]
    slow = pipeline.stages[pipeline.bottleneck]
    assert (slow.function, slow.location) == ("load", at("zipped-map"))


def test_python_s_enumerate_over_a_dataset_is_the_dataset_itself(collector):
    # Python's enumerate makes no tf.data Zip: the pipeline is read as written
    dataset = slow_map_pipeline()
    count = 0
    for _index, _batch in enumerate(dataset):
        count += 1
        if count == 3:
            collector.read_live()
    collector.stop()
    (pipeline,) = collector.facts().pipelines
    assert "Zip" not in [s.name for s in pipeline.stages]
    assert pipeline.stages[pipeline.bottleneck].function == "load"


def test_keras_fit_is_one_pipeline_with_one_iterator_per_epoch(collector):
    keras = pytest.importorskip("keras")
    x = np.random.rand(32, 4).astype(np.float32)
    y = np.random.rand(32, 1).astype(np.float32)
    train = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)  # @train
    validation = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)  # @validation
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")

    model.fit(train, validation_data=validation, epochs=2, shuffle=False, verbose=0)
    collector.stop()

    by_consumer = {p.consumer: p for p in collector.facts().pipelines}
    assert set(by_consumer) == {"keras-fit", "keras-evaluate"}
    fit = by_consumer["keras-fit"]
    assert fit.location == at("train")
    assert fit.iterators == 2  # Keras makes one more ahead, never read
    assert fit.elements == 2 * 4
    assert fit.gap_median_s is not None  # TF timed the train steps' GetNext calls
    assert fit.element_bytes == 8 * (4 + 1) * 4
    assert [s.kind for s in fit.stages][-2:] == ["batch", "prefetch"]
    assert fit.stages[-1].written_as == ()  # the Prefetch TF injected
    assert fit.prefetch_run and not fit.prefetch_written
    evaluate = by_consumer["keras-evaluate"]
    assert evaluate.location == at("validation")
    assert (evaluate.iterators, evaluate.elements) == (2, 2 * 2)
    # fit's validation_data, read through Keras' evaluate: said as fit's
    assert evaluate.read_via == FIT_VALIDATION
    assert fit.read_via is None


def test_evaluate_called_by_the_program_is_not_fits_validation(collector):
    keras = pytest.importorskip("keras")
    x = np.random.rand(32, 4).astype(np.float32)
    data = tf.data.Dataset.from_tensor_slices((x, x[:, :1])).batch(8)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")

    model.evaluate(data, verbose=0)
    collector.stop()

    (pipeline,) = collector.facts().pipelines
    assert pipeline.consumer == "keras-evaluate" and pipeline.read_via is None


def test_a_generator_pipeline_names_the_generator_as_its_source(collector):
    def numbers():  # @numbers
        for i in range(40):
            time.sleep(0.002)
            yield i

    ds = tf.data.Dataset.from_generator(  # @gen
        numbers, output_signature=tf.TensorSpec([], tf.int64)
    )
    ds = ds.batch(4)
    read_in_two_halves(collector, ds, 5)
    collector.stop()

    (pipeline,) = collector.facts().pipelines
    source = pipeline.stages[0]
    assert (source.name, source.kind, source.written_as) == (
        "Generator",
        "generator",
        ("from_generator",),
    )
    assert (source.function, source.function_location, source.location) == (
        "numbers",
        at("numbers"),
        at("gen"),
    )
    assert source.python
    assert pipeline.stages[pipeline.bottleneck] is source
    assert source.self_time_s >= 20 * 0.002  # at least what it slept before the mid-run read


def test_a_gzip_reader_is_a_source_stage_with_its_codec(collector, tmp_path):
    (path,) = write_tfrecords(tmp_path, [[b"%d" % i * 100 for i in range(40)]], "GZIP")
    ds = tf.data.TFRecordDataset(path, compression_type="GZIP")  # @reader
    ds = ds.map(tf.strings.length)
    ds = ds.batch(5)
    read_in_two_halves(collector, ds, 4)
    collector.stop()

    (pipeline,) = collector.facts().pipelines
    reader = pipeline.stages[0]
    assert (reader.name, reader.kind, reader.location) == ("TFRecord", "source", at("reader"))
    assert reader.codec_ops == ("GZIP",)
    assert reader.elements >= 20


def test_files_element_sizes_and_the_shuffle_buffer_are_read_from_the_pipeline(collector, tmp_path):
    files = write_tfrecords(tmp_path, [[b"x" * 10] * 20] * 3)
    ds = tf.data.TFRecordDataset(files)
    ds = ds.map(lambda r: tf.zeros([32, 32, 3]) + tf.cast(tf.strings.length(r), tf.float32))
    ds = ds.shuffle(48)
    ds = ds.batch(5)
    read_in_two_halves(collector, ds, 6)
    collector.stop()

    (pipeline,) = collector.facts().pipelines
    by_api = {s.written_as[0]: s for s in pipeline.stages if s.written_as}
    assert by_api["TFRecordDataset"].files == 3
    assert by_api["TFRecordDataset"].element_bytes is None  # strings: no fixed size
    assert by_api["map"].element_bytes == 32 * 32 * 3 * 4
    shuffle = by_api["shuffle"]
    assert (shuffle.buffer_size, shuffle.element_bytes) == (48, 32 * 32 * 3 * 4)
    assert by_api["batch"].element_bytes == 5 * 32 * 32 * 3 * 4  # the batch as written


def test_the_work_of_every_pass_of_a_repeat_is_added_up(collector):
    """TF makes the nodes under a repeat anew for each pass; what earlier instances
    did is kept. No prefetch here, so each node works exactly as far as it is read."""
    options = tf.data.Options()
    options.experimental_optimization.inject_prefetch = False
    ds = tf.data.Dataset.range(8).batch(2).repeat(3).with_options(options)
    count = 0
    for _ in ds:
        count += 1
        if count in (3, 7):  # in the first pass, then in the second
            collector.read_live()
    collector.stop()

    (pipeline,) = collector.facts().pipelines
    assert [s.name for s in pipeline.stages] == ["Range", "BatchV2", "FiniteRepeat"]
    source = pipeline.stages[0]
    assert 8 < source.elements <= 24  # more than one pass could make
    assert pipeline.elements == 12
    assert pipeline.stages[1].ratio == 2.0


def test_without_autotune_the_written_stages_remain_and_the_error_is_said(collector):
    options = tf.data.Options()
    options.autotune.enabled = False
    options.deterministic = False
    ds = tf.data.Dataset.range(10).map(double).with_options(options)
    assert sum(1 for _ in ds) == 10
    collector.stop()

    (pipeline,) = collector.facts().pipelines
    assert not pipeline.autotune
    assert pipeline.deterministic is False  # the options as the program set them
    assert "autotune" in pipeline.model_error
    assert [(s.name, s.kind, s.elements) for s in pipeline.stages] == [
        ("Range", "source", 0),
        ("Map", "map", 0),
    ]
    assert pipeline.bottleneck is None and pipeline.gap_median_s is None
    # TF counted nothing: the count is not known, which is not 0 elements read
    assert not pipeline.elements_known
    assert ": elements not counted (autotune off: TF keeps no count)" in pipeline_line(pipeline)
    assert stage_row(pipeline, 1)["elements"] is None


def test_the_collector_keeps_no_iterator_alive(collector):
    iterator = iter(tf.data.Dataset.range(1000).prefetch(8))
    next(iterator)
    collector.read_live()
    ref = weakref.ref(iterator)
    del iterator
    gc.collect()
    assert ref() is None
    collector.stop()
    assert collector.facts().pipelines[0].elements == 1


def test_a_distributed_datasets_per_device_iterators_are_noted_not_measured(collector):
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    distributed = strategy.experimental_distribute_dataset(tf.data.Dataset.range(8).batch(4))
    assert sum(1 for _ in distributed) == 2  # @distributed-loop
    collector.stop()
    facts = collector.facts()
    assert facts.pipelines == ()
    assert any("distributed dataset" in note for note in facts.notes)
    # where the loop read it: no other pipeline is what that loop waited for
    assert facts.distributed_reads == (at("distributed-loop"),)


def test_stop_restores_tensorflow_exactly():
    originals = {
        (dataset_ops.DatasetV2, "__init__"): dataset_ops.DatasetV2.__dict__["__init__"],
        (from_generator_op, "_from_generator"): from_generator_op.__dict__["_from_generator"],
        (iterator_ops.OwnedIterator, "_create_iterator"): iterator_ops.OwnedIterator.__dict__[
            "_create_iterator"
        ],
    }
    watcher = PipelineCollector()
    watcher.start(time.perf_counter())
    watcher.on_tensorflow()
    assert all(vars(owner)[name] is not original for (owner, name), original in originals.items())
    for _ in tf.data.Dataset.range(3):
        pass
    watcher.stop()
    assert all(vars(owner)[name] is original for (owner, name), original in originals.items())
    assert "__del__" not in vars(iterator_ops.OwnedIterator)
    assert isinstance(watcher.facts(), TfDataFacts)


def test_before_tensorflow_there_is_no_section_and_with_it_but_no_pipeline_an_empty_one():
    unused = PipelineCollector()
    unused.start(time.perf_counter())
    unused.stop()
    assert unused.facts() is None
    idle = PipelineCollector()
    idle.start(time.perf_counter())
    idle.on_tensorflow()
    idle.stop()
    assert idle.facts().pipelines == ()


def test_tf_node_names_map_to_the_transformations_that_make_them():
    assert [
        run_family(n)
        for n in (
            "ParallelMapV2",
            "BatchV2",
            "MapAndBatch",
            "ForeverRepeat",
            "MemoryCache",
            "ParallelInterleaveV4",
            "TensorSlice",
            "Range",
        )
    ] == [
        "map",
        "batch",
        "map_and_batch",
        "repeat",
        "cache",
        "interleave",
        "from_tensor_slices",
        "range",
    ]


def make_epoch_dataset():
    return tf.data.Dataset.range(16).map(double).batch(4)  # @rebuilt


def test_a_dataset_built_again_every_epoch_is_one_pipeline_with_an_iterator_per_epoch(collector):
    for _epoch in range(3):
        for _batch in make_epoch_dataset():
            pass
    other = tf.data.Dataset.range(8).batch(4)  # @other
    for _batch in other:
        pass
    collector.stop()
    facts = collector.facts()
    rebuilt = [p for p in facts.pipelines if p.location == at("rebuilt")]
    assert [(p.iterators, p.elements) for p in rebuilt] == [(3, 12)]
    assert [p.location for p in facts.pipelines] == [at("rebuilt"), at("other")]
    assert [p.helper_location for p in facts.pipelines] == [None, None]  # nothing to tell apart


def make_split(n):
    ds = tf.data.Dataset.range(n).map(double)
    return ds.batch(4)  # @split-helper


def test_pipelines_one_helper_builds_are_told_apart_by_the_caller(collector):
    train = make_split(32)  # @train-split
    test = make_split(8)  # @test-split
    for _batch in train:
        pass
    for _batch in test:
        pass
    collector.stop()
    facts = collector.facts()
    assert [(p.location, p.helper_location, p.elements) for p in facts.pipelines] == [
        (at("train-split"), at("split-helper"), 8),
        (at("test-split"), at("split-helper"), 2),
    ]


def _finish(ds, training):
    if training:
        ds = ds.shuffle(16)
    return ds.batch(4)  # @finish-helper


def make_split_through_a_helper(split):
    ds = tf.data.Dataset.range(32 if split == "train" else 8).map(double)
    return _finish(ds, split == "train")  # @make-split-calls-finish


def build_both_splits():
    train = make_split_through_a_helper("train")  # @nested-train
    test = make_split_through_a_helper("test")  # @nested-test
    return train, test


def test_a_helper_calling_its_own_helper_is_told_apart_by_the_line_that_differs(collector):
    # make_split_through_a_helper -> _finish (where batch is): both splits call _finish
    # from the same line; the lines in build_both_splits are what tell them apart
    train, test = build_both_splits()
    for _batch in train:
        pass
    for _batch in test:
        pass
    collector.stop()
    facts = collector.facts()
    assert [(p.location, p.helper_location, p.elements) for p in facts.pipelines] == [
        (at("nested-train"), at("finish-helper"), 8),
        (at("nested-test"), at("finish-helper"), 2),
    ]


def test_gpuwhy_s_own_reads_of_the_iterator_model_are_not_the_program_s_eager_ops(collector):
    from gpuwhy.tfapi import op_callbacks

    seen = []
    callbacks = op_callbacks.thread_callbacks()
    callback = op_callbacks.recording_callback(seen.append, op_callbacks.UserFrames())
    callbacks.append(callback)
    try:
        ds = tf.data.Dataset.range(32).batch(4)
        read_in_two_halves(collector, ds, 4)
        tf.constant(1.0) + 1.0  # one op of the program's own
    finally:
        callbacks.remove(callback)
    ops = {record[2] for record in seen}
    assert "AddV2" in ops
    assert not ops & {"IteratorGetModelProto", "DatasetCardinality", "GetOptions"}


def test_an_old_iterator_is_not_read_again_as_it_is_freed(collector, monkeypatch):
    """A model read just before TF frees an old iterator was seen to make the free
    wait for TF's autotune thread: an old iterator's poll read stands for its last."""
    from gpuwhy.collect.inprocess import pipelines

    monkeypatch.setattr(pipelines, "FINAL_READ_MAX_AGE_S", 0.3)

    def read_all_then_free(dataset, pause_s: float) -> tuple[int, int, int]:
        """(elements, model reads before the free, model reads after it)."""
        iterator = iter(dataset)
        state = collector._live[id(iterator)]
        count = 0
        for _ in iterator:
            count += 1
            if count == 2 and pause_s:
                time.sleep(pause_s)  # older than the limit from here on
                collector.read_live()
        before = state.reads
        del iterator  # freed: the end listener runs now
        return count, before, state.reads

    young = read_all_then_free(tf.data.Dataset.range(8).batch(2), 0.0)
    old = read_all_then_free(tf.data.Dataset.range(8).batch(2), 0.4)
    assert young[0] == old[0] == 4
    assert young[2] == young[1] + 1  # read once more as it was freed
    assert old[2] == old[1] >= 1  # not read again: its poll read stands
    collector.stop()
    elements = sorted((p.elements, p.elements_at_least) for p in collector.facts().pipelines)
    assert elements[-1] == (4, False) and 2 <= elements[0][0] <= 4
    # the old one's count is its last poll's, said to be a lower bound (keras-io's text
    # classification: "208 elements" read by a fit of 225 steps)
    assert elements[0][1] is True


def test_stages_a_shuffle_buffer_reads_whole_before_the_first_element_are_seen(collector):
    """map(load).cache().shuffle(1000) over 120 elements: the shuffle fills its buffer
    with the whole epoch before the first batch, and the map and the cache leave TF's
    model then; the collector's own poll (no read asked by the test) reads the model
    often enough while no element has come to see them, however long after the
    iterator's creation its first element is asked for."""
    ds = tf.data.Dataset.range(120).map(load).cache().shuffle(1000).batch(10)  # 0.6 s of load
    for _epoch in range(2):
        iterator = iter(ds)
        time.sleep(1.6)  # as Keras fit traces its step between the two (seconds)
        for _batch in iterator:
            pass
    collector.stop()
    (pipeline,) = collector.facts().pipelines
    names = [s.name for s in pipeline.stages]
    assert "Map" in names and "MemoryCache" in names, names
    (loaded,) = [s for s in pipeline.stages if s.function == "load"]
    assert loaded.elements >= 20 and loaded.root_elements_per_s is not None


def test_the_poll_sleeps_until_a_read_is_due_and_a_new_iterator_wakes_it(collector):
    """A long loop's iterator is read at 0.1, 0.2, 0.4, 0.8 s, then every second: the
    poll thread wakes for those reads, not ten times a second (each wake-up takes the
    program's GIL); an iterator made while it sleeps is still read 0.1 s after."""
    wakes: list[float] = []
    wait = collector._wake.wait

    def counted(timeout=None):
        woke = wait(timeout)
        wakes.append(time.perf_counter())
        return woke

    collector._wake.wait = counted  # the poll thread starts with the first iterator
    long_loop = iter(tf.data.Dataset.range(10**9).map(double))
    began = time.perf_counter()
    while time.perf_counter() - began < 3.5:
        next(long_loop)
    state = collector._live[id(long_loop)]
    assert state.reads >= 4  # 0.1, 0.3, 0.7, 1.5, 2.5 s ...
    assert len(wakes) <= state.reads + 3, wakes  # ten a second before
    young = iter(tf.data.Dataset.range(10**9).map(double))
    made = time.perf_counter()
    next(young)
    young_state = collector._live[id(young)]
    while young_state.reads == 0 and time.perf_counter() - made < 2:
        next(young)
    assert young_state.reads >= 1 and young_state.last_read - made < 0.5
    next(long_loop)


def test_an_epoch_cut_short_after_one_element_does_not_set_the_rate(collector):
    """A run interrupted just after its second epoch began: that iterator gave one
    element, and the time from it to the run's end is no rate; the first epoch's is
    (5 ms an element: about 200 a second, where one element in half a second is 2)."""
    ds = tf.data.Dataset.range(40).map(load).prefetch(1)
    assert read_in_two_halves(collector, ds, 20) == 40
    cut_short = iter(ds)
    next(cut_short)
    time.sleep(0.5)  # the run ends here, its iterator still open
    collector.stop()
    (pipeline,) = collector.facts().pipelines
    assert (pipeline.iterators, pipeline.elements) == (2, 41)
    assert pipeline.throughput_per_s is not None and pipeline.throughput_per_s > 50
    del cut_short


def test_an_iterator_no_read_saw_give_elements_is_read_at_its_end_past_the_budget():
    """Reads over budget are skipped, but not the last one of an iterator no read has
    seen give an element: skipped, a used iterator would count as never used (a fit of
    3 epochs read as 2 iterators on a loaded host)."""
    watcher = PipelineCollector(poll_s=60.0, budget=0.0)
    watcher.start(time.perf_counter())
    watcher.on_tensorflow()
    watcher._read_s = 1e6  # the budget spent: every read the budget decides is skipped
    dataset = tf.data.Dataset.range(12).batch(3)
    for _ in range(2):
        assert sum(int(tf.size(x)) for x in dataset) == 12  # freed young: a last read
    watcher.stop()
    (pipeline,) = watcher.facts().pipelines
    assert pipeline.iterators == 2 and pipeline.elements == 8


def test_the_run_s_first_gap_is_left_out_and_the_others_kept(collector):
    """The gap after the first iterator's first element holds the run's first step (a
    fit's first callbacks and one-time work: 46 ms among gaps of 1 ms), a warm-up the
    steps leave out too; a long gap later in the loop, or in a later iterator's first
    step, is the consumer's and stays."""
    dataset = tf.data.Dataset.range(20)
    for _ in range(2):
        for i, _ in enumerate(dataset):
            if i in (0, 10):
                time.sleep(0.2)
    collector.stop()
    (pipeline,) = collector.facts().pipelines
    # 20 gaps an iterator, between 20 reads and the one that ended the loop: the first
    # iterator's less its first, the second's all (its first pause a step's like any)
    assert pipeline.gap_count == 39
    assert 0.6 / 39 <= pipeline.gap_mean_s < 0.7 / 39
    assert pipeline.gaps_since_s is not None and pipeline.gaps_since_s >= 0


def test_the_reader_is_the_place_that_made_most_iterators_not_a_first_look(collector):
    """tensorflow/docs' custom training walkthrough looks at one batch with
    next(iter(ds)) and then reads the dataset in an epochs' loop: the loop is its reader."""
    ds = tf.data.Dataset.range(8).batch(2)
    features = next(iter(ds))  # @first_look
    for _ in range(3):
        for batch in ds:  # @epochs_loop
            features = batch
    assert int(features[0]) == 6
    collector.stop()
    (pipeline,) = collector.facts().pipelines
    assert pipeline.read_at == at("epochs_loop")
    assert pipeline.iterators == 4
