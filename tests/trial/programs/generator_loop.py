"""A custom training loop over arrays in memory, fed one example at a time by a Python
generator through from_generator: each element crosses from Python under the GIL, where
slicing the arrays in tf.data yields the same elements without Python."""

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
features = rng.normal(size=(4096, 16))  # float64: the signature asks for float32
labels = (features.sum(axis=1) > 0).astype("int32")


def examples():
    for row, label in zip(features, labels):  # noqa: UP028 - as programs write it
        yield row, label


dataset = tf.data.Dataset.from_generator(
    examples,
    output_signature=(tf.TensorSpec((16,), tf.float32), tf.TensorSpec((), tf.int32)),
).batch(32)

tf.keras.utils.set_random_seed(0)
model = tf.keras.Sequential([tf.keras.Input((16,)), tf.keras.layers.Dense(2)])
optimizer = tf.keras.optimizers.SGD(0.1)
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


for epoch in range(4):
    total = 0.0
    for x, y in dataset:
        total += float(train_step(x, y))
    print(f"epoch {epoch}: loss {total / 128:.4f}")
