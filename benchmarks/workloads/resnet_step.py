"""A ResNet-50 custom training step (batch 8, 224x224, random data), 16 steps; prints
the seconds of the steps after the first (the trace) together."""

import time

import tensorflow as tf

model = tf.keras.applications.ResNet50(weights=None, input_shape=(224, 224, 3), classes=1000)
opt = tf.keras.optimizers.SGD(0.01)
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
x = tf.random.normal([8, 224, 224, 3])
y = tf.random.uniform([8], maxval=1000, dtype=tf.int64)


@tf.function
def train_step(xb, yb):
    with tf.GradientTape() as tape:
        loss = loss_fn(yb, model(xb, training=True))
    opt.apply_gradients(
        zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
    )
    return loss


times = []
for _ in range(16):
    started = time.perf_counter()
    train_step(x, y).numpy()
    times.append(time.perf_counter() - started)
print(f"STEPS_S {sum(times[1:]):.6f}")
