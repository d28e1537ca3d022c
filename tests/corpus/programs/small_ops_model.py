"""A compiled step of many tiny element-wise ops (a deep stack of 16-unit layers at batch
8): on a GPU each op is shorter than its launch."""
# corpus-options: --target A100
# maybe: input.bound low|medium|high -- Keras' slicing of in-memory arrays against a step of a millisecond: the host's load decides
# expect: env.no-gpu high
# expect: launch.projected-bound medium
# expect: tensorcore.unused low

import numpy as np
import tensorflow as tf

x = np.random.default_rng(0).random((2048, 16), dtype=np.float32)
y = x.sum(axis=1, keepdims=True)
layers = [tf.keras.Input((16,))]
for _ in range(24):
    layers += [
        tf.keras.layers.Dense(16),
        tf.keras.layers.LayerNormalization(),
        tf.keras.layers.ReLU(),
    ]
model = tf.keras.Sequential([*layers, tf.keras.layers.Dense(1)])
model.compile(optimizer="adam", loss="mse")
model.fit(x, y, batch_size=8, epochs=1, verbose=2)
