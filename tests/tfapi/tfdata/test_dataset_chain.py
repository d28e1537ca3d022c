"""gpuwhy.tfapi.tfdata.dataset_chain against the installed TensorFlow: pipelines as written.

These say which private tf.data internals moved when TensorFlow is upgraded: the input
chain (``_inputs()``), the function wrappers (``_map_func._func``/``.function``), the
``DatasetV2.__init__`` and ``_from_generator`` hooks. Lines that must be named carry a
``# @marker`` comment. Each statement builds one transformation, so that its line is
unambiguous.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from tensorflow.python.data.ops import dataset_ops, from_generator_op  # noqa: E402

from gpuwhy.tfapi.tfdata import dataset_chain as data_pipeline  # noqa: E402
from gpuwhy.tfapi.tfdata import dataset_size, origins  # noqa: E402
from gpuwhy.tfapi.tfdata.dataset_chain import written_chain  # noqa: E402
from tests import markers  # noqa: E402
from tests.records import write_tfrecords  # noqa: E402

THIS_FILE = Path(__file__)

at = markers.marker_lines(THIS_FILE)


@pytest.fixture
def hooks():
    patches = origins.install_origin_hooks()
    try:
        yield patches
    finally:
        for patch in reversed(patches):
            patch.undo()


def slow_python(x):  # @slow-python
    return x


def load(x):  # @load
    return tf.py_function(slow_python, [x], tf.int64)


def parse(x):  # @parse
    return x * 2


def numbers():  # @numbers
    yield from range(6)


def apis(chain) -> list[str]:
    return [step.api for step in chain]


def test_a_python_map_then_a_parallel_map_are_read_with_their_lines(hooks):
    ds = tf.data.Dataset.range(16)  # @range
    ds = ds.map(load)  # @map-load
    ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)  # @map-parse
    ds = ds.batch(4)  # @batch
    ds = ds.prefetch(2)  # @prefetch

    chain = written_chain(ds)

    assert apis(chain) == ["range", "map", "map", "batch", "prefetch"]
    source, python_map, parallel_map, batch, prefetch = chain
    assert source.location == at("range")
    assert python_map.location == at("map-load")
    assert python_map.op == "MapDataset"
    assert python_map.function == "load"
    assert python_map.function_location == at("load")
    assert python_map.num_parallel_calls is None  # sequential as written
    assert python_map.python and python_map.stateful
    assert python_map.stateful_ops == ("EagerPyFunc",)
    assert python_map.python_functions == (f"slow_python ({at('slow-python')})",)
    assert parallel_map.location == at("map-parse")
    assert parallel_map.op == "ParallelMapDatasetV2"
    assert (parallel_map.function, parallel_map.function_location) == ("parse", at("parse"))
    assert parallel_map.num_parallel_calls == -1  # AUTOTUNE
    assert parallel_map.deterministic is False
    assert not (parallel_map.python or parallel_map.stateful or parallel_map.random)
    assert (batch.location, batch.argument) == (at("batch"), 4)
    assert (prefetch.location, prefetch.argument) == (at("prefetch"), 2)
    assert data_pipeline.has_final_prefetch(chain)


def test_a_lambda_is_located_at_its_own_line(hooks):
    ds = tf.data.Dataset.range(4).map(lambda x: x + 1)  # @lambda
    (_, step) = written_chain(ds)
    assert (step.function, step.function_location, step.location) == (
        "<lambda>",
        at("lambda"),
        at("lambda"),
    )


def test_decorated_and_partial_functions_are_unwrapped_to_the_users_definition(hooks):
    # a decorated function's code starts at its first decorator, as in tracing.py
    @tf.function  # @scale
    def scale(x, factor):
        return x * factor

    ds = tf.data.Dataset.range(4).map(functools.partial(scale, factor=3))
    step = written_chain(ds)[-1]
    assert (step.function, step.function_location) == ("scale", at("scale"))


def test_from_generator_names_the_generator_and_counts_as_python(hooks):
    ds = tf.data.Dataset.from_generator(  # @gen
        numbers, output_signature=tf.TensorSpec([], tf.int64)
    )
    ds = ds.map(parse)

    chain = written_chain(ds)

    assert apis(chain) == ["from_generator", "map"]  # TF's dummy input is folded in
    generator = chain[0]
    assert generator.location == at("gen")
    assert (generator.function, generator.function_location) == ("numbers", at("numbers"))
    assert generator.python
    assert not chain[1].python


def test_from_generator_built_before_the_hook_is_still_recognised():
    ds = tf.data.Dataset.from_generator(numbers, output_signature=tf.TensorSpec([], tf.int64))
    (generator,) = written_chain(ds)
    assert generator.api == "from_generator"
    assert (generator.function, generator.function_location) == ("numbers", at("numbers"))
    assert generator.location is None  # nobody saw it being built


def test_a_gzip_tfrecord_reader_and_a_png_decoder_are_codec_work(hooks, tmp_path):
    png = tf.io.encode_png(tf.zeros([4, 4, 3], tf.uint8)).numpy()
    (path,) = write_tfrecords(tmp_path, [[png]], "GZIP")
    ds = tf.data.TFRecordDataset(path, compression_type="GZIP")  # @tfrecord
    ds = ds.map(tf.io.decode_png)  # @decode

    chain = written_chain(ds)

    assert apis(chain) == ["TFRecordDataset", "map"]  # the file-name slices are folded in
    reader, decode = chain
    assert (reader.location, reader.codec_ops) == (at("tfrecord"), ("GZIP",))
    assert (decode.location, decode.codec_ops) == (at("decode"), ("DecodePng",))
    assert decode.function_location is None  # TF's own function


def test_a_compressed_reader_inside_an_interleave_is_found_in_its_function(hooks, tmp_path):
    (path,) = write_tfrecords(tmp_path, [[b"x"]], "ZLIB")
    files = tf.data.Dataset.from_tensor_slices([path])
    ds = files.interleave(  # @interleave
        lambda f: tf.data.TFRecordDataset(f, compression_type="ZLIB"),
        num_parallel_calls=2,
    )
    step = written_chain(ds)[-1]
    assert (step.api, step.op, step.location) == (
        "interleave",
        "ParallelInterleaveDatasetV4",
        at("interleave"),
    )
    assert step.num_parallel_calls == 2
    assert step.codec_ops == ("ZLIB",)


def test_stateful_random_is_not_cacheable_and_stateless_random_is(hooks):
    augmented = tf.data.Dataset.range(4).map(
        lambda x: tf.random.uniform([]) + tf.cast(x, tf.float32)
    )
    seeded = tf.data.Dataset.range(4).map(
        lambda x: tf.random.stateless_uniform([], seed=[1, 2]) + tf.cast(x, tf.float32)
    )

    stateful = written_chain(augmented)[-1]
    stateless = written_chain(seeded)[-1]

    assert stateful.random and stateful.stateful and "RandomUniform" in stateful.random_ops
    assert not stateless.random and not stateless.stateful
    assert any(op.startswith("StatelessRandom") for op in stateless.random_ops)


def test_stateful_mirrors_what_tf_parallelises(hooks):
    """TF's map_parallelization leaves stateful functions sequential but ignores Assert;
    the model of a real iterator says which map TF actually parallelised."""
    from tensorflow.python.data.experimental.ops import iterator_model_ops

    def checked(x):
        tf.debugging.assert_non_negative(x)
        return x + 1

    def random_offset(x):
        return x + tf.random.uniform([], maxval=2, dtype=tf.int64)

    for function, stateful, node in (
        (checked, False, "ParallelMapV2"),
        (random_offset, True, "Map"),
    ):
        ds = tf.data.Dataset.range(8).map(function)
        assert written_chain(ds)[-1].stateful is stateful
        iterator = iter(ds)
        next(iterator)
        proto = iterator_model_ops.get_model_proto(iterator)
        names = {n.name for n in proto.nodes.values()}
        assert node in names, names


def test_a_vocabulary_lookup_is_stateful_to_tf_but_gives_each_element_the_same_in_parallel(
    hooks,
):
    """TextVectorization's lookup (LookupTableFindV2) keeps TF's map_parallelization off
    (stateful), yet parallel calls give the same elements: gpuwhy fix tries it, where a
    random draw, Python or a variable's write keeps the map as written."""
    import keras

    encoder = keras.layers.TextVectorization(max_tokens=20)
    encoder.adapt(["a b c", "b c d", "c d e"])
    counter = tf.Variable(0, dtype=tf.int64)

    def counted(x):
        return x + counter.assign_add(1)

    texts = tf.data.Dataset.from_tensor_slices(["a b", "c d e", "e"])
    for ds, dependent in (
        (texts.map(lambda text: encoder(text)), False),
        (tf.data.Dataset.range(4).map(lambda x: x + tf.random.uniform([], 0, 2, tf.int64)), True),
        (tf.data.Dataset.range(4).map(counted), True),
    ):
        last = written_chain(ds)[-1]
        assert last.stateful and last.order_dependent is dependent, last.stateful_ops


def test_zip_follows_the_input_that_works_and_describes_the_other(hooks):
    left = tf.data.Dataset.range(3)  # @left
    right = tf.data.Dataset.range(3).map(parse)  # @right
    ds = tf.data.Dataset.zip((left, right)).with_options(tf.data.Options())
    chain = written_chain(ds)
    assert apis(chain) == ["range", "map", "zip", "with_options"]
    assert chain[1].location == at("right")
    assert chain[2].inner == (f"range at {at('left')}",) and chain[2].main_input == 1
    assert data_pipeline.zip_branches(chain) == (1,)
    assert [s.node for s in chain] == [True, True, True, False]
    assert not data_pipeline.has_final_prefetch(chain)


def test_a_zip_of_equal_inputs_follows_the_first(hooks):
    left = tf.data.Dataset.range(3).map(parse)  # @equal-left
    right = tf.data.Dataset.range(3).map(parse)
    chain = written_chain(tf.data.Dataset.zip((left, right)))
    assert [s.location for s in chain[:2]] == [at("equal-left")] * 2
    assert chain[-1].main_input == 0


def test_a_compat_v1_dataset_is_read_through_its_adapters(hooks):
    ds = tf.compat.v1.data.Dataset.range(5).map(parse)  # @v1
    assert [(s.api, s.location) for s in written_chain(ds)] == [
        ("range", at("v1")),
        ("map", at("v1")),
    ]


def test_noops_that_tf_removes_are_flagged(hooks):
    ds = tf.data.Dataset.range(5).take(-1).skip(0).repeat(1).prefetch(0).repeat(2)
    noops = [(s.api, s.noop) for s in written_chain(ds)[1:]]
    assert noops == [
        ("take", True),
        ("skip", True),
        ("repeat", True),
        ("prefetch", True),
        ("repeat", False),
    ]


def test_a_dataset_keras_builds_is_marked_as_made_by_a_library(hooks):
    pytest.importorskip("keras")
    from keras.src.trainers.data_adapters.array_data_adapter import ArrayDataAdapter

    x = np.zeros((8, 2), np.float32)
    adapter = ArrayDataAdapter(x, batch_size=4)
    ds = adapter.get_tf_dataset()  # @adapter
    final = written_chain(ds)[-1]
    assert final.by_library
    assert final.location == at("adapter")  # the user's call into Keras


def test_the_stages_make_csv_dataset_builds_are_the_helper_s_and_a_csv_dataset_the_program_s(
    hooks, tmp_path
):
    """TF's custom training walkthrough: make_csv_dataset's interleave, batch and maps
    were read as the program's and its interleave got an `<dataset>.interleave(...)`
    template; a CsvDataset the program makes itself stays its own."""
    path = tmp_path / "train.csv"
    path.write_text("a,b,label\n" + "".join(f"{i},{i * 2},{i % 3}\n" for i in range(32)))
    csv = tf.data.experimental.make_csv_dataset
    ds = csv(str(path), batch_size=8, label_name="label", num_epochs=1)  # @csv
    chain = written_chain(ds)
    assert all(s.by_library for s in chain) and chain[-1].location == at("csv")
    assert any(s.api == "interleave" for s in chain)
    own = tf.data.experimental.CsvDataset(str(path), [0, 0, 0], header=True)  # @own
    (read,) = written_chain(own)
    assert not read.by_library and read.location == at("own")


def batches():  # @batches
    while True:
        yield np.zeros((4, 2), np.float32), np.zeros((4,), np.float32)


def test_a_generator_fit_is_given_is_named_by_the_program_s_generator(hooks):
    """Keras wraps the generator in its own ``get_tf_iterator``; the stage is named by
    the program's generator below it, not by Keras' wrapper."""
    pytest.importorskip("keras")
    from keras.src.trainers.data_adapters.generator_data_adapter import GeneratorDataAdapter

    ds = GeneratorDataAdapter(batches()).get_tf_dataset()
    source = written_chain(ds)[0]
    assert source.api == "from_generator" and source.by_library
    assert (source.function, source.function_location) == ("batches", at("batches"))


def test_a_py_dataset_fit_is_given_is_named_by_its_getitem(hooks):
    keras = pytest.importorskip("keras")
    from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

    class Tiles(keras.utils.PyDataset):
        def __len__(self):
            return 2

        def __getitem__(self, index):  # @getitem
            return np.zeros((4, 2), np.float32), np.zeros((4,), np.float32)

    ds = PyDatasetAdapter(Tiles(), shuffle=False).get_tf_dataset()
    source = written_chain(ds)[0]
    assert (source.function, source.function_location) == ("Tiles.__getitem__", at("getitem"))


class Reader:
    """An iterator object, as a program reading CSV batches writes one."""

    def __iter__(self):
        return self

    def __next__(self):  # @reader-next
        return np.zeros((4, 2), np.float32), np.zeros((4,), np.float32)


class Lines:
    def __iter__(self):  # @lines-iter
        while True:
            yield np.zeros((4, 2), np.float32), np.zeros((4,), np.float32)


def test_a_generator_expression_fit_is_given_is_named_by_what_it_reads(hooks):
    """fit((b for b in reader)): the slow code is the reader's __next__, not the
    expression on the fit line; a generator method is named with its class."""
    pytest.importorskip("keras")
    from keras.src.trainers.data_adapters.generator_data_adapter import GeneratorDataAdapter

    wrapped = GeneratorDataAdapter(b for b in Reader()).get_tf_dataset()
    source = written_chain(wrapped)[0]
    assert (source.function, source.function_location) == ("Reader.__next__", at("reader-next"))
    method = GeneratorDataAdapter(iter(Lines())).get_tf_dataset()
    source = written_chain(method)[0]
    assert (source.function, source.function_location) == ("Lines.__iter__", at("lines-iter"))


def test_a_library_generator_with_nothing_of_the_program_s_below_keeps_its_name(hooks):
    def library_like():
        yield from range(3)

    library_like.__code__ = library_like.__code__.replace(
        co_filename=np.__file__  # defined "in a library": no location
    )
    ds = tf.data.Dataset.from_generator(library_like, output_signature=tf.TensorSpec([], tf.int64))
    (source,) = written_chain(ds)
    assert (source.function, source.function_location) == ("library_like", None)


def test_cardinality_element_bytes_and_autotune(hooks):
    ds = tf.data.Dataset.from_tensor_slices(np.zeros((10, 3), np.float32)).batch(4)
    assert dataset_size.known_count(ds) == dataset_size.cardinality(ds) == 3
    assert dataset_size.element_bytes(ds) is None  # [None, 3]: the last batch may be partial
    assert dataset_size.element_bytes(ds, 4) == 4 * 3 * 4
    assert dataset_size.element_bytes(ds.unbatch()) == 12
    assert dataset_size.known_count(ds.repeat()) is None
    assert dataset_size.cardinality(ds.repeat()) == dataset_size.INFINITE
    assert dataset_size.known_count(ds.filter(lambda x: True)) is None
    assert dataset_size.cardinality(ds.filter(lambda x: True)) == dataset_size.UNKNOWN
    assert dataset_size.element_bytes(tf.data.Dataset.from_tensors("text")) is None
    options = tf.data.Options()
    options.autotune.enabled = False
    assert data_pipeline.autotune_enabled(ds)
    assert not data_pipeline.autotune_enabled(ds.with_options(options))
    # the order option as the program set it, by either of its names; unset: None
    assert data_pipeline.deterministic_option(ds) is None
    unordered = tf.data.Options()
    unordered.experimental_deterministic = False
    assert data_pipeline.deterministic_option(ds.with_options(unordered)) is False
    ordered = tf.data.Options()
    ordered.deterministic = True
    assert data_pipeline.deterministic_option(ds.with_options(ordered).batch(2)) is True


def test_datasets_built_before_the_hook_have_no_origin_and_uninstall_restores_tf():
    init = dataset_ops.DatasetV2.__dict__["__init__"]
    from_generator = from_generator_op.__dict__["_from_generator"]
    before = tf.data.Dataset.range(3)
    patches = origins.install_origin_hooks()
    assert dataset_ops.DatasetV2.__dict__["__init__"] is not init
    after = tf.data.Dataset.range(3)  # @after
    for patch in reversed(patches):
        patch.undo()
    assert dataset_ops.DatasetV2.__dict__["__init__"] is init
    assert from_generator_op.__dict__["_from_generator"] is from_generator
    assert origins.origin(before) is None
    assert origins.origin(after).location == at("after")
    assert origins.origin(tf.data.Dataset.range(3)) is None
