"""`gpuwhy run` on real programs written the way tutorials write them (#13 item 7): a
script with several training loops, validation loops among them, and then `fit`; a
Keras model with a TextVectorization layer run by fit and evaluate, its pipelines built
by one shared helper, and an XLA-compiled custom step."""

import json
import textwrap

import pytest

from gpuwhy.schema import validation_errors
from tests.test_run_tensorflow import run

LOOPS = textwrap.dedent(
    """
    import numpy as np
    import tensorflow as tf
    import keras

    x = np.random.rand(640, 16).astype("float32")
    y = np.random.randint(0, 4, 640)
    train_dataset = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(640).batch(32)
    val_dataset = tf.data.Dataset.from_tensor_slices((x[:128], y[:128])).batch(32)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


    def get_model():
        return keras.Sequential([keras.Input((16,)), keras.layers.Dense(32, activation="relu"),
                                 keras.layers.Dense(4)])


    # an eager warm-up loop
    model = get_model()
    optimizer = keras.optimizers.SGD(0.01)
    for step, (xb, yb) in enumerate(train_dataset):  # @eager-loop
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        grads = tape.gradient(loss, model.trainable_weights)
        optimizer.apply_gradients(zip(grads, model.trainable_weights))

    # a tf.function step, validated every epoch
    model = get_model()
    optimizer = keras.optimizers.Adam()
    val_acc = keras.metrics.SparseCategoricalAccuracy()


    @tf.function
    def train_step(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        grads = tape.gradient(loss, model.trainable_weights)
        optimizer.apply_gradients(zip(grads, model.trainable_weights))
        return loss


    @tf.function
    def test_step(xb, yb):
        val_acc.update_state(yb, model(xb, training=False))


    for epoch in range(2):
        for xb, yb in train_dataset:  # @function-loop
            train_step(xb, yb)
        for xb, yb in val_dataset:  # @validation-loop
            test_step(xb, yb)
        val_acc.reset_state()

    # a second model on its own data
    images = np.random.rand(256, 8, 8, 1).astype("float32")
    image_ds = tf.data.Dataset.from_tensor_slices(images).batch(32)
    critic = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Conv2D(4, 3),
                               keras.layers.Flatten(), keras.layers.Dense(1)])
    critic_opt = keras.optimizers.Adam()


    @tf.function
    def critic_step(real):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(critic(real))
        grads = tape.gradient(loss, critic.trainable_weights)
        critic_opt.apply_gradients(zip(grads, critic.trainable_weights))


    for real in image_ds:  # @second-model-loop
        critic_step(real)

    # and fine-tuning with fit, then an evaluation
    model.compile(optimizer="adam", loss=loss_fn)
    model.fit(train_dataset, epochs=1, verbose=0)  # @fit
    model.evaluate(val_dataset, verbose=0)
    print("done")
    """
)


def _at(path, marker: str) -> str:
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if f"# @{marker}" in line:
            return f"{path.name}:{number}"  # run from its folder: paths relative to it
    raise AssertionError(marker)


@pytest.fixture(scope="module")
def loops_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("loops")
    script = folder / "loops.py"
    script.write_text(LOOPS)
    out = folder / "run.json"
    result = run("--json", out, script, cwd=folder)
    assert result.returncode == 0, result.stderr[-3000:]
    return script, json.loads(out.read_text())


def test_every_training_loop_s_steps_are_counted_and_validation_is_not(loops_run):
    script, record = loops_run
    assert validation_errors(record) == []
    steps = record["steps"]
    loops = {(loop["source"], loop["name"]): loop["count"] for loop in steps["loops"]}
    assert loops == {
        ("tf-data", _at(script, "eager-loop")): 20,  # 640 / 32
        ("tf-data", _at(script, "function-loop")): 40,  # two epochs
        ("tf-data", _at(script, "second-model-loop")): 8,
        ("keras-fit", f"Model.fit at {_at(script, 'fit')}"): 20,
    }
    # the validation loop (test_step has no backward pass) and evaluate() are not steps
    assert steps["count"] == 20 + 40 + 8 + 20
    assert steps["marker"].startswith(
        f"next() on a tf.data iterator at {_at(script, 'function-loop')}"
    )
    assert "Model.fit" in steps["marker"]
    assert list(steps["starts"]) == sorted(steps["starts"])  # one time line
    # each loop's first step traces its own function: a warm-up step per loop
    assert steps["warmup"] >= 3


TEXT = textwrap.dedent(
    """
    import numpy as np
    import tensorflow as tf
    import keras

    texts = np.array(["the cat sat on the mat", "a dog ran in the park", "good film",
                      "bad film today"] * 32)
    labels = np.array([1, 0, 1, 0] * 32, dtype="float32")


    def _finish(ds, training):
        if training:
            ds = ds.shuffle(128)
        return ds.batch(16).prefetch(tf.data.AUTOTUNE)  # @finish


    def make_dataset(split):
        n = 128 if split == "train" else 64
        ds = tf.data.Dataset.from_tensor_slices((texts[:n], labels[:n]))
        return _finish(ds, split == "train")


    def main():
        train_ds = make_dataset("train")  # @train-split
        val_ds = make_dataset("val")  # @val-split
        vectorize = keras.layers.TextVectorization(max_tokens=100, output_sequence_length=8)
        vectorize.adapt(texts)
        inputs = keras.Input(shape=(1,), dtype="string")
        x = keras.layers.Embedding(100, 8)(vectorize(inputs))
        outputs = keras.layers.Dense(1)(keras.layers.GlobalAveragePooling1D()(x))
        model = keras.Model(inputs, outputs)
        model.compile(optimizer="adam", loss=keras.losses.BinaryCrossentropy(from_logits=True))
        model.fit(train_ds, epochs=2, verbose=0)  # @fit
        model.evaluate(val_ds, verbose=0)  # @evaluate

        dense = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
        opt = keras.optimizers.SGD(0.1)
        numbers = tf.data.Dataset.from_tensor_slices(np.random.rand(96, 8).astype("float32"))

        @tf.function(jit_compile=True)
        def xla_step(xb):  # @xla-step
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(dense(xb) ** 2)
            grads = tape.gradient(loss, dense.trainable_weights)
            opt.apply_gradients(zip(grads, dense.trainable_weights))

        for xb in numbers.batch(16):
            xla_step(xb)


    main()
    """
)


@pytest.fixture(scope="module")
def text_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("text")
    script = folder / "text.py"
    script.write_text(TEXT)
    out = folder / "run.json"
    result = run("--json", out, script, cwd=folder)
    assert result.returncode == 0, result.stderr[-3000:]
    return script, json.loads(out.read_text()), result.stderr


def test_evaluate_s_function_with_string_ops_is_audited_beside_fit_s(text_run):
    script, record, _ = text_run
    audited = {(f["name"], f["location"]) for f in record["placement"]["functions"]}
    assert ("multi_step_on_iterator", _at(script, "fit")) in audited
    assert ("multi_step_on_iterator", _at(script, "evaluate")) in audited
    ran = {(f["name"], f["location"]) for f in record["tracing"]["functions"] if f["calls"]}
    assert ran <= audited  # every traced function that ran is audited
    string_ops = {g["op"] for g in record["placement"]["groups"] if "String" in g["op"]}
    assert string_ops  # TextVectorization's string ops, seen in the audit


def test_pipelines_of_one_shared_helper_are_named_by_their_callers(text_run):
    script, record, _ = text_run
    by_consumer = {p["consumer"]: p for p in record["tfdata"]["pipelines"]}
    fit, evaluate = by_consumer["keras-fit"], by_consumer["keras-evaluate"]
    assert fit["location"] == _at(script, "train-split")
    assert evaluate["location"] == _at(script, "val-split")
    assert fit["helper_location"] == evaluate["helper_location"] == _at(script, "finish")


def test_an_xla_compiled_step_is_said_so(text_run):
    script, record, stderr = text_run
    location = _at(script, "xla-step").rsplit(":", 1)[0]
    (traced,) = [f for f in record["tracing"]["functions"] if f["name"] == "xla_step"]
    assert traced["jit_compile"] is True and traced["location"].startswith(location)
    (audited,) = [f for f in record["placement"]["functions"] if f["name"] == "xla_step"]
    assert audited["jit_compile"] is True
    assert "xla_step (" in stderr and "XLA-compiled" in stderr  # the run summary says it
