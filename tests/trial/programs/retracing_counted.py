"""The retracing program of the corpus printing its traces as TF's tf.function guide
does: what the fix changes by design, beside the loss it must keep."""

import numpy as np
import tensorflow as tf

x = np.random.default_rng(0).random((4096, 16), dtype=np.float32)
dataset = tf.data.Dataset.from_tensor_slices(x).batch(64).prefetch(2)
w = tf.Variable(tf.zeros((16, 1)))


@tf.function
def train_step(batch, learning_rate):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(tf.matmul(batch, w) - 1.0))
    w.assign_sub(learning_rate * tape.gradient(loss, w))
    return loss


learning_rate = 0.1
for epoch in range(2):
    for batch in dataset:
        loss = train_step(batch, learning_rate)
        learning_rate *= 0.999
    print(f"epoch {epoch} loss {float(loss):.4f}")
    print("Tracing count:", train_step.experimental_get_tracing_count())
