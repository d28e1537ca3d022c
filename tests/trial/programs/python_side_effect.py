"""An eager step whose learning rate decays through a Python counter it increments:
traced as a tf.function the increment runs once, at tracing, and the rate never decays
(what the step computes changes)."""

import numpy as np
import tensorflow as tf

x = np.random.default_rng(0).random((2048, 20), dtype=np.float32)
y = (x.sum(axis=1) > 10).astype(np.int64)
dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(32).prefetch(2)
model = tf.keras.Sequential(
    [tf.keras.Input((20,)), tf.keras.layers.Dense(32, activation="relu"), tf.keras.layers.Dense(2)]
)
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
calls = [0]


def train_step(images, labels):
    calls[0] += 1
    rate = 0.5 / calls[0]
    with tf.GradientTape() as tape:
        loss = loss_fn(labels, model(images, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    for variable, grad in zip(model.trainable_variables, grads):
        variable.assign_sub(rate * grad)
    return loss


for epoch in range(3):
    for images, labels in dataset:
        loss = train_step(images, labels)
    print(f"epoch {epoch} loss {float(loss):.4f}")
