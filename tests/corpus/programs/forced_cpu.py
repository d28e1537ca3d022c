"""A step that pins part of its math to the CPU with tf.device, so on a GPU machine the
activations go to the host and back every step."""
# expect: env.no-gpu high
# expect: placement.forced-cpu medium
# maybe: input.bound low|medium -- the Python call per step against a step of a millisecond: the host's load decides
# expect: tensorcore.unused low
# maybe: input.iterator-end-wait medium|high -- a new tf.data iterator each epoch: TF's race at its end, lost mostly on a loaded host

import numpy as np
import tensorflow as tf

x = np.random.default_rng(0).random((4096, 32), dtype=np.float32)
dataset = tf.data.Dataset.from_tensor_slices(x).batch(64).prefetch(2)
dense = tf.keras.layers.Dense(64)
head = tf.keras.layers.Dense(1)
optimizer = tf.keras.optimizers.Adam()


@tf.function
def train_step(batch):
    with tf.GradientTape() as tape:
        hidden = dense(batch)
        with tf.device("/CPU:0"):
            hidden = tf.nn.relu(hidden) * tf.math.sigmoid(hidden)
        loss = tf.reduce_mean(tf.square(head(hidden)))
    variables = dense.trainable_variables + head.trainable_variables
    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
    return loss


for epoch in range(3):
    for batch in dataset:
        loss = train_step(batch)
print(f"loss {float(loss):.4f}")
