"""A short training run for CI: a small Keras model on synthetic data, a few seconds on
a CPU runner. Replace it with your own script cut down to a few hundred steps (fewer
epochs, a slice of the data, no checkpoints): the gate compares its step time and its
findings with the baseline record, examples/ci/gpuwhy_gate.sh runs it."""

import numpy as np
import tensorflow as tf

STEPS = 200
BATCH = 256

rng = np.random.default_rng(0)
x = rng.normal(size=(STEPS * BATCH, 64)).astype("float32")
y = (x[:, :4].sum(axis=1) > 0).astype("int32")

dataset = (
    tf.data.Dataset.from_tensor_slices((x, y))
    .shuffle(4096, seed=0)
    .batch(BATCH)
    .prefetch(tf.data.AUTOTUNE)
)

model = tf.keras.Sequential(
    [
        tf.keras.Input(shape=(64,)),
        tf.keras.layers.Dense(512, activation="relu"),
        tf.keras.layers.Dense(512, activation="relu"),
        tf.keras.layers.Dense(2),
    ]
)
model.compile(
    optimizer="adam",
    loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=["accuracy"],
)
model.fit(dataset, epochs=1, verbose=0)
