"""An input-bound training loop: JPEG decoding and per-image preprocessing in TF ops,
written the slow way (and the way many tutorials write it).

The map looks its label up in a StaticHashTable: a stateful op to TF, so TF's
map_parallelization leaves the map sequential (gpuwhy knows a lookup only reads). No
cache, no prefetch, and the same preprocessing recomputed every epoch. The "model"
is a small tf.function step, so the loop waits for its input.

    python input_bound.py                 # prints MEDIAN_STEP_S (as bench_run's workloads)
    python input_bound.py --shuffle       # the training variant: a shuffle before batch
    python input_bound.py --fixed         # the pipeline as gpuwhy.optimize rewrites it, by hand
    python input_bound.py --epochs 12     # more epochs (3 by default)
    python input_bound.py --optimize      # prints OPTIMIZE <json>: gpuwhy.optimize's result

INPUT_BOUND_COLLECTOR=pipelines runs the loop under gpuwhy's PipelineCollector alone
(started in-process), to measure what its hooks cost.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np
import tensorflow as tf

IMAGES = 4096
SIDE = 128  # encoded JPEGs
OUT = 64  # preprocessed side
BATCH = 32
EPOCHS = 3
CLASSES = ["cat", "dog", "bird", "fish", "frog", "horse", "ship", "truck"]


def raw_data(n: int = IMAGES) -> tuple[tf.Tensor, tf.Tensor]:
    """JPEG bytes and class names, made once in memory (deterministic)."""
    rng = np.random.RandomState(0)
    base = rng.randint(0, 255, (16, SIDE, SIDE, 3)).astype(np.uint8)
    jpegs = [
        tf.io.encode_jpeg(np.roll(base[i % 16], i, axis=0), quality=90).numpy() for i in range(n)
    ]
    names = [CLASSES[i % len(CLASSES)] for i in range(n)]
    return tf.constant(jpegs), tf.constant(names)


def build(shuffle: bool = False, fixed: bool = False, n: int = IMAGES) -> tf.data.Dataset:
    jpegs, names = raw_data(n)
    labels = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(CLASSES, list(range(len(CLASSES)))), default_value=-1
    )

    def preprocess(jpeg, name):
        image = tf.io.decode_jpeg(jpeg, channels=3)
        image = tf.image.convert_image_dtype(image, tf.float32)
        image = tf.image.resize(image, [OUT, OUT], antialias=True)
        image = tf.image.per_image_standardization(image)
        edges = tf.image.sobel_edges(tf.image.rgb_to_grayscale(image)[None])[0]
        features = tf.concat([image, tf.reshape(edges, [OUT, OUT, 2])], axis=-1)
        return features, labels.lookup(name)

    ds = tf.data.Dataset.from_tensor_slices((jpegs, names))
    if fixed:
        ds = ds.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE).cache()
    else:
        ds = ds.map(preprocess)
    if shuffle:
        ds = ds.shuffle(256, seed=1)
    ds = ds.batch(BATCH)
    if fixed:
        ds = ds.prefetch(tf.data.AUTOTUNE)
    return ds


def train(ds: tf.data.Dataset, epochs: int = EPOCHS) -> list[float]:
    kernel = tf.Variable(tf.random.normal([5, 8], seed=1))

    @tf.function
    def step(x, y):
        pooled = tf.reduce_mean(x, axis=[1, 2])
        logits = pooled @ kernel
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))

    times = []
    for _ in range(epochs):
        last = time.perf_counter()
        for x, y in ds:
            step(x, y)
            now = time.perf_counter()
            times.append(now - last)
            last = now
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shuffle", action="store_true")
    parser.add_argument("--fixed", action="store_true")
    parser.add_argument("--optimize", action="store_true")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    args = parser.parse_args()
    collector = None
    if os.environ.get("INPUT_BOUND_COLLECTOR") == "pipelines":
        from gpuwhy.collect.inprocess.pipelines import PipelineCollector

        collector = PipelineCollector()
        collector.start(time.perf_counter())
        collector.on_tensorflow()
    ds = build(shuffle=args.shuffle, fixed=args.fixed)
    if args.optimize:
        from gpuwhy.optimize.input_pipeline import optimize

        result = optimize(ds, repeats=args.repeats)
        print(result.report())
        from gpuwhy.facts import to_dict

        print("OPTIMIZE " + json.dumps(to_dict(result.to_facts("input_bound"))))
        return
    times = train(ds, args.epochs)
    if collector is not None:
        collector.stop()
        facts = collector.facts()
        print(f"PIPELINES {len(facts.pipelines) if facts else 0}")
    steps_per_epoch = len(times) // args.epochs
    print(f"MEDIAN_STEP_S {statistics.median(times[steps_per_epoch:]):.9f}")  # after epoch 1


if __name__ == "__main__":
    main()
