"""A custom loop that writes a checkpoint every 200 steps, slowly (a sleep stands for a slow
network filesystem): the loop stalls at a steady period."""
# expect: steps.periodic-stall high
# expect: env.no-gpu high
# maybe: input.bound low|medium -- the Python call per step against a step of a millisecond: the host's load decides
# expect: tensorcore.unused low

import time

import numpy as np
import tensorflow as tf

x = np.random.default_rng(0).random((2048, 16), dtype=np.float32)
dataset = tf.data.Dataset.from_tensor_slices(x).repeat().batch(32).prefetch(2)
w = tf.Variable(tf.zeros((16, 1)))


@tf.function
def train_step(batch):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(tf.matmul(batch, w) - 1.0))
    w.assign_sub(0.01 * tape.gradient(loss, w))
    return loss


def save_checkpoint(step):
    np.save("/dev/null", w.numpy())
    time.sleep(0.3)  # a slow filesystem: 40 % of the loop, 20 % where load makes steps 2.7x


for step, batch in enumerate(dataset.take(3000)):
    loss = train_step(batch)
    time.sleep(0.001)  # the model's own work on a GPU
    if step % 200 == 199:
        save_checkpoint(step)
print(f"loss {float(loss):.4f}")
