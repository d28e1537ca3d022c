"""An eager step whose learning rate decays through a Python counter it increments:
traced as a tf.function the increment runs once, at tracing, and the rate never decays
(what the step computes changes)."""

import numpy as np
import tensorflow as tf

x = np.random.default_rng(0).random((2048, 20), dtype=np.float32)
y = x.sum(axis=1, keepdims=True)
dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
w = tf.Variable(tf.zeros((20, 1)))
calls = [0]


def train_step(batch, target):
    calls[0] += 1
    rate = 0.05 / calls[0] ** 0.5
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(tf.matmul(batch, w) - target))
    w.assign_sub(rate * tape.gradient(loss, w))
    return loss


for epoch in range(3):
    for batch, target in dataset:
        loss = train_step(batch, target)
    print(f"epoch {epoch} loss {float(loss):.4f}")
