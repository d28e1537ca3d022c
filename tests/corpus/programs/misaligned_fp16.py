"""Mixed precision with layer sizes that are not multiples of 8 (a 1000-way head over 250
features): the float16 matmuls cannot use tensor cores fully on a GPU."""
# expect: env.no-gpu high
# expect: tensorcore.misaligned low
# maybe: input.iterator-end-wait medium|high -- a new tf.data iterator each epoch: TF's race at its end, lost mostly on a loaded host

import numpy as np
import tensorflow as tf

tf.keras.mixed_precision.set_global_policy("mixed_float16")
x = np.random.default_rng(0).random((2048, 250), dtype=np.float32)
y = np.arange(2048) % 1000
model = tf.keras.Sequential(
    [
        tf.keras.Input((250,)),
        tf.keras.layers.Dense(1001, activation="relu"),
        tf.keras.layers.Dense(1000),
        tf.keras.layers.Activation("linear", dtype="float32"),
    ]
)
model.compile(
    optimizer="adam",
    loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    jit_compile=False,
)
model.fit(x, y, batch_size=100, epochs=2, verbose=2)
