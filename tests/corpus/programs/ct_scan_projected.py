"""keras-io's 3D CT-scan classifier, smaller: SciPy rotates each volume in a sequential
map (tf.numpy_function) while the Conv3D model runs slower than it on this CPU, so here
the steps never wait; projected onto an A100, whose step is a millisecond, they would
wait for the input nearly all the time."""

# corpus-options: --target A100
# expect: input.projected-bound high
# expect: input.python-function medium
# expect: env.no-gpu high
# expect: tensorcore.unused low
import numpy as np
import tensorflow as tf
from scipy import ndimage

rng = np.random.default_rng(0)
volumes = rng.random((32, 64, 64, 32), dtype=np.float32)
labels = rng.integers(0, 2, size=32)


def rotate(volume):
    angle = float(rng.choice([-20, -10, 10, 20]))
    volume = ndimage.rotate(volume, angle, reshape=False)
    return np.clip(volume, 0, 1).astype(np.float32)


def train_preprocessing(volume, label):
    volume = tf.numpy_function(rotate, [volume], tf.float32)
    volume.set_shape((64, 64, 32))
    volume = tf.expand_dims(volume, axis=3)
    return volume, label


train_loader = tf.data.Dataset.from_tensor_slices((volumes, labels))
train_dataset = train_loader.shuffle(32).map(train_preprocessing).batch(2).prefetch(2)

inputs = tf.keras.Input((64, 64, 32, 1))
x = tf.keras.layers.Conv3D(filters=64, kernel_size=3, activation="relu")(inputs)
x = tf.keras.layers.MaxPool3D(pool_size=2)(x)
x = tf.keras.layers.BatchNormalization()(x)
x = tf.keras.layers.Conv3D(filters=64, kernel_size=3, activation="relu")(x)
x = tf.keras.layers.MaxPool3D(pool_size=2)(x)
x = tf.keras.layers.BatchNormalization()(x)
x = tf.keras.layers.Conv3D(filters=128, kernel_size=3, activation="relu")(x)
x = tf.keras.layers.MaxPool3D(pool_size=2)(x)
x = tf.keras.layers.BatchNormalization()(x)
x = tf.keras.layers.GlobalAveragePooling3D()(x)
x = tf.keras.layers.Dense(units=256, activation="relu")(x)
x = tf.keras.layers.Dropout(0.3)(x)
outputs = tf.keras.layers.Dense(units=1, activation="sigmoid")(x)
model = tf.keras.Model(inputs, outputs, name="3dcnn")
model.compile(loss="binary_crossentropy", optimizer=tf.keras.optimizers.Adam(1e-4), metrics=["acc"])
model.fit(train_dataset, epochs=1, verbose=2)
