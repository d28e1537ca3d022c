"""keras-io's guide to a training loop from scratch, as it is written: an eager loop
(GradientTape, Keras 3's ``optimizer.apply(grads, weights)``, no tf.function) for some
epochs, then the same training as a tf.function on a fresh model. The eager loop is
most of the run: its steps must be counted as training (Keras 3's apply_gradients calls
``apply``, which the loop calls itself), where they were left out as an evaluation and
the report described only the fast tf.function loop (0.4 ms, "27% in next()")."""
# expect: launch.eager-ops high
# expect: env.no-gpu high
# expect: tensorcore.unused low
# maybe: input.iterator-end-wait medium|high -- a new tf.data iterator each epoch: TF's race at its end, lost mostly on a loaded host
# maybe: input.iterator-end-wait medium|high -- the same, for its second loop (one finding a loop)

import keras
import numpy as np
import tensorflow as tf

x = np.random.default_rng(0).random((4096, 32), dtype=np.float32)
y = np.random.default_rng(1).integers(0, 10, 4096)
ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(64)
model = keras.Sequential(
    [keras.Input((32,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(10)]
)
optimizer = keras.optimizers.Adam(1e-3)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
for epoch in range(4):
    for step, (xb, yb) in enumerate(ds):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        grads = tape.gradient(loss, model.trainable_weights)
        optimizer.apply(grads, model.trainable_weights)
print("loss", float(loss))

model2 = keras.Sequential(
    [keras.Input((32,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(10)]
)
optimizer2 = keras.optimizers.Adam(1e-3)


@tf.function
def train_step(xb, yb):
    with tf.GradientTape() as tape:
        loss = loss_fn(yb, model2(xb, training=True))
    grads = tape.gradient(loss, model2.trainable_weights)
    optimizer2.apply(grads, model2.trainable_weights)
    return loss


for epoch in range(2):
    for xb, yb in ds:
        loss = train_step(xb, yb)
print("loss2", float(loss))
