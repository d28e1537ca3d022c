"""A MirroredStrategy custom loop (TF's "custom training with tf.distribute.Strategy"
tutorial's shape) over a distributed dataset whose map runs a millisecond of Python per
element, then a test loop over a plain dataset. TF keeps no model of a distributed
dataset's pipeline: the wait is the training loop's, at the distributed dataset, never
the test loop's pipeline (which gpuwhy once blamed, with a parallel batch as its fix)."""
# expect: input.bound high
# expect: env.no-gpu high
# expect: tensorcore.unused low
# maybe: input.iterator-end-wait medium|high -- a new tf.data iterator each epoch: TF's race at its end, lost mostly on a loaded host

import time

import numpy as np
import tensorflow as tf

strategy = tf.distribute.MirroredStrategy()
x = np.random.default_rng(0).random((1280, 8), dtype=np.float32)
y = np.random.default_rng(1).random((1280, 1), dtype=np.float32)


def slow(features, label):  # a millisecond of Python per element
    features = tf.py_function(lambda a: (time.sleep(0.001), a)[1], [features], tf.float32)
    return tf.ensure_shape(features, (8,)), label


ds = tf.data.Dataset.from_tensor_slices((x, y)).map(slow).batch(32)
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input((8,)), tf.keras.layers.Dense(1)])
    optimizer = tf.keras.optimizers.SGD(0.01)


def step(batch):
    features, label = batch
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((model(features) - label) ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


@tf.function
def distributed_step(batch):
    return strategy.reduce("SUM", strategy.run(step, args=(batch,)), axis=None)


dist_ds = strategy.experimental_distribute_dataset(ds)
for epoch in range(3):
    for batch in dist_ds:
        loss = distributed_step(batch)
    print("epoch", epoch, float(loss))

test_ds = tf.data.Dataset.from_tensor_slices((x[:320], y[:320])).batch(32)
for features, label in test_ds:
    model(features, training=False)
