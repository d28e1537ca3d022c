"""input.no-prefetch: input preparation and GPU compute do not overlap."""

from __future__ import annotations

from typing import Any

from gpuwhy.derived.pipeline_stages import ends_buffered
from gpuwhy.derived.steps_input import input_wait
from gpuwhy.facts import Facts, PipelineFacts
from gpuwhy.finding import Finding
from gpuwhy.fixes import pipeline_code
from gpuwhy.fixes.pipeline_evidence import gain_text, pipeline_name, wait_evidence
from gpuwhy.formatting import stage_label
from gpuwhy.rules.base import Rule


class NoPrefetch(Rule):
    """Input preparation and GPU compute take turns instead of overlapping.

    ## What it detects
    A tf.data pipeline that, as TF ran it, ends without a buffer ahead of its consumer,
    while the consumer waits for input at least `min_input_wait` of its time. TF adds a
    final `prefetch` by itself (`inject_prefetch`) unless autotune is off
    (`options.autotune.enabled = False`) or the rewrite is
    (`experimental_optimization.inject_prefetch = False`); it also leaves alone a
    pipeline that ends in a stage that already produces ahead on its own threads (a
    parallel `map`, a fused map-and-batch, a parallel `batch` or `interleave`), and so
    does this rule. A prefetch TF injected counts as one.

    ## Why is this slow?
    Without a buffer the host starts on batch N+1 only when the loop asks for it, after
    step N has been dispatched. At best the GPU work already queued for step N hides
    part of that time; anything that waits for a result (reading the loss, a metric, a
    callback) removes even that. Step time tends to input time plus compute time
    instead of the larger of the two. `prefetch` runs the producer on a background
    thread, so the next batch is already in host memory when the step starts.

    ## Example
    ```python
    options = tf.data.Options()
    options.autotune.enabled = False            # also turns off TF's own prefetch
    ds = (tf.data.Dataset.from_tensor_slices(paths)
          .map(load)
          .batch(64)
          .with_options(options))
    for x, y in ds:                             # load, then train, then load ...
        train_step(x, y)
    ```

    Use instead:
    ```python
    ds = (tf.data.Dataset.from_tensor_slices(paths)
          .map(load, num_parallel_calls=tf.data.AUTOTUNE)
          .batch(64)
          .prefetch(tf.data.AUTOTUNE)           # produced while the GPU computes
          .with_options(options))
    ```

    The estimated gain is the overlap prefetching can buy: with a wait fraction `w`,
    at most `min(w, 1 - w)` of the step, as a step then lasts the longer of input and
    compute instead of their sum. A producer slower than the step still leaves a wait
    (see input.bound for its slowest stage).

    ## Options
    - `min_input_wait`: input-wait fraction of step time below which the finding does
      not fire (0.05, XProf's input-bound threshold); it does not fire either when the
      overlap a prefetch could buy, `min(w, 1 - w)`, is below it (a step that is almost
      all wait has no compute to hide the input behind).
    """

    id = "input.no-prefetch"
    measured_thresholds = {"min_input_wait": "floor"}
    severity = "medium"
    status = "stable"
    needs = ("tfdata",)  # steps, when present, give the measured input wait
    options = {"min_input_wait": 0.05}
    question = "Why is the GPU idle between steps?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        assert facts.tfdata is not None  # in `needs`: never run without it
        findings = []
        for pipeline in facts.tfdata.pipelines:
            if ends_buffered(pipeline):
                continue
            wait = input_wait(facts, pipeline)
            if wait is None or wait.fraction < options["min_input_wait"]:
                continue
            overlap = min(wait.fraction, 1 - wait.fraction)
            if overlap < options["min_input_wait"]:
                # nearly all of the step is the wait: there is no compute to hide it
                # behind, so a prefetch alone buys nothing (input.bound covers it)
                continue
            last = stage_label(pipeline.stages[-1]) if pipeline.stages else None
            evidence: dict[str, Any] = {
                "pipeline": pipeline_name(pipeline),
                "last_stage": last,
                "prefetch_written": pipeline.prefetch_written,
                "prefetch_as_run": pipeline.prefetch_run,
                "autotune": pipeline.autotune,
                "why_none": _why(pipeline),
                **wait_evidence(wait),
            }
            findings.append(
                self.finding(
                    f"The pipeline{' built at ' + pipeline.location if pipeline.location else ''} "
                    f"has no prefetch as TF runs it; steps wait for input {wait.fraction:.0%} "
                    "of the time",
                    evidence=evidence,
                    location=pipeline.location,
                    fix=_fix(pipeline),
                    estimated_gain=gain_text(
                        overlap, "input and compute overlap instead of taking turns"
                    ),
                    gain_value=round(overlap, 4),
                )
            )
        return findings


def _why(pipeline: PipelineFacts) -> str:
    if not pipeline.autotune:
        return (
            "autotune is off (options.autotune.enabled = False): TF injects no prefetch "
            "and none is written"
        )
    return (
        "none is written, and TF injected none: options.experimental_optimization."
        "inject_prefetch (or the default optimisations) turned off"
    )


def _fix(pipeline: PipelineFacts) -> str:
    lines = pipeline_code.prefetch_at_end(pipeline)
    if not pipeline.autotune:
        lines.append(
            "# a written prefetch buffers with autotune off too; turning autotune "
            "back on also lets TF parallelise maps: options.autotune.enabled = True"
        )
    return "\n".join(lines)
