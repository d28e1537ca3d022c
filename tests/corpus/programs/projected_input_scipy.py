"""A 3D-volume classifier whose augmentation runs SciPy through tf.numpy_function in a
sequential map (~170 ms a batch of two 128x128x64 volumes here), feeding a small Conv3D
step that a GPU runs in a few milliseconds: projected onto an A100, the step waits for its input."""
# corpus-options: --target A100
# expect: input.projected-bound high
# expect: input.bound high
# expect: input.python-function high
# expect: env.no-gpu high
# expect: tensorcore.unused low
# maybe: input.iterator-end-wait medium|high -- a new tf.data iterator each epoch: TF's race at its end, lost mostly on a loaded host

import numpy as np
import tensorflow as tf
from scipy import ndimage

rng = np.random.default_rng(0)
volumes = rng.random((20, 128, 128, 64), dtype=np.float32)
labels = rng.integers(0, 2, size=20)


def rotate(volume):
    angle = float(rng.choice([-20, -10, 10, 20]))
    return ndimage.rotate(volume, angle, reshape=False).astype(np.float32)


def augment(volume, label):
    volume = tf.numpy_function(rotate, [volume], tf.float32)
    volume.set_shape((128, 128, 64))
    return tf.expand_dims(volume, -1), label


train = tf.data.Dataset.from_tensor_slices((volumes, labels)).shuffle(20).map(augment).batch(2)
model = tf.keras.Sequential(
    [
        tf.keras.Input((128, 128, 64, 1)),
        tf.keras.layers.Conv3D(8, 3, strides=2, activation="relu"),
        tf.keras.layers.MaxPool3D(2),
        tf.keras.layers.Conv3D(32, 3, activation="relu"),
        tf.keras.layers.GlobalAveragePooling3D(),
        tf.keras.layers.Dense(1, activation="sigmoid"),
    ]
)
model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["acc"])
model.fit(train, epochs=2, verbose=2)
