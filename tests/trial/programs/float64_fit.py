"""A Keras model made float64 by set_floatx: every matmul in double precision."""

import numpy as np
import tensorflow as tf

tf.keras.backend.set_floatx("float64")
x = np.random.default_rng(0).random((4096, 256))
y = x.sum(axis=1, keepdims=True)
model = tf.keras.Sequential(
    [
        tf.keras.Input((256,)),
        tf.keras.layers.Dense(512, activation="relu"),
        tf.keras.layers.Dense(512, activation="relu"),
        tf.keras.layers.Dense(1),
    ]
)
model.compile(optimizer="adam", loss="mse")
model.fit(x, y, batch_size=64, epochs=2, verbose=2)
