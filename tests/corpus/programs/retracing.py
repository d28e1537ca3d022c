"""A tf.function given a Python float that changes every step (a decaying learning rate):
each new value is a new trace."""
# expect: launch.retracing high
# expect: env.no-gpu high
# expect: tensorcore.unused low
# maybe: input.iterator-end-wait medium|high -- a new tf.data iterator each epoch: TF's race at its end, lost mostly on a loaded host

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
print(f"loss {float(loss):.4f}")
