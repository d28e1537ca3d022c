"""Keras fit on a small MLP; prints the median step time (own callback, no gpuwhy)."""

import os
import statistics
import time

import numpy as np
import tensorflow as tf


class StepTimer(tf.keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.times, self.last = [], None

    def on_train_batch_begin(self, batch, logs=None):
        now = time.perf_counter()
        if self.last is not None:
            self.times.append(now - self.last)
        self.last = now

    def on_epoch_end(self, epoch, logs=None):
        self.last = None


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
model.compile(
    optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
)
timer = StepTimer()
model.fit(ds, epochs=int(os.environ.get("WORKLOAD_EPOCHS", "3")), verbose=0, callbacks=[timer])
print(f"MEDIAN_STEP_S {statistics.median(timer.times[20:]):.9f}")
