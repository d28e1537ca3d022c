"""A custom loop whose training step is a tf.function and whose validation pass after
each epoch runs eagerly (the model called batch by batch from Python, a Keras metric
updated op by op): the training steps are fast, the passes between epochs take most of
the loop."""
# expect: steps.periodic-stall high
# expect: env.no-gpu high
# maybe: input.bound low|medium -- the Python call of next() per step against a step of half a millisecond: the host's load decides
# expect: tensorcore.unused low
# maybe: input.iterator-end-wait medium|high -- a new tf.data iterator each epoch: TF's race at its end, lost mostly on a loaded host

import numpy as np
import tensorflow as tf

tf.keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x = rng.normal(size=(8192, 32)).astype("float32")
y = (x.sum(axis=1) > 0).astype("int64")
train = tf.data.Dataset.from_tensor_slices((x, y)).batch(64).prefetch(2)
val = tf.data.Dataset.from_tensor_slices((x[:4096], y[:4096])).batch(16)

model = tf.keras.Sequential(
    [
        tf.keras.layers.Dense(64, activation="relu"),
        tf.keras.layers.Dense(64, activation="relu"),
        tf.keras.layers.Dense(2),
    ]
)
optimizer = tf.keras.optimizers.Adam()
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
val_accuracy = tf.keras.metrics.SparseCategoricalAccuracy()


@tf.function
def train_step(features, labels):
    with tf.GradientTape() as tape:
        loss = loss_fn(labels, model(features, training=True))
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    return loss


for epoch in range(5):
    for features, labels in train:
        loss = train_step(features, labels)
    for features, labels in val:
        logits = model(features, training=False)
        val_accuracy.update_state(labels, logits)
    print(f"epoch {epoch}: loss {float(loss):.4f}, val accuracy {float(val_accuracy.result()):.4f}")
    val_accuracy.reset_state()
