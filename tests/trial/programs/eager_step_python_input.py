"""Two causes at once: an eager GradientTape step (no tf.function, over 100 ops a step) fed
by a sequential Python map that waits 2 ms an element (a file read, say). ``.map(load)``
followed by ``.batch(16)`` runs as one fused MapAndBatch stage, one element at a time: the
map made parallel holds; the step traced helps as much as the input lets it."""

import time

import numpy as np
import tensorflow as tf

tf.random.set_seed(0)
x = np.random.default_rng(0).random((1024, 20), dtype=np.float32)
y = (x.sum(axis=1) > 10).astype(np.int64)


def load(features, label):
    def read(value):
        time.sleep(0.002)
        return value

    (features,) = tf.py_function(read, [features], [tf.float32])
    features.set_shape([20])
    return features, label


dataset = tf.data.Dataset.from_tensor_slices((x, y)).map(load).batch(16)
model = tf.keras.Sequential(
    [tf.keras.Input((20,))]
    + [tf.keras.layers.Dense(32, activation="relu") for _ in range(5)]
    + [tf.keras.layers.Dense(2)]
)
optimizer = tf.keras.optimizers.SGD(0.1)
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def train_step(features, target):
    with tf.GradientTape() as tape:
        loss = loss_fn(target, model(features, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


for epoch in range(3):
    for features, target in dataset:
        loss = train_step(features, target)
    print(f"epoch {epoch} loss {float(loss):.4f}")
