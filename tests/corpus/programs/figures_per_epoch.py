"""A GradientTape loop that saves a grid of generated images every epoch, as TF's DCGAN
tutorial does (plt.figure, plt.savefig, plt.show, never plt.close): pyplot keeps every
figure it made, so the program's memory grows a figure an epoch. host.memory-growth must
name the figures and the line that made them, with plt.close as its fix, where it said
"something keeps what each step makes" with a fix about a list of losses."""
# expect: env.no-gpu high
# expect: host.memory-growth medium|high -- 2-3 MiB a figure; high where the host would fill within a day
# expect: tensorcore.unused low
# maybe: input.bound low|medium -- each epoch's new iterator and the Python call of next(), 5-8% of a 6 ms step: the host's load decides
# maybe: input.iterator-end-wait medium|high -- a new tf.data iterator each epoch: TF's race at its end, lost mostly on a loaded host

import os
import tempfile

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import tensorflow as tf

out = tempfile.mkdtemp()
images = np.random.default_rng(0).random((1024, 28, 28, 1), dtype=np.float32)
dataset = tf.data.Dataset.from_tensor_slices(images).batch(64)
generator = tf.keras.Sequential(
    [
        tf.keras.Input((16,)),
        tf.keras.layers.Dense(1024, activation="relu"),
        tf.keras.layers.Dense(1024, activation="relu"),
        tf.keras.layers.Dense(28 * 28),
        tf.keras.layers.Reshape((28, 28, 1)),
    ]
)
optimizer = tf.keras.optimizers.Adam(1e-3)
seed = tf.random.normal([16, 16], seed=1)


@tf.function
def train_step(batch):
    noise = tf.random.normal([tf.shape(batch)[0], 16])
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((generator(noise, training=True) - batch) ** 2)
    grads = tape.gradient(loss, generator.trainable_variables)
    optimizer.apply_gradients(zip(grads, generator.trainable_variables))
    return loss


def generate_and_save_images(model, epoch, test_input):
    predictions = model(test_input, training=False).numpy()
    grid = predictions[:, :, :, 0].reshape(4, 4, 28, 28).transpose(0, 2, 1, 3).reshape(112, 112)
    fig = plt.figure(figsize=(8, 8))
    plt.imshow(grid * 127.5 + 127.5, cmap="gray")
    plt.axis("off")
    plt.savefig(os.path.join(out, f"image_at_epoch_{epoch:04d}.png"))
    plt.show()


for epoch in range(80):
    for batch in dataset:
        loss = train_step(batch)
    generate_and_save_images(generator, epoch + 1, seed)
print("loss", float(loss))
