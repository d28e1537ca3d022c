"""A Keras fit over a shuffle whose buffer holds the whole dataset: each epoch's new
iterator refills it (60,000 rows) before its first batch, where the other steps find
their batch ready. The wait is the epochs' first steps, and input.bound says so (at the
shuffle's line), not a stage to parallelise."""
# expect: env.no-gpu high
# expect: tensorcore.unused low
# expect: input.bound high
# maybe: input.iterator-end-wait medium|high -- a new tf.data iterator each epoch: TF's race at its end, lost mostly on a loaded host

import keras
import numpy as np
import tensorflow as tf

x = np.random.default_rng(0).random((60000, 32), dtype=np.float32)
y = np.random.default_rng(1).integers(0, 10, size=(60000,))
ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(60000).batch(1024).prefetch(2)

model = keras.Sequential(
    [keras.Input((32,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(10)]
)
model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(ds, epochs=6, verbose=0)
