"""Keras `fit` starved by its input pipeline: compressed records, decoding and a random
augmentation that keeps one stage sequential.

What gpuwhy should find (seeds 001 and 003):
- the steps wait for input; Keras reads each batch inside its compiled step, so the wait
  comes from tf.data's own consumer timer;
- the slowest stage is the augmentation map: `tf.random.uniform` is stateful, so TF
  cannot parallelise it by itself (the decode map is stateless and TF parallelises it);
- the records are GZIP-compressed and the images PNG-encoded: decompression and
  decoding run on the CPU, every epoch, for the same result;
- no `.cache()` although the decoded images fit in memory many times over.
Plain TensorFlow, no gpuwhy import: run it with `python` or `gpuwhy run` alike.
"""

import argparse
import os
import tempfile

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--images", type=int, default=768)
parser.add_argument("--batch", type=int, default=32)
args = parser.parse_args()

SIZE = 64


def write_records(folder: str) -> list[str]:
    """PNG images in GZIP TFRecords, as an image dataset often ships."""
    rng = np.random.default_rng(0)
    paths = []
    for shard in range(2):
        path = os.path.join(folder, f"train-{shard}.tfrecord.gz")
        with tf.io.TFRecordWriter(path, options="GZIP") as writer:
            for i in range(args.images // 2):
                pixels = rng.integers(0, 255, (SIZE, SIZE, 3), dtype=np.uint8)
                example = tf.train.Example(features=tf.train.Features(feature={
                    "image": tf.train.Feature(bytes_list=tf.train.BytesList(
                        value=[tf.io.encode_png(pixels).numpy()])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 10])),
                }))
                writer.write(example.SerializeToString())
        paths.append(path)
    return paths


FEATURES = {"image": tf.io.FixedLenFeature([], tf.string),
            "label": tf.io.FixedLenFeature([], tf.int64)}


def parse(record):
    example = tf.io.parse_single_example(record, FEATURES)
    image = tf.io.decode_png(example["image"], channels=3)
    return tf.image.convert_image_dtype(image, tf.float32), example["label"]


def augment(image, label):
    for _ in range(8):           # several random crops and flips, one per pass
        image = tf.image.resize_with_crop_or_pad(image, SIZE + 8, SIZE + 8)
        image = tf.image.random_crop(image, (SIZE, SIZE, 3))
        image = tf.image.random_flip_left_right(image)
        image = tf.image.adjust_brightness(image, tf.random.uniform([], -0.1, 0.1))
    return image, label


with tempfile.TemporaryDirectory() as folder:
    files = write_records(folder)
    dataset = (tf.data.TFRecordDataset(files, compression_type="GZIP")
               .map(parse)
               .map(augment)
               .shuffle(256, seed=0)
               .batch(args.batch))

    model = tf.keras.Sequential([
        tf.keras.Input((SIZE, SIZE, 3)),
        tf.keras.layers.Conv2D(8, 3, strides=2, activation="relu"),
        tf.keras.layers.GlobalAveragePooling2D(),
        tf.keras.layers.Dense(10),
    ])
    model.compile(optimizer="adam",
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(dataset, epochs=args.epochs, verbose=2)
    print(f"final loss {history.history['loss'][-1]:.4f}")
