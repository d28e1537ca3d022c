"""MultiWorkerMirroredStrategy with two real worker processes on localhost, each under
``gpuwhy run``: the cluster task, and how TF will shard each worker's input
(distribute.input-sharding), planted and healthy, in the two ways users feed workers
(a custom loop over experimental_distribute_dataset, or over
distribute_datasets_from_function). Keras 3's fit under MultiWorkerMirroredStrategy fails
on this TF before its first step (a PerReplica it cannot convert), with or without gpuwhy."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tests.multiworker import describe, run_cluster, train_step
from tests.test_run_tensorflow import ROOT

pytest.importorskip("tensorflow")

SETUP = """
    import numpy as np
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    GLOBAL_BATCH = 64 * strategy.num_replicas_in_sync
    images = np.random.rand(2048, 32).astype("float32")
    labels = np.random.randint(0, 10, 2048)
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((32,)), tf.keras.layers.Dense(64, activation="relu"),
                                     tf.keras.layers.Dense(10)])
"""

LOOP = (
    """
    with strategy.scope():
        optimizer = tf.keras.optimizers.SGD(0.01)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
"""
    + train_step(
        "tf.nn.compute_average_loss(loss_fn(yr, model(xr, training=True)), "
        "global_batch_size=GLOBAL_BATCH)"
    )
    + """
    for epoch in range(2):
        for xb, yb in dist_ds:
            train_step(xb, yb)
"""
)

# the usual first multi-worker script: in-memory slices and a Python augmentation,
# AUTO sharding (TF falls back to DATA: both workers run the augmentation on all 2048)
DATA_FALLBACK = (
    SETUP
    + """
    def augment(x):
        return x + np.float32(np.random.normal(scale=0.01))

    def tf_augment(x, y):
        x = tf.numpy_function(augment, [x], tf.float32)
        return tf.ensure_shape(x, (32,)), y

    ds = tf.data.Dataset.from_tensor_slices((images, labels))   # source-here
    ds = ds.map(tf_augment).batch(GLOBAL_BATCH).prefetch(2)
    dist_ds = strategy.experimental_distribute_dataset(ds)
"""
    + LOOP
)

# healthy: each worker's dataset function shards by its input context
LOOP_SHARDED = (
    SETUP
    + """
    def dataset_fn(input_context):
        ds = tf.data.Dataset.from_tensor_slices((images, labels))
        ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        return ds.batch(input_context.get_per_replica_batch_size(GLOBAL_BATCH)).prefetch(2)

    dist_ds = strategy.distribute_datasets_from_function(dataset_fn)
"""
    + LOOP
)


def run_two_workers(tmp_path, source: str, name: str) -> list[dict]:
    script = tmp_path / f"{name}.py"
    script.write_text(textwrap.dedent(source))
    workers = run_cluster(script, 2, lambda i: ["--json", tmp_path / f"{name}-{i}.json"], tmp_path)
    assert [w.returncode for w in workers] == [0] * len(workers), describe(workers)
    return [json.loads((tmp_path / f"{name}-{i}.json").read_text()) for i in range(2)]


def sharding_findings(record: dict) -> list[dict]:
    return [f for f in record["findings"] if f["id"] == "distribute.input-sharding"]


def test_in_memory_slices_with_a_python_map_repeat_it_on_every_worker(tmp_path):
    records = run_two_workers(tmp_path, DATA_FALLBACK, "data")
    for index, record in enumerate(records):
        facts = record["distribute"]
        assert (facts["strategy"], facts["workers"]) == ("MultiWorkerMirroredStrategy", 2)
        assert (facts["task_type"], facts["task_index"]) == ("worker", index)
        (given,) = [i for i in facts["inputs"] if i["shard_applied"]]
        assert given["shard_applied"] == "DATA" and given["repeated_heavy"]
        assert given["shard_reason"].startswith("Found an unshardable source dataset")
        (finding,) = sharding_findings(record)
        assert finding["severity"] in ("medium", "high")
        assert "tf_augment" in " ".join(finding["evidence"]["stages_every_worker_runs_on_all_data"])
        line = 1 + textwrap.dedent(DATA_FALLBACK).splitlines().index(
            next(ln for ln in textwrap.dedent(DATA_FALLBACK).splitlines() if "source-here" in ln)
        )
        assert finding["location"] == f"data.py:{line}"
        assert ".shard(2, strategy.cluster_resolver.task_id)" in finding["fix"]


def test_a_dataset_function_sharding_by_its_input_context_is_healthy(tmp_path):
    records = run_two_workers(tmp_path, LOOP_SHARDED, "loop")
    for record in records:
        facts = record["distribute"]
        assert facts["workers"] == 2 and facts["runs"] >= 1
        assert any(i["sharded_in_code"] for i in facts["inputs"])
        assert not sharding_findings(record)
        assert not [
            f
            for f in record["findings"]
            if f["id"].startswith("distribute.") and f["severity"] in ("high", "medium")
        ]


# a dataset function choosing each worker's TFRecord files by its pipeline id (no
# shard() call anywhere), and the same function ignoring its input context
FILES_BY_PIPELINE = (
    SETUP
    + """
    FILES = [f"part-{i}.tfrecord" for i in range(4)]  # written by the test
    SPEC = {"x": tf.io.FixedLenFeature([32], tf.float32), "y": tf.io.FixedLenFeature([], tf.int64)}

    def parse(record):
        parsed = tf.io.parse_single_example(record, SPEC)
        return parsed["x"], parsed["y"]

    def dataset_fn(ctx):
        files = FILES[ctx.input_pipeline_id::ctx.num_input_pipelines]   # SELECT
        ds = tf.data.TFRecordDataset(files).map(parse).shuffle(256)
        return ds.batch(ctx.get_per_replica_batch_size(GLOBAL_BATCH)).prefetch(2)

    dist_ds = strategy.distribute_datasets_from_function(dataset_fn)
"""
    + LOOP
)


def write_records(directory, count: int, rows: int = 512) -> None:
    """``count`` TFRecord files of (x: 32 floats, y: int) examples, written once before
    the workers start (two workers writing them at once would corrupt them)."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    for i in range(count):
        with tf.io.TFRecordWriter(str(directory / f"part-{i}.tfrecord")) as writer:
            for x, y in zip(rng.random((rows, 32)), rng.integers(0, 10, rows)):
                feature = {
                    "x": tf.train.Feature(float_list=tf.train.FloatList(value=x)),
                    "y": tf.train.Feature(int64_list=tf.train.Int64List(value=[y])),
                }
                example = tf.train.Example(features=tf.train.Features(feature=feature))
                writer.write(example.SerializeToString())


@pytest.mark.parametrize("selects", [True, False], ids=["files-by-pipeline", "ignores-ctx"])
def test_a_dataset_function_choosing_its_files_by_pipeline_shards_and_the_merge_agrees(
    tmp_path, selects
):
    source = FILES_BY_PIPELINE
    if not selects:
        source = source.replace("FILES[ctx.input_pipeline_id::ctx.num_input_pipelines]", "FILES")
    script = tmp_path / "files.py"
    script.write_text(textwrap.dedent(source))
    write_records(tmp_path, 4)
    workers = run_cluster(script, 2, lambda i: ["--no-audit", "--out-dir", "runs"], tmp_path)
    assert [w.returncode for w in workers] == [0, 0], describe(workers)
    records = [json.loads((tmp_path / "runs" / f"worker-{i}.json").read_text()) for i in (0, 1)]
    read = []
    for record in records:
        (given,) = [i for i in record["distribute"]["inputs"] if i["shard_applied"]]
        read.append(given)
        if selects:
            assert given["sharded_by"] == "input_pipeline_id" and not sharding_findings(record)
        else:
            assert given["sharded_by"] is None
            (finding,) = sharding_findings(record)
            assert finding["severity"] == "medium"  # it shuffles: other orders, same data
    files = [set(given["read_files"]) for given in read]
    if selects:
        assert files == [
            {"part-0.tfrecord", "part-2.tfrecord"},
            {"part-1.tfrecord", "part-3.tfrecord"},
        ]
        assert read[0]["reads_digest"] != read[1]["reads_digest"]
    else:
        assert files[0] == files[1] and read[0]["reads_digest"] == read[1]["reads_digest"]
    merged = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "merge", "runs", "--json", "merged.json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"},
    )  # fmt: skip
    assert merged.returncode in (0, 1), merged.stderr
    found = sharding_findings(json.loads((tmp_path / "merged.json").read_text()))
    if selects:
        assert not found
    else:
        (finding,) = found
        assert finding["title"].startswith("Each of the 2 workers trains on the same data")
