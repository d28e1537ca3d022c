"""A GAN's custom loop, beside two sample-image loops run each epoch (eager model calls and
image ops, as plotting code does): the steps are the train loop's, the samples' eager ops
are not charged to it."""
# expect: env.no-gpu high
# maybe: input.bound low|medium -- the Python call per step against a step of a few milliseconds: the host's load decides
# expect: tensorcore.unused low
# maybe: input.iterator-end-wait medium|high -- a new tf.data iterator each epoch: TF's race at its end, lost mostly on a loaded host

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
images = rng.random((512, 28, 28, 1), dtype=np.float32)
train_ds = tf.data.Dataset.from_tensor_slices(images).shuffle(512).batch(32)
test_ds = tf.data.Dataset.from_tensor_slices(images[:64]).batch(4)
NOISE = 32

generator = tf.keras.Sequential(
    [
        tf.keras.Input((NOISE,)),
        tf.keras.layers.Dense(7 * 7 * 32, activation="relu"),
        tf.keras.layers.Reshape((7, 7, 32)),
        tf.keras.layers.Conv2DTranspose(16, 3, strides=2, padding="same", activation="relu"),
        tf.keras.layers.Conv2DTranspose(1, 3, strides=2, padding="same", activation="tanh"),
    ]
)
discriminator = tf.keras.Sequential(
    [
        tf.keras.Input((28, 28, 1)),
        tf.keras.layers.Conv2D(16, 3, strides=2, padding="same", activation="relu"),
        tf.keras.layers.Conv2D(32, 3, strides=2, padding="same", activation="relu"),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(1),
    ]
)
bce = tf.keras.losses.BinaryCrossentropy(from_logits=True)
g_opt = tf.keras.optimizers.Adam(1e-4)
d_opt = tf.keras.optimizers.Adam(1e-4)
seed = tf.random.normal([16, NOISE])


@tf.function
def train_step(real):
    noise = tf.random.normal([tf.shape(real)[0], NOISE])
    with tf.GradientTape() as gt, tf.GradientTape() as dt:
        fake = generator(noise, training=True)
        r, f = discriminator(real, training=True), discriminator(fake, training=True)
        g_loss = bce(tf.ones_like(f), f)
        d_loss = bce(tf.ones_like(r), r) + bce(tf.zeros_like(f), f)
    g_opt.apply_gradients(
        zip(gt.gradient(g_loss, generator.trainable_variables), generator.trainable_variables)
    )
    d_opt.apply_gradients(
        zip(
            dt.gradient(d_loss, discriminator.trainable_variables),
            discriminator.trainable_variables,
        )
    )
    return g_loss, d_loss


def generate_and_save_images(model, epoch, test_input):
    predictions = model(test_input, training=False)
    for i in range(predictions.shape[0]):  # as plt.subplot + plt.imshow would
        img = predictions[i, :, :, 0] * 127.5 + 127.5
        img = tf.image.resize(img[..., None], (56, 56))
        img = tf.clip_by_value(tf.image.flip_left_right(tf.image.rot90(img)), 0.0, 255.0)
        img = tf.cast(tf.round(img), tf.uint8)
        _ = np.asarray(img.numpy(), dtype="uint8")


def show_samples(model, inp):
    pred = model(tf.random.normal([tf.shape(inp)[0], NOISE]), training=False)
    for i in range(3):
        _ = tf.concat([inp[i], pred[i]], axis=1).numpy()


for epoch in range(15):
    for batch in train_ds:
        train_step(batch)
    for inp in test_ds.take(3):
        show_samples(generator, inp)
    generate_and_save_images(generator, epoch + 1, seed)
    for i, inp in enumerate(test_ds.take(2)):
        generate_and_save_images(generator, epoch + 1, seed)
