"""A Keras fit of a float32 model of wide dense layers: on a GPU with tensor cores, mixed
precision would run its matmuls at 16 bits."""

import numpy as np
import tensorflow as tf

x = np.random.default_rng(0).random((4096, 512), dtype=np.float32)
y = (x.sum(axis=1) > 256).astype(np.int64)
dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(256).prefetch(2)
model = tf.keras.Sequential(
    [
        tf.keras.Input((512,)),
        tf.keras.layers.Dense(1024, activation="relu"),
        tf.keras.layers.Dense(1024, activation="relu"),
        tf.keras.layers.Dense(2, dtype="float32"),
    ]
)
model.compile(
    optimizer="adam",
    loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
)
model.fit(dataset, epochs=2, verbose=2)
