"""What one heap census costs a real TensorFlow program (it holds the GIL while it walks).

One process: a small Keras model is built, compiled and fitted for an epoch (the heap a
training program has once its first steps have run: TensorFlow, Keras, the traced
train function), then ``--runs`` censuses are taken with a list of tensors growing
between them (so that each census also names a container: one more walk of the
referrers). Prints the objects the garbage collector tracks, the median and the fastest
census, and the median time of naming the grown container. Run:

    .venv/bin/python benchmarks/bench_heap_census.py [--runs 5]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import tensorflow as tf

from gpuwhy.collect.inprocess.heap_census import HeapCensus, name_of

kept: list = []


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    model = tf.keras.Sequential(
        [
            tf.keras.layers.Input((32,)),
            tf.keras.layers.Dense(256, activation="relu"),
            tf.keras.layers.Dense(256, activation="relu"),
            tf.keras.layers.Dense(1),
        ]
    )
    model.compile("adam", "mse")
    rng = np.random.default_rng(0)
    x, y = rng.random((2048, 32), np.float32), rng.random((2048, 1), np.float32)
    model.fit(x, y, epochs=1, batch_size=32, verbose=0)
    census = HeapCensus(t0=time.perf_counter())
    census.take(time.perf_counter(), 0)  # the baseline
    times, naming = [], []
    for run in range(args.runs):
        kept.extend(tf.constant(float(i)) for i in range(100))
        started = time.perf_counter()
        census.take(time.perf_counter(), run + 1)
        times.append(time.perf_counter() - started)
        started = time.perf_counter()
        name_of(kept)
        naming.append(time.perf_counter() - started)
    print(f"objects tracked: {len(gc.get_objects()):,}")
    print(
        f"census (with naming): median {statistics.median(times):.3f} s, fastest {min(times):.3f} s"
    )
    print(f"naming one container: median {statistics.median(naming):.3f} s")
    print("named:", [(g.name, g.holder, g.length_last) for g in census.growing()][:3])


if __name__ == "__main__":
    main()
