"""A short custom loop (two epochs of 100 steps, under a second of steps) whose step is a
tf.function but whose Keras metrics are updated eagerly after it, every step: ~31 eager
ops a step, most of the step. The first step traces: a counting window spent on it alone
would count no step whole, and the loop ends before the next."""

# expect: launch.eager-ops high
# maybe: input.bound low|medium -- the next() call's own cost beside a step of a few ms
# expect: env.no-gpu high
# expect: tensorcore.unused low
# maybe: input.iterator-end-wait medium|high -- a new tf.data iterator each epoch: TF's race at its end, lost mostly on a loaded host
import keras
import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
x = rng.normal(size=(3200, 20)).astype("float32")
y = np.argmax(x @ rng.normal(size=(20, 5)).astype("float32"), axis=1).astype("int64")
dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(32).prefetch(tf.data.AUTOTUNE)

model = keras.Sequential(
    [keras.Input((20,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(5)]
)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
optimizer = keras.optimizers.Adam(1e-3)
mean_loss = keras.metrics.Mean()
accuracy = keras.metrics.SparseCategoricalAccuracy()


@tf.function
def train_step(xb, yb):
    with tf.GradientTape() as tape:
        logits = model(xb, training=True)
        loss = loss_fn(yb, logits)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss, logits


for epoch in range(2):
    mean_loss.reset_state()
    accuracy.reset_state()
    for xb, yb in dataset:
        loss, logits = train_step(xb, yb)
        mean_loss.update_state(loss)
        accuracy.update_state(yb, logits)
    print(f"epoch {epoch} loss {float(mean_loss.result()):.4f}")
