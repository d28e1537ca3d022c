"""The GPU projection against published TensorFlow training throughputs.

Projects the training step of Keras' ResNet50 (keras.applications, 224x224, the
model NVIDIA's figures train: ResNet-50 v1.5 differs only in a stride) onto a V100 and
an A100 at the batch sizes and precisions of NVIDIA's published single-GPU results, and
prints the projected images/s (middle, and the band) beside the published figure with
their ratio. Also times the projection itself, after tracing (budget: 1 s).

Published figures: NVIDIA DeepLearningExamples, TensorFlow/Classification/ConvNets/
resnet50v1.5/README.md, "Training performance results" (TensorFlow 20.06-tf1-py3 NGC
container, XLA on, averaged over a training epoch, 1 GPU):

- DGX A100 (A100 40GB), batch 256: TF32 + XLA 808 img/s, mixed precision + XLA 1770 img/s
- DGX-1 (V100 16GB): FP32 + XLA, batch 128, 412 img/s; mixed precision + XLA, batch 256,
  1270 img/s

    .venv/bin/python benchmarks/bench_projection.py [--runs 3]

Tracing ResNet50's training step takes a minute or two on a small CPU; the projection
times are medians over --runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# (gpu, precision, batch, published img/s)
PUBLISHED = [
    ("A100-40GB", "float32", 256, 808.0),
    ("A100-40GB", "mixed_float16", 256, 1770.0),
    ("V100", "float32", 128, 412.0),
    ("V100", "mixed_float16", 256, 1270.0),
]


def traced_train_step(precision: str):
    """ResNet50's training step under ``precision``, traced with an unknown batch and
    XLA (as the published runs), as gpuwhy would audit it."""
    import keras
    import tensorflow as tf

    keras.mixed_precision.set_global_policy(precision)
    model = keras.applications.ResNet50(weights=None)
    optimizer = keras.optimizers.SGD(0.1, momentum=0.9)
    loss_fn = keras.losses.SparseCategoricalCrossentropy()

    @tf.function(jit_compile=True)
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    x = tf.TensorSpec([None, 224, 224, 3], tf.float32)
    y = tf.TensorSpec([None], tf.int64)
    concrete = train_step.get_concrete_function(x, y)
    keras.mixed_precision.set_global_policy("float32")
    return concrete


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    from gpuwhy.collect.placement import AuditTarget, audit_functions
    from gpuwhy.facts import Facts
    from gpuwhy.projection.gpus import find_gpu
    from gpuwhy.projection.step import projection_facts

    traced = {}
    print(f"{'GPU':<10} {'precision':<14} {'batch':>5}  {'projected img/s (band)':<28} "
          f"{'published':>9}  {'ratio':>5}  {'in band':<7}  projection s")  # fmt: skip
    for gpu, precision, batch, published in PUBLISHED:
        if precision not in traced:
            started = time.perf_counter()
            traced[precision] = traced_train_step(precision)
            print(f"  (traced ResNet50 {precision} in {time.perf_counter() - started:.0f} s)")
        target = [AuditTarget("train_step", traced[precision], "bench_projection.py")]
        seconds = []
        for _ in range(args.runs):
            started = time.perf_counter()
            placement, _ = audit_functions(target, batch=batch)
            projection = projection_facts(Facts(placement=placement), gpu)
            seconds.append(time.perf_counter() - started)
        assert projection is not None
        mid = batch / projection.step_s
        low, high = batch / projection.step_high_s, batch / projection.step_low_s
        ratio = mid / published
        inside = "yes" if low <= published <= high else "no"
        print(
            f"{find_gpu(gpu).name:<10} {precision:<14} {batch:>5}  "
            f"{mid:>7,.0f} ({low:,.0f}–{high:,.0f}){'':<8} {published:>9,.0f}  "
            f"{ratio:>5.2f}  {inside:<7}  {statistics.median(seconds):.2f}"
        )


if __name__ == "__main__":
    main()
