"""The pipeline the training steps read, and its slowest stage.

One choice for everyone who needs it: the input rules judge the steps' wait on this
pipeline, the verdict names its bottleneck, the run's collectors read the steps' batch
size from it and ``--target`` costs its input side. Chosen in two places, a program
with several loops got a projection of one pipeline and findings on another.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwhy.facts import PipelineFacts, PipelineStage, StepFacts, TfDataFacts

# PipelineFacts.wait_source of a wait timed around each next() call
NEXT_TIMING = "next() timing"


def steps_pipeline(tfdata: TfDataFacts | None, steps: StepFacts | None) -> PipelineFacts | None:
    """The pipeline the steps read: Keras fit's with the most elements (a validation
    pipeline reads fewer), the one whose gap timer gave fit's steps their wait
    (collect/inprocess/input_wait.py); for a Python loop, of those read where a training
    loop reads, the cause the loops waited for longest, measured directly around
    ``next()``, else the loop's with the most elements.
    """
    if steps is None or tfdata is None:
        return None
    consumer = "keras-fit" if steps.source == "keras-fit" else "python-loop"
    read = [p for p in tfdata.pipelines if p.consumer == consumer]
    if consumer == "python-loop":
        # read where a training loop reads (not a test loop's pipeline beside it, which
        # may wait longer per element), where the record says where each was read
        sites = {loop.name for loop in steps.loops if loop.source == "tf-data"}
        there = [p for p in read if p.read_at in sites]
        if not there and sites and sites <= set(tfdata.distributed_reads):
            # the loops read tf.distribute datasets, whose pipelines TF keeps no model of:
            # another pipeline (a test loop's after them) is not what they waited for
            return None
        read = there or read
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
    return slowest_stage(pipeline, range(first, len(pipeline.stages)))


def slowest_stage(pipeline: PipelineFacts, indices: range) -> int | None:
    """The index among ``indices`` of the slowest working stage by TF's stage timers
    (a bookkeeping stage only where nothing else was timed); None where none was."""
    rated = [(i, pipeline.stages[i]) for i in indices if pipeline.stages[i].root_elements_per_s]
    working = [(i, s) for i, s in rated if s.kind not in BOOKKEEPING] or rated
    return min(working, key=lambda pair: pair[1].root_elements_per_s or 0.0)[0] if working else None


def _batch_s(pipeline: PipelineFacts, index: int | None) -> float | None:
    rate = pipeline.stages[index].root_elements_per_s if index is not None else None
    return 1 / rate if rate else None


@dataclass(frozen=True)
class FirstPass:
    """A pipeline with a cache, as its first pass and the later ones cost it per batch:
    ``filling`` the slowest stage before the cache (``filling_s`` a batch, the first
    epoch only), ``steady_s`` the slowest after it, ``passes`` the run's passes (one
    iterator a pass; None where a repeat after the cache runs many in one)."""

    filling: int | None
    filling_s: float | None
    steady_s: float | None
    passes: int | None

    @property
    def counts(self) -> bool:
        """Whether the first pass counts in the run's time per batch: its passes known
        and its stages before the cache slower than those after it."""
        return (
            self.passes is not None
            and self.filling_s is not None
            and self.steady_s is not None
            and self.filling_s > self.steady_s
        )

    @property
    def batch_s(self) -> float | None:
        """Per batch over the run's passes (the first with its stages before the cache)."""
        if not self.counts:
            return self.steady_s
        assert self.passes and self.filling_s and self.steady_s  # counts says so
        return (self.filling_s + (self.passes - 1) * self.steady_s) / self.passes

    @property
    def dominates(self) -> bool:
        """The first epoch's time per batch beyond the later ones' outweighs all of
        theirs (one epoch of decoding JPEGs at 24 ms a batch in a 3-epoch run of 1.8 ms
        batches): its stage, not theirs, set the input's pace over the run."""
        if not self.counts:
            return False
        assert self.passes and self.filling_s and self.steady_s  # counts says so
        return self.filling_s - self.steady_s > self.steady_s * (self.passes - 1)


def first_pass(pipeline: PipelineFacts) -> FirstPass:
    """The pipeline's first pass against the later ones (see :class:`FirstPass`)."""
    first = first_steady_stage(pipeline)
    cached = any(s.kind == "cache" for s in pipeline.stages)
    repeated = any(s.kind == "repeat" for s in pipeline.stages[first:])
    filling = slowest_stage(pipeline, range(first))
    return FirstPass(
        filling=filling,
        filling_s=_batch_s(pipeline, filling),
        steady_s=_batch_s(pipeline, slowest_stage(pipeline, range(first, len(pipeline.stages)))),
        passes=max(1, pipeline.iterators) if cached and not repeated else None,
    )


def run_bottleneck(pipeline: PipelineFacts) -> tuple[int | None, bool]:
    """The stage that set the input's pace over this run, and whether it runs in the
    first epoch only: the slowest before a cache where :attr:`FirstPass.dominates`,
    else :func:`steady_bottleneck`."""
    run = first_pass(pipeline)
    if run.dominates:
        return run.filling, True
    return steady_bottleneck(pipeline), False
