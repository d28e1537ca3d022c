"""A small autoencoder fit on arrays, then its decoder asked for one point of a latent
grid at a time with decoder.predict(z) (as keras-io's VAE draws its latent space): the
calls run after training, outside every step, one batch each; they are found at their
line, with the one-batch form."""
# expect: env.no-gpu high
# expect: steps.keras-call-per-step medium|high -- the calls' share of the run follows the host's load
# expect: tensorcore.unused low
# maybe: input.iterator-end-wait medium|high -- a new tf.data iterator each epoch: TF's race at its end, lost mostly on a loaded host

import numpy as np
from tensorflow import keras

rng = np.random.default_rng(0)
images = rng.random((1024, 64)).astype("float32")

encoder = keras.Sequential(
    [keras.Input((64,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(2)]
)
decoder = keras.Sequential(
    [
        keras.Input((2,)),
        keras.layers.Dense(16, activation="relu"),
        keras.layers.Dense(64, activation="sigmoid"),
    ]
)
autoencoder = keras.Sequential([encoder, decoder])
autoencoder.compile(optimizer="adam", loss="mse")
autoencoder.fit(images, images, epochs=3, batch_size=64, verbose=0)

grid = np.linspace(-1.0, 1.0, 7)
canvas = np.zeros((7 * 8, 7 * 8))
for i, yi in enumerate(grid):
    for j, xi in enumerate(grid):
        z_sample = np.array([[xi, yi]])
        x_decoded = decoder.predict(z_sample, verbose=0)
        canvas[i * 8 : (i + 1) * 8, j * 8 : (j + 1) * 8] = x_decoded[0].reshape(8, 8)
print(f"canvas mean {canvas.mean():.4f}")
