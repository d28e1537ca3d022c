"""The GPU projection against published TensorFlow training throughputs.

Projects the training step of well-known models (built with Keras here, traced with an
unknown batch as gpuwhy audits a user's step) onto the GPU, precision, batch size and
XLA setting of NVIDIA's published single-GPU TensorFlow results, and prints the
projected throughput (middle, and the band) beside the published figure with their
ratio. Also times the projection itself, after tracing (budget: 1 s for ResNet-50).

Two sets (docs/projection.md says where each figure comes from):

- **fit**: the eight figures the model's precision efficiencies and XLA traffic factor
  were fitted to: ResNet-50 v1.5 (DeepLearningExamples TensorFlow/Classification/
  ConvNets/resnet50v1.5/README.md at its current version: 20.06-tf1-py3, XLA on) and
  EfficientNet-B0 (TensorFlow2/Classification/ConvNets/efficientnet_v1/README.md,
  21.09-tf2-py3, XLA on).
- **held out**: figures the fit never saw: BERT-Large SQuAD
  fine-tuning at sequence length 384 (TensorFlow2/LanguageModeling/BERT/README.md,
  21.02-tf2-py3, XLA on) and ELECTRA-base SQuAD fine-tuning, the BERT-base
  architecture, without XLA in TF32/FP32 (TensorFlow2/LanguageModeling/ELECTRA/
  README.md, 20.07-tf2-py3). Also ResNet-50 without XLA (the ResNet README as of
  commit fed7ba99, 20.03-tf1-py3), printed as "other implementation": NVIDIA's model
  normalises with one fused batch-norm kernel, Keras 3's with a dozen kernels (and
  casts to float32 in mixed precision), so the two steps differ in work.

    .venv/bin/python benchmarks/bench_projection.py [--runs 3] [--only resnet50,bert-large]

Tracing the models takes a few minutes on a small CPU (BERT-Large the longest); the
projection times are medians over --runs.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from dataclasses import dataclass

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

FP32, AMP = "float32", "mixed_float16"


@dataclass(frozen=True)
class Published:
    model: str
    gpu: str
    precision: str
    batch: int
    xla: bool
    throughput: float  # images or sequences per second
    kind: str  # fit | held out | other (another implementation of the model)


PUBLISHED = [
    # fit: ResNet-50 v1.5, resnet50v1.5/README.md (HEAD), 1 GPU, XLA
    Published("resnet50", "A100-40GB", FP32, 256, True, 909.0, "fit"),  # TF32
    Published("resnet50", "A100-40GB", AMP, 256, True, 2375.0, "fit"),
    Published("resnet50", "V100", FP32, 128, True, 412.0, "fit"),
    Published("resnet50", "V100", AMP, 256, True, 1270.0, "fit"),
    # other implementation: ResNet-50 v1.5 without XLA, the README at fed7ba99 (V100
    # 16G), whose fused batch norm Keras 3 does not have
    Published("resnet50", "V100", FP32, 128, False, 369.62, "other"),
    Published("resnet50", "V100", AMP, 256, False, 1099.55, "other"),
    # fit: EfficientNet-B0, 224x224, efficientnet_v1/README.md, XLA
    Published("efficientnet-b0", "A100", FP32, 512, True, 1209.0, "fit"),  # TF32
    Published("efficientnet-b0", "A100", AMP, 1024, True, 3454.0, "fit"),
    Published("efficientnet-b0", "V100", FP32, 256, True, 752.0, "fit"),
    Published("efficientnet-b0", "V100", AMP, 512, True, 868.0, "fit"),
    # held out: BERT-Large SQuAD fine-tuning, sequence 384, BERT/README.md, XLA
    Published("bert-large", "A100", FP32, 38, True, 43.9, "held out"),  # TF32
    Published("bert-large", "A100", AMP, 76, True, 134.22, "held out"),
    Published("bert-large", "V100", FP32, 3, True, 9.85, "held out"),  # V100 16GB
    Published("bert-large", "V100", AMP, 6, True, 39.10, "held out"),
    Published("bert-large", "V100", FP32, 8, True, 11.11, "held out"),  # V100 32GB
    Published("bert-large", "V100", AMP, 12, True, 47.06, "held out"),
    # held out: ELECTRA-base SQuAD fine-tuning, sequence 384, ELECTRA/README.md; its
    # script compiles with XLA only in mixed precision
    Published("electra-base", "A100-40GB", FP32, 32, False, 107.0, "held out"),  # TF32
    Published("electra-base", "A100-40GB", AMP, 32, True, 317.0, "held out"),
    Published("electra-base", "V100", FP32, 8, False, 35.0, "held out"),
    Published("electra-base", "V100", AMP, 16, True, 154.0, "held out"),
]


def _image_model(name: str):
    import keras

    if name == "resnet50":
        return keras.applications.ResNet50(weights=None), (224, 224, 3), 1000
    return keras.applications.EfficientNetB0(weights=None), (224, 224, 3), 1000


def _encoder(layers: int, hidden: int, heads: int, inner: int, sequence: int = 384):
    """A BERT encoder with a SQuAD head (start and end logits per token)."""
    import keras

    ids = keras.Input((sequence,), dtype="int32")
    segments = keras.Input((sequence,), dtype="int32")
    x = keras.layers.Embedding(30522, hidden)(ids) + keras.layers.Embedding(2, hidden)(segments)
    x = x + keras.layers.Embedding(512, hidden)(keras.ops.arange(sequence)[None, :])
    x = keras.layers.LayerNormalization(epsilon=1e-12)(x)
    for _ in range(layers):
        attended = keras.layers.MultiHeadAttention(heads, hidden // heads, dropout=0.1)(x, x)
        x = keras.layers.LayerNormalization(epsilon=1e-12)(x + keras.layers.Dropout(0.1)(attended))
        h = keras.layers.Dense(hidden, activation=None)(
            keras.layers.Dense(inner, activation="gelu")(x)
        )
        x = keras.layers.LayerNormalization(epsilon=1e-12)(x + keras.layers.Dropout(0.1)(h))
    start, end = keras.ops.unstack(keras.layers.Dense(2)(x), axis=-1)
    return keras.Model([ids, segments], [start, end])


def traced_train_step(model_name: str, precision: str, xla: bool):
    """The model's training step under ``precision``, traced with an unknown batch,
    with or without XLA, as gpuwhy would audit it."""
    import keras
    import tensorflow as tf

    keras.mixed_precision.set_global_policy(precision)
    if model_name in ("resnet50", "efficientnet-b0"):
        loss_fn = keras.losses.SparseCategoricalCrossentropy()  # the models end in softmax
        model, shape, _ = _image_model(model_name)
        optimizer = keras.optimizers.SGD(0.1, momentum=0.9)

        @tf.function(jit_compile=xla)
        def train_step(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        specs = (tf.TensorSpec([None, *shape], tf.float32), tf.TensorSpec([None], tf.int64))
    else:
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        size = {"bert-large": (24, 1024, 16, 4096), "electra-base": (12, 768, 12, 3072)}
        model = _encoder(*size[model_name])
        optimizer = keras.optimizers.Adam(1e-5)

        @tf.function(jit_compile=xla)
        def train_step(ids, segments, start, end):
            with tf.GradientTape() as tape:
                start_logits, end_logits = model([ids, segments], training=True)
                loss = loss_fn(start, start_logits) + loss_fn(end, end_logits)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        tokens = tf.TensorSpec([None, 384], tf.int32)
        position = tf.TensorSpec([None], tf.int32)
        specs = (tokens, tokens, position, position)
    concrete = train_step.get_concrete_function(*specs)
    keras.mixed_precision.set_global_policy("float32")
    return concrete


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated models")
    args = parser.parse_args()

    from gpuwhy.collect.placement import AuditTarget, audit_functions
    from gpuwhy.facts import Facts
    from gpuwhy.projection.gpus import find_gpu
    from gpuwhy.projection.step import projection_facts

    only = {name for name in args.only.split(",") if name}
    cases = [case for case in PUBLISHED if not only or case.model in only]
    traced = {}
    rows = []
    print(f"{'set':<8} {'model':<15} {'GPU':<10} {'precision':<9} {'XLA':<3} {'batch':>5}  "
          f"{'projected/s (band)':<24} {'published':>9}  {'ratio':>5}  {'in band':<7}  "
          "projection s")  # fmt: skip
    for case in cases:
        key = (case.model, case.precision, case.xla)
        if key not in traced:
            started = time.perf_counter()
            traced[key] = traced_train_step(*key)
            print(f"  (traced {case.model} {case.precision} xla={case.xla} in "
                  f"{time.perf_counter() - started:.0f} s)")  # fmt: skip
        target = [AuditTarget("train_step", traced[key], "bench_projection.py")]
        seconds = []
        for _ in range(args.runs):
            started = time.perf_counter()
            placement, _ = audit_functions(target, batch=case.batch)
            projection = projection_facts(Facts(placement=placement), case.gpu)
            seconds.append(time.perf_counter() - started)
        mid = case.batch / projection.step_s
        low, high = case.batch / projection.step_high_s, case.batch / projection.step_low_s
        ratio = mid / case.throughput
        inside = low <= case.throughput <= high
        rows.append((case, ratio, inside))
        precision = "TF32" if case.precision == FP32 and "A100" in case.gpu else case.precision
        precision = {FP32: "FP32", AMP: "AMP"}.get(precision, precision)
        print(
            f"{case.kind:<8} {case.model:<15} "
            f"{find_gpu(case.gpu).name:<10} {precision:<9} {'on' if case.xla else 'off':<3} "
            f"{case.batch:>5}  {mid:>7,.1f} ({low:,.1f}–{high:,.1f}){'':<4} "
            f"{case.throughput:>9,.1f}  {ratio:>5.2f}  {'yes' if inside else 'no':<7}  "
            f"{statistics.median(seconds):.2f}"
        )
    for name in ("fit", "held out", "other"):
        chosen = [(ratio, inside) for case, ratio, inside in rows if case.kind == name]
        if not chosen:
            continue
        within = sum(1 for ratio, _ in chosen if 0.67 <= ratio <= 1.5)
        covered = sum(1 for _, inside in chosen if inside)
        spread = statistics.median(abs(math.log(ratio)) for ratio, _ in chosen)
        print(f"{name}: {within}/{len(chosen)} ratios within 0.67-1.5x, {covered}/{len(chosen)} "
              f"published figures inside the band, median error x{math.exp(spread):.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
