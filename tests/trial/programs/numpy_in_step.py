"""An eager step that reads a tensor's value with .numpy(): traced as a tf.function it
fails (a symbolic tensor has no value), so that fix does not run."""

import numpy as np
import tensorflow as tf

x = np.random.default_rng(0).random((2048, 20), dtype=np.float32)
y = x.sum(axis=1, keepdims=True)
dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
w = tf.Variable(tf.zeros((20, 1)))
history = []


def train_step(batch, target):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(tf.matmul(batch, w) - target))
    w.assign_sub(0.01 * tape.gradient(loss, w))
    history.append(loss.numpy())
    return loss


for epoch in range(3):
    for batch, target in dataset:
        train_step(batch, target)
    print(f"epoch {epoch} loss {history[-1]:.4f}")
