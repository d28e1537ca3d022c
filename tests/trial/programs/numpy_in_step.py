"""An eager step that reads the loss's value with .numpy(): traced as a tf.function it
fails (a symbolic tensor has no value), so that fix does not run."""

import numpy as np
import tensorflow as tf

x = np.random.default_rng(0).random((2048, 20), dtype=np.float32)
y = (x.sum(axis=1) > 10).astype(np.int64)
dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(32).prefetch(2)
model = tf.keras.Sequential(
    [tf.keras.Input((20,)), tf.keras.layers.Dense(32, activation="relu"), tf.keras.layers.Dense(2)]
)
optimizer = tf.keras.optimizers.SGD(0.1)
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
history = []


def train_step(images, labels):
    with tf.GradientTape() as tape:
        loss = loss_fn(labels, model(images, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    history.append(loss.numpy())
    return loss


for epoch in range(3):
    for images, labels in dataset:
        train_step(images, labels)
    print(f"epoch {epoch} loss {history[-1]:.4f}")
