"""A pipeline, its stages and its wait as findings show them, for the input,
cpu-starved and codec rules alike: a stage for people (``ParallelMapV2(parse at
train.py:41)``), its evidence row and the stage table, who waits and for how long, the
pipeline's name, and the gain estimates said one way by every rule.

The analyses these read (the wait, each stage's share and time) are gpuwhy.derived's
(input_wait.py, pipeline_stages.py); which pipeline the steps read, and its slowest
stage, are gpuwhy.derived.pipeline's.
"""

from __future__ import annotations

import re
from typing import Any

from gpuwhy.derived.input_wait import InputWait
from gpuwhy.derived.pipeline_stages import is_bottleneck, per_element_s, stage_share
from gpuwhy.derived.steps_input import beside_steps
from gpuwhy.facts import Facts, PipelineFacts, PipelineStage
from gpuwhy.formatting import consumer_words, milliseconds, stage_label


def who_waits(facts: Facts, pipeline: PipelineFacts) -> str:
    """Who waits, with the verb, in a title: "steps wait", or the consumer read
    beside them ("Model.evaluate at train.py:147 (beside the training steps) waits"). An
    evaluate the program calls is no validation: fit's own is said so in its name."""
    if beside_steps(facts, pipeline):
        # mid-title, after a stage's own words: "...; the loop at train.py:18 (beside..."
        name = consumer_words(pipeline.consumer, False, pipeline.read_at, pipeline.read_via)
        return f"{name} (beside the training steps) waits"
    return "steps wait"


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


def stage_row(pipeline: PipelineFacts, index: int) -> dict[str, Any]:
    """One evidence table row: what TF ran, how long, how parallel, where it is written."""
    stage = pipeline.stages[index]
    share = stage_share(pipeline, stage)
    per_element = per_element_s(stage)
    # no model of TF's read (a PyDataset with workers turns autotune off): the stage's
    # count and threads are unknown, not 0 and 1 (its Python runs in Keras' workers)
    unmodelled = pipeline.model_error is not None and not stage.elements
    row: dict[str, Any] = {
        "stage": stage_label(stage),
        "kind": stage.kind,
        "written_as": "+".join(stage.written_as) or "added by TF",
        "elements": stage.elements if pipeline.elements_known and not unmodelled else None,
        "ms_per_element": None if per_element is None else round(per_element * 1000, 3),
        # not a parallel stage: one thread
        "threads": stage.parallelism or (None if unmodelled else 1),
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
        "input_wait_ms_per_step": milliseconds(wait.per_element_s, 3),
        "consumer_ms_per_step": milliseconds(wait.consumer_s, 3),
        "input_wait_measured_by": wait.measured_by,
    }


def pipeline_name(pipeline: PipelineFacts) -> str:
    where = f" built at {pipeline.location}" if pipeline.location else ""
    if pipeline.helper_location:
        where += f" (by the function at {pipeline.helper_location})"
    reader = consumer_words(pipeline.consumer, False, pipeline.read_at, pipeline.read_via)
    return f"tf.data pipeline {pipeline.id}{where}, read by {reader}"


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
