"""The code to paste for a slow tf.data stage, tailored to what the stage is and to how
it is written.

Not a rule: input.bound hands its bottleneck here, and the stage rules
(python-function, sequential-map, cpu-codec, no-cache, no-prefetch) take the part that
is theirs. Every fix starts from the call as the user wrote it (``stage.written_calls``,
rewritten by dataset_calls.py), so it keeps their dataset variable, function and
arguments, and says nothing that is already written. A change is shown as

    # train.py:47: in place of: ds.map(augment)
    ds.map(augment, num_parallel_calls=tf.data.AUTOTUNE)

the line after the marker replacing the call named in it; other code lines are new
statements to add before it, and ``# or: `` lines are alternatives. What the facts do not
name is a ``<placeholder>``, never an undefined variable.
"""

from __future__ import annotations

from collections.abc import Sequence

import gpuwhy.source_calls as source_calls
from gpuwhy.derived.pipeline_stages import (
    ends_buffered,
    is_map,
    per_call_s,
    per_element_s,
    runs_sequentially,
    same_every_pass,
    varies_before,
    vectorisable,
)
from gpuwhy.facts import PipelineFacts, PipelineStage
from gpuwhy.fixes import dataset_calls
from gpuwhy.fixes.dataset_calls import AUTOTUNE, DATASET
from gpuwhy.fixes.pipeline_evidence import function_code, function_name

FILE_READERS = ("TFRecord", "TextLine", "FixedLengthRecord")
COMPRESSION = ("GZIP", "ZLIB")
JPEG_DECODERS = ("DecodeJpeg", "DecodeAndCropJpeg", "DecodeImage")
IN_PLACE_OF = "in place of: "
IN_MEMORY_SOURCES = ("from_tensor_slices", "from_tensors", "range")
ALTERNATIVE = "# or: "
# the next line of the same alternative (two "# or:" lines read as two alternatives)
ALTERNATIVE_THEN = "#  and: "
# the statements below it go after the statement the replaced call is in, not before
THEN_AFTER = "# then, after that statement:"


def in_place_of(stage: PipelineStage, new: str, api: str | None = None) -> list[str]:
    """The marker and the new call, or nothing when the new call is what is written."""
    old = dataset_calls.stage_call(stage, api)
    if new == old:
        return []
    # a fused stage's location is its first call's: the others' lines are not known
    first = api is None or not stage.written_as or api == stage.written_as[0]
    where = f"{stage.location}: " if stage.location and first else ""
    return [f"# {where}{IN_PLACE_OF}{old}", new]


def _map_api(stage: PipelineStage) -> str:
    for api in ("map", "flat_map", "interleave", "filter"):
        if api in stage.written_as:
            return api
    return stage.written_as[0] if stage.written_as else "map"


def _written_parallel(call: str, name: str = "num_parallel_calls") -> bool:
    value = dataset_calls.keyword(call, name)
    return value is not None and value not in ("1", "None")


def parallel_call(stage: PipelineStage, api: str | None = None) -> str:
    """The stage's call with ``num_parallel_calls=AUTOTUNE`` (as written if it has it)."""
    call = dataset_calls.stage_call(stage, api or _map_api(stage))
    if _written_parallel(call):
        return call
    return dataset_calls.with_keywords(call, num_parallel_calls=AUTOTUNE)


def parallel_map(stage: PipelineStage) -> list[str]:
    return in_place_of(stage, parallel_call(stage), _map_api(stage))


def _at(pipeline: PipelineFacts, index: int) -> str:
    """Where the batch after stage ``index`` is written, as " (train.py:64)", or "": a
    stage TF fused from the map and the batch (MapAndBatch) has the map's line only."""
    for stage in pipeline.stages[index:]:
        if "batch" in stage.written_as:
            fused = len(stage.written_as) > 1
            return f" ({stage.location})" if stage.location and not fused else ""
    return ""


def _batch_after(pipeline: PipelineFacts, index: int) -> str:
    """The batch call written after (or fused into) stage ``index``."""
    stage = pipeline.stages[index]
    if "batch" in stage.written_as:
        return dataset_calls.stage_call(stage, "batch")
    for later in pipeline.stages[index + 1 :]:
        if "batch" in later.written_as:
            return dataset_calls.stage_call(later, "batch")
    return f"{DATASET}.batch(<batch size>)"


def vectorise(pipeline: PipelineFacts, index: int) -> list[str]:
    stage = pipeline.stages[index]
    fn = function_name(stage)
    per_call = per_call_s(stage)
    cost = f" costs {per_call * 1e6:,.0f} µs per call," if per_call is not None else ""
    batch = _batch_after(pipeline, index)
    mapped = parallel_call(stage, "map")
    before = dataset_calls.receiver(mapped)
    new = (before or "") + dataset_calls.method_part(batch) + dataset_calls.method_part(mapped)
    return [
        f"# {fn}{cost} mostly tf.data's per-element overhead: batch first and run it",
        "# once per batch (written for a leading batch dimension: tf.io.parse_example",
        "# instead of parse_single_example, ops that broadcast over the batch)",
        *in_place_of(stage, new, "map"),
        f"# and leave out the {batch} after it{_at(pipeline, index)}",
    ]


def stateless_random(stage: PipelineStage) -> list[str]:
    fn = function_name(stage)
    call = parallel_call(stage, "map")
    before = dataset_calls.receiver(call)
    zipped = (
        f"tf.data.Dataset.zip(({before}, seeds))"
        if before
        else ".apply(lambda d: tf.data.Dataset.zip((d, seeds)))"
    )
    return [
        f"# {fn} draws with stateful random ops (tf.random.uniform, tf.image.random_*), so",
        "# TF keeps it sequential by itself. Written parallel it runs on every core; the",
        "# draws then come in a different order each run (a global seed no longer fixes it):",
        *in_place_of(stage, call, "map"),
        "# Reproducible and parallel: a seed per element and the stateless ops",
        f"# ({fn}(element, seed) with tf.image.stateless_random_flip_left_right(image, seed),",
        "# tf.random.stateless_uniform(shape, seed) ...), the seeds zipped in:",
        f"{ALTERNATIVE}seeds = tf.data.Dataset.random(seed=42).batch(2, drop_remainder=True)",
        f"{ALTERNATIVE_THEN}{zipped}{dataset_calls.method_part(call)}",
    ]


def python_function(stage: PipelineStage) -> list[str]:
    """TF ops first: parallel calls of Python gain only where it releases the GIL, which
    a run does not show (``gpuwhy fix --input --assume-pure`` measures it)."""
    fn = function_name(stage)
    api = _map_api(stage)
    lines = [
        f"# {fn} calls Python (py_function, numpy_function or a generator), one element at a",
        "# time. The fix: write it in TF ops (tf.io, tf.image, tf.strings, tf.math), which run",
        "# in C++ on every core. Parallel calls of the Python as it is gain only where it",
        "# releases the GIL (NumPy on large arrays, file or network I/O, PIL decoding, sleeps);",
        "# pure-Python code takes turns on one core and gains nothing.",
    ]
    if api in ("flat_map", "interleave"):
        return lines + interleave(stage)
    change = in_place_of(stage, parallel_call(stage, api), api)
    if not change:
        return [
            *lines,
            f"# {fn} already has num_parallel_calls and is still the slowest stage: the",
            "# parallel calls do not make up for it; TF ops do",
        ]
    return [
        *lines,
        "# `gpuwhy fix --input --assume-pure` measures which (it keeps the parallel calls",
        "# only where they gain); or try:",
        *change,
        "# (add deterministic=False where element order does not matter: a slow call no"
        " longer holds up the rest)",
    ]


WORKERS = 4  # the worker threads a PyDataset fix gives


def keras_adapter(stage: PipelineStage, made_in: Sequence[str] = ()) -> list[str]:
    """A generator Keras made from what fit was given: a keras.utils.PyDataset (or
    Sequence), a Python generator or a torch DataLoader, read through
    tf.data.Dataset.from_generator one batch at a time (keras/src/trainers/data_adapters).
    Where the collector found the program's own source below Keras' wrapper, the fix
    names it: a dataset class by its ``__getitem__``, a generator by its function.
    ``made_in``: the program's files where the class may be made (the fit call's): a
    ``workers=`` already passed there is changed where it is written, never passed twice
    (``super().__init__(workers=4, **kwargs)`` with workers in kwargs: a TypeError)."""
    fn, where = stage.function, stage.function_location
    per_batch = stage.self_time_per_element_s
    pace = f", {per_batch * 1e3:.1f} ms a batch" if per_batch else ""
    if fn and where and fn.endswith(".__getitem__"):
        cls = fn.removesuffix(".__getitem__")
        own_file, name = where.rsplit(":", 1)[0], cls.rsplit(".", 1)[-1]
        made = source_calls.calls_with([*made_in, own_file], name, "workers")
        if made and source_calls.init_takes(own_file, name, "workers"):
            fix = _more_workers(cls, where, pace, made)
            if fix:
                return fix
        lead = [
            f"# fit reads {cls} ({where}) one batch at a time, in Python{pace}. Worker",
            "# threads make batches ahead of the step (they overlap where __getitem__ reads",
            "# files, decodes or calls NumPy; use_multiprocessing=True: for pure-Python work)",
        ]
        written = _workers_in_super_init(own_file, name)
        if written is not None:
            return lead + written
        return [
            *lead[:-1],
            f"# files, decodes or calls NumPy): give {cls}'s super().__init__(...) call",
            "# workers=4, or where its __init__ has none, make its first line",
            "# super().__init__(workers=4)  (use_multiprocessing=True: for pure-Python work)",
        ]
    if fn and where:
        source = fn if "." in fn else f"the generator {fn}"  # Reader.__next__: a method
        return [
            f"# fit reads {source} ({where}) one batch at a time, in Python{pace}:",
            "# Keras' prefetch overlaps it with the step but cannot make it faster.",
            f"# Make each batch of {fn} cheaper, or let several be made at once: a",
            "# keras.utils.PyDataset whose __getitem__(index) makes batch `index`, with",
            "# super().__init__(workers=4) (threads overlap where it reads files, decodes or",
            "# calls NumPy; use_multiprocessing=True for pure-Python work; fit shuffles a",
            "# PyDataset's batches each epoch, where it took the generator's in order:",
            "# fit(..., shuffle=False) keeps that order), or a tf.data",
            f"# pipeline over the arrays or files {fn} reads (from_tensor_slices,",
            "# TFRecordDataset with parallel map): no Python per batch",
        ]
    return [
        "# fit was given a Python data source (a keras.utils.PyDataset, a generator or a",
        "# DataLoader): Keras reads it one batch at a time, in Python. A PyDataset makes",
        "# batches ahead of the step on worker threads (they overlap where __getitem__",
        "# reads files, decodes or calls NumPy); as the first line of its __init__:",
        "super().__init__(workers=4)   # use_multiprocessing=True: for pure-Python work",
        "# or give fit a tf.data pipeline: arrays in memory, TFRecord files",
        f"{ALTERNATIVE}tf.data.Dataset.from_tensor_slices((<features>, <labels>))"
        f".batch(<batch size>).prefetch({AUTOTUNE})",
    ]


def _workers_in_super_init(filename: str, cls: str) -> list[str] | None:
    """``workers=`` where the class's own ``__init__`` hands its arguments to PyDataset:
    its ``super().__init__(...)`` call with it added, or, where the ``__init__`` makes no
    such call, that call as its first line (a review's Sequence subclass was told "give
    its super().__init__(...) call workers=4, or where its __init__ has none...", about a
    class with none). None where the source does not say (then the fix says it in
    words), or the call gives ``workers`` already or passes a ``**`` mapping that may."""
    found = source_calls.super_init(filename, cls)
    if found is None:
        return None
    line, call = found
    if call is None:
        return [
            f"# {filename}:{line}: {cls}.__init__ calls no super().__init__(): as its first line",
            f"super().__init__(workers={WORKERS})",
        ]
    if "workers" in call or "**" in call:
        return None
    # added after what it passes, as every keyword a fix adds to a call
    return [
        f"# {filename}:{line}: {IN_PLACE_OF}{call}",
        dataset_calls.with_keywords(call, workers=str(WORKERS)),
    ]


def _more_workers(cls: str, where: str, pace: str, made: list[source_calls.MadeWith]) -> list[str]:
    """The fix where the program makes ``cls`` with calls that can take ``workers=``:
    each call with fewer than ``WORKERS`` (or none, and no ``**`` mapping that may hold
    them) given them where it is written; where every one already has as many, the batch
    itself to make cheaper; [] where there is no call to change (the words then). The run
    does not say which call made the dataset fit read, so each is shown."""
    # a call that gives none but passes a ** mapping may give them through it: left alone
    few = [
        m
        for m in made
        if (m.value is None and not m.mapping) or (m.number is not None and m.number < WORKERS)
    ]
    lines = [f"# fit reads {cls} ({where}) one batch at a time, in Python{pace}."]
    if not few:
        if any(m.value is None for m in made):
            return []  # made only through ** mappings: said in words, as without a call
        given = ", ".join(f"workers={m.value} at {m.location}" for m in made)
        # passed already: said as processes, and not asked for again
        processes = all("use_multiprocessing=True" in m.call.replace(" ", "") for m in made)
        cheaper = (
            ["# stage: make each batch cheaper (NumPy over whole batches, files read once),"]
            if processes
            else [
                "# stage: make each batch cheaper (NumPy over whole batches, files read once,",
                "# use_multiprocessing=True for pure-Python work),",
            ]
        )
        return [
            *lines,
            f"# It already has worker {'processes' if processes else 'threads'} ({given})"
            " and is still the slowest",
            *cheaper,
            "# or give fit a tf.data pipeline over the same files (TFRecordDataset with a",
            "# parallel map)",
        ]
    lines += [
        f"# {WORKERS} worker threads make batches ahead of the step (they overlap where",
        "# __getitem__ reads files, decodes or calls NumPy; use_multiprocessing=True for",
        "# pure-Python work):",
    ]
    for m in few:
        raised = dataset_calls.with_keywords(m.call, workers=str(WORKERS))
        lines += [f"# {m.location}: {IN_PLACE_OF}{m.call}", raised]
    return lines


def generator(stage: PipelineStage, made_in: Sequence[str] = ()) -> list[str]:
    if stage.by_library:
        return keras_adapter(stage, made_in)
    fn = function_name(stage)
    written = dataset_calls.stage_call(stage, "from_generator")
    signature = dataset_calls.keyword(written, "output_signature")
    signature = signature or "<the output_signature you give from_generator>"
    generator_code = dataset_calls.argument(written, 0, "generator") or function_code(stage)
    if stage.as_slices:
        return [
            f"# {fn} only yields slices of arrays in memory, one element at a time in",
            "# Python, under the GIL: slice them in tf.data instead (the same elements)",
            *in_place_of(stage, stage.as_slices, "from_generator"),
        ]
    # ``sample_gen(0, N)``: a call that makes the generator, which then takes no
    # argument: ``args=(shard,)`` would call it with one (TypeError in the pipeline)
    made = "(" in generator_code
    per_shard = "<a generator function of one shard>" if made else generator_code
    return [
        f"# {fn} yields elements from Python, one at a time, under the GIL.",
        "# Arrays that fit in memory: slice them, no Python per element; what the",
        "# generator does to each element then goes in a .map() after it, in TF ops (or",
        f"# tf.numpy_function with num_parallel_calls={AUTOTUNE}: NumPy that releases the",
        "# GIL runs several elements at a time)",
        *in_place_of(
            stage,
            "tf.data.Dataset.from_tensor_slices(<the arrays the generator yields from>)",
            "from_generator",
        ),
        "# Data in files: write TFRecord shards once, then read several at a time",
        f"{ALTERNATIVE}tf.data.TFRecordDataset(<shard files>, num_parallel_reads={AUTOTUNE})"
        f".map(<parse>, num_parallel_calls={AUTOTUNE})",
        "# A generator that must stay: one per shard, read on several threads (helps where",
        "# it waits on I/O or releases the GIL); the generator takes the shard as argument"
        + (f" ({generator_code} makes one that takes none)" if made else ""),
        f"{ALTERNATIVE}tf.data.Dataset.from_tensor_slices(<shard names>).interleave("
        f"lambda shard: tf.data.Dataset.from_generator({per_shard}, args=(shard,), "
        f"output_signature={signature}), num_parallel_calls={AUTOTUNE})",
    ]


def is_reader(stage: PipelineStage) -> bool:
    """A file reader, whatever node TF runs it as: TFRecordDataset(files) is a FlatMap
    over the file names with one TFRecord node per file inside, and with
    num_parallel_reads a parallel interleave."""
    return stage.name in FILE_READERS or any(
        w.removesuffix("Dataset") in FILE_READERS for w in stage.written_as
    )


def reader_api(stage: PipelineStage) -> str:
    """The reader class as written (``TFRecordDataset``, ``TextLineDataset`` ...)."""
    for name in (*stage.written_as, stage.name):
        if name.removesuffix("Dataset") in FILE_READERS:
            return name.removesuffix("Dataset") + "Dataset"
    return "TFRecordDataset"


def reader(stage: PipelineStage) -> list[str]:
    compression = next((c for c in stage.codec_ops if c in COMPRESSION), None)
    api = reader_api(stage)
    call = dataset_calls.stage_call(stage, api)
    lines: list[str]
    if _written_parallel(call, "num_parallel_reads") or (stage.parallelism or 0) > 1:
        lines = [
            f"# {api} already reads {stage.parallelism or 'several'} files at once: more, "
            "smaller shards let it read more at a time"
        ]
    else:
        lines = [
            f"# {api} reads one file at a time: read several in parallel",
            *in_place_of(
                stage, dataset_calls.with_keywords(call, num_parallel_reads=AUTOTUNE), api
            ),
        ]
    if compression:
        lines += [
            f"# {compression} inflates each file in one stream on one core: shards written",
            "# without compression read faster where disk space allows",
        ]
    return lines


def interleave(stage: PipelineStage) -> list[str]:
    """A flat_map or interleave: open and read several inputs at once."""
    api = "flat_map" if "flat_map" in stage.written_as else "interleave"
    call = dataset_calls.stage_call(stage, api)
    new = dataset_calls.renamed(call, "interleave") if api == "flat_map" else call
    if not _written_parallel(new):
        new = dataset_calls.with_keywords(new, num_parallel_calls=AUTOTUNE)
    lines = in_place_of(stage, new, api)
    if api == "flat_map":
        lines.append(
            "# (the elements of several inputs now alternate, where flat_map read one input"
            " to its end; add cycle_length=1 to keep flat_map's order)"
        )
    lines.append(
        "# (add deterministic=False where element order does not matter: a slow input no"
        " longer holds up the rest)"
    )
    return lines


def cached(stage: PipelineStage) -> list[str]:
    """``.cache()`` after the stage's written call: its only one, or the first of a fused
    stage (``map`` of a MapAndBatch), the one whose line is known: a later call's line is
    not, and the same ``.batch(16)`` may be written for train and validation."""
    api = stage.written_as[0] if stage.written_as else None
    new = dataset_calls.chained(dataset_calls.stage_call(stage, api), ".cache()")
    return in_place_of(stage, new, api)


def decode(stage: PipelineStage, pipeline: PipelineFacts | None = None) -> list[str]:
    """Decode/decompress in a map: on all cores, once, or on the GPU outside TF. No cache
    after it where a stage before it changes from pass to pass (``pipeline``): the
    cache would replay that stage's first pass (a shuffle's order) on every epoch."""
    fn = function_name(stage)
    ops = ", ".join(stage.codec_ops)
    lines = [f"# {fn} decodes on the CPU ({ops}): TensorFlow has no GPU kernel for it"]
    if stage.by_library:  # inside a dataset helper: the program can only cache after it
        where = f" at {stage.location}" if stage.location else ""
        return [
            *lines,
            f"# it runs inside the dataset a library built{where} (keras.utils.*_dataset_from_*):",
            "# decoded once, not every epoch, with .cache() after that call (input.no-cache",
            "# gives the line where the data fits in memory)",
        ]
    api = _map_api(stage)
    call = dataset_calls.stage_call(stage, api)
    parallel = call if (stage.parallelism or 0) > 1 else parallel_call(stage, api)
    upstream = varies_before(pipeline, stage) if pipeline is not None else None
    if not same_every_pass(stage):
        lines += in_place_of(stage, parallel, api)
        lines.append(f"# {fn} also {_changing(stage)}: decode in a map of its own, cache that")
    elif upstream is not None:
        lines += in_place_of(stage, parallel, api)
        before = next((c for c in upstream.written_calls if c), None) or upstream.name
        at = f" (at {upstream.location})" if upstream.location else ""
        lines += [
            f"# to decode once, not every epoch: .cache() right after this map, with {before}{at}",
            "# moved after the cache; a cache after it would replay its first pass every epoch",
        ]
    elif (after := _cache_after(pipeline, stage)) is not None:
        lines += in_place_of(stage, parallel, api)
        at = f" (at {after.location})" if after.location else ""
        call = dataset_calls.stage_call(after, "cache")
        lines += [
            f"# decoded once a run already: the cache() after it{at} replays it from the",
            "# second epoch on, and the first epoch decodes every element. To decode once",
            "# for every run, cache on a local disk, a file of its own for each dataset",
            "# (the file is reused by the next run; a helper that caches the training and",
            "# the validation data needs the name as an argument):",
            f"#   {_on_disk(call)}",
        ]
    else:  # caches_decode(stage, pipeline)
        lines.append("# decoded once, not every epoch, where it fits (or .cache(<path>) on disk):")
        lines += in_place_of(stage, dataset_calls.chained(parallel, ".cache()"), api)
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


def caches_decode(stage: PipelineStage, pipeline: PipelineFacts | None) -> bool:
    """Whether :func:`decode`'s fix for ``stage`` is a ``.cache()`` written right after
    it (the same every pass, nothing before it that changes, no cache after it yet):
    then what it saves is a cache's, the passes after the first."""
    return (
        not stage.by_library
        and same_every_pass(stage)
        and (pipeline is None or varies_before(pipeline, stage) is None)
        and _cache_after(pipeline, stage) is None
    )


def cached_after(stage: PipelineStage, pipeline: PipelineFacts | None) -> bool:
    """Whether a cache is written after ``stage`` already: the stage runs in the first
    pass only."""
    return _cache_after(pipeline, stage) is not None


def _cache_after(pipeline: PipelineFacts | None, stage: PipelineStage) -> PipelineStage | None:
    """The cache written after ``stage`` in ``pipeline`` (stages source first), if any."""
    if pipeline is None or stage not in pipeline.stages:
        return None
    later = pipeline.stages[pipeline.stages.index(stage) + 1 :]
    return next((s for s in later if s.kind == "cache"), None)


def _on_disk(call: str) -> str:
    """``ds.cache()`` as ``ds.cache("train_cache")``: a file TF writes in the first
    epoch and reads from then on, and in later runs."""
    if not call.endswith(".cache()"):  # a filename written already
        return call
    return call[: -len(".cache()")] + '.cache("train_cache")'


def _changing(stage: PipelineStage) -> str:
    """What makes the stage's elements differ from pass to pass, for a comment."""
    if stage.random:
        return "draws random numbers"
    if stage.python:
        return "calls Python, whose result gpuwhy cannot prove the same every pass"
    return "runs ops whose result may change from pass to pass (a tf.Variable, a write)"


def batch(stage: PipelineStage) -> list[str]:
    call = dataset_calls.stage_call(stage, "batch")
    if _written_parallel(call):
        return ["# the batch already copies in parallel: a smaller element or fewer copies help"]
    return [
        "# the batch copies every element into one tensor: copy in parallel",
        *in_place_of(
            stage, dataset_calls.with_keywords(call, num_parallel_calls=AUTOTUNE), "batch"
        ),
    ]


def filter_(stage: PipelineStage) -> list[str]:
    fn = function_name(stage)
    call = dataset_calls.stage_call(stage, "filter")
    return [
        f"# filter runs {fn} one element at a time: let TF parallelise it (the options",
        "# hold for the whole pipeline), or filter before the expensive maps",
        "options = tf.data.Options()",
        "options.experimental_optimization.filter_parallelization = True",
        *in_place_of(stage, dataset_calls.chained(call, ".with_options(options)"), "filter"),
    ]


def generic() -> list[str]:
    return [
        "# the usual order: parallel maps, a cache where the data fits, batch, prefetch",
        f"{DATASET}.map(<your function>, num_parallel_calls={AUTOTUNE}).cache()"
        f".batch(<batch size>).prefetch({AUTOTUNE})",
    ]


def after_last_call(pipeline: PipelineFacts, more: str) -> list[str]:
    """``more`` (``.prefetch(...)``) chained after the pipeline's last written call."""
    last = next((s for s in reversed(pipeline.stages) if s.written_as), None)
    if last is None:
        where = f" built at {pipeline.location}" if pipeline.location else ""
        return [f"# at the end of the pipeline{where}", f"{DATASET}{more}"]
    api = last.written_as[-1]
    return in_place_of(last, dataset_calls.chained(dataset_calls.stage_call(last, api), more), api)


def prefetch_at_end(pipeline: PipelineFacts) -> list[str]:
    """``.prefetch(AUTOTUNE)`` after the pipeline's last written call."""
    return [
        "# last: the next batch is ready when the step ends",
        *after_last_call(pipeline, f".prefetch({AUTOTUNE})"),
    ]


def made_files(pipeline: PipelineFacts) -> tuple[str, ...]:
    """The program's files where what the pipeline reads may be made: where it was built
    (the fit call that made it from a PyDataset) and the line that read it."""
    return tuple(
        where.rsplit(":", 1)[0] for where in (pipeline.location, pipeline.read_at) if where
    )


def for_stage(pipeline: PipelineFacts, index: int, vectorise_below_s: float) -> list[str]:
    """The fix for the pipeline's slow stage ``index``, by what the stage is."""
    stage = pipeline.stages[index]
    if stage.kind == "generator" or "from_generator" in stage.written_as:
        return generator(stage, made_files(pipeline))
    if stage.python:
        return python_function(stage)
    if is_reader(stage):
        return reader(stage)
    if stage.kind in ("interleave", "flat_map") or {"interleave", "flat_map"} & set(
        stage.written_as
    ):
        # a helper's own interleave (make_csv_dataset's over its files): a template of
        # it names an `<dataset>.interleave(...)` the program never wrote
        return library_stage(pipeline, stage) if stage.by_library else interleave(stage)
    if is_map(stage) and stage.by_library and not stage.codec_ops:
        # a map inside a dataset helper (timeseries_dataset_from_array's own lambda):
        # a parallel or cached template of it names a call the program never wrote
        return library_stage(pipeline, stage)
    if is_map(stage):
        vector = vectorisable(pipeline, index, vectorise_below_s)
        if stage.codec_ops and not vector:
            return decode(stage, pipeline)  # parallel where it is sequential, and the cache
        lines: list[str] = []
        if runs_sequentially(stage, pipeline.autotune):
            lines = (
                stateless_random(stage) if stage.random and stage.stateful else parallel_map(stage)
            )
        if vector:
            lines = vectorise(pipeline, index)
        if stage.codec_ops:
            lines += decode(stage, pipeline)
        if lines:
            return lines
        lines = [
            f"# {function_name(stage)} already runs on {stage.parallelism or 'several'} "
            "threads: make each call cheaper, do it once, or add cores"
        ]
        if same_every_pass(stage) and varies_before(pipeline, stage) is None:
            lines.append("# its result is the same every pass: compute it once")
            lines += cached(stage)
        return lines
    if stage.kind == "batch":
        return batch(stage)
    if stage.kind == "filter":
        return filter_(stage)
    if stage.by_library:
        return library_stage(pipeline, stage)
    if set(stage.written_as) & set(IN_MEMORY_SOURCES):
        return in_memory_source(pipeline, index)
    return generic()


def in_memory_source(pipeline: PipelineFacts, index: int) -> list[str]:
    """A slowest stage that makes elements from memory (``from_tensor_slices``,
    ``range``): its time is tf.data's own cost per element, with no function to run in
    parallel and nothing to cache, so the usual template (a parallel map, a cache)
    would name stages the program does not have. Making each element on its own from
    a batch of rows costs about the same as any other way tf.data has (measured on a
    2-core host, ``ds.reduce`` timing: shuffled index batches gathered with
    ``tf.gather`` ran 0.69-0.91 times as fast as the slices at rows of 68 B-4 KB and
    batches of 32-128, 1.11 times only at 68 B rows in batches of 128; Keras fit on the
    arrays took 0.957 ms a step against 0.947 on the dataset), so what is said is what
    shortens the wait: a prefetch where there is none, else cores for the pipeline."""
    stage = pipeline.stages[index]
    per = per_element_s(stage)
    rows = next(
        (later.ratio for later in pipeline.stages[index + 1 :] if later.kind == "batch"), None
    )
    cost = ""
    if per is not None:
        cost = f" ({per * 1e6:,.1f} µs an element"
        cost += (
            f", {per * rows * 1e6:,.0f} µs a batch of {rows:,.0f})" if rows and rows > 1 else ")"
        )
    at = f" at {stage.location}" if stage.location else ""
    lines = [
        f"# {stage.name}{at} makes each element from memory{cost}: tf.data's own",
        "# cost per element, with no function to run in parallel and nothing to cache",
    ]
    if not ends_buffered(pipeline):
        return lines + prefetch_at_end(pipeline)
    return lines + [
        "# the pipeline already prefetches: the wait left is the time the host's cores",
        "# spend on the steps instead of the pipeline; more cores (or the steps on a GPU)",
        "# shorten it",
    ]


def library_stage(pipeline: PipelineFacts, stage: PipelineStage) -> list[str]:
    """A slow stage of the dataset a library built (keras.utils.*_dataset_from_*): the
    program cannot rewrite it, only cache after the call or build its own pipeline; a
    template of maps the program never wrote would not paste."""
    call = pipeline.helper_call or "a library's dataset helper"
    where = f" at {stage.location}" if stage.location else ""
    return [
        f"# {stage.name} runs inside the dataset {call} builds{where}:",
        "# its stages are the library's; decode or window once with .cache() after that",
        "# call where the data fits in memory (input.no-cache gives the line), or build",
        "# the pipeline with tf.data yourself to parallelise it",
    ]
