"""`gpuwhy run` on real programs that stall every N steps (#26): a custom loop writing a
tf.train.Checkpoint, Keras fit with ModelCheckpoint(save_freq=N), a loop whose
gc.collect() walks a large heap; and a healthy fit (epochs, validation, a learning-rate
schedule) that must stay quiet."""

import json
import textwrap

import pytest

from gpuwhy.schema import validation_errors
from tests.test_run_tensorflow import line_with, run

CHECKPOINT_LOOP = textwrap.dedent(
    """
    import sys
    import numpy as np
    import tensorflow as tf

    x = np.random.rand(4096, 64).astype("float32")
    ds = tf.data.Dataset.from_tensor_slices(x).batch(16)
    weights = [tf.Variable(tf.random.normal([1024, 1024])) for _ in range(8)]  # 32 MB
    w = tf.Variable(tf.random.normal([64, 64]))
    ckpt = tf.train.Checkpoint(w=w, weights=weights)


    @tf.function
    def step(xb):
        w.assign_add(tf.matmul(tf.transpose(xb), xb) * 1e-6)


    for i, xb in enumerate(ds):
        step(xb)
        if i % 50 == 49:
            ckpt.write(sys.argv[1] + "/ckpt")  # @save
    """
)
KERAS_CHECKPOINT = textwrap.dedent(
    """
    import sys
    import numpy as np
    import keras


    class Table(keras.layers.Layer):
        \"\"\"32 MB of weights the step never reads: what makes each save slow.\"\"\"

        def build(self, shape):
            self.table = self.add_weight(shape=(8192, 1024), initializer="zeros",
                                         trainable=False)

        def call(self, x):
            return x


    x = np.random.rand(3200, 32).astype("float32")
    y = np.random.randint(0, 4, 3200)
    model = keras.Sequential([keras.Input((32,)), Table(), keras.layers.Dense(64, activation="relu"),
                              keras.layers.Dense(4)])
    model.compile("adam", "sparse_categorical_crossentropy")
    save = keras.callbacks.ModelCheckpoint(sys.argv[1] + "/ckpt.weights.h5", save_freq=25,
                                           save_weights_only=True)
    model.fit(x, y, batch_size=16, epochs=2, callbacks=[save], verbose=0)  # @fit
    """
)
EPOCH_CHECKPOINT = textwrap.dedent(
    """
    import sys
    import numpy as np
    import keras


    class Table(keras.layers.Layer):
        \"\"\"32 MB of weights the step never reads: what makes each save slow.\"\"\"

        def build(self, shape):
            self.table = self.add_weight(shape=(8192, 1024), initializer="zeros",
                                         trainable=False)

        def call(self, x):
            return x


    x = np.random.rand(640, 32).astype("float32")
    y = np.random.randint(0, 4, 640)
    model = keras.Sequential([keras.Input((32,)), Table(), keras.layers.Dense(64, activation="relu"),
                              keras.layers.Dense(4)])
    model.compile("adam", "sparse_categorical_crossentropy")
    save = keras.callbacks.ModelCheckpoint(sys.argv[1] + "/ckpt.weights.h5", save_weights_only=True)
    model.fit(x, y, batch_size=16, epochs=6, callbacks=[save], verbose=0)  # @fit
    """
)
GC_LOOP = textwrap.dedent(
    """
    import gc
    import numpy as np
    import tensorflow as tf

    history = [{"step": i, "values": [float(i)] * 4} for i in range(300_000)]  # a large heap
    w = tf.Variable(tf.zeros([32, 32]))
    ds = tf.data.Dataset.from_tensor_slices(np.random.rand(3200, 32).astype("float32")).batch(8)


    @tf.function
    def step(xb):
        w.assign_add(tf.matmul(tf.transpose(xb), xb) * 1e-6)


    for i, xb in enumerate(ds):
        step(xb)
        if i % 40 == 39:
            gc.collect()  # @collect
    """
)
GC_GROWING_HEAP = textwrap.dedent(
    """
    import numpy as np
    import tensorflow as tf

    history = [{"step": -1, "values": [0.0] * 4} for _ in range(200_000)]  # a large heap
    w = tf.Variable(tf.zeros([32, 32]))
    ds = tf.data.Dataset.from_tensor_slices(np.random.rand(3200, 32).astype("float32")).batch(8)


    @tf.function
    def step(xb):
        w.assign_add(tf.matmul(tf.transpose(xb), xb) * 1e-6)


    for i, xb in enumerate(ds):
        step(xb)
        history.extend({"step": i, "values": [float(i)] * 4} for _ in range(1500))  # @keep
    """
)
EVALUATE_LOOP = textwrap.dedent(
    """
    import numpy as np
    import tensorflow as tf
    import keras

    x = np.random.rand(4000, 32).astype("float32")
    y = np.random.randint(0, 4, 4000)
    model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(64, activation="relu"),
                              keras.layers.Dense(4)])
    model.compile("adam", "sparse_categorical_crossentropy")
    optimizer = keras.optimizers.Adam()
    loss_fn = keras.losses.SparseCategoricalCrossentropy()
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)


    @tf.function
    def train_step(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        grads = tape.gradient(loss, model.trainable_weights)
        optimizer.apply_gradients(zip(grads, model.trainable_weights))


    for i, (xb, yb) in enumerate(ds):
        train_step(xb, yb)
        if i % 50 == 49:
            model.evaluate(x[:800], y[:800], verbose=0)  # @evaluate
    """
)
HEALTHY_FIT = textwrap.dedent(
    """
    import numpy as np
    import keras

    x = np.random.rand(3200, 32).astype("float32")
    y = np.random.randint(0, 4, 3200)
    model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(64, activation="relu"),
                              keras.layers.Dense(4)])
    model.compile(keras.optimizers.Adam(1e-3), "sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    schedule = keras.callbacks.LearningRateScheduler(lambda epoch, lr: lr * 0.9)
    model.fit(x, y, batch_size=32, epochs=5, validation_split=0.1, callbacks=[schedule],
              verbose=0)
    """
)


def watched(tmp_path, source: str) -> tuple[dict, str]:
    """The record of ``source`` run under ``gpuwhy run`` (its argv[1]: a scratch dir),
    and the script's path."""
    script = tmp_path / "train.py"
    script.write_text(source)
    out = tmp_path / "run.json"
    result = run("--json", out, "--no-audit", script, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads(out.read_text())
    assert validation_errors(record) == []
    return record, str(script)


def stall_findings(record: dict) -> list[dict]:
    return [f for f in record["findings"] if f["id"] == "steps.periodic-stall"]


def test_a_checkpoint_every_50_steps_is_named_with_its_line(tmp_path):
    record, script = watched(tmp_path, CHECKPOINT_LOOP)
    where = f"{script}:{line_with(tmp_path / 'train.py', '# @save')}"
    (finding,) = stall_findings(record)
    assert finding["title"].startswith("Every 50 steps training stalls for ")
    assert "checkpoint write (tf.train.Checkpoint.write)" in finding["title"]
    assert finding["location"] == where and where in finding["title"]
    assert 'ckpt.write(sys.argv[1] + "/ckpt", options=options)' in finding["fix"]
    assert "CheckpointOptions(enable_async=True)" in finding["fix"]
    (loop,) = [g for g in record["stalls"]["loops"] if not g["between_steps"]]
    beat = loop["beats"][0]
    assert (beat["kind"], beat["every_steps"], beat["period_fit"]) == ("checkpoint", 50, 1.0)
    assert beat["count"] == 5  # every write after the warm-up
    assert all(s["step"] % 50 == 49 for s in loop["first"] if s["causes"])
    assert loop["causes"][0]["kind"] == "checkpoint" and loop["causes"][0]["share"] > 0.8
    (checkpoints,) = [a for a in record["stalls"]["activities"] if a["kind"] == "checkpoint"]
    assert checkpoints["count"] == 5 and checkpoints["location"] == where
    windows = record["timeline"]["windows"]
    assert sum(w["stalls"] for w in windows) == loop["count"]
    assert sum(w["checkpoint_s"] for w in windows) == pytest.approx(checkpoints["seconds"], 1e-3)


def test_keras_model_checkpoint_every_25_steps_is_named_at_the_fit_call(tmp_path):
    record, script = watched(tmp_path, KERAS_CHECKPOINT)
    fit = f"{script}:{line_with(tmp_path / 'train.py', '# @fit')}"
    (finding,) = stall_findings(record)
    assert finding["title"].startswith("Every 25 steps training stalls for ")
    assert "ModelCheckpoint(save_freq=25)" in finding["title"] and fit in finding["title"]
    assert "save_freq=250, save_weights_only=True" in finding["fix"]
    assert finding["evidence"]["loop"].startswith("keras-fit")


def test_keras_model_checkpoint_at_every_epoch_s_end_is_time_between_steps(tmp_path):
    record, script = watched(tmp_path, EPOCH_CHECKPOINT)
    fit = f"{script}:{line_with(tmp_path / 'train.py', '# @fit')}"
    (finding,) = stall_findings(record)
    assert finding["title"].startswith("Every 40 steps training stalls between steps for ")
    assert "ModelCheckpoint(save_freq='epoch')" in finding["title"] and fit in finding["title"]
    assert "save_freq=400, save_weights_only=True)  # every 10 epochs of 40 steps" in finding["fix"]
    (between,) = [g for g in record["stalls"]["loops"] if g["between_steps"]]
    # what overlapped them, most time first: on a loaded host TF's race at the epochs'
    # iterator ends may outlast the writes in all (the beat is the checkpoint's all the same)
    assert between["count"] == 5 and "checkpoint" in {c["kind"] for c in between["causes"]}
    (beat,) = [b for b in between["beats"] if b["kind"] == "checkpoint"]
    assert beat["count"] == 5 and beat["every_steps"] == 40


def test_gc_collect_of_a_large_heap_every_40_steps_is_named(tmp_path):
    record, script = watched(tmp_path, GC_LOOP)
    where = f"{script}:{line_with(tmp_path / 'train.py', '# @collect')}"
    (finding,) = stall_findings(record)
    assert finding["title"].startswith("Every 40 steps training stalls for ")
    assert f"Python's garbage collector (generation 2) triggered at {where}" in finding["title"]
    assert "gc.freeze()" in finding["fix"]
    windows = record["timeline"]["windows"]
    assert sum(w["gc_collections"] for w in windows) >= 10
    assert sum(w["gc_pause_s"] for w in windows) > 0.2


def test_python_s_own_full_collections_of_a_growing_heap_are_named_at_the_allocation(tmp_path):
    record, script = watched(tmp_path, GC_GROWING_HEAP)
    where = f"{script}:{line_with(tmp_path / 'train.py', '# @keep')}"
    (finding,) = stall_findings(record)
    # each full collection comes more steps after the last (the heap grows): no period in
    # steps (in seconds, the collections' own growth may make one), a large share
    assert finding["title"].startswith(("Training stalled ", "Every "))
    assert " steps " not in finding["title"]
    assert f"Python's garbage collector (generation 2) triggered at {where}" in finding["title"]
    assert finding["evidence"]["stalls"] >= 3 and finding["evidence"]["share_of_loop_time"] > 0.1
    assert "history.extend(" in finding["fix"] and "gc.freeze()" in finding["fix"]


def test_model_evaluate_every_50_steps_of_a_custom_loop_is_named(tmp_path):
    record, script = watched(tmp_path, EVALUATE_LOOP)
    where = f"{script}:{line_with(tmp_path / 'train.py', '# @evaluate')}"
    (finding,) = stall_findings(record)
    assert finding["title"].startswith("Every 50 steps training stalls")
    assert f"evaluation (Model.evaluate) at {where}" in finding["title"]
    assert "between steps" not in finding["title"]  # the call's step ends where it returned
    assert "model.evaluate(val_ds, steps=50, verbose=0)" in finding["fix"]


def test_a_healthy_fit_with_validation_and_a_schedule_has_no_stall_finding(tmp_path):
    record, _ = watched(tmp_path, HEALTHY_FIT)
    assert stall_findings(record) == []
    assert record["stalls"] is not None
    kinds = {a["kind"] for a in record["stalls"]["activities"]}
    assert "evaluate" in kinds  # fit's validation was seen, and judged the program's choice
