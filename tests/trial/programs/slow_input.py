"""A custom loop fed by a sequential, expensive map with no prefetch: the step waits on
the input."""

import numpy as np
import tensorflow as tf

images = np.random.default_rng(0).random((1536, 32, 32, 3), dtype=np.float32)
labels = np.arange(1536) % 10


def augment(image, label):
    image = tf.image.resize(image, (96, 96))
    for _ in range(6):
        image = tf.image.adjust_gamma(image, 1.01)
    return tf.image.resize(image, (32, 32)), label


dataset = tf.data.Dataset.from_tensor_slices((images, labels)).map(augment).batch(32)
model = tf.keras.Sequential(
    [tf.keras.Input((32, 32, 3)), tf.keras.layers.Flatten(), tf.keras.layers.Dense(10)]
)
optimizer = tf.keras.optimizers.SGD(0.01)
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@tf.function
def train_step(batch, target):
    with tf.GradientTape() as tape:
        loss = loss_fn(target, model(batch, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


for epoch in range(3):
    for batch, target in dataset:
        loss = train_step(batch, target)
    print(f"epoch {epoch} loss {float(loss):.4f}")
