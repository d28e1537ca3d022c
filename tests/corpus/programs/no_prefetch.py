"""A pipeline whose author turned TF's autotuning off: no prefetch is injected, so each
step waits while the sequential map makes its batch, and the map waits for the step."""
# expect: input.bound high
# expect: env.no-gpu high
# expect: input.no-prefetch medium
# expect: tensorcore.unused low
# maybe: input.iterator-end-wait medium|high -- a new tf.data iterator each epoch: TF's race at its end, lost mostly on a loaded host

import numpy as np
import tensorflow as tf

images = np.random.default_rng(0).random((1024, 32, 32, 3), dtype=np.float32)
labels = np.arange(1024) % 10


def preprocess(image, label):
    image = tf.image.resize(image, (64, 64))
    for _ in range(6):
        image = tf.clip_by_value(tf.image.adjust_contrast(image, 1.01), 0.0, 1.0)
    return tf.image.resize(image, (32, 32)), label


options = tf.data.Options()
options.autotune.enabled = False
dataset = tf.data.Dataset.from_tensor_slices((images, labels)).map(preprocess).batch(64)
dataset = dataset.with_options(options)
model = tf.keras.Sequential(
    [
        tf.keras.Input((32, 32, 3)),
        tf.keras.layers.Conv2D(16, 3, activation="relu"),
        tf.keras.layers.GlobalAveragePooling2D(),
        tf.keras.layers.Dense(10),
    ]
)
optimizer = tf.keras.optimizers.SGD()
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


for epoch in range(2):
    for x, y in dataset:
        loss = train_step(x, y)
    print(f"epoch {epoch} loss {float(loss):.4f}")
