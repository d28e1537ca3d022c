"""input.projected-bound: on the target GPU (projected), the step would wait for input."""

from __future__ import annotations

from typing import Any

from gpuwhy.derived.pipeline import culprit_location, run_bottleneck
from gpuwhy.derived.stage import derived
from gpuwhy.facts import Facts, ProjectionFacts
from gpuwhy.finding import Finding
from gpuwhy.fixes import pipeline_code
from gpuwhy.formatting import duration, milliseconds, stage_label
from gpuwhy.rules.base import Rule


class ProjectedInputBound(Rule):
    """On the GPU named with `--target`, the projected step is shorter than the time the
    input pipeline needs per batch: the GPU would wait for input.

    ## What it detects
    `gpuwhy run --target A100` projects the training step onto that GPU (the cost
    model of the audited graph at the GPU's published peaks) and joins it with the
    input pipeline as this run measured it: the time it needs per batch by TF's stage
    timers (which ran beside the model, on cores the steps share: on a busy host longer
    than the pipeline alone takes, never shorter) and, where the pipeline set the
    steps' pace here (they waited for
    input most of their time), as it delivered beside the model. Where a batch takes
    longer than the projected step, the step would wait the difference. The title
    gives the pipeline's own time per batch (alone). Medium when even the
    band's lowest wait (the slowest projected step, the faster pipeline figure) is at
    least `medium_at`, high when it is at least `high_at`: a projection's uncertainty
    never makes the finding. It is a projection, said as one, never a measurement.

    ## Why is this slow?
    A CPU run hides input problems: its step is so slow that any pipeline keeps up.
    On a GPU the same step is tens to hundreds of times shorter, while the pipeline
    still runs on the host's CPU at the same speed: JPEG decoding, Python generators or
    a sequential map that cost nothing on the CPU run become the whole step. Renting a
    faster GPU then buys nothing.

    ## Example
    ```python
    ds = tf.data.TFRecordDataset(files).map(decode_jpeg_and_augment).batch(64)
    model.fit(ds)   # CPU: 800 ms steps, no wait; A100 (projected): 4 ms steps, 95% waiting
    ```

    Use instead: the fix for the pipeline's slowest stage (input.bound gives the same
    on a measured wait): parallel calls, parallel reads, cache, or decoding on the GPU.

    ## Options
    - `medium_at`: lowest projected input-wait share that makes the finding (0.05).
    - `high_at`: lowest projected share that makes it high (0.20).
    - `vectorise_below_us`: as for input.bound, the self time per call below which the
      fix batches before a map (50).
    """

    id = "input.projected-bound"
    measured_thresholds = {"medium_at": "floor", "high_at": "floor"}
    severity = "high"
    status = "stable"
    since = "0.2.0"
    needs = ("projection",)
    options = {"medium_at": 0.05, "high_at": 0.20, "vectorise_below_us": 50}
    question = "Will my pipeline keep the GPU busy?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        projection = derived(facts).projection
        assert projection is not None  # in `needs`: never run without it
        if projection.input_wait_fraction is None:
            return []
        low = projection.input_wait_low or 0.0
        if low < options["medium_at"]:
            return []
        high = projection.input_wait_high or 0.0
        pipeline = derived(facts).steps_pipeline
        title = (
            f"On {projection.gpu} (projected), steps would wait for input "
            f"{projection.input_wait_fraction:.0%} of the time ({low:.0%}–{high:.0%}): the "
            f"step would take {duration(projection.step_s)} "
            f"({duration(projection.step_low_s)}–{duration(projection.step_high_s)}), "
            f"the pipeline takes {_per_batch(projection)} per batch here"
        )
        evidence: dict[str, Any] = {
            "gpu": projection.gpu,
            "projected_step_ms": round(projection.step_s * 1000, 3),
            "projected_step_band_ms": [
                round(projection.step_low_s * 1000, 3),
                round(projection.step_high_s * 1000, 3),
            ],
            "input_ms_per_batch_alone": milliseconds(projection.input_batch_s, 3),
            "input_ms_per_batch_as_delivered": milliseconds(projection.input_batch_measured_s, 3),
            "projected_input_wait": projection.input_wait_fraction,
            "projected_input_wait_band": [low, high],
            "calibrated": projection.calibrated,
            "what": "a projection from the traced graph and the GPU's published peaks, "
            "joined with the input pipeline measured on this host; not a measurement",
        }
        fix = pipeline_code.generic()
        location = pipeline.location if pipeline is not None else None
        index, first_epoch = run_bottleneck(pipeline) if pipeline is not None else (None, False)
        if pipeline is not None and index is not None:
            stage = pipeline.stages[index]
            title += f"; its slowest stage is {stage_label(stage)}"
            if first_epoch:  # before the cache: most of the input's time in this run
                title += " (before cache(): in the first epoch, most of this run's input time)"
            evidence["bottleneck"] = stage_label(stage)
            fix = pipeline_code.for_stage(pipeline, index, options["vectorise_below_us"] * 1e-6)
            location = culprit_location(stage) or location
        return [
            self.finding(
                title,
                severity="high" if low >= options["high_at"] else "medium",
                evidence=evidence,
                location=location,
                fix="\n".join(fix),
                estimated_gain=(
                    f"projection: up to {projection.input_wait_fraction:.0%} of the GPU "
                    "step time, once the pipeline keeps up"
                ),
                gain_value=round(projection.input_wait_fraction, 4),
            )
        ]


def _per_batch(projection: ProjectionFacts) -> str:
    """The pipeline's own time per batch: alone where TF's stage timers gave it, else as
    the steps got their batches (the projection uses that one only where the pipeline
    set the steps' pace)."""
    if projection.input_batch_s is not None:
        return duration(projection.input_batch_s)
    return f"{duration(projection.input_batch_measured_s)} (as the steps got their batches)"
