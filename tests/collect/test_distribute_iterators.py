"""A distributed iterator's reads timed where the user's loop makes them
(gpuwhy.tfapi.distribute.install_iterator_timing), in one process over a real
MirroredStrategy (two logical CPUs where it can make them): ``for x in dist_ds``, ``next(it)`` and
``it.get_next()`` are timed once each (TF's own inner reads are not counted again), the
time is the wait for this worker's own batches, and reads inside a tf.function are not
timed (they build graph ops)."""

from __future__ import annotations

import time

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from gpuwhy.tfapi import distribute  # noqa: E402

SLEEP_S = 0.02  # per batch, in the pipeline: what each read must wait for


@pytest.fixture(scope="module")
def strategy():
    """Two replicas where this process can still make the logical CPUs (another test
    may have started TF's context first); the iterator classes are the same with one."""
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2
        )
    except RuntimeError:
        pass
    devices = [d.name for d in tf.config.list_logical_devices("CPU")]
    return tf.distribute.MirroredStrategy(devices[:2])


def slow_load(batch):
    time.sleep(SLEEP_S)
    return batch


def dataset_fn(ctx):
    ds = tf.data.Dataset.from_tensor_slices(np.ones((64, 4), "float32"))
    ds = ds.batch(ctx.get_per_replica_batch_size(16))  # 4 steps of 16
    return ds.map(lambda b: tf.numpy_function(slow_load, [b], tf.float32))


def timed(loop):
    reads: list[tuple] = []
    patches = distribute.install_iterator_timing(reads.append)
    try:
        loop()
    finally:
        for patch in reversed(patches):
            patch.undo()
    return reads


def test_a_for_loop_over_the_distributed_dataset_is_timed_once_per_read(strategy):
    dist_ds = strategy.distribute_datasets_from_function(dataset_fn)
    reads = timed(lambda: [None for _ in dist_ds])
    assert [row[4] for row in reads] == [False] * 4 + [True]  # four batches, then the end
    assert len({row[0] for row in reads}) == 1
    assert str(reads[0][1]).startswith("tests/collect/test_distribute_iterators.py:")
    waits = [end - start for _, _, start, end, done in reads if not done]
    # the loop does nothing else: its reads wait for the pipeline's sleeps (a batch may be
    # ready early when the loop was descheduled on a loaded host, or prefetched while an
    # earlier read waited: seen at 0.041 s and 0.046 s of 0.08: the total is compared)
    assert sum(waits) >= 0.4 * len(waits) * SLEEP_S


def test_next_and_get_next_in_a_loop_are_timed(strategy):
    def loop():
        iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))
        next(iterator)
        iterator.get_next()
        iterator.get_next_as_optional()

    reads = timed(loop)
    assert len(reads) == 3 and not any(row[4] for row in reads)
    assert sum(end - start for _, _, start, end, _ in reads) >= 0.6 * 3 * SLEEP_S


def test_reads_inside_a_tf_function_are_not_timed(strategy):
    @tf.function
    def train_step(iterator):
        return strategy.run(tf.reduce_sum, args=(next(iterator),))

    def loop():
        iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))
        for _ in range(3):
            train_step(iterator)

    assert timed(loop) == []
