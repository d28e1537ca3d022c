"""A variational autoencoder's custom loop in the style of TF's tutorial: training and test
sets each from a Python generator of arrays in memory, a test loop after each epoch and
one sample batch taken with take(1) before training. The training generator is the one
the steps wait on: it leads; the test loop's generator is beside the steps (low), not
ranked over it by its own loop's wait."""
# expect: env.no-gpu high
# expect: input.python-function medium|high -- the steps' wait on the generator is near the high line (20 %): the host's load decides
# expect: input.bound low|medium|high -- the same wait near the line (20 %), most of it each epoch's new iterator refilling the shuffle
# maybe: input.python-function low -- the test generator's timers are read while its short pass runs, or not: then it has no finding
# expect: tensorcore.unused low
# maybe: input.iterator-end-wait medium|high -- a new tf.data iterator each epoch: TF's race at its end, lost mostly on a loaded host

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
train_images = (rng.random((2400, 28, 28, 1)) > 0.5).astype("float32")
test_images = (rng.random((480, 28, 28, 1)) > 0.5).astype("float32")


def train_gen():
    for image in train_images:  # noqa: UP028 (as the tutorial writes it)
        yield image


def test_gen():
    for image in test_images:  # noqa: UP028 (as the tutorial writes it)
        yield image


spec = tf.TensorSpec(shape=(28, 28, 1), dtype=tf.float32)
train_dataset = (
    tf.data.Dataset.from_generator(train_gen, output_signature=spec).shuffle(600).batch(32)
)
test_dataset = (
    tf.data.Dataset.from_generator(test_gen, output_signature=spec).shuffle(480).batch(32)
)

encoder = tf.keras.Sequential(
    [
        tf.keras.Input((28, 28, 1)),
        tf.keras.layers.Conv2D(8, 3, strides=2, activation="relu"),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(4),
    ]
)
decoder = tf.keras.Sequential(
    [
        tf.keras.Input((2,)),
        tf.keras.layers.Dense(7 * 7 * 8, activation="relu"),
        tf.keras.layers.Reshape((7, 7, 8)),
        tf.keras.layers.Conv2DTranspose(8, 3, strides=4, padding="same", activation="relu"),
        tf.keras.layers.Conv2DTranspose(1, 3, padding="same"),
    ]
)
optimizer = tf.keras.optimizers.Adam(1e-3)


def compute_loss(x):
    mean, logvar = tf.split(encoder(x), 2, axis=1)
    z = tf.random.normal(tf.shape(mean)) * tf.exp(logvar * 0.5) + mean
    logits = decoder(z)
    cross = tf.nn.sigmoid_cross_entropy_with_logits(logits=logits, labels=x)
    return tf.reduce_mean(tf.reduce_sum(cross, axis=[1, 2, 3]))


@tf.function
def train_step(x):
    with tf.GradientTape() as tape:
        loss = compute_loss(x)
    variables = encoder.trainable_variables + decoder.trainable_variables
    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))


for test_batch in test_dataset.take(1):
    sample = test_batch[:16]

for epoch in range(3):
    for train_x in train_dataset:
        train_step(train_x)
    mean_loss = tf.keras.metrics.Mean()
    for test_x in test_dataset:
        mean_loss(compute_loss(test_x))
    print(f"epoch {epoch}: test loss {float(mean_loss.result()):.2f}")
