"""A fit with validation_data, then 25 predict() calls on one sample each after it (as a
tutorial shows a few predictions): the calls are the program's own, counted apart from
fit's validation passes (together they read "its 28 predict() calls", and where the
validations took longest the calls were not found), and after the loop, never "every
step" of it."""
# expect: env.no-gpu high
# expect: steps.keras-call-per-step medium|high -- the calls' share of the run (a quarter) follows the host's load
# expect: tensorcore.unused low
# maybe: input.iterator-end-wait medium|high -- a new tf.data iterator each epoch: TF's race at its end, lost mostly on a loaded host

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
x = rng.random((2048, 64), dtype=np.float32)
y = (x.sum(1) > 32).astype("float32")
model = tf.keras.Sequential(
    [
        tf.keras.Input((64,)),
        tf.keras.layers.Dense(256, activation="relu"),
        tf.keras.layers.Dense(1, activation="sigmoid"),
    ]
)
model.compile("adam", "binary_crossentropy")
ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
model.fit(ds, epochs=3, verbose=2, validation_data=ds.take(4))


def show_predictions(samples):
    return [float(model.predict(tf.expand_dims(s, 0), verbose=0)[0, 0]) for s in samples]


print(len(show_predictions(x[:25])))
