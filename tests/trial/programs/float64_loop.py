"""A custom loop in float64: NumPy float64 arrays into a tf.data pipeline, float64
variables drawn from tf.random.normal: every matmul of the step in double precision."""

import numpy as np
import tensorflow as tf

x = np.random.default_rng(0).random((4096, 256))  # float64
y = x.sum(axis=1, keepdims=True)
dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(64)
w1 = tf.Variable(tf.random.normal((256, 1024), stddev=0.05, dtype=tf.float64))
w2 = tf.Variable(tf.random.normal((1024, 1), stddev=0.05, dtype=tf.float64))
opt = tf.keras.optimizers.SGD(1e-4)


@tf.function
def train_step(batch, target):
    with tf.GradientTape() as tape:
        hidden = tf.nn.relu(tf.matmul(batch, w1))
        loss = tf.reduce_mean(tf.square(tf.matmul(hidden, w2) - target))
    grads = tape.gradient(loss, [w1, w2])
    opt.apply_gradients(zip(grads, [w1, w2]))
    return loss


for epoch in range(4):
    for batch, target in dataset:
        loss = train_step(batch, target)
    print(f"epoch {epoch}: loss={float(loss):.5f}")
