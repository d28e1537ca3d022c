"""Shared reading of the ``tfdata`` section for the input, cpu-starved and codec rules.

Not a rule. It answers the questions every input rule asks of a pipeline the same way,
so their findings agree with each other and with ``input.bound``:

- how much of the consumer's time goes to waiting for this pipeline (:func:`input_wait`),
- which stage is the slowest and what share of the pipeline's work it does,
- how to name a stage for people (``ParallelMapV2(parse at train.py:41)``) and where
  to point them (the function's file:line, else the transformation's),
- whether a map runs sequentially *as TF ran it*, after its own rewrites.

Which pipeline the steps read, and its slowest stage, are gpuwhy.derived.pipeline's:
the verdict, the report and the projection ask them too.

Stage times are TF's own (``get_model_proto``): ``processing_time`` is a stage's *self*
time, summed over the threads that ran it (tensorflow/core/framework/model.cc records it
between RecordStart/RecordStop, which stop while the stage waits for its input).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpuwhy.derived.pipeline import NEXT_TIMING, steps_pipeline
from gpuwhy.facts import Facts, PipelineFacts, PipelineStage, StepFacts
from gpuwhy.formatting import duration, stage_label

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
# Fewer elements than this and a pipeline's wait, derived from the wall-clock window its
# iterators were read over (polled, so each end is known to a tenth of a second or
# worse), is mostly the iterators' start-up: no finding comes from it.
MIN_ELEMENTS_TO_JUDGE_WAIT = 20
# Fewer measured steps than this and the steps' wait share is a handful of samples.
MIN_STEPS_TO_JUDGE_WAIT = 10
# The window's wait per element is taken as TF's stage timers' bound when it exceeds it
# by more than this factor (plus a millisecond): the timers measure the work directly.
WAIT_BOUND_TOLERANCE = 2.0

CONSUMER_NAMES = {
    "keras-fit": "Model.fit",
    "keras-evaluate": "Model.evaluate",
    "keras-predict": "Model.predict",
    "python-loop": "The loop over the dataset",
}


@dataclass(frozen=True)
class InputWait:
    """How long the consumer of a pipeline waits for its elements."""

    fraction: float  # of the consumer's time (a step: wait + compute)
    per_element_s: float | None  # wait per step / element
    consumer_s: float | None  # the step, or tf.data's gap between GetNext calls
    measured_by: str  # for the evidence: how a person can check it


def production_bound_s(pipeline: PipelineFacts) -> float | None:
    """At most how long the pipeline takes to make one element: the stages' self times
    (TF's own timers, summed over threads) per element the consumer got. Parallel stages
    make the real time shorter, never longer, so a consumer cannot wait longer than this
    for an element the pipeline makes while it waits."""
    if not pipeline.elements or not pipeline.stages or pipeline.model_error:
        return None
    total = pipeline_time_s(pipeline)
    return total / pipeline.elements if total > 0 else None


def pipeline_wait(pipeline: PipelineFacts) -> InputWait | None:
    """The wait measured for this pipeline: wait / (wait + gap), from the wall-clock
    window its iterators were read over less tf.data's consumer timer (gap).

    None (not judged) below ``MIN_ELEMENTS_TO_JUDGE_WAIT`` elements. Where the window's
    wait per element is far above what TF's stage timers allow (an iterator read twice
    per pass, whose window is its own start-up), the two measurements disagree and the
    timers, which measure the work itself, are trusted: the wait is their bound, and
    ``measured_by`` says so.
    """
    wait, gap = pipeline.wait_per_element_s, pipeline.gap_median_s
    if wait is None or gap is None or pipeline.elements < MIN_ELEMENTS_TO_JUDGE_WAIT:
        return None
    if pipeline.wait_source == NEXT_TIMING:
        how = (
            "next() timed around each element the loop read (direct), against the "
            "consumer's time between two GetNext calls (gap)"
        )
    else:
        how = (
            "tf.data's timers: wait per element against the consumer's "
            "time between two GetNext calls (gap)"
        )
    bound = production_bound_s(pipeline)
    if (
        pipeline.wait_source != NEXT_TIMING  # a direct measurement needs no bound
        and bound is not None
        and wait > WAIT_BOUND_TOLERANCE * bound + 1e-3
    ):
        how = (
            f"TF's stage timers: at most {duration(bound)} of work per element, where the "
            f"wall-clock window of its iterators gave a wait of {duration(wait)}; the "
            "timers measure the work directly and are trusted"
        )
        wait = bound
    if wait + gap <= 0:
        return None
    return InputWait(
        fraction=wait / (wait + gap),
        per_element_s=wait,
        consumer_s=gap,
        measured_by=how,
    )


def steps_wait(steps: StepFacts) -> InputWait | None:
    """The steps' measured wait share; None below ``MIN_STEPS_TO_JUDGE_WAIT`` steps."""
    if steps.input_wait_fraction is None or steps.count - steps.warmup < MIN_STEPS_TO_JUDGE_WAIT:
        return None
    how = f" by {steps.input_wait_source}" if steps.input_wait_source else ""
    return InputWait(
        fraction=steps.input_wait_fraction,
        per_element_s=steps.input_wait_median_s,
        consumer_s=steps.median_s,
        measured_by=f"{steps.marker}{how}",
    )


def input_wait(facts: Facts, pipeline: PipelineFacts) -> InputWait | None:
    """The steps' measured wait for the pipeline they read (what input.bound reports),
    else the pipeline's own timers, else None (not measured)."""
    if facts.steps is not None and steps_pipeline(facts.tfdata, facts.steps) is pipeline:
        measured = steps_wait(facts.steps)
        if measured is not None:
            return measured
    return pipeline_wait(pipeline)


# Consumers that read a pipeline beside the training steps: fit's validation_data,
# a predict call.
_BESIDE_STEPS = ("keras-evaluate", "keras-predict")


def beside_steps(facts: Facts, pipeline: PipelineFacts) -> bool:
    """The pipeline is read beside the training steps (Keras fit's validation_data, an
    evaluate or predict call), while the steps read another one: its wait is not the
    steps' wait, and a finding on it takes no figure from the steps."""
    if pipeline.consumer not in _BESIDE_STEPS or facts.steps is None:
        return False
    feeding = steps_pipeline(facts.tfdata, facts.steps)
    return feeding is not None and feeding is not pipeline


def who_waits(facts: Facts, pipeline: PipelineFacts) -> str:
    """Who waits, with the verb, in a title: "steps wait", or the consumer read
    beside them ("Model.evaluate (validation, beside the training steps) waits")."""
    if beside_steps(facts, pipeline):
        name = CONSUMER_NAMES.get(pipeline.consumer, pipeline.consumer)
        return f"{name} (validation, beside the training steps) waits"
    return "steps wait"


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


def function_name(stage: PipelineStage) -> str:
    """A name to put in prose: the user's function, or what it is ("the lambda")."""
    name = stage.function or ""
    if re.fullmatch(r"[A-Za-z_][A-Za-z_0-9.]*", name):
        return name
    return "the lambda" if name == "<lambda>" else "the function"


def function_code(stage: PipelineStage) -> str:
    """The function in pasted code: its name, or a placeholder (never an undefined name)."""
    name = stage.function or ""
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z_0-9.]*", name) else "<your function>"


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


def function_calls(stage: PipelineStage) -> int:
    """Calls of the stage's function: one per input element. A fused MapAndBatch
    produces batches (ratio = batch size) but calls its function per element."""
    return int(stage.elements * max(stage.ratio, 1.0))


def per_call_s(stage: PipelineStage) -> float | None:
    calls = function_calls(stage)
    return stage.self_time_s / calls if calls else None


def batched_later(pipeline: PipelineFacts, index: int) -> bool:
    """A batch follows the stage (or is fused into it): the map can move after it."""
    stage = pipeline.stages[index]
    return "batch" in stage.written_as or any(
        s.kind == "batch" or "batch" in s.written_as for s in pipeline.stages[index + 1 :]
    )


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


def sequential_reason(stage: PipelineStage, autotune: bool) -> str:
    """Why TF kept this map sequential, for people."""
    if stage.parallelism_written == 1:
        return "num_parallel_calls=1 as written"
    if stage.python and stage.stateful:
        return (
            "its function calls Python (py_function/numpy_function ops are stateful, "
            "and TF's map_parallelization skips stateful functions)"
        )
    if stage.random and stage.stateful:
        return (
            "its function draws stateful random numbers (tf.random.uniform, "
            "tf.image.random_*), and TF's map_parallelization skips stateful functions"
        )
    if stage.stateful:
        return (
            "its function has stateful ops, and TF's map_parallelization skips stateful functions"
        )
    if not autotune:
        return "autotune is off (options.autotune.enabled = False): map_parallelization needs it"
    return (
        "written without num_parallel_calls, and TF's map_parallelization did not apply "
        "(turned off in the dataset's options, or the map runs inside an interleave/"
        "flat_map function)"
    )


def ends_buffered(pipeline: PipelineFacts) -> bool:
    """The pipeline as TF ran it ends in a prefetch or another stage that produces ahead."""
    if pipeline.prefetch_run:
        return True
    if not pipeline.stages:
        return False
    last = pipeline.stages[-1]
    return last.kind == "prefetch" or last.name.startswith(ASYNC_STAGE_PREFIXES)


def stage_row(pipeline: PipelineFacts, index: int) -> dict[str, Any]:
    """One evidence table row: what TF ran, how long, how parallel, where it is written."""
    stage = pipeline.stages[index]
    share = stage_share(pipeline, stage)
    per_element = per_element_s(stage)
    row: dict[str, Any] = {
        "stage": stage_label(stage),
        "kind": stage.kind,
        "written_as": "+".join(stage.written_as) or "added by TF",
        "elements": stage.elements,
        "ms_per_element": None if per_element is None else round(per_element * 1000, 3),
        "threads": stage.parallelism or 1,  # not a parallel stage: one thread
        "share_of_pipeline_time": None if share is None else round(share, 3),
    }
    flags = [
        n
        for n, on in (
            ("python", stage.python),
            ("stateful", stage.stateful),
            ("random", stage.random),
        )
        if on
    ] + list(stage.codec_ops)
    if flags:
        row["flags"] = ", ".join(flags)
    if is_bottleneck(pipeline, index):
        row["bottleneck"] = True
    return row


def stage_table(pipeline: PipelineFacts) -> list[dict[str, Any]]:
    return [stage_row(pipeline, i) for i in range(len(pipeline.stages))]


def wait_evidence(wait: InputWait) -> dict[str, Any]:
    return {
        "input_wait_fraction": round(wait.fraction, 3),
        "input_wait_ms_per_step": _ms(wait.per_element_s),
        "consumer_ms_per_step": _ms(wait.consumer_s),
        "input_wait_measured_by": wait.measured_by,
    }


def pipeline_name(pipeline: PipelineFacts) -> str:
    where = f" built at {pipeline.location}" if pipeline.location else ""
    if pipeline.helper_location:
        where += f" (by the function at {pipeline.helper_location})"
    return f"tf.data pipeline {pipeline.id}{where}, read by {pipeline.consumer}"


def gain_text(fraction: float, what: str) -> str:
    """An honest estimate of recoverable step time, said to be one."""
    return (
        f"estimate: up to {fraction:.0%} of step time ({what}); "
        "the fix's real gain shows when the run is measured again"
    )


def stage_gain_text(fraction: float) -> str:
    """The estimate for speeding up one stage, said the same way by every rule that
    names one: the consumer's wait times the stage's share of the pipeline's work."""
    return gain_text(fraction, "the wait times this stage's share of the pipeline's work")


def waits_for_input(facts: Facts, pipeline: PipelineFacts, wait: InputWait) -> str:
    """ "steps wait for input 42% of the time", or the validation consumer in place
    of the steps: the clause a stage's title ends with."""
    return f"{who_waits(facts, pipeline)} for input {wait.fraction:.0%} of the time"


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)
