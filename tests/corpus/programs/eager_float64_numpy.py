"""Logistic regression by hand, eagerly: variables made from NumPy arrays (float64, NumPy's
default) and batches sliced from a float64 array, no tf.data and no tf.function. No
training step is found (nothing marks one), but the loop's float64 math is."""
# expect: env.no-gpu high
# expect: launch.eager-ops high
# expect: placement.float64 high

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(4)
features = rng.normal(size=(8000, 50))
labels = (features @ rng.normal(size=(50, 1)) > 0).astype(np.float64)
weights = tf.Variable(rng.normal(size=(50, 1)) * 0.01)
bias = tf.Variable(np.zeros(1))

for epoch in range(4):
    order = rng.permutation(len(features))
    total = 0.0
    for start in range(0, len(features), 50):
        rows = order[start : start + 50]
        with tf.GradientTape() as tape:
            logits = tf.matmul(features[rows], weights) + bias
            loss = tf.reduce_mean(
                tf.nn.sigmoid_cross_entropy_with_logits(labels=labels[rows], logits=logits)
            )
        grad_w, grad_b = tape.gradient(loss, [weights, bias])
        weights.assign_sub(0.1 * grad_w)
        bias.assign_sub(0.1 * grad_b)
        total += float(loss)
    print(f"epoch {epoch}: loss {total / (len(features) // 50):.5f}")
