"""The auto-shard plan gpuwhy reads from a pipeline's graph is what TF's own rewrite
does: each plan is checked against TF sharding the same dataset for worker 0 of 2
(``_AutoShardDataset``, the op tf.distribute wraps every distributed dataset in),
elements and errors included."""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from tensorflow.python.data.experimental.ops import distribute as tf_distribute  # noqa: E402

from gpuwhy.tfapi.tfdata import sharding  # noqa: E402

WORKERS = 2


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Three TFRecord files of records b"<file>-<record>"."""
    folder = tmp_path_factory.mktemp("records")
    names = []
    for f in range(3):
        name = str(folder / f"part-{f}.tfrecord")
        with tf.io.TFRecordWriter(name) as writer:
            for r in range(4):
                writer.write(f"{f}-{r}".encode())
        names.append(name)
    return names


def with_policy(ds, policy):
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = getattr(
        tf.data.experimental.AutoShardPolicy, policy
    )
    return ds.with_options(options)


def worker_zero(ds):
    """What TF's rewrite gives worker 0 of 2."""
    sharded = tf_distribute._AutoShardDataset(
        ds, num_workers=WORKERS, index=0, num_replicas=WORKERS
    )
    return [e.decode() if isinstance(e, bytes) else e for e in sharded.as_numpy_iterator()]


def test_records_of_several_files_are_sharded_by_file(files):
    ds = tf.data.TFRecordDataset(files).map(lambda r: r)
    plan = sharding.plan(ds, "AUTO", WORKERS)
    assert (plan.applied, plan.files, plan.reason) == ("FILE", 3, None)
    assert {e.split("-")[0] for e in worker_zero(ds)} == {"0", "2"}  # whole files


def test_list_files_and_interleave_are_sharded_by_file(files):
    folder = files[0].rsplit("/", 1)[0]
    ds = tf.data.Dataset.list_files(folder + "/*.tfrecord", shuffle=False).interleave(
        tf.data.TFRecordDataset, num_parallel_calls=2
    )
    plan = sharding.plan(ds.batch(2), "AUTO", WORKERS)
    assert (plan.applied, plan.files) == ("FILE", 3)
    assert {e.split("-")[0] for e in worker_zero(ds)} == {"0", "2"}


def test_in_memory_slices_fall_back_to_data():
    ds = tf.data.Dataset.from_tensor_slices(np.arange(8)).map(lambda x: x * 10)
    plan = sharding.plan(ds, "AUTO", WORKERS)
    assert plan.applied == "DATA" and plan.reason.startswith("Found an unshardable source dataset")
    assert worker_zero(ds) == [0, 20, 40, 60]  # every other element: DATA


def test_file_asked_for_on_a_generator_is_tfs_error():
    ds = tf.data.Dataset.from_generator(
        lambda: iter(range(6)), output_signature=tf.TensorSpec((), tf.int64)
    )
    plan = sharding.plan(with_policy(ds, "FILE"), "FILE", WORKERS)
    assert plan.applied == "FILE" and "unshardable source" in plan.error
    with pytest.raises(tf.errors.NotFoundError, match="unshardable source"):
        worker_zero(with_policy(ds, "FILE"))


def test_one_file_for_two_workers_is_counted_and_tf_refuses_it(files):
    ds = tf.data.TFRecordDataset(files[:1])
    plan = sharding.plan(ds, "AUTO", WORKERS)
    assert (plan.applied, plan.files) == ("FILE", 1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="Could not apply FILE based sharding"):
        worker_zero(ds)


def test_off_and_a_shard_of_the_users_own():
    ds = tf.data.Dataset.from_tensor_slices(np.arange(8)).shard(2, 1)
    plan = sharding.plan(with_policy(ds, "OFF"), "OFF", WORKERS)
    assert (plan.applied, plan.sharded_in_code) == ("OFF", True)
    assert worker_zero(with_policy(ds, "OFF")) == [1, 3, 5, 7]  # untouched by TF


def test_zip_of_readers_is_sharded_by_file_on_each_side(files):
    ds = tf.data.Dataset.zip((tf.data.TFRecordDataset(files), tf.data.TFRecordDataset(files[1:])))
    plan = sharding.plan(ds, "AUTO", WORKERS)
    assert (plan.applied, plan.files) == ("FILE", 2)  # the side with fewest files


def test_versioned_op_names_match_their_family():
    assert sharding.matches("BatchDatasetV2", ("BatchDataset",))
    assert sharding.matches("ParallelInterleaveDatasetV4", sharding.FUNCTION_OPS)
    assert not sharding.matches("BatchDatasetX", ("BatchDataset",))
