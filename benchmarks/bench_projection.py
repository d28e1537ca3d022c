"""The GPU projection against published TensorFlow training throughputs.

Projects the training step of well-known models (built with Keras here, traced with an
unknown batch as gpuwhy audits a user's step) onto the GPU, precision, batch size and
XLA setting of NVIDIA's published single-GPU TensorFlow results, and prints the
projected throughput (middle, and the band) beside the published figure with their
ratio. Also times the projection itself, after tracing (budget: 1 s for ResNet-50).

Two sets (docs/projection.md says where each figure comes from):

- **fit**: the fourteen figures the model's efficiencies, XLA traffic factor and
  depthwise factor were fitted to (all with XLA: the model without XLA has no fitted
  constant of its own): ResNet-50 v1.5 (DeepLearningExamples TensorFlow/
  Classification/ConvNets/resnet50v1.5/README.md at its current version: 20.06-tf1-py3,
  XLA on), EfficientNet-B0 (TensorFlow2/Classification/ConvNets/efficientnet_v1/
  README.md, 21.09-tf2-py3, XLA on) and BERT-Large SQuAD fine-tuning at sequence
  length 384 (TensorFlow2/LanguageModeling/BERT/README.md, 21.02-tf2-py3, XLA on;
  held out before the fit that split matmuls from convolutions).
- **held out**: figures the fit never saw: ELECTRA-base SQuAD fine-tuning, the BERT-base
  architecture, without XLA in TF32/FP32 (TensorFlow2/LanguageModeling/ELECTRA/
  README.md, 20.07-tf2-py3); EfficientNet-B4 and EfficientNetV2-S (efficientnet_v1 and
  efficientnet_v2 READMEs, 21.09-tf2-py3); ResNeXt-101 32x4d and SE-ResNeXt-101 32x4d
  (TensorFlow/Classification/ConvNets READMEs, 20.06-tf1-py3); U-Net
  (TensorFlow2/Segmentation/UNet_Medical/README.md, 21.02-tf2-py3). Fourteen more,
  recorded and printed against the model before it changed (docs/projection.md): ResNet-50
  without XLA, as NVIDIA's and tf_cnn_benchmarks' implementations build it (one fused
  batch-norm kernel per layer), on V100 (the ResNet README at fed7ba99, 20.03-tf1-py3)
  and RTX 3090/4090 (tf_cnn_benchmarks, server-gear.com); ResNet-50 with XLA on a Quadro
  RTX 8000 (Lambda's deeplearning-benchmark logs); BERT-Large SQuAD at small batches,
  NVIDIA's TF1 implementation (TensorFlow/LanguageModeling/BERT/README.md, 20.06),
  on A100 40GB and V100.

    .venv/bin/python benchmarks/bench_projection.py [--runs 3] [--only resnet50,bert-large]
        [--second]

Tracing the models takes ten minutes or more on a 2-core CPU (BERT-Large the longest);
the projection times are medians over --runs.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from projection_figures import AMP, FP32, PUBLISHED, Published

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated models")
    parser.add_argument("--second", action="store_true", help="the second held-out set only")
    parser.add_argument(
        "--cache",
        default="",
        help="folder keeping each audited step (per model, precision, XLA and batch): a "
        "second run re-projects in seconds instead of tracing for half an hour",
    )
    args = parser.parse_args()

    from gpuwhy.collect.placement import AuditTarget, audit_functions
    from gpuwhy.facts import Facts
    from gpuwhy.gpu_specs import find_gpu
    from gpuwhy.projection.step import projection_facts

    only = {name for name in args.only.split(",") if name}
    cases = [case for case in PUBLISHED if not only or case.model in only]
    cases = [case for case in cases if case.second or not args.second]
    traced = {}
    rows = []
    print(f"{'set':<8} {'model':<18} {'GPU':<15} {'precision':<9} {'XLA':<3} {'batch':>5}  "
          f"{'projected/s (band)':<24} {'published':>9}  {'ratio':>5}  {'in band':<7}  "
          "projection s")  # fmt: skip
    for case in cases:
        key = (case.model, case.precision, case.xla)
        kept = cached(args.cache, case)
        if kept is None and key not in traced:
            started = time.perf_counter()
            traced[key] = traced_train_step(*key)
            print(f"  (traced {case.model} {case.precision} xla={case.xla} in "
                  f"{time.perf_counter() - started:.0f} s)")  # fmt: skip
        seconds = []
        for _ in range(args.runs):
            started = time.perf_counter()
            if kept is None:
                target = [AuditTarget("train_step", traced[key], "bench_projection.py")]
                placement, _ = audit_functions(target, batch=case.batch)
                keep(args.cache, case, placement)
            else:
                placement = kept
            projection = projection_facts(Facts(placement=placement), case.gpu)
            seconds.append(time.perf_counter() - started)
        mid = case.batch / projection.step_s
        low, high = case.batch / projection.step_high_s, case.batch / projection.step_low_s
        ratio = mid / case.throughput
        inside = low <= case.throughput <= high
        rows.append((case, ratio, inside))
        tf32 = case.precision == FP32 and find_gpu(case.gpu).tf32_flops
        precision = "TF32" if tf32 else case.precision
        precision = {FP32: "FP32", AMP: "AMP"}.get(precision, precision)
        print(
            f"{case.kind:<8} {case.model:<18} "
            f"{find_gpu(case.gpu).name:<15} {precision:<9} {'on' if case.xla else 'off':<3} "
            f"{case.batch:>5}  {mid:>7,.1f} ({low:,.1f}–{high:,.1f}){'':<4} "
            f"{case.throughput:>9,.1f}  {ratio:>5.2f}  {'yes' if inside else 'no':<7}  "
            f"{statistics.median(seconds):.2f}"
        )
    groups = {
        "fit": lambda case: case.kind == "fit",
        "held out": lambda case: case.kind == "held out",
        "held out, second set": lambda case: case.second,
    }
    for name, member in groups.items():
        chosen = [(ratio, inside) for case, ratio, inside in rows if member(case)]
        if not chosen:
            continue
        within = sum(1 for ratio, _ in chosen if 0.67 <= ratio <= 1.5)
        covered = sum(1 for _, inside in chosen if inside)
        spread = statistics.median(abs(math.log(ratio)) for ratio, _ in chosen)
        print(f"{name}: {within}/{len(chosen)} ratios within 0.67-1.5x, {covered}/{len(chosen)} "
              f"published figures inside the band, median error x{math.exp(spread):.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
