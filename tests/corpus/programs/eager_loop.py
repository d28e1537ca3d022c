"""A custom training loop written eagerly: GradientTape with no tf.function, so every op of
every step is dispatched from Python one at a time."""
# expect: launch.eager-ops high
# expect: env.no-gpu high
# maybe: input.bound low|medium -- the Python call per step against a step of a millisecond: the host's load decides
# maybe: input.iterator-end-wait medium|high -- a new tf.data iterator each epoch: TF's race at its end, lost mostly on a loaded host

import numpy as np
import tensorflow as tf

tf.random.set_seed(0)
x = np.random.default_rng(0).random((2048, 20), dtype=np.float32)
y = (x.sum(axis=1) > 10).astype(np.int64)
dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(32).prefetch(2)

model = tf.keras.Sequential(
    [tf.keras.Input((20,)), tf.keras.layers.Dense(32, activation="relu"), tf.keras.layers.Dense(2)]
)
optimizer = tf.keras.optimizers.SGD(0.1)
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def train_step(images, labels):
    with tf.GradientTape() as tape:
        loss = loss_fn(labels, model(images, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


for epoch in range(3):
    for images, labels in dataset:
        loss = train_step(images, labels)
    print(f"epoch {epoch} loss {float(loss):.4f}")
