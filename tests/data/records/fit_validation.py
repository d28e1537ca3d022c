"""Keras fit over a shuffled, mapped training set with a validation set, 20 short
epochs: a new tf.data iterator for each epoch and each validation (the record of a run
that lost TF's race at their ends, tests/corpus/saved/fit_validation_iterator_end_race)."""

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
x = rng.normal(size=(2048, 16)).astype("float32")
y = (x[:, :1] > 0).astype("float32")
train_ds = (
    tf.data.Dataset.from_tensor_slices((x, y))
    .shuffle(2048, seed=1)
    .map(lambda a, b: (a * 0.5, b), num_parallel_calls=tf.data.AUTOTUNE)
    .batch(64)
    .prefetch(tf.data.AUTOTUNE)
)
val_ds = (
    tf.data.Dataset.from_tensor_slices((x[:512], y[:512]))
    .map(lambda a, b: (a * 0.5, b), num_parallel_calls=tf.data.AUTOTUNE)
    .batch(64)
    .prefetch(tf.data.AUTOTUNE)
)
model = tf.keras.Sequential(
    [tf.keras.Input((16,)), tf.keras.layers.Dense(32, activation="relu"), tf.keras.layers.Dense(1)]
)
model.compile(optimizer="adam", loss="mse")
model.fit(train_ds, epochs=20, validation_data=val_ds, verbose=0)
print("done")
