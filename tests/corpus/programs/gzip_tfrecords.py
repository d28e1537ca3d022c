"""A Keras fit reading GZIP-compressed TFRecords it wrote first: the decompression runs on
the CPU, in the input's critical path."""
# expect: env.no-gpu high
# expect: input.bound low|medium|high -- a 15-36% wait on this 2-core host: low where other processes load it, high past 20%
# expect: input.no-cache medium
# maybe: compression.cpu-codec medium -- the GZIP reader is about 5% of the pipeline's time beside the parse map, at the rule's line: found on this machine this morning, lost this afternoon at the commit before this change too
# expect: tensorcore.unused low

import os
import tempfile

import numpy as np
import tensorflow as tf

folder = tempfile.mkdtemp()
path = os.path.join(folder, "train.tfrecord.gz")
rng = np.random.default_rng(0)
with tf.io.TFRecordWriter(path, options="GZIP") as writer:
    for _ in range(2048):
        features = rng.random(256, dtype=np.float32)
        example = tf.train.Example(
            features=tf.train.Features(
                feature={
                    "x": tf.train.Feature(float_list=tf.train.FloatList(value=features)),
                    "y": tf.train.Feature(
                        int64_list=tf.train.Int64List(value=[int(features[0] > 0.5)])
                    ),
                }
            )
        )
        writer.write(example.SerializeToString())

spec = {
    "x": tf.io.FixedLenFeature([256], tf.float32),
    "y": tf.io.FixedLenFeature([1], tf.int64),
}


def parse(record):
    parsed = tf.io.parse_single_example(record, spec)
    return parsed["x"], parsed["y"]


dataset = tf.data.TFRecordDataset(path, compression_type="GZIP").map(parse).batch(64)
model = tf.keras.Sequential([tf.keras.Input((256,)), tf.keras.layers.Dense(2)])
model.compile(
    optimizer="sgd",
    loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
)
model.fit(dataset, epochs=3, verbose=2)
