"""distribute.cpu-starved-input: input-bound while every host core is busy."""

from __future__ import annotations

from typing import Any

from gpuwhy.derived.environment import tf_can_use_gpu
from gpuwhy.derived.pipeline import bottleneck, culprit_location
from gpuwhy.derived.steps_input import input_wait
from gpuwhy.facts import Facts, PipelineFacts, PipelineStage
from gpuwhy.finding import Finding
from gpuwhy.fixes import pipeline_code
from gpuwhy.fixes.pipeline_evidence import (
    function_name,
    gain_text,
    pipeline_name,
    stage_row,
    wait_evidence,
)
from gpuwhy.formatting import stage_label
from gpuwhy.rules.base import Rule


class CpuStarvedInput(Rule):
    """The step waits for input while every host core is already busy preparing it.

    ## What it detects
    The step is input-bound (the consumer of a tf.data pipeline waits for input at least
    `min_input_wait` of its time) while the host's CPU cores are at least
    `min_cpu_busy` busy over the run, all processes counted. More `num_parallel_calls`
    or parallel reads cannot help: there is no idle core left for them. The finding
    gives the pipeline's slowest stage, the host's cores, and how much of them the
    program itself used, so that other processes taking the cores show. It stays quiet
    when TensorFlow cannot use a GPU here: the model then computes on the same cores.

    ## Why is this slow?
    One GPU can consume preprocessed images or examples faster than a machine's cores
    can decode and augment them, and adding GPUs makes it worse. Once the cores are
    saturated, the GPU idles for the difference on every step. The remedies are doing
    less work per epoch (cache or preprocess offline, augment on the GPU inside the
    model) or using more CPUs: `tf.data.experimental.service` runs the pipeline on
    separate CPU machines and streams finished batches to the trainer.

    ## Example
    ```python
    ds = (tf.data.TFRecordDataset(files, num_parallel_reads=tf.data.AUTOTUNE)
          .map(decode_and_augment, num_parallel_calls=tf.data.AUTOTUNE)
          .batch(256).prefetch(tf.data.AUTOTUNE))
    model.fit(ds, epochs=90)      # 45% of each step waits; 32 of 32 cores at 100%
    ```

    Use instead:
    ```python
    # on CPU hosts: tf.data.experimental.service.DispatchServer(...) and WorkerServers
    ds = (tf.data.TFRecordDataset(files, num_parallel_reads=tf.data.AUTOTUNE)
          .map(decode_and_augment, num_parallel_calls=tf.data.AUTOTUNE)
          .batch(256)
          .apply(tf.data.experimental.service.distribute(
              processing_mode="parallel_epochs", service="grpc://dispatcher:5050"))
          .prefetch(tf.data.AUTOTUNE))
    model.fit(ds, epochs=90)
    ```

    ## Options
    - `min_cpu_busy`: average host CPU utilisation (0-1) over the run, all cores and
      processes, needed for the finding (0.90).
    - `min_input_wait`: input-wait fraction of step time needed for the finding (0.05).
    """

    id = "distribute.cpu-starved-input"
    measured_thresholds = {"min_cpu_busy": "floor", "min_input_wait": "floor"}
    severity = "high"
    status = "stable"
    needs = ("tfdata",)  # host CPU use is in it; steps give the measured input wait
    options = {"min_cpu_busy": 0.90, "min_input_wait": 0.05}
    question = "How do I scale input?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        tfdata = facts.tfdata
        assert tfdata is not None  # in `needs`: never run without it
        busy = tfdata.host_cpu_busy_fraction
        if busy is None or busy < options["min_cpu_busy"]:
            return []
        if facts.environment is not None and tf_can_use_gpu(facts.environment) is False:
            # The model itself computes on these cores: busy cores say nothing about
            # the input pipeline's share, and the first fix is the GPU (env.no-gpu).
            return []
        waiting = [
            (wait, p)
            for p in tfdata.pipelines
            if (wait := input_wait(facts, p)) is not None
            and wait.fraction >= options["min_input_wait"]
        ]
        if not waiting:
            return []
        wait, pipeline = max(waiting, key=lambda pair: pair[0].fraction)
        cores = tfdata.host_cores or (facts.environment.cpu_count if facts.environment else None)
        index = pipeline.bottleneck
        stage = bottleneck(pipeline)  # None unless index names a stage
        evidence: dict[str, Any] = {
            "host_cpu_busy_fraction": round(busy, 3),
            "host_cores": cores,
            "pipeline": pipeline_name(pipeline),
            **wait_evidence(wait),
        }
        own = tfdata.process_cpu_fraction
        if own is not None:
            evidence["program_cpu_fraction"] = round(own, 3)
            if busy - own >= 0.25:
                evidence["other_processes_cpu_fraction"] = round(busy - own, 3)
        if index is not None and stage is not None:
            row = stage_row(pipeline, index)
            evidence["bottleneck"] = f"stage {stage_label(stage)}"
            evidence["bottleneck_ms_per_element"] = row["ms_per_element"]
            evidence["bottleneck_threads"] = row["threads"]
        core_text = f"all {cores} host cores" if cores else "the host's cores"
        repeating = _workers_repeating_the_input(facts)
        fix = _fix(pipeline, stage, busy - own >= 0.25 if own is not None else False)
        others = evidence.get("other_processes_cpu_fraction")
        by_others = f", {others:.0%} of them by other processes" if others is not None else ""
        title = (
            f"Steps wait for input {wait.fraction:.0%} of the time while {core_text} are "
            f"{busy:.0%} busy{by_others}: more input threads cannot help"
        )
        if repeating:
            # distribute.input-sharding's cause comes first: N workers each doing all of it
            evidence["workers_each_running_the_whole_input"] = repeating
            title += f", and each of the {repeating} workers runs the whole input"
            fix = (
                f"# first: each of the {repeating} workers runs the whole pipeline and keeps "
                f"1/{repeating} of it\n# (distribute.input-sharding): shard it early, then "
                "see whether the cores still saturate\n" + fix
            )
        return [
            self.finding(
                title,
                evidence=evidence,
                location=(culprit_location(stage) if stage is not None else None)
                or pipeline.location,
                fix=fix,
                estimated_gain=gain_text(
                    wait.fraction, "the whole wait, once enough CPUs produce the input"
                ),
                gain_value=round(wait.fraction, 4),
            )
        ]


def _workers_repeating_the_input(facts: Facts) -> int | None:
    """The workers of a cluster that each run the whole input pipeline (DATA sharding
    of real work, or no sharding at all), as distribute.input-sharding judges them."""
    distribute = facts.distribute
    if distribute is None or distribute.workers < 2:
        return None
    for given in distribute.inputs:
        data = given.shard_applied == "DATA" and given.repeated_heavy
        unsharded = given.shard_applied == "OFF" and not given.sharded_in_code
        if data or unsharded:
            return distribute.workers
    return None


def _fix(pipeline: PipelineFacts, stage: PipelineStage | None, others_busy: bool) -> str:
    fn = function_name(stage) if stage is not None and stage.function else "the preprocessing"
    lines = []
    if stage is not None and stage.python:
        lines.append(f"# {fn} calls Python: tf.data service workers cannot run it; TF ops first")
    if others_busy:
        lines.append("# other processes hold much of the CPU: stop them or run elsewhere first")
    lines += [
        "# more CPUs: run the pipeline on CPU machines with tf.data service",
        "#   dispatcher: tf.data.experimental.service.DispatchServer(",
        "#       tf.data.experimental.service.DispatcherConfig(port=5050))",
        "#   each worker: tf.data.experimental.service.WorkerServer(",
        "#       tf.data.experimental.service.WorkerConfig(dispatcher_address='<dispatcher host>:5050'))",
        "# and the pipeline, after its batch, reads from them:",
        *pipeline_code.after_last_call(
            pipeline,
            ".apply(tf.data.experimental.service.distribute(processing_mode="
            "'parallel_epochs', service='grpc://<dispatcher host>:5050'))"
            ".prefetch(tf.data.AUTOTUNE)",
        ),
        f"# less CPU work per epoch: run {fn} once offline and save the result",
        "# (ds.save(path) / tf.data.Dataset.load(path), or TFRecords), cache() what repeats,",
        "# and move augmentation onto the GPU as Keras preprocessing layers in the model",
    ]
    return "\n".join(lines)
