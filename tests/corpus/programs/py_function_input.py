"""A custom loop starved by its input: every image goes through Python (tf.py_function, a
sleep standing for PIL work), one at a time, with no prefetch."""
# expect: input.bound high
# expect: input.python-function high
# expect: env.no-gpu high
# expect: tensorcore.unused low
# maybe: input.iterator-end-wait medium|high -- a new tf.data iterator each epoch: TF's race at its end, lost mostly on a loaded host

import time

import numpy as np
import tensorflow as tf

images = np.random.default_rng(0).random((512, 16, 16, 3), dtype=np.float32)
labels = np.arange(512) % 10


def decode(image):
    time.sleep(0.002)  # PIL/OpenCV work on one image
    return image.numpy()[::-1]


def load(image, label):
    image = tf.py_function(decode, [image], tf.float32)
    image.set_shape((16, 16, 3))
    return image, label


dataset = tf.data.Dataset.from_tensor_slices((images, labels)).map(load).batch(32)
model = tf.keras.Sequential(
    [tf.keras.Input((16, 16, 3)), tf.keras.layers.Flatten(), tf.keras.layers.Dense(10)]
)
optimizer = tf.keras.optimizers.SGD()
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


for epoch in range(2):
    for x, y in dataset:
        loss = train_step(x, y)
print(f"loss {float(loss):.4f}")
