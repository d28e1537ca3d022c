"""A stateful map (random augmentation through a tf.random.Generator) that TF cannot make
parallel on its own, and is the pipeline's slowest stage."""
# expect: input.bound high
# expect: input.sequential-map high
# expect: env.no-gpu high
# expect: tensorcore.unused low
# maybe: input.iterator-end-wait medium|high -- a new tf.data iterator each epoch: TF's race at its end, lost mostly on a loaded host

import numpy as np
import tensorflow as tf

images = np.random.default_rng(0).random((1024, 48, 48, 3), dtype=np.float32)
labels = np.arange(1024) % 10
generator = tf.random.Generator.from_seed(0)


def augment(image, label):
    noise = generator.normal(tf.shape(image), stddev=0.05)
    image = tf.image.resize(image + noise, (96, 96))
    for _ in range(4):
        image = tf.image.adjust_gamma(image, 1.01)
    return tf.image.resize(image, (48, 48)), label


dataset = tf.data.Dataset.from_tensor_slices((images, labels)).map(augment).batch(32).prefetch(2)
model = tf.keras.Sequential(
    [tf.keras.Input((48, 48, 3)), tf.keras.layers.Flatten(), tf.keras.layers.Dense(10)]
)
model.compile(
    optimizer="sgd",
    loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
)
model.fit(dataset, epochs=2, verbose=2)
