"""What a step's placement findings blame, on real programs: a Keras metric's int32
math (kept in host memory by TF's own kernels), tf.distribute's iterator ops (on the
host by design), a CPU-only op and the copies it makes (one cause, one finding), and
float64 data that only enters the step (low) against float64 compute (not low)."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

import gpuwhy  # noqa: E402
from gpuwhy.rules.placement.host_transfers import MEMORY_TYPE_REASONS  # noqa: E402
from tests.test_run_tensorflow import run  # noqa: E402


def _serious(record, prefix="placement."):
    return [
        (f.id, f.severity, f.title)
        for f in record.findings
        if f.id.startswith(prefix) and f.severity in ("high", "medium")
    ]


def _classifier():
    return keras.Sequential(
        [keras.Input((20,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(10)]
    )


def _metric_step(jit_compile=False):
    """A custom training step updating a Keras accuracy metric."""
    model = _classifier()
    optimizer = keras.optimizers.Adam()
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    accuracy = keras.metrics.SparseCategoricalAccuracy()

    @tf.function(jit_compile=jit_compile)
    def train_step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = loss_fn(y, logits)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        accuracy.update_state(y, logits)
        return loss

    return train_step


def test_a_custom_loop_with_a_keras_accuracy_metric_is_healthy():
    x = tf.zeros([64, 20])
    y = tf.zeros([64], tf.int64)
    record = gpuwhy.audit(_metric_step(), x, y)
    placement = record.facts.placement
    # the metric's int32 compare: a real copy in a graph step, made by TF's own kernel
    metric = [c for c in placement.copies if c.cause_op == "Less"]
    assert metric and all(c.cause_reason in MEMORY_TYPE_REASONS for c in metric)
    assert all(c.sizeable() for c in metric if c.dtype == "int32")
    assert _serious(record) == []
    assert "worst" not in record.verdict
    # the fix host-transfers gives when such copies are many MiB: one XLA cluster, none
    step = _metric_step(jit_compile=True)
    assert np.isfinite(step(x, y).numpy())  # XLA compiles and runs it (here on the CPU)
    compiled = gpuwhy.audit(step, x, y)
    assert [c for c in compiled.facts.placement.copies if c.kind == "step"] == []


CTC_STEPS, CTC_BATCH, CTC_CLASSES = 50, 16, 28


def _ctc_step(ctc):
    """A speech-style custom step whose loss is ``ctc(labels, logits, lengths)``."""
    model = keras.Sequential(
        [keras.Input((CTC_STEPS, 20)), keras.layers.Dense(64, activation="relu"),
         keras.layers.Dense(CTC_CLASSES)]
    )  # fmt: skip
    optimizer = keras.optimizers.Adam()

    @tf.function
    def train_step(x, labels):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            lengths = tf.fill([CTC_BATCH], CTC_STEPS)
            loss = tf.reduce_mean(ctc(labels, logits, lengths))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return train_step


def _ctc_v1(labels, logits, lengths):
    """Keras 2's ctc_batch_cost way: sparse labels, CTCLoss (CPU only)."""
    return tf.compat.v1.nn.ctc_loss(tf.sparse.from_dense(labels), logits, lengths, time_major=False)


def _ctc_fixed(labels, logits, lengths):
    """The finding's fix pasted in: dense labels, blank the last class."""
    label_length = tf.fill([CTC_BATCH], tf.shape(labels)[1])
    return tf.nn.ctc_loss(
        labels, logits, label_length=label_length, logit_length=lengths,
        logits_time_major=False, blank_index=-1,
    )  # fmt: skip


def _ctc_batch():
    rng = np.random.default_rng(0)
    x = tf.constant(rng.random((CTC_BATCH, CTC_STEPS, 20)), tf.float32)
    labels = tf.constant(rng.integers(1, CTC_CLASSES - 1, (CTC_BATCH, 10)), tf.int32)
    return x, labels


def test_a_cpu_only_op_is_the_finding_and_its_copies_are_part_of_it():
    record = gpuwhy.audit(_ctc_step(_ctc_v1), *_ctc_batch())
    serious = _serious(record)
    assert [s[0] for s in serious] == ["placement.no-gpu-kernel"], serious
    assert "CTCLoss" in serious[0][2]
    (cause,) = [f for f in record.findings if f.id == "placement.no-gpu-kernel"]
    assert cause.evidence["copies_they_cause"] >= 2
    assert cause.evidence["bytes_copied_per_step"] >= 2 * CTC_STEPS * CTC_BATCH * CTC_CLASSES * 4
    assert "CTCLoss" in record.verdict
    assert "tf.nn.ctc_loss(<labels>, <logits>, label_length=" in cause.fix


def test_the_ctc_fix_computes_the_same_loss_on_the_gpu():
    x, labels = _ctc_batch()
    logits = tf.random.stateless_normal([CTC_BATCH, CTC_STEPS, CTC_CLASSES], seed=[1, 2])
    lengths = tf.fill([CTC_BATCH], CTC_STEPS)
    np.testing.assert_allclose(
        _ctc_fixed(labels, logits, lengths).numpy(),
        _ctc_v1(labels, logits, lengths).numpy(),
        rtol=1e-4,
    )
    record = gpuwhy.audit(_ctc_step(_ctc_fixed), x, labels)
    assert "CTCLoss" not in {g.op for g in record.facts.placement.groups}
    assert _serious(record) == []


def test_float64_numpy_data_given_to_a_float32_model_is_low():
    model = _classifier()
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    x = np.random.rand(64, 20)  # float64, NumPy's default
    y = np.random.randint(0, 10, 64)
    record = gpuwhy.audit(model, x, y)
    (finding,) = [f for f in record.findings if f.id == "placement.float64"]
    assert finding.severity == "low"
    assert finding.evidence["bytes_added_per_step"] == 64 * 20 * 8 // 2
    assert _serious(record) == []


def test_float64_layers_compute_in_float64_and_stay_a_finding():
    model = keras.Sequential(
        [keras.Input((20,)), keras.layers.Dense(32, activation="tanh", dtype="float64"),
         keras.layers.Dense(1, dtype="float64")]
    )  # fmt: skip
    model.compile(optimizer="adam", loss="mse")
    record = gpuwhy.audit(model, np.random.rand(64, 20), np.random.rand(64, 1))
    (finding,) = [f for f in record.findings if f.id == "placement.float64"]
    assert finding.severity in ("medium", "high")
    assert finding.evidence["float64_ops"] > 0


SET_FLOATX = """
    import numpy as np
    import tensorflow as tf

    tf.keras.backend.set_floatx("float64")  # @floatx
    x = np.random.default_rng(0).random((512, 20))
    y = x.sum(axis=1, keepdims=True)
    model = tf.keras.Sequential([tf.keras.Input((20,)), tf.keras.layers.Dense(32), tf.keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    model.fit(x, y, batch_size=64, epochs=1, verbose=0)  # @fit
"""


def test_float64_made_by_set_floatx_points_at_that_call_and_fixes_it_there(tmp_path):
    """The float64 ops are made when fit builds the layers (their line is fit's), but
    their cause is the program's set_floatx call: the finding points there, and its fix
    is that call, as written, with float32."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SET_FLOATX))
    lines = script.read_text().splitlines()
    floatx = next(i for i, line in enumerate(lines, 1) if "@floatx" in line)
    fit = next(i for i, line in enumerate(lines, 1) if "@fit" in line)
    result = run("--json", tmp_path / "run.json", script.name, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads((tmp_path / "run.json").read_text())
    assert record["placement"]["keras_floatx"] == "float64"
    assert record["placement"]["floatx_set_at"] == f"train.py:{floatx}"
    (finding,) = [f for f in record["findings"] if f["id"] == "placement.float64"]
    assert finding["location"] == f"train.py:{floatx}"
    assert f"at train.py:{fit}" in finding["title"]  # the ops' own line, in the title
    assert finding["title"].endswith(f"; Keras' float type is float64 (set at train.py:{floatx})")
    assert finding["fix"].splitlines()[0] == (
        f"tf.keras.backend.set_floatx('float32')   # at train.py:{floatx}, in place of "
        "tf.keras.backend.set_floatx('float64')"
    )


MIRRORED = """
    import numpy as np
    import tensorflow as tf
    import keras

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    GLOBAL_BATCH = 32 * strategy.num_replicas_in_sync
    x = np.random.rand(256, 28, 28, 1).astype("float32")
    y = np.random.randint(0, 10, 256)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(256).batch(GLOBAL_BATCH)
    dist_dataset = strategy.experimental_distribute_dataset(dataset)
    with strategy.scope():
        model = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Conv2D(8, 3, activation="relu"),
                                  keras.layers.Flatten(), keras.layers.Dense(10)])
        loss_object = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
        optimizer = keras.optimizers.Adam()
        train_accuracy = keras.metrics.SparseCategoricalAccuracy()
        optimizer.build(model.trainable_variables)

    def train_step(inputs):
        images, labels = inputs
        with tf.GradientTape() as tape:
            predictions = model(images, training=True)
            loss = tf.nn.compute_average_loss(loss_object(labels, predictions),
                                              global_batch_size=GLOBAL_BATCH)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        train_accuracy.update_state(labels, predictions)
        return loss

    @tf.function
    def distributed_train_step(batch):
        losses = strategy.run(train_step, args=(batch,))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    @tf.function
    def train_epoch(dataset):
        total = 0.0
        for batch in dataset:
            total += distributed_train_step(batch)
        return total

    for epoch in range(2):
        print("loss", float(train_epoch(dist_dataset)), float(train_accuracy.result()))
        train_accuracy.reset_state()
"""


def test_mirrored_custom_loop_over_a_distributed_dataset_is_healthy(tmp_path):
    script = tmp_path / "mirrored.py"
    script.write_text(textwrap.dedent(MIRRORED))
    out = tmp_path / "run.json"
    result = run("--json", out, script)
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads(out.read_text())
    serious = [
        (f["id"], f["title"])
        for f in record["findings"]
        if f["id"].startswith("placement.") and f["severity"] in ("high", "medium")
    ]
    assert serious == []
    groups = {g["op"]: g for g in record["placement"]["groups"]}
    assert groups["AnonymousMultiDeviceIteratorV3"]["reason"] == "host-by-design"
    # the iterator's batch, read through the loop's Identity ops, is the input, not the step
    step_copies = [c for c in record["placement"]["copies"] if c["kind"] == "step"]
    assert not [c for c in step_copies if c["src_op"] == "Identity" and c["dtype"] == "float32"]


def test_ops_on_the_host_by_design_are_told_apart_from_ops_without_a_gpu_kernel(tmp_path):
    log = str(tmp_path / "step.txt")

    @tf.function
    def step(x):
        y = tf.nn.relu(x)
        tf.print("mean", tf.reduce_mean(y))  # the log: host by design
        tf.debugging.Assert(tf.reduce_all(tf.math.is_finite(y)), [y])
        tf.io.write_file(log, tf.strings.as_string(tf.reduce_sum(y)))  # a file
        clipped = tf.numpy_function(np.clip, [y, 0.0, 1.0], tf.float32)  # the user's Python
        return clipped

    record = gpuwhy.audit(step, tf.zeros([8, 4]))
    reasons = {g.op: g.reason for g in record.facts.placement.groups}
    for op in ("PrintV2", "StringFormat", "WriteFile"):
        assert reasons[op] == "host-by-design", (op, reasons[op])
    assert reasons["PyFunc"] == "no-gpu-kernel"
    (finding,) = [f for f in record.findings if f.id == "placement.no-gpu-kernel"]
    # the user's own string math and Python stay problems; print, assert, file do not
    assert {row["op"] for row in finding.evidence["ops"]} == {"AsString", "PyFunc"}
