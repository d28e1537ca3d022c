"""A model built in float64 (a NumPy float64 array fed to a Keras model whose layers were
set to float64): every matmul of the step runs in double precision."""
# expect: env.no-gpu high
# expect: placement.float64 high
# maybe: input.bound low|medium -- Keras' slicing of in-memory arrays against a step of a millisecond: the host's load decides
# maybe: input.iterator-end-wait medium|high -- a new tf.data iterator each epoch: TF's race at its end, lost mostly on a loaded host

import numpy as np
import tensorflow as tf

tf.keras.backend.set_floatx("float64")
x = np.random.default_rng(0).random((2048, 64))  # float64, NumPy's default
y = x.sum(axis=1, keepdims=True)
model = tf.keras.Sequential(
    [tf.keras.Input((64,)), tf.keras.layers.Dense(128, activation="relu"), tf.keras.layers.Dense(1)]
)
model.compile(optimizer="adam", loss="mse")
model.fit(x, y, batch_size=64, epochs=3, verbose=2)
