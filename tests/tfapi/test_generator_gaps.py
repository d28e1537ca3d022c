"""The consumer's gaps of a from_generator pipeline, timed around the generator: a real
pipeline read by a loop that spends a known time on each element, with the hook
installed as `gpuwhy run` installs it."""

import time

import numpy as np
import pytest
import tensorflow as tf

from gpuwhy.tfapi.tfdata.dataset_chain import generator_gaps
from gpuwhy.tfapi.tfdata.origins import install_origin_hooks


@pytest.fixture
def hooks():
    patches = install_origin_hooks()
    yield
    for patch in reversed(patches):
        patch.undo()


def rows(n):
    for i in range(n):
        yield np.full(4, i, np.float32)


def dataset(n=12):
    return tf.data.Dataset.from_generator(
        rows, args=(n,), output_signature=tf.TensorSpec([4], tf.float32)
    )


def test_the_gaps_are_the_consumer_s_time_and_the_elements_unchanged(hooks):
    # autotune off, as where gpuwhy reads these gaps (Keras' PyDataset with workers):
    # with it on, TF's injected prefetch calls the generator ahead at each pass's start,
    # and the mean gap read 8.97 ms for a consumer's 10 ms (one full suite in two)
    options = tf.data.Options()
    options.autotune.enabled = False
    ds = dataset().map(lambda x: x * 2).with_options(options)
    timer = generator_gaps(ds)
    assert timer is not None
    seen = []
    for _ in range(2):  # two passes: the first one's first gap is the warm-up
        for x in ds:
            seen.append(float(x[0]))
            time.sleep(0.01)
    assert seen == [2.0 * i for i in range(12)] * 2
    summary = timer.summary()
    # each pass's first element has no gap before it; the run's first gap is left out
    assert summary.count == 11 + 11 - 1
    assert summary.reads == 24
    assert 0.009 <= summary.median_s < 0.05
    assert summary.mean_s >= 0.009


def test_what_the_generator_raises_reaches_the_program(hooks):
    def broken():
        yield np.zeros(4, np.float32)
        raise ValueError("bad record")

    ds = tf.data.Dataset.from_generator(broken, output_signature=tf.TensorSpec([4], tf.float32))
    iterator = iter(ds)
    next(iterator)
    with pytest.raises(tf.errors.InvalidArgumentError, match="bad record"):
        next(iterator)


def test_no_timer_without_a_generator_at_the_source(hooks):
    assert generator_gaps(tf.data.Dataset.range(4).map(lambda x: x + 1)) is None
    assert generator_gaps(dataset().concatenate(dataset())) is not None  # its main input
