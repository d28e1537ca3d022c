"""A Keras fit whose job script exports TF_FORCE_GPU_ALLOW_GROWTH=1 (TF accepts only the
string "true": the setting is ignored, TF still maps all GPU memory)."""
# corpus-env: TF_FORCE_GPU_ALLOW_GROWTH=1
# expect: env.no-gpu high
# expect: env.allocator-settings low
# expect: tensorcore.unused low
# maybe: input.iterator-end-wait medium|high -- a new tf.data iterator each epoch: TF's race at its end, lost mostly on a loaded host

import numpy as np
import tensorflow as tf

x = np.random.default_rng(0).random((4096, 64), dtype=np.float32)
y = x.sum(axis=1, keepdims=True)
model = tf.keras.Sequential(
    [tf.keras.Input((64,)), tf.keras.layers.Dense(256, activation="relu"), tf.keras.layers.Dense(1)]
)
model.compile(optimizer="adam", loss="mse")
model.fit(x, y, batch_size=128, epochs=3, verbose=2)
