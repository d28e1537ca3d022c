"""A custom loop over `train_ds.repeat().take(640)` (the tutorials' way to train a number
of steps), whose deterministic map is run again on each of the ten passes it reads. TF's
cardinality of the whole is 640, one "pass" of it: input.no-cache must count the passes
of what the repeat repeats (64 batches), where it was silent."""
# expect: input.bound high|medium -- about 60% of the step waits on the map
# expect: env.no-gpu high
# expect: input.no-cache medium
# expect: tensorcore.unused low

import numpy as np
import tensorflow as tf

x = np.random.default_rng(0).random((2048, 64), dtype=np.float32)
y = np.random.default_rng(1).random((2048, 1), dtype=np.float32)


def augment(features, target):
    for _ in range(30):
        features = tf.math.tanh(tf.matmul(tf.reshape(features, (8, 8)), tf.eye(8)))
    return tf.reshape(features, (64,)), target


train_ds = tf.data.Dataset.from_tensor_slices((x, y)).map(augment).batch(32)
model = tf.keras.Sequential(
    [tf.keras.Input((64,)), tf.keras.layers.Dense(32), tf.keras.layers.Dense(1)]
)
optimizer = tf.keras.optimizers.SGD(0.01)


@tf.function
def train_step(features, target):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((model(features) - target) ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


for step, (features, target) in enumerate(train_ds.repeat().take(640)):
    loss = train_step(features, target)
    if step % 200 == 0:
        print(step, float(loss))
