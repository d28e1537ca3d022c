"""A small dataset whose deterministic preprocessing (an expensive, stateless map) is run
again every epoch: it would fit in memory with .cache()."""
# expect: input.bound high
# expect: env.no-gpu high
# expect: input.no-cache medium
# expect: tensorcore.unused low
# maybe: input.iterator-end-wait medium|high -- a new tf.data iterator each epoch: TF's race at its end, lost mostly on a loaded host

import numpy as np
import tensorflow as tf

images = np.random.default_rng(0).random((1024, 32, 32, 3), dtype=np.float32)
labels = np.arange(1024) % 10


def preprocess(image, label):
    image = tf.image.resize(image, (64, 64))
    for _ in range(6):
        image = tf.image.adjust_contrast(tf.image.adjust_gamma(image, 1.01), 1.01)
    return tf.image.resize(image, (32, 32)), label


dataset = (
    tf.data.Dataset.from_tensor_slices((images, labels))
    .map(preprocess, num_parallel_calls=tf.data.AUTOTUNE)
    .batch(64)
    .prefetch(tf.data.AUTOTUNE)
)
model = tf.keras.Sequential(
    [tf.keras.Input((32, 32, 3)), tf.keras.layers.Flatten(), tf.keras.layers.Dense(10)]
)
model.compile(
    optimizer="sgd",
    loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
)
model.fit(dataset, epochs=4, verbose=2)
