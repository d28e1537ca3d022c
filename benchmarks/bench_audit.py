"""Placement audit speed: seconds per audit and ops/s for Keras models of three sizes.

The budget (issue 3): auditing the training step of a Keras ResNet50 takes at most
0.5 s once the function is traced, and the time grows linearly with the op count.
Tracing is excluded: ``gpuwhy run`` audits functions the program traced anyway.

    .venv/bin/python benchmarks/bench_audit.py [--runs 5]

Prints, per model, the node count after inlining, the median audit time over the
runs (each run a fresh kernel-lookup cache, as in a new process) and ops/s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def train_step(model, batch, shape, classes):
    import tensorflow as tf

    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    x = tf.zeros((batch, *shape))
    y = tf.zeros((batch,), tf.int64)
    return tf.function(model.train_step).get_concrete_function((x, y))


def models():
    import keras

    yield (
        "MobileNetV2 (96x96)",
        lambda: train_step(
            keras.applications.MobileNetV2(weights=None, input_shape=(96, 96, 3), classes=10),
            32,
            (96, 96, 3),
            10,
        ),
    )
    yield (
        "ResNet50 (224x224)",
        lambda: train_step(
            keras.applications.ResNet50(weights=None, input_shape=(224, 224, 3), classes=1000),
            32,
            (224, 224, 3),
            1000,
        ),
    )
    yield (
        "ResNet152 (224x224)",
        lambda: train_step(
            keras.applications.ResNet152(weights=None, input_shape=(224, 224, 3), classes=1000),
            32,
            (224, 224, 3),
            1000,
        ),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    from gpuwhy.collect.placement import AuditTarget, audit_functions

    print(f"{'model':24} {'nodes':>7} {'median s':>9} {'min s':>7} {'max s':>7} {'ops/s':>9}")
    for name, build in models():
        concrete = build()
        times = []
        nodes = 0
        for _ in range(args.runs):
            started = time.perf_counter()
            facts, _ = audit_functions([AuditTarget(name, concrete)])
            times.append(time.perf_counter() - started)
            nodes = facts.functions[0].nodes
        median = statistics.median(times)
        print(
            f"{name:24} {nodes:>7} {median:>9.3f} {min(times):>7.3f} {max(times):>7.3f} {nodes / median:>9.0f}"
        )


if __name__ == "__main__":
    main()
