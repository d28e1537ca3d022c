"""A custom loop over TFRecords parsed one example at a time: parse_single_example in a
map of its own statement, the batch in the next one. Most of the map's time is
tf.data's cost per element."""

import os
import tempfile

import numpy as np
import tensorflow as tf

FEATURES = {
    "x": tf.io.FixedLenFeature([16], tf.float32),
    "y": tf.io.FixedLenFeature([], tf.int64),
}


def write_records(path, count=12000):
    rng = np.random.default_rng(0)
    with tf.io.TFRecordWriter(path) as writer:
        for i in range(count):
            example = tf.train.Example(
                features=tf.train.Features(
                    feature={
                        "x": tf.train.Feature(
                            float_list=tf.train.FloatList(value=rng.random(16, np.float32))
                        ),
                        "y": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 4])),
                    }
                )
            )
            writer.write(example.SerializeToString())


def parse(record):
    example = tf.io.parse_single_example(record, FEATURES)
    return example["x"] * 2.0, example["y"]


records = os.path.join(tempfile.mkdtemp(), "train.tfrecord")
write_records(records)
dataset = tf.data.TFRecordDataset(records)
dataset = dataset.map(parse, num_parallel_calls=1)
dataset = dataset.batch(128)

model = tf.keras.Sequential(
    [tf.keras.Input((16,)), tf.keras.layers.Dense(32, activation="relu"), tf.keras.layers.Dense(4)]
)
optimizer = tf.keras.optimizers.SGD(0.05)
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


tf.random.set_seed(0)
for epoch in range(4):
    for x, y in dataset:
        loss = train_step(x, y)
    print(f"epoch {epoch} loss {float(loss):.4f}")
