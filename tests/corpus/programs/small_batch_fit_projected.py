"""A small Dense model fit on NumPy arrays at batch 16: each batch is one call of
Keras' step, whose host-side cost (fit's loop and callbacks, the call's set-up, measured
here) outlasts the few microseconds of GPU work it would launch on an A100: the GPU would
mostly wait for its host. steps_per_execution pays that cost once for many batches."""

# corpus-options: --target A100
# maybe: input.bound low|medium|high -- Keras slicing the arrays against a step of a millisecond: the host's load decides
# expect: launch.projected-bound medium
# expect: env.no-gpu high
# expect: tensorcore.unused low
# maybe: input.iterator-end-wait medium|high -- a new tf.data iterator each epoch: TF's race at its end, lost mostly on a loaded host
import keras
import numpy as np

rng = np.random.default_rng(42)
x = rng.random((6000, 32))
y = (x @ rng.random((32, 1)) > 8).astype("float32")

model = keras.Sequential(
    [
        keras.Input((32,)),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(32, activation="relu"),
        keras.layers.Dense(1, activation="sigmoid"),
    ]
)
model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
model.fit(x, y, batch_size=16, epochs=3, verbose=0)
