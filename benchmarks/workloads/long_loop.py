"""A long run of small steps, as a new user writes it: ``for x in ds: step(x)`` over
tf.data with a ``tf.function`` step of about 1 ms, or Keras ``fit`` on the same model.

LONG_STEPS (default 10000) steps; LONG_MODE ``loop`` (default) or ``fit`` (one epoch of
LONG_STEPS steps). Prints, for benchmarks/bench_long.py:

    END_OF_INPUT_S <seconds the loop's last next() took> (loop only)
    LOOP_S <seconds from the loop's start to its last step's end>
    STEPS <steps run>
    END_WALL <time.time() at the program's last line>
"""

import os
import time

import numpy as np
import tensorflow as tf

steps = int(os.environ.get("LONG_STEPS", "10000"))
mode = os.environ.get("LONG_MODE", "loop")

x = np.random.rand(8192, 32).astype("float32")
y = np.random.randint(0, 10, 8192)
ds = (
    tf.data.Dataset.from_tensor_slices((x, y))
    .batch(32)
    .repeat()
    .take(steps)
    .prefetch(tf.data.AUTOTUNE)
)
model = tf.keras.Sequential(
    [
        tf.keras.Input((32,)),
        tf.keras.layers.Dense(64, activation="relu"),
        tf.keras.layers.Dense(10),
    ]
)
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

if mode == "fit":
    model.compile(optimizer="adam", loss=loss_fn)
    start = time.perf_counter()
    model.fit(ds, epochs=1, steps_per_epoch=steps, verbose=0)
    loop_s = time.perf_counter() - start
else:
    opt = tf.keras.optimizers.Adam()

    @tf.function
    def train_step(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        opt.apply_gradients(
            zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
        )
        return loss

    start = last = time.perf_counter()
    for xb, yb in ds:
        train_step(xb, yb)
        last = time.perf_counter()
    # the final next() can wait seconds on tf.data (the end of a pass shortly after the
    # iterator was made): TF's, under python too, so the loop's time ends at its last step
    print(f"END_OF_INPUT_S {time.perf_counter() - last:.6f}")
    loop_s = last - start

print(f"LOOP_S {loop_s:.6f}")
print(f"STEPS {steps}")
print(f"END_WALL {time.time():.6f}", flush=True)
