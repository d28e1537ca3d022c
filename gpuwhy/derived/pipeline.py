"""The pipeline the training steps read, and its slowest stage.

One choice for everyone who needs it: the input rules judge the steps' wait on this
pipeline, the verdict names its bottleneck, the run's collectors read the steps' batch
size from it and ``--target`` costs its input side. Chosen in two places, a program
with several loops got a projection of one pipeline and findings on another.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuwhy.facts import PipelineFacts, PipelineStage, StepFacts, TfDataFacts

# PipelineFacts.wait_source of a wait timed around each next() call
NEXT_TIMING = "next() timing"


def steps_pipeline(tfdata: TfDataFacts | None, steps: StepFacts | None) -> PipelineFacts | None:
    """The pipeline the steps read: Keras fit's with the most elements (a validation
    pipeline reads fewer), the one whose gap timer gave fit's steps their wait
    (collect/inprocess/input_wait.py); for a Python loop, the cause the loops waited for
    longest, measured directly around ``next()``, else the loop's with the most elements.
    """
    if steps is None or tfdata is None:
        return None
    consumer = "keras-fit" if steps.source == "keras-fit" else "python-loop"
    read = [p for p in tfdata.pipelines if p.consumer == consumer]
    if consumer == "python-loop":
        # Several loops: the cause the loops waited for longest, measured directly. One
        # slow stage (a generator) wrapped by several pipelines is one cause: its waits
        # add up, and the pipeline that waited longest for it speaks for it.
        timed = [p for p in read if p.wait_source == NEXT_TIMING and p.wait_per_element_s]
        if timed:
            by_cause: dict[object, list[PipelineFacts]] = {}
            for p in timed:
                stage = bottleneck(p)
                key = culprit_location(stage) if stage is not None else None
                by_cause.setdefault(key or id(p), []).append(p)
            group = max(by_cause.values(), key=lambda ps: sum(_waited(p) for p in ps))
            return max(group, key=_waited)
    return max(read, key=lambda p: p.elements, default=None)


def _waited(pipeline: PipelineFacts) -> float:
    """Seconds the loop spent in this pipeline's next() calls."""
    return (pipeline.wait_per_element_s or 0.0) * pipeline.elements


def bottleneck(pipeline: PipelineFacts) -> PipelineStage | None:
    """The stage the collector found slowest; None where there is none, or a saved
    record's index is out of range."""
    if pipeline.bottleneck is None or not 0 <= pipeline.bottleneck < len(pipeline.stages):
        return None
    return pipeline.stages[pipeline.bottleneck]


def culprit_location(stage: PipelineStage) -> str | None:
    """Where to look: the function the stage runs, else where the transformation is written."""
    return stage.function_location or stage.location


# Stages that move elements without transforming them: TF's timers give them the
# time they wait for their input (collect/inprocess/pipeline_facts.py leaves them out of the
# bottleneck the same way, unless nothing else was timed).
BOOKKEEPING = frozenset({"prefetch", "shuffle", "repeat"})


def first_steady_stage(pipeline: PipelineFacts) -> int:
    """Index of the first stage that runs every epoch: the last cache (stages are in
    source-to-model order; those before it run in the first epoch only), else 0."""
    cached = [i for i, s in enumerate(pipeline.stages) if s.kind == "cache"]
    return cached[-1] if cached else 0


def steady_bottleneck(pipeline: PipelineFacts) -> int | None:
    """The slowest stage among those that run every epoch (the projection leaves out
    the stages before a cache): the pipeline's own bottleneck where it is one of them."""
    first = first_steady_stage(pipeline)
    index = pipeline.bottleneck
    if index is not None and first <= index < len(pipeline.stages):
        return index
    timed = [(i, s) for i, s in enumerate(pipeline.stages) if i >= first and s.root_elements_per_s]
    timed = [(i, s) for i, s in timed if s.kind not in BOOKKEEPING] or timed
    return min(timed, key=lambda pair: pair[1].root_elements_per_s or 0.0)[0] if timed else None


def slowest_batch_s(stages: Sequence[PipelineStage]) -> float | None:
    """Seconds per batch of the slowest working stage among ``stages`` (TF's stage
    timers; bookkeeping stages only where nothing else was timed)."""
    rated = [s for s in stages if s.root_elements_per_s]
    working = [s for s in rated if s.kind not in BOOKKEEPING] or rated
    rates = [s.root_elements_per_s for s in working if s.root_elements_per_s]
    return 1 / min(rates) if rates else None


def cached_passes(pipeline: PipelineFacts) -> int | None:
    """The run's passes over a pipeline with a cache: one iterator a pass (Keras fit's
    epochs, a loop's), where no repeat after the cache runs many passes in one; None
    without a cache, or with such a repeat."""
    if not any(s.kind == "cache" for s in pipeline.stages):
        return None
    if any(s.kind == "repeat" for s in pipeline.stages[first_steady_stage(pipeline) :]):
        return None
    return max(1, pipeline.iterators)


def run_bottleneck(pipeline: PipelineFacts) -> tuple[int | None, bool]:
    """The stage that set the input's pace over this run, and whether it runs in the
    first epoch only: a stage before a cache where the run's passes are known and the
    first epoch's time per batch beyond the later ones' outweighs all of theirs (one
    epoch of decoding JPEGs at 24 ms a batch in a 3-epoch run of 1.8 ms batches), else
    :func:`steady_bottleneck`."""
    steady_index = steady_bottleneck(pipeline)
    first = first_steady_stage(pipeline)
    passes = cached_passes(pipeline)
    filling = slowest_batch_s(pipeline.stages[:first])
    steady = slowest_batch_s(pipeline.stages[first:])
    if passes is None or filling is None or steady is None:
        return steady_index, False
    if filling - steady <= steady * (passes - 1):
        return steady_index, False
    rated = [(i, s) for i, s in enumerate(pipeline.stages[:first]) if s.root_elements_per_s]
    working = [(i, s) for i, s in rated if s.kind not in BOOKKEEPING] or rated
    index = min(working, key=lambda pair: pair[1].root_elements_per_s or 0.0)[0]
    return index, True
