"""Control: a Keras fit of a small CNN on in-memory images through a shuffled, prefetched
tf.data pipeline, with validation and a learning-rate schedule. Nothing in it should be a
finding beyond what the machine is (no GPU) and what a GPU would do with float32."""
# expect: env.no-gpu high
# expect: tensorcore.unused low
# maybe: input.iterator-end-wait medium|high -- a new tf.data iterator each epoch: TF's race at its end, lost mostly on a loaded host

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
x = rng.random((2560, 32, 32, 3), dtype=np.float32)
y = rng.integers(0, 10, size=2560)
train = tf.data.Dataset.from_tensor_slices((x[:2048], y[:2048])).shuffle(2048).batch(64)
train = train.prefetch(tf.data.AUTOTUNE)
val = tf.data.Dataset.from_tensor_slices((x[2048:], y[2048:])).batch(256).prefetch(2)
model = tf.keras.Sequential(
    [
        tf.keras.Input((32, 32, 3)),
        tf.keras.layers.Conv2D(32, 3, activation="relu"),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Conv2D(64, 3, activation="relu"),
        tf.keras.layers.GlobalAveragePooling2D(),
        tf.keras.layers.Dense(10),
    ]
)
schedule = tf.keras.optimizers.schedules.ExponentialDecay(0.01, 100, 0.9)
model.compile(
    optimizer=tf.keras.optimizers.Adam(schedule),
    loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=["accuracy"],
)
model.fit(train, validation_data=val, epochs=4, verbose=2)
