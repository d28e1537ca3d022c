"""A JAX profiler capture (xplane.pb) of Keras 3's fit on in-memory NumPy arrays, on a machine
without a GPU: a small CNN at batch 64, one warm-up epoch (the compile) outside the capture,
then one epoch of STEPS steps under jax.profiler.trace, its Python tracer on (JAX's default),
its HLO protos off (they would make most of the file).

``fit`` is called from ``train`` so that the capture holds a frame of this file: the tracer
records only the frames entered after it started (a ``fit`` called at the module's top level
leaves no frame of the script in the capture).

    KERAS_BACKEND=jax python jax_cpu_capture.py OUT_DIR [STEPS]
"""

import os
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax
import keras
import numpy as np


def train(model, x, y):
    model.fit(x, y, batch_size=64, epochs=1, verbose=0)


def main(out: str, steps: int) -> None:
    keras.utils.set_random_seed(0)
    x = np.random.rand(64 * steps, 64, 64, 3).astype("float32")
    y = np.random.randint(0, 10, 64 * steps)
    model = keras.Sequential(
        [
            keras.Input((64, 64, 3)),
            keras.layers.Conv2D(8, 3, strides=4, activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(10),
        ]
    )
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    train(model, x, y)  # compile outside the capture
    options = jax.profiler.ProfileOptions()
    options.enable_hlo_proto = False
    with jax.profiler.trace(out, profiler_options=options):
        start = time.perf_counter()
        train(model, x, y)
        print("fit", round(time.perf_counter() - start, 4), "s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 6)
