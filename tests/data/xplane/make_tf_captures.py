"""Write small, real XProf captures (XSpace ``*.xplane.pb``) with TensorFlow's own profiler on a CPU.

Usage: python make_tf_captures.py OUT_DIR [NAME ...]

Each capture is made in a fresh child process (so no capture sees another's functions, threads or
profiler state) and lands where TensorFlow puts it: ``OUT_DIR/<name>/plugins/profile/<run>/<host>.xplane.pb``
(for the TensorBoard callback, under ``OUT_DIR/<name>/train/`` because that is the callback's own
``log_dir/train``).  Only the ``*.xplane.pb`` files are kept; anything else the writers leave (event files
of the TensorBoard callback, ``*.trace.json.gz``) is removed.

keras_fit_tensorboard_callback needs the ``tensorboard`` package importable (``pip install tensorboard``, or
``--target`` a folder put on PYTHONPATH): TensorFlow 2.21 no longer depends on it, and without it Keras 3.15's
TensorBoard callback fails in ``tf.summary.scalar`` (TBNotInstalledError) before it profiles anything.

  keras_fit_slow_generator        Keras 3 fit, input from a Python generator sleeping 15 ms per batch
  keras_fit_tensorboard_callback  Keras 3 fit on numpy arrays, captured by TensorBoard(profile_batch=(3, 6))
  custom_loop_step_markers        tf.function train step with GradientTape, tf.data .map/.batch, each step
                                  in tf.profiler.experimental.Trace("train", step_num=step, _r=1)
  eager_python_loop               eager matmuls per step, tf.py_function in the dataset's map, no markers
"""

import os
import shutil
import subprocess
import sys
import time

NAMES = (
    "keras_fit_slow_generator",
    "keras_fit_tensorboard_callback",
    "custom_loop_step_markers",
    "eager_python_loop",
)
BATCH, STEPS, SEED = 32, 12, 0


def _tf():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import keras
    import numpy as np
    import tensorflow as tf

    keras.utils.set_random_seed(SEED)  # seeds Python, NumPy and TensorFlow
    return np, tf, keras


def _conv_net(keras):  # Conv2D with 8 filters on 32x32x3, pooled, a 10-way Dense
    return keras.Sequential(
        [
            keras.Input((32, 32, 3)),
            keras.layers.Conv2D(8, 3, activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(10),
        ]
    )


def _conv_model(keras):
    m = _conv_net(keras)
    m.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return m


def _data(np, n):
    rng = np.random.default_rng(SEED)
    return rng.random((n, 32, 32, 3), dtype=np.float32), rng.integers(0, 10, n).astype("int32")


def keras_fit_slow_generator(logdir):
    np, tf, keras = _tf()
    x, y = _data(np, BATCH * STEPS)

    def slow():
        while True:
            for i in range(STEPS):
                time.sleep(0.015)  # the input-bound part: 15 ms of Python per batch
                yield x[i * BATCH : (i + 1) * BATCH], y[i * BATCH : (i + 1) * BATCH]

    ds = tf.data.Dataset.from_generator(
        slow,
        output_signature=(
            tf.TensorSpec((None, 32, 32, 3), tf.float32),
            tf.TensorSpec((None,), tf.int32),
        ),
    )
    m = _conv_model(keras)
    m.fit(ds, steps_per_epoch=STEPS, epochs=1, verbose=0)  # compile + warm-up, outside the capture
    tf.profiler.experimental.start(logdir)
    m.fit(ds, steps_per_epoch=STEPS, epochs=1, verbose=0)
    tf.profiler.experimental.stop()


def keras_fit_tensorboard_callback(logdir):
    np, tf, keras = _tf()
    import tensorboard  # noqa: F401  (fail early and clearly: see the module's docstring)

    x, y = _data(np, BATCH * STEPS)
    m = _conv_model(keras)
    m.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)  # compile + warm-up, outside the capture
    tb = keras.callbacks.TensorBoard(log_dir=logdir, profile_batch=(3, 6))
    m.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, callbacks=[tb])


def custom_loop_step_markers(logdir):
    np, tf, keras = _tf()
    x, y = _data(np, BATCH * 16)
    ds = (
        tf.data.Dataset.from_tensor_slices((x, y))
        .map(lambda a, b: (tf.image.per_image_standardization(a), b))
        .batch(BATCH)
    )  # no prefetch
    model = _conv_net(keras)  # not compiled: the loop below trains it
    opt = keras.optimizers.SGD(0.01)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def train_step(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    it = iter(ds)
    train_step(*next(it))  # trace + warm-up, outside the capture
    tf.profiler.experimental.start(logdir)
    for step in range(10):
        with tf.profiler.experimental.Trace("train", step_num=step, _r=1):
            xb, yb = next(it)
            train_step(xb, yb)
    tf.profiler.experimental.stop()


def eager_python_loop(logdir):
    np, tf, keras = _tf()

    def py_scale(v):  # runs in Python, called by the dataset's map: 3 ms per batch
        time.sleep(0.003)
        return (np.tanh(v.numpy()) * 0.5).astype(np.float32)

    base = np.random.default_rng(SEED).random((16 * 12, 64), dtype=np.float32)
    ds = (
        tf.data.Dataset.from_tensor_slices(base)
        .batch(16)
        .map(lambda b: tf.ensure_shape(tf.py_function(py_scale, [b], tf.float32), (None, 64)))
    )
    w1 = tf.Variable(tf.random.normal((64, 64), seed=SEED))
    w2 = tf.Variable(tf.random.normal((64, 10), seed=SEED + 1))

    def step(xb):  # eager: every op is dispatched from Python
        h = tf.nn.relu(tf.matmul(xb, w1))
        h = tf.nn.relu(tf.matmul(h, w1))
        out = tf.matmul(h, w2)
        return tf.reduce_mean(out)

    it = iter(ds)
    step(next(it))  # warm-up, outside the capture
    tf.profiler.experimental.start(logdir)
    for _ in range(10):
        step(next(it))
    tf.profiler.experimental.stop()


def _keep_only_xplanes(folder):
    for root, _, files in os.walk(folder, topdown=False):
        for f in files:
            if not f.endswith(".xplane.pb"):
                print("removed", os.path.join(root, f), flush=True)
                os.remove(os.path.join(root, f))
        if not os.listdir(root):
            os.rmdir(root)


def main(argv):
    out = os.path.abspath(argv[1])
    names = argv[2:] or NAMES
    if os.environ.get("_MAKE_TF_CAPTURE_CHILD"):
        # a relative log dir: the capture records it (Task Environment's profile_options)
        os.chdir(out)
        globals()[names[0]](names[0])
        return
    for name in names:
        target = os.path.join(out, name)
        shutil.rmtree(target, ignore_errors=True)
        os.makedirs(out, exist_ok=True)
        env = dict(os.environ, _MAKE_TF_CAPTURE_CHILD="1")
        subprocess.run([sys.executable, os.path.abspath(__file__), out, name], env=env, check=True)
        _keep_only_xplanes(target)
        for root, _, files in os.walk(target):
            for f in files:
                p = os.path.join(root, f)
                print(f"{p}  {os.path.getsize(p)} bytes", flush=True)


if __name__ == "__main__":
    main(sys.argv)
