"""A program with four fixes for `gpuwhy fix` to try (benchmarks/bench_fix.py): an eager
GradientTape step (tf.function, and with XLA), a tf.function given a Python float that
changes every 50 steps (as a tensor), and a dataset whose elements repeat every epoch
(cache). Runs for longer than the benchmark's bound: each run is stopped there."""

import numpy as np
import tensorflow as tf

x = np.random.default_rng(0).random((4096, 64), dtype=np.float32)
y = (x.sum(axis=1) > 32).astype(np.int64)


def scale(features, label):
    for _ in range(8):
        features = tf.math.sqrt(features * features + 1e-3)
    return features, label


dataset = tf.data.Dataset.from_tensor_slices((x, y)).map(scale).batch(64)
model = tf.keras.Sequential(
    [tf.keras.Input((64,)), tf.keras.layers.Dense(256, activation="relu"), tf.keras.layers.Dense(2)]
)
optimizer = tf.keras.optimizers.SGD(0.05)
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def train_step(features, labels):
    with tf.GradientTape() as tape:
        loss = loss_fn(labels, model(features, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


smoothed = tf.Variable(0.0)


@tf.function
def track(loss, decay):
    smoothed.assign(smoothed * decay + loss * (1 - decay))


decay, steps = 0.5, 0
for epoch in range(200):
    for features, labels in dataset:
        loss = train_step(features, labels)
        track(loss, decay)
        steps += 1
        if steps % 50 == 0:
            decay = min(0.99, decay + 0.005)
    print(f"epoch {epoch} loss {float(loss):.4f} smoothed {float(smoothed):.4f}")
