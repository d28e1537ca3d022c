"""A Keras fit reading 8 TFRecord shards one after the other (no num_parallel_reads): on a
GPU machine a single reader sets the pace."""
# expect: env.no-gpu high
# expect: input.sequential-reads low|medium -- judged from the code; low where the reads measured 0% of the pipeline's work on a slow host
# expect: tensorcore.unused low
# maybe: input.iterator-end-wait medium|high -- a new tf.data iterator each epoch: TF's race at its end, lost mostly on a loaded host

import os
import tempfile

import numpy as np
import tensorflow as tf

folder = tempfile.mkdtemp()
rng = np.random.default_rng(0)
files = []
for shard in range(8):
    path = os.path.join(folder, f"train-{shard:05d}.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for _ in range(256):
            x = rng.random(128, dtype=np.float32)
            feature = {"x": tf.train.Feature(float_list=tf.train.FloatList(value=x))}
            example = tf.train.Example(features=tf.train.Features(feature=feature))
            writer.write(example.SerializeToString())
    files.append(path)


def parse(records):
    x = tf.io.parse_example(records, {"x": tf.io.FixedLenFeature([128], tf.float32)})["x"]
    return x, tf.cast(x[:, 0] > 0.5, tf.int64)


# parsed a batch at a time, as the tf.data guide advises: the reader is left as the cost
dataset = tf.data.TFRecordDataset(files).batch(64).map(parse).prefetch(2)
model = tf.keras.Sequential([tf.keras.Input((128,)), tf.keras.layers.Dense(2)])
model.compile(
    optimizer="sgd",
    loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
)
model.fit(dataset, epochs=2, verbose=2)
