"""An eager loop on NumPy's float64: data and initial weights from a Generator, never
named float64, so every op of the step computes in float64 (no tf.function: the eager
op counter reads the dtypes as the ops run)."""

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
X = rng.normal(size=(2048, 64))
Y = X[:, :1] * 2.0 + 1.0
W = tf.Variable(rng.normal(size=(64, 256)) * 0.05)
V = tf.Variable(rng.normal(size=(256, 1)) * 0.05)
opt = tf.keras.optimizers.SGD(1e-3)

for epoch in range(4):
    total = 0.0
    for i in range(0, len(X), 32):
        xb, yb = X[i : i + 32], Y[i : i + 32]
        with tf.GradientTape() as tape:
            h = tf.nn.relu(tf.matmul(xb, W))
            loss = tf.reduce_mean((tf.matmul(h, V) - yb) ** 2)
        grads = tape.gradient(loss, [W, V])
        opt.apply_gradients(zip(grads, [W, V]))
        total += float(loss)
    print(f"epoch {epoch} loss {total / (len(X) // 32):.5f}")
