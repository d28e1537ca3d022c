"""A custom training loop that prints nothing: what it computes is in its variables."""

import tensorflow as tf

x = tf.random.normal([512, 8])
y = tf.reduce_sum(x, axis=1, keepdims=True)
dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)
model = tf.keras.Sequential(
    [tf.keras.Input((8,)), tf.keras.layers.Dense(8), tf.keras.layers.Dense(1)]
)
optimizer = tf.keras.optimizers.SGD(0.01)


def step(features, labels):  # @step
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(features) - labels))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))  # @apply


for epoch in range(2):
    for features, labels in dataset:
        step(features, labels)
