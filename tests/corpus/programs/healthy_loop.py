"""Control: a custom loop as the TensorFlow guide writes it, a tf.function step of a small
CNN over a shuffled, prefetched in-memory pipeline, metrics read once an epoch."""
# expect: env.no-gpu high
# expect: tensorcore.unused low
# maybe: input.bound low|medium -- the Python call of next() per step, 3-6% of a 12-19 ms step on this 2-core host: medium from 5%, so the host's speed decides
# maybe: input.iterator-end-wait medium|high -- a new tf.data iterator each epoch: TF's race at its end, lost mostly on a loaded host

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
x = rng.random((2048, 32, 32, 3), dtype=np.float32)
y = rng.integers(0, 10, size=2048)
dataset = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(2048).batch(64)
dataset = dataset.prefetch(tf.data.AUTOTUNE)
model = tf.keras.Sequential(
    [
        tf.keras.Input((32, 32, 3)),
        tf.keras.layers.Conv2D(32, 3, activation="relu"),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Conv2D(64, 3, activation="relu"),
        tf.keras.layers.GlobalAveragePooling2D(),
        tf.keras.layers.Dense(10),
    ]
)
optimizer = tf.keras.optimizers.Adam()
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
accuracy = tf.keras.metrics.SparseCategoricalAccuracy()


@tf.function
def train_step(features, labels):
    with tf.GradientTape() as tape:
        logits = model(features, training=True)
        loss = loss_fn(labels, logits)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    accuracy.update_state(labels, logits)
    return loss


for epoch in range(4):
    accuracy.reset_state()
    for features, labels in dataset:
        loss = train_step(features, labels)
    print(f"epoch {epoch} loss {float(loss):.4f} accuracy {float(accuracy.result()):.3f}")
