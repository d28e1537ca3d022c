"""The cache input.no-cache offers on a dataset a Keras helper built: epoch times before
and after, in fresh processes.

Two programs' pipelines, each read for 4 epochs (no model: the input alone):

* ``timeseries``: ``keras.utils.timeseries_dataset_from_array`` over a 6,000 x 8 series
  (windows of 48, batches of 64), as written and with the fix's ``.cache()`` after the
  call;
* ``images``: ``keras.utils.image_dataset_from_directory`` over 512 PNG files (96x96,
  resized to 64x64, batches of 32, shuffle=True by default), as written and as the fix
  rebuilds it (``batch_size=None, shuffle=False``, ``.cache().shuffle(512).batch(32)``).

Printed per variant: the median over runs of epoch 1 and of epochs 2-4, and their ratio;
for the fixed variants, that the elements are the same (timeseries: the same batches;
images: the same multiset of images and labels, in a new order every epoch).

Run: .venv/bin/python benchmarks/bench_helper_cache.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import collections, json, os, sys, tempfile, time
import numpy as np, keras, tensorflow as tf

kind, variant = sys.argv[1], sys.argv[2]
if kind == "timeseries":
    rng = np.random.default_rng(0)
    series = np.cumsum(rng.normal(size=(6000, 8)), axis=0).astype("float32")
    targets = series[48:, 0]

    def make(fixed):
        ds = keras.utils.timeseries_dataset_from_array(
            series[:-48], targets, sequence_length=48, batch_size=64)
        return ds.cache() if fixed else ds

    def key(epoch):
        return [(x.tobytes(), y.tobytes()) for x, y in epoch]
else:
    root = tempfile.mkdtemp()
    rng = np.random.default_rng(0)
    for i in range(512):
        folder = os.path.join(root, ("daisy", "rose", "tulip")[i % 3])
        os.makedirs(folder, exist_ok=True)
        pixels = rng.integers(0, 255, (96, 96, 3), dtype=np.uint8)
        tf.io.write_file(os.path.join(folder, f"{i}.png"), tf.io.encode_png(pixels))

    def make(fixed):
        if not fixed:
            return keras.utils.image_dataset_from_directory(
                root, image_size=(64, 64), batch_size=32, seed=1, verbose=False)
        return keras.utils.image_dataset_from_directory(
            root, image_size=(64, 64), batch_size=None, seed=1, shuffle=False, verbose=False
        ).cache().shuffle(512).batch(32)

    def key(epoch):
        return collections.Counter((x.tobytes(), int(y)) for xs, ys in epoch for x, y in zip(xs, ys))

ds = make(variant == "fixed")
times, epochs = [], []
for _ in range(4):
    start = time.perf_counter()
    epochs.append(list(ds.as_numpy_iterator()))
    times.append(time.perf_counter() - start)
same = key(epochs[0]) == key(list(make(False).as_numpy_iterator()))
if kind == "images":
    same = same and all(key(e) == key(epochs[0]) for e in epochs)
print(json.dumps({"times": times, "same": same}))
"""


def run(kind: str, variant: str) -> dict:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, kind, variant],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for kind in ("timeseries", "images"):
        for variant in ("as-written", "fixed"):
            results = [run(kind, variant) for _ in range(args.runs)]
            first = statistics.median(r["times"][0] for r in results)
            later = statistics.median(t for r in results for t in r["times"][1:])
            same = all(r["same"] for r in results)
            print(
                f"{kind:10} {variant:10} epoch 1 {first * 1e3:8.1f} ms, epochs 2-4 "
                f"{later * 1e3:8.1f} ms (x{first / later:.1f}); same elements: {same}"
            )


if __name__ == "__main__":
    main()
