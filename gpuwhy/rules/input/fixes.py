"""The code to paste for a slow tf.data stage, tailored to what the stage is.

Not a rule: input.bound hands its bottleneck here, and the stage rules
(python-function, sequential-map, cpu-codec) take the part that is theirs. Every fix
names the user's own function (``ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE)``)
and says where it is written, so it can be pasted over the line it replaces.
"""

from __future__ import annotations

from gpuwhy.facts import PipelineFacts, PipelineStage
from gpuwhy.rules.input.common import (
    function_name,
    is_map,
    per_call_s,
    runs_sequentially,
    vectorisable,
)

FILE_READERS = ("TFRecord", "TextLine", "FixedLengthRecord")
COMPRESSION = ("GZIP", "ZLIB")
JPEG_DECODERS = ("DecodeJpeg", "DecodeAndCropJpeg", "DecodeImage")


def _where(stage: PipelineStage) -> str:
    parts = []
    if stage.location:
        parts.append(f"written at {stage.location}")
    if stage.function_location and stage.function_location != stage.location:
        parts.append(f"{function_name(stage)} defined at {stage.function_location}")
    return f"   # {', '.join(parts)}" if parts else ""


def parallel_map(stage: PipelineStage) -> list[str]:
    fn = function_name(stage)
    lines = [f"ds = ds.map({fn}, num_parallel_calls=tf.data.AUTOTUNE){_where(stage)}"]
    if "batch" in stage.written_as:
        lines.append("ds = ds.batch(batch_size)   # TF fuses map+batch again, in parallel")
    return lines


def vectorise(stage: PipelineStage) -> list[str]:
    fn = function_name(stage)
    per_call = per_call_s(stage)
    cost = f" costs {per_call * 1e6:,.0f} µs per call," if per_call is not None else ""
    return [
        f"# {fn}{cost} mostly tf.data's per-element overhead: batch first and run it",
        "# once per batch (written for a leading batch dimension: tf.io.parse_example",
        "# instead of parse_single_example, ops that broadcast over the batch)",
        f"ds = ds.batch(batch_size).map({fn}, num_parallel_calls=tf.data.AUTOTUNE){_where(stage)}",
        f"# (in place of .map({fn}) ... .batch(batch_size))",
    ]


def stateless_random(stage: PipelineStage) -> list[str]:
    fn = function_name(stage)
    return [
        f"# {fn} draws with stateful random ops (tf.random.uniform, tf.image.random_*), so TF",
        "# keeps it sequential. Give each element a seed and use the stateless ops",
        "# (tf.random.stateless_uniform, tf.image.stateless_random_flip_left_right,",
        "# tf.image.stateless_random_crop ...): same augmentation, reproducible, parallel.",
        "seeds = tf.data.Dataset.random(seed=42).batch(2, drop_remainder=True)  # a [2] seed each",
        "ds = tf.data.Dataset.zip((ds, seeds))",
        f"ds = ds.map({fn}, num_parallel_calls=tf.data.AUTOTUNE){_where(stage)}",
        f"# {fn}(element, seed): e.g. tf.image.stateless_random_flip_left_right(image, seed)",
        "# (or seeds drawn inside from rng = tf.random.Generator.from_seed(42) with",
        "# rng.make_seeds(1)[:, 0]: parallel too, since num_parallel_calls is explicit)",
    ] + (["ds = ds.batch(batch_size)"] if "batch" in stage.written_as else [])


def python_function(stage: PipelineStage) -> list[str]:
    fn = function_name(stage)
    return [
        f"# {fn} calls Python (tf.py_function / tf.numpy_function): one thread at a time holds",
        "# the GIL. Written with TF ops (tf.io, tf.image, tf.strings, tf.math) it runs in C++",
        "# on every core, and TF parallelises it by itself:",
        f"ds = ds.map({fn}, num_parallel_calls=tf.data.AUTOTUNE){_where(stage)}",
        "# Python that must stay: parallel calls still help where it releases the GIL",
        "# (NumPy on large arrays, OpenCV, PIL decoding, file reads):",
        f"ds = ds.map({fn}, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)",
        "# and a pure NumPy function declared so, tf.numpy_function(f, args, Tout,",
        "# stateful=False), may be parallelised and cached by TF",
    ]


def parallel_python(stage: PipelineStage) -> list[str]:
    """Parallel calls of a Python map: the part of the fix that keeps the Python."""
    fn = function_name(stage)
    return [
        f"# {fn} calls Python, which TF keeps sequential. Parallel calls overlap where the",
        "# Python releases the GIL (sleeps, I/O, NumPy/OpenCV on large arrays); rewriting",
        "# it with TF ops is the larger fix (input.python-function)",
        f"ds = ds.map({fn}, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)"
        f"{_where(stage)}",
    ]


def generator(stage: PipelineStage) -> list[str]:
    fn = function_name(stage)
    where = f"   # instead of from_generator at {stage.location}" if stage.location else ""
    return [
        f"# {fn} yields elements from Python, one at a time, under the GIL.",
        "# Arrays that fit in memory: slice them, no Python per element",
        f"ds = tf.data.Dataset.from_tensor_slices((features, labels)){where}",
        "# Data in files: write TFRecord shards once, then read several at a time",
        "ds = tf.data.TFRecordDataset(shards, num_parallel_reads=tf.data.AUTOTUNE).map(",
        "    parse, num_parallel_calls=tf.data.AUTOTUNE)",
        "# A generator that must stay: one per shard, interleaved on several threads (helps",
        "# where it waits on I/O or releases the GIL)",
        "ds = tf.data.Dataset.from_tensor_slices(shard_names).interleave(",
        f"    lambda shard: tf.data.Dataset.from_generator({fn}, args=(shard,),",
        "                                                output_signature=signature),",
        "    cycle_length=4, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)",
    ]


def is_reader(stage: PipelineStage) -> bool:
    """A file reader, whatever node TF runs it as: TFRecordDataset(files) is a FlatMap
    over the file names with one TFRecord node per file inside, and with
    num_parallel_reads a parallel interleave."""
    return stage.name in FILE_READERS or any(
        w.removesuffix("Dataset") in FILE_READERS for w in stage.written_as
    )


def _reader_class(stage: PipelineStage) -> str:
    for name in (stage.name, *stage.written_as):
        if name.removesuffix("Dataset") in FILE_READERS:
            return name.removesuffix("Dataset")
    return "TFRecord"


def reader(stage: PipelineStage) -> list[str]:
    compression = next((c for c in stage.codec_ops if c in COMPRESSION), None)
    kind = _reader_class(stage)
    args = f', compression_type="{compression}"' if compression else ""
    if stage.parallelism and stage.parallelism > 1:
        first = (
            f"# {kind}Dataset already reads {stage.parallelism} files at once{_where(stage)}: "
            "more, smaller shards let it read more"
        )
    else:
        first = f"# {kind}Dataset reads one file at a time{_where(stage)}: read several in parallel"
    lines = [
        first,
        f"ds = tf.data.{kind}Dataset(files{args}, num_parallel_reads=tf.data.AUTOTUNE)",
        "# or, for more control:",
        "ds = tf.data.Dataset.from_tensor_slices(files).interleave(",
        f"    lambda f: tf.data.{kind}Dataset(f{args}), cycle_length=8,",
        "    num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)",
    ]
    if compression:
        lines += [
            f"# {compression} inflates each file in one stream on one core: shards written",
            "# without compression read faster where disk space allows",
        ]
    return lines


def interleave(stage: PipelineStage) -> list[str]:
    fn = function_name(stage)
    return [
        f"# several inputs open and read at once{_where(stage)}",
        f"ds = ds.interleave({fn}, cycle_length=8, num_parallel_calls=tf.data.AUTOTUNE,",
        "                   deterministic=False)",
    ]


def decode(stage: PipelineStage) -> list[str]:
    """Decode/decompress in a map: on all cores, once, or on the GPU outside TF."""
    fn = function_name(stage)
    ops = ", ".join(stage.codec_ops)
    lines = [
        f"# {fn} decodes on the CPU ({ops}): TensorFlow has no GPU kernel for it",
        f"ds = ds.map({fn}, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)"
        f"{_where(stage)}",
    ]
    if stage.random or stage.stateful:
        lines.append(f"# {fn} also draws random numbers: decode in a map of its own, cache that")
    else:
        lines.append(
            "ds = ds.cache()   # decoded once, not every epoch, where it fits (or .cache(path))"
        )
    if any(op in JPEG_DECODERS for op in stage.codec_ops):
        lines += [
            "# JPEG with a random crop: decode only the window",
            "#   tf.image.decode_and_crop_jpeg(data, crop_window, channels=3)",
            "# JPEG decoding on the GPU exists outside TensorFlow: keep the encoded bytes",
            "# through shuffle and batch, then NVIDIA DALI's fn.decoders.image(device='mixed')",
            "# (nvJPEG) decodes the batch",
        ]
    if any(op in ("DecodePng", "DecodeGif", "DecodeBmp", "DecodeWebP") for op in stage.codec_ops):
        lines += [
            "# PNG/GIF/BMP decode on the host whatever you use (no GPU decoder in TF, DALI",
            "# decodes them on the CPU too): decode once and keep the pixels, cached or",
            "# stored raw (uint8 tensors in the TFRecords)",
        ]
    if "DecodeCompressed" in stage.codec_ops:
        lines += [
            "# tf.io.decode_compressed inflates on one core per element: store the",
            "# records uncompressed, or cache them after decompression",
        ]
    return lines


def batch(stage: PipelineStage) -> list[str]:
    return [
        "# the batch copies every element into one tensor: copy in parallel",
        f"ds = ds.batch(batch_size, num_parallel_calls=tf.data.AUTOTUNE){_where(stage)}",
    ]


def filter_(stage: PipelineStage) -> list[str]:
    fn = function_name(stage)
    return [
        f"# filter runs {fn} one element at a time: let TF parallelise it",
        "options = tf.data.Options()",
        "options.experimental_optimization.filter_parallelization = True",
        "ds = ds.with_options(options)",
        "# or filter before the expensive maps, so dropped elements cost nothing",
    ]


def generic() -> list[str]:
    return [
        "ds = (ds.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE)   # parallel, "
        "not one element at a time",
        "        .cache()                       # when the decoded data fits in memory",
        "        .batch(batch_size)",
        "        .prefetch(tf.data.AUTOTUNE))   # the next batch is ready when the step ends",
    ]


def for_stage(pipeline: PipelineFacts, index: int, vectorise_below_s: float) -> list[str]:
    """The fix for the pipeline's slow stage ``index``, by what the stage is."""
    stage = pipeline.stages[index]
    if stage.kind == "generator" or "from_generator" in stage.written_as:
        return generator(stage)
    if stage.python:
        return python_function(stage)
    if is_reader(stage):
        return reader(stage)
    if is_map(stage):
        lines: list[str] = []
        if runs_sequentially(stage, pipeline.autotune):
            lines = (
                stateless_random(stage) if stage.random and stage.stateful else parallel_map(stage)
            )
        if vectorisable(pipeline, index, vectorise_below_s):
            lines += vectorise(stage)
        if stage.codec_ops:
            lines += decode(stage)
        if lines:
            return lines
        lines = [
            f"# {function_name(stage)} already runs on {stage.parallelism or 'several'} "
            "threads: make each call cheaper, do it once, or add cores",
            f"ds = ds.map({function_name(stage)}, num_parallel_calls=tf.data.AUTOTUNE,"
            f" deterministic=False){_where(stage)}",
        ]
        if not (stage.random or stage.stateful):
            lines.append("ds = ds.cache()   # its result is the same every epoch: compute it once")
        return lines
    if stage.kind == "interleave":
        return interleave(stage)
    if stage.kind == "batch":
        return batch(stage)
    if stage.kind == "filter":
        return filter_(stage)
    return generic()
