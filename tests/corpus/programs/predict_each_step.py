"""A GAN trained with train_on_batch in a loop of its own, its fake images made by
generator.predict() on one batch at every iteration (as the Keras book's DCGAN does):
the loop's steps are found though each one holds a Keras predict loop, and the predict
is named at its line, with its one-batch form."""
# expect: env.no-gpu high
# expect: steps.keras-call-per-step high
# expect: placement.float64 low
# expect: tensorcore.unused low

import numpy as np
import tensorflow as tf

keras = tf.keras
LATENT, SIDE, BATCH = 16, 16, 16

generator = keras.Sequential(
    [
        keras.Input((LATENT,)),
        keras.layers.Dense(8 * 8 * 8, activation="relu"),
        keras.layers.Reshape((8, 8, 8)),
        keras.layers.Conv2DTranspose(8, 3, strides=2, padding="same", activation="relu"),
        keras.layers.Conv2D(1, 3, padding="same", activation="tanh"),
    ]
)
discriminator = keras.Sequential(
    [
        keras.Input((SIDE, SIDE, 1)),
        keras.layers.Conv2D(8, 3, strides=2),
        keras.layers.LeakyReLU(),
        keras.layers.Flatten(),
        keras.layers.Dense(1, activation="sigmoid"),
    ]
)
discriminator.compile(optimizer=keras.optimizers.RMSprop(8e-4), loss="binary_crossentropy")
discriminator.trainable = False
z_in = keras.Input((LATENT,))
gan = keras.Model(z_in, discriminator(generator(z_in)))
gan.compile(optimizer=keras.optimizers.RMSprop(4e-4), loss="binary_crossentropy")

rng = np.random.default_rng(0)
real = rng.random((512, SIDE, SIDE, 1)).astype("float32")
start = 0
for step in range(90):
    z = rng.normal(size=(BATCH, LATENT))
    fake = generator.predict(z, verbose=0)
    batch = np.concatenate([fake, real[start : start + BATCH]])
    labels = np.concatenate([np.ones((BATCH, 1)), np.zeros((BATCH, 1))])
    d_loss = discriminator.train_on_batch(batch, labels)
    a_loss = gan.train_on_batch(rng.normal(size=(BATCH, LATENT)), np.zeros((BATCH, 1)))
    start = (start + BATCH) % (len(real) - BATCH)
    if step % 30 == 0:
        print(f"step {step}: d {float(d_loss):.3f} a {float(a_loss):.3f}")
