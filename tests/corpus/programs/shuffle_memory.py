"""A shuffle buffer sized in elements of full-size decoded images: 200,000 x 512x512x3
float32 would hold 600 GiB, far beyond this host's memory, though the run itself only
reads a few batches."""
# expect: env.no-gpu high
# expect: input.shuffle-memory high
# expect: tensorcore.unused low

import tensorflow as tf

paths = tf.data.Dataset.range(512)


def decode(index):
    image = tf.random.stateless_uniform((512, 512, 3), seed=tf.stack([index, index]))
    return image, index % 10


dataset = (
    paths.map(decode, num_parallel_calls=tf.data.AUTOTUNE)
    .shuffle(200_000)
    .batch(8)
    .take(8)
    .prefetch(2)
)
model = tf.keras.Sequential(
    [
        tf.keras.Input((512, 512, 3)),
        tf.keras.layers.Conv2D(4, 8, strides=8),
        tf.keras.layers.GlobalAveragePooling2D(),
        tf.keras.layers.Dense(10),
    ]
)
model.compile(
    optimizer="sgd",
    loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
)
model.fit(dataset, epochs=1, verbose=2)
