"""gpuwhy.tfapi.tfdata.iterator_models against the installed TensorFlow: pipelines as TF runs them.

These say which private APIs moved when TensorFlow is upgraded: the iterator hook
(``OwnedIterator._create_iterator``), the finaliser it adds, and the model TF keeps of a
running iterator (``get_model_proto``), after TF's own rewrites.
"""

from __future__ import annotations

import gc
import time
import weakref

import pytest

tf = pytest.importorskip("tensorflow")

from tensorflow.python.data.ops import iterator_ops  # noqa: E402

from gpuwhy.tfapi.tfdata import iterator_models as data_model  # noqa: E402
from gpuwhy.tfapi.tfdata.iterator_models import ModelUnavailable, read_model  # noqa: E402


def slow(x):
    time.sleep(0.001)
    return x


def names(model) -> list[str]:
    return [n.name for n in model.nodes]


def test_the_model_shows_tfs_rewrites_of_a_python_map_then_map_and_batch():
    ds = (
        tf.data.Dataset.range(64)
        .map(lambda x: tf.py_function(slow, [x], tf.int64))
        .map(lambda x: x * 2)
        .batch(8)
        .prefetch(2)
    )
    iterator = iter(ds)
    for _ in range(3):
        next(iterator)

    model = read_model(iterator)

    # the stateless map is fused with its batch; the Python map stays sequential
    assert names(model) == ["Range", "Map", "MapAndBatch", "Prefetch", "Root"]
    source, python_map, fused, prefetch, root = model.nodes
    assert python_map.parallelism is None and not python_map.asynchronous
    assert fused.parallelism >= 1 and fused.asynchronous
    assert fused.ratio == 8.0
    assert prefetch.buffer_size == 2
    assert root.num_elements == model.root_elements == 3
    assert python_map.num_elements >= 24  # 8 per batch, and more prefetched
    assert python_map.processing_time_s >= 24 * 0.001  # the sleeps are its own time
    assert model.stages == model.nodes[:-1]
    assert 1 <= len(model.gap_times_s) <= 3 and all(g >= 0 for g in model.gap_times_s)


def test_a_stateless_map_alone_is_parallelised_and_a_prefetch_is_injected_only_after_sync_stages():
    parallel = iter(tf.data.Dataset.range(10).map(lambda x: x + 1))
    next(parallel)
    assert names(read_model(parallel)) == [
        "Range",
        "ParallelMapV2",
        "Root",
    ]  # async: no Prefetch added
    batched = iter(tf.data.Dataset.range(10).batch(2))
    next(batched)
    assert names(read_model(batched)) == ["Range", "BatchV2", "Prefetch", "Root"]  # injected


def test_an_interleaves_per_element_datasets_are_summed_under_it():
    inner = tf.data.Dataset.range(20)
    ds = tf.data.Dataset.range(4).interleave(
        lambda i: inner.map(lambda x: x * i), cycle_length=2, num_parallel_calls=2
    )
    iterator = iter(ds)
    for _ in range(6):
        next(iterator)

    model = read_model(iterator)

    assert names(model) == ["Range", "ParallelInterleaveV4", "Root"]
    interleave = model.nodes[1]
    assert interleave.parallelism == 2
    assert sorted(n.name for n in interleave.inner) == ["Map", "Range"]  # one entry per name
    assert interleave.inner_elements >= 6
    assert interleave.total_time_s >= interleave.processing_time_s


def test_a_cache_keeps_its_impl_node_inside():
    iterator = iter(tf.data.Dataset.range(10).map(lambda x: x + 1).cache().batch(2))
    next(iterator)
    model = read_model(iterator)
    assert "MemoryCacheImpl" not in names(model)
    cache = next(n for n in model.nodes if n.name == "MemoryCache")
    assert [n.name for n in cache.inner] == ["MemoryCacheImpl"]


def test_without_autotune_tf_keeps_no_model():
    options = tf.data.Options()
    options.autotune.enabled = False
    iterator = iter(tf.data.Dataset.range(3).with_options(options))
    with pytest.raises(ModelUnavailable, match="autotune"):
        read_model(iterator)


class Listener:
    def __init__(self) -> None:
        self.created: list = []  # (weakref to the iterator, dataset)
        self.ended: list = []  # (id, elements the model counted at the end)

    def on_iterator(self, iterator, dataset) -> None:
        self.created.append((weakref.ref(iterator), dataset))

    def on_end(self, iterator) -> None:
        self.ended.append((id(iterator), read_model(iterator).root_elements))


@pytest.fixture
def listener():
    heard = Listener()
    patches = data_model.install_iterator_hooks(heard.on_iterator, heard.on_end)
    try:
        yield heard
    finally:
        for patch in reversed(patches):
            patch.undo()


def test_every_eager_iterator_is_announced_and_read_before_it_is_freed(listener):
    ds = tf.data.Dataset.range(5)
    for _ in ds:
        pass
    list(ds.as_numpy_iterator())
    iterator = iter(ds)
    key = id(iterator)
    next(iterator)
    next(iterator)

    assert len(listener.created) == 3
    assert all(dataset is ds for _, dataset in listener.created)
    assert listener.created[-1][0]() is iterator
    del iterator
    gc.collect()
    assert (key, 2) in listener.ended  # read while it still existed
    assert len(listener.ended) == 3


def test_iterators_inside_a_tf_function_are_not_announced(listener):
    ds = tf.data.Dataset.range(3)

    @tf.function
    def first():
        return next(iter(ds))

    first()
    assert listener.created == []


def test_the_hooks_keep_no_iterator_alive(listener):
    iterator = iter(tf.data.Dataset.range(100).prefetch(4))
    next(iterator)
    ref = weakref.ref(iterator)
    del iterator
    gc.collect()
    assert ref() is None


def test_uninstall_restores_the_iterator_class_exactly():
    owner = iterator_ops.OwnedIterator
    create = owner.__dict__["_create_iterator"]
    assert "__del__" not in owner.__dict__
    patches = data_model.install_iterator_hooks(lambda *_: None, lambda _: None)
    assert owner.__dict__["_create_iterator"] is not create
    assert "__del__" in owner.__dict__
    for patch in reversed(patches):
        patch.undo()
    assert owner.__dict__["_create_iterator"] is create
    assert "__del__" not in owner.__dict__
    assert not hasattr(owner, "__del__")


def test_a_failing_listener_never_breaks_iteration():
    def broken(*_):
        raise RuntimeError("listener bug")

    patches = data_model.install_iterator_hooks(broken, broken)
    try:
        assert [int(x) for x in tf.data.Dataset.range(3)] == [0, 1, 2]
    finally:
        for patch in reversed(patches):
            patch.undo()


def test_the_consumer_is_python_unless_keras_fit_evaluate_or_predict_is_on_the_stack():
    assert data_model.consumer_label() == "python-loop"
    keras = pytest.importorskip("keras")
    labels: list[str] = []
    patches = data_model.install_iterator_hooks(
        lambda it, ds: labels.append(data_model.consumer_label())
    )
    try:
        x = tf.zeros([8, 2])
        y = tf.zeros([8, 1])
        train = tf.data.Dataset.from_tensor_slices((x, y)).batch(4)
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        model.compile("sgd", "mse")
        model.fit(train, validation_data=train, epochs=1, shuffle=False, verbose=0)
        model.predict(train, verbose=0)
    finally:
        for patch in reversed(patches):
            patch.undo()
    assert set(labels) == {"keras-fit", "keras-evaluate", "keras-predict"}
    assert labels[0] == "keras-fit"


def test_a_loop_in_a_users_callback_inside_fit_is_a_python_loop():
    keras = pytest.importorskip("keras")
    labels: list[str] = []
    side = tf.data.Dataset.range(3)

    class ReadsADataset(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            for _ in side:
                pass

    def heard(iterator, dataset):
        if dataset is side:
            labels.append(data_model.consumer_label())

    patches = data_model.install_iterator_hooks(heard)
    try:
        train = tf.data.Dataset.from_tensor_slices((tf.zeros([4, 2]), tf.zeros([4, 1]))).batch(2)
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        model.compile("sgd", "mse")
        model.fit(train, epochs=1, shuffle=False, verbose=0, callbacks=[ReadsADataset()])
    finally:
        for patch in reversed(patches):
            patch.undo()
    assert labels == ["python-loop"]


def test_the_reader_is_the_users_line_and_the_library_call_that_iterated_there():
    import inspect
    import sys

    keras = pytest.importorskip("keras")
    readers: list = []
    patches = data_model.install_iterator_hooks(
        lambda it, ds: readers.append(data_model.reader(sys._getframe(1)))
    )
    here = inspect.currentframe()
    assert here is not None
    try:
        words = tf.data.Dataset.from_tensor_slices(["a b", "c d"]).batch(2)
        layer = keras.layers.TextVectorization(max_tokens=8)
        adapt_line = here.f_lineno + 1
        layer.adapt(words)
        loop_line = here.f_lineno + 1
        for _ in words:
            pass
    finally:
        for patch in reversed(patches):
            patch.undo()
    file = "test_iterator_models.py"
    (adapt_at, via), (loop_at, none) = readers[0], readers[-1]
    assert adapt_at.endswith(f"{file}:{adapt_line}") and via.endswith("TextVectorization.adapt")
    assert loop_at.endswith(f"{file}:{loop_line}") and none is None


def test_root_elements_counts_what_the_reader_got_however_it_read():
    import tensorflow as tf

    from gpuwhy.tfapi.tfdata.iterator_models import ModelUnavailable, root_elements

    ds = tf.data.Dataset.range(50).map(lambda x: x + 1).batch(2).prefetch(2)
    it = iter(ds)
    assert root_elements(it) == 0
    for _ in range(7):
        next(it)
    assert root_elements(it) == 7
    assert sum(1 for _ in it) == 18 and root_elements(it) == 25  # the end is no element
    options = tf.data.Options()
    options.autotune.enabled = False
    with pytest.raises(ModelUnavailable):
        root_elements(iter(ds.with_options(options)))
