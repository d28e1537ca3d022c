"""Keras fit over a keras.utils.PyDataset given worker threads (the fix gpuwhy itself
proposes for a slow __getitem__), whose batches still come slower than the step (each
reads its files for ~12 ms, stood in for by a sleep; two workers). Keras turns tf.data's
autotune off for such a dataset (its enqueuer reads ahead), so TF keeps no gap timer:
the wait must still be measured (around the generator's calls), named by the class's
__getitem__, with more workers at the line that made it; the enqueuer reads ahead, so
no missing prefetch, and the steps that wait every other step are the input's, not a
periodic stall of the program's own."""
# expect: env.no-gpu high
# expect: input.bound high
# expect: input.python-function high
# expect: tensorcore.unused low
# maybe: input.iterator-end-wait medium|high -- a new tf.data iterator each epoch: TF's race at its end, lost mostly on a loaded host

import math
import time

import numpy as np
import tensorflow as tf


class Batches(tf.keras.utils.PyDataset):
    def __init__(self, count, batch, **kwargs):
        super().__init__(**kwargs)
        self.count, self.batch = count, batch
        self.x = np.random.default_rng(0).normal(size=(count, 32)).astype("float32")

    def __len__(self):
        return math.ceil(self.count / self.batch)

    def __getitem__(self, index):
        time.sleep(0.012)  # reading and decoding the batch's files
        x = self.x[index * self.batch : (index + 1) * self.batch]
        return x, (x.sum(axis=1) > 0).astype("float32")


data = Batches(2048, 32, workers=2)
model = tf.keras.Sequential(
    [tf.keras.Input((32,)), tf.keras.layers.Dense(64, activation="relu"), tf.keras.layers.Dense(1)]
)
model.compile(optimizer="adam", loss=tf.keras.losses.BinaryCrossentropy(from_logits=True))
model.fit(data, epochs=2, verbose=0)
