"""Keras fit fed by a keras.utils.Sequence whose batches take a few milliseconds of
waiting each (a file read and decode stand-in that releases the GIL): Keras reads it
one batch at a time on the training thread unless the dataset asks for workers."""

import math
import time

import numpy as np
import tensorflow as tf


class Batches(tf.keras.utils.Sequence):
    def __init__(self, x, y, batch_size):
        self.x, self.y, self.batch_size = x, y, batch_size

    def __len__(self):
        return math.ceil(len(self.x) / self.batch_size)

    def __getitem__(self, idx):
        time.sleep(0.004)  # stands for reading and decoding images from disk
        lo = idx * self.batch_size
        return self.x[lo : lo + self.batch_size], self.y[lo : lo + self.batch_size]


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
model.compile("adam", "binary_crossentropy")
model.fit(Batches(x, y, 32), epochs=3, verbose=2)
