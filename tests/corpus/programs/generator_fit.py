"""Keras fit on a plain Python generator that takes ~20 ms a batch (a file read and a
decode, stood in for by a sleep): Keras wraps it in its own tf.data generator, so the
slow stage must be named by the program's generator (`batches`), never by Keras'
wrapper, and the fix must not ask for a class the program does not have."""
# expect: env.no-gpu high
# expect: input.bound high
# expect: input.python-function high
# expect: tensorcore.unused low

import time

import numpy as np
import tensorflow as tf


def batches(batch=32):
    rng = np.random.default_rng(0)
    while True:
        x = rng.normal(size=(batch, 64)).astype("float32")
        time.sleep(0.02)  # reading and decoding the batch's files
        yield x, (x.sum(axis=1) > 0).astype("float32")


model = tf.keras.Sequential(
    [tf.keras.Input((64,)), tf.keras.layers.Dense(64, activation="relu"), tf.keras.layers.Dense(1)]
)
model.compile(optimizer="adam", loss=tf.keras.losses.BinaryCrossentropy(from_logits=True))
model.fit(batches(), steps_per_epoch=40, epochs=3, verbose=0)
