"""A custom training loop with several of the seed articles' problems at once.

`make demo` runs `gpuwhy run` on it. What gpuwhy should find, in the order a user meets it:
- the input pipeline runs Python for every image (`tf.py_function`), one at a time, and is
  not prefetched: the step waits for input (seed 001, example 1; seed 003);
- the learning rate is passed to the tf.function as a Python float that changes, so the
  step is traced again and again (seed 001);
- a Python loop of small eager ops after every step (seed 001, example 3);
- float64 math and a `tf.device('/CPU:0')` pin inside the step: ops on the CPU and copies
  between host and GPU every step (seed 002).
Plain TensorFlow, no gpuwhy import: run it with `python` or `gpuwhy run` alike.
"""

import argparse
import time

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--samples", type=int, default=1536)
parser.add_argument("--batch", type=int, default=32)
args = parser.parse_args()

rng = np.random.default_rng(0)
images = rng.random((args.samples, 32, 32, 3), dtype=np.float32)
labels = rng.integers(0, 10, size=args.samples)


def decode(image):
    time.sleep(0.002)               # stands in for PIL/OpenCV work on each image
    return image.numpy()[::-1]


def load(image, label):
    image = tf.py_function(decode, [image], tf.float32)
    image.set_shape((32, 32, 3))
    return image, label


dataset = tf.data.Dataset.from_tensor_slices((images, labels)).map(load).batch(args.batch)

model = tf.keras.Sequential([
    tf.keras.Input((32, 32, 3)),
    tf.keras.layers.Conv2D(30, 3, activation="relu"),
    tf.keras.layers.MaxPooling2D(),
    tf.keras.layers.Flatten(),
    tf.keras.layers.Dense(10),
])
optimizer = tf.keras.optimizers.SGD()
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")


@tf.function
def train_step(x, y, learning_rate):
    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        per_example = loss_fn(y, logits)
        loss = tf.reduce_mean(per_example)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.learning_rate.assign(learning_rate)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    with tf.device("/CPU:0"):
        spread = tf.math.reduce_std(tf.cast(logits, tf.float64))   # float64, pinned to the CPU
    return per_example, spread


start = time.perf_counter()
steps = 0
class_loss = [0.0] * 10
class_seen = [0.0] * 10
for epoch in range(args.epochs):
    for x, y in dataset:
        learning_rate = 0.05 * 0.5 ** (steps // 8)        # a new Python float: a new trace
        per_example, spread = train_step(x, y, learning_rate)
        for label in range(10):                            # per-class loss, op by op, eagerly
            in_class = tf.cast(tf.equal(y, label), tf.float32)
            count = tf.reduce_sum(in_class)
            class_loss[label] += tf.reduce_sum(per_example * in_class) / tf.maximum(count, 1.0)
            class_seen[label] += count
        largest = 0.0
        for weight in model.trainable_weights:             # weight statistics, op by op
            largest = tf.maximum(largest, tf.reduce_max(tf.abs(weight)))
        steps += 1
    print(f"epoch {epoch}: loss {float(tf.reduce_mean(per_example)):.3f}, "
          f"largest weight {float(largest):.3f}")
print(f"{steps} steps in {time.perf_counter() - start:.1f} s")
