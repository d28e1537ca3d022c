"""tf.distribute in real runs: MirroredStrategy over two logical CPU devices, trained
the ways users write it (Keras fit, a custom loop with strategy.run), with the batch
scaled or not and the dataset distributed or not."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.host_load import contention
from tests.multiworker import train_step
from tests.test_run_tensorflow import line_with, run

SETUP = """
    import numpy as np
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    x = np.random.rand(1024, 32).astype("float32")
    y = np.random.rand(1024, 1).astype("float32")
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((32,)), tf.keras.layers.Dense(64, activation="relu"),
                                     tf.keras.layers.Dense(1)])
"""

FIT = (
    SETUP
    + """
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH)   # batch-here
    with strategy.scope():
        model.compile(optimizer="adam", loss="mse")
    model.fit(ds, epochs=2, verbose=0)
"""
)

LOOP = (
    SETUP
    + """
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(64 * strategy.num_replicas_in_sync)
    with strategy.scope():
        optimizer = tf.keras.optimizers.SGD(0.01)
"""
    + train_step()
    + """
    for epoch in range(3):
        for xb, yb in FEED:
            train_step(xb, yb)
"""
)


def record(tmp_path, source: str, name: str) -> dict:
    script = tmp_path / f"{name}.py"
    script.write_text(textwrap.dedent(source))
    out = tmp_path / f"{name}.json"
    result = run("--json", out, script, cwd=tmp_path)
    assert result.returncode in (0, 1), result.stderr[-3000:]
    assert out.exists(), f"exit {result.returncode}, no record:\n{result.stderr[-3000:]}"
    return json.loads(out.read_text()) | {"_script": script}


def distribute_findings(found: dict) -> dict[str, dict]:
    return {f["id"]: f for f in found["findings"] if f["id"].startswith("distribute.")}


def test_keras_fit_with_the_single_device_batch_is_named_and_the_scaled_one_is_not(tmp_path):
    unscaled = record(tmp_path, FIT.replace("BATCH", "16"), "unscaled")
    facts = unscaled["distribute"]
    assert (facts["strategy"], facts["replicas"], facts["variable"]) == (
        "MirroredStrategy",
        2,
        "strategy",
    )
    (given,) = facts["inputs"]
    assert given["global_batch"] == 16 and given["auto_shard"] == "AUTO"
    assert given["location"] == f"unscaled.py:{line_with(unscaled['_script'], 'batch-here')}"
    finding = distribute_findings(unscaled)["distribute.replica-batch"]
    assert finding["severity"] == "medium" and finding["evidence"]["per_replica_batch"] == 8
    assert ".batch(16 * strategy.num_replicas_in_sync)" in finding["fix"]
    scaled = record(tmp_path, FIT.replace("BATCH", "64 * strategy.num_replicas_in_sync"), "scaled")
    assert scaled["distribute"]["inputs"][0]["global_batch"] == 128
    assert not distribute_findings(scaled)  # the healthy control
    # what crosses devices: every trainable variable's gradient, float32, named
    crossing = scaled["distribute"]
    assert crossing["reduced_bytes"] == PARAMETER_BYTES and crossing["reduced_values"] == 4
    assert crossing["reduced"][0] == {"name": "sequential/dense/kernel", "shape": [32, 64],
                                      "dtype": "float32", "bytes": 32 * 64 * 4}  # fmt: skip
    assert crossing["link"] == "host memory" and crossing["link_source"].startswith("predicted:")
    assert crossing["allreduce_expected_s"] == pytest.approx(PARAMETER_BYTES / 10e9)
    # measured on a few steps under TF's profiler: CollectiveReduceV2 per replica
    assert 0 < crossing["collective_step_s"] and 0 < crossing["collective_share"] < 1
    assert crossing["collective_measured_by"].startswith("TF profiler host trace")
    # the strategy over this machine's CPUs places its replicas there itself: predicted
    # as on a GPU machine, no tf.device of the user's pins them, the matmuls are the GPU's
    ids = {f["id"] for f in scaled["findings"]}
    assert "placement.forced-cpu" not in ids and "placement.host-transfers" not in ids
    assert all(op["function"] for op in scaled["placement"]["tensor_ops"])
    assert scaled["placement"]["tensor_ops"]


FIT_ARRAYS = (
    SETUP
    + """
    with strategy.scope():
        model.compile(optimizer="adam", loss="mse")
    model.fit(x, y, BATCH, epochs=2, verbose=0)   # fit-here
"""
)


@pytest.mark.parametrize(
    ("batch", "named"),
    [("batch_size=32", True), ("batch_size=64 * strategy.num_replicas_in_sync", False)],
)
def test_keras_fit_on_arrays_batched_by_keras(tmp_path, batch, named):
    """model.fit(x, y, batch_size=32) under MirroredStrategy: Keras makes and distributes
    the dataset; the batch is fit's, at the user's fit call."""
    found = record(tmp_path, FIT_ARRAYS.replace("BATCH", batch), "arrays")
    (given,) = found["distribute"]["inputs"]
    line = line_with(found["_script"], "fit-here")
    assert (given["location"], given["scaled"]) == (f"arrays.py:{line}", not named)
    findings = distribute_findings(found)
    if not named:
        assert "distribute.replica-batch" not in findings
        return
    finding = findings["distribute.replica-batch"]
    assert finding["evidence"]["per_replica_batch"] == 16
    assert finding["fix"].splitlines()[1] == (
        "model.fit(x, y, batch_size=32 * strategy.num_replicas_in_sync, epochs=2, verbose=0)"
    )


def test_a_custom_loop_feeding_replicas_an_undistributed_dataset(tmp_path):
    plain = record(tmp_path, LOOP.replace("FEED", "ds"), "plain")
    assert plain["distribute"]["runs"] >= 1 and plain["distribute"]["inputs"] == []
    finding = distribute_findings(plain)["distribute.undistributed-input"]
    assert finding["severity"] == "high"
    assert "strategy.experimental_distribute_dataset(<dataset>)" in finding["fix"]
    # the step as the loop calls it: strategy.run(step, args=(xb, yb))
    assert (plain["distribute"]["run_function"], plain["distribute"]["run_args"]) == ("step", 2)
    assert "strategy.run(step, args=(x, y))" in finding["fix"]
    distributed = record(
        tmp_path, LOOP.replace("FEED", "strategy.experimental_distribute_dataset(ds)"), "dist"
    )
    (given,) = distributed["distribute"]["inputs"]
    assert given["global_batch"] == 128
    assert not distribute_findings(distributed)
    # a custom loop's apply_gradients all-reduces the same values as fit
    assert distributed["distribute"]["reduced_bytes"] == PARAMETER_BYTES
    assert {v["name"] for v in distributed["distribute"]["reduced"]} == {
        "sequential/dense/kernel", "sequential/dense/bias",
        "sequential/dense_1/kernel", "sequential/dense_1/bias"}  # fmt: skip


PARAMETER_BYTES = (32 * 64 + 64 + 64 * 1 + 1) * 4  # the SETUP model's trainable float32s

# planted: 42 MB of gradients a step for 4 examples per replica
WIDE = """
    import numpy as np
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    x = np.random.rand(256, 1024).astype("float32")
    y = np.random.rand(256, 1).astype("float32")
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((1024,))]
                                    + [tf.keras.layers.Dense(2048) for _ in range(3)]
                                    + [tf.keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss="mse")
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(2 * strategy.num_replicas_in_sync)
    model.fit(ds, epochs=1, verbose=0)
"""


@pytest.fixture(scope="module")
def wide(tmp_path_factory) -> dict:
    return record(tmp_path_factory.mktemp("wide"), WIDE, "wide")


def test_steps_that_spend_their_time_all_reducing_are_named(wide):
    crossing = wide["distribute"]
    assert crossing["reduced_bytes"] == (1024 * 2048 + 2 * 2048 * 2048 + 3 * 2048 + 2048 + 1) * 4
    # 42 MB a step: from 15 % of the step in collectives (large_share), measured
    finding = distribute_findings(wide)["distribute.collective-bound"]
    assert finding["severity"] in ("medium", "high")
    assert finding["evidence"]["collective_share"] >= 0.15
    assert "(measured)" in finding["title"] or "measured)" in finding["title"]
    assert "strategy.num_replicas_in_sync" in finding["fix"]


def test_on_a_quiet_host_the_all_reduce_is_a_quarter_of_the_step_or_more(wide):
    """The share is that of the 4 steps TF's profiler traced, each ~50 ms: a stretch the
    host's other processes take in one step's compute moves it. 0.27-0.35 on a 2-core
    host at load 4-5 (0.25-0.33 with layers twice as wide: the same), 0.19 once on a
    loaded host, 0.23 once in a full suite the contention check called quiet. The
    record measures the other processes' share of the host over the run. The rule
    needs 0.15 (the test above): 0.2 here says the all-reduce is measured as the large
    part of the step it is, with room for one disturbed step of the four."""
    busy = contention(wide)
    if busy:
        pytest.skip(f"needs a quiet host: {busy}")
    assert wide["distribute"]["collective_share"] >= 0.2


@pytest.mark.parametrize(
    ("written", "scaled"),
    [
        (".batch(16)", ".batch(16 * strategy.num_replicas_in_sync)"),
        ("ds.batch(batch_size=BATCH)", "ds.batch(batch_size=BATCH * strategy.num_replicas_in_sync)"),
        ("ds.batch(64, drop_remainder=True)",
         "ds.batch(64 * strategy.num_replicas_in_sync, drop_remainder=True)"),
        ("model.fit(x, y, batch_size=32, epochs=2)",
         "model.fit(x, y, batch_size=32 * strategy.num_replicas_in_sync, epochs=2)"),
        ("model.fit(x, y, 64, 3)", "model.fit(x, y, 64 * strategy.num_replicas_in_sync, 3)"),
        ("model.fit(x, y, epochs=2)",
         "model.fit(x, y, epochs=2, batch_size=32 * strategy.num_replicas_in_sync)"),
    ],
)  # fmt: skip
def test_the_fix_scales_the_batch_call_as_written(written, scaled):
    from gpuwhy.rules.distribute.replica_batch import _scaled_call

    assert _scaled_call(written, "strategy.num_replicas_in_sync") == scaled
    assert _scaled_call("ds.batch(", "strategy.num_replicas_in_sync") is None  # unreadable


def test_the_run_section_says_how_the_replicas_are_fed():
    from gpuwhy.collect.inprocess.distribute import distribute_line
    from gpuwhy.facts import DistributedInput, DistributeFacts

    facts = DistributeFacts(
        strategy="MultiWorkerMirroredStrategy", replicas=4,
        devices=("/job:worker/replica:0/task:0/device:GPU:0",), cross_device="CollectiveAllReduce",
        communication="NCCL", task_type="worker", task_index=1, workers=2,
        inputs=(DistributedInput(how="experimental_distribute_dataset", global_batch=256,
                                 location="train.py:30", auto_shard="FILE"),),
    )  # fmt: skip
    assert distribute_line(facts) == (
        "MultiWorkerMirroredStrategy, 4 replica(s) (GPU:0); all-reduce by CollectiveAllReduce, "
        "collectives NCCL; task worker 1 of 2 worker(s); distributed datasets: global batch 256 "
        "(64 per replica) at train.py:30, auto-shard FILE"
    )


# the TF tutorial's in-process cluster: 2 workers and 2 parameter servers on localhost
PS = """
    import portpicker_free
    import tensorflow as tf

    ports = portpicker_free.ports(4)
    spec = {"worker": [f"localhost:{p}" for p in ports[:2]], "ps": [f"localhost:{p}" for p in ports[2:]]}
    cluster = tf.train.ClusterSpec(spec)
    for job, tasks in spec.items():
        for i in range(len(tasks)):
            tf.distribute.Server(cluster, job_name=job, task_index=i, protocol="grpc", start=True)
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(cluster, rpc_layer="grpc")
    ps_strategy = tf.distribute.ParameterServerStrategy(resolver)
    with ps_strategy.scope():
        embedding = tf.Variable(tf.zeros([2048, 1024]))   # 8 MiB: all on one server
        bias = tf.Variable(tf.zeros([1024]))
"""

FREE_PORTS = """
import socket


def ports(count):
    found = []
    for _ in range(count):
        with socket.socket() as s:
            s.bind(("localhost", 0))
            found.append(s.getsockname()[1])
    return found
"""


def test_parameter_server_variable_bytes_and_the_unbalanced_server(tmp_path):
    (tmp_path / "portpicker_free.py").write_text(FREE_PORTS)
    found = record(tmp_path, PS, "ps")
    facts = found["distribute"]
    assert facts["strategy"] == "ParameterServerStrategy" and facts["parameter_servers"] == 2
    assert sorted(facts["ps_bytes"]) == [1024 * 4, 2048 * 1024 * 4]
    finding = distribute_findings(found)["distribute.unbalanced-ps"]
    assert finding["severity"] == "high"  # all but 4 KiB of it on one of two servers
    assert "ps_strategy = tf.distribute.ParameterServerStrategy(" in finding["fix"]
