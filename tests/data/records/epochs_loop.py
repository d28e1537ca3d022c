"""A custom training loop that reads its dataset afresh each epoch (for x, y in
train_ds), the dataset shuffled, mapped in parallel and prefetched, as the guides write
it: a new tf.data iterator per epoch, freed at each epoch's end. Its record
(epochs_loop_race.gpuwhy.json) is a run that lost TF's race at those ends: made under
two CPU-bound processes beside it, where most ends lose it (docs/speed.md)."""

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
features = rng.normal(size=(4096, 32)).astype("float32")
labels = (features[:, :1] > 0).astype("float32")


def scale(x, y):
    return x * 0.5 + 0.1, y


train_ds = (
    tf.data.Dataset.from_tensor_slices((features, labels))
    .shuffle(4096, seed=1)
    .map(scale, num_parallel_calls=tf.data.AUTOTUNE)
    .batch(32)
    .prefetch(tf.data.AUTOTUNE)
)
model = tf.keras.Sequential(
    [tf.keras.layers.Dense(64, activation="relu"), tf.keras.layers.Dense(1)]
)
loss_fn = tf.keras.losses.BinaryCrossentropy(from_logits=True)
optimizer = tf.keras.optimizers.Adam(1e-3)


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    optimizer.apply_gradients(
        zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
    )
    return loss


for epoch in range(12):
    total = 0.0
    for x, y in train_ds:
        total += float(train_step(x, y))
    print(f"epoch {epoch} loss {total / 128:.4f}")
