"""A Keras fit beside a 9-image plotting loop before it and two evaluation loops after it
(evaluate, predict_on_batch and model(x) over the test set): the steps are fit's alone."""
# expect: env.no-gpu high
# expect: tensorcore.unused low
# maybe: input.iterator-end-wait medium|high -- a new tf.data iterator each epoch: TF's race at its end, lost mostly on a loaded host

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
x = rng.random((640, 64, 64, 3), dtype=np.float32)
y = rng.integers(0, 5, 640)
train_ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(640).batch(32).prefetch(2)
test_ds = tf.data.Dataset.from_tensor_slices((x[:320], y[:320])).batch(8)
small_ds = tf.data.Dataset.from_tensor_slices(x[:9])

model = tf.keras.Sequential(
    [
        tf.keras.Input((64, 64, 3)),
        tf.keras.layers.Conv2D(32, 3, activation="relu"),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Conv2D(64, 3, activation="relu"),
        tf.keras.layers.GlobalAveragePooling2D(),
        tf.keras.layers.Dense(5),
    ]
)
model.compile(
    "adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"]
)

# "plotting": look at 9 images, as plt.imshow would
for images, labels in train_ds.take(1):
    for i in range(9):
        img = tf.image.resize(images[i][None], (32, 32)).numpy()
        _ = np.clip(img * 255, 0, 255).astype("uint8")
for im in small_ds:
    _ = tf.image.resize(im[None], (32, 32)).numpy()
    _ = model(im[None]).numpy()

model.fit(train_ds, epochs=3, verbose=2)
model.evaluate(test_ds, verbose=2)
for xb, yb in test_ds:
    model.predict_on_batch(xb)
for xb, yb in test_ds:
    model(xb)
