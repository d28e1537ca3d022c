"""A custom tf.function training loop over tf.data; prints the median step time."""

import os
import statistics
import time

import numpy as np
import tensorflow as tf

x = np.random.rand(8192, 64).astype("float32")
y = np.random.randint(0, 10, 8192)
ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(64).prefetch(tf.data.AUTOTUNE)
model = tf.keras.Sequential(
    [
        tf.keras.Input((64,)),
        tf.keras.layers.Dense(256, activation="relu"),
        tf.keras.layers.Dense(256, activation="relu"),
        tf.keras.layers.Dense(10),
    ]
)
opt = tf.keras.optimizers.Adam()
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@tf.function
def train_step(xb, yb):
    with tf.GradientTape() as tape:
        loss = loss_fn(yb, model(xb, training=True))
    opt.apply_gradients(
        zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
    )
    return loss


times = []
for epoch in range(int(os.environ.get("WORKLOAD_EPOCHS", "3"))):
    last = time.perf_counter()
    for xb, yb in ds:
        train_step(xb, yb)
        now = time.perf_counter()
        times.append(now - last)
        last = now
print(f"MEDIAN_STEP_S {statistics.median(times[20:]):.9f}")
