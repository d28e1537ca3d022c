"""Keras fit with compile(run_eagerly=True) left from debugging: every step runs op by op."""

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
x = rng.normal(size=(4096, 32)).astype("float32")
y = (x.sum(axis=1) > 0).astype("float32")
model = tf.keras.Sequential(
    [
        tf.keras.Input((32,)),
        tf.keras.layers.Dense(64, activation="relu"),
        tf.keras.layers.Dense(1, activation="sigmoid"),
    ]
)
model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"], run_eagerly=True)
model.fit(x, y, batch_size=64, epochs=3, verbose=2)
