"""The GPU projection against published and measured training throughputs.

Projects the training step of well-known models (built with Keras here, traced with an
unknown batch as gpuwhy audits a user's step) onto the GPU, precision, batch size and
XLA setting of each figure in ``projection_figures.py`` (its sources are there and in
docs/projection.md) and prints the projection beside the figure with their ratio
(projected over measured: above 1 where the projection is too fast):

- throughputs (NVIDIA's single-GPU TensorFlow results, tf_cnn_benchmarks, Lambda's
  TensorFlow logs, and current software on Hopper: torchvision's ResNet-50 on the H100
  measured for this project, Lambda's PyTorch BERT in TF32), with the projection's band
  and whether the figure is inside it;
- ratios of two GPUs in one harness (Lambda's PyTorch harness, same container and
  scripts): Hopper, Ada and Blackwell against the A100 or the H100; a pair whose
  reference GPU its harness ran far from its projection is "not comparable" (printed,
  not scored);
- two-point batch sweeps (tf_cnn_benchmarks on RTX 3090/4090).

Each row is "fit" (its architecture's constants were fitted to it:
tools/fit_projection.py) or "held out"; the summary gives, per kind and architecture,
how many are within 0.67-1.5x and the median and worst error. Then ResNet-50's
projected throughput by batch on A100 and H100 (the fixed cost per kernel at work).
Also times the projection of each audited step (the audit itself: bench_audit.py).

    .venv/bin/python benchmarks/bench_projection.py [--runs 3] [--only resnet50,bert-large]
        [--cache DIR]

Tracing and auditing the models takes minutes on a 2-core CPU (BERT-Large the longest);
``--cache`` keeps each audited step, so a second run takes seconds. The projection times
are medians over --runs.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from projection_figures import AMP, FP32, PUBLISHED, RELATIVE, SWEEPS, Published, Relative, Sweep

IMAGE_MODELS = {  # name: input size
    "resnet50": 224,
    "resnet50-fused": 224,
    "resnet50v1.5-fused": 224,
    "efficientnet-b0": 224,
    "efficientnet-b4": 380,
    "efficientnetv2-s": 300,
    "resnext101": 224,
    "se-resnext101": 224,
}


def _image_model(name: str):
    import keras

    size = IMAGE_MODELS[name]
    shape = (size, size, 3)
    if "resnext101" in name:
        return _resnext(shape, se=name.startswith("se-")), shape
    if name.endswith("-fused"):
        return _resnet50_fused(shape, v15=name.startswith("resnet50v1.5")), shape
    build = {
        "resnet50": keras.applications.ResNet50,
        "efficientnet-b0": keras.applications.EfficientNetB0,
        "efficientnet-b4": keras.applications.EfficientNetB4,
        "efficientnetv2-s": keras.applications.EfficientNetV2S,
    }[name]
    return build(weights=None, input_shape=shape), shape


def _resnext(shape, se: bool, cardinality: int = 32):
    """ResNeXt-101 32x4d as DeepLearningExamples builds it (model/resnet.py,
    blocks/resnet_bottleneck_block.py): a 7x7 stem, bottlenecks of [3, 4, 23, 3] with
    1x1, grouped 3x3 (32 groups, the stride) and 1x1 convolutions of widths 128-1024
    (outputs twice that), each followed by batch norm; with ``se``, a squeeze-excite
    (ratio 16) on each bottleneck's output before the residual add."""
    import keras
    from keras import layers

    def conv_bn(x, filters, kernel, stride=1, groups=1, relu=True):
        x = layers.Conv2D(filters, kernel, stride, "same", groups=groups, use_bias=False)(x)
        x = layers.BatchNormalization(momentum=0.9, epsilon=1e-5)(x)
        return layers.ReLU()(x) if relu else x

    inputs = keras.Input(shape)
    x = conv_bn(inputs, 64, 7, 2)
    x = layers.MaxPooling2D(3, 2, "same")(x)
    for stage, (count, width) in enumerate(zip((3, 4, 23, 3), (128, 256, 512, 1024))):
        for index in range(count):
            stride = 2 if stage > 0 and index == 0 else 1
            shortcut = conv_bn(x, 2 * width, 1, stride, relu=False) if index == 0 else x
            y = conv_bn(x, width, 1)
            y = conv_bn(y, width, 3, stride, groups=cardinality)
            y = conv_bn(y, 2 * width, 1, relu=False)
            if se:
                squeeze = layers.GlobalAveragePooling2D()(y)
                squeeze = layers.Dense(2 * width // 16, activation="relu")(squeeze)
                squeeze = layers.Dense(2 * width, activation="sigmoid")(squeeze)
                y = y * layers.Reshape((1, 1, 2 * width))(squeeze)
            x = layers.ReLU()(layers.Add()([y, shortcut]))
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.Dense(1000, activation="softmax")(x))


def _fused_batch_norm():
    """Batch norm as one FusedBatchNormV3 kernel (and one gradient kernel), as
    tf_cnn_benchmarks and DeepLearningExamples' ConvNets normalise: Keras 3's
    BatchNormalization computes it from a dozen kernels, which only XLA fuses."""
    import keras
    import tensorflow as tf

    class FusedBatchNorm(keras.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(autocast=False, dtype="float32", **kwargs)

        def build(self, shape):
            channels = (shape[-1],)
            self.gamma = self.add_weight(channels, "ones", name="gamma", dtype="float32")
            self.beta = self.add_weight(channels, "zeros", name="beta", dtype="float32")
            self.mean = self.add_weight(
                channels, "zeros", name="mean", dtype="float32", trainable=False
            )
            self.var = self.add_weight(
                channels, "ones", name="var", dtype="float32", trainable=False
            )

        def call(self, x, training=False):
            y, mean, var = tf.compat.v1.nn.fused_batch_norm(
                x, self.gamma.value, self.beta.value, epsilon=1e-5, is_training=True
            )
            if training:
                self.mean.assign(0.9 * self.mean.value + 0.1 * mean)
                self.var.assign(0.9 * self.var.value + 0.1 * var)
            return y

    return FusedBatchNorm()


def _resnet50_fused(shape, v15: bool):
    """ResNet-50 with fused batch norm: v1 (tf_cnn_benchmarks: a bottleneck's stride
    on its first 1x1 convolution) or v1.5 (DeepLearningExamples: on its 3x3)."""
    import keras
    from keras import layers

    def conv_bn(x, filters, kernel, stride=1, relu=True):
        x = layers.Conv2D(filters, kernel, stride, "same", use_bias=False)(x)
        x = _fused_batch_norm()(x)
        return layers.ReLU()(x) if relu else x

    inputs = keras.Input(shape)
    x = conv_bn(inputs, 64, 7, 2)
    x = layers.MaxPooling2D(3, 2, "same")(x)
    for stage, (count, width) in enumerate(zip((3, 4, 6, 3), (64, 128, 256, 512))):
        for index in range(count):
            stride = 2 if stage > 0 and index == 0 else 1
            shortcut = conv_bn(x, 4 * width, 1, stride, relu=False) if index == 0 else x
            y = conv_bn(x, width, 1, 1 if v15 else stride)
            y = conv_bn(y, width, 3, stride if v15 else 1)
            y = conv_bn(y, 4 * width, 1, relu=False)
            x = layers.ReLU()(layers.Add()([y, shortcut]))
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dense(1000)(x)
    return keras.Model(inputs, layers.Activation("softmax", dtype="float32")(x))


def _unet():
    """U-Net as DeepLearningExamples' UNet_Medical builds it (model/layers.py,
    model/unet.py): unpadded 3x3 convolutions of 64-1024 filters, max-pooling down,
    3x3 stride-2 transposed convolutions up, the skip connections centre-cropped and
    concatenated, dropout 0.5 at the bottom, two classes per pixel."""
    import keras
    from keras import layers

    def twice(x, filters):
        x = layers.Conv2D(filters, 3, activation="relu")(x)
        return layers.Conv2D(filters, 3, activation="relu")(x)

    def up(x, filters):
        return layers.Conv2DTranspose(filters // 2, 3, 2, "same", activation="relu")(x)

    def crop_concat(x, skip):
        margin = (skip.shape[1] - x.shape[1]) // 2
        return layers.Concatenate()([x, layers.Cropping2D(margin)(skip)])

    inputs = keras.Input((572, 572, 1))
    skips, x = [], inputs
    for filters in (64, 128, 256, 512):
        x = twice(x, filters)
        skips.append(x)
        x = layers.MaxPooling2D(2, 2)(x)
    x = up(layers.Dropout(0.5)(twice(x, 1024)), 1024)
    for filters in (512, 256, 128):
        x = up(twice(crop_concat(x, skips.pop()), filters), filters)
    x = twice(crop_concat(x, skips.pop()), 64)
    return keras.Model(inputs, layers.Conv2D(2, 1)(x))


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
    if model_name in IMAGE_MODELS:
        loss_fn = keras.losses.SparseCategoricalCrossentropy()  # the models end in softmax
        model, shape = _image_model(model_name)
        optimizer = keras.optimizers.SGD(0.1, momentum=0.9)

        @tf.function(jit_compile=xla)
        def train_step(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        specs = (tf.TensorSpec([None, *shape], tf.float32), tf.TensorSpec([None], tf.int64))
    elif model_name == "unet-medical":
        model = _unet()
        optimizer = keras.optimizers.Adam(1e-4)

        @tf.function(jit_compile=xla)
        def train_step(x, y):
            # runtime/losses.py: cross-entropy plus dice over the flattened pixels
            with tf.GradientTape() as tape:
                logits = tf.reshape(
                    tf.cast(model(x, training=True), tf.float32), [-1, 388 * 388, 2]
                )
                labels = tf.reshape(y, [-1, 388 * 388, 2])
                crossentropy = tf.reduce_mean(
                    tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits)
                )
                predicted = tf.nn.softmax(logits, axis=-1)
                overlap = tf.reduce_sum(predicted * labels, axis=1)
                union = tf.reduce_sum(predicted * predicted + labels * labels, axis=1)
                dice = tf.reduce_mean((2.0 * overlap + 1e-6) / (union + 1e-6), axis=0)
                loss = crossentropy + tf.reduce_mean(1.0 - dice)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        specs = (
            tf.TensorSpec([None, 572, 572, 1], tf.float32),
            tf.TensorSpec([None, 388, 388, 2], tf.float32),
        )
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


def _cache_file(folder: str, case: Published) -> str:
    return os.path.join(
        folder, f"{case.model}-{case.precision}-xla{int(case.xla)}-{case.batch}.pkl"
    )


def cached(folder: str, case: Published):
    """The audited step of ``case`` kept by an earlier run (None: none kept)."""
    import pickle

    if not folder or not os.path.exists(_cache_file(folder, case)):
        return None
    with open(_cache_file(folder, case), "rb") as kept:
        return pickle.load(kept)


def keep(folder: str, case: Published, placement) -> None:
    import pickle

    if folder:
        os.makedirs(folder, exist_ok=True)
        with open(_cache_file(folder, case), "wb") as out:
            pickle.dump(placement, out)


class Projector:
    """Projects the figures' traced steps, each audited once per batch (kept in ``cache``
    where given)."""

    def __init__(self, cache: str = "") -> None:
        self.cache = cache
        self.traced: dict[tuple, Any] = {}
        self.placements: dict[tuple, Any] = {}

    def placement(self, model: str, precision: str, xla: bool, batch: int) -> Any:
        key = (model, precision, xla, batch)
        if key not in self.placements:
            from gpuwhy.collect.placement import AuditTarget, audit_functions

            case = Published(model, "A100", precision, batch, xla, 1.0, "fit")
            kept = cached(self.cache, case)
            if kept is None:
                if key[:3] not in self.traced:
                    started = time.perf_counter()
                    self.traced[key[:3]] = traced_train_step(model, precision, xla)
                    print(f"  (traced {model} {precision} xla={xla} in "
                          f"{time.perf_counter() - started:.0f} s)")  # fmt: skip
                target = [AuditTarget("train_step", self.traced[key[:3]], "bench_projection.py")]
                kept, _ = audit_functions(target, batch=batch)
                keep(self.cache, case, kept)
            self.placements[key] = kept
        return self.placements[key]

    def throughput(self, model: str, gpu: str, precision: str, xla: bool, batch: int) -> float:
        from gpuwhy.gpu_specs import find_gpu
        from gpuwhy.projection.cost import project_step

        found = project_step(self.placement(model, precision, xla, batch), find_gpu(gpu))
        assert found is not None
        return batch / found.step.mid

    def comparable(self, row: Row) -> bool:
        """A ratio's reference GPU ran in its harness about as fast as projected (within
        COMPARABLE): else the ratio measures the harness as much as the generations."""
        f = row.figure
        if not isinstance(f, Relative) or not f.over_value:
            return True
        own = self.throughput(f.model, f.over, f.precision, f.xla, f.over_batch) / f.over_value
        return 1 / COMPARABLE <= own <= COMPARABLE

    def projected(self, row: Row) -> float:
        """The projected figure: a throughput, or a ratio of two."""
        f = row.figure
        mine = self.throughput(f.model, f.gpu, f.precision, f.xla, f.batch)
        if isinstance(f, Sweep):
            return mine / self.throughput(f.model, f.gpu, f.precision, f.xla, f.over_batch)
        if isinstance(f, Relative):
            return mine / self.throughput(f.model, f.over, f.precision, f.xla, f.over_batch)
        return mine

    def error(self, row: Row) -> float:
        """Projected over measured: above 1 where the projection is too fast."""
        return self.projected(row) / row.measured


COMPARABLE = 1.33


@dataclass
class Row:
    kind: str  # fit | held out | sweep | not comparable
    arch: str  # architecture, and "GeForce" for those cards (architectures.family)
    precision: str  # fp32 (TF32 too) | fp16
    xla: bool
    label: str
    measured: float
    figure: Any


def rows(projector: Projector | None = None) -> list[Row]:
    """Every figure as a row; with ``projector``, relative figures whose reference GPU
    its harness ran far from its projection are "not comparable"."""
    from gpuwhy.gpu_specs import find_gpu
    from gpuwhy.projection.architectures import family

    def row(kind, figure, label, measured):
        precision = "fp32" if figure.precision == FP32 else "fp16"
        arch = family(find_gpu(figure.gpu))
        return Row(kind, arch, precision, figure.xla, label, measured, figure)

    found = [
        row(
            p.kind,
            p,
            f"{p.model} {p.gpu} {_precision(p)} b{p.batch} xla={int(p.xla)}",
            p.throughput,
        )
        for p in PUBLISHED
    ]
    found += [
        row(
            r.kind,
            r,
            f"{r.model} {r.gpu} b{r.batch} / {r.over} b{r.over_batch} {_precision(r)}",
            r.ratio,
        )
        for r in RELATIVE
    ]
    found += [
        row("sweep", s, f"{s.model} {s.gpu} b{s.batch} / b{s.over_batch} {_precision(s)}", s.ratio)
        for s in SWEEPS
    ]
    if projector is not None:
        for each in found:
            if not projector.comparable(each):
                each.kind = "not comparable"
    return found


def _precision(figure: Any) -> str:
    from gpuwhy.gpu_specs import find_gpu

    if figure.precision == AMP:
        return "AMP"
    return "TF32" if find_gpu(figure.gpu).tf32_flops else "FP32"


def worst(errors: Iterable[float]) -> tuple[float, float]:
    """(largest, median) |log error|."""
    logs = [abs(math.log(e)) for e in errors]
    return (max(logs), statistics.median(logs)) if logs else (0.0, 0.0)


def summary(projector: Projector, chosen: list[Row]) -> None:
    """Per kind and architecture: how many within 0.67-1.5x, the median and worst error."""
    for kind in ("fit", "held out", "sweep", "not comparable"):
        for arch in sorted({r.arch for r in chosen}):
            errors = [projector.error(r) for r in chosen if r.kind == kind and r.arch == arch]
            if not errors:
                continue
            within = sum(1 for e in errors if 0.67 <= e <= 1.5)
            big, typical = worst(errors)
            print(f"- {kind}, {arch}: {within}/{len(errors)} within 0.67-1.5x, median error "
                  f"x{math.exp(typical):.2f}, worst x{math.exp(big):.2f}")  # fmt: skip


SWEEP_GPUS = ("A100", "H100")
SWEEP_BATCHES = (32, 64, 128, 256)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated models")
    parser.add_argument(
        "--cache",
        default="",
        help="folder keeping each audited step (per model, precision, XLA and batch): a "
        "second run re-projects in seconds instead of tracing for half an hour",
    )
    args = parser.parse_args()

    from gpuwhy.facts import Facts
    from gpuwhy.projection.step import projection_facts

    only = {name for name in args.only.split(",") if name}
    projector = Projector(args.cache)
    every = [r for r in rows(projector) if not only or r.figure.model in only]
    print(f"{'set':<14} {'architecture':<13} {'figure':<58} {'projected (band)':<26} "
          f"{'measured':>9}  {'ratio':>5}  {'in band':<7}  projection ms")  # fmt: skip
    for row in every:
        figure = row.figure
        band, seconds = "", []
        if isinstance(figure, Published):
            placement = projector.placement(
                figure.model, figure.precision, figure.xla, figure.batch
            )
            for _ in range(args.runs):
                started = time.perf_counter()
                found = projection_facts(Facts(placement=placement), figure.gpu)
                seconds.append(time.perf_counter() - started)
            low, high = figure.batch / found.step_high_s, figure.batch / found.step_low_s
            band = f"({low:,.1f}–{high:,.1f})"
            inside = "yes" if low <= row.measured <= high else "no"
        else:
            inside = ""
        projected = projector.projected(row)
        print(f"{row.kind:<14} {row.arch:<13} {row.label:<58} {projected:>9,.2f} {band:<16} "
              f"{row.measured:>9,.2f}  {projected / row.measured:>5.2f}  {inside:<7}  "
              f"{1000 * statistics.median(seconds):.1f}" if seconds else
              f"{row.kind:<14} {row.arch:<13} {row.label:<58} {projected:>9,.2f} {band:<16} "
              f"{row.measured:>9,.2f}  {projected / row.measured:>5.2f}")  # fmt: skip
    print()
    summary(projector, every)
    published = [r for r in every if isinstance(r.figure, Published)]
    for kind in ("fit", "held out"):
        chosen = [r for r in published if r.kind == kind]
        covered = 0
        for r in chosen:
            f = r.figure
            found = projection_facts(
                Facts(placement=projector.placement(f.model, f.precision, f.xla, f.batch)), f.gpu
            )
            covered += f.batch / found.step_high_s <= r.measured <= f.batch / found.step_low_s
        if chosen:
            print(f"- {kind}: {covered}/{len(chosen)} published throughputs inside the band")
    if only and "resnet50" not in only:
        return
    print("\nResNet-50 with XLA, projected images/s by batch (and over batch 256):")
    for gpu in SWEEP_GPUS:
        for precision in (FP32, AMP):
            values = [
                projector.throughput("resnet50", gpu, precision, True, b) for b in SWEEP_BATCHES
            ]
            cells = "  ".join(
                f"{b}: {v:,.0f} ({v / values[-1]:.2f})" for b, v in zip(SWEEP_BATCHES, values)
            )
            print(f"  {gpu:<5} {'AMP' if precision == AMP else 'TF32':<4} {cells}")


if __name__ == "__main__":
    main()
