"""What each worker's pipeline reads, told in one process (fast): the digest of its
sources and selections (gpuwhy.tfapi.tfdata.sharding.reads) for the ways users give each
worker its share (files sliced by pipeline, a filter on the id, shard() after or inside
an interleave) and the ways they do not (the whole dataset, a pipeline id used only as a
shuffle seed), and the dataset function's read of input_context.input_pipeline_id seen
through a real strategy's distribute_datasets_from_function."""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from gpuwhy.tfapi import distribute  # noqa: E402
from gpuwhy.tfapi.tfdata.sharding import reads  # noqa: E402

FILES = [f"/data/train-{i:02d}.tfrecord" for i in range(8)]
IMAGES = np.arange(256 * 4, dtype="float32").reshape(256, 4)


def parse(record):
    return tf.io.parse_single_example(record, {"x": tf.io.FixedLenFeature([4], tf.float32)})["x"]


# each builds the pipeline of input pipeline ``pid`` of ``n``
SHARDED = {
    "files sliced per pipeline": lambda pid, n: tf.data.TFRecordDataset(FILES[pid::n])
    .map(parse)
    .shuffle(64)
    .batch(8),
    "records sliced per pipeline": lambda pid, n: tf.data.Dataset.from_tensor_slices(
        IMAGES[pid::n]
    ).batch(8),
    "a filter on the id": lambda pid, n: tf.data.Dataset.from_tensor_slices(IMAGES)
    .enumerate()
    .filter(lambda i, x: i % n == pid)
    .map(lambda i, x: x)
    .batch(8),
    "shard after interleave": lambda pid, n: tf.data.Dataset.from_tensor_slices(FILES)
    .interleave(tf.data.TFRecordDataset, cycle_length=4)
    .shard(n, pid)
    .map(parse)
    .batch(8),
    "shard inside the interleave": lambda pid, n: tf.data.Dataset.from_tensor_slices(FILES)
    .interleave(lambda f: tf.data.TFRecordDataset(f).shard(n, pid))
    .batch(8),
}
WHOLE = {
    "the whole dataset": lambda pid, n: tf.data.Dataset.from_tensor_slices(FILES)
    .interleave(tf.data.TFRecordDataset)
    .map(parse)
    .batch(8),
    "the id as a shuffle seed": lambda pid, n: tf.data.Dataset.from_tensor_slices(IMAGES)
    .shuffle(128, seed=pid)
    .batch(8),
}


@pytest.mark.parametrize("name", SHARDED)
def test_per_pipeline_selections_read_other_data(name):
    first, second = (reads(SHARDED[name](pid, 2)) for pid in (0, 1))
    assert first.digest and second.digest and first.digest != second.digest
    assert first.shards == ("shard" in name)


@pytest.mark.parametrize("name", WHOLE)
def test_the_same_data_on_every_pipeline_reads_alike(name):
    first, second = (reads(WHOLE[name](pid, 2)) for pid in (0, 1))
    assert first.digest == second.digest and not first.shards


def test_a_glob_per_worker_is_told_apart_and_one_glob_for_all_is_not(tmp_path):
    for worker in (0, 1):
        (tmp_path / f"w{worker}").mkdir()
        (tmp_path / f"w{worker}" / "a.tfrecord").write_bytes(b"")
    own = [reads(tf.data.Dataset.list_files(str(tmp_path / f"w{w}/*"))) for w in (0, 1)]
    assert own[0].digest != own[1].digest
    every = [reads(tf.data.Dataset.list_files(str(tmp_path / "w*/*"), seed=w)) for w in (0, 1)]
    assert every[0].digest == every[1].digest


def test_files_are_named_where_a_reader_reads_them():
    first, second = (reads(SHARDED["files sliced per pipeline"](pid, 2)) for pid in (0, 1))
    assert first.files == tuple(FILES[0::2]) and second.files == tuple(FILES[1::2])
    assert reads(SHARDED["records sliced per pipeline"](0, 2)).files == ()  # data, not files
    many = [f"/data/part-{i:05d}" for i in range(500)]
    assert reads(tf.data.TFRecordDataset(many)).files == tuple(many[:64])


def test_a_generator_source_cannot_be_compared():
    ds = tf.data.Dataset.from_generator(
        lambda: iter(IMAGES), output_signature=tf.TensorSpec((4,), tf.float32)
    )
    assert reads(ds).digest is None
    # a Python map does not choose what is read: still comparable
    mapped = tf.data.Dataset.from_tensor_slices(IMAGES).map(
        lambda x: tf.numpy_function(np.sqrt, [x], tf.float32)
    )
    assert reads(mapped).digest is not None


def test_the_dataset_function_s_read_of_its_pipeline_id_is_seen():
    """A real strategy calls the function with its input context; the hook reports
    whether the function read input_pipeline_id, and puts the property back."""
    seen: list[tuple[str, bool]] = []
    patches = distribute.install(
        lambda s: None, lambda how, s, ds, read: seen.append((how, read)), lambda *a: None
    )
    try:
        strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
        strategy.distribute_datasets_from_function(
            lambda ctx: tf.data.TFRecordDataset(
                FILES[ctx.input_pipeline_id :: ctx.num_input_pipelines]
            ).batch(4)
        )
        strategy.distribute_datasets_from_function(
            lambda ctx: tf.data.TFRecordDataset(FILES).batch(ctx.get_per_replica_batch_size(8))
        )
        strategy.experimental_distribute_dataset(tf.data.TFRecordDataset(FILES).batch(8))
    finally:
        for patch in reversed(patches):
            patch.undo()
    assert seen == [
        ("distribute_datasets_from_function", True),
        ("distribute_datasets_from_function", False),
        ("experimental_distribute_dataset", False),
    ]
    context = tf.distribute.InputContext(2, 1, 2)
    assert context.input_pipeline_id == 1
    assert type(context).__dict__["input_pipeline_id"].fget.__name__ == "input_pipeline_id"
    assert not hasattr(type(context).__dict__["input_pipeline_id"].fget, "__wrapped__")
