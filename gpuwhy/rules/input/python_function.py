"""input.python-function: the input pipeline calls back into Python."""

from __future__ import annotations

from typing import Any

from gpuwhy.derived.input_wait import beside_steps, input_wait
from gpuwhy.derived.pipeline import culprit_location
from gpuwhy.derived.pipeline_stages import is_bottleneck, stage_share
from gpuwhy.facts import Facts, PipelineStage
from gpuwhy.finding import Finding
from gpuwhy.fixes import pipeline_code
from gpuwhy.fixes.pipeline_evidence import (
    pipeline_name,
    stage_gain_text,
    stage_row,
    wait_evidence,
    waits_for_input,
)
from gpuwhy.formatting import stage_label
from gpuwhy.rules.base import Rule

# Said of a Python stage: what holds is known, what parallel calls gain is not measured.
_WHY_SEQUENTIAL = (
    "TF runs Python one element at a time (the stage is stateful); parallel calls may "
    "overlap where the Python releases the GIL (sleeps, I/O, NumPy on large arrays) and "
    "take turns where it is pure Python"
)
_WHY_PARALLEL = (
    "parallel calls of Python may take turns on one core where the Python holds the GIL "
    "(pure-Python code), and overlap only where it releases it (sleeps, I/O, NumPy)"
)


class PythonFunction(Rule):
    """The input pipeline runs Python code (py_function, numpy_function, from_generator).

    ## What it detects
    A stage of the tf.data pipeline, as TF ran it, that calls back into the Python
    interpreter: `tf.py_function` or `tf.numpy_function` inside a `map`/`filter`/
    `interleave` function, or a `tf.data.Dataset.from_generator` source. The finding
    names the stage and the file:line of its function, with its time per element, its
    threads and its share of the pipeline's time (TF's own per-stage timers).

    Severity follows what the stage costs the GPU: high when it is the pipeline's
    slowest stage and the consumer waits for input at least `min_input_wait` of its
    time, medium when it is the slowest stage of a pipeline the GPU does not wait for
    (or whose wait was not measured), low when it takes at least `min_share` of the
    pipeline's time without being the slowest. A cheaper Python stage is not reported.
    Where TF's per-stage timers could not be read, its cost is unknown and it is
    reported as low, as is a stage of a pipeline read beside the training steps
    (Keras fit's `validation_data`): its wait is not the steps'.

    ## Why is this slow?
    Python bytecode runs under the GIL: `num_parallel_calls` threads running pure-Python
    code take turns on one core instead of using all of them, and compete with the
    training loop's own Python thread. Python that sleeps, waits on files or the
    network, or hands large arrays to NumPy, OpenCV or PIL releases the GIL while it
    does, and parallel calls of it may overlap: the finding says "may", since how much
    of a function holds the GIL is not measured here; `gpuwhy fix --input --assume-pure`
    times the map with and without parallel calls and keeps them only where they gain.
    The fix therefore leads with the rewrite in TF ops. The stage is stateful, so TF's
    map_parallelization leaves it sequential;
    tensors are converted to NumPy and back on every call; and the pipeline cannot run
    on tf.data service workers, since the Python function exists only in this process.
    When it is the slowest stage, the GPU idles until Python has produced the batch.

    ## Example
    ```python
    def load(path):
        img = PIL.Image.open(path.numpy().decode()).convert("RGB").resize((224, 224))
        return np.asarray(img, np.float32) / 255.0

    ds = paths.map(lambda p: tf.py_function(load, [p], tf.float32),
                   num_parallel_calls=tf.data.AUTOTUNE)      # PIL's Python parts: the GIL
    ```

    Use instead:
    ```python
    def load(path):
        img = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
        return tf.image.resize(img, (224, 224)) / 255.0   # TF ops: no GIL, all cores

    ds = paths.map(load, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
    ```

    A `from_generator` source becomes `from_tensor_slices` over arrays that fit in
    memory, TFRecord shards read with `num_parallel_reads`, or, where the generator must
    stay, one generator per shard under `interleave(..., num_parallel_calls=AUTOTUNE)`.

    ## Options
    - `min_share`: share of the pipeline's time (TF's self time of each stage) a Python
      stage that is not the slowest needs to be reported (0.10).
    - `min_input_wait`: input-wait fraction of the consumer's time from which a slowest
      Python stage is high (0.05, XProf's input-bound threshold).
    """

    id = "input.python-function"
    severity = "medium"
    status = "stable"
    needs = ("tfdata",)  # steps, when present, give the measured input wait
    options = {"min_share": 0.10, "min_input_wait": 0.05}
    question = "Why is the pipeline slow?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        assert facts.tfdata is not None  # in `needs`: never run without it
        findings = []
        for pipeline in facts.tfdata.pipelines:
            wait = input_wait(facts, pipeline)
            bound = wait is not None and wait.fraction >= options["min_input_wait"]
            # fit's validation_data: its own wait, not the steps'
            beside = beside_steps(facts, pipeline)
            for index, stage in enumerate(pipeline.stages):
                if not stage.python:
                    continue
                share = stage_share(pipeline, stage)
                slowest = is_bottleneck(pipeline, index)
                if slowest and beside:
                    severity = "low"
                elif slowest:
                    severity = "high" if bound else "medium"
                elif share is None or share >= options["min_share"]:
                    severity = "low"
                else:
                    continue
                label = stage_label(stage)
                what = (
                    "the Python generator"
                    if stage.kind == "generator" or "from_generator" in stage.written_as
                    else "Python"
                )
                title = f"Input stage {label} runs {what}"
                if share is not None:
                    title += f": {share:.0%} of the pipeline's time"
                if slowest:
                    title += ", its slowest stage"
                    if bound and wait is not None:  # bound implies wait
                        title += f" ({waits_for_input(facts, pipeline, wait)})"
                    elif wait is not None:
                        # measured: not a wait on this run, the pace a faster step meets
                        title += (
                            f"; the steps waited {wait.fraction:.0%} for input on this run, "
                            "a faster step (a GPU's) may wait for it"
                        )
                evidence: dict[str, Any] = {
                    "stage": label,
                    "pipeline": pipeline_name(pipeline),
                    "why": _WHY_PARALLEL if _runs_in_parallel(stage) else _WHY_SEQUENTIAL,
                    "slowest_stage": slowest,
                    **_row_numbers(stage_row(pipeline, index)),
                }
                if share is None:
                    evidence["time"] = "not measured" + (
                        f": {pipeline.model_error}" if pipeline.model_error else ""
                    )
                if wait is not None:
                    evidence.update(wait_evidence(wait))
                gain = (
                    wait.fraction * share
                    if wait is not None and share is not None and not beside
                    else None
                )
                findings.append(
                    self.finding(
                        title,
                        severity=severity,
                        evidence=evidence,
                        location=culprit_location(stage),
                        fix="\n".join(
                            pipeline_code.generator(stage)
                            if what != "Python"
                            else pipeline_code.python_function(stage)
                        ),
                        estimated_gain=(
                            stage_gain_text(gain)
                            if gain is not None and gain >= 0.005
                            else "the stage's time moves off the GIL onto every core"
                        ),
                        gain_value=None if gain is None else round(gain, 4),
                    )
                )
        return findings


def _runs_in_parallel(stage: PipelineStage) -> bool:
    """Parallel as run (threads) or as written (num_parallel_calls other than 1)."""
    written = stage.parallelism_written
    return (stage.parallelism or 1) > 1 or (written is not None and written not in (0, 1))


def _row_numbers(row: dict[str, Any]) -> dict[str, Any]:
    return {
        k: row[k]
        for k in (
            "kind",
            "written_as",
            "elements",
            "ms_per_element",
            "threads",
            "share_of_pipeline_time",
        )
    }
