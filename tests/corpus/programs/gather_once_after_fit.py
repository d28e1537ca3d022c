"""Fit reads a cached decode pipeline; after it, the program gathers its test set once
into a list from an uncached decode (``[x.numpy() for x, _ in test_ds]``, as the audio
tutorial collects its test set). The gather is a pass beside the steps, a sliver of the
run: not the steps' input wait, and no gain on them (input.bound said HIGH "waits for
input 67% of the time" of it, compression.cpu-codec MEDIUM "steps wait for input 67%")."""
# expect: env.no-gpu high
# expect: tensorcore.unused low
# expect: compression.cpu-codec low -- the gather's decode, beside the steps: a sliver of the run, no gain on them
# maybe: input.iterator-end-wait medium|high -- a new tf.data iterator each epoch: TF's race at its end, lost mostly on a loaded host

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
images = rng.integers(0, 255, (800, 48, 48, 3), dtype=np.uint8)
encoded = [tf.io.encode_png(image).numpy() for image in images]
labels = rng.integers(0, 8, 800)


def load(png, label):
    image = tf.io.decode_png(png, channels=3)
    return tf.cast(image, tf.float32) / 255.0, label


train_ds = (
    tf.data.Dataset.from_tensor_slices((encoded[:640], labels[:640]))
    .map(load, num_parallel_calls=tf.data.AUTOTUNE)
    .batch(32)
    .cache()
    .prefetch(tf.data.AUTOTUNE)
)
test_ds = tf.data.Dataset.from_tensor_slices((encoded[640:], labels[640:])).map(
    load, num_parallel_calls=tf.data.AUTOTUNE
)

model = tf.keras.Sequential(
    [
        tf.keras.Input((48, 48, 3)),
        tf.keras.layers.Conv2D(16, 3, activation="relu"),
        tf.keras.layers.GlobalAveragePooling2D(),
        tf.keras.layers.Dense(8),
    ]
)
model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(train_ds, epochs=4, verbose=2)
test_x = np.array([x.numpy() for x, _ in test_ds])
print(test_x.shape)
