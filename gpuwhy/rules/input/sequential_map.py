"""input.sequential-map: a map stage stays sequential and is the input bottleneck."""

from __future__ import annotations

from typing import Any

from gpuwhy.derived.pipeline import bottleneck, culprit_location
from gpuwhy.derived.pipeline_stages import runs_sequentially, stage_share, vectorisable
from gpuwhy.derived.steps_input import beside_steps, input_wait
from gpuwhy.facts import Facts
from gpuwhy.finding import Finding
from gpuwhy.fixes import pipeline_code
from gpuwhy.fixes.pipeline_evidence import (
    pipeline_name,
    sequential_reason,
    stage_gain_text,
    stage_row,
    wait_evidence,
    waits_for_input,
)
from gpuwhy.formatting import stage_label
from gpuwhy.rules.base import Rule


class SequentialMap(Rule):
    """A `map` stage runs on one thread after TF's optimisations and is the bottleneck.

    ## What it detects
    In the pipeline TensorFlow actually runs (after its graph rewrites), the slowest
    stage is a `map` that processes one element at a time, while its consumer waits for
    input at least `min_input_wait` of its time. A map TF parallelised by itself is not
    reported: map_parallelization (on by default with autotune) turns a map written
    without `num_parallel_calls` into a parallel one, and autotune may give it one
    thread on a busy host; that is not this finding. It parallelises only stateless
    functions, so a map stays sequential when its function uses stateful ops such as
    `tf.random.uniform` or `tf.image.random_*`, calls Python (`tf.py_function`), is
    written with `num_parallel_calls=1`, or when autotune or the rewrite is off. The
    finding says which of these applies. A pipeline read beside the training steps
    (Keras fit's `validation_data`) is reported low: its wait is not the steps'.

    ## Why is this slow?
    A sequential map processes one element at a time on one core, however many cores
    the host has. The batch is ready only after `batch_size` calls in a row, so the
    GPU idles for the difference between that time and its own step time, on every
    step; `prefetch` cannot hide a producer that is slower than the consumer.

    ## Example
    ```python
    def augment(image, label):
        image = tf.image.random_flip_left_right(image)     # stateful random ops:
        image = tf.image.random_brightness(image, 0.2)     # not auto-parallelised
        return image, label

    ds = ds.map(augment).batch(128).prefetch(tf.data.AUTOTUNE)
    ```

    Use instead:
    ```python
    def augment(element, seed):                            # stateless: parallel-safe
        image, label = element
        image = tf.image.stateless_random_flip_left_right(image, seed)
        image = tf.image.stateless_random_brightness(image, 0.2, seed)
        return image, label

    seeds = tf.data.Dataset.random(seed=42).batch(2, drop_remainder=True)
    ds = (tf.data.Dataset.zip((ds, seeds))
          .map(augment, num_parallel_calls=tf.data.AUTOTUNE)
          .batch(128)
          .prefetch(tf.data.AUTOTUNE))
    ```

    A map whose function is not random gets `num_parallel_calls=tf.data.AUTOTUNE`. One
    that calls Python is not reported here: the Python is the cause, and
    input.python-function reports it once, with the rewrite and the parallel calls that
    help where the Python releases the GIL. A cheap function called per element (self time per call below
    `vectorise_below_us`) also gets "batch first, then map": its time is mostly
    tf.data's per-element overhead.

    ## Options
    - `min_input_wait`: input-wait fraction of the consumer's time below which a
      sequential map is not reported (0.05, XProf's input-bound threshold).
    - `vectorise_below_us`: self time per call, in microseconds, below which the fix
      also batches before mapping (50).
    """

    id = "input.sequential-map"
    measured_thresholds = {"min_input_wait": "floor"}
    severity = "high"
    status = "stable"
    needs = ("tfdata",)  # steps, when present, give the measured input wait
    options = {"min_input_wait": 0.05, "vectorise_below_us": 50}
    question = "Why is the pipeline slow?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        assert facts.tfdata is not None  # in `needs`: never run without it
        findings = []
        for pipeline in facts.tfdata.pipelines:
            index = pipeline.bottleneck
            stage = bottleneck(pipeline)  # None unless index names a stage
            if index is None or stage is None or not runs_sequentially(stage, pipeline.autotune):
                continue
            if stage.python:  # one cause, one finding: input.python-function's
                continue
            wait = input_wait(facts, pipeline)
            if wait is None or wait.fraction < options["min_input_wait"]:
                continue
            label = stage_label(stage)
            share = stage_share(pipeline, stage)
            below_s = options["vectorise_below_us"] * 1e-6
            if vectorisable(pipeline, index, below_s):
                fix = pipeline_code.vectorise(pipeline, index)  # parallel, and once per batch
            elif stage.random and stage.stateful:
                fix = pipeline_code.stateless_random(stage)
            else:
                fix = pipeline_code.parallel_map(stage)
            row = stage_row(pipeline, index)
            evidence: dict[str, Any] = {
                "stage": label,
                "pipeline": pipeline_name(pipeline),
                "why_sequential": sequential_reason(stage, pipeline.autotune),
                "threads": stage.parallelism or 1,
                "num_parallel_calls_written": stage.parallelism_written,
                "ms_per_element": row["ms_per_element"],
                "share_of_pipeline_time": row["share_of_pipeline_time"],
                **wait_evidence(wait),
            }
            # fit's validation_data: its own wait, not the steps' (low, no step gain)
            beside = beside_steps(facts, pipeline)
            own = wait.fraction * (share if share is not None else 1.0)
            gain = 0.0 if beside else own
            findings.append(
                self.finding(
                    f"Input stage {label} runs on one thread and is the slowest stage; "
                    + waits_for_input(facts, pipeline, wait),
                    severity="low" if beside else self.severity,
                    evidence=evidence,
                    # the .map() call the fix gives its threads, not its function's
                    # def (one function may run in several pipelines' maps)
                    location=stage.location or culprit_location(stage),
                    fix="\n".join(fix),
                    estimated_gain=(
                        f"none on the training steps: the pipeline is read beside them "
                        f"(up to {own:.0%} of that reader's own time)"
                        if beside
                        else stage_gain_text(gain)
                    ),
                    gain_value=None if gain is None else round(gain, 4),
                )
            )
        return findings
