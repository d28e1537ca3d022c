"""A healthy pipeline fed by a Python generator: cached after the generator, so only the
first epoch runs the generator (its steps wait for it); the 29 after it read the cache
and keep up. TF cannot know a generator's length: the pass is read from the epochs."""
# expect: env.no-gpu high
# expect: input.bound low -- the first pass fills the cache, the later ones keep up
# expect: input.python-function low -- the generator runs in the first pass only
# expect: tensorcore.unused low
# maybe: input.iterator-end-wait medium|high -- a new tf.data iterator each epoch: TF's race at its end, lost mostly on a loaded host

import numpy as np
import tensorflow as tf

features = np.random.default_rng(1).normal(size=(6144, 32)).astype("float32")
labels = (features[:, :4].sum(axis=1) > 0).astype("float32")


def rows():
    for i in range(len(features)):
        yield features[i], labels[i]


signature = (tf.TensorSpec((32,), tf.float32), tf.TensorSpec((), tf.float32))
dataset = (
    tf.data.Dataset.from_generator(rows, output_signature=signature)
    .cache()
    .batch(128)
    .prefetch(tf.data.AUTOTUNE)
)
model = tf.keras.Sequential(
    [tf.keras.Input((32,)), tf.keras.layers.Dense(64, activation="relu"), tf.keras.layers.Dense(1)]
)
model.compile(optimizer="adam", loss=tf.keras.losses.BinaryCrossentropy(from_logits=True))
model.fit(dataset, epochs=30, verbose=0)
