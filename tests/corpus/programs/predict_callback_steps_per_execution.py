"""A Keras fit with steps_per_execution=8 and a callback that predicts on a probe batch at
each batch's end (as the callbacks guide writes one): Keras calls the callback once a
call of its step function, so the predict() is one a step of 8 batches, most of the
loop's time. Read as one every 8 steps it went to steps.periodic-stall, at a third of
its cost, with a fix that named an x the callback has not."""
# expect: env.no-gpu high
# expect: steps.keras-call-per-step high
# expect: tensorcore.unused low
# maybe: input.iterator-end-wait medium|high -- a new tf.data iterator each epoch: TF's race at its end, lost mostly on a loaded host

import numpy as np
from tensorflow import keras

rng = np.random.default_rng(0)
x_train = rng.random((6144, 32), dtype=np.float32)
y_train = rng.random((6144, 1), dtype=np.float32)
x_probe = rng.random((16, 32), dtype=np.float32)

model = keras.Sequential(
    [keras.Input((32,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(1)]
)
model.compile(optimizer="adam", loss="mse", steps_per_execution=8)


class ProbePredictions(keras.callbacks.Callback):
    def __init__(self, probe):
        super().__init__()
        self.probe = probe
        self.means = []

    def on_train_batch_end(self, batch, logs=None):
        preds = self.model.predict(self.probe, verbose=0)
        self.means.append(float(preds.mean()))


probe = ProbePredictions(x_probe)
model.fit(x_train, y_train, batch_size=32, epochs=3, verbose=2, callbacks=[probe])
print(f"{len(probe.means)} probes")
