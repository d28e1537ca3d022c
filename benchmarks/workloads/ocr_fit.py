"""An OCR-style Keras fit (captcha images read from PNG files, decoded in a parallel map,
labels encoded by a py_function, validation every epoch); prints how long ``fit`` took
to return after ``on_train_end`` (END_OF_FIT_S) and the whole program's wall time
(PROGRAM_S). The images are synthesized into a temporary directory: no download."""

import os
import tempfile
import time

T0 = time.perf_counter()

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

IMAGES = int(os.environ.get("OCR_IMAGES", "960"))
EPOCHS = int(os.environ.get("OCR_EPOCHS", "4"))
CHARACTERS = "2345678bcdefgmnpwxy"
HEIGHT, WIDTH, LENGTH = 50, 200, 5


def write_images(folder: str) -> tuple[list[str], list[str]]:
    rng = np.random.default_rng(0)
    paths, labels = [], []
    for i in range(IMAGES):
        label = "".join(rng.choice(list(CHARACTERS), LENGTH))
        path = os.path.join(folder, f"{i:04d}_{label}.png")
        pixels = rng.integers(0, 255, (HEIGHT, WIDTH, 1), dtype=np.uint8)
        tf.io.write_file(path, tf.io.encode_png(pixels))
        paths.append(path)
        labels.append(label)
    return paths, labels


def encode_label(label):
    return np.array([CHARACTERS.index(c) + 1 for c in label.numpy().decode()], dtype="int64")


def encode_sample(path, label):
    image = tf.io.decode_png(tf.io.read_file(path), channels=1)
    image = tf.transpose(tf.image.convert_image_dtype(image, tf.float32), [1, 0, 2])
    (code,) = tf.py_function(encode_label, [label], [tf.int64])
    code.set_shape([LENGTH])
    return image, code


def dataset(paths, labels):
    ds = tf.data.Dataset.from_tensor_slices((paths, labels))
    return (
        ds.map(encode_sample, num_parallel_calls=tf.data.AUTOTUNE)
        .batch(16)
        .prefetch(tf.data.AUTOTUNE)
    )


class EndOfFit(keras.callbacks.Callback):
    at = None

    def on_train_end(self, logs=None):
        EndOfFit.at = time.perf_counter()


with tempfile.TemporaryDirectory() as folder:
    paths, labels = write_images(folder)
    split = IMAGES * 9 // 10
    train, valid = dataset(paths[:split], labels[:split]), dataset(paths[split:], labels[split:])
    inputs = keras.Input((WIDTH, HEIGHT, 1))
    x = keras.layers.Conv2D(16, 3, padding="same", activation="relu")(inputs)
    x = keras.layers.MaxPooling2D(4)(x)
    x = keras.layers.Reshape((WIDTH // 4, (HEIGHT // 4) * 16))(x)
    x = keras.layers.Bidirectional(keras.layers.LSTM(32, return_sequences=True))(x)
    x = keras.layers.GlobalAveragePooling1D()(x)
    x = keras.layers.Dense(LENGTH * (len(CHARACTERS) + 1))(x)
    outputs = keras.layers.Reshape((LENGTH, len(CHARACTERS) + 1))(x)
    model = keras.Model(inputs, outputs)
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(train, validation_data=valid, epochs=EPOCHS, verbose=0, callbacks=[EndOfFit()])
    returned = time.perf_counter()
print(f"END_OF_FIT_S {returned - EndOfFit.at:.3f}")
print(f"PROGRAM_S {time.perf_counter() - T0:.3f}")
