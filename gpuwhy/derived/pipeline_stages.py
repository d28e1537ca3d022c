"""How TF ran each stage of a recorded pipeline: its share of the pipeline's work, its
time per element and per call, whether it is a map and runs sequentially after TF's own
rewrites, whether the pipeline ends buffered, and whether a stage's elements are the
same on every pass (where a cache is safe).

Stage times are TF's own (``get_model_proto``): ``processing_time`` is a stage's *self*
time, summed over the threads that ran it (tensorflow/core/framework/model.cc records it
between RecordStart/RecordStop, which stop while the stage waits for its input).
"""

from __future__ import annotations

import math

from gpuwhy.facts import PipelineFacts, PipelineStage

# Stages TF runs on background threads with their own buffer of finished elements.
# inject_prefetch leaves a pipeline that ends in one of these alone (kAsyncTransforms in
# tensorflow/core/grappler/optimizers/data/inject_prefetch.cc): it already produces ahead.
ASYNC_STAGE_PREFIXES = (
    "Prefetch",
    "ParallelMap",
    "MapAndBatch",
    "ParallelBatch",
    "ParallelInterleave",
    "DataService",
)


# Fewer function calls than this and a per-call time says little about call overhead.
MIN_CALLS_TO_JUDGE_OVERHEAD = 1000


def pipeline_time_s(pipeline: PipelineFacts) -> float:
    return sum(s.self_time_s for s in pipeline.stages)


def stage_share(pipeline: PipelineFacts, stage: PipelineStage) -> float | None:
    """The stage's share of the pipeline's work (None: not measured): its part of the
    CPU time per element the consumer gets where the collector measured it (bookkeeping
    stages such as shuffle have none), else its share of the stages' self times."""
    if any(s.work_share is not None for s in pipeline.stages):
        return stage.work_share or 0.0
    total = pipeline_time_s(pipeline)
    return stage.self_time_s / total if total > 0 else None


def is_bottleneck(pipeline: PipelineFacts, index: int) -> bool:
    return pipeline.bottleneck == index


def is_map(stage: PipelineStage) -> bool:
    """A map as TF runs it: Map, ParallelMapV2, or a map fused with its batch
    (MapAndBatch, map_and_batch_fusion), whatever kind the stage was filed under."""
    return (
        stage.kind == "map"
        or "map" in stage.written_as
        or stage.name.startswith(("Map", "ParallelMap"))
    )


def per_element_s(stage: PipelineStage) -> float | None:
    if stage.self_time_per_element_s is not None:
        return stage.self_time_per_element_s
    return stage.self_time_s / stage.elements if stage.elements else None


def stage_index(pipeline: PipelineFacts, stage: PipelineStage) -> int | None:
    """The stage's place in the pipeline, by identity (two stages may hold equal facts)."""
    return next((i for i, s in enumerate(pipeline.stages) if s is stage), None)


def per_consumer_element(pipeline: PipelineFacts, stage: PipelineStage) -> float | None:
    """The stage's elements per element the consumer gets: the product of the ratios of
    the stages after it (a batch of 32 after it: 32; 0 where a ratio is unknown). None
    for a stage not in the pipeline."""
    index = stage_index(pipeline, stage)
    if index is None:
        return None
    return math.prod(later.ratio for later in pipeline.stages[index + 1 :])


def work_per_consumer_element_s(pipeline: PipelineFacts, stage: PipelineStage) -> float:
    """Seconds of the stage's own work (TF's self time, all threads) per element the
    consumer got: its time per own element times its elements per consumer element (the
    ratios of the stages after it). Not its total over the consumer's count: TF drops an
    exhausted input's nodes from its model (the stages under a shuffle, each epoch), so
    their counts cover part of the run where the consumer's covers all of it; their time
    per element does not depend on how much of the run was counted. A stage with no count
    falls back to its total over the consumer's elements."""
    per = per_element_s(stage)
    if per is None:
        return stage.self_time_s / pipeline.elements if pipeline.elements else 0.0
    return per * (per_consumer_element(pipeline, stage) or 0.0)


def function_calls(stage: PipelineStage) -> int:
    """Calls of the stage's function: one per input element. A fused MapAndBatch
    produces batches (ratio = batch size) but calls its function per element."""
    return int(stage.elements * max(stage.ratio, 1.0))


def per_call_s(stage: PipelineStage) -> float | None:
    calls = function_calls(stage)
    return stage.self_time_s / calls if calls else None


def batched_later(pipeline: PipelineFacts, index: int) -> bool:
    """The program batches right after the stage (or the batch is fused into it): the
    map can move after the batch and the batches hold the same elements. Only a stage TF
    added, a prefetch or a cache may sit between; a shuffle, a filter, a repeat or another
    map would see batches instead of elements."""
    stage = pipeline.stages[index]
    if "batch" in stage.written_as:
        return True
    for later in pipeline.stages[index + 1 :]:
        if later.kind == "batch" or "batch" in later.written_as:
            return True
        written = set(later.written_as) or {later.kind}  # a stage TF added: its kind
        if not written <= {"prefetch", "cache", "other"}:
            return False
    return False


def vectorisable(pipeline: PipelineFacts, index: int, below_s: float) -> bool:
    """A cheap per-element TF function called many times, with a batch after it: most of
    its time is tf.data's per-call overhead, which batching first divides by the batch."""
    stage = pipeline.stages[index]
    per_call = per_call_s(stage)
    return (
        is_map(stage)
        and not stage.python
        and per_call is not None
        and function_calls(stage) >= MIN_CALLS_TO_JUDGE_OVERHEAD
        and per_call <= below_s
        and batched_later(pipeline, index)
    )


def runs_sequentially(stage: PipelineStage, autotune: bool) -> bool:
    """A map that TF runs one element at a time, after its own rewrites.

    ``map_parallelization`` (on by default) turns a map written without
    ``num_parallel_calls`` into a ParallelMapV2 with AUTOTUNE parallelism, unless
    autotune is off or its function is stateful (map_parallelization.cc), and autotune
    may then choose one thread on a busy host: that map *is* parallel as far as the
    user is concerned. A stage with parallelism 1 is sequential only when it was
    written so, or TF could not parallelise it (the collector's ``stateful`` is the
    same IsFunctionStateful test TF applies).
    """
    if not is_map(stage):
        return False
    if stage.parallelism is None:
        return not stage.name.startswith(("ParallelMap", "MapAndBatch"))
    if stage.parallelism > 1:
        return False
    if stage.parallelism_written is not None:
        return stage.parallelism_written == 1
    # A Python function is stateful (EagerPyFunc, PyFunc) unless declared pure with
    # tf.numpy_function(..., stateful=False): then TF parallelises it like any other.
    return stage.stateful or not autotune


def ends_buffered(pipeline: PipelineFacts) -> bool:
    """The pipeline as TF ran it ends in a prefetch or another stage that produces ahead."""
    if pipeline.prefetch_run:
        return True
    if not pipeline.stages:
        return False
    last = pipeline.stages[-1]
    return last.kind == "prefetch" or last.name.startswith(ASYNC_STAGE_PREFIXES)


def same_every_pass(stage: PipelineStage) -> bool:
    """The recorded stage's elements are the same on every pass, so a cache after it is
    safe.

    The collector records the judgement ``gpuwhy fix`` places its cache by
    (``repeats``, from ``stages.varies_between_passes``): a lookup table read is not
    state, a random op, Python that is not declared pure, a shuffle or a generator is.
    A record from before it was kept falls back on the stage's flags."""
    if stage.repeats is not None:
        return stage.repeats
    return not (stage.random or stage.stateful or stage.kind in ("generator", "shuffle"))


def varies_before(pipeline: PipelineFacts, stage: PipelineStage) -> PipelineStage | None:
    """The first recorded stage before ``stage`` whose elements or order change from
    pass to pass (a shuffle, a random map): a cache after ``stage`` would replay that
    stage's first pass on every epoch (one shuffled order for good). None where every
    stage before it repeats."""
    before = pipeline.stages[: pipeline.stages.index(stage)] if stage in pipeline.stages else ()
    return next((s for s in before if not same_every_pass(s)), None)


def pass_elements(pipeline: PipelineFacts) -> tuple[float | None, str]:
    """Elements per pass, and what says so: TF's cardinality, else (a file reader's
    count is unknown to TF) the elements one iterator read, when every iterator read a
    whole pass (several iterators over a dataset that does not repeat: Keras epochs,
    `for` loops)."""
    repeats = any(s.kind == "repeat" for s in pipeline.stages)
    if pipeline.cardinality:
        # with a repeat, the collector's count is of what it repeats (a pass of the data),
        # not TF's count of the whole (ds.repeat().take(640): 640)
        said = "TF's cardinality of what the repeat repeats" if repeats else "TF's cardinality"
        return float(pipeline.cardinality), said
    if pipeline.iterators >= 2 and not repeats:
        return (
            pipeline.elements / pipeline.iterators,
            f"elements read per iterator ({pipeline.iterators} iterators; TF does not know "
            "the cardinality)",
        )
    return None, "unknown"


def element_size(pipeline: PipelineFacts) -> tuple[float | None, str]:
    """Bytes of one output element, and what says so (what a cache at the pipeline's end
    is sized by, in input.no-cache and gpuwhy fix alike): from its spec, else (a decoded
    image or a window of any length has no static size) the bytes TF counted the
    consumer getting, per element."""
    if pipeline.element_bytes:
        return float(pipeline.element_bytes), "the element spec"
    if pipeline.delivered_bytes and pipeline.elements:
        return (
            pipeline.delivered_bytes / pipeline.elements,
            "the bytes TF counted per element delivered (the spec has a dimension of unknown size)",
        )
    return None, "unknown"


CACHE_AT_STAGE = (
    "the element spec of the stage the cache follows, times its elements a pass (the "
    "pipeline's, times the ratios of the stages after it)"
)


def cache_size(
    pipeline: PipelineFacts, after: PipelineStage, per_pass: float
) -> tuple[float | None, str]:
    """Bytes a cache after ``after`` holds, and what says so: that stage's elements in a
    pass (the pipeline's pass times the ratio of each stage after it: a batch of 128
    takes 128) times one of its elements (its spec), where both are known; a cache after
    a decode, before a batch and a map that makes each element smaller or larger, holds
    the decoded elements (keras-io's speaker recognition: 78 MiB, where a pass of the
    pipeline's output is 39 MiB). TF's count of a stage's elements is not used: an
    iterator's model keeps the stages above a shuffle's buffer to about one pass,
    whatever the passes read. Else a pass of the pipeline's output (:func:`element_size`)."""
    elements = per_consumer_element(pipeline, after)  # ratios are never negative:
    if after.element_bytes and elements:  # 0 where one after it is unknown
        return after.element_bytes * per_pass * elements, CACHE_AT_STAGE
    element_bytes, size_from = element_size(pipeline)
    return (per_pass * element_bytes if element_bytes else None), size_from
