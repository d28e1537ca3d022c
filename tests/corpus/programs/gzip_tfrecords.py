"""A Keras fit reading GZIP-compressed TFRecords it wrote first: the decompression runs on
the CPU, in the input's critical path (the reader is most of the pipeline's time)."""
# expect: env.no-gpu high
# expect: input.bound low|medium|high -- about 65% of the step: low only where other processes load the host
# expect: input.no-cache medium
# expect: compression.cpu-codec medium
# expect: tensorcore.unused low
# maybe: input.iterator-end-wait medium|high -- a new tf.data iterator each epoch: TF's race at its end, lost mostly on a loaded host

import os
import tempfile

import numpy as np
import tensorflow as tf

folder = tempfile.mkdtemp()
path = os.path.join(folder, "train.tfrecord.gz")
rng = np.random.default_rng(0)
with tf.io.TFRecordWriter(path, options="GZIP") as writer:
    for _ in range(1024):
        features = rng.random(32, dtype=np.float32)
        # a 32 KB text field (digits: it compresses to about half) the model never reads:
        # inflating it is the reader's work, in the input's critical path
        note = (rng.integers(0, 10, 32 * 1024, dtype=np.uint8) + 48).tobytes()
        example = tf.train.Example(
            features=tf.train.Features(
                feature={
                    "x": tf.train.Feature(float_list=tf.train.FloatList(value=features)),
                    "note": tf.train.Feature(bytes_list=tf.train.BytesList(value=[note])),
                    "y": tf.train.Feature(
                        int64_list=tf.train.Int64List(value=[int(features[0] > 0.5)])
                    ),
                }
            )
        )
        writer.write(example.SerializeToString())

spec = {
    "x": tf.io.FixedLenFeature([32], tf.float32),
    "y": tf.io.FixedLenFeature([1], tf.int64),
}


def parse(record):
    parsed = tf.io.parse_single_example(record, spec)
    return parsed["x"], parsed["y"]


dataset = tf.data.TFRecordDataset(path, compression_type="GZIP").map(parse).batch(32)
model = tf.keras.Sequential([tf.keras.Input((32,)), tf.keras.layers.Dense(2)])
model.compile(
    optimizer="sgd",
    loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
)
model.fit(dataset, epochs=3, verbose=2)
