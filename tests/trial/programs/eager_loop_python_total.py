"""An eager training loop as users write it: batches sliced from NumPy arrays, the loss
summed into a Python float that the epoch's print reads. The whole body cannot move into
a tf.function (a Python float added to in a graph is added to once, at the trace); the
statements that issue the ops can."""

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
X = rng.normal(size=(2048, 32)).astype(np.float32)
Y = X[:, :1] * 2.0 + 1.0
W = tf.Variable(rng.normal(size=(32, 128)).astype(np.float32) * 0.05)
V = tf.Variable(rng.normal(size=(128, 1)).astype(np.float32) * 0.05)
opt = tf.keras.optimizers.SGD(1e-3)

for epoch in range(6):
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
